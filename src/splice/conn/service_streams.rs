//! Streams served by the gateway's own services (reflection, health; `local_stream`), polled
//! with the connection and counted on its budget.

use super::*;

impl<C: Io, U: Io> Splice<C, U> {
    pub(super) fn local_streams(&self) -> usize {
        self.streams
            .values()
            .filter(|s| matches!(s.side, Side::Local(_) | Side::Service))
            .count()
    }

    /// Moves the gateway-service streams on (`local_stream`), never inside a reply header
    /// block the upstream has begun; ends those that ended. `true` if anything moved.
    pub(super) fn poll_services(&mut self, cx: &mut Context<'_>) -> bool {
        if self.reply_block.is_some() || self.client_settings_unacked() {
            return false;
        }
        let room = self.to_client.queued() < HIGH_WATER;
        let mut out = service::Out {
            frames: self.to_client.replies(),
            encoder: &mut self.upstream_decoder,
            window: &mut self.flow.window,
            debt: &mut self.flow.debt,
            max_frame: self.settings.client_max_frame,
            room,
        };
        let mut ended = Vec::new();
        let progress = self.services.poll(cx, &mut out, &mut ended);
        self.services_granted();
        self.count_services();
        for service::Finished { id, status } in ended {
            let Some(stream) = self.streams.get_mut(&id) else {
                continue;
            };
            if let (Some(report), false) = (stream.report.as_mut(), status.code() == Code::Ok) {
                report.fail(services::origin(status.code()), &status);
            }
            if !stream.request_done() {
                // Answered before the client finished: it may stop sending (RFC 9113 §8.1).
                self.to_client.rst_stream(id, reason::NO_ERROR);
            }
            self.remove(id);
        }
        progress
    }

    /// Keeps `Shared::buffered` at what the services hold of this connection's requests.
    pub(super) fn count_services(&mut self) {
        let now = self.services.held();
        if now > self.flow.services_held {
            self.shared.buffered.take(now - self.flow.services_held);
        } else {
            self.shared.buffered.give(self.flow.services_held - now);
        }
        self.flow.services_held = now;
    }

    /// Counts the stream window the services gave the client (`Stream::credit`).
    pub(super) fn services_granted(&mut self) {
        for (id, n) in self.services.drain_granted() {
            if let Some(s) = self.streams.get_mut(&id) {
                // Past 2^31-1 only if the client broke flow control, which `within_window`
                // answers when it sends.
                let _ = s.credit.increase(n);
            }
        }
    }

    // ---- upstream to client ----
}
