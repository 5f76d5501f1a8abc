//! The client side of `/healthz`: `csi-gateway health` asks a gateway's operations endpoint
//! whether it is healthy, so the binary is its own container health check (a `FROM scratch`
//! image has no shell and no curl).

use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode, Uri};
use http_body_util::{BodyExt as _, Empty};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

#[derive(Debug, thiserror::Error)]
pub enum HealthError {
    #[error("{0:?} is not an http:// URL with a host and port")]
    Url(String),
    #[error("no answer from {url} within {timeout:?}")]
    Timeout { url: String, timeout: Duration },
    // `error`, not `source`: the message already says it, and anyhow's `{:#}` would repeat it.
    #[error("{url}: {error}")]
    Connect { url: String, error: std::io::Error },
    #[error("{url}: {error}")]
    Http { url: String, error: hyper::Error },
    #[error("{url} answered {status}: {body}")]
    Unhealthy {
        url: String,
        status: StatusCode,
        body: String,
    },
}

/// GETs `url` and returns the body of a 2xx answer; anything else is an error naming why.
pub async fn check(url: &str, timeout: Duration) -> Result<String, HealthError> {
    let uri: Uri = url.parse().map_err(|_| HealthError::Url(url.into()))?;
    let addr = match (uri.scheme_str(), uri.host(), uri.port_u16()) {
        (Some("http"), Some(host), Some(port)) => format!("{host}:{port}"),
        _ => return Err(HealthError::Url(url.into())),
    };
    tokio::time::timeout(timeout, get(url, &addr, uri))
        .await
        .map_err(|_| HealthError::Timeout {
            url: url.into(),
            timeout,
        })?
}

async fn get(url: &str, addr: &str, uri: Uri) -> Result<String, HealthError> {
    let http = |error| HealthError::Http {
        url: url.into(),
        error,
    };
    let tcp = TcpStream::connect(addr)
        .await
        .map_err(|error| HealthError::Connect {
            url: url.into(),
            error,
        })?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .map_err(http)?;
    tokio::spawn(conn);
    let host = uri.authority().map(|a| a.to_string()).unwrap_or_default();
    // Origin form (`/healthz`), as a client speaking to the server directly sends it.
    let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
    let request = Request::get(path)
        .header(http::header::HOST, host)
        .body(Empty::<Bytes>::new())
        .expect("a GET with a parsed URI is a valid request");
    let response = sender.send_request(request).await.map_err(http)?;
    let status = response.status();
    let body = response.into_body().collect().await.map_err(http)?;
    let body = String::from_utf8_lossy(&body.to_bytes()).trim().to_string();
    if status.is_success() {
        Ok(body)
    } else {
        Err(HealthError::Unhealthy {
            url: url.into(),
            status,
            body,
        })
    }
}
