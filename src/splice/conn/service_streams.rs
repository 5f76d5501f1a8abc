//! Streams served by the gateway's own services (reflection, health; `service`), polled
//! with the connection and counted on its budget.

use super::*;

impl Calls<'_> {
    /// A DATA frame's `content` of a service stream's request (its kind's DATA): handed to the
    /// service, its window given back as the service takes it.
    pub(super) fn service_data(&mut self, head: Head, content: &[u8]) {
        let own = self.to_client.own();
        let end = head.has(frame::END_STREAM);
        self.services.data(head.stream, content, head.len, end, own);
        self.streams.services_granted(self.services);
        self.flow.services.set(self.services.held());
        let budget = &self.env.shared.buffered;
        self.flow.give_back(head.len as u32, budget, self.to_client);
    }

    /// Moves the gateway-service streams on (`service`), never inside a reply header
    /// block the upstream has begun; ends those that ended. `true` if anything moved.
    pub(super) fn poll_services(&mut self, cx: &mut Context<'_>) -> bool {
        if self.blocks.reply_block.is_some() || self.settings.client_unacked() {
            return false;
        }
        let room = self.to_client.queued() < HIGH_WATER;
        let mut out = service::Out {
            frames: self.to_client.replies(),
            encoder: &mut self.blocks.upstream_decoder,
            window: &mut self.flow.window,
            debt: &mut self.flow.debt,
            max_frame: self.settings.client_max_frame,
            room,
        };
        let mut ended = Vec::new();
        let progress = self.services.poll(cx, &mut out, &mut ended);
        self.streams.services_granted(self.services);
        self.flow.services.set(self.services.held());
        for service::Finished { id, status } in ended {
            let Some(stream) = self.streams.map.get_mut(&id) else {
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
}
