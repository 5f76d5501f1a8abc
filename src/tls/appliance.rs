//! The appliance listener: TCP connections admitted by the TLS crate's [`Acceptor`] (mutual
//! TLS, the peer allow-list), served with the same front code as the UNIX socket, each carrying
//! the peer's [`Authorization`](super::Authorization) so every call is checked against the CSI
//! service it belongs to.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::Acceptor;
use crate::front::{listener, Shared};
use crate::metrics;

/// Serves the appliance listener until `shutdown`, then gives connections `grace` to finish.
pub async fn serve(
    listener: TcpListener,
    acceptor: Arc<Acceptor>,
    shared: Arc<Shared>,
    shutdown: watch::Receiver<bool>,
    grace: Duration,
    splice: bool,
) {
    let mut connections = JoinSet::new();
    let mut stop = shutdown.clone();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, addr)) => {
                    let (acceptor, shared, shutdown) = (acceptor.clone(), shared.clone(), shutdown.clone());
                    connections.spawn(async move {
                        csi_gateway_tls::tcp_keepalive(&tcp, acceptor.settings().tcp_keepalive);
                        connection(tcp, addr, &acceptor, shared, shutdown, splice).await
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "appliance accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            _ = stopped(&mut stop) => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
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
    splice: bool,
) {
    let Some((stream, authorization)) = acceptor.handshake(tcp, addr).await else {
        return;
    };
    let authorization = Some(Arc::new(authorization));
    if splice {
        listener::splice_or_serve_authorized(stream, shared, shutdown, authorization).await
    } else {
        metrics::front_connection("terminated", "tls", listener::upstream_kind(&shared));
        listener::serve_connection_authorized(stream, shared, shutdown, authorization).await
    }
}
