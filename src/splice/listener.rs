//! Accepts connections and serves each one with the splice (`crate::splice`): onto an upstream
//! connection of its own when one can be had, else unattached, its calls answered by the
//! gateway on its shared upstream connection. A connection's I/O and all its calls run inside
//! one task. Connection slots go to well-behaved clients first (`Slots`); on shutdown every
//! connection is told to go away and gets `grace` to finish its calls.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::endpoint::Endpoint;
use crate::splice::{Io, Splice};
use crate::tls::{Authorization, Keepalive};
use crate::upstream::Live;
use tokio_rustls::client::TlsStream;

use crate::call::Shared;

/// Serves until `shutdown` turns true, then drains for at most `grace`.
pub async fn serve(
    listener: UnixListener,
    shared: Arc<Shared>,
    shutdown: watch::Receiver<bool>,
    grace: Duration,
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
                    let task = connections.spawn(serve_connection(io, shared.clone(), shutdown.clone(), None, served.clone()));
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
/// request ends, so a first call in flight counts however long it takes): set by the
/// connection, read by the listener when every slot is taken.
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

/// Serves one client connection — on the UNIX socket, or a peer of the appliance listener that
/// may call only what `authorization` allows — marking `served` once the client finished a
/// request. Spliced onto an upstream connection of its own when one can be had: a UNIX socket,
/// or mutual TLS to a TCP upstream (the bridge), made as the supervisor's (same endpoint after
/// failover, same client certificate, same keepalive). Otherwise (the plugin down, refusing, or
/// not detected) the splice starts without one and answers the calls itself on the gateway's
/// shared upstream connection (`Splice::unattached`).
pub(crate) async fn serve_connection<C: Io>(
    io: C,
    shared: Arc<Shared>,
    shutdown: watch::Receiver<bool>,
    authorization: Option<Arc<Authorization>>,
    served: Served,
) {
    let client = C::KIND;
    match splice_upstream(&shared).await {
        (Some(live), Some(SpliceUpstream::Unix(upstream))) => {
            connection_counted("spliced", client, "unix");
            Splice::new(shared, live, io, upstream, shutdown)
                .authorized(authorization)
                .served(served)
                .run()
                .await
        }
        (Some(live), Some(SpliceUpstream::Tls(upstream, keepalive))) => {
            connection_counted("spliced", client, "tls");
            Splice::new(shared, live, io, *upstream, shutdown)
                .authorized(authorization)
                .served(served)
                .keepalive(Some(keepalive))
                .run()
                .await
        }
        (live, _) => {
            connection_counted("unattached", client, upstream_kind(&shared));
            Splice::unattached(shared, live, io, shutdown)
                .authorized(authorization)
                .served(served)
                .run()
                .await
        }
    }
}

/// A connection of a splice's own to the live upstream.
enum SpliceUpstream {
    Unix(UnixStream),
    /// Boxed: a TLS session is large, and this waits only until the splice takes it.
    Tls(Box<TlsStream<csi_gateway_tls::tcp::Tcp>>, Keepalive),
}

/// The live upstream, once detection is done, and a connection of the splice's own to it:
/// `None` when it is down or cannot be reached now.
async fn splice_upstream(shared: &Shared) -> (Option<Arc<Live>>, Option<SpliceUpstream>) {
    // A client that connects while the gateway is still detecting its plugin is spliced once
    // that is done, not served without it for the connection's life.
    let Ok(live) = shared.upstream.known(None).await else {
        return (None, None);
    };
    let upstream = dial(&live).await;
    if upstream.is_some() {
        tracing::debug!("client connection spliced");
    }
    (Some(live), upstream)
}

async fn dial(live: &Live) -> Option<SpliceUpstream> {
    match (live.conn.endpoint(), live.conn.tls()) {
        (Endpoint::Unix(path), _) => {
            match tokio::time::timeout(SPLICE_DIAL, UnixStream::connect(path)).await {
                Ok(Ok(upstream)) => Some(SpliceUpstream::Unix(upstream)),
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "no upstream connection of its own: upstream refused");
                    None
                }
                Err(_) => {
                    tracing::debug!("no upstream connection of its own: connect timed out");
                    None
                }
            }
        }
        (Endpoint::Tcp(addr), Some(dialer)) => match dialer.dial(addr, SPLICE_DIAL).await {
            Ok(tls) => Some(SpliceUpstream::Tls(Box::new(tls), dialer.keepalive())),
            Err(e) => {
                tracing::debug!(error = %e, "no upstream connection of its own: no TLS connection");
                None
            }
        },
        (Endpoint::Tcp(_), None) => None,
    }
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

/// Resolves once shutdown is signalled (holding no watch guard across awaits).
async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|s| *s).await;
}
