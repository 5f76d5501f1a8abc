//! The writer of what goes to the client: the frames passed on from the upstream, in order,
//! and the gateway's own — SETTINGS and their ACKs, PING ACKs, WINDOW_UPDATE, RST_STREAM,
//! GOAWAY and the replies it makes — written where they may go. An own frame waits while it
//! may not go yet: before the server preface (RFC 9113 §3.4), and inside a header block of the
//! upstream's, which no other frame may interrupt (§6.10).

use bytes::BytesMut;
use csi_gateway_wire::frame::{self, Kind, Reason, StreamId};

pub(super) struct ToClient {
    /// What is written to the client next, in order.
    out: BytesMut,
    /// The gateway's own frames while they may not go yet.
    held: BytesMut,
    /// The server preface went: the client may be written to.
    preface_sent: bool,
    /// A header block of the upstream's is midway to the client.
    in_block: bool,
}

impl ToClient {
    pub(super) fn new() -> ToClient {
        ToClient {
            out: BytesMut::with_capacity(64 * 1024),
            held: BytesMut::new(),
            preface_sent: false,
            in_block: false,
        }
    }

    /// Where an own frame goes now: out, or held (see the module's docs).
    pub(super) fn own(&mut self) -> &mut BytesMut {
        if self.in_block || !self.preface_sent {
            &mut self.held
        } else {
            &mut self.out
        }
    }

    /// Where the gateway's own replies go: out once the preface went. They are written
    /// between the upstream's frames, never inside one of its header blocks.
    pub(super) fn replies(&mut self) -> &mut BytesMut {
        if self.preface_sent {
            &mut self.out
        } else {
            &mut self.held
        }
    }

    /// Where the upstream's frames go, and the frames that stand in their place (a reply
    /// re-encoded, a translated reply): out, in the upstream's order.
    pub(super) fn out(&mut self) -> &mut BytesMut {
        &mut self.out
    }

    /// A frame of the upstream's, passed on as it came.
    pub(super) fn pass(&mut self, whole: &[u8]) {
        self.out.extend_from_slice(whole);
    }

    pub(super) fn rst_stream(&mut self, stream: StreamId, reason: Reason) {
        frame::put_rst_stream(self.own(), stream, reason);
    }

    pub(super) fn window_update(&mut self, stream: StreamId, increment: u32) {
        frame::put_window_update(self.own(), stream, increment);
    }

    pub(super) fn goaway(&mut self, last: StreamId, reason: Reason) {
        frame::put_goaway(self.own(), last, reason);
    }

    pub(super) fn ping_ack(&mut self, payload: &[u8]) {
        frame::put(
            self.own(),
            Kind::Ping,
            frame::ACK,
            StreamId::CONNECTION,
            payload,
        );
    }

    pub(super) fn settings(&mut self, values: &[(u16, u32)]) {
        frame::put_settings(self.own(), values);
    }

    pub(super) fn settings_ack(&mut self) {
        frame::put(
            self.own(),
            Kind::Settings,
            frame::ACK,
            StreamId::CONNECTION,
            &[],
        );
    }

    pub(super) fn headers(&mut self, stream: StreamId, block: &[u8], end: bool, max_frame: usize) {
        frame::put_headers(self.own(), stream, block, end, max_frame);
    }

    /// The server preface (SETTINGS), then whatever was held for it.
    pub(super) fn preface(&mut self, values: &[(u16, u32)]) {
        frame::put_settings(&mut self.out, values);
        self.preface_sent = true;
        self.release();
    }

    pub(super) fn preface_sent(&self) -> bool {
        self.preface_sent
    }

    /// A header block of the upstream's began going to the client.
    pub(super) fn block_begins(&mut self) {
        self.in_block = true;
    }

    /// It ended: what waited for it goes right after it, before anything else.
    pub(super) fn block_ends(&mut self) {
        self.in_block = false;
        self.release();
    }

    /// Lets the held frames go once they may.
    pub(super) fn release(&mut self) {
        if !self.held.is_empty() && !self.in_block && self.preface_sent {
            let held = self.held.split();
            self.out.unsplit(held);
        }
    }

    /// The connection ends with a connection error: a GOAWAY with `reason` naming `last`,
    /// after the gateway's own SETTINGS (`own_settings`) if no server preface went yet, so
    /// that the client reads it (nothing held is sent then). Returns what to write last.
    pub(super) fn closing(
        &mut self,
        last: StreamId,
        reason: Reason,
        own_settings: &[(u16, u32)],
    ) -> &mut BytesMut {
        if !self.preface_sent {
            self.out.clear();
            frame::put_settings(&mut self.out, own_settings);
        } else {
            self.release();
        }
        frame::put_goaway(&mut self.out, last, reason);
        &mut self.out
    }

    /// What may be written to the client now: nothing before the server preface.
    pub(super) fn writable(&mut self) -> Option<&mut BytesMut> {
        self.preface_sent.then_some(&mut self.out)
    }

    /// Bytes ready to be written.
    pub(super) fn queued(&self) -> usize {
        self.out.len()
    }

    /// Bytes for the client, held ones included.
    pub(super) fn len(&self) -> usize {
        self.out.len() + self.held.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(mut bytes: &[u8]) -> Vec<(Kind, u32)> {
        let mut out = Vec::new();
        while let Some(head) = frame::next(bytes) {
            out.push((head.kind, head.stream.get()));
            bytes = &bytes[frame::HEAD_LEN + head.len..];
        }
        out
    }

    #[test]
    fn own_frames_wait_for_the_preface_then_follow_it() {
        let mut w = ToClient::new();
        w.rst_stream(StreamId::new(1), frame::reason::CANCEL);
        assert!(w.writable().is_none(), "nothing before the server preface");
        assert_eq!(w.queued(), 0);
        w.preface(&[]);
        let out = w.writable().unwrap();
        assert_eq!(kinds(out), vec![(Kind::Settings, 0), (Kind::RstStream, 1)]);
    }

    #[test]
    fn own_frames_never_interrupt_an_upstream_header_block() {
        let mut w = ToClient::new();
        w.preface(&[]);
        w.out().clear();
        w.block_begins();
        frame::put(w.out(), Kind::Headers, 0, StreamId::new(3), b"ab");
        w.window_update(StreamId::CONNECTION, 10);
        w.ping_ack(b"12345678");
        frame::put(
            w.out(),
            Kind::Continuation,
            frame::END_HEADERS,
            StreamId::new(3),
            b"c",
        );
        assert_eq!(w.len(), w.queued() + 2 * frame::HEAD_LEN + 4 + 8);
        w.block_ends();
        assert_eq!(
            kinds(w.writable().unwrap()),
            vec![
                (Kind::Headers, 3),
                (Kind::Continuation, 3),
                (Kind::WindowUpdate, 0),
                (Kind::Ping, 0)
            ]
        );
    }

    #[test]
    fn a_connection_error_before_the_preface_still_reads_as_one() {
        let mut w = ToClient::new();
        w.rst_stream(StreamId::new(1), frame::reason::CANCEL);
        w.closing(StreamId::new(1), frame::reason::PROTOCOL_ERROR, &[]);
        // The gateway's SETTINGS, then the GOAWAY; what was held is not sent.
        assert_eq!(kinds(&w.out), vec![(Kind::Settings, 0), (Kind::GoAway, 0)]);
    }
}
