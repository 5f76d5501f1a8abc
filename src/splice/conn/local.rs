//! Calls the splice answers itself (`call::answer`, on the gateway's shared upstream
//! connection): started once their request is whole, their replies written within the
//! client's windows.

use super::client_side::refund;
use super::*;

/// The calls the splice answers itself (`local`).
#[derive(Default)]
pub(super) struct LocalCalls {
    pub(super) calls: FuturesUnordered<LocalCall>,
    /// Local calls whose request is whole and that wait for room for their reply
    /// (`REPLY_ROOM`), oldest first, with since when: started once there is room, refused past
    /// `BUDGET_WAIT` or their deadline.
    pub(super) waiting_room: VecDeque<(StreamId, Instant)>,
    /// The one local call of this connection running without room reserved for its reply:
    /// a connection that holds nothing else (requests or replies) may always run one, so that
    /// a client that reads its replies (a Probe) is answered while others fill the budget.
    pub(super) free_call: Option<StreamId>,
    /// When the calls and service streams waiting for room look for it again: a fixed time,
    /// as the connection's timer fires only for a deadline that stays put.
    pub(super) room_retry: Option<Instant>,
    /// Local streams with reply frames still to send, in the order they were answered.
    pub(super) replying: VecDeque<StreamId>,
}

impl LocalCalls {
    /// A local call with no room for its reply waits (`waiting_room`).
    pub(super) fn wait_for_room(&mut self, id: StreamId) {
        if !self.waiting_room.iter().any(|&(w, _)| w == id) {
            tracing::debug!(stream = %id, "call waits for room for its reply");
            self.waiting_room.push_back((id, Instant::now()));
        }
    }

    /// Calls or service streams (`services_short`) wait for room: they look again in
    /// `BUDGET_RETRY` (room another connection makes is not announced).
    pub(super) fn note_short_of_room(&mut self, services_short: bool) {
        let short = !self.waiting_room.is_empty() || services_short;
        if short && self.room_retry.is_none() {
            self.room_retry = Some(Instant::now() + BUDGET_RETRY);
        }
    }
}

/// Room in the gateway's budget (`Shared::buffered`) a call it answers itself takes before it
/// starts: the largest reply such a (unary) call is expected to produce, a whole message. Its
/// reply is made whole before a byte of it is sent, so its room must be had first: else calls
/// whose replies no client reads would each hold theirs, past any budget. Exchanged for the
/// reply's real size once it is made. The price: at most `max_buffered_bytes / REPLY_ROOM`
/// such calls run at once in the whole gateway (64 at the 256 MiB default, 2 at the 8 MiB
/// least), the others wait for room (`waiting_room`), `BUDGET_WAIT` at most.
pub(super) const REPLY_ROOM: usize = MAX_MESSAGE_BYTES;

/// A call the splice answers itself: its stream, when it started, its report and outcome.
/// It ends early (CANCELLED) when its stream does: dropped, the upstream call is reset.
pub(super) type LocalCall = Pin<Box<dyn Future<Output = LocalOutcome> + Send>>;

pub(super) type LocalOutcome = (StreamId, Instant, Report, Result<Vec<u8>, Status>);

#[derive(Default)]
pub(super) struct Local {
    pub(super) body: BytesMut,
    /// The call is refused before it starts (a request or header list too large).
    pub(super) refused: Option<Status>,
    pub(super) timeout: Option<Duration>,
    /// What the client still accepts on this stream.
    pub(super) window: Window,
    pub(super) reply: Option<Reply>,
    /// Dropped with the stream: the running call ends then.
    pub(super) cancel: Option<tokio::sync::oneshot::Sender<()>>,
    /// The room its reply may take (`REPLY_ROOM`), reserved before the call starts: given
    /// back once the reply is made and held at its real size, or with the stream.
    pub(super) room: Option<Hold>,
}

impl Local {
    /// A DATA frame's `content` of the request: held until whole, on the connection's
    /// `requests` (dropped once refused or answered). Returns whether this frame made the
    /// call refused: a request larger than a message may be is answered at once.
    pub(super) fn take(&mut self, content: &[u8], requests: &mut Hold) -> bool {
        // Refused, or answered already (`start_local`): what comes is dropped.
        if self.refused.is_some() || self.cancel.is_some() {
            return false;
        }
        let refusal = if self.body.len() + content.len() > MAX_MESSAGE_BYTES + 5 {
            format!("request larger than {MAX_MESSAGE_BYTES} bytes")
        } else if requests.len() + content.len() > MAX_LOCAL_BODIES {
            // Only a client that sends past its window gets here (`CONNECTION_BUFFERED`).
            format!("the connection's calls hold {MAX_LOCAL_BODIES} bytes of requests already")
        } else {
            self.body.extend_from_slice(content);
            requests.add(content.len());
            return false;
        };
        let too_large = self.body.len() + content.len() > MAX_MESSAGE_BYTES + 5;
        self.refused = Some(Status::resource_exhausted(refusal));
        requests.release(std::mem::take(&mut self.body).len());
        too_large
    }
}

/// A local reply's frames still to go.
pub(super) struct Reply {
    pub(super) head: Option<Vec<u8>>,
    pub(super) data: Bytes,
    pub(super) trailers: Option<Vec<u8>>,
}

/// The frames of a reply the splice sends itself: the message with OK trailers, or the status
/// as a trailers-only reply. With `with_head` false (the client has the plugin's reply head
/// already) the same without its leading headers: a status alone then goes as trailers. The
/// first bytes of each block (a size update the client may wait for) are added when it is
/// written, in `send_replies`.
pub(super) fn reply_frames(outcome: Result<Vec<u8>, Status>, with_head: bool) -> Reply {
    let mut head = Vec::with_capacity(64);
    if with_head {
        headers::reply_head(&mut head);
    }
    match outcome {
        Ok(message) => {
            let mut trailers = Vec::with_capacity(16);
            status_fields(&mut trailers, &Status::ok(""));
            Reply {
                head: with_head.then_some(head),
                data: grpc_frame::encode(&message),
                trailers: Some(trailers),
            }
        }
        Err(s) => {
            status_fields(&mut head, &s);
            let (head, trailers) = match with_head {
                true => (Some(head), None),
                false => (None, Some(head)),
            };
            Reply {
                head,
                data: Bytes::new(),
                trailers,
            }
        }
    }
}

/// What the calls the splice answers itself work on: the calls, their streams, the
/// connection's flow and budget, and its surroundings — a borrow bundle of the connection's
/// parts (as h2's `DynConnection`), made by `Splice::answering`.
pub(super) struct Answering<'a> {
    pub(super) calls: &'a mut LocalCalls,
    pub(super) streams: &'a mut Streams,
    pub(super) flow: &'a mut Flow,
    pub(super) env: &'a Env,
}

impl Answering<'_> {
    /// A translated call's answer, sent by the splice as a local stream's reply (after the
    /// plugin's reply head, if that went to the client already).
    pub(super) fn reply_instead(
        &mut self,
        id: StreamId,
        answer: Result<Vec<u8>, Status>,
        head_sent: bool,
    ) {
        self.streams
            .drop_translated_reply(id, &mut self.flow.replies);
        let Some(stream) = self.streams.map.get_mut(&id) else {
            return;
        };
        let window = match &stream.side {
            Side::Translated(t) => t.window,
            Side::Local(l) => l.window,
            _ => return,
        };
        let reply = reply_frames(answer, !head_sent);
        let held = reply.data.len();
        stream.side = Side::Local(Local {
            window,
            reply: Some(reply),
            ..Local::default()
        });
        self.calls.replying.push_back(id);
        self.flow.replies.add(held);
    }
    /// Starts answering a local stream whose request is complete.
    pub(super) fn start(&mut self, id: StreamId) {
        // Not started already (its report is taken then), and not answered already: a
        // translated call whose plugin replied before the client's request ended
        // (`Asked::Relayed`) is never made a second time.
        let startable = self.streams.map.get(&id).is_some_and(|s| {
            s.report.is_some() && matches!(&s.side, Side::Local(l) if l.reply.is_none())
        });
        if !startable {
            return;
        }
        if !self.has_reply_room(id) {
            return self.calls.wait_for_room(id);
        }
        let Some(stream) = self.streams.map.get_mut(&id) else {
            return;
        };
        let (Side::Local(local), Some(mut report)) = (&mut stream.side, stream.report.take())
        else {
            return;
        };
        let body = std::mem::take(&mut local.body).freeze();
        // Off the connection's count, on the gateway's until the call ends with its request.
        let held = self.flow.requests.split(body.len());
        let started = stream.started;
        let refused = local.refused.take();
        let timeout = local.timeout;
        let shared = self.env.shared.clone();
        let identical = self.env.identical;
        let (cancel, mut cancelled) = tokio::sync::oneshot::channel();
        local.cancel = Some(cancel);
        self.calls.calls.push(Box::pin(async move {
            let _held = held;
            let outcome = if let Some(s) = refused {
                reply::error_reply(report.called, Origin::Client, s, &mut report)
            } else {
                let message = grpc_frame::decode_unary(&body).map(Bytes::copy_from_slice);
                tokio::select! {
                    biased;
                    _ = &mut cancelled => {
                        let s = Status::cancelled("the client reset the stream");
                        report.fail(Origin::Client, &s);
                        Err(s)
                    }
                    outcome = call::answer(&shared, identical, message, timeout, &mut report) => outcome,
                }
            };
            (id, started, report, outcome)
        }));
    }
    /// Whether local call `id` may start: room is reserved for its reply (`REPLY_ROOM`), or it
    /// is the one call a connection holding nothing else may run without (`free_call`), or it
    /// is refused (its reply is its status alone, which needs no room).
    fn has_reply_room(&mut self, id: StreamId) -> bool {
        let others = self.flow.holds();
        let Some(Side::Local(local)) = self.streams.map.get_mut(&id).map(|s| &mut s.side) else {
            return false;
        };
        if local.refused.is_some() || local.room.is_some() || self.calls.free_call == Some(id) {
            return true;
        }
        local.room = self.env.shared.buffered.reserve(REPLY_ROOM);
        if local.room.is_some() {
            return true;
        }
        if self.calls.free_call.is_some() || others > local.body.len() {
            return false;
        }
        self.calls.free_call = Some(id);
        true
    }
    /// Starts the waiting calls, oldest first, as long as the gateway has room for their
    /// replies.
    pub(super) fn admit_waiting(&mut self) -> bool {
        let mut started = false;
        while let Some(&(id, _)) = self.calls.waiting_room.front() {
            // Else gone, or answered otherwise meanwhile.
            let waits = matches!(
                self.streams.map.get(&id).map(|s| &s.side),
                Some(Side::Local(l)) if l.room.is_none() && l.reply.is_none()
            );
            if waits && !self.has_reply_room(id) {
                return started;
            }
            self.calls.waiting_room.pop_front();
            if waits {
                self.start(id);
                started = true;
            }
        }
        started
    }
    /// Refuses the waiting calls whose deadline passed (DEADLINE_EXCEEDED) or that waited
    /// `BUDGET_WAIT` for room (RESOURCE_EXHAUSTED): their requests are let go, and a client
    /// that does not read its replies cannot keep other calls waiting without end.
    pub(super) fn expire_waiting(&mut self) {
        let now = Instant::now();
        let mut refused = Vec::new();
        self.calls.waiting_room.retain(|&(id, since)| {
            let Some(stream) = self.streams.map.get(&id) else {
                return false;
            };
            let Side::Local(local) = &stream.side else {
                return false;
            };
            let deadline = local.timeout.and_then(|t| stream.started.checked_add(t));
            let status = if deadline.is_some_and(|at| at <= now) {
                Status::deadline_exceeded(format!(
                    "deadline of {:?} exceeded waiting for room in the gateway for its reply (max_buffered_bytes)",
                    local.timeout.unwrap_or_default()
                ))
            } else if now.duration_since(since) >= limits::BUDGET_WAIT {
                limits::no_reply_room()
            } else {
                return true;
            };
            refused.push((id, status));
            false
        });
        for (id, status) in refused {
            tracing::debug!(stream = %id, code = ?status.code(), "call refused: no room for its reply");
            if let Some(Side::Local(local)) = self.streams.map.get_mut(&id).map(|s| &mut s.side) {
                local.refused = Some(status);
                self.start(id);
            }
        }
    }
    /// A local call's outcome, turned into the frames of its reply.
    pub(super) fn answered(&mut self, (id, started, mut report, outcome): LocalOutcome) {
        if self.calls.free_call == Some(id) {
            self.calls.free_call = None;
        }
        let Some(stream) = self.streams.map.get_mut(&id) else {
            // The client reset the stream meanwhile: the call is reported, not answered.
            report.fail(
                Origin::Client,
                &Status::cancelled("the client reset the stream"),
            );
            return observe::finish(&report, started.elapsed(), &self.env.shared.redactor);
        };
        let Side::Local(local) = &mut stream.side else {
            return;
        };
        let reply = reply_frames(outcome, true);
        let held = reply.data.len();
        local.reply = Some(reply);
        // Its room is exchanged for what the reply really holds.
        let room = local.room.take();
        stream.report = Some(report);
        self.calls.replying.push_back(id);
        self.flow.replies.add(held);
        drop(room);
    }
}

impl<C: Io, U: Io> Splice<C, U> {
    /// The connection's own work after what was read was handled: the answers of its calls
    /// and services written within the client's windows, in pieces; calls waiting for room
    /// admitted; window withheld or owed given; a GOAWAY that waited for a header block sent.
    /// `true` if anything moved.
    pub(super) fn own_work(&mut self, cx: &mut Context<'_>) -> bool {
        let mut progress = false;
        // The splice's own answers go to the client in pieces too; the rest are taken on the
        // next turn.
        let piece = self.to_client.queued() + PIECE;
        while self.to_client.queued() < piece {
            let Poll::Ready(Some(done)) = self.local.calls.poll_next_unpin(cx) else {
                break;
            };
            progress = true;
            self.calls().answering().answered(done);
            self.calls().send_replies();
        }
        self.calls().send_replies();
        if !self.local.waiting_room.is_empty() {
            progress |= self.calls().answering().admit_waiting();
        }
        let budget = &self.env.shared.buffered;
        self.flow.grant_withheld(budget, &mut self.to_client);
        if self.flow.owed_upstream > 0 {
            let upstream = (!self.go_away.upstream_gone).then_some(&mut self.to_upstream);
            self.flow.settle_owed(upstream);
        }
        if !self.services.is_empty() {
            progress |= self.calls().poll_services(cx);
        }
        if self.go_away.going_away_later && self.blocks.reply_block.is_none() {
            self.go_away.going_away_later = false;
            self.go_away();
        }
        self.to_client.release();
        let idle = self.streams.map.is_empty() && self.local.calls.is_empty();
        self.timers.note_idle(idle);
        self.local.note_short_of_room(self.services.short_of_room());
        progress
    }
}

impl Calls<'_> {
    /// A DATA frame's `content` of a request the splice answers itself (its kind's DATA): held
    /// until whole, then the call starts; one past the message limit is answered at once, not
    /// read to its end (`send_replies` then resets the stream: NO_ERROR, the client stops
    /// sending).
    pub(super) fn local_data(&mut self, head: Head, content: &[u8]) {
        let own = self.to_client.own();
        let Some(stream) = self.streams.map.get_mut(&head.stream) else {
            return;
        };
        let Side::Local(local) = &mut stream.side else {
            return;
        };
        let refused_now = local.take(content, &mut self.flow.requests);
        refund(own, &mut stream.credit, head);
        let budget = &self.env.shared.buffered;
        self.flow.give_back(head.len as u32, budget, self.to_client);
        if head.has(frame::END_STREAM) || refused_now {
            self.answering().start(head.stream);
        }
    }

    /// Writes as much of the local replies as the client's windows allow, never inside a
    /// reply header block the upstream has begun.
    pub(super) fn send_replies(&mut self) {
        // Replies passed over, their stream's window spent: a client that does not read one
        // stream does not hold back the others' (a refusal waiting for room is trailers alone).
        let mut passed = 0;
        while let Some(&id) = self.local.replying.front() {
            if passed >= self.local.replying.len() {
                return;
            }
            if self.blocks.reply_block.is_some() || self.settings.client_unacked() {
                return;
            }
            let out = self.to_client.replies();
            let Some(Stream {
                side: Side::Local(local),
                ..
            }) = self.streams.map.get_mut(&id)
            else {
                self.local.replying.pop_front();
                continue;
            };
            let Some(reply) = local.reply.as_mut() else {
                self.local.replying.pop_front();
                continue;
            };
            if out.len() >= HIGH_WATER {
                return; // the client reads slowly: the rest waits here, counted
            }
            let only_head = reply.data.is_empty() && reply.trailers.is_none();
            if let Some(head) = reply.head.take() {
                let mut block = Vec::with_capacity(head.len() + 4);
                self.blocks.upstream_decoder.own_block(&mut block);
                block.extend_from_slice(&head);
                frame::put_headers(out, id, &block, only_head, self.settings.client_max_frame);
            }
            let mut stream_spent = false;
            while !reply.data.is_empty() {
                let room = self
                    .flow
                    .window
                    .available()
                    .min(local.window.available())
                    .min(self.settings.client_max_frame);
                if self.flow.window.available() == 0 {
                    return; // wait for the client's WINDOW_UPDATE
                }
                if room == 0 {
                    stream_spent = true;
                    break;
                }
                let piece = reply.data.split_to(room.min(reply.data.len()));
                frame::put(out, Kind::Data, 0, id, &piece);
                // Within both windows: `room` is at most what each has.
                let spent = self.flow.window.consume(piece.len());
                let spent_too = local.window.consume(piece.len());
                debug_assert!(spent.is_ok() && spent_too.is_ok());
                self.flow.debt += piece.len() as u64;
                self.flow.replies.release(piece.len());
                if out.len() >= HIGH_WATER {
                    break;
                }
            }
            if stream_spent {
                self.local.replying.pop_front();
                self.local.replying.push_back(id);
                passed += 1;
                continue;
            }
            if !reply.data.is_empty() {
                return;
            }
            if let Some(trailers) = reply.trailers.take() {
                let mut block = Vec::with_capacity(trailers.len() + 4);
                self.blocks.upstream_decoder.own_block(&mut block);
                block.extend_from_slice(&trailers);
                frame::put_headers(out, id, &block, true, self.settings.client_max_frame);
            }
            self.local.replying.pop_front();
            let request_done = self.streams.map.get(&id).is_some_and(|s| s.request_done());
            if !request_done {
                // Answered before the client finished (a refused oversized request).
                self.to_client.rst_stream(id, reason::NO_ERROR);
            }
            // Its outcome is in its report already.
            self.remove(id);
        }
    }

    /// Ends a call on the upstream with the gateway's `s` in place of the plugin's reply.
    /// Before its reply began, the call is answered in its front dialect, as on every path
    /// (for the draft, an OK reply carrying a retryable error), and sent within the client's
    /// windows like the splice's own replies. After, trailers end it. A client still sending
    /// its request is told to stop (RST_STREAM NO_ERROR, RFC 9113 §8.1).
    pub(super) fn answer_instead(&mut self, id: StreamId, s: &Status) {
        self.streams
            .drop_translated_reply(id, &mut self.flow.replies);
        let Some(stream) = self.streams.map.get_mut(&id) else {
            return;
        };
        let encoded = match (stream.reply_started(), stream.report.as_mut()) {
            (false, Some(report)) => {
                reply::error_reply(report.called, Origin::Gateway, s.clone(), report)
            }
            (_, report) => {
                if let Some(report) = report {
                    report.fail(Origin::Gateway, s);
                }
                Err(s.clone())
            }
        };
        if let (false, Ok(message)) = (stream.reply_started(), &encoded) {
            let reply = reply_frames(Ok(message.clone()), true);
            let held = reply.data.len();
            stream.side = Side::Local(Local {
                window: self.settings.client_initial_window,
                reply: Some(reply),
                ..Local::default()
            });
            self.local.replying.push_back(id);
            self.flow.replies.add(held);
            return;
        }
        let status = encoded.err().unwrap_or_else(|| s.clone());
        let mut block = Vec::with_capacity(128);
        self.blocks.upstream_decoder.own_block(&mut block);
        if !stream.reply_started() {
            headers::reply_head(&mut block);
        }
        status_fields(&mut block, &status);
        let still_sending = stream.stop_reading();
        let max_frame = self.settings.client_max_frame;
        self.to_client.headers(id, &block, true, max_frame);
        if still_sending {
            self.to_client.rst_stream(id, reason::NO_ERROR);
        }
        self.reply_ended(id, Some(status.code()));
    }
}
