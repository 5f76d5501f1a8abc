//! The upstream's side: its frames read and passed on, sorted from those of the streams the
//! splice opened there itself (kept here, re-encoded or answered).

use super::*;

impl<C: Io, U: Io> Splice<C, U> {
    /// Reads and handles the upstream's bytes while the client keeps up with its replies and
    /// the connection and the gateway have room for them (`Flow::reads_upstream`).
    pub(super) fn read_upstream(&mut self, cx: &mut Context<'_>) -> bool {
        let reads = self.flow.reads_upstream(&self.env.shared.buffered);
        self.flow.replies_paused = match reads {
            true => None,
            false => self.flow.replies_paused.or(Some(self.now)),
        };
        let mut progress = false;
        if !self.go_away.upstream_gone
            && !self.flow.held
            && self.to_client.queued() < HIGH_WATER
            && reads
        {
            let more = std::mem::take(&mut self.upstream.unhandled)
                || match self.upstream.io.read_into(&mut self.upstream.read, cx) {
                    Poll::Ready(Some(_)) => true,
                    Poll::Ready(None) => {
                        progress = true;
                        self.upstream_lost("the upstream closed the connection");
                        false
                    }
                    Poll::Pending => false,
                };
            progress |= more;
            if more {
                if let Err(e) = self.on_upstream_bytes() {
                    self.upstream_lost(&e.to_string());
                }
            }
        }
        if self.flow.held && self.flow.window.available() > 0 {
            if let Err(e) = self.on_upstream_bytes() {
                self.upstream_lost(&e.to_string());
            }
        }
        progress
    }

    pub(super) fn on_upstream_bytes(&mut self) -> Result<(), Broken> {
        self.flow.held = false;
        let mut buf = std::mem::take(&mut self.upstream.read);
        let piece = self.to_client.queued() + PIECE;
        let handled = take_frames(&mut buf, |head, whole| {
            if !self.local.replying.is_empty() {
                // Replies translated from the frames before count towards the piece.
                self.calls().send_replies();
            }
            if self.to_client.queued() >= piece {
                self.upstream.unhandled = true;
                return Ok(false);
            }
            if head.kind == Kind::Data && head.len > self.flow.window.available() {
                // The upstream counts on window the splice's own replies used: wait for more.
                self.flow.held = true;
                return Ok(false);
            }
            self.on_upstream_frame(head, whole).map(|()| true)
        });
        self.upstream.read = buf;
        handled?;
        if self.flow.held {
            return Ok(());
        }
        if self.upstream.read.len() >= frame::HEAD_LEN {
            let head = Head::parse(&self.upstream.read);
            // Refused before it is buffered: a peer that is not HTTP/2 (an HTTP/1 answer, read
            // as a frame head, announces megabytes) is given up on at once, not waited for.
            if !self.to_client.preface_sent()
                && (head.kind != Kind::Settings || head.has(frame::ACK))
            {
                return Err(Broken::Upstream(
                    "the upstream did not start with SETTINGS".into(),
                ));
            }
            if head.len > self.settings.upstream_frame_limit {
                return Err(Broken::Upstream("frame larger than allowed".into()));
            }
            self.upstream.read.reserve(frame::HEAD_LEN + head.len);
        }
        Ok(())
    }

    /// One whole frame of the upstream's: checked, then passed on as it came (a relayed
    /// stream's) or handed to what owns its concern.
    pub(super) fn on_upstream_frame(&mut self, head: Head, whole: &[u8]) -> Result<(), Broken> {
        let payload = &whole[frame::HEAD_LEN..];
        if head.len > self.settings.upstream_frame_limit {
            return Err(Broken::Upstream("frame larger than allowed".into()));
        }
        frame::check(&head, payload).map_err(|(what, _)| Broken::Upstream(what.into()))?;
        if !self.to_client.preface_sent() && (head.kind != Kind::Settings || head.has(frame::ACK)) {
            return Err(Broken::Upstream(
                "the upstream did not start with SETTINGS".into(),
            ));
        }
        if self.blocks.reply_block.is_some() && head.kind != Kind::Continuation {
            return Err(Broken::Upstream("header block interrupted".into()));
        }
        // A stream's frames travel on; the connection's are answered here.
        let stream_frame = matches!(
            head.kind,
            Kind::Data | Kind::Headers | Kind::Continuation | Kind::RstStream | Kind::WindowUpdate
        );
        let passes = stream_frame && self.streams.passes_on(&head, &self.blocks);
        if passes && head.kind != Kind::WindowUpdate {
            self.to_client.pass(whole);
        }
        match head.kind {
            Kind::Data if passes => self.calls().relay_reply_data(head, payload)?,
            Kind::Data => self.calls().kept_data(head, payload)?,
            Kind::Headers | Kind::Continuation => self.on_upstream_headers(head, whole, passes)?,
            Kind::WindowUpdate if passes => self.calls().upstream_window_update(head, whole)?,
            Kind::Settings if head.has(frame::ACK) => {
                if let Some(table) = self.settings.unacked_by_upstream.pop_front() {
                    let decoder = &mut self.blocks.upstream_decoder;
                    upstream_acked(table, decoder, &mut self.to_client);
                }
            }
            Kind::Settings => self.upstream_settings(payload)?,
            Kind::Ping => self.ping.upstream(&head, payload, &mut self.to_upstream),
            Kind::RstStream => {
                let code = frame::rst_reason(payload).map_err(upstream_malformed)?;
                let code = match code {
                    reason::REFUSED_STREAM => Code::Unavailable,
                    reason::CANCEL => Code::Cancelled,
                    _ => Code::Internal,
                };
                let translated = self
                    .streams
                    .map
                    .get_mut(&head.stream)
                    .filter(|s| !passes && matches!(s.side, Side::Translated(_)));
                if let Some(stream) = translated {
                    // The plugin reset a translated call: so is the client's stream.
                    stream.end_reply();
                    self.to_client.pass(whole);
                    let why = reset_by_upstream();
                    self.calls()
                        .end_stream(head.stream, Code::Unavailable, Origin::Gateway, why);
                } else if passes {
                    self.calls().end_stream(
                        head.stream,
                        code,
                        Origin::Gateway,
                        reset_by_upstream(),
                    );
                }
            }
            Kind::GoAway => self.upstream_going_away(payload),
            Kind::PushPromise => {
                return Err(Broken::Upstream("PUSH_PROMISE, which was disabled".into()))
            }
            // PRIORITY is advisory; extension frames are per hop (RFC 9113 §5.5); a stream's
            // WINDOW_UPDATE kept here is for a stream the splice opened itself.
            Kind::WindowUpdate | Kind::Priority | Kind::Unknown(_) => {}
        }
        Ok(())
    }

    /// A HEADERS or CONTINUATION frame of the upstream's: a reply block, handled once whole.
    /// Nothing else may reach the client between the frames of a block passed on.
    fn on_upstream_headers(
        &mut self,
        head: Head,
        whole: &[u8],
        passes: bool,
    ) -> Result<(), Broken> {
        let payload = &whole[frame::HEAD_LEN..];
        if head.kind == Kind::Headers {
            let range = frame::content(&head, payload).map_err(upstream_malformed)?;
            let end_stream = head.has(frame::END_STREAM);
            if head.has(frame::END_HEADERS) {
                return self.calls().reply_block(
                    head.stream,
                    end_stream,
                    &payload[range],
                    whole,
                    passes,
                );
            }
            self.to_client.block_begins();
            self.blocks.reply_block = Some(Block {
                stream: head.stream,
                end_stream,
                bytes: payload[range].to_vec(),
                frames: if passes { Vec::new() } else { whole.to_vec() },
                passes,
            });
            return Ok(());
        }
        let Some(block) = self.blocks.reply_block.as_mut() else {
            return Err(Broken::Upstream("CONTINUATION without HEADERS".into()));
        };
        if block.bytes.len() + payload.len() > MAX_HEADER_BLOCK {
            return Err(Broken::Upstream("reply header block too large".into()));
        }
        block.bytes.extend_from_slice(payload);
        if !block.passes {
            block.frames.extend_from_slice(whole);
        }
        if head.has(frame::END_HEADERS) {
            let b = self.blocks.reply_block.take().expect("checked above");
            self.calls()
                .reply_block(b.stream, b.end_stream, &b.bytes, &b.frames, b.passes)?;
            // What waited for the block's end goes right after it, before anything else of
            // the upstream's.
            self.to_client.block_ends();
        }
        Ok(())
    }
}

impl Calls<'_> {
    /// Resets a stream on the upstream (unless it is gone) and remembers it there.
    pub(super) fn reset_on_upstream(&mut self, id: StreamId) {
        if !self.upstream_gone {
            frame::put_rst_stream(self.to_upstream, id, reason::CANCEL);
        }
        self.streams.remember_reset(id);
    }

    /// A reply header block, complete. One that went on as it came (`passes`) is read for its
    /// status; one kept is a translated call's trailers, a block re-encoded for the client
    /// (`reencode_replies`), or one of a stream the client does not get the upstream's reply
    /// on (dropped).
    fn reply_block(
        &mut self,
        id: StreamId,
        end_stream: bool,
        block: &[u8],
        frames: &[u8],
        passes: bool,
    ) -> Result<(), Broken> {
        if passes {
            let reply = headers::reply(&mut self.blocks.upstream_decoder, block)
                .map_err(|e| Broken::Upstream(e.to_string()))?;
            self.reply_seen(id, end_stream, reply);
            return Ok(());
        }
        let before = self.blocks.upstream_decoder.changes();
        let mut literals = Vec::new();
        let reply = match self.blocks.reencode_replies {
            true => {
                headers::reply_reencoded(&mut self.blocks.upstream_decoder, block, &mut literals)
            }
            false => headers::reply(&mut self.blocks.upstream_decoder, block),
        }
        .map_err(|e| Broken::Upstream(e.to_string()))?;
        let changed = self.blocks.upstream_decoder.changes() != before;
        let side = self.streams.map.get(&id).map(|s| &s.side);
        let translated = matches!(side, Some(Side::Translated(_)));
        if translated && end_stream {
            self.translated_ended(id, reply, frames, changed);
            return Ok(());
        }
        let relayed = match side {
            Some(s) => matches!(s, Side::Relayed),
            None => !self.streams.reset_upstream.contains(&id),
        };
        if self.blocks.reencode_replies && (translated || relayed) {
            // Re-encoded: a size update of the plugin's did not go with it.
            self.blocks.upstream_decoder.withheld();
            let mut out = Vec::with_capacity(literals.len() + 4);
            self.blocks.upstream_decoder.own_block(&mut out);
            out.extend_from_slice(&literals);
            frame::put_headers(
                self.to_client.out(),
                id,
                &out,
                end_stream,
                self.settings.client_max_frame,
            );
            self.reply_seen(id, end_stream, reply);
            return Ok(());
        }
        if changed {
            self.blocks.part_replies();
        }
        Ok(())
    }

    /// Upstream DATA the client does not get as it came: a translated call's reply, collected
    /// for its translation, or a reset stream's. The window it took is owed to the upstream.
    pub(super) fn kept_data(&mut self, head: Head, payload: &[u8]) -> Result<(), Broken> {
        let range = frame::content(&head, payload).map_err(upstream_malformed)?;
        self.flow.owed_upstream += head.len as u64;
        let end = head.has(frame::END_STREAM);
        let Some(Stream {
            side: Side::Translated(t),
            ..
        }) = self.streams.map.get_mut(&head.stream)
        else {
            return Ok(());
        };
        if t.reply.len() + range.len() > MAX_MESSAGE_BYTES + grpc_frame::HEADER {
            t.reply_too_large = true;
            let dropped = std::mem::take(&mut t.reply).len();
            self.flow.replies.release(dropped);
        } else if !t.reply_too_large {
            t.reply.extend_from_slice(&payload[range.clone()]);
            self.flow.replies.add(range.len());
        }
        if !end {
            // The stream's own window, given back past half of it (a reply larger than it).
            t.reply_unacked += head.len as u32;
            if t.reply_unacked as usize >= self.settings.client_initial_window.available() / 2 {
                frame::put_window_update(self.to_upstream, head.stream, t.reply_unacked);
                t.reply_unacked = 0;
            }
            return Ok(());
        }
        // A reply that ends without trailers has no status.
        self.translated_ended(head.stream, headers::Reply::default(), &[], false);
        Ok(())
    }
}
