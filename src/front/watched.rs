//! The client's frames as a terminated connection reads them, for the limits `h2` does not
//! enforce the way the splice does: a header block left unfinished for
//! `header_block_timeout` (h2 waits for its CONTINUATION forever), and streams reset per
//! second (h2 counts only streams reset before the server accepted them, so a client that
//! resets calls already started is never stopped). [`Watched`] wraps the connection's I/O,
//! reads the header of each frame h2 reads (nothing else: h2 still checks every frame) and
//! reports what it saw on a watch channel; the connection's loop ends the connection with the
//! GOAWAY the splice sends for the same thing.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::watch;

use super::limits::Rate;

const PREFACE_LEN: usize = 24;
const HEAD_LEN: usize = 9;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const CONTINUATION: u8 = 0x9;
const END_HEADERS: u8 = 0x4;

/// What the client's frames so far call for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Seen {
    /// Since when a header block has been waiting for its last CONTINUATION, or a frame of
    /// any kind for its last byte (a client trickling a DATA frame is held to the same bound
    /// as one that never ends a header block), whichever began first.
    pub block_since: Option<Instant>,
    /// More streams were reset within a second than the limit allows.
    pub too_many_resets: bool,
}

/// Where the reader is in the client's byte stream.
#[derive(Debug)]
enum Position {
    /// Inside the connection preface: this many bytes of it are left.
    Preface(usize),
    /// Inside a frame header: the bytes of it read so far.
    Head([u8; HEAD_LEN], usize),
    /// Inside a frame's payload: this many bytes of it are left.
    Payload(usize),
}

/// A client connection's I/O, whose reads are watched (writes pass untouched).
pub struct Watched<T> {
    io: T,
    at: Position,
    seen: Seen,
    resets: Rate,
    max_resets_per_second: u32,
    tell: watch::Sender<Seen>,
    /// The frame being read ends a header block (END_HEADERS).
    ends_block: bool,
    /// Since when a header block has been open.
    header_since: Option<Instant>,
    /// Since when the frame being read has been only partly read.
    frame_since: Option<Instant>,
    /// A frame ended in the read being followed.
    frame_done: bool,
}

impl<T> Watched<T> {
    /// `io` watched, and the receiver of what is seen on it.
    pub fn new(io: T, max_resets_per_second: u32) -> (Watched<T>, watch::Receiver<Seen>) {
        let (tell, seen) = watch::channel(Seen::default());
        let watched = Watched {
            io,
            at: Position::Preface(PREFACE_LEN),
            seen: Seen::default(),
            resets: Rate::default(),
            max_resets_per_second,
            tell,
            ends_block: false,
            header_since: None,
            frame_since: None,
            frame_done: false,
        };
        (watched, seen)
    }

    /// Follows `bytes`, the next the client sent, frame by frame.
    fn read(&mut self, mut bytes: &[u8]) {
        let before = self.seen;
        while !bytes.is_empty() {
            match &mut self.at {
                Position::Preface(left) | Position::Payload(left) => {
                    let n = (*left).min(bytes.len());
                    *left -= n;
                    bytes = &bytes[n..];
                    if *left == 0 {
                        self.at = Position::Head([0; HEAD_LEN], 0);
                        self.frame_ended();
                    }
                }
                Position::Head(head, filled) => {
                    let n = (HEAD_LEN - *filled).min(bytes.len());
                    head[*filled..*filled + n].copy_from_slice(&bytes[..n]);
                    *filled += n;
                    bytes = &bytes[n..];
                    if *filled == HEAD_LEN {
                        let head = *head;
                        self.frame(head[3], head[4]);
                        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
                        self.at = match len {
                            0 => Position::Head([0; HEAD_LEN], 0),
                            len => Position::Payload(len),
                        };
                        if len == 0 {
                            self.frame_ended();
                        }
                    }
                }
            }
        }
        let mid_frame = match self.at {
            Position::Preface(_) => false,
            Position::Head(_, filled) => filled > 0,
            Position::Payload(_) => true,
        };
        self.frame_since = match (mid_frame, std::mem::take(&mut self.frame_done)) {
            (false, _) => None,
            (true, true) => Some(Instant::now()),
            (true, false) => self.frame_since.or_else(|| Some(Instant::now())),
        };
        self.seen.block_since = self.header_since.into_iter().chain(self.frame_since).min();
        if self.seen != before {
            // Nobody listening: the connection is over, and so is the watching.
            let _ = self.tell.send(self.seen);
        }
    }

    /// The frame read last is whole: one that ends a header block ends its clock.
    fn frame_ended(&mut self) {
        self.frame_done = true;
        if std::mem::take(&mut self.ends_block) {
            self.header_since = None;
        }
    }

    /// A frame of `kind` with `flags` begins. A header block is timed from its first frame's
    /// head to the end of the frame that ends it: a client trickling a single HEADERS frame
    /// is held to the same bound as one that never sends its CONTINUATION.
    fn frame(&mut self, kind: u8, flags: u8) {
        let now = Instant::now();
        match kind {
            HEADERS | CONTINUATION => {
                self.header_since = self.header_since.or(Some(now));
                self.ends_block = flags & END_HEADERS != 0;
            }
            RST_STREAM if self.resets.exceeded(now, self.max_resets_per_second) => {
                self.seen.too_many_resets = true
            }
            _ => {}
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Watched<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.io).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            this.read(&buf.filled()[before..]);
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Watched<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(len: u32, kind: u8, flags: u8, stream: u32) -> Vec<u8> {
        let mut h = len.to_be_bytes()[1..].to_vec();
        h.extend_from_slice(&[kind, flags]);
        h.extend_from_slice(&stream.to_be_bytes());
        h
    }

    #[test]
    fn an_open_header_block_is_seen_until_its_end_whatever_the_reads() {
        let (mut w, seen) = Watched::new((), 100);
        let mut bytes = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        bytes.extend(head(0, 0x4, 0, 0)); // SETTINGS
        bytes.extend(head(3, HEADERS, 0, 1));
        bytes.extend([1, 2, 3]);
        // Read a byte at a time: frame headers split anywhere.
        for b in &bytes {
            w.read(std::slice::from_ref(b));
        }
        assert!(seen.borrow().block_since.is_some());
        let mut end = head(2, CONTINUATION, END_HEADERS, 1);
        end.extend([4, 5]);
        w.read(&end);
        assert_eq!(*seen.borrow(), Seen::default());
    }

    #[test]
    fn a_frame_part_read_is_timed_until_its_last_byte() {
        let (mut w, seen) = Watched::new((), 100);
        w.read(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
        let mut data = head(4, 0x0, 0, 1); // DATA
        data.extend([1, 2, 3, 4]);
        w.read(&data[..11]);
        let began = seen
            .borrow()
            .block_since
            .expect("a DATA frame part read is timed");
        w.read(&data[11..12]);
        assert_eq!(
            seen.borrow().block_since,
            Some(began),
            "from its first byte"
        );
        w.read(&data[12..]);
        assert_eq!(*seen.borrow(), Seen::default(), "whole: no longer timed");
        // Whole frames read in one go leave nothing timed.
        w.read(&[data.clone(), data].concat());
        assert_eq!(*seen.borrow(), Seen::default());
    }

    #[test]
    fn resets_past_the_rate_are_seen() {
        let (mut w, seen) = Watched::new((), 3);
        w.read(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
        for stream in [1, 3, 5] {
            let mut f = head(4, RST_STREAM, 0, stream);
            f.extend(8u32.to_be_bytes());
            w.read(&f);
        }
        assert!(
            !seen.borrow().too_many_resets,
            "three in a second are allowed"
        );
        let mut f = head(4, RST_STREAM, 0, 7);
        f.extend(8u32.to_be_bytes());
        w.read(&f);
        assert!(seen.borrow().too_many_resets);
    }
}
