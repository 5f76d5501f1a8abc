//! The client's side: its bytes read into frames, each frame checked (RFC 9113) and
//! handled, and a request header block routed (`call::plan`) to the kind of stream that takes
//! it: relayed (`relayed.rs`), translated (`translated.rs`), answered here (`local.rs`) or a
//! service's (`service_streams.rs`).

use super::*;

impl<C: Io, U: Io> Splice<C, U> {
    /// Reads and handles the client's bytes while the upstream and the client keep up with
    /// what was read before. `Some(progress)`; `None` once the connection ends (the client
    /// hung up, or broke the protocol).
    pub(super) fn read_client(&mut self, cx: &mut Context<'_>) -> Option<bool> {
        let upstream_full = self.to_upstream.len() >= HIGH_WATER && !self.go_away.upstream_gone;
        if upstream_full {
            // The client is not read while the plugin takes its time: a frame or header block
            // the client began waits on the plugin, not on the client.
            self.timers.restart_client();
        }
        if upstream_full || self.to_client.len() >= 2 * HIGH_WATER {
            return Some(false);
        }
        // What was read is handled before more is read.
        let more = std::mem::take(&mut self.client.unhandled)
            || match self.client.io.read_into(&mut self.client.read, cx) {
                Poll::Ready(Some(_)) => {
                    self.now = Instant::now();
                    true
                }
                Poll::Ready(None) => return None,
                Poll::Pending => false,
            };
        if more {
            if let Err(e) = self.on_client_bytes() {
                let _ = self.fail(e);
                return None;
            }
        }
        Some(more)
    }

    pub(super) fn on_client_bytes(&mut self) -> Result<(), Broken> {
        if !self.client.preface {
            if self.client.read.len() < frame::PREFACE.len() {
                return match frame::PREFACE.starts_with(&self.client.read) {
                    true => Ok(()),
                    false => Err(Broken::Client(
                        "not the HTTP/2 preface",
                        reason::PROTOCOL_ERROR,
                    )),
                };
            }
            if !self.client.read.starts_with(frame::PREFACE) {
                return Err(Broken::Client(
                    "not the HTTP/2 preface",
                    reason::PROTOCOL_ERROR,
                ));
            }
            self.to_upstream.extend_from_slice(frame::PREFACE);
            self.client.read.advance(frame::PREFACE.len());
            self.client.preface = true;
            self.timers.upstream_asked = Some(self.now);
        }
        // The buffer is taken out while its frames are handled in place, then put back.
        let mut buf = std::mem::take(&mut self.client.read);
        let before = buf.len();
        let piece = self.to_upstream.len() + PIECE;
        let handled = take_frames(&mut buf, |head, whole| {
            if self.to_upstream.len() >= piece {
                self.client.unhandled = true;
                return Ok(false);
            }
            self.on_client_frame(head, whole).map(|()| true)
        });
        if buf.len() < before {
            // Every frame it began is whole: what is left is a new one.
            self.timers.frame_since = None;
        }
        self.client.read = buf;
        handled?;
        // A frame only partly read, of any kind, is timed from its first byte: a client that
        // trickles a frame (a DATA frame byte by byte, say) is held to header_block_timeout as
        // one that never ends a header block, whatever else it sends.
        if !self.client.read.is_empty() && !self.client.unhandled {
            self.timers.frame_since = self.timers.frame_since.or(Some(self.now));
        }
        if self.client.read.len() >= frame::HEAD_LEN {
            let head = Head::parse(&self.client.read);
            // Refused before it is buffered (RFC 9113 §4.2).
            if head.len > self.settings.client_frame_limit {
                return Err(Broken::Client("frame too large", reason::FRAME_SIZE_ERROR));
            }
            // A header frame only partly read is a header block begun: a client trickling one
            // byte by byte is held to header_block_timeout as one that never ends its block.
            let partial = self.client.read.len() < frame::HEAD_LEN + head.len;
            if partial && matches!(head.kind, Kind::Headers | Kind::Continuation) {
                self.timers.block_since = self.timers.block_since.or(Some(self.now));
            }
            self.client.read.reserve(frame::HEAD_LEN + head.len);
        }
        Ok(())
    }

    /// One whole frame of the client's: checked (RFC 9113 §4, §5.5, §6), then handed to what
    /// owns its concern.
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
        if self.blocks.request_block.is_some() && head.kind != Kind::Continuation {
            return Err(Broken::Client(
                "header block interrupted",
                reason::PROTOCOL_ERROR,
            ));
        }
        match head.kind {
            Kind::Headers | Kind::Continuation => self.on_client_headers(head, whole)?,
            Kind::Data => self.calls().on_client_data(head, whole)?,
            Kind::Settings if head.has(frame::ACK) => self.client_settings_ack(),
            Kind::Settings => self.client_settings(payload)?,
            // An ACK from the client is none of the gateway's business: it sends it no PING.
            Kind::Ping if !head.has(frame::ACK) => self.to_client.ping_ack(payload),
            Kind::Ping => {}
            Kind::WindowUpdate => {
                let n = frame::increment(payload).map_err(|_| malformed())?;
                self.calls().client_window_update(head.stream, n, whole)?;
            }
            Kind::RstStream => self.calls().on_client_reset(head, whole)?,
            Kind::Priority => self.calls().on_client_priority(head, whole),
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
            self.streams.client_ended(head.stream);
        }
        Ok(())
    }

    /// A HEADERS or CONTINUATION frame: a request block, handled once whole.
    fn on_client_headers(&mut self, head: Head, whole: &[u8]) -> Result<(), Broken> {
        let payload = &whole[frame::HEAD_LEN..];
        if head.kind == Kind::Headers {
            let range = frame::content(&head, payload).map_err(|_| malformed())?;
            let end_stream = head.has(frame::END_STREAM);
            if !head.has(frame::END_HEADERS) {
                // From the block's first byte, however slowly its frames came.
                self.timers.block_since = self.timers.block_since.or(Some(self.now));
                self.blocks.request_block = Some(Block {
                    stream: head.stream,
                    end_stream,
                    bytes: payload[range].to_vec(),
                    frames: whole.to_vec(),
                    passes: false,
                });
                return Ok(());
            }
            self.timers.block_since = None;
            self.on_request_block(RequestBlock {
                id: head.stream,
                end_stream,
                bytes: &payload[range],
                frames: whole,
            })?;
            if frame::depends_on_itself(&head, payload) {
                self.calls()
                    .stream_error(head.stream, reason::PROTOCOL_ERROR, "depends on itself");
            }
            return Ok(());
        }
        let Some(block) = self.blocks.request_block.as_mut() else {
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
            let b = self.blocks.request_block.take().expect("checked above");
            self.timers.block_since = None;
            self.on_request_block(RequestBlock {
                id: b.stream,
                end_stream: b.end_stream,
                bytes: &b.bytes,
                frames: &b.frames,
            })?;
        }
        Ok(())
    }

    /// A request header block, complete: decoded, then a new stream's (`on_new_stream`) or
    /// an open one's trailers (`on_trailers`).
    pub(super) fn on_request_block(&mut self, b: RequestBlock) -> Result<(), Broken> {
        // The connection's first request block is kept whole: its `:authority` decides whether
        // the upstream can have the client's blocks as they came (see `localize`).
        let keep = self.blocks.reencode || self.streams.last.is_connection();
        let request = headers::request(&mut self.blocks.client_decoder, b.bytes, keep)
            .map_err(|_| Broken::Client("undecodable header block", reason::COMPRESSION_ERROR))?;
        if request.size > limits::HEADER_LIST_ABUSE * self.env.limits.max_header_list_size as usize
        {
            return Err(Broken::Client(
                "header list far over the limit",
                reason::ENHANCE_YOUR_CALM,
            ));
        }
        if b.id.is_connection() {
            return Err(Broken::Client(
                "HEADERS on stream 0",
                reason::PROTOCOL_ERROR,
            ));
        }
        match self.streams.map.contains_key(&b.id) {
            true => self.on_trailers(b, request),
            false => self.on_new_stream(b, request, keep),
        }
    }

    /// Trailers from the client, on a stream it opened: they end its half of the stream, and
    /// must end the stream and hold no pseudo-header (RFC 9113 §8.1), nor come after the
    /// client ended its half (§5.1: half-closed).
    fn on_trailers(&mut self, b: RequestBlock, request: headers::Request) -> Result<(), Broken> {
        let id = b.id;
        let stream = &self.streams.map[&id];
        let short = stream.content_left.is_some_and(|n| n > 0);
        let malformed = match b.end_stream {
            false => Some("trailers without END_STREAM"),
            true if short => Some(CONTENT_LENGTH),
            true => request.malformed_trailers,
        };
        let error = match (stream.client_ended(), malformed) {
            (true, _) => Some((reason::STREAM_CLOSED, "HEADERS after END_STREAM")),
            (false, Some(why)) => Some((reason::PROTOCOL_ERROR, why)),
            (false, None) => None,
        };
        if let Some((code, why)) = error {
            // Not passed on: the upstream's decoding context no longer follows.
            self.blocks.reencode = true;
            self.calls().stream_error(id, code, why);
            return Ok(());
        }
        let stream = self.streams.map.get_mut(&id).expect("checked above");
        stream.end_request();
        self.env.served.mark();
        if stream.side.relays_request() {
            self.calls().forward_request_block(&b, request, true);
            return Ok(());
        }
        self.blocks.reencode = true;
        match stream.side {
            Side::Local(_) => self.calls().answering().start(id),
            Side::Translated(_) => self.calls().send_translated(id, &[]),
            Side::Service => self.services.end_requests(id),
            Side::Relayed => unreachable!("relays its request"),
        }
        Ok(())
    }

    /// A new stream's request block: refused at once if malformed (RFC 9113 §8.1.1: a stream
    /// error on every path, what a server behind the splice would answer) or past the
    /// connection's GOAWAY; else one decision (`call::plan::decide`) and its stream.
    fn on_new_stream(
        &mut self,
        b: RequestBlock,
        mut request: headers::Request,
        keep: bool,
    ) -> Result<(), Broken> {
        let id = b.id;
        if id <= self.streams.last || !id.is_client() {
            return Err(Broken::Client("stream id not new", reason::PROTOCOL_ERROR));
        }
        self.streams.last = id;
        let no_content = b.end_stream && request.content_length.is_some_and(|n| n > 0);
        let refusal = match (no_content, request.malformed) {
            (true, _) => Some((reason::PROTOCOL_ERROR, "a content-length and no DATA")),
            (false, Some(why)) => Some((reason::PROTOCOL_ERROR, why)),
            _ if self.go_away.going_away.is_some_and(|last| id > last) => {
                Some((reason::REFUSED_STREAM, "after the connection's GOAWAY"))
            }
            _ => None,
        };
        // Fewer streams than that in all leaves room without counting them (the walk only
        // where it can decide).
        let room_here = self.streams.map.len() < MAX_LOCAL_CALLS
            || self.streams.answered_here() < MAX_LOCAL_CALLS;
        let head = plan::Head {
            path: request.path.take().unwrap_or_default(),
            header_list: request.size,
            authorization: self.env.authorization.as_ref(),
        };
        let view = plan::View {
            live: self.env.live.as_deref(),
            upstream_open: !self.go_away.upstream_gone && !self.go_away.upstream_draining,
            room_here,
            has_message: !b.end_stream,
        };
        let mut decision = match refusal {
            None => plan::decide(&self.env.shared, head, view),
            Some((code, why)) => {
                tracing::debug!(stream = %id, why, %code, "request refused: stream reset");
                self.blocks.reencode = true;
                self.to_client.rst_stream(id, code);
                return Ok(());
            }
        };
        // The connection's own part: the block made fit for the upstream (its `:authority`
        // local, its `:path` the plugin's), or, where it cannot be, the call answered here.
        let path = &decision.report.path;
        let fits = match &decision.kind {
            plan::Kind::Relayed { rewrite: None, .. } => self.blocks.localize(&mut request, keep),
            plan::Kind::Relayed {
                rewrite: Some(to), ..
            } => self.blocks.rewrite_path(&mut request, keep, path, to),
            plan::Kind::Translated(_, inline) => {
                self.blocks
                    .rewrite_path(&mut request, keep, path, inline.path)
            }
            _ => true,
        };
        if !fits {
            decision.answer_here(room_here);
        }
        let full = self.streams.map.len() >= self.env.limits.max_concurrent_streams as usize;
        if full || matches!(decision.kind, plan::Kind::NoRoom) {
            self.blocks.reencode = true;
            self.to_client.rst_stream(id, reason::REFUSED_STREAM);
            return Ok(());
        }
        let on_upstream = decision.on_upstream();
        let side = self.open_side(&b, decision.kind, &decision.report.path, request.timeout);
        if b.end_stream {
            self.env.served.mark();
        }
        let stream = Stream {
            started: self.now,
            report: Some(decision.report),
            state: State::new(b.end_stream),
            // The splice's own calls keep their deadlines themselves (`call::answer`,
            // `service`); the upstream's are kept here.
            timeout: request.timeout.filter(|_| on_upstream),
            content_left: request.content_length,
            credit: self.settings.client_stream_window,
            _in_flight: InFlight::start(),
            side,
        };
        if let Some(at) = stream.deadline() {
            self.streams.deadlines.insert((at, id));
        }
        let starts_local = b.end_stream && matches!(stream.side, Side::Local(_));
        self.streams.map.insert(id, stream);
        match on_upstream {
            true => self.calls().forward_request_block(&b, request, false),
            // The upstream never sees this block: from now on, its decoding context no longer
            // follows the client's, and forwarded blocks are re-encoded.
            false => self.blocks.reencode = true,
        }
        if starts_local {
            self.calls().answering().start(id);
        }
        Ok(())
    }

    /// The state a new stream of `kind` starts with (a service's stream opened there).
    fn open_side(
        &mut self,
        b: &RequestBlock,
        kind: plan::Kind,
        path: &str,
        timeout: Option<Duration>,
    ) -> Side {
        let window = self.settings.client_initial_window;
        match kind {
            plan::Kind::Relayed { .. } => Side::Relayed,
            plan::Kind::Translated(route, inline) => {
                self.streams.own = true;
                let spare = self.streams.spare.pop();
                Side::Translated(Translated::start(spare, route, timeout, window, inline))
            }
            plan::Kind::Service(handler) => {
                let end = b.end_stream;
                self.services
                    .open(b.id, &handler, path, timeout, window, end);
                Side::Service
            }
            plan::Kind::Answered(_, refused) => Side::Local(Local {
                timeout,
                window,
                refused,
                ..Local::default()
            }),
            plan::Kind::NoRoom => unreachable!("refused before"),
        }
    }
}

/// A complete request header block: `frames` are the HEADERS and CONTINUATION frames that
/// carried it, `bytes` its fragments joined.
pub(super) struct RequestBlock<'a> {
    pub(super) id: StreamId,
    pub(super) end_stream: bool,
    pub(super) bytes: &'a [u8],
    pub(super) frames: &'a [u8],
}

/// Gives the client back the stream window of DATA the splice consumed itself (`consumed`:
/// the stream and the frame's length, `None` when nothing is owed).
/// What the splice consumes itself of a stream's DATA gets the stream's credit back at once
/// (one message is bounded); the connection's once the connection and the gateway may hold
/// more (`Flow::give_back`).
pub(super) fn refund(own: &mut BytesMut, credit: &mut Window, head: Head) {
    if head.len > 0 && !head.has(frame::END_STREAM) {
        frame::put_window_update(own, head.stream, head.len as u32);
        credit.refund(head.len);
    }
}

impl Calls<'_> {
    /// The client reset a stream: passed on for a relayed one; a local call the client gave
    /// up on ends here (its upstream call is dropped with the stream), its reply not sent.
    fn on_client_reset(&mut self, head: Head, whole: &[u8]) -> Result<(), Broken> {
        let code = frame::rst_reason(&whole[frame::HEAD_LEN..]).map_err(|_| malformed())?;
        self.streams.idle_check(head.stream)?;
        let counted = self.streams.reset_counted(head.stream, self.now);
        if counted && self.env.too_many_resets(self.now) {
            return Err(Broken::Client(
                "too many streams reset",
                reason::ENHANCE_YOUR_CALM,
            ));
        }
        let Some(stream) = self.streams.map.get(&head.stream) else {
            return Ok(());
        };
        if matches!(stream.side, Side::Relayed) {
            self.to_upstream.extend_from_slice(whole);
        }
        let why = cancelled_by_client(code);
        self.end_stream(head.stream, Code::Cancelled, Origin::Client, why);
        Ok(())
    }

    /// PRIORITY is advisory: passed on for a relayed stream; one of the wrong size or that
    /// depends on itself is a stream error (RFC 9113 §5.3.1, §6.3).
    fn on_client_priority(&mut self, head: Head, whole: &[u8]) {
        let known = self.streams.map.get(&head.stream);
        if head.len != 5 {
            self.to_client
                .rst_stream(head.stream, reason::FRAME_SIZE_ERROR);
        } else if frame::depends_on_itself(&head, &whole[frame::HEAD_LEN..]) {
            match known {
                Some(_) => {
                    self.stream_error(head.stream, reason::PROTOCOL_ERROR, "depends on itself")
                }
                None => self
                    .to_client
                    .rst_stream(head.stream, reason::PROTOCOL_ERROR),
            }
        } else if known.is_some_and(|s| matches!(s.side, Side::Relayed)) {
            self.to_upstream.extend_from_slice(whole);
        }
    }

    /// A DATA frame of the client's: counted against its windows and its `content-length`,
    /// then taken by its stream's kind.
    pub(super) fn on_client_data(&mut self, head: Head, whole: &[u8]) -> Result<(), Broken> {
        let payload = &whole[frame::HEAD_LEN..];
        let end = head.has(frame::END_STREAM);
        if !self.within_window(head.stream, head.len)? {
            return Ok(());
        }
        if !self.streams.map.contains_key(&head.stream) {
            self.streams.idle_check(head.stream)?;
            // Data for a stream that has ended: drop it, but give back the window it used.
            if head.len > 0 {
                self.flow.grant(head.len as u32, self.to_client);
            }
            if self.streams.closed.contains(&head.stream) {
                self.to_client
                    .rst_stream(head.stream, reason::STREAM_CLOSED);
            }
            return Ok(());
        }
        if self.streams.content_length_broken(head, payload)? {
            // Not passed on: its window is the splice's to give back.
            self.flow.grant(head.len as u32, self.to_client);
            self.stream_error(head.stream, reason::PROTOCOL_ERROR, CONTENT_LENGTH);
            return Ok(());
        }
        let renumber = self.first_translated_data(head, payload);
        let own = self.to_client.own();
        let stream = self
            .streams
            .map
            .get_mut(&head.stream)
            .expect("checked above");
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
            self.env.served.mark();
        }
        let content = || {
            frame::content(&head, payload)
                .map(|r| &payload[r])
                .map_err(|_| malformed())
        };
        // Taken by the stream's kind.
        match &stream.side {
            Side::Translated(t) if !t.asked.relayed() => self.translated_data(head, content()?),
            // A relayed request, or a translated call's relayed as it came (`Asked::Relayed`).
            Side::Relayed | Side::Translated(_) => self.relay_data(head, whole, renumber)?,
            Side::Local(_) => self.local_data(head, content()?),
            Side::Service => self.service_data(head, content()?),
        }
        Ok(())
    }
}
