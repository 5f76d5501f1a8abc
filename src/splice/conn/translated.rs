//! Calls translated on the connection's own upstream connection (`Route::inline_call`): the
//! request checked or translated once whole, the reply translated once it ends.

use super::*;

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

/// How many ended translated calls' boxes a splice keeps (`Splice::spare`), and the largest
/// buffer kept with one: enough for a burst of calls in flight, without holding on to the
/// memory of an occasional large message.
pub(super) const SPARE_TRANSLATED: usize = 256;

pub(super) const SPARE_BUFFER: usize = 16 * 1024;

/// The largest request translated on the splice's upstream connection: a larger one is
/// answered through `call::answer`, since its window is given back to the client only once
/// it is whole.
pub(super) const MAX_TRANSLATED_REQUEST: u64 = 16 * 1024;

impl<C: Io, U: Io> Splice<C, U> {
    /// Whether this client DATA frame starts a translated call's request that goes on as it
    /// came (`Translated::check`): the first of the request, holding its whole message, which
    /// the translation would copy, and nothing of the plugin's reply yet (not even a block
    /// begun). A request that comes in pieces is translated, as is any call once something of
    /// it was.
    pub(super) fn check_request(
        &self,
        stream: &Stream,
        t: &Translated,
        head: Head,
        payload: &[u8],
    ) -> Verdict {
        let Some(check) = t.check else {
            return Verdict::Translated;
        };
        // No DATA yet (the body holds only what the credit paid for).
        let untouched = t.credit == 0 && !t.asked.sent() && t.early.is_none();
        let replying = stream.reply_started()
            || stream.reply_done()
            || self
                .reply_block
                .as_ref()
                .is_some_and(|b| b.stream == head.stream);
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

    /// Makes a translated call whose request's first DATA frame passed its check
    /// (`check_request`) the relayed call it is wire-identical to: that frame and everything
    /// after it go on as they came, both ways. What the client gave the stream's window beyond
    /// its start came to the splice, which sent nothing on the stream: the plugin gets it.
    pub(super) fn turn_relayed(&mut self, id: StreamId) {
        self.drop_translated_reply(id);
        let Some(stream) = self.streams.get_mut(&id) else {
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
            frame::put_window_update(&mut self.to_upstream, id, given);
        }
        self.recycle(t);
    }

    /// Sends a translated call's message once its request is whole: translated for the plugin
    /// (`call::inline_request`) and paid for with the connection window the client's DATA took,
    /// the rest given back to the client. A call that is not the one call its head named, or
    /// whose message is larger than that window, is answered by the splice itself.
    /// `last` is the request's last piece, not in its body yet: a request that came in one
    /// DATA frame (most) is translated from that frame, never copied.
    pub(super) fn send_translated(&mut self, id: StreamId, last: &[u8]) {
        let Some(live) = self.live.clone() else {
            // Only a connection with an upstream of its own translates calls on it.
            return self.fall_back(id);
        };
        let Some(stream) = self.streams.get_mut(&id) else {
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
                call::Inline::Call(request, _) => {
                    call::inline_reply(&self.shared, &live, t.route, &request, Err(early), report)
                }
                call::Inline::Answer(answer) => answer,
                call::Inline::Fallback => return self.fall_back(id),
            };
            self.release_translated(id);
            return self.reply_translated(id, answer, head_sent);
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
                    &mut self.to_upstream,
                    id,
                    &message,
                    frame::END_STREAM,
                    self.settings.upstream_max_frame,
                );
                if refund > 0 {
                    self.give_back(refund as u32);
                }
            }
            call::Inline::Answer(answer) => {
                self.release_translated(id);
                self.reply_translated(id, answer, head_sent);
            }
            _ => self.fall_back(id),
        }
    }

    /// A translated call takes `call::answer`'s path after all.
    pub(super) fn fall_back(&mut self, id: StreamId) {
        self.translated_to_local(id);
        self.start_local(id);
    }

    /// A translated call answered by the splice itself after all: the plugin's stream is
    /// reset (nothing of it reaches the client), the client gets back the window its DATA
    /// took, and the stream becomes a local one with what it has of its request.
    pub(super) fn translated_to_local(&mut self, id: StreamId) {
        self.drop_translated_reply(id);
        // Given back with what the local call holds (`give_back`), not at once.
        let credit = match self.streams.get_mut(&id).map(|s| &mut s.side) {
            Some(Side::Translated(t)) => std::mem::take(&mut t.credit),
            _ => 0,
        };
        self.release_translated(id);
        let Some(stream) = self.streams.get_mut(&id) else {
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
        self.hold(held);
        self.give_back(credit as u32);
    }

    /// Lets go of a translated call's stream on the upstream (reset, unless its reply ended)
    /// and gives the client back the window its DATA took.
    pub(super) fn release_translated(&mut self, id: StreamId) {
        let Some(stream) = self.streams.get_mut(&id) else {
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
            self.give_back(credit as u32);
        }
    }

    /// A translated call's reply as it came from the plugin is no longer needed (answered, or
    /// the stream becomes another kind): let go.
    pub(super) fn drop_translated_reply(&mut self, id: StreamId) {
        let Some(Side::Translated(t)) = self.streams.get_mut(&id).map(|s| &mut s.side) else {
            return;
        };
        let n = t.reply.len();
        t.reply.clear();
        self.let_go_reply(n);
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
        let settings_unacked = self.client_settings_unacked();
        let Some(stream) = self.streams.get_mut(&id) else {
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
                    self.part_replies();
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
            plugin => match &self.live {
                Some(live) => {
                    call::inline_reply(&self.shared, live, t.route, request, plugin, report)
                }
                // Never: only a connection with an upstream of its own translates on it.
                None => Err(Status::unavailable("no upstream connection")),
            },
        };
        if let (Ok(message), Some(Code::Ok), true, false) = (
            &answer,
            code_of(reply.code),
            head_sent,
            self.reencode_replies,
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
            self.part_replies();
        }
        self.reply_translated(id, answer, head_sent);
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
}
