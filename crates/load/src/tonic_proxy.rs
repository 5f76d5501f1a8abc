//! A pass-through proxy built the plain way, the reference point the gateway's performance
//! target names beside socat: an HTTP/2 server whose every request goes through a tonic
//! `Channel` to the upstream. Measured in the same run as socat and the gateway, it shows how a
//! generator ranks the three, rather than taking the expected ratios on trust.

use std::path::{Path, PathBuf};

use hyper::body::Incoming;
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::{UnixListener, UnixStream};
use tonic::body::Body;
use tonic::transport::{Channel, Endpoint, Uri};
use tower::{Service, ServiceExt};

/// Relays every connection accepted on `listen` to `upstream` until the process ends.
pub async fn serve(listen: &Path, upstream: &Path) -> Result<(), String> {
    let channel = connect(upstream.to_path_buf()).await?;
    let _ = std::fs::remove_file(listen);
    let listener = UnixListener::bind(listen)
        .map_err(|e| format!("listening on {}: {e}", listen.display()))?;
    loop {
        let (io, _) = listener
            .accept()
            .await
            .map_err(|e| format!("accepting on {}: {e}", listen.display()))?;
        let channel = channel.clone();
        tokio::spawn(async move {
            let relay = hyper::service::service_fn(move |request: Request<Incoming>| {
                let mut channel = channel.clone();
                async move {
                    channel.ready().await?;
                    channel.call(request.map(Body::new)).await
                }
            });
            // A connection's end or error is the client's business; nothing to report.
            let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(io), relay)
                .await;
        });
    }
}

/// One tonic channel to the UNIX socket `path` (tonic wants a URI; the connector ignores it).
async fn connect(path: PathBuf) -> Result<Channel, String> {
    let shown = path.display().to_string();
    Endpoint::from_static("http://localhost")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let path = path.clone();
            async move { Ok::<_, std::io::Error>(TokioIo::new(UnixStream::connect(path).await?)) }
        }))
        .await
        .map_err(|e| format!("connecting to {shown}: {e}"))
}
