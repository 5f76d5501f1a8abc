//! The byte streams a splice joins: a UNIX socket (the CSI endpoint, a local plugin) or mutual
//! TLS on TCP (the remote appliance bridge, either side of it).
//!
//! The splice is generic over its two sides rather than holding a boxed stream or an enum of
//! them: each pairing is compiled on its own, so the UNIX→UNIX path keeps its direct socket
//! calls (and the short-read trick below), and a TLS side costs only what rustls does.

use std::io::ErrorKind;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, Interest};
use tokio::net::UnixStream;

/// One side of a splice.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send + 'static {
    /// What the stream is, for the connection counter's labels: `unix` or `tls`.
    const KIND: &'static str;

    /// Reads what has arrived into `buf`: `Some(n)` bytes, `None` at the end of the stream or on
    /// an error.
    ///
    /// A TLS stream hands over one record's plaintext per read: this reads on until the stream
    /// has nothing more or the room is used, so that the splice handles what arrived at once.
    fn read_into(&mut self, buf: &mut BytesMut, cx: &mut Context<'_>) -> Poll<Option<usize>> {
        reserve(buf);
        let mut got = 0;
        while buf.capacity() > buf.len() {
            match tokio_util::io::poll_read_buf(Pin::new(&mut *self), cx, buf) {
                Poll::Ready(Ok(0)) => {
                    // The end of the stream, once what came before it is handled.
                    return Poll::Ready((got > 0).then_some(got));
                }
                Poll::Ready(Ok(n)) => got += n,
                Poll::Ready(Err(_)) => return Poll::Ready((got > 0).then_some(got)),
                Poll::Pending if got > 0 => break,
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Some(got))
    }
}

fn reserve(buf: &mut BytesMut) {
    if buf.capacity() - buf.len() < 16 * 1024 {
        buf.reserve(64 * 1024);
    }
}

impl Io for UnixStream {
    const KIND: &'static str = "unix";

    /// A read that returns less than it had room for emptied the socket (a UNIX stream socket
    /// hands over everything queued, up to the room given), so the socket's readiness is
    /// cleared at once rather than by one more read failing with `EAGAIN`: a system call saved
    /// per wake.
    fn read_into(&mut self, buf: &mut BytesMut, cx: &mut Context<'_>) -> Poll<Option<usize>> {
        reserve(buf);
        let room = buf.capacity() - buf.len();
        let io = &*self;
        loop {
            if ready!(io.poll_read_ready(cx)).is_err() {
                return Poll::Ready(None);
            }
            let mut got = 0;
            // A short read answers `WouldBlock` to `try_io`, which then clears the readiness it
            // saw before the read; an event that came in since (another worker thread's driver
            // may have handled one) has a newer tick and is kept.
            let outcome = io.try_io(Interest::READABLE, || {
                got = io.try_read_buf(buf)?;
                if got > 0 && got < room {
                    return Err(ErrorKind::WouldBlock.into());
                }
                Ok(())
            });
            match outcome {
                Ok(()) if got == 0 => return Poll::Ready(None), // the peer closed
                Ok(()) => return Poll::Ready(Some(got)),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if got > 0 {
                        return Poll::Ready(Some(got));
                    }
                    // The readiness was stale and is cleared: wait for the next event.
                }
                Err(_) => return Poll::Ready(None),
            }
        }
    }
}

/// The appliance's side of an accepted bridge connection.
impl Io for tokio_rustls::server::TlsStream<csi_gateway_tls::tcp::Tcp> {
    const KIND: &'static str = "tls";
}

/// The node gateway's side of a bridge connection it dialed.
impl Io for tokio_rustls::client::TlsStream<csi_gateway_tls::tcp::Tcp> {
    const KIND: &'static str = "tls";
}

/// The upstream side of a splice that has none (`Splice::unattached`): the splice never reads
/// or writes it, since it starts as if its upstream had gone; should it be asked to, it is a
/// stream at its end.
pub struct Unattached;

impl AsyncRead for Unattached {
    fn poll_read(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        _: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Unattached {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        _: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Poll::Ready(Err(ErrorKind::NotConnected.into()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl Io for Unattached {
    const KIND: &'static str = "none";
}

/// Writes as much of `buf` as the stream takes now, then pushes on what the stream itself still
/// holds (TLS records rustls sealed but the socket did not take); `Ok(true)` if anything of
/// `buf` was written. A stream that holds bytes has registered for the socket's writability,
/// so the splice is woken to push them on. `to` names the side in the trace of each write.
pub fn write<T: Io>(
    io: &mut T,
    buf: &mut BytesMut,
    cx: &mut Context<'_>,
    to: &'static str,
) -> std::io::Result<bool> {
    let mut moved = false;
    while !buf.is_empty() {
        match Pin::new(&mut *io).poll_write(cx, buf) {
            Poll::Ready(Ok(0)) => return Err(ErrorKind::WriteZero.into()),
            Poll::Ready(Ok(n)) => {
                tracing::trace!(to, bytes = n, "wrote");
                buf.advance(n);
                moved = true;
            }
            Poll::Ready(Err(e)) => return Err(e),
            Poll::Pending => return Ok(moved),
        }
    }
    match Pin::new(&mut *io).poll_flush(cx) {
        Poll::Ready(Err(e)) => Err(e),
        _ => Ok(moved),
    }
}
