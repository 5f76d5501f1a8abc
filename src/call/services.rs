//! The gateway's own gRPC services beside the CSI ones, so that generic gRPC tools work on the
//! socket with no proto files: server reflection (`grpc.reflection.v1` and `v1alpha`) over the
//! descriptors of exactly the dialects the front serves, and `grpc.health.v1.Health` reflecting
//! the upstream's Probe. The services are tonic's (`tonic-reflection`) or tonic-generated
//! (`tonic-health`'s trait, implemented here), served as streams both ways by the splice
//! (`splice::conn::service`). What a client can make them hold is bounded (`bounded`: the size of a request,
//! one reply owed at a time, the length of an error message), and health shares the plugin's
//! Probe among all its callers (`Upstream::probe`).

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::Stream;
use http::{HeaderValue, Request, Response};
use tonic::body::Body;
use tonic_health::pb::health_server::{Health, HealthServer};
use tonic_health::pb::{
    health_check_response::ServingStatus, HealthCheckRequest, HealthCheckResponse,
};
use tower::ServiceExt;

use crate::dialect::Dialect;
use crate::grpc::{Code, Status, CONTENT_TYPE};
use crate::metrics::Origin;
use crate::tls::Authorization;
use crate::upstream::Upstream;

mod bounded;

/// The methods of the gateway's services, for the metrics' `method_name` label.
const METHODS: [&str; 4] = [
    "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
    "/grpc.health.v1.Health/Check",
    "/grpc.health.v1.Health/Watch",
];

pub use crate::config::tls::GATEWAY_SERVICES as RULE_NAMES;

/// The rule name of the gateway service that serves `path` (`/package.Service/Method`).
pub fn rule_name(path: &str) -> Option<&'static str> {
    let service = path.strip_prefix('/')?.split('/').next()?;
    let name = service.rsplit('.').next()?;
    RULE_NAMES.into_iter().find(|n| *n == name)
}

/// `Ok` when the caller may call the gateway service at `path`: always without an
/// authorization (the UNIX socket), else as the appliance peer's rule says.
pub fn authorize(authorization: Option<&Arc<Authorization>>, path: &str) -> Result<(), Status> {
    match (authorization, rule_name(path)) {
        (Some(a), Some(name)) => a.check_gateway_service(path, name),
        (Some(a), None) => Err(a.denied(path, path)),
        (None, _) => Ok(()),
    }
}

/// `path` as a metrics label: one of the gateway services' methods, or `unknown`.
pub fn method_name(path: &str) -> &'static str {
    METHODS
        .into_iter()
        .find(|m| *m == path)
        .unwrap_or("unknown")
}

/// How often a health Watch asks the upstream again: as long as a Probe's answer is shared, so
/// that all Watches together cost the plugin one Probe per interval.
const WATCH_INTERVAL: Duration = crate::upstream::PROBE_SHARED_FOR;

/// How much of a name the client sent an error message repeats.
const ECHOED_NAME: usize = 200;

/// One of the gateway's services, called as tonic calls its services.
pub type Handler =
    Arc<dyn Fn(Request<Body>) -> BoxFuture<'static, Response<Body>> + Send + Sync + 'static>;

#[derive(Debug, thiserror::Error)]
#[error("server reflection: {0}")]
pub struct ReflectionError(#[from] tonic_reflection::server::Error);

/// The gateway's services by gRPC service name.
pub struct Services {
    by_name: HashMap<&'static str, Handler>,
}

impl Services {
    /// Reflection over `dialects` (the front's) and health for their services, answered from
    /// `upstream`'s Probe within `probe_timeout`.
    pub fn new(
        dialects: &[Dialect],
        upstream: Arc<Upstream>,
        probe_timeout: Duration,
    ) -> Result<Services, ReflectionError> {
        let sets = || {
            let mut b = tonic_reflection::server::Builder::configure()
                .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
                .register_encoded_file_descriptor_set(tonic_reflection::pb::v1::FILE_DESCRIPTOR_SET)
                .register_encoded_file_descriptor_set(
                    tonic_reflection::pb::v1alpha::FILE_DESCRIPTOR_SET,
                );
            for d in dialects {
                b = b.register_encoded_file_descriptor_set(d.file_descriptor_set());
            }
            b
        };
        let services = dialects
            .iter()
            .flat_map(|d| d.methods().iter().map(move |m| (d.package(), m.service)))
            .map(|(package, service)| format!("{package}.{service}"))
            .chain(std::iter::once(String::new()))
            .collect();
        let health = HealthServer::new(UpstreamHealth {
            upstream,
            probe_timeout,
            services,
        });
        let mut by_name: HashMap<&'static str, Handler> = HashMap::new();
        by_name.insert(
            "grpc.reflection.v1.ServerReflection",
            bounded::bounded(handler(sets().build_v1()?)),
        );
        by_name.insert(
            "grpc.reflection.v1alpha.ServerReflection",
            bounded::bounded(handler(sets().build_v1alpha()?)),
        );
        by_name.insert("grpc.health.v1.Health", bounded::bounded(handler(health)));
        Ok(Services { by_name })
    }

    /// The service that answers `path` (`/service/method`), if it is one of the gateway's.
    pub fn find(&self, path: &str) -> Option<&Handler> {
        let service = path.strip_prefix('/')?.split('/').next()?;
        self.by_name.get(service)
    }
}

/// Whose failure a gateway service's error is: a bad service name or request is the client's.
pub fn origin(code: Code) -> Origin {
    match code {
        Code::NotFound | Code::InvalidArgument | Code::Unimplemented | Code::Cancelled => {
            Origin::Client
        }
        _ => Origin::Gateway,
    }
}

fn handler<S>(service: S) -> Handler
where
    S: tower::Service<Request<Body>, Response = Response<Body>, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
{
    Arc::new(move |request| {
        let service = service.clone();
        Box::pin(async move {
            match service.oneshot(request).await {
                Ok(response) => response,
                Err(never) => match never {},
            }
        })
    })
}

/// The request of a call to `path` on the splice, whose `body` the splice feeds from the
/// client's DATA frames (`splice::conn::service`).
pub fn request(path: &str, body: Body) -> Result<Request<Body>, Status> {
    let mut request = Request::new(body);
    *request.method_mut() = http::Method::POST;
    *request.uri_mut() = path
        .parse()
        .map_err(|_| Status::invalid_argument(format!("bad gRPC path {path}")))?;
    let headers = request.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static(CONTENT_TYPE),
    );
    headers.insert("te", HeaderValue::from_static("trailers"));
    Ok(request)
}

/// `grpc.health.v1.Health` for the service names the front serves (each CSI service of each
/// dialect, and "" for the whole gateway): SERVING when the upstream answers Probe ready.
struct UpstreamHealth {
    upstream: Arc<Upstream>,
    probe_timeout: Duration,
    services: HashSet<String>,
}

impl UpstreamHealth {
    async fn status(&self, service: &str) -> ServingStatus {
        if !self.services.contains(service) {
            return ServingStatus::ServiceUnknown;
        }
        match self.upstream.probe(self.probe_timeout).await {
            Ok(()) => ServingStatus::Serving,
            Err(reason) => {
                tracing::debug!(%reason, "health: not serving");
                ServingStatus::NotServing
            }
        }
    }
}

fn reply(status: ServingStatus) -> HealthCheckResponse {
    HealthCheckResponse {
        status: status as i32,
    }
}

type WatchStream = Pin<Box<dyn Stream<Item = Result<HealthCheckResponse, tonic::Status>> + Send>>;

#[tonic::async_trait]
impl Health for UpstreamHealth {
    async fn check(
        &self,
        request: tonic::Request<HealthCheckRequest>,
    ) -> Result<tonic::Response<HealthCheckResponse>, tonic::Status> {
        let service = &request.get_ref().service;
        match self.status(service).await {
            ServingStatus::ServiceUnknown => Err(tonic::Status::not_found(format!(
                "unknown service {:?}: this gateway serves {}",
                bounded::cut(service, ECHOED_NAME),
                served(&self.services)
            ))),
            s => Ok(tonic::Response::new(reply(s))),
        }
    }

    type WatchStream = WatchStream;

    /// The current status at once, then each change, probing every `WATCH_INTERVAL`.
    async fn watch(
        &self,
        request: tonic::Request<HealthCheckRequest>,
    ) -> Result<tonic::Response<WatchStream>, tonic::Status> {
        let this = Arc::new(UpstreamHealth {
            upstream: self.upstream.clone(),
            probe_timeout: self.probe_timeout,
            services: self.services.clone(),
        });
        let service: Arc<str> = request.into_inner().service.into();
        let stream = futures_util::stream::unfold(None, move |last| {
            let (this, service) = (this.clone(), service.clone());
            async move {
                let mut first = last.is_none();
                loop {
                    if !first {
                        tokio::time::sleep(WATCH_INTERVAL).await;
                    }
                    first = false;
                    let now = this.status(&service).await;
                    if Some(now) != last {
                        return Some((Ok(reply(now)), Some(now)));
                    }
                }
            }
        });
        Ok(tonic::Response::new(Box::pin(stream)))
    }
}

fn served(services: &HashSet<String>) -> String {
    let mut names: Vec<&str> = services
        .iter()
        .filter(|s| !s.is_empty())
        .map(String::as_str)
        .collect();
    names.sort();
    format!("\"\" and {}", names.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every method of the gateway's services has the rule name `[[appliance.peers]]` uses,
    /// so none escapes the peer rules.
    #[test]
    fn every_gateway_method_has_a_rule_name() {
        let names: Vec<_> = METHODS.iter().map(|m| rule_name(m)).collect();
        assert_eq!(
            names,
            [
                Some("ServerReflection"),
                Some("ServerReflection"),
                Some("Health"),
                Some("Health")
            ]
        );
        assert_eq!(rule_name("/csi.v1.Node/NodeGetInfo"), None);
        assert_eq!(rule_name("/grpc.health.v1.Healthy/Check"), None);
    }
}
