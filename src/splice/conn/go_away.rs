//! GOAWAY per hop: the upstream's never reaches the client; the client's names the last
//! stream the gateway took; shutdown drains the connection.

use super::*;

/// GOAWAY per hop and shutdown (`go_away`).
#[derive(Default)]
pub(super) struct GoAway {
    /// The upstream sent GOAWAY: no new stream is relayed to it.
    pub(super) upstream_draining: bool,
    /// Set once the gateway is shutting down and told the client so: streams after this id
    /// are refused, and the connection ends with its last stream.
    pub(super) going_away: Option<StreamId>,
    /// The last-stream id of the last GOAWAY the client got (the upstream's included): a
    /// later one may not name a higher id.
    pub(super) last_sent: Option<StreamId>,
    /// The upstream connection is gone (closed, or never had): the splice answers calls itself.
    pub(super) upstream_gone: bool,
    /// Shutdown began while a reply header block was midway: the GOAWAY goes once it is whole.
    pub(super) going_away_later: bool,
}

impl GoAway {
    /// Asks the client to take its next calls to a new connection, while this one still
    /// serves whatever arrives (RFC 9113 §6.8: the highest id, then streams may still come).
    pub(super) fn hint(&mut self, to_client: &mut ToClient) {
        if self.last_sent.is_none() {
            self.send(StreamId::MAX, to_client);
        }
    }

    /// A GOAWAY naming `last`, or the last one sent if lower; returns the id it named.
    pub(super) fn send(&mut self, last: StreamId, to_client: &mut ToClient) -> StreamId {
        let last = self.last_sent.map_or(last, |sent| sent.min(last));
        to_client.goaway(last, reason::NO_ERROR);
        self.last_sent = Some(last);
        last
    }
}

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
        self.go_away.upstream_draining = true;
        let refused: Vec<StreamId> = self
            .streams
            .map
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
        self.go_away.hint(&mut self.to_client);
    }

    /// Tells the client to open no more streams here; those already open finish.
    pub(super) fn go_away(&mut self) {
        if self.go_away.going_away.is_some() {
            return;
        }
        if self.blocks.reply_block.is_some() {
            // Not inside the upstream's header block: the next loop turn sends it.
            return self.go_away.going_away_later = true;
        }
        let last = self.go_away.send(self.streams.last, &mut self.to_client);
        self.go_away.going_away = Some(last);
        self.services.shut_down();
    }

    // ---- stream bookkeeping ----

    /// Reports every stream still open when the connection ends.
    pub(super) fn finish_all(&mut self, code: Code, origin: Origin, why: &str) {
        let ids: Vec<StreamId> = self.streams.map.keys().copied().collect();
        for id in ids {
            self.end_stream(id, code, origin, Some(why.to_string()));
        }
    }
}
