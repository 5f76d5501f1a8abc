//! TEST HOOK (hidden flag `--test-echo-errors=<RPC>,…`): the plugin refuses the named RPCs with
//! INVALID_ARGUMENT and a message that quotes every readable string of the request — secrets,
//! contexts and handle metadata included — the way many real plugins echo their input in
//! errors. The gateway's secret scrubbing is tested against it. Unset, nothing changes.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::BodyExt;
use tonic::codegen::http;
use tower::{Layer, Service};

/// The layer; `rpcs` are method names (`NodePublishVolume`), empty for none.
#[derive(Clone, Debug, Default)]
pub struct Echo {
    pub rpcs: Arc<Vec<String>>,
}

impl<S> Layer<S> for Echo {
    type Service = Echoing<S>;
    fn layer(&self, inner: S) -> Echoing<S> {
        Echoing {
            inner,
            rpcs: self.rpcs.clone(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Echoing<S> {
    inner: S,
    rpcs: Arc<Vec<String>>,
}

impl<S, B, RB> Service<http::Request<B>> for Echoing<S>
where
    S: Service<http::Request<B>, Response = http::Response<RB>>,
    S::Future: Send + 'static,
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    RB: Default + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let rpc = req.uri().path().rsplit('/').next().unwrap_or_default();
        if !self.rpcs.iter().any(|r| r == rpc) {
            return Box::pin(self.inner.call(req));
        }
        Box::pin(async move {
            let body = match req.into_body().collect().await {
                Ok(b) => b.to_bytes(),
                Err(_) => Bytes::new(),
            };
            let quoted = readable_strings(body.get(5..).unwrap_or_default()).join(", ");
            let status = tonic::Status::invalid_argument(format!(
                "refused (test hook): request was [{quoted}]"
            ));
            Ok(status.into_http())
        })
    }
}

/// Runs of at least 3 printable ASCII bytes in a protobuf message: its string fields, roughly.
fn readable_strings(bytes: &[u8]) -> Vec<String> {
    bytes
        .split(|b| !(0x20..0x7f).contains(b))
        .filter(|run| run.len() >= 3)
        .map(|run| String::from_utf8_lossy(run).into_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn readable_strings_are_the_printable_runs() {
        let msg = b"\x0a\x05vol-1\x12\x05token\x1a\x08SECRET-1\x10\x01";
        assert_eq!(super::readable_strings(msg), ["vol-1", "token", "SECRET-1"]);
    }
}
