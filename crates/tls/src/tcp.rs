//! The TCP socket under a TLS stream, read so that a short read ends the wake: rustls reads at
//! most 4 KiB at a time, and a read that got less than it asked for emptied the socket, so its
//! readiness is cleared then rather than by one more read failing with `EAGAIN` (as nginx does
//! on TCP; the splice does the same on UNIX sockets).

use std::io::{self, ErrorKind, IoSlice};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;

/// A [`TcpStream`] whose reads clear its readiness on a short read.
#[derive(Debug)]
pub struct Tcp(pub TcpStream);

impl std::ops::Deref for Tcp {
    type Target = TcpStream;
    fn deref(&self) -> &TcpStream {
        &self.0
    }
}

impl AsyncRead for Tcp {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let io = &self.0;
        loop {
            ready!(io.poll_read_ready(cx))?;
            let room = buf.remaining();
            let mut got = 0;
            let outcome = io.try_io(Interest::READABLE, || {
                let unfilled = buf.initialize_unfilled();
                got = io.try_read(unfilled)?;
                if got > 0 && got < room {
                    return Err(ErrorKind::WouldBlock.into());
                }
                Ok(())
            });
            match outcome {
                Ok(()) => {
                    buf.advance(got);
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if got > 0 {
                        buf.advance(got);
                        return Poll::Ready(Ok(()));
                    }
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncWrite for Tcp {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}
