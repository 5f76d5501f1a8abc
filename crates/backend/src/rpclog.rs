//! One log line per RPC with its full gRPC method, result code and latency (the shape
//! csi-driver-host-path's `logGRPC` uses); probes log at debug so a CO's liveness polling does
//! not drown the log. Bodies are never logged: they may carry secrets. The line names the
//! request's `:authority` (`-` when it had none, or one that is not a URI authority, such as
//! the socket path some clients send), so a test can see what a gateway in front sent.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use tonic::codegen::http;
use tower::{Layer, Service};

/// The tower layer; add it with `Server::builder().layer(RpcLog)`.
#[derive(Clone, Copy, Debug, Default)]
pub struct RpcLog;

impl<S> Layer<S> for RpcLog {
    type Service = Logged<S>;
    fn layer(&self, inner: S) -> Logged<S> {
        Logged { inner }
    }
}

#[derive(Clone, Debug)]
pub struct Logged<S> {
    inner: S,
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
        let fut = self.inner.call(req);
        Box::pin(async move {
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
