//! One log line per RPC with its full gRPC method, result code and latency (the shape
//! csi-driver-host-path's `logGRPC` uses); probes log at debug so a CO's liveness polling does
//! not drown the log. Bodies are never logged: they may carry secrets. The line names the
//! request's `:authority` (`-` when it had none, or one that is not a URI authority, such as
//! the socket path some clients send), so a test can see what a gateway in front sent.
//!
//! TEST HOOK: an RPC given a delay (`--delay NodeStageVolume=5s`) waits that long before it is
//! served, as a slow driver does, and logs `rpc begin` with `in_flight`, the calls of its method
//! running at once (itself included), so that a test can count the calls that reach the plugin
//! and the most at once.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tonic::codegen::http;
use tower::{Layer, Service};

/// The tower layer; add it with `Server::builder().layer(RpcLog::default())`.
#[derive(Clone, Debug, Default)]
pub struct RpcLog {
    /// By RPC name (`CreateVolume`): how long it waits, and how many of it run now.
    delays: Arc<HashMap<String, (Duration, AtomicUsize)>>,
}

impl RpcLog {
    /// With `delays` by RPC name.
    pub fn delayed(delays: &[(String, Duration)]) -> RpcLog {
        let delays = delays
            .iter()
            .map(|(m, d)| (m.clone(), (*d, AtomicUsize::new(0))))
            .collect();
        RpcLog {
            delays: Arc::new(delays),
        }
    }
}

impl<S> Layer<S> for RpcLog {
    type Service = Logged<S>;
    fn layer(&self, inner: S) -> Logged<S> {
        Logged {
            inner,
            delays: self.delays.clone(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Logged<S> {
    inner: S,
    delays: Arc<HashMap<String, (Duration, AtomicUsize)>>,
}

/// A delayed RPC running: counted in its method's `in_flight` until it ends or is cancelled.
struct Running {
    delays: Arc<HashMap<String, (Duration, AtomicUsize)>>,
    name: String,
}

impl Running {
    /// The delay of `method` (a gRPC path), counting it in; `None` for a method without one.
    fn begin(
        delays: &Arc<HashMap<String, (Duration, AtomicUsize)>>,
        method: &str,
    ) -> Option<(Running, Duration)> {
        let name = method.rsplit('/').next().unwrap_or_default();
        let (delay, running) = delays.get(name)?;
        let in_flight = running.fetch_add(1, Ordering::AcqRel) + 1;
        tracing::info!(%method, in_flight, "rpc begin");
        let running = Running {
            delays: delays.clone(),
            name: name.to_string(),
        };
        Some((running, *delay))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some((_, n)) = self.delays.get(&self.name) {
            n.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl<S, B, RB> Service<http::Request<B>> for Logged<S>
where
    S: Service<http::Request<B>, Response = http::Response<RB>>,
    S::Future: Send + 'static,
    S::Error: std::fmt::Display,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let method = req.uri().path().to_string();
        let authority = req
            .uri()
            .authority()
            .map_or_else(|| "-".to_string(), |a| a.to_string());
        let start = Instant::now();
        let delayed = Running::begin(&self.delays, &method);
        let fut = self.inner.call(req);
        Box::pin(async move {
            let _running = match delayed {
                Some((running, delay)) => {
                    tokio::time::sleep(delay).await;
                    Some(running)
                }
                None => None,
            };
            let res = fut.await;
            let ms = start.elapsed().as_secs_f64() * 1000.0;
            match &res {
                // Every RPC here is unary: a failure is answered trailers-only, so its
                // grpc-status is in the headers; a success carries it in the trailers.
                Ok(r) => {
                    let code = r
                        .headers()
                        .get("grpc-status")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.parse::<i32>().ok())
                        .unwrap_or(0);
                    let code = tonic::Code::from_i32(code);
                    if method.ends_with("Probe") || method.ends_with("ProbeNode") {
                        tracing::debug!(%method, ?code, ms, "rpc");
                    } else {
                        tracing::info!(%method, ?code, %authority, ms, "rpc");
                    }
                }
                Err(e) => tracing::warn!(%method, error = %e, ms, "rpc transport failure"),
            }
            res
        })
    }
}
