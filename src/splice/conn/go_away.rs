//! GOAWAY per hop: the upstream's never reaches the client; the client's names the last
//! stream the gateway took; shutdown drains the connection; the upstream lost.

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
            self.calls().end_stream(
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

    /// The upstream connection is gone: relayed streams get UNAVAILABLE naming it, the client
    /// is told to go away, and local calls may still finish. If the upstream's SETTINGS never
    /// came, the gateway's own open the client's side first (`own_preface`).
    pub(super) fn upstream_lost(&mut self, why: &str) {
        if self.go_away.upstream_gone {
            return;
        }
        self.go_away.upstream_gone = true;
        self.flow.held = false;
        if self.blocks.reply_block.as_ref().is_some_and(|b| !b.passes) {
            // Cut off inside a block kept from the client: its connection is whole.
            self.blocks.reply_block = None;
            self.to_client.block_ends();
        }
        if self.blocks.reply_block.is_some() {
            // Cut off inside a header block: the client's connection cannot carry another
            // frame; closing it fails its calls.
            tracing::warn!(
                reason = why,
                "upstream connection lost; closing the client connection"
            );
            self.dead = true;
            let why = format!("upstream {}: {why}", self.env.upstream_name());
            return self.finish_all(Code::Unavailable, Origin::Gateway, &why);
        }
        if !self.to_client.preface_sent() {
            self.own_preface();
        }
        let upstream = self.env.upstream_name();
        tracing::warn!(upstream = %upstream, reason = why, "upstream connection lost under a spliced client connection");
        let relayed: Vec<StreamId> = self
            .streams
            .map
            .iter()
            .filter(|(_, s)| s.side.on_upstream() && !s.reply_done())
            .map(|(id, _)| *id)
            .collect();
        let s = Status::unavailable(format!("upstream {upstream}: {why}"));
        for id in relayed {
            if let Some(stream) = self.streams.map.get_mut(&id) {
                stream.stop_reading();
                self.calls().answer_instead(id, &s);
            }
        }
        // This connection now answers every call itself, on the gateway's own upstream
        // connection; a new one would be spliced again. The client's settings waiting for the
        // upstream's ACK get the gateway's.
        self.to_upstream.clear();
        while let Some(table) = self.settings.unacked_by_upstream.pop_front() {
            upstream_acked(
                table,
                &mut self.blocks.upstream_decoder,
                &mut self.to_client,
            );
        }
        self.go_away.hint(&mut self.to_client);
    }

    /// Reports every stream still open when the connection ends.
    pub(super) fn finish_all(&mut self, code: Code, origin: Origin, why: &str) {
        let ids: Vec<StreamId> = self.streams.map.keys().copied().collect();
        for id in ids {
            self.calls()
                .end_stream(id, code, origin, Some(why.to_string()));
        }
    }
}
