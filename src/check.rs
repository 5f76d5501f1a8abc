//! `csi-gateway check`: what is this endpoint? Detects the dialect of any CSI endpoint and reads
//! its identity, capabilities and node info through the hub, so the report reads the same
//! whatever the plugin's generation.

use std::fmt::Write as _;
use std::time::Duration;

use crate::endpoint::Endpoint;
use crate::grpc::Status;
use crate::hub::{v1, Request, Response};
use crate::translate;
use crate::upstream::conn::ConnectError;
use crate::upstream::{detect, Connection};

/// Connects to `endpoint` within `timeout`, waiting for a socket that is not there yet (or not
/// yet accepting) as a gateway starting up waits for its plugin: a check run right after a
/// start reports the endpoint, not the race.
async fn connect_within(endpoint: &Endpoint, timeout: Duration) -> Result<Connection, Status> {
    use std::io::ErrorKind::{ConnectionRefused, NotFound};
    let until = tokio::time::Instant::now() + timeout;
    loop {
        let left = until.saturating_duration_since(tokio::time::Instant::now());
        match Connection::connect(endpoint, left).await {
            Ok(conn) => return Ok(conn),
            Err(ConnectError::Io { source, .. })
                if matches!(source.kind(), NotFound | ConnectionRefused) && left > RETRY_EVERY =>
            {
                tokio::time::sleep(RETRY_EVERY).await
            }
            Err(e) => return Err(Status::unavailable(e.to_string())),
        }
    }
}

/// How often `check` tries again an endpoint that is not there yet.
const RETRY_EVERY: Duration = Duration::from_millis(50);

/// Connects to `endpoint`, detects its dialect (or uses `dialect`) and returns a report.
pub async fn check(
    endpoint: &Endpoint,
    dialect: Option<crate::dialect::Dialect>,
    timeout: Duration,
) -> Result<String, Status> {
    let conn = connect_within(endpoint, timeout).await?;
    let detected = tokio::time::timeout(timeout, detect::detect(&conn, dialect))
        .await
        .map_err(|_| {
            Status::deadline_exceeded(format!(
                "detection on {endpoint} timed out after {timeout:?}"
            ))
        })??;
    let session = detected.session();
    let call = |req: Request| {
        let (session, conn) = (&session, &conn);
        async move {
            let call = translate::call_upstream(session, conn, None, req);
            tokio::time::timeout(timeout, call)
                .await
                .map(|r| r.map_err(Status::from))
        }
    };
    let mut out = String::new();
    let dialect_name = if detected.v0_2 {
        "v0.2 (csi.v0 without NodeGetInfo)".to_string()
    } else {
        detected.dialect.to_string()
    };
    let _ = writeln!(out, "{:<13}{endpoint}", "endpoint:");
    let _ = writeln!(out, "{:<13}{dialect_name}", "dialect:");
    if let Some(v) = detected.version {
        let _ = writeln!(
            out,
            "{:<13}{}.{}.{} (negotiated)",
            "version:", v.major, v.minor, v.patch
        );
    }
    line(
        &mut out,
        "plugin",
        call(Request::GetPluginInfo(Default::default())).await,
        |r| match r {
            Response::GetPluginInfo(i) => {
                format!("{} {} {:?}", i.name, i.vendor_version, i.manifest)
            }
            _ => String::new(),
        },
    );
    line(
        &mut out,
        "probe",
        call(Request::Probe(Default::default())).await,
        |r| match r {
            Response::Probe(p) => {
                if p.ready.unwrap_or(true) {
                    "ready".into()
                } else {
                    "not ready".into()
                }
            }
            _ => String::new(),
        },
    );
    line(
        &mut out,
        "plugin caps",
        call(Request::GetPluginCapabilities(Default::default())).await,
        |r| match r {
            Response::GetPluginCapabilities(c) => {
                names(c.capabilities.iter().map(plugin_capability))
            }
            _ => String::new(),
        },
    );
    line(
        &mut out,
        "controller",
        call(Request::ControllerGetCapabilities(Default::default())).await,
        |r| match r {
            Response::ControllerGetCapabilities(c) => {
                names(c.capabilities.iter().filter_map(|c| {
                    let v1::controller_service_capability::Type::Rpc(rpc) = c.r#type.as_ref()?;
                    Some(rpc_name::<v1::controller_service_capability::rpc::Type>(
                        rpc.r#type,
                    ))
                }))
            }
            _ => String::new(),
        },
    );
    line(
        &mut out,
        "node",
        call(Request::NodeGetCapabilities(Default::default())).await,
        |r| match r {
            Response::NodeGetCapabilities(c) => names(c.capabilities.iter().filter_map(|c| {
                let v1::node_service_capability::Type::Rpc(rpc) = c.r#type.as_ref()?;
                Some(rpc_name::<v1::node_service_capability::rpc::Type>(
                    rpc.r#type,
                ))
            })),
            _ => String::new(),
        },
    );
    line(
        &mut out,
        "node info",
        call(Request::NodeGetInfo(Default::default())).await,
        |r| match r {
            Response::NodeGetInfo(n) => format!(
                "id={:?} max_volumes={} topology={:?}",
                n.node_id,
                n.max_volumes_per_node,
                n.accessible_topology.as_ref().map(|t| &t.segments)
            ),
            _ => String::new(),
        },
    );
    Ok(out)
}

type Outcome = Result<Result<Response, Status>, tokio::time::error::Elapsed>;

fn line(out: &mut String, label: &str, outcome: Outcome, show: impl Fn(&Response) -> String) {
    let text = match outcome {
        Ok(Ok(r)) => show(&r),
        Ok(Err(s)) => format!("{:?}: {}", s.code(), s.message()),
        Err(_) => "timed out".into(),
    };
    let _ = writeln!(out, "{:<13}{text}", format!("{label}:"));
}

fn names(items: impl Iterator<Item = String>) -> String {
    let v: Vec<String> = items.collect();
    if v.is_empty() {
        "(none)".into()
    } else {
        v.join(", ")
    }
}

fn rpc_name<E: TryFrom<i32> + std::fmt::Debug>(n: i32) -> String {
    E::try_from(n)
        .map(|e| format!("{e:?}"))
        .unwrap_or_else(|_| n.to_string())
}

fn plugin_capability(c: &v1::PluginCapability) -> String {
    use v1::plugin_capability::Type;
    match &c.r#type {
        Some(Type::Service(s)) => rpc_name::<v1::plugin_capability::service::Type>(s.r#type),
        Some(Type::VolumeExpansion(e)) => format!(
            "VolumeExpansion::{}",
            rpc_name::<v1::plugin_capability::volume_expansion::Type>(e.r#type)
        ),
        None => "?".into(),
    }
}
