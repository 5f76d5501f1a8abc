//! Where the plugin listens: a UNIX socket (the CSI norm), or TCP with mutual TLS (a remote
//! appliance on its own, reached by a gateway's `[upstream.tls]`). Both yield one connection
//! type, so the server, its shutdown and its drain are the same code.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, UnixListener, UnixStream};
use tokio_rustls::server::TlsStream;
use tokio_stream::{Stream, StreamExt};

use csi_gateway_tls::server::Acceptor;

/// An accepted connection.
pub enum Conn {
    Unix(UnixStream),
    Tls(Box<TlsStream<csi_gateway_tls::tcp::Tcp>>),
}

/// Accepted connections, as tonic serves them.
pub type Incoming = Pin<Box<dyn Stream<Item = io::Result<Conn>> + Send>>;

pub fn unix(listener: UnixListener) -> Incoming {
    Box::pin(tokio_stream::wrappers::UnixListenerStream::new(listener).map(|r| r.map(Conn::Unix)))
}

/// Accepts TCP and completes mutual TLS off the accept loop, so one slow or hostile peer never
/// holds up the others. Refused peers are logged by the acceptor and never reach the server.
pub fn tls(listener: TcpListener, acceptor: Arc<Acceptor>) -> Incoming {
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    tokio::spawn(async move {
        loop {
            let Ok((tcp, addr)) = listener.accept().await else {
                continue;
            };
            if tx.is_closed() {
                return; // the server is gone
            }
            let (tx, acceptor) = (tx.clone(), acceptor.clone());
            tokio::spawn(async move {
                if let Some((stream, _peer)) = acceptor.handshake(tcp, addr).await {
                    let _ = tx.send(Ok(Conn::Tls(Box::new(stream)))).await;
                }
            });
        }
    });
    Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))
}

impl tonic::transport::server::Connected for Conn {
    type ConnectInfo = ();

    fn connect_info(&self) -> Self::ConnectInfo {}
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Unix(s) => Pin::new(s).poll_read(cx, buf),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Unix(s) => Pin::new(s).poll_write(cx, buf),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Unix(s) => Pin::new(s).poll_flush(cx),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Unix(s) => Pin::new(s).poll_shutdown(cx),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
