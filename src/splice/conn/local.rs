//! Calls the splice answers itself (`call::answer`, on the gateway's shared upstream
//! connection): started once their request is whole, their replies written within the
//! client's windows.

use super::*;

/// A call the splice answers itself: its stream, when it started, its report and outcome.
/// It ends early (CANCELLED) when its stream does: dropped, the upstream call is reset.
pub(super) type LocalCall = Pin<Box<dyn Future<Output = LocalOutcome> + Send>>;

pub(super) type LocalOutcome = (u32, Instant, Report, Result<Vec<u8>, Status>);

#[derive(Default)]
pub(super) struct Local {
    pub(super) body: BytesMut,
    /// The call is refused before it starts (a request or header list too large).
    pub(super) refused: Option<Status>,
    pub(super) timeout: Option<Duration>,
    /// What the client still accepts on this stream.
    pub(super) window: i64,
    pub(super) reply: Option<Reply>,
    /// Dropped with the stream: the running call ends then.
    pub(super) cancel: Option<tokio::sync::oneshot::Sender<()>>,
}

/// A local call's request bytes, on the gateway's count (`Shared::buffered`) until the call
/// ends, however it ends.
pub(super) struct Held(Arc<Shared>, usize);

impl Drop for Held {
    fn drop(&mut self) {
        self.0.buffered.give(self.1);
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

impl<C: Io, U: Io> Splice<C, U> {
    /// A translated call's answer, sent by the splice as a local stream's reply (after the
    /// plugin's reply head, if that went to the client already).
    pub(super) fn reply_translated(
        &mut self,
        id: u32,
        answer: Result<Vec<u8>, Status>,
        head_sent: bool,
    ) {
        self.drop_translated_reply(id);
        let Some(stream) = self.streams.get_mut(&id) else {
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
        self.replying.push_back(id);
        self.hold_reply(held);
    }

    /// Starts answering a local stream whose request is complete.
    pub(super) fn start_local(&mut self, id: u32) {
        let Some(stream) = self.streams.get_mut(&id) else {
            return;
        };
        // Answered already: a translated call whose plugin replied before the client's request
        // ended (`Asked::Relayed`) is never made a second time.
        if matches!(&stream.side, Side::Local(l) if l.reply.is_some()) {
            return;
        }
        let (Side::Local(local), Some(mut report)) = (&mut stream.side, stream.report.take())
        else {
            return;
        };
        let body = std::mem::take(&mut local.body).freeze();
        // Off the connection's count, on the gateway's until the call ends with its request.
        self.local_bodies -= body.len();
        let held = Held(self.shared.clone(), body.len());
        let started = stream.started;
        let refused = local.refused.take();
        let timeout = local.timeout;
        let shared = self.shared.clone();
        let (cancel, mut cancelled) = tokio::sync::oneshot::channel();
        local.cancel = Some(cancel);
        self.calls.push(Box::pin(async move {
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
                    outcome = call::answer(&shared, message, timeout, &mut report) => outcome,
                }
            };
            (id, started, report, outcome)
        }));
    }

    /// A local call's outcome, turned into the frames of its reply.
    pub(super) fn answered(&mut self, (id, started, mut report, outcome): LocalOutcome) {
        let Some(stream) = self.streams.get_mut(&id) else {
            // The client reset the stream meanwhile: the call is reported, not answered.
            report.fail(
                Origin::Client,
                &Status::cancelled("the client reset the stream"),
            );
            return observe::finish(&report, started.elapsed(), &self.shared.redactor);
        };
        let Side::Local(local) = &mut stream.side else {
            return;
        };
        let reply = reply_frames(outcome, true);
        let held = reply.data.len();
        local.reply = Some(reply);
        stream.report = Some(report);
        self.replying.push_back(id);
        self.hold_reply(held);
    }

    /// Writes as much of the local replies as the client's windows allow, never inside a
    /// reply header block the upstream has begun.
    pub(super) fn send_replies(&mut self) {
        while let Some(&id) = self.replying.front() {
            if self.reply_block.is_some() || self.client_settings_unacked() {
                return;
            }
            let out = if self.server_preface {
                &mut self.to_client
            } else {
                &mut self.own
            };
            let Some(Stream {
                side: Side::Local(local),
                ..
            }) = self.streams.get_mut(&id)
            else {
                self.replying.pop_front();
                continue;
            };
            let Some(reply) = local.reply.as_mut() else {
                self.replying.pop_front();
                continue;
            };
            if out.len() >= HIGH_WATER {
                return; // the client reads slowly: the rest waits here, counted
            }
            let only_head = reply.data.is_empty() && reply.trailers.is_none();
            if let Some(head) = reply.head.take() {
                let mut block = Vec::with_capacity(head.len() + 4);
                self.upstream_decoder.own_block(&mut block);
                block.extend_from_slice(&head);
                frame::put_headers(out, id, &block, only_head, self.client_max_frame);
            }
            while !reply.data.is_empty() {
                let room = self
                    .window
                    .min(local.window)
                    .min(self.client_max_frame as i64);
                if room <= 0 {
                    return; // wait for the client's WINDOW_UPDATE
                }
                let piece = reply.data.split_to((room as usize).min(reply.data.len()));
                frame::put(out, Kind::Data, 0, id, &piece);
                self.window -= piece.len() as i64;
                local.window -= piece.len() as i64;
                self.debt += piece.len() as u64;
                self.replies_held -= piece.len();
                self.shared.buffered.give(piece.len());
                if out.len() >= HIGH_WATER {
                    break;
                }
            }
            if !reply.data.is_empty() {
                return;
            }
            if let Some(trailers) = reply.trailers.take() {
                let mut block = Vec::with_capacity(trailers.len() + 4);
                self.upstream_decoder.own_block(&mut block);
                block.extend_from_slice(&trailers);
                frame::put_headers(out, id, &block, true, self.client_max_frame);
            }
            self.replying.pop_front();
            let request_done = self.streams.get(&id).is_some_and(|s| s.request_done);
            if !request_done {
                // Answered before the client finished (a refused oversized request).
                frame::put_rst_stream(self.own_out(), id, reason::NO_ERROR);
            }
            // Its outcome is in its report already.
            self.remove(id);
        }
    }

    pub(super) fn own_out(&mut self) -> &mut BytesMut {
        if self.reply_block.is_some() || !self.server_preface {
            &mut self.own
        } else {
            &mut self.to_client
        }
    }

    /// Lets the held frames go once they may.
    pub(super) fn release_own(&mut self) {
        if !self.own.is_empty() && self.reply_block.is_none() && self.server_preface {
            let own = self.own.split();
            self.to_client.unsplit(own);
        }
    }

    /// Ends a call on the upstream with the gateway's `s` in place of the plugin's reply.
    /// Before its reply began, the call is answered in its front dialect, as on every path
    /// (for the draft, an OK reply carrying a retryable error), and sent within the client's
    /// windows like the splice's own replies. After, trailers end it. A client still sending
    /// its request is told to stop (RST_STREAM NO_ERROR, RFC 9113 §8.1).
    pub(super) fn answer_instead(&mut self, id: u32, s: &Status) {
        self.drop_translated_reply(id);
        let Some(stream) = self.streams.get_mut(&id) else {
            return;
        };
        let encoded = match (stream.reply_started, stream.report.as_mut()) {
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
        if let (false, Ok(message)) = (stream.reply_started, &encoded) {
            let reply = reply_frames(Ok(message.clone()), true);
            let held = reply.data.len();
            stream.side = Side::Local(Local {
                window: self.client_initial_window,
                reply: Some(reply),
                ..Local::default()
            });
            self.replying.push_back(id);
            self.hold_reply(held);
            return;
        }
        let status = encoded.err().unwrap_or_else(|| s.clone());
        let mut block = Vec::with_capacity(128);
        self.upstream_decoder.own_block(&mut block);
        if !stream.reply_started {
            headers::reply_head(&mut block);
        }
        status_fields(&mut block, &status);
        let still_sending = !std::mem::replace(&mut stream.request_done, true);
        let max_frame = self.client_max_frame;
        frame::put_headers(self.own_out(), id, &block, true, max_frame);
        if still_sending {
            frame::put_rst_stream(self.own_out(), id, reason::NO_ERROR);
        }
        self.reply_ended(id, Some(status.code()));
    }
}
