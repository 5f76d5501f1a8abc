//! The appliance listener: TCP connections admitted by the TLS crate's [`Acceptor`] (mutual
//! TLS, the peer allow-list), served with the same front code as the UNIX socket, each carrying
//! the peer's [`Authorization`](crate::tls::Authorization) so every call is checked against the CSI
//! service it belongs to.

use std::net::SocketAddr;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::listener;
use crate::call::Shared;
use crate::tls::Acceptor;

/// Serves the appliance listener until `shutdown`, then gives connections `grace` to finish.
/// At most `max_connections` are served at once, by the UNIX listener's rule
/// (`listener::Slots`): with every slot taken, a newcomer is served in place of the oldest
/// connection whose peer never finished a request (silent on TCP, silent after TLS, or never
/// ending a request), which is closed; only with every slot held by a peer that did is the
/// newcomer refused, with GOAWAY ENHANCE_YOUR_CALM once its TLS handshake is done.
pub async fn serve(
    listener: TcpListener,
    acceptor: Arc<Acceptor>,
    shared: Arc<Shared>,
    shutdown: watch::Receiver<bool>,
    grace: Duration,
    max_connections: usize,
) {
    let mut connections = JoinSet::new();
    let mut slots = listener::Slots::default();
    let lingering = Arc::new(AtomicUsize::new(0));
    let mut stop = shutdown.clone();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, addr)) if slots.len() >= max_connections && !slots.make_room() => {
                    tracing::warn!(peer = %addr, limit = max_connections, "too many appliance connections, each with a request finished; one refused");
                    listener::lingered(&lingering, refused(tcp, addr, acceptor.clone()));
                }
                Ok((tcp, addr)) => {
                    let (acceptor, shared, shutdown) = (acceptor.clone(), shared.clone(), shutdown.clone());
                    let served = listener::Served::default();
                    let marked = served.clone();
                    let task = connections.spawn(async move {
                        csi_gateway_tls::tcp_keepalive(&tcp, acceptor.settings().tcp_keepalive);
                        connection(tcp, addr, &acceptor, shared, shutdown, marked).await
                    });
                    slots.add(task, served);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "appliance accept failed");
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
    if tokio::time::timeout(grace, async {
        while connections.join_next().await.is_some() {}
    })
    .await
    .is_err()
    {
        tracing::warn!(
            connections = connections.len(),
            "grace period over; closing bridge connections"
        );
        connections.abort_all();
    }
}

/// A connection past the limit: told why (`limits::refusal`) inside TLS, the only place its
/// peer reads an HTTP/2 frame, then closed once the peer is done. A peer that does not
/// complete the handshake gets nothing (`handshake_timeout`).
async fn refused(tcp: tokio::net::TcpStream, addr: SocketAddr, acceptor: Arc<Acceptor>) {
    let Some((mut stream, _)) = acceptor.handshake(tcp, addr).await else {
        return;
    };
    let refusal = super::limits::refusal();
    if tokio::time::timeout(REFUSAL_WRITE, stream.write_all(&refusal))
        .await
        .is_ok_and(|written| written.is_ok())
    {
        listener::closed_after_refusal(stream).await;
    }
}

/// How long a refused peer may take to read its refusal.
const REFUSAL_WRITE: Duration = Duration::from_secs(1);

/// Resolves once shutdown is signalled (holding no watch guard across awaits).
async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|s| *s).await;
}

async fn connection(
    tcp: tokio::net::TcpStream,
    addr: SocketAddr,
    acceptor: &Acceptor,
    shared: Arc<Shared>,
    shutdown: watch::Receiver<bool>,
    served: listener::Served,
) {
    let Some((stream, authorization)) = acceptor.handshake(tcp, addr).await else {
        return;
    };
    let authorization = Some(Arc::new(authorization));
    listener::serve_connection(stream, shared, shutdown, authorization, served).await
}
