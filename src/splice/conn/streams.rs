//! A stream's state (`Stream`, `State`, `Side`) and its end: its reply finished or reset,
//! counted and logged, its state removed.

use super::*;

/// The streams, and what the connection remembers of those that ended (`streams`).
pub(super) struct Streams {
    /// Looked up on every frame: foldhash, at a fraction of SipHash's cost. At most
    /// `max_concurrent_streams` entries, which bounds what ids chosen to collide could cost.
    pub(super) map: foldhash::HashMap<StreamId, Stream>,
    /// The highest stream id the client opened.
    pub(super) last: StreamId,
    /// The connection has had a stream the splice opened on the upstream for itself (a
    /// translated call) or reset there: from then on the upstream's stream frames are sorted
    /// (`passes_on`) rather than all passed on.
    pub(super) own: bool,
    /// Streams the splice reset on the upstream (most recent last): frames the upstream sent
    /// before it saw the reset are dropped, not passed to the client.
    pub(super) reset_upstream: VecDeque<StreamId>,
    /// Streams whose half the client closed (END_STREAM, RST_STREAM) and that have since
    /// ended, most recent last: a later DATA on one is a stream error STREAM_CLOSED (RFC 9113
    /// §5.1; a HEADERS is a reused id, a connection error). DATA on a stream the splice ended
    /// while the client was still sending is dropped instead, as frames in flight may be.
    pub(super) closed: VecDeque<StreamId>,
    /// Ended translated calls' state, kept for the next ones (see `recycle`): boxed, as
    /// `Side::Translated` holds it, so that the box is what is used again.
    #[allow(clippy::vec_box)]
    pub(super) spare: Vec<Box<Translated>>,
    /// Relayed calls that ended, with when they started: counted and logged once this turn's
    /// bytes are written, so that no reply waits on the bookkeeping of the calls before it.
    pub(super) ended: Vec<(Report, Instant)>,
    /// The deadlines (`grpc-timeout`) of the calls on the upstream, soonest first, with their
    /// streams: the connection's one timer is set to the first (`Timeout::Call`).
    pub(super) deadlines: BTreeSet<(Instant, StreamId)>,
}

impl Default for Streams {
    fn default() -> Streams {
        Streams {
            map: HashMap::default(),
            last: StreamId::CONNECTION,
            own: false,
            reset_upstream: VecDeque::new(),
            closed: VecDeque::new(),
            spare: Vec::new(),
            ended: Vec::new(),
            deadlines: BTreeSet::new(),
        }
    }
}

impl Streams {
    /// Whether a client's reset of stream `id` counts against the reset budget: not when the
    /// call's own deadline has passed (a gRPC client resets a call it gave up on at its
    /// deadline; 500 calls expiring together are no rapid-reset attack).
    /// Nor a reset of a stream already ended here (answered, or past its deadline): it cost
    /// the gateway and the plugin nothing more.
    pub(super) fn reset_counted(&self, id: StreamId, now: Instant) -> bool {
        let slack = Duration::from_millis(RESET_SLACK_MS);
        self.map
            .get(&id)
            .is_some_and(|s| s.deadline().is_none_or(|at| now + slack < at))
    }
    /// The client closed its half of stream `id` (END_STREAM) or reset it: remembered once the
    /// stream has ended (see `client_closed`).
    pub(super) fn client_ended(&mut self, id: StreamId) {
        match self.map.get_mut(&id) {
            Some(stream) => stream.end_request(),
            None => self.remember_closed(id),
        }
    }
    /// Remembers a stream whose half the client closed, once it ended (see `closed`).
    pub(super) fn remember_closed(&mut self, id: StreamId) {
        // Once: a stream ended while its END_STREAM was being handled is remembered by both.
        if self.closed.back() == Some(&id) {
            return;
        }
        self.closed.push_back(id);
        if self.closed.len() > RESET_REMEMBERED {
            self.closed.pop_front();
        }
    }
    /// A frame on a stream the client never opened (RFC 9113 §5.1: idle).
    pub(super) fn idle_check(&self, stream: StreamId) -> Result<(), Broken> {
        if stream > self.last || !stream.is_client() {
            return Err(Broken::Client(
                "frame on an idle stream",
                reason::PROTOCOL_ERROR,
            ));
        }
        Ok(())
    }
    /// Counts a client DATA frame against its stream's `content-length`: `true` if it goes
    /// past it, or ends the request short of it (RFC 9113 §8.1.1: malformed).
    pub(super) fn content_length_broken(
        &mut self,
        head: Head,
        payload: &[u8],
    ) -> Result<bool, Broken> {
        let Some(stream) = self.map.get_mut(&head.stream) else {
            return Ok(false);
        };
        if stream.request_done() {
            return Ok(false);
        }
        let Some(left) = stream.content_left.as_mut() else {
            return Ok(false);
        };
        let len = frame::content(&head, payload)
            .map_err(|_| malformed())?
            .len() as u64;
        if len > *left || (head.has(frame::END_STREAM) && len < *left) {
            return Ok(true);
        }
        *left -= len;
        Ok(false)
    }
    /// Streams the splice answers itself: its calls and its services'.
    pub(super) fn answered_here(&self) -> usize {
        self.map
            .values()
            .filter(|s| matches!(s.side, Side::Local(_) | Side::Service))
            .count()
    }
    /// Keeps an ended translated call's box and buffers for the next one: a translated call
    /// otherwise allocates and frees both (~700 instructions of ~9.4k; callgrind).
    pub(super) fn recycle(&mut self, mut t: Box<Translated>) {
        let small = t.body.capacity() <= SPARE_BUFFER && t.reply.capacity() <= SPARE_BUFFER;
        if small && self.spare.len() < SPARE_TRANSLATED {
            // What a reset call left is freed now, not when the box is used again.
            t.asked = Asked::Not;
            t.early = None;
            self.spare.push(t);
        }
    }
    /// Logs and counts the relayed calls that ended. A spliced call's time is not split into
    /// upstream time and overhead: the splice never waits on the upstream for it, it only
    /// passes frames along.
    pub(super) fn report_ended(&mut self, redactor: &observe::Redactor) {
        if self.ended.is_empty() {
            return;
        }
        let now = Instant::now();
        for (report, started) in self.ended.drain(..) {
            observe::finish(&report, now - started, redactor);
        }
    }
    /// Counts the stream window the gateway's services gave the client (`Stream::credit`).
    pub(super) fn services_granted(&mut self, services: &mut ServiceStreams) {
        for (id, n) in services.drain_granted() {
            if let Some(s) = self.map.get_mut(&id) {
                // Past 2^31-1 only if the client broke flow control, which `within_window`
                // answers when it sends.
                let _ = s.credit.increase(n);
            }
        }
    }

    /// The client's SETTINGS_INITIAL_WINDOW_SIZE moved by `delta`: so do the windows of the
    /// streams the gateway sends on itself. `Err` if one goes past 2^31-1.
    pub(super) fn adjust_own_windows(&mut self, delta: i64) -> Result<(), WindowError> {
        for s in self.map.values_mut() {
            match &mut s.side {
                Side::Local(l) => l.window.adjust(delta)?,
                Side::Translated(t) => t.window.adjust(delta)?,
                _ => {}
            }
        }
        Ok(())
    }

    /// Every stream's credit moved as the client moves its windows (RFC 9113 §6.9.2). One the
    /// upstream's values take past 2^31-1 the client answers as a connection error; the
    /// credit stays where it was, past what the client may send anyway.
    pub(super) fn move_credits(&mut self, delta: i64) {
        for s in self.map.values_mut() {
            let _ = s.credit.adjust(delta);
        }
    }

    /// A translated call's reply as it came from the plugin is no longer needed (answered, or
    /// the stream becomes another kind): let go of what `replies` held of it.
    pub(super) fn drop_translated_reply(&mut self, id: StreamId, replies: &mut Hold) {
        if let Some(Side::Translated(t)) = self.map.get_mut(&id).map(|s| &mut s.side) {
            replies.release(t.reply.len());
            t.reply.clear();
        }
    }

    /// Whether an upstream frame of a stream goes on to the client as it came. Those of the
    /// streams the splice opened for itself stay here, but for a translated call's reply head;
    /// so do those of the streams it reset there, and header blocks the client gets
    /// re-encoded (`reencode_replies`).
    pub(super) fn passes_on(&self, head: &Head, blocks: &Blocks) -> bool {
        if blocks.reencode_replies && matches!(head.kind, Kind::Headers | Kind::Continuation) {
            return false;
        }
        if !self.own {
            return true;
        }
        if head.kind == Kind::Continuation {
            return blocks.reply_block.as_ref().is_some_and(|b| b.passes);
        }
        match self.map.get(&head.stream).map(|s| &s.side) {
            Some(Side::Relayed) => true,
            // A request relayed as it came is paced by the plugin's window, as a relayed one.
            Some(side @ Side::Translated(_)) => match head.kind {
                Kind::Headers => !head.has(frame::END_STREAM),
                Kind::WindowUpdate => side.relays_request(),
                _ => false,
            },
            Some(_) => false,
            None => !self.reset_upstream.contains(&head.stream),
        }
    }

    /// Remembers a stream the splice reset on the upstream (see `reset_upstream`).
    pub(super) fn remember_reset(&mut self, id: StreamId) {
        self.reset_upstream.push_back(id);
        if self.reset_upstream.len() > RESET_REMEMBERED {
            self.reset_upstream.pop_front();
        }
    }
}

pub(super) struct Stream {
    pub(super) started: Instant,
    pub(super) report: Option<Report>,
    pub(super) state: State,
    /// The client's `grpc-timeout`, for a call on the upstream (see `Streams::deadlines`).
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
    /// Served by one of the gateway's own services, as a stream (`service`).
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

impl Calls<'_> {
    /// Resets a stream the splice opened on the upstream, and remembers it (`reset_upstream`).
    /// A stream error of the client's (RFC 9113 §5.4.2) on a stream the gateway knows: reset
    /// with `code` to the client and on the upstream, and ended.
    pub(super) fn stream_error(&mut self, id: StreamId, code: Reason, why: &'static str) {
        tracing::debug!(stream = %id, why, %code, "stream error: stream reset");
        self.to_client.rst_stream(id, code);
        if self
            .streams
            .map
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
        if let Some(report) = self
            .streams
            .map
            .get_mut(&id)
            .and_then(|s| s.report.as_mut())
        {
            report.code = code;
            report.origin = Some(origin);
            if message.is_some() {
                report.message = message;
            }
        }
        self.remove(id);
    }

    pub(super) fn remove(&mut self, id: StreamId) {
        if let Some(mut stream) = self.streams.map.remove(&id) {
            if stream.client_ended() {
                self.streams.remember_closed(id);
            }
            if let Some(at) = stream.deadline() {
                self.streams.deadlines.remove(&(at, id));
            }
            if matches!(stream.side, Side::Service) {
                self.services.remove(id);
                self.flow.services.set(self.services.held());
            }
            // What a local call still held of its request (reset before it ended), and of its
            // reply; what a translated call held of the plugin's reply.
            match &stream.side {
                Side::Local(local) => {
                    self.flow.requests.release(local.body.len());
                    let reply = local.reply.as_ref().map_or(0, |r| r.data.len());
                    self.flow.replies.release(reply);
                }
                Side::Translated(t) => self.flow.replies.release(t.reply.len()),
                _ => {}
            }
            if matches!(stream.side, Side::Translated(_)) && !stream.reply_done() {
                // Ended before the plugin's reply did (the client reset it, say).
                self.reset_on_upstream(id);
            }
            if let Some(report) = stream.report.take() {
                self.streams.ended.push((report, stream.started));
            }
            if let Side::Translated(t) = stream.side {
                self.streams.recycle(t);
            }
        }
    }
}
