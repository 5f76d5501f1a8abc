//! PING per hop (RFC 9113 §6.7): each side's PINGs answered by the gateway itself, never
//! passed on; and the keepalive PINGs it sends a bridged upstream, whose peer may vanish
//! without a FIN, dropped when one goes unanswered.

use super::*;

/// PINGs per hop and the upstream keepalive (`ping`).
#[derive(Default)]
pub(super) struct Ping {
    /// PINGs to the upstream (a bridge connection): a peer that vanished without a FIN is
    /// noticed within `timeout`, not after TCP's retransmissions.
    pub(super) keepalive: Option<Keepalive>,
    /// When the next keepalive PING goes, or — while one is out — by when its ACK must come.
    pub(super) at: Option<Instant>,
    /// A keepalive PING is out, its ACK awaited by `at`.
    pub(super) out: bool,
}

/// The payload of the splice's keepalive PINGs: its ACK is told from others' by it.
const KEEPALIVE_PING: [u8; 8] = *b"csi-gw-k";

impl Ping {
    /// The next keepalive PING goes an interval from now (none without a keepalive).
    pub(super) fn next_in_an_interval(&mut self) {
        self.at = self.keepalive.map(|k| Instant::now() + k.interval);
    }
}

impl<C: Io, U: Io> Splice<C, U> {
    /// A client's PING: answered (its ACK carries its payload). An ACK from the client is
    /// none of the gateway's business: it sends the client no PING.
    pub(super) fn client_ping(&mut self, head: &Head, payload: &[u8]) {
        if !head.has(frame::ACK) {
            self.to_client.ping_ack(payload);
        }
    }

    /// The upstream's PING: answered; or the ACK of the gateway's keepalive PING, after which
    /// the next is due in `keepalive.interval`.
    pub(super) fn upstream_ping(&mut self, head: &Head, payload: &[u8]) {
        if !head.has(frame::ACK) {
            frame::put(
                &mut self.to_upstream,
                Kind::Ping,
                frame::ACK,
                StreamId::CONNECTION,
                payload,
            );
        } else if payload == KEEPALIVE_PING && self.ping.out {
            self.ping.out = false;
            self.ping.next_in_an_interval();
        }
    }

    /// A keepalive PING is due, or the last one's ACK is overdue.
    pub(super) fn keepalive_due(&mut self) {
        let Some(k) = self.ping.keepalive else { return };
        if !self.settings.client_seen {
            // The upstream's first frame must be the SETTINGS that follows the preface, which
            // the client's own SETTINGS brings: no PING before it.
            self.ping.next_in_an_interval();
            return;
        }
        if self.ping.out {
            let why = format!("no keepalive ping reply within {:?}", k.timeout);
            tracing::warn!(upstream = %self.upstream_name(), reason = %why, "upstream peer unresponsive; dropping the connection");
            self.ping.at = None;
            return self.upstream_lost(&why);
        }
        frame::put(
            &mut self.to_upstream,
            Kind::Ping,
            0,
            StreamId::CONNECTION,
            &KEEPALIVE_PING,
        );
        self.ping.out = true;
        self.ping.at = Some(Instant::now() + k.timeout);
    }
}
