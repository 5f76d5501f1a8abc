//! A stream's state (`Stream`, `State`, `Side`) and its end: its reply finished or reset,
//! counted and logged, its state removed.

use super::*;

pub(super) struct Block {
    pub(super) stream: StreamId,
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
    pub(super) state: State,
    /// The client's `grpc-timeout`, for a call on the upstream (see `Timers::deadlines`).
    pub(super) timeout: Option<Duration>,
    /// What is left of the request's `content-length`, when it declared one.
    pub(super) content_left: Option<u64>,
    /// How much DATA the client may still send on the stream: the window it was granted, the
    /// upstream's on a relayed stream, the splice's own on one it answers (`client_credit`).
    pub(super) credit: Window,
    pub(super) _in_flight: InFlight,
    pub(super) side: Side,
}

/// How far a stream got (RFC 9113 §5.1, seen from the gateway): its request half and the
/// upstream's reply in one value, moved only by the transitions on `Stream`, as h2's
/// `proto/streams/state.rs` keeps it. A closed stream is no longer in the map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum State {
    /// open: the request still coming.
    Open(Reply),
    /// half-closed (remote): the client ended its request (END_STREAM, or trailers).
    ClientEnded(Reply),
    /// The gateway reads no more of the request: it answered the call before the request
    /// ended, or lost the upstream under it. What the client still sends is dropped.
    Unread(Reply),
}

/// How far the upstream's reply on a stream got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Reply {
    /// Nothing of it reached the client.
    Awaited,
    /// Its header block reached the client.
    Started,
    /// It ended (END_STREAM, a reset, or the splice let it go); `started`: its header block
    /// had reached the client.
    Ended { started: bool },
}

impl State {
    /// A new stream's: its request ended with its header block, or still coming.
    pub(super) fn new(end_stream: bool) -> State {
        match end_stream {
            true => State::ClientEnded(Reply::Awaited),
            false => State::Open(Reply::Awaited),
        }
    }

    fn reply(self) -> Reply {
        match self {
            State::Open(r) | State::ClientEnded(r) | State::Unread(r) => r,
        }
    }

    fn with_reply(self, reply: Reply) -> State {
        match self {
            State::Open(_) => State::Open(reply),
            State::ClientEnded(_) => State::ClientEnded(reply),
            State::Unread(_) => State::Unread(reply),
        }
    }
}

impl Stream {
    /// The request half is over: ended by the client, or no longer read.
    pub(super) fn request_done(&self) -> bool {
        !matches!(self.state, State::Open(_))
    }

    /// The client ended its half (RFC 9113 §5.1: half-closed (remote)).
    pub(super) fn client_ended(&self) -> bool {
        matches!(self.state, State::ClientEnded(_))
    }

    /// The upstream's reply head reached the client.
    pub(super) fn reply_started(&self) -> bool {
        matches!(
            self.state.reply(),
            Reply::Started | Reply::Ended { started: true }
        )
    }

    /// The upstream's reply on the stream is over.
    pub(super) fn reply_done(&self) -> bool {
        matches!(self.state.reply(), Reply::Ended { .. })
    }

    /// The client's END_STREAM (or trailers) ended the request.
    pub(super) fn end_request(&mut self) {
        self.state = State::ClientEnded(self.state.reply());
    }

    /// The gateway reads no more of the request. Returns whether the client was still
    /// sending it.
    pub(super) fn stop_reading(&mut self) -> bool {
        match self.state {
            State::Open(reply) => {
                self.state = State::Unread(reply);
                true
            }
            _ => false,
        }
    }

    /// The upstream's reply head reached the client.
    pub(super) fn start_reply(&mut self) {
        if self.state.reply() == Reply::Awaited {
            self.state = self.state.with_reply(Reply::Started);
        }
    }

    /// The upstream's reply is over.
    pub(super) fn end_reply(&mut self) {
        let started = self.reply_started();
        self.state = self.state.with_reply(Reply::Ended { started });
    }

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
    pub(super) fn stream_error(&mut self, id: StreamId, code: Reason, why: &'static str) {
        tracing::debug!(stream = %id, why, %code, "stream error: stream reset");
        self.to_client.rst_stream(id, code);
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
        id: StreamId,
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

    pub(super) fn remove(&mut self, id: StreamId) {
        if let Some(mut stream) = self.streams.remove(&id) {
            if stream.client_ended() {
                self.remember_closed(id);
            }
            if let Some(at) = stream.deadline() {
                self.timers.deadlines.remove(&(at, id));
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
            if matches!(stream.side, Side::Translated(_)) && !stream.reply_done() {
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
