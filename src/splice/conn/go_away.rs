//! GOAWAY per hop: the upstream's never reaches the client; the client's names the last
//! stream the gateway took; shutdown drains the connection.

use super::*;

impl<C: Io, U: Io> Splice<C, U> {
    /// The upstream's GOAWAY stays on this hop. Its relayed streams above the upstream's last
    /// id were never processed: refused to the client (REFUSED_STREAM, which a client may
    /// retry at once). New streams are answered by the gateway, and the client is asked to
    /// take its next calls to a new connection.
    pub(super) fn upstream_going_away(&mut self, payload: &[u8]) {
        let Ok((last, code)) = frame::goaway(payload) else {
            return; // checked at least 8 octets long (`frame::check`)
        };
        tracing::debug!(
            last_stream = %last,
            %code,
            debug = %String::from_utf8_lossy(&payload[8..]),
            "the upstream connection under a spliced client connection is going away"
        );
        self.upstream_draining = true;
        let refused: Vec<StreamId> = self
            .streams
            .iter()
            .filter(|(id, s)| **id > last && s.side.on_upstream() && !s.reply_started())
            .map(|(id, _)| *id)
            .collect();
        for id in refused {
            self.to_client.rst_stream(id, reason::REFUSED_STREAM);
            self.end_stream(
                id,
                Code::Unavailable,
                Origin::Gateway,
                Some("refused: the upstream went away before it took the call".into()),
            );
        }
        self.hint_go_away();
    }

    /// Tells the client to open no more streams here; those already open finish.
    pub(super) fn go_away(&mut self) {
        if self.going_away.is_some() {
            return;
        }
        if self.reply_block.is_some() {
            // Not inside the upstream's header block: the next loop turn sends it.
            return self.going_away_later = true;
        }
        let last = self.send_goaway(self.last_stream);
        self.going_away = Some(last);
        self.services.shut_down();
    }

    /// Asks the client to take its next calls to a new connection, while this one still
    /// serves whatever arrives (RFC 9113 §6.8: the highest id, then streams may still come).
    pub(super) fn hint_go_away(&mut self) {
        if self.goaway_sent.is_none() {
            self.send_goaway(StreamId::MAX);
        }
    }

    pub(super) fn send_goaway(&mut self, last: StreamId) -> StreamId {
        let last = self.goaway_sent.map_or(last, |sent| sent.min(last));
        self.to_client.goaway(last, reason::NO_ERROR);
        self.goaway_sent = Some(last);
        last
    }

    // ---- stream bookkeeping ----

    /// Reports every stream still open when the connection ends.
    pub(super) fn finish_all(&mut self, code: Code, origin: Origin, why: &str) {
        let ids: Vec<StreamId> = self.streams.keys().copied().collect();
        for id in ids {
            self.end_stream(id, code, origin, Some(why.to_string()));
        }
    }
}
