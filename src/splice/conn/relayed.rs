//! Relayed streams: a call the splice passes on to the upstream as it came, both ways — its
//! request block forwarded (its `:authority` made local, its `:path` rewritten for a
//! wire-identical call), its DATA passed on, and its reply read on the way for the status the
//! call is counted and logged with. Flow control runs end to end on it.

use super::*;
use crate::translate::identical::RequestCheck;

impl Calls<'_> {
    /// A DATA frame of a relayed request, or of a translated call's relayed as it came
    /// (`Asked::Relayed`), passed on: renumbered in the upstream's copy where the revisions
    /// number the request's fields differently (`renumber`).
    pub(super) fn relay_data(
        &mut self,
        head: Head,
        whole: &[u8],
        renumber: Option<&RequestCheck>,
    ) -> Result<(), Broken> {
        let payload = &whole[frame::HEAD_LEN..];
        let Some(stream) = self.streams.map.get_mut(&head.stream) else {
            return Ok(());
        };
        if let Some(report) = stream.report.as_mut() {
            if report.request.is_none() {
                let range = frame::content(&head, payload).map_err(|_| malformed())?;
                if observe::request_wanted() {
                    report.request = first_message(&payload[range]);
                }
            }
        }
        self.to_upstream.extend_from_slice(whole);
        if let Some(check) = renumber {
            let range = frame::content(&head, payload).map_err(|_| malformed())?;
            // The message, past the frame's head and gRPC's 5-byte prefix.
            let at = self.to_upstream.len() - whole.len() + frame::HEAD_LEN;
            check.renumber(&mut self.to_upstream[at + range.start + 5..at + range.end]);
        }
        if head.has(frame::END_STREAM) && stream.reply_done() {
            self.remove(head.stream);
        }
        Ok(())
    }

    /// Passes a request block to the upstream: its frames as they came while the upstream's
    /// decoding context still follows the client's, re-encoded once it does not.
    pub(super) fn forward_request_block(
        &mut self,
        b: &RequestBlock,
        request: headers::Request,
        trailers: bool,
    ) {
        let (id, end_stream, block, frames) = (b.id, b.end_stream, b.bytes, b.frames);
        if !self.blocks.reencode {
            // The client's encoder signals its own table's changes to the upstream.
            self.settings.upstream_expects_update = None;
            // Several `:path` fields, or one in trailers (both malformed), may leave an entry
            // in the upstream's table that no in-place rewrite made: no later block may refer
            // to the upstream's table then.
            self.blocks.reencode = request.paths > 1 || (trailers && request.paths > 0);
            // A rewritten path is patched where it lies when it can be, else its block rebuilt,
            // as it is with fields that refer to entries the upstream's table no longer has.
            let out = &mut self.to_upstream;
            let patched = !request.patches.is_empty();
            if let Some((span, path)) = request.rewrite.filter(|_| !patched) {
                if self
                    .blocks
                    .path_fields
                    .put_rewritten(frames, block, span, path, out)
                {
                    return;
                }
            }
            let renamed = request
                .rewrite
                .is_some_and(|(s, _)| s.rep != headers::Rep::Indexed);
            if patched || renamed {
                headers::rebuild(
                    block,
                    &request.patches,
                    request.rewrite,
                    &mut self.blocks.rewritten,
                );
                frame::put_headers(
                    out,
                    id,
                    &self.blocks.rewritten,
                    end_stream,
                    self.settings.upstream_max_frame,
                );
                // Kept for the next call at the size of an ordinary block, not the largest.
                if self.blocks.rewritten.capacity() > 4096 {
                    self.blocks.rewritten = Vec::new();
                }
                return;
            }
            return self.to_upstream.extend_from_slice(frames);
        }
        let block = headers::encode(request.fields, self.settings.upstream_expects_update.take());
        frame::put_headers(
            self.to_upstream,
            id,
            &block,
            end_stream,
            self.settings.upstream_max_frame,
        );
    }

    /// A relayed reply's DATA, passed on: within the client's connection window (the upstream
    /// counts on window the splice's own replies used: held until it fits, `on_upstream_bytes`),
    /// its first message kept for the log when bodies are, its end without trailers noted.
    pub(super) fn relay_reply_data(&mut self, head: Head, payload: &[u8]) -> Result<(), Broken> {
        if self.flow.window.consume(head.len).is_err() {
            return Err(Broken::Upstream(
                "DATA past the client's connection window".into(),
            ));
        }
        let Some(stream) = self.streams.map.get_mut(&head.stream) else {
            return Ok(());
        };
        if let Some(report) = stream.report.as_mut() {
            if report.response.is_none() && observe::bodies_enabled() {
                let range = frame::content(&head, payload).map_err(upstream_malformed)?;
                report.response = first_message(&payload[range]);
            }
        }
        if head.has(frame::END_STREAM) {
            // A reply that ends without trailers has no status.
            self.reply_ended(head.stream, None);
        }
        Ok(())
    }

    /// A reply block that reached the client, seen: the call's status noted, its end marked.
    pub(super) fn reply_seen(
        &mut self,
        stream_id: StreamId,
        end_stream: bool,
        reply: headers::Reply,
    ) {
        if let Some(stream) = self.streams.map.get_mut(&stream_id) {
            stream.start_reply();
            if let (Some(code), Some(report)) = (code_of(reply.code), stream.report.as_mut()) {
                report.code = code;
                if code != Code::Ok && report.translated {
                    // A wire-identical call's failure, as its translation reports it.
                    report.message = Some(reply.message.unwrap_or_default());
                } else if code != Code::Ok {
                    report.message = reply.message;
                }
                if code != Code::Ok {
                    // The plugin's status, relayed as it came.
                    report.origin = Some(Origin::Upstream);
                }
            }
        }
        if end_stream {
            let code = code_of(reply.code).or(Some(Code::Unknown));
            self.reply_ended(stream_id, code);
        }
    }

    /// A relayed reply reached its end; `code` is `None` when its trailers never came.
    pub(super) fn reply_ended(&mut self, id: StreamId, code: Option<Code>) {
        let Some(stream) = self.streams.map.get_mut(&id) else {
            return;
        };
        stream.end_reply();
        if let (None, Some(report)) = (code, stream.report.as_mut()) {
            // The plugin's reply, relayed as it came, without the status it owes.
            report.fail(
                Origin::Upstream,
                &Status::unknown("upstream reply ended without a gRPC status"),
            );
        }
        if stream.request_done() {
            self.remove(id);
        } else if let Some(report) = stream.report.take() {
            // Reported now; the stream stays known until the client's half ends.
            self.streams.ended.push((report, stream.started));
        }
    }
}
