//! The operations endpoint, a listener of its own beside the front: `/metrics` (or
//! `metrics.path`) for Prometheus, `/healthz` for the Kubernetes livenessprobe (200 `ok` when the upstream answers Probe ready in time, 500 with the reason
//! otherwise — over the gateway's existing upstream connection, never a new dial per probe, and
//! the Probe shared with the health service's callers: `Upstream::probe`), and
//! `/readyz` (200 once the upstream is connected and its dialect known). Both also fail while
//! the durable state store is broken: `/healthz` makes a small write to it, `/readyz` reports
//! its last failure until a write succeeds again (trying one itself) — a store that fails every
//! call must get the gateway restarted, not look healthy. Damaged values in the store are named
//! in `/readyz`'s body but leave it 200: each is one volume's loss (its calls get DATA_LOSS), and
//! an unready node would fail every other volume's calls too. `/livez` asks about the gateway
//! alone: 200 while its front socket is there and accepts a connection, whatever the driver
//! does — the liveness check of the gateway's own container, where `/healthz` belongs on the
//! driver's (a hung driver must restart the driver, never the gateway).
//!
//! Its client is [`health_check`] (`csi-gateway health`). It names the store and the plugin it
//! asks about; the metrics it serves are [`crate::metrics`]'s, which name neither.

pub mod health_check;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::upstream::Upstream;

pub struct Endpoint {
    pub prometheus: PrometheusHandle,
    /// Where Prometheus scrapes: `metrics.path`.
    pub metrics_path: String,
    pub upstream: Arc<Upstream>,
    pub probe_timeout: Duration,
    pub store: Arc<crate::store::Store>,
    /// The front socket, which `/livez` connects to.
    pub socket: std::path::PathBuf,
    /// The calls in flight, for `/calls` and the single-flight gauges.
    pub calls: Arc<crate::call::Shared>,
}

/// Serves until `shutdown` turns true.
pub async fn serve(
    listener: TcpListener,
    endpoint: Arc<Endpoint>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = shutdown.wait_for(|s| *s) => return,
        };
        let Ok((io, _)) = accepted else { continue };
        let endpoint = endpoint.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let endpoint = endpoint.clone();
                async move { Ok::<_, Infallible>(route(&endpoint, req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(io), service)
                .await;
        });
    }
}

async fn route(endpoint: &Endpoint, req: Request<Incoming>) -> Response<Full<Bytes>> {
    match req.uri().path() {
        path if path == endpoint.metrics_path => {
            // The oldest call's age grows while nothing else updates it.
            endpoint.calls.protection.flights.publish_all();
            endpoint.calls.protection.listed.publish_all();
            text(StatusCode::OK, endpoint.prometheus.render())
        }
        "/calls" => calls(endpoint),
        "/healthz" => match healthy(endpoint).await {
            Ok(()) => text(StatusCode::OK, "ok".into()),
            Err(reason) => text(StatusCode::INTERNAL_SERVER_ERROR, reason),
        },
        "/livez" => match alive(&endpoint.socket).await {
            Ok(()) => text(StatusCode::OK, "alive".into()),
            Err(reason) => text(StatusCode::INTERNAL_SERVER_ERROR, reason),
        },
        "/readyz" => match (endpoint.upstream.live(), store_failure(endpoint).await) {
            (Err(s), _) => text(StatusCode::SERVICE_UNAVAILABLE, s.message().to_string()),
            (Ok(_), Some(failure)) => text(StatusCode::SERVICE_UNAVAILABLE, failure),
            (Ok(_), None) => text(StatusCode::OK, ready(&endpoint.store)),
        },
        _ => text(
            StatusCode::NOT_FOUND,
            format!(
                "not found: try {}, /healthz, /readyz, /livez or /calls",
                endpoint.metrics_path
            ),
        ),
    }
}

/// The calls of guarded methods in flight (single-flight ones and the others), oldest first,
/// as JSON: method, volume, age, joined retries, client dialect — never a request's other
/// fields, so no secret.
fn calls(endpoint: &Endpoint) -> Response<Full<Bytes>> {
    let protection = &endpoint.calls.protection;
    let mut running = protection.flights.running();
    running.extend(protection.listed.running());
    running.sort_by_key(|(began, _)| *began);
    let running: Vec<_> = running.into_iter().map(|(_, call)| call).collect();
    let body = serde_json::json!({ "calls": running }).to_string();
    let mut response = text(StatusCode::OK, body);
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

/// The front socket accepts a connection: the file is there and the gateway's accept loop runs.
async fn alive(socket: &std::path::Path) -> Result<(), String> {
    let connect = tokio::net::UnixStream::connect(socket);
    match tokio::time::timeout(LIVE_TIMEOUT, connect).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(format!("front socket {}: {e}", socket.display())),
        Err(_) => Err(format!(
            "front socket {} did not accept within {LIVE_TIMEOUT:?}",
            socket.display()
        )),
    }
}

/// How long `/livez` waits for the front socket to accept.
const LIVE_TIMEOUT: Duration = Duration::from_secs(2);

/// The store's last failure, after one write (within the probe timeout) to see whether it is
/// over: a store that recovered (disk space freed, etcd back) is ready again without waiting
/// for a call to prove it.
async fn store_failure(endpoint: &Endpoint) -> Option<String> {
    endpoint.store.failure()?;
    let _ = tokio::time::timeout(endpoint.probe_timeout, endpoint.store.check()).await;
    endpoint.store.failure()
}

/// How many keys of a damage report `/readyz` names; the rest are counted.
const DAMAGED_NAMED: usize = 10;

/// `ready`, and the damaged values of the store if there are any. They leave the gateway
/// ready: each stands for one volume, whose calls get DATA_LOSS, and taking the node out of
/// service would fail every other volume's calls too.
fn ready(store: &crate::store::Store) -> String {
    let damaged = store.damaged();
    if damaged.is_empty() {
        return "ready".into();
    }
    let named = damaged
        .iter()
        .take(DAMAGED_NAMED)
        .cloned()
        .collect::<Vec<_>>();
    let more = match damaged.len() - named.len() {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    format!(
        "ready; state store {}: {} damaged value(s), refused with DATA_LOSS until written or deleted again: {}{more}",
        store.name(),
        damaged.len(),
        named.join(", ")
    )
}

/// The store commits, and the upstream answers Probe.
async fn healthy(endpoint: &Endpoint) -> Result<(), String> {
    match tokio::time::timeout(endpoint.probe_timeout, endpoint.store.check()).await {
        Err(_) => {
            return Err(format!(
                "state store {} did not commit within {:?}",
                endpoint.store.name(),
                endpoint.probe_timeout
            ))
        }
        Ok(Err(e)) => return Err(e),
        Ok(Ok(())) => {}
    }
    endpoint.upstream.probe(endpoint.probe_timeout).await
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    r
}
