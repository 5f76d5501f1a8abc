//! A stream's end: its reply finished or reset, counted and logged, its state removed.

use super::*;

pub(super) struct Block {
    pub(super) stream: u32,
    pub(super) end_stream: bool,
    /// The header block fragments joined.
    pub(super) bytes: Vec<u8>,
    /// A request block's frames as they came, for forwarding as they are; a reply block's
    /// when they wait to be passed on or not (a translated call's trailers).
    pub(super) frames: Vec<u8>,
    /// A reply block whose frames go to the client as they come.
    pub(super) passes: bool,
}

pub(super) struct Stream {
    pub(super) started: Instant,
    pub(super) report: Option<Report>,
    pub(super) request_done: bool,
    /// The upstream's reply headers went to the client.
    pub(super) reply_started: bool,
    pub(super) reply_done: bool,
    /// The client's `grpc-timeout`, for a call on the upstream (see `deadlines`).
    pub(super) timeout: Option<Duration>,
    /// The client sent END_STREAM or RST_STREAM on it (see `client_closed`).
    pub(super) client_ended: bool,
    /// What is left of the request's `content-length`, when it declared one.
    pub(super) content_left: Option<u64>,
    /// How much DATA the client may still send on the stream: the window it was granted, the
    /// upstream's on a relayed stream, the splice's own on one it answers (`client_credit`).
    pub(super) credit: i64,
    pub(super) _in_flight: InFlight,
    pub(super) side: Side,
}

impl Stream {
    /// When a call on the upstream is answered DEADLINE_EXCEEDED if its reply has not ended.
    pub(super) fn deadline(&self) -> Option<Instant> {
        self.started.checked_add(self.timeout?)
    }
}

pub(super) enum Side {
    Relayed,
    /// Translated on the upstream connection, as the one call it is there (`Translated`).
    Translated(Box<Translated>),
    Local(Local),
    /// Served by one of the gateway's own services, as a stream (`local_stream`).
    Service,
}

impl Side {
    /// The stream is a call on the upstream connection: relayed, or translated there.
    pub(super) fn on_upstream(&self) -> bool {
        matches!(self, Side::Relayed | Side::Translated(_))
    }

    /// The client's request frames go on to the upstream as they came: a relayed call's, and
    /// a translated call's relayed as it came (`Asked::Relayed`).
    pub(super) fn relays_request(&self) -> bool {
        match self {
            Side::Relayed => true,
            Side::Translated(t) => t.asked.relayed(),
            _ => false,
        }
    }
}

impl<C: Io, U: Io> Splice<C, U> {
    /// Resets a stream the splice opened on the upstream, and remembers it (`reset_upstream`).
    /// A stream error of the client's (RFC 9113 §5.4.2) on a stream the gateway knows: reset
    /// with `code` to the client and on the upstream, and ended.
    pub(super) fn stream_error(&mut self, id: u32, code: Reason, why: &'static str) {
        tracing::debug!(stream = id, why, %code, "stream error: stream reset");
        frame::put_rst_stream(self.own_out(), id, code);
        if self
            .streams
            .get(&id)
            .is_some_and(|s| matches!(s.side, Side::Relayed))
        {
            self.reset_on_upstream(id);
        }
        let message = Some(format!("stream error: {why}"));
        self.end_stream(id, Code::Internal, Origin::Client, message);
    }

    /// Ends a stream the splice answers no more: its call failed with `code`, `origin`'s
    /// failure.
    pub(super) fn end_stream(
        &mut self,
        id: u32,
        code: Code,
        origin: Origin,
        message: Option<String>,
    ) {
        if let Some(report) = self.streams.get_mut(&id).and_then(|s| s.report.as_mut()) {
            report.code = code;
            report.origin = Some(origin);
            if message.is_some() {
                report.message = message;
            }
        }
        self.remove(id);
    }

    pub(super) fn remove(&mut self, id: u32) {
        if let Some(mut stream) = self.streams.remove(&id) {
            if stream.client_ended {
                self.remember_closed(id);
            }
            if let Some(at) = stream.deadline() {
                self.deadlines.remove(&(at, id));
            }
            if matches!(stream.side, Side::Service) {
                self.services.remove(id);
                self.count_services();
            }
            // What a local call still held of its request (reset before it ended), and of its
            // reply; what a translated call held of the plugin's reply.
            match &stream.side {
                Side::Local(local) => {
                    self.let_go(local.body.len());
                    self.let_go_reply(local.reply.as_ref().map_or(0, |r| r.data.len()));
                }
                Side::Translated(t) => self.let_go_reply(t.reply.len()),
                _ => {}
            }
            if matches!(stream.side, Side::Translated(_)) && !stream.reply_done {
                // Ended before the plugin's reply did (the client reset it, say).
                self.reset_on_upstream(id);
            }
            if let Some(report) = stream.report.take() {
                self.ended.push((report, stream.started));
            }
            if let Side::Translated(t) = stream.side {
                self.recycle(t);
            }
        }
    }

    /// Logs and counts the relayed calls that ended. A spliced call's time is not split into
    /// upstream time and overhead: the splice never waits on the upstream for it, it only
    /// passes frames along.
    pub(super) fn report_ended(&mut self) {
        if self.ended.is_empty() {
            return;
        }
        let now = Instant::now();
        for (report, started) in self.ended.drain(..) {
            observe::finish(&report, now - started, &self.shared.redactor);
        }
    }
}
