//! The client's side: its bytes read into frames, each frame checked (RFC 9113) and
//! handled, and a request header block routed (`call::plan`) to the kind of stream that takes
//! it: relayed (`relayed.rs`), translated (`translated.rs`), answered here (`local.rs`) or a
//! service's (`service_streams.rs`).

use super::*;

impl<C: Io, U: Io> Splice<C, U> {
    pub(super) fn on_client_bytes(&mut self) -> Result<(), Broken> {
        if !self.preface {
            if self.from_client.len() < frame::PREFACE.len() {
                return match frame::PREFACE.starts_with(&self.from_client) {
                    true => Ok(()),
                    false => Err(Broken::Client(
                        "not the HTTP/2 preface",
                        reason::PROTOCOL_ERROR,
                    )),
                };
            }
            if !self.from_client.starts_with(frame::PREFACE) {
                return Err(Broken::Client(
                    "not the HTTP/2 preface",
                    reason::PROTOCOL_ERROR,
                ));
            }
            self.to_upstream.extend_from_slice(frame::PREFACE);
            self.from_client.advance(frame::PREFACE.len());
            self.preface = true;
            self.timers.upstream_asked = Some(self.now);
        }
        // The buffer is taken out while its frames are handled in place, then put back.
        let mut buf = std::mem::take(&mut self.from_client);
        let before = buf.len();
        let piece = self.to_upstream.len() + PIECE;
        let handled = take_frames(&mut buf, |head, whole| {
            if self.to_upstream.len() >= piece {
                self.client_unhandled = true;
                return Ok(false);
            }
            self.on_client_frame(head, whole).map(|()| true)
        });
        if buf.len() < before {
            // Every frame it began is whole: what is left is a new one.
            self.timers.frame_since = None;
        }
        self.from_client = buf;
        handled?;
        // A frame only partly read, of any kind, is timed from its first byte: a client that
        // trickles a frame (a DATA frame byte by byte, say) is held to header_block_timeout as
        // one that never ends a header block, whatever else it sends.
        if !self.from_client.is_empty() && !self.client_unhandled {
            self.timers.frame_since = self.timers.frame_since.or(Some(self.now));
        }
        if self.from_client.len() >= frame::HEAD_LEN {
            let head = Head::parse(&self.from_client);
            // Refused before it is buffered (RFC 9113 §4.2).
            if head.len > self.settings.client_frame_limit {
                return Err(Broken::Client("frame too large", reason::FRAME_SIZE_ERROR));
            }
            // A header frame only partly read is a header block begun: a client trickling one
            // byte by byte is held to header_block_timeout as one that never ends its block.
            let partial = self.from_client.len() < frame::HEAD_LEN + head.len;
            if partial && matches!(head.kind, Kind::Headers | Kind::Continuation) {
                self.timers.block_since = self.timers.block_since.or(Some(self.now));
            }
            self.from_client.reserve(frame::HEAD_LEN + head.len);
        }
        Ok(())
    }

    /// Whether a client's reset of stream `id` counts against the reset budget: not when the
    /// call's own deadline has passed (a gRPC client resets a call it gave up on at its
    /// deadline; 500 calls expiring together are no rapid-reset attack).
    /// Nor a reset of a stream already ended here (answered, or past its deadline): it cost
    /// the gateway and the plugin nothing more.
    pub(super) fn reset_counted(&self, id: StreamId) -> bool {
        let slack = Duration::from_millis(RESET_SLACK_MS);
        self.streams
            .get(&id)
            .is_some_and(|s| s.deadline().is_none_or(|at| self.now + slack < at))
    }

    /// One more counted reset: past `max_resets_per_second` on this connection, or on all of
    /// the gateway's together (a client spreading resets over connections).
    pub(super) fn too_many_resets(&mut self) -> bool {
        let per_second = self.limits.max_resets_per_second;
        let here = self.resets.exceeded(self.now, per_second);
        let all = self
            .shared
            .resets
            .lock()
            .map(|mut r| r.exceeded(self.now, per_second))
            .unwrap_or(false);
        here || all
    }

    pub(super) fn on_client_frame(&mut self, head: Head, whole: &[u8]) -> Result<(), Broken> {
        let payload = &whole[frame::HEAD_LEN..];
        // Moved on in steps, so the connection's timer is not re-armed on every frame.
        let request = matches!(head.kind, Kind::Headers | Kind::Continuation | Kind::Data);
        if request && self.now.saturating_duration_since(self.timers.client_heard) >= HEARD_STEP {
            self.timers.client_heard = self.now;
        }
        if head.len > self.settings.client_frame_limit {
            return Err(Broken::Client("frame too large", reason::FRAME_SIZE_ERROR));
        }
        frame::check(&head, payload).map_err(|(what, code)| Broken::Client(what, code))?;
        if !self.settings.client_seen {
            if head.kind != Kind::Settings || head.has(frame::ACK) {
                return Err(Broken::Client(
                    "the preface is not followed by SETTINGS",
                    reason::PROTOCOL_ERROR,
                ));
            }
            self.settings.client_seen = true;
        }
        if self.request_block.is_some() && head.kind != Kind::Continuation {
            return Err(Broken::Client(
                "header block interrupted",
                reason::PROTOCOL_ERROR,
            ));
        }
        match head.kind {
            Kind::Headers => {
                let range = frame::content(&head, payload).map_err(|_| malformed())?;
                let end_stream = head.has(frame::END_STREAM);
                if head.has(frame::END_HEADERS) {
                    self.timers.block_since = None;
                    self.on_request_block(head.stream, end_stream, &payload[range], whole)?;
                    if frame::depends_on_itself(&head, payload) {
                        self.stream_error(head.stream, reason::PROTOCOL_ERROR, "depends on itself");
                    }
                } else {
                    // From the block's first byte, however slowly its frames came.
                    self.timers.block_since = self.timers.block_since.or(Some(self.now));
                    self.request_block = Some(Block {
                        stream: head.stream,
                        end_stream,
                        bytes: payload[range].to_vec(),
                        frames: whole.to_vec(),
                        passes: false,
                    });
                }
            }
            Kind::Continuation => {
                let Some(block) = self.request_block.as_mut() else {
                    return Err(Broken::Client(
                        "CONTINUATION without HEADERS",
                        reason::PROTOCOL_ERROR,
                    ));
                };
                if block.stream != head.stream {
                    return Err(Broken::Client(
                        "CONTINUATION on another stream",
                        reason::PROTOCOL_ERROR,
                    ));
                }
                if block.frames.len() + whole.len() > MAX_HEADER_BLOCK {
                    return Err(Broken::Client(
                        "header block too large",
                        reason::ENHANCE_YOUR_CALM,
                    ));
                }
                block.bytes.extend_from_slice(payload);
                block.frames.extend_from_slice(whole);
                if head.has(frame::END_HEADERS) {
                    let b = self.request_block.take().expect("checked above");
                    self.timers.block_since = None;
                    self.on_request_block(b.stream, b.end_stream, &b.bytes, &b.frames)?;
                }
            }
            Kind::Data => self.on_client_data(head, whole)?,
            Kind::Settings if head.has(frame::ACK) => {
                // The client applies what the gateway passed on from the upstream: so may the
                // upstream now rely on the client's acknowledgement.
                if let Some((table, lowered)) = self.settings.unacked_by_client.pop_front() {
                    if let Some(window) = lowered {
                        self.set_stream_window(window);
                    }
                    if let Some(size) = table {
                        let size = size as usize;
                        if size < self.client_decoder.table_max() {
                            self.settings.upstream_expects_update = Some(size);
                        }
                        self.client_decoder.table_size_acknowledged(size as u32);
                    }
                    if !self.go_away.upstream_gone {
                        frame::put(
                            &mut self.to_upstream,
                            Kind::Settings,
                            frame::ACK,
                            StreamId::CONNECTION,
                            &[],
                        );
                    }
                }
            }
            Kind::Settings => self.client_settings(payload)?,
            Kind::Ping => self.client_ping(&head, payload),
            Kind::WindowUpdate => {
                let n = frame::increment(payload).map_err(|_| malformed())?;
                self.client_window_update(head.stream, n, whole)?;
            }
            Kind::RstStream => {
                let code = frame::rst_reason(payload).map_err(|_| malformed())?;
                self.idle_stream_check(head.stream, "RST_STREAM")?;
                if self.reset_counted(head.stream) && self.too_many_resets() {
                    return Err(Broken::Client(
                        "too many streams reset",
                        reason::ENHANCE_YOUR_CALM,
                    ));
                }
                match self
                    .streams
                    .get(&head.stream)
                    .map(|s| matches!(s.side, Side::Relayed))
                {
                    Some(true) => {
                        self.to_upstream.extend_from_slice(whole);
                        let why = cancelled_by_client(code);
                        self.end_stream(head.stream, Code::Cancelled, Origin::Client, why);
                    }
                    // A local call the client gave up on ends here (its upstream call is
                    // dropped with the stream); its reply is not sent.
                    Some(false) => {
                        let why = cancelled_by_client(code);
                        self.end_stream(head.stream, Code::Cancelled, Origin::Client, why)
                    }
                    None => {}
                }
            }
            Kind::Priority => {
                if head.len != 5 {
                    self.to_client
                        .rst_stream(head.stream, reason::FRAME_SIZE_ERROR);
                } else if frame::depends_on_itself(&head, payload) {
                    // RFC 9113 §5.3.1 (RFC 7540's priority, still a stream error to answer).
                    if self.streams.contains_key(&head.stream) {
                        self.stream_error(head.stream, reason::PROTOCOL_ERROR, "depends on itself");
                    } else {
                        self.to_client
                            .rst_stream(head.stream, reason::PROTOCOL_ERROR);
                    }
                } else if self
                    .streams
                    .get(&head.stream)
                    .is_some_and(|s| matches!(s.side, Side::Relayed))
                {
                    self.to_upstream.extend_from_slice(whole);
                }
            }
            Kind::PushPromise => {
                return Err(Broken::Client(
                    "PUSH_PROMISE from a client",
                    reason::PROTOCOL_ERROR,
                ))
            }
            // The client's GOAWAY concerns streams the gateway would start: it starts none.
            // Extension frames are per hop, and the gateway knows none (RFC 9113 §5.5).
            Kind::GoAway | Kind::Unknown(_) => {}
        }
        let ends = match head.kind {
            Kind::Data | Kind::Headers => head.has(frame::END_STREAM),
            Kind::RstStream => true,
            _ => false,
        };
        if ends && !head.stream.is_connection() {
            self.client_ended(head.stream);
        }
        Ok(())
    }

    /// The client closed its half of stream `id` (END_STREAM) or reset it: remembered once the
    /// stream has ended (see `client_closed`).
    pub(super) fn client_ended(&mut self, id: StreamId) {
        match self.streams.get_mut(&id) {
            Some(stream) => stream.end_request(),
            None => self.remember_closed(id),
        }
    }

    pub(super) fn remember_closed(&mut self, id: StreamId) {
        // Once: a stream ended while its END_STREAM was being handled is remembered by both.
        if self.client_closed.back() == Some(&id) {
            return;
        }
        self.client_closed.push_back(id);
        if self.client_closed.len() > RESET_REMEMBERED {
            self.client_closed.pop_front();
        }
    }

    /// A frame on a stream the client never opened (RFC 9113 §5.1: idle).
    pub(super) fn idle_stream_check(
        &self,
        stream: StreamId,
        what: &'static str,
    ) -> Result<(), Broken> {
        if stream > self.last_stream || !stream.is_client() {
            let _ = what;
            return Err(Broken::Client(
                "frame on an idle stream",
                reason::PROTOCOL_ERROR,
            ));
        }
        Ok(())
    }

    pub(super) fn on_client_data(&mut self, head: Head, whole: &[u8]) -> Result<(), Broken> {
        let payload = &whole[frame::HEAD_LEN..];
        let end = head.has(frame::END_STREAM);
        if !self.within_window(head.stream, head.len)? {
            return Ok(());
        }
        if !self.streams.contains_key(&head.stream) {
            self.idle_stream_check(head.stream, "DATA")?;
            // Data for a stream that has ended: drop it, but give back the window it used.
            if head.len > 0 {
                self.grant(StreamId::CONNECTION, head.len as u32);
            }
            if self.client_closed.contains(&head.stream) {
                self.to_client
                    .rst_stream(head.stream, reason::STREAM_CLOSED);
            }
            return Ok(());
        }
        if self.content_length_broken(head, payload)? {
            // Not passed on: its window is the splice's to give back.
            self.grant(StreamId::CONNECTION, head.len as u32);
            self.stream_error(head.stream, reason::PROTOCOL_ERROR, CONTENT_LENGTH);
            return Ok(());
        }
        let stream = &self.streams[&head.stream];
        let (too_large, verdict, reply_translated) = match &stream.side {
            Side::Translated(t) if t.credit + head.len as u64 > MAX_TRANSLATED_REQUEST => {
                (!t.asked.sent(), Verdict::Translated, false)
            }
            Side::Translated(t) => (
                false,
                self.check_request(stream, t, head, payload),
                t.reply_translated,
            ),
            _ => (false, Verdict::Translated, false),
        };
        // A request that passed a check whose revisions number its fields differently goes on
        // renumbered (`identical::RequestCheck::renumber`), in the copy the upstream gets.
        let renumber = match (&stream.side, verdict) {
            (Side::Translated(t), Verdict::Copied | Verdict::CopiedWithSecrets) => {
                t.check.filter(|c| c.renumbers())
            }
            _ => None,
        };
        if too_large {
            // Answered through `call::answer` instead, which takes it whatever its size.
            self.translated_to_local(head.stream);
        }
        match verdict {
            // Relayed below, as everything after it both ways.
            Verdict::Copied if !reply_translated => self.turn_relayed(head.stream),
            // Relayed below as it came; the reply is translated for the method alone: a rule
            // about the reply applies, or an error must be scrubbed of the secrets read from
            // the request, whatever the log level.
            Verdict::Copied | Verdict::CopiedWithSecrets => {
                if let Some(Stream {
                    side: Side::Translated(t),
                    report: Some(report),
                    ..
                }) = self.streams.get_mut(&head.stream)
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
        let own = self.to_client.own();
        let stream = self.streams.get_mut(&head.stream).expect("checked above");
        if stream.request_done() {
            frame::put_window_update(own, StreamId::CONNECTION, head.len as u32);
            self.flow.client_credit.refund(head.len);
            // A stream error (RFC 9113 §5.1, half-closed): answered here for every stream, a
            // relayed one too (a plugin may answer it by closing its whole connection). DATA
            // after the splice itself ended the request is dropped, as frames in flight are.
            if stream.client_ended() {
                self.stream_error(head.stream, reason::STREAM_CLOSED, "DATA after END_STREAM");
            }
            return Ok(());
        }
        if end {
            stream.end_request();
        }
        if end {
            self.served.mark();
        }
        match &mut stream.side {
            Side::Translated(t) if !t.asked.relayed() => {
                let range = frame::content(&head, payload).map_err(|_| malformed())?;
                if !end {
                    t.body.extend_from_slice(&payload[range.clone()]);
                }
                // The connection's share pays for what the upstream gets (`send_translated`).
                t.credit += head.len as u64;
                if head.len > 0 && !end {
                    frame::put_window_update(own, head.stream, head.len as u32);
                    stream.credit.refund(head.len);
                }
                if end {
                    self.send_translated(head.stream, &payload[range]);
                }
            }
            // A relayed request, or a translated call's relayed as it came (`Asked::Relayed`).
            Side::Relayed | Side::Translated(_) => self.relay_data(head, whole, renumber)?,
            Side::Local(local) => {
                let range = frame::content(&head, payload).map_err(|_| malformed())?;
                let (mut held, mut dropped) = (0, 0);
                let mut refused_now = false;
                // Refused, or answered already (`start_local`): what comes is dropped.
                if local.refused.is_some() || local.cancel.is_some() {
                } else if local.body.len() + range.len() > MAX_MESSAGE_BYTES + 5 {
                    local.refused = Some(Status::resource_exhausted(format!(
                        "request larger than {MAX_MESSAGE_BYTES} bytes"
                    )));
                    dropped = local.body.len();
                    local.body = BytesMut::new();
                    refused_now = true;
                } else if self.flow.local_bodies + range.len() > MAX_LOCAL_BODIES {
                    // Only a client that sends past its window gets here (`CONNECTION_BUFFERED`).
                    local.refused = Some(Status::resource_exhausted(format!(
                        "the connection's calls hold {MAX_LOCAL_BODIES} bytes of requests already"
                    )));
                    dropped = local.body.len();
                    local.body = BytesMut::new();
                } else {
                    held = range.len();
                    local.body.extend_from_slice(&payload[range]);
                }
                // The splice consumed it: the credit comes from here, not the upstream. The
                // stream's at once (one message is bounded); the connection's once the
                // connection and the gateway may hold more (`give_back`).
                if head.len > 0 && !end {
                    frame::put_window_update(own, head.stream, head.len as u32);
                    stream.credit.refund(head.len);
                }
                self.let_go(dropped);
                self.hold(held);
                self.give_back(head.len as u32);
                // A request past the message limit is answered at once, not read to its end
                // (`send_replies` then resets the stream: NO_ERROR, the client stops sending).
                if end || refused_now {
                    self.start_local(head.stream);
                }
            }
            Side::Service => {
                let range = frame::content(&head, payload).map_err(|_| malformed())?;
                let content = &payload[range];
                self.services.data(head.stream, content, head.len, end, own);
                self.services_granted();
                self.count_services();
                // Given back as the connection and the gateway may hold more, as for a local
                // call's request.
                self.give_back(head.len as u32);
            }
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
        let Some(stream) = self.streams.get_mut(&head.stream) else {
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

    /// A request header block, complete: `frames` are the HEADERS and CONTINUATION frames
    /// that carried it.
    pub(super) fn on_request_block(
        &mut self,
        id: StreamId,
        end_stream: bool,
        bytes: &[u8],
        frames: &[u8],
    ) -> Result<(), Broken> {
        // The connection's first request block is kept whole: its `:authority` decides whether
        // the upstream can have the client's blocks as they came (see `localize`).
        let keep = self.reencode || self.last_stream.is_connection();
        let mut request = headers::request(&mut self.client_decoder, bytes, keep)
            .map_err(|_| Broken::Client("undecodable header block", reason::COMPRESSION_ERROR))?;
        if request.size > limits::HEADER_LIST_ABUSE * self.limits.max_header_list_size as usize {
            return Err(Broken::Client(
                "header list far over the limit",
                reason::ENHANCE_YOUR_CALM,
            ));
        }
        if id.is_connection() {
            return Err(Broken::Client(
                "HEADERS on stream 0",
                reason::PROTOCOL_ERROR,
            ));
        }
        if self.streams.contains_key(&id) {
            // Trailers must end the stream and hold no pseudo-header (RFC 9113 §8.1).
            let short = self.streams[&id].content_left.is_some_and(|n| n > 0);
            let malformed = match end_stream {
                false => Some("trailers without END_STREAM"),
                true if short => Some(CONTENT_LENGTH),
                true => request.malformed_trailers,
            };
            // Nor come after the client ended its half (RFC 9113 §5.1: half-closed).
            let closed = self.streams[&id].client_ended();
            let error = match (closed, malformed) {
                (true, _) => Some((reason::STREAM_CLOSED, "HEADERS after END_STREAM")),
                (false, Some(why)) => Some((reason::PROTOCOL_ERROR, why)),
                (false, None) => None,
            };
            if let Some((code, why)) = error {
                // Not passed on: the upstream's decoding context no longer follows.
                self.reencode = true;
                self.stream_error(id, code, why);
                return Ok(());
            }
        }
        if let Some(stream) = self.streams.get_mut(&id) {
            // Trailers from the client end its half of the stream.
            stream.end_request();
            self.served.mark();
            match stream.side {
                Side::Relayed => {
                    self.forward_request_block(id, end_stream, bytes, frames, request, true)
                }
                Side::Local(_) => {
                    self.reencode = true;
                    self.start_local(id);
                }
                Side::Translated(ref t) if !t.asked.relayed() => {
                    self.reencode = true;
                    self.send_translated(id, &[]);
                }
                // Its request relayed as it came (`Asked::Relayed`).
                Side::Translated(_) => {
                    self.forward_request_block(id, end_stream, bytes, frames, request, true)
                }
                Side::Service => {
                    self.reencode = true;
                    self.services.end_requests(id);
                }
            }
            return Ok(());
        }
        if id <= self.last_stream || !id.is_client() {
            return Err(Broken::Client("stream id not new", reason::PROTOCOL_ERROR));
        }
        self.last_stream = id;
        // A malformed request is a stream error (RFC 9113 §8.1.1), on every path: what a
        // server behind the splice would answer, also for calls the splice answers itself.
        let no_content = end_stream && request.content_length.is_some_and(|n| n > 0);
        let malformed = match no_content {
            true => Some("a content-length and no DATA"),
            false => request.malformed,
        };
        if let Some(why) = malformed {
            tracing::debug!(
                stream = %id,
                why,
                "malformed request: stream reset (PROTOCOL_ERROR)"
            );
            self.reencode = true;
            self.to_client.rst_stream(id, reason::PROTOCOL_ERROR);
            return Ok(());
        }
        if self.go_away.going_away.is_some_and(|last| id > last) {
            self.reencode = true;
            self.to_client.rst_stream(id, reason::REFUSED_STREAM);
            return Ok(());
        }
        let path = request.path.take().unwrap_or_default();
        let head = plan::Head {
            path: &path,
            header_list: request.size,
            authorization: self.authorization.as_ref(),
        };
        let (route, service, refused) = match plan::admit(&self.shared, &head) {
            Admission::Call(route) => (Some(route), None, None),
            Admission::Service(handler) => (None, Some(handler), None),
            Admission::Unknown => (None, None, None),
            Admission::Refused(route, s) => (route, None, Some(s)),
        };
        let planned = match (route, &refused) {
            (Some(r), None) => {
                let live = self.live.as_ref();
                live.map(|live| {
                    plan::plan(
                        &r,
                        live.detected.dialect,
                        live.session.requires_staging,
                        !end_stream,
                    )
                })
            }
            _ => None,
        };
        // Relayed on this connection's own upstream connection while it can take the call's
        // head: as it came, or on the plugin's path (a wire-identical call, or one translated
        // here, whose head goes on now and its message once whole, `send_translated`).
        let rewrite = match planned {
            Some(Plan::Relay { rewrite }) => rewrite,
            Some(Plan::TranslateHere(inline)) => Some(inline.path),
            _ => None,
        };
        let inline = match planned {
            Some(Plan::TranslateHere(inline)) => Some(inline),
            _ => None,
        };
        let relayed = !self.go_away.upstream_gone
            && !self.go_away.upstream_draining
            && match (planned, rewrite) {
                (Some(Plan::Answer) | None, _) => false,
                (_, None) => self.localize(&mut request, keep),
                (_, Some(to)) => self.rewrite_path(&mut request, keep, &path, to),
            };
        if self.streams.len() >= self.limits.max_concurrent_streams as usize
            || (!relayed && self.local_streams() >= MAX_LOCAL_CALLS)
        {
            self.reencode = true;
            self.to_client.rst_stream(id, reason::REFUSED_STREAM);
            return Ok(());
        }
        if let Some(handler) = &service {
            self.services.open(
                id,
                handler,
                &path,
                request.timeout,
                self.settings.client_initial_window,
                end_stream,
            );
        }
        let mut report = Report::new(path);
        report.bridge_peer = self.authorization.is_some();
        report.called = route.map(|r| r.called());
        // Counted and logged as the translated call it stands for.
        report.translated = relayed && rewrite.is_some();
        report.service = service
            .as_ref()
            .map(|_| services::method_name(&report.path));
        if let Some(live) = &self.live {
            report.upstream_dialect = Some(live.detected.dialect);
            report.driver = Some(live.driver_name.clone());
        }
        let side = if let (true, Some(inline), Some(route)) = (relayed, inline, route) {
            self.own_streams = true;
            let window = self.settings.client_initial_window;
            let spare = self.spare.pop();
            Side::Translated(Translated::start(
                spare,
                route,
                request.timeout,
                window,
                inline,
            ))
        } else if relayed {
            Side::Relayed
        } else if service.is_some() {
            Side::Service
        } else {
            Side::Local(Local {
                timeout: request.timeout,
                window: self.settings.client_initial_window,
                refused,
                ..Local::default()
            })
        };
        let starts_local = end_stream && matches!(side, Side::Local(_));
        if end_stream {
            self.served.mark();
        }
        let content_length = request.content_length;
        // The splice's own calls keep their deadlines themselves (`call::answer`,
        // `local_stream`); the upstream's are kept here.
        let timeout = request.timeout.filter(|_| side.on_upstream());
        if relayed {
            self.forward_request_block(id, end_stream, bytes, frames, request, false);
        } else {
            // The upstream never sees this block: from now on, its decoding context no longer
            // follows the client's, and forwarded blocks are re-encoded.
            self.reencode = true;
        }
        self.streams.insert(
            id,
            Stream {
                started: self.now,
                report: Some(report),
                state: State::new(end_stream),
                timeout,
                content_left: content_length,
                credit: self.settings.client_stream_window,
                _in_flight: InFlight::start(),
                side,
            },
        );
        if let Some(at) = self.streams[&id].deadline() {
            self.timers.deadlines.insert((at, id));
        }
        if starts_local {
            self.start_local(id);
        }
        Ok(())
    }
}
