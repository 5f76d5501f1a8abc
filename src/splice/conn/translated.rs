//! Calls translated on the connection's own upstream connection (`Route::inline_call`): the
//! request checked or translated once whole, the reply translated once it ends.

use super::client_side::refund;
use super::*;
use crate::translate::identical::RequestCheck;

/// A call translated on the splice's own upstream connection (`Route::inline_call`): its
/// request head went on with the plugin's path; its message is translated once whole, and the
/// plugin's reply once it ends.
pub(super) struct Translated {
    pub(super) route: Route,
    /// The plugin path the head named.
    pub(super) path: &'static str,
    pub(super) body: BytesMut,
    pub(super) timeout: Option<Duration>,
    /// Connection window the client's DATA took: it pays for the translated message the
    /// upstream gets, and the rest is given back then.
    pub(super) credit: u64,
    /// What the plugin was asked, which its reply is translated for.
    pub(super) asked: Asked,
    pub(super) reply: BytesMut,
    /// The plugin's reply was larger than a message may be.
    pub(super) reply_too_large: bool,
    /// Reply bytes the upstream's stream window lacks (given back past half of it).
    pub(super) reply_unacked: u32,
    /// What the client still accepts on this stream.
    pub(super) window: Window,
    /// The plugin ended its reply before the request was sent (it refused the call on its
    /// head alone): its status.
    pub(super) early: Option<CallError>,
    /// For a call wire-identical but for what its request may hold, the check its request
    /// must pass to go on as it came (`Splice::check_request`).
    pub(super) check: Option<&'static crate::translate::identical::RequestCheck>,
    /// Such a call's reply is translated all the same (`Inline::reply_translated`).
    pub(super) reply_translated: bool,
}

/// What a translated call's plugin was asked.
pub(super) enum Asked {
    /// Nothing yet: the request is translated once whole (`send_translated`).
    Not,
    /// The hub request, translated and sent.
    Hub(Box<crate::hub::Request>),
    /// The client's request, relayed as it came, its reply translated for the method alone:
    /// neither revision's request for this method has a field (`Inline::empty_request`), or
    /// the request passed its check with secrets (`Verdict::CopiedWithSecrets`), which reach
    /// the reply's translation only through the request as it came (`observe::scrub`).
    Relayed(crate::hub::Method),
}

impl Asked {
    pub(super) fn sent(&self) -> bool {
        !matches!(self, Asked::Not)
    }

    /// The client's request goes on as it came.
    pub(super) fn relayed(&self) -> bool {
        matches!(self, Asked::Relayed(_))
    }
}

impl Translated {
    /// A new call's state: in `spare`, an ended call's box, when there is one, whose box and
    /// buffers are used again.
    pub(super) fn start(
        spare: Option<Box<Translated>>,
        route: Route,
        timeout: Option<Duration>,
        window: Window,
        inline: Inline,
    ) -> Box<Translated> {
        let fresh = |mut body: BytesMut, mut reply: BytesMut| {
            body.clear();
            reply.clear();
            Translated {
                route,
                path: inline.path,
                body,
                timeout,
                credit: 0,
                asked: inline.empty_request.map_or(Asked::Not, Asked::Relayed),
                reply,
                reply_too_large: false,
                reply_unacked: 0,
                window,
                early: None,
                check: inline.check,
                reply_translated: inline.reply_translated,
            }
        };
        match spare {
            Some(mut t) => {
                let (body, reply) = (std::mem::take(&mut t.body), std::mem::take(&mut t.reply));
                *t = fresh(body, reply);
                t
            }
            None => Box::new(fresh(BytesMut::new(), BytesMut::new())),
        }
    }
}

impl Translated {
    /// A DATA frame's `content` (`len` bytes with padding) of a request translated here: kept
    /// until the request is whole (its last piece is translated from the frame, `end`); the
    /// connection window it took pays for what the upstream gets (`send_translated`).
    pub(super) fn take(&mut self, content: &[u8], len: usize, end: bool) {
        if !end {
            self.body.extend_from_slice(content);
        }
        self.credit += len as u64;
    }

    /// Whether this client DATA frame starts a translated call's request that goes on as it
    /// came (`Translated::check`): the first of the request, holding its whole message, which
    /// the translation would copy, and nothing of the plugin's reply yet (not even a block
    /// begun). A request that comes in pieces is translated, as is any call once something of
    /// it was.
    /// `reply_block`: the upstream's reply header block midway, if any.
    pub(super) fn check_request(
        &self,
        stream: &Stream,
        reply_block: Option<&Block>,
        head: Head,
        payload: &[u8],
    ) -> Verdict {
        let t = self;
        let Some(check) = t.check else {
            return Verdict::Translated;
        };
        // No DATA yet (the body holds only what the credit paid for).
        let untouched = t.credit == 0 && !t.asked.sent() && t.early.is_none();
        let replying = stream.reply_started()
            || stream.reply_done()
            || reply_block.is_some_and(|b| b.stream == head.stream);
        // A renumbered request must end with this frame: a message after it would reach the
        // plugin with the front's numbers.
        let whole = !check.renumbers() || head.has(frame::END_STREAM);
        match frame::content(&head, payload) {
            Ok(range) if untouched && !replying && !stream.request_done() && whole => {
                check.verdict(&payload[range])
            }
            _ => Verdict::Translated,
        }
    }
}

/// How many ended translated calls' boxes a splice keeps (`Splice::spare`), and the largest
/// buffer kept with one: enough for a burst of calls in flight, without holding on to the
/// memory of an occasional large message.
pub(super) const SPARE_TRANSLATED: usize = 256;

pub(super) const SPARE_BUFFER: usize = 16 * 1024;

/// The largest request translated on the splice's upstream connection: a larger one is
/// answered through `call::answer`, since its window is given back to the client only once
/// it is whole.
pub(super) const MAX_TRANSLATED_REQUEST: u64 = 16 * 1024;

impl Calls<'_> {
    /// A DATA frame on a translated call: the first of a request that passes its check
    /// (`Translated::check_request`) makes the call relayed as it came; one that makes the
    /// request too large to translate here makes it a local call. Returns the check whose
    /// renumbering the frame's copy to the upstream needs, if any.
    pub(super) fn first_translated_data(
        &mut self,
        head: Head,
        payload: &[u8],
    ) -> Option<&'static RequestCheck> {
        let stream = &self.streams.map[&head.stream];
        let Side::Translated(t) = &stream.side else {
            return None;
        };
        if t.credit + head.len as u64 > MAX_TRANSLATED_REQUEST {
            if !t.asked.sent() {
                // Answered through `call::answer` instead, which takes it whatever its size.
                self.translated_to_local(head.stream);
            }
            return None;
        }
        let verdict = t.check_request(stream, self.blocks.reply_block.as_ref(), head, payload);
        // A request that passed a check whose revisions number its fields differently goes on
        // renumbered (`identical::RequestCheck::renumber`), in the copy the upstream gets.
        let renumber = match verdict {
            Verdict::Copied | Verdict::CopiedWithSecrets => t.check.filter(|c| c.renumbers()),
            Verdict::Translated => None,
        };
        match verdict {
            // Relayed, as everything after it both ways.
            Verdict::Copied if !t.reply_translated => self.turn_relayed(head.stream),
            // Relayed as it came; the reply is translated for the method alone: a rule about
            // the reply applies, or an error must be scrubbed of the secrets read from the
            // request, whatever the log level.
            Verdict::Copied | Verdict::CopiedWithSecrets => {
                let stream = self
                    .streams
                    .map
                    .get_mut(&head.stream)
                    .expect("looked up above");
                if let (Side::Translated(t), Some(report)) = (&mut stream.side, &mut stream.report)
                {
                    if let Some(method) = t.route.hub {
                        t.asked = Asked::Relayed(method);
                        report.request = frame::content(&head, payload)
                            .ok()
                            .and_then(|range| first_message(&payload[range]));
                    }
                }
            }
            Verdict::Translated => {}
        }
        renumber
    }

    /// A DATA frame's `content` of a request translated here (its kind's DATA): kept until the
    /// request is whole, then translated and sent (`send_translated`).
    pub(super) fn translated_data(&mut self, head: Head, content: &[u8]) {
        let own = self.to_client.own();
        let Some(stream) = self.streams.map.get_mut(&head.stream) else {
            return;
        };
        let Side::Translated(t) = &mut stream.side else {
            return;
        };
        let end = head.has(frame::END_STREAM);
        t.take(content, head.len, end);
        refund(own, &mut stream.credit, head);
        if end {
            self.send_translated(head.stream, content);
        }
    }

    /// Makes a translated call whose request's first DATA frame passed its check
    /// (`check_request`) the relayed call it is wire-identical to: that frame and everything
    /// after it go on as they came, both ways. What the client gave the stream's window beyond
    /// its start came to the splice, which sent nothing on the stream: the plugin gets it.
    pub(super) fn turn_relayed(&mut self, id: StreamId) {
        self.streams
            .drop_translated_reply(id, &mut self.flow.replies);
        let Some(stream) = self.streams.map.get_mut(&id) else {
            return;
        };
        if !matches!(stream.side, Side::Translated(_)) {
            return;
        }
        let Side::Translated(t) = std::mem::replace(&mut stream.side, Side::Relayed) else {
            return;
        };
        let given = t.window.granted_past(self.settings.client_initial_window);
        if given > 0 {
            frame::put_window_update(self.to_upstream, id, given);
        }
        self.streams.recycle(t);
    }

    /// Sends a translated call's message once its request is whole: translated for the plugin
    /// (`call::inline_request`) and paid for with the connection window the client's DATA took,
    /// the rest given back to the client. A call that is not the one call its head named, or
    /// whose message is larger than that window, is answered by the splice itself.
    /// `last` is the request's last piece, not in its body yet: a request that came in one
    /// DATA frame (most) is translated from that frame, never copied.
    pub(super) fn send_translated(&mut self, id: StreamId, last: &[u8]) {
        let Some(live) = self.env.live.clone() else {
            // Only a connection with an upstream of its own translates calls on it.
            self.translated_to_local(id);
            return self.answering().start(id);
        };
        let Some(stream) = self.streams.map.get_mut(&id) else {
            return;
        };
        let head_sent = stream.reply_started();
        let (Side::Translated(t), Some(report)) = (&mut stream.side, stream.report.as_mut()) else {
            return;
        };
        if t.asked.sent() {
            return;
        }
        if !t.body.is_empty() {
            t.body.extend_from_slice(last);
        }
        let body = if t.body.is_empty() { last } else { &t.body[..] };
        let outcome = call::inline_request(&live, t.route, t.path, body, report);
        if !matches!(outcome, call::Inline::Call(..)) && t.body.is_empty() {
            // Answered by the splice after all, which wants the request whole.
            t.body.extend_from_slice(last);
        }
        if let Some(early) = t.early.take() {
            // The plugin answered already: its answer, translated.
            let answer = match outcome {
                call::Inline::Call(request, _) => call::inline_reply(
                    &self.env.shared,
                    &live,
                    t.route,
                    &request,
                    Err(early),
                    report,
                ),
                call::Inline::Answer(answer) => answer,
                call::Inline::Fallback => {
                    self.translated_to_local(id);
                    return self.answering().start(id);
                }
            };
            self.release_translated(id);
            return self.answering().reply_instead(id, answer, head_sent);
        }
        match outcome {
            call::Inline::Call(request, message)
                if (grpc_frame::HEADER + message.len()) as u64 <= t.credit
                    && grpc_frame::HEADER + message.len()
                        <= self.settings.upstream_initial_window.available() =>
            {
                let refund = t.credit - (grpc_frame::HEADER + message.len()) as u64;
                t.credit = 0;
                t.body.clear();
                t.asked = Asked::Hub(request);
                frame::put_message(
                    self.to_upstream,
                    id,
                    &message,
                    frame::END_STREAM,
                    self.settings.upstream_max_frame,
                );
                if refund > 0 {
                    self.flow
                        .give_back(refund as u32, &self.env.shared.buffered, self.to_client);
                }
            }
            call::Inline::Answer(answer) => {
                self.release_translated(id);
                self.answering().reply_instead(id, answer, head_sent);
            }
            // Answered by the splice itself after all (`call::answer`).
            _ => {
                self.translated_to_local(id);
                self.answering().start(id);
            }
        }
    }

    /// A translated call answered by the splice itself after all: the plugin's stream is
    /// reset (nothing of it reaches the client), the client gets back the window its DATA
    /// took, and the stream becomes a local one with what it has of its request.
    pub(super) fn translated_to_local(&mut self, id: StreamId) {
        self.streams
            .drop_translated_reply(id, &mut self.flow.replies);
        // Given back with what the local call holds (`give_back`), not at once.
        let credit = match self.streams.map.get_mut(&id).map(|s| &mut s.side) {
            Some(Side::Translated(t)) => std::mem::take(&mut t.credit),
            _ => 0,
        };
        self.release_translated(id);
        let Some(stream) = self.streams.map.get_mut(&id) else {
            return;
        };
        let Side::Translated(t) = &mut stream.side else {
            return;
        };
        let local = Local {
            body: std::mem::take(&mut t.body),
            timeout: t.timeout,
            window: t.window,
            ..Local::default()
        };
        let held = local.body.len();
        stream.side = Side::Local(local);
        self.flow.requests.add(held);
        self.flow
            .give_back(credit as u32, &self.env.shared.buffered, self.to_client);
    }

    /// Lets go of a translated call's stream on the upstream (reset, unless its reply ended)
    /// and gives the client back the window its DATA took.
    pub(super) fn release_translated(&mut self, id: StreamId) {
        let Some(stream) = self.streams.map.get_mut(&id) else {
            return;
        };
        let upstream_done = stream.reply_done();
        let Side::Translated(t) = &mut stream.side else {
            return;
        };
        let credit = std::mem::take(&mut t.credit);
        // Marked done: `remove` resets it no more.
        stream.end_reply();
        if !upstream_done {
            self.reset_on_upstream(id);
        }
        if credit > 0 {
            self.flow
                .give_back(credit as u32, &self.env.shared.buffered, self.to_client);
        }
    }

    /// A translated call's reply ended (`reply` holds its trailers' status, `frames` the
    /// trailers as they came): translated for the client. An answer the plugin's trailers fit
    /// goes as its message and those trailers, at once when the client's windows allow; any
    /// other as the splice's own reply.
    pub(super) fn translated_ended(
        &mut self,
        id: StreamId,
        reply: headers::Reply,
        frames: &[u8],
        changed: bool,
    ) {
        let settings_unacked = self.settings.client_unacked();
        let Some(stream) = self.streams.map.get_mut(&id) else {
            return;
        };
        stream.end_reply();
        let head_sent = stream.reply_started();
        let (Side::Translated(t), Some(report)) = (&mut stream.side, stream.report.as_mut()) else {
            return;
        };
        // The plugin's reply, and what is wrong with it, are its own.
        let plugin_status = match code_of(reply.code) {
            Some(Code::Ok) if t.reply_too_large => Err(Status::resource_exhausted(format!(
                "the plugin's reply is larger than {MAX_MESSAGE_BYTES} bytes"
            ))),
            Some(Code::Ok) => Ok(()),
            Some(code) => Err(Status::new(code, reply.message.unwrap_or_default())),
            None => Err(Status::unknown(
                "upstream reply ended without a gRPC status",
            )),
        }
        .map_err(CallError::upstream);
        // Left in place, where it marks the request as sent.
        let request = match &t.asked {
            Asked::Hub(request) => &**request,
            // Its reply's translation reads the method alone (`translate::identical`'s tests).
            Asked::Relayed(method) => crate::translate::identical::empty_request(*method),
            Asked::Not => {
                // Before its request went: answered once the request is whole (`send_translated`).
                t.early = Some(plugin_status.err().unwrap_or_else(|| {
                    let s = Status::internal("the plugin answered before the request was sent");
                    CallError::upstream(s)
                }));
                if changed {
                    self.blocks.part_replies();
                }
                return;
            }
        };
        // Not split into upstream time and overhead, as for a relayed call: the splice waits
        // on nothing for it.
        report.code = Code::Ok;
        let plugin = plugin_status
            .and_then(|()| grpc_frame::decode_unary(&t.reply).map_err(CallError::upstream));
        let answer = match plugin {
            // A checked call's reply is wire-identical unless a rule reads it
            // (`translate::identical::checked`): else only an error needs the translation, to
            // scrub it.
            Ok(message) if t.check.is_some() && !t.reply_translated => Ok(message.to_vec()),
            plugin => match &self.env.live {
                Some(live) => {
                    call::inline_reply(&self.env.shared, live, t.route, request, plugin, report)
                }
                // Never: only a connection with an upstream of its own translates on it.
                None => Err(Status::unavailable("no upstream connection")),
            },
        };
        if let (Ok(message), Some(Code::Ok), true, false) = (
            &answer,
            code_of(reply.code),
            head_sent,
            self.blocks.reencode_replies,
        ) {
            let len = grpc_frame::HEADER + message.len();
            let room = self.to_client.queued() < HIGH_WATER;
            let fits = len <= self.flow.window.available().min(t.window.available());
            if fits && !settings_unacked && room {
                frame::put_message(
                    self.to_client.out(),
                    id,
                    message,
                    0,
                    self.settings.client_max_frame,
                );
                let spent = self.flow.window.consume(len);
                debug_assert!(spent.is_ok(), "within the window: `fits`");
                self.flow.debt += len as u64;
                self.to_client.pass(frames);
                if observe::bodies_enabled() {
                    report.response = Some(Bytes::copy_from_slice(message));
                }
                return self.reply_ended(id, Some(Code::Ok));
            }
        }
        if changed {
            self.blocks.part_replies();
        }
        self.answering().reply_instead(id, answer, head_sent);
    }
}
