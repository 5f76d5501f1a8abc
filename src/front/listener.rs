//! Accepts connections and serves each one's streams: spliced (`crate::splice`) when it can be,
//! otherwise terminated here. A terminated front connection gets its own upstream connection,
//! and both connections' I/O and all the calls between them run inside one task: a call is
//! never handed to another task or thread inside the gateway (no per-call task, no
//! shared-connection task to wake). When the private upstream connection cannot be had, calls
//! fall back to the supervisor's shared one. On shutdown every connection is told to go away and
//! gets `grace` to finish its calls.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::endpoint::Endpoint;
use crate::splice::{Io, Splice};
use crate::tls::{Authorization, Keepalive};
use crate::upstream::conn::{Connection, Driver};
use crate::upstream::Live;
use tokio_rustls::client::TlsStream;

use super::held::ConnectionHeld;
use super::terminated::handle;
use super::watched::Watched;
use super::Shared;

/// Serves until `shutdown` turns true, then drains for at most `grace`. With `splice`, a
/// connection is spliced onto an upstream connection of its own whenever the upstream is a
/// live UNIX socket (see `crate::splice`), and terminated otherwise.
pub async fn serve(
    listener: UnixListener,
    shared: Arc<Shared>,
    shutdown: watch::Receiver<bool>,
    grace: Duration,
    splice: bool,
) {
    let mut connections = JoinSet::new();
    let mut slots = Slots::default();
    let mut stop = shutdown.clone();
    let max = shared.limits.max_connections;
    let lingering = Arc::new(AtomicUsize::new(0));
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((io, _)) if slots.len() >= max && !slots.make_room() => {
                    tracing::warn!(limit = max, "too many client connections, each with a request finished; one refused");
                    refuse(io, &lingering);
                }
                Ok((io, _)) => {
                    let served = Served::default();
                    let task = if splice {
                        connections.spawn(splice_or_serve(io, shared.clone(), shutdown.clone(), served.clone()))
                    } else {
                        connection_counted("terminated", "unix", upstream_kind(&shared));
                        connections.spawn(serve_connection_served(io, shared.clone(), shutdown.clone(), None, served.clone()))
                    };
                    slots.add(task, served);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            _ = stopped(&mut stop) => break,
            Some(ended) = connections.join_next_with_id(), if !connections.is_empty() => {
                slots.remove(ended.map_or_else(|e| e.id(), |(id, ())| id));
            }
        }
    }
    drop(listener);
    let in_flight = connections.len();
    let drained = tokio::time::timeout(grace, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            connections = connections.len(),
            ?grace,
            "grace period over; abandoning unfinished calls"
        );
        connections.abort_all();
    } else if in_flight > 0 {
        tracing::info!(connections = in_flight, "drained");
    }
}

/// Whether the client sent a whole request on its connection (the splice marks it as the
/// request ends, so a first call in flight counts however long it takes; the terminated path
/// once a call completes): set by the connection, read by the listener when every slot is
/// taken.
#[derive(Clone, Default)]
pub struct Served(Arc<std::sync::atomic::AtomicBool>);

impl Served {
    pub fn mark(&self) {
        if !self.0.load(Ordering::Relaxed) {
            self.0.store(true, Ordering::Relaxed);
        }
    }

    fn yes(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// The connections being served, oldest first. Every slot taken, the oldest connection on which
/// the client never finished a request gives way to a new one: a flood of connections that stay
/// silent (or never finish a request) cannot lock every other client out, while a connection
/// with a request finished keeps its slot. Only with every slot held by such is a new connection
/// refused.
#[derive(Default)]
pub(crate) struct Slots(
    std::collections::VecDeque<(tokio::task::Id, Served, tokio::task::AbortHandle)>,
);

impl Slots {
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    pub(crate) fn add(&mut self, task: tokio::task::AbortHandle, served: Served) {
        self.0.push_back((task.id(), served, task));
    }

    pub(crate) fn remove(&mut self, id: tokio::task::Id) {
        if let Some(at) = self.0.iter().position(|(slot, ..)| *slot == id) {
            self.0.remove(at);
        }
    }

    /// Closes the oldest connection without a finished request; `false` if there is none.
    pub(crate) fn make_room(&mut self) -> bool {
        let Some(at) = self.0.iter().position(|(_, served, _)| !served.yes()) else {
            return false;
        };
        if let Some((_, _, task)) = self.0.remove(at) {
            task.abort();
        }
        tracing::debug!("every connection slot taken: the oldest connection without a finished request closed for a new one");
        true
    }
}

/// Refused connections that wait for their client to close, at most, at once; past that a
/// refused connection is closed at once, so a flood of connections holds no more than this.
const MAX_LINGERING: usize = 64;
/// How long a refused connection waits for its client to close.
const LINGER: Duration = Duration::from_secs(1);

/// Tells a connection past the limit why (`limits::refusal`) and closes it once the client is
/// done: the gateway's side is shut for writing at once, and what the client still sends (its
/// preface, typically, which may come after the refusal was written) is read and dropped until
/// it closes, for [`LINGER`] at most. Closed at once instead, a client that had not written its
/// preface yet gets a broken pipe, and never reads the GOAWAY. A new socket's buffer takes the
/// refusal's few bytes without waiting; if not, the connection just closes.
fn refuse(io: UnixStream, lingering: &Arc<AtomicUsize>) {
    let _ = io.try_write(&super::limits::refusal());
    lingered(lingering, closed_after_refusal(io));
}

/// Runs `refused` (a refused connection waiting for its client to close) in a task of its own
/// while fewer than [`MAX_LINGERING`] do; past that it is dropped, and the connection with it.
pub(crate) fn lingered<F>(lingering: &Arc<AtomicUsize>, refused: F)
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    if lingering.load(Ordering::Relaxed) >= MAX_LINGERING {
        return;
    }
    lingering.fetch_add(1, Ordering::Relaxed);
    let lingering = lingering.clone();
    tokio::spawn(async move {
        refused.await;
        lingering.fetch_sub(1, Ordering::Relaxed);
    });
}

/// Shuts the gateway's side of a refused connection for writing, then reads and drops what the
/// client still sends until it closes, for [`LINGER`] at most.
pub(crate) async fn closed_after_refusal<T: AsyncRead + AsyncWrite + Unpin>(mut io: T) {
    let _ = io.shutdown().await;
    let mut sink = [0u8; 4096];
    let drained = async { while let Ok(1..) = io.read(&mut sink).await {} };
    let _ = tokio::time::timeout(LINGER, drained).await;
}

/// Splices the connection when the upstream is live and a connection of its own to it can be
/// had — a UNIX socket, or mutual TLS to a TCP upstream (the bridge), made as the supervisor's
/// (same endpoint after failover, same client certificate, same keepalive) — otherwise
/// (upstream down or refusing) terminates it.
async fn splice_or_serve(
    io: UnixStream,
    shared: Arc<Shared>,
    shutdown: watch::Receiver<bool>,
    served: Served,
) {
    splice_or_serve_served(io, shared, shutdown, None, served).await
}

/// [`splice_or_serve`] for a client that may call only what `authorization` allows (the
/// appliance listener's mTLS peers), marking `served` once the client finished a request.
pub(crate) async fn splice_or_serve_served<C: Io>(
    io: C,
    shared: Arc<Shared>,
    shutdown: watch::Receiver<bool>,
    authorization: Option<Arc<Authorization>>,
    served: Served,
) {
    let client = C::KIND;
    match splice_upstream(&shared).await {
        Some((live, SpliceUpstream::Unix(upstream))) => {
            connection_counted("spliced", client, "unix");
            Splice::new(shared, live, io, upstream, shutdown)
                .authorized(authorization)
                .served(served)
                .run()
                .await
        }
        Some((live, SpliceUpstream::Tls(upstream, keepalive))) => {
            connection_counted("spliced", client, "tls");
            Splice::new(shared, live, io, *upstream, shutdown)
                .authorized(authorization)
                .served(served)
                .keepalive(Some(keepalive))
                .run()
                .await
        }
        None => {
            connection_counted("terminated", client, upstream_kind(&shared));
            serve_connection_served(io, shared, shutdown, authorization, served).await
        }
    }
}

/// A connection of a splice's own to the live upstream.
enum SpliceUpstream {
    Unix(UnixStream),
    /// Boxed: a TLS session is large, and this waits only until the splice takes it.
    Tls(Box<TlsStream<csi_gateway_tls::tcp::Tcp>>, Keepalive),
}

/// Dials the live upstream for a splice: `None` when it is down or cannot be reached now (the
/// connection is then terminated, on the gateway's own connections).
async fn splice_upstream(shared: &Shared) -> Option<(Arc<Live>, SpliceUpstream)> {
    // A client that connects while the gateway is still detecting its plugin is spliced once
    // that is done, not served without it for the connection's life.
    let live = shared.upstream.known(None).await.ok()?;
    let upstream = match (live.conn.endpoint(), live.conn.tls()) {
        (Endpoint::Unix(path), _) => {
            match tokio::time::timeout(SPLICE_DIAL, UnixStream::connect(path)).await {
                Ok(Ok(upstream)) => SpliceUpstream::Unix(upstream),
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "cannot splice: upstream refused");
                    return None;
                }
                Err(_) => {
                    tracing::debug!("cannot splice: upstream connect timed out");
                    return None;
                }
            }
        }
        (Endpoint::Tcp(addr), Some(dialer)) => match dialer.dial(addr, SPLICE_DIAL).await {
            Ok(tls) => SpliceUpstream::Tls(Box::new(tls), dialer.keepalive()),
            Err(e) => {
                tracing::debug!(error = %e, "cannot splice: no TLS connection to the upstream");
                return None;
            }
        },
        (Endpoint::Tcp(_), None) => return None,
    };
    tracing::debug!("client connection spliced");
    Some((live, upstream))
}

/// How long a splice waits for its upstream connection (TCP and TLS handshake included).
const SPLICE_DIAL: Duration = Duration::from_secs(2);

/// The kind of the live upstream, for the connection counter.
pub fn upstream_kind(shared: &Shared) -> &'static str {
    match shared.upstream.live() {
        Ok(live) => match live.conn.endpoint() {
            Endpoint::Unix(_) => "unix",
            Endpoint::Tcp(_) => "tls",
        },
        Err(_) => "none",
    }
}

fn connection_counted(path: &'static str, client: &'static str, upstream: &'static str) {
    crate::metrics::front_connection(path, client, upstream);
}

/// Serves the streams of one HTTP/2 connection.
pub async fn serve_connection<T>(io: T, shared: Arc<Shared>, shutdown: watch::Receiver<bool>)
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    serve_connection_authorized(io, shared, shutdown, None).await
}

/// Serves one HTTP/2 connection whose peer may call only what `authorization` allows (the
/// appliance listener's mTLS peers; `None`: anything, as on the UNIX socket). Each request
/// carries it to [`handle`] as an extension.
pub async fn serve_connection_authorized<T>(
    io: T,
    shared: Arc<Shared>,
    shutdown: watch::Receiver<bool>,
    authorization: Option<Arc<Authorization>>,
) where
    T: AsyncRead + AsyncWrite + Unpin,
{
    serve_connection_served(io, shared, shutdown, authorization, Served::default()).await
}

/// [`serve_connection_authorized`], marking `served` once a call completed.
pub(crate) async fn serve_connection_served<T>(
    io: T,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
    authorization: Option<Arc<Authorization>>,
    served: Served,
) where
    T: AsyncRead + AsyncWrite + Unpin,
{
    let limits = &shared.limits;
    let (io, mut seen) = Watched::new(io, limits.max_resets_per_second);
    // h2 enforces these the way the splice does (REFUSED_STREAM past the streams, GOAWAY
    // ENHANCE_YOUR_CALM past the resets; a request past the header list is handed over marked,
    // and `handle` answers it as the splice does), and checks every frame with the error codes
    // RFC 9113 names (the vendored h2's patch, vendor/PATCHES.md).
    let handshake = h2::server::Builder::new()
        .initial_window_size(1 << 20)
        // The window a connection may fill past the request budget (`held`): the same as the
        // splice's (a tonic plugin's 1 MiB).
        .initial_connection_window_size(1 << 20)
        .max_concurrent_streams(limits.max_concurrent_streams)
        .max_header_list_size(limits.max_header_list_size)
        .max_pending_accept_reset_streams(limits.max_resets_per_second as usize)
        .max_local_error_reset_streams(Some(limits.max_resets_per_second as usize))
        .handshake(io);
    let mut conn = match tokio::time::timeout(Duration::from_secs(10), handshake).await {
        Ok(Ok(conn)) => conn,
        Ok(Err(e)) => return tracing::debug!(error = %e, "HTTP/2 handshake failed"),
        Err(_) => return tracing::debug!("HTTP/2 handshake timed out"),
    };
    let mut upstream = private_upstream(&shared).await;
    let held = ConnectionHeld::default();
    let mut calls = FuturesUnordered::new();
    let mut going_away = *shutdown.borrow();
    if going_away {
        conn.graceful_shutdown();
    }
    // Reset whenever a call starts or ends; fires only while no call is open.
    let idle_timeout = shared.limits.idle_timeout;
    let mut idle = Box::pin(tokio::time::sleep(idle_timeout));
    // Armed while a header block of the client's waits for its end (see `watched`).
    let mut block = Box::pin(tokio::time::sleep(Duration::ZERO));
    let mut block_open = false;
    let mut watching = true;
    loop {
        tokio::select! {
            changed = seen.changed(), if watching => match changed {
                Ok(()) => {
                    let now = *seen.borrow_and_update();
                    if now.too_many_resets {
                        tracing::debug!("client reset too many streams; connection closed");
                        conn.abrupt_shutdown(h2::Reason::ENHANCE_YOUR_CALM);
                        watching = false;
                    }
                    block_open = now.block_since.is_some() && watching;
                    if let Some(since) = now.block_since {
                        let at = since + limits.header_block_timeout;
                        block.as_mut().reset(tokio::time::Instant::from_std(at));
                    }
                }
                Err(_) => watching = false,
            },
            () = &mut block, if block_open => {
                tracing::debug!("client header block not finished in time; connection closed");
                conn.abrupt_shutdown(h2::Reason::PROTOCOL_ERROR);
                block_open = false;
                watching = false;
            }
            Some(()) = calls.next(), if !calls.is_empty() => {
                served.mark();
                idle.as_mut().reset(tokio::time::Instant::now() + idle_timeout);
            }
            () = &mut idle, if calls.is_empty() && !going_away && !idle_timeout.is_zero() => {
                tracing::debug!("idle client connection asked to go away");
                going_away = true;
                conn.graceful_shutdown();
            }
            next = conn.accept() => match next {
                Some(Ok((mut request, respond))) => {
                    idle.as_mut().reset(tokio::time::Instant::now() + idle_timeout);
                    if let Some(a) = &authorization {
                        request.extensions_mut().insert(a.clone());
                    }
                    request.extensions_mut().insert(held.clone());
                    let private = upstream.as_ref().map(|(c, _)| c.clone());
                    calls.push(handle_owned(shared.clone(), private, request, respond, shutdown.clone()));
                }
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "client connection error");
                    break;
                }
                None => break,
            },
            () = drive(&mut upstream), if upstream.is_some() => upstream = None,
            _ = stopped(&mut shutdown), if !going_away => {
                going_away = true;
                conn.graceful_shutdown();
            }
        }
    }
    // The connection is closed: whatever is left can only notice that.
    while calls.next().await.is_some() {}
}

async fn handle_owned(
    shared: Arc<Shared>,
    private: Option<Connection>,
    request: http::Request<h2::RecvStream>,
    respond: h2::server::SendResponse<bytes::Bytes>,
    stopping: watch::Receiver<bool>,
) {
    handle(&shared, private, request, respond, stopping).await
}

/// A connection to the upstream for this front connection alone, once the upstream is live.
async fn private_upstream(shared: &Shared) -> Option<(Connection, Driver)> {
    let live = shared.upstream.live().ok()?;
    match live.conn.redial_undriven(Duration::from_secs(2)).await {
        Ok(pair) => Some(pair),
        Err(e) => {
            tracing::debug!(error = %e, "no private upstream connection; using the shared one");
            None
        }
    }
}

/// Performs the private upstream connection's I/O until it ends.
async fn drive(upstream: &mut Option<(Connection, Driver)>) {
    match upstream {
        Some((_, driver)) => driver.await,
        None => std::future::pending().await,
    }
}

/// Resolves once shutdown is signalled (holding no watch guard across awaits).
async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|s| *s).await;
}
