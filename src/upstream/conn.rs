//! One HTTP/2 connection to the plugin. Calls go straight onto the `h2` connection: no request
//! queue or buffer task sits between a caller and the socket.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use h2::client::{ResponseFuture, SendRequest};
use h2::SendStream;
use http::{HeaderValue, Method, Request, Uri};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::UnixStream;
use tokio::sync::watch;

use crate::endpoint::Endpoint;
use crate::grpc::{body, frame, status, Code, Status, CONTENT_TYPE};
use crate::tls::{Dialer, Keepalive};
use crate::translate::{CallError, UnaryFuture};

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("cannot connect to {endpoint}: {source}")]
    Io {
        endpoint: Endpoint,
        source: std::io::Error,
    },
    #[error("connecting to {endpoint} timed out after {after:?}")]
    Timeout { endpoint: Endpoint, after: Duration },
    #[error("HTTP/2 handshake with {endpoint} failed: {source}")]
    Handshake {
        endpoint: Endpoint,
        source: h2::Error,
    },
    #[error("TCP upstream {0} needs [upstream.tls]: plaintext TCP is refused")]
    Unsupported(Endpoint),
    #[error("cannot connect to {endpoint}: {reason}")]
    Tls { endpoint: Endpoint, reason: String },
}

/// The future that performs a connection's I/O; it ends when the connection does.
pub type Driver = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// A live HTTP/2 connection; cheap to clone.
#[derive(Clone)]
pub struct Connection {
    send: SendRequest<Bytes>,
    endpoint: Endpoint,
    /// How the connection was made over TCP, so the front can make more like it.
    tls: Option<Arc<Dialer>>,
    closed: watch::Receiver<bool>,
}

impl Connection {
    /// Dials `endpoint` and spawns the task that drives the connection.
    pub async fn connect(
        endpoint: &Endpoint,
        timeout: Duration,
    ) -> Result<Connection, ConnectError> {
        let (conn, driver) = Connection::connect_undriven(endpoint, timeout).await?;
        tokio::spawn(driver);
        Ok(conn)
    }

    /// Dials `endpoint` and returns the connection with the future that drives its I/O, for a
    /// caller that polls it in its own task (the front does, so a call crosses no tasks).
    pub async fn connect_undriven(
        endpoint: &Endpoint,
        timeout: Duration,
    ) -> Result<(Connection, Driver), ConnectError> {
        Connection::dial_undriven(endpoint, None, timeout).await
    }

    /// Like [`Connection::connect`], over TLS with `tls` when the endpoint is TCP.
    pub async fn dial(
        endpoint: &Endpoint,
        tls: Option<&Arc<Dialer>>,
        timeout: Duration,
    ) -> Result<Connection, ConnectError> {
        let (conn, driver) = Connection::dial_undriven(endpoint, tls, timeout).await?;
        tokio::spawn(driver);
        Ok(conn)
    }

    /// Dials a UNIX socket, or a TCP endpoint over mutual TLS (never plaintext TCP).
    pub async fn dial_undriven(
        endpoint: &Endpoint,
        tls: Option<&Arc<Dialer>>,
        timeout: Duration,
    ) -> Result<(Connection, Driver), ConnectError> {
        match (endpoint, tls) {
            (Endpoint::Unix(path), _) => {
                let io = tokio::time::timeout(timeout, UnixStream::connect(path))
                    .await
                    .map_err(|_| ConnectError::Timeout {
                        endpoint: endpoint.clone(),
                        after: timeout,
                    })?
                    .map_err(|source| ConnectError::Io {
                        endpoint: endpoint.clone(),
                        source,
                    })?;
                handshake(io, endpoint, None, None, timeout).await
            }
            (Endpoint::Tcp(addr), Some(dialer)) => {
                let io = dialer
                    .dial(addr, timeout)
                    .await
                    .map_err(|reason| ConnectError::Tls {
                        endpoint: endpoint.clone(),
                        reason,
                    })?;
                let keepalive = Some(dialer.keepalive());
                handshake(io, endpoint, Some(dialer.clone()), keepalive, timeout).await
            }
            (Endpoint::Tcp(_), None) => Err(ConnectError::Unsupported(endpoint.clone())),
        }
    }

    /// True once the connection has ended.
    pub fn is_closed(&self) -> bool {
        *self.closed.borrow()
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// How a TCP endpoint is dialed (mutual TLS); `None` for a UNIX socket.
    pub fn tls(&self) -> Option<&Arc<Dialer>> {
        self.tls.as_ref()
    }

    /// Resolves when the connection has ended.
    pub async fn closed(&self) {
        let mut closed = self.closed.clone();
        let _ = closed.wait_for(|c| *c).await;
    }

    /// Opens a stream for `request` (whose URI holds only the path) and returns its halves.
    pub async fn open(
        &self,
        mut request: Request<()>,
        end_of_stream: bool,
    ) -> Result<(ResponseFuture, SendStream<Bytes>), Status> {
        *request.uri_mut() = upstream_uri(request.uri().path())?;
        let mut send = self
            .send
            .clone()
            .ready()
            .await
            .map_err(|e| self.unavailable(&e))?;
        send.send_request(request, end_of_stream)
            .map_err(|e| self.unavailable(&e))
    }

    /// One unary call: `message` is the protobuf request, the result the protobuf reply. The
    /// plugin's reply is its own ([`CallError::upstream`]): the `grpc-status` it answered,
    /// or a reply that is not a gRPC answer (not HTTP 200, no status, a malformed message).
    /// Failing to carry the call (the connection, a stream reset) is the gateway's.
    pub async fn unary(&self, path: &str, message: &[u8]) -> Result<Bytes, CallError> {
        let request = grpc_request(path)?;
        let (response, mut stream) = self.open(request, false).await?;
        stream
            .send_data(frame::encode(message), true)
            .map_err(|e| self.unavailable(&e))?;
        let response = response.await.map_err(|e| self.broken(&e))?;
        let (parts, mut body) = response.into_parts();
        if let Some(s) = status::from_headers(&parts.headers).filter(|s| s.code() != Code::Ok) {
            return Err(CallError::upstream(s)); // trailers-only error
        }
        if parts.status != http::StatusCode::OK {
            return Err(CallError::upstream(Status::unknown(format!(
                "upstream {} answered HTTP {}",
                self.endpoint, parts.status
            ))));
        }
        let data = body::read_to_end(&mut body).await?;
        let trailers = body.trailers().await.map_err(|e| self.broken(&e))?;
        let status = trailers
            .as_ref()
            .and_then(status::from_headers)
            .unwrap_or_else(status::missing_status);
        if status.code() != Code::Ok {
            return Err(CallError::upstream(status));
        }
        frame::decode_unary(&data)
            .map(Bytes::copy_from_slice)
            .map_err(CallError::upstream)
    }

    fn unavailable(&self, e: &h2::Error) -> Status {
        if not_http2(e) {
            return self.not_http2();
        }
        Status::unavailable(format!("upstream {} is unavailable: {e}", self.endpoint))
    }

    fn broken(&self, e: &h2::Error) -> Status {
        if not_http2(e) {
            return self.not_http2();
        }
        let s = body::h2_status(e, "waiting for the upstream reply");
        Status::new(
            s.code(),
            format!("upstream {}: {}", self.endpoint, s.message()),
        )
    }
}

impl Connection {
    fn not_http2(&self) -> Status {
        Status::unavailable(format!(
            "upstream {}: not an HTTP/2 (gRPC) server: its first reply does not parse as \
             HTTP/2 frames (an HTTP/1 server answers \"HTTP/1.1 ...\")",
            self.endpoint
        ))
    }
}

/// An HTTP/1 server answers the HTTP/2 preface with `HTTP/1.1 400 …`, whose first bytes read
/// as the header of a ~4.7 MB frame: h2 ends the connection itself with FRAME_SIZE_ERROR
/// before any frame of the peer's was understood.
fn not_http2(e: &h2::Error) -> bool {
    e.reason() == Some(h2::Reason::FRAME_SIZE_ERROR) && e.is_go_away() && !e.is_remote()
}

/// h2's budget for the framing overhead of the plugin's small DATA frames not yet read (each
/// under 256 bytes counts 256 less its length), past which h2 ends the connection itself
/// (GOAWAY ENHANCE_YOUR_CALM, `too_many_data_frames`). Its default follows the connection
/// window: 32 KiB at HTTP/2's 64 KiB, some 150 unary replies (a small message, then trailers)
/// that arrived together before their calls read them — 400 translated calls at once on one
/// client connection once lost the upstream connection, and all their calls with it. Room here
/// for 16,384 such replies at once: the plugin is the gateway's own upstream, and the data it
/// may send is still bounded by the window.
const DATA_FRAME_BUDGET: usize = 16 * 1024 * 256;

/// The HTTP/2 client handshake on `io`, and the driver future (with keepalive pings if asked).
async fn handshake<T>(
    io: T,
    endpoint: &Endpoint,
    tls: Option<Arc<Dialer>>,
    keepalive: Option<Keepalive>,
    timeout: Duration,
) -> Result<(Connection, Driver), ConnectError>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let handshake = h2::client::Builder::new()
        .initial_window_size(1 << 20)
        .data_frame_budget(DATA_FRAME_BUDGET)
        .handshake(io);
    let (send, mut connection) = tokio::time::timeout(timeout, handshake)
        .await
        .map_err(|_| ConnectError::Timeout {
            endpoint: endpoint.clone(),
            after: timeout,
        })?
        .map_err(|source| ConnectError::Handshake {
            endpoint: endpoint.clone(),
            source,
        })?;
    let pings = keepalive.and_then(|k| Some((connection.ping_pong()?, k)));
    let (closed_tx, closed) = watch::channel(false);
    let ep = endpoint.clone();
    let driver = Box::pin(async move {
        let ended = match pings {
            None => connection.await.err().map(|e| e.to_string()),
            Some((pings, k)) => tokio::select! {
                r = &mut connection => r.err().map(|e| e.to_string()),
                why = keep_alive(pings, k) => {
                    tracing::warn!(upstream = %ep, reason = %why, "upstream peer unresponsive; dropping the connection");
                    Some(why)
                }
            },
        };
        if let Some(e) = ended {
            tracing::debug!(upstream = %ep, error = %e, "upstream connection ended");
        }
        let _ = closed_tx.send(true);
    });
    Ok((
        Connection {
            send,
            endpoint: endpoint.clone(),
            tls,
            closed,
        },
        driver,
    ))
}

/// Pings every `k.interval`; returns why once a ping is not answered within `k.timeout`.
async fn keep_alive(mut pings: h2::PingPong, k: Keepalive) -> String {
    loop {
        tokio::time::sleep(k.interval).await;
        match tokio::time::timeout(k.timeout, pings.ping(h2::Ping::opaque())).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return format!("keepalive ping failed: {e}"),
            Err(_) => return format!("no keepalive ping reply within {:?}", k.timeout),
        }
    }
}

/// A bare gRPC POST for `path`.
pub fn grpc_request(path: &str) -> Result<Request<()>, Status> {
    let mut request = Request::new(());
    *request.method_mut() = Method::POST;
    *request.uri_mut() = path
        .parse::<Uri>()
        .map_err(|_| Status::internal(format!("bad gRPC path {path:?}")))?;
    let headers = request.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static(CONTENT_TYPE),
    );
    headers.insert(http::header::TE, HeaderValue::from_static("trailers"));
    Ok(request)
}

/// h2 wants an absolute URI on the client side; the authority is nominal on a socket.
fn upstream_uri(path: &str) -> Result<Uri, Status> {
    Uri::builder()
        .scheme("http")
        .authority("localhost")
        .path_and_query(path)
        .build()
        .map_err(|_| Status::internal(format!("bad gRPC path {path:?}")))
}

impl crate::translate::RawUpstream for Connection {
    fn unary<'a>(&'a self, path: &'static str, body: Vec<u8>) -> UnaryFuture<'a> {
        Box::pin(async move {
            Connection::unary(self, path, &body)
                .await
                .map(|b| b.to_vec())
        })
    }
}
