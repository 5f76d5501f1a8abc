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

    /// The upstream's PING: answered on `out`; or the ACK of the gateway's keepalive PING,
    /// after which the next is due in `keepalive.interval`.
    pub(super) fn upstream(&mut self, head: &Head, payload: &[u8], out: &mut BytesMut) {
        if !head.has(frame::ACK) {
            frame::put(out, Kind::Ping, frame::ACK, StreamId::CONNECTION, payload);
        } else if payload == KEEPALIVE_PING && self.out {
            self.out = false;
            self.next_in_an_interval();
        }
    }

    /// A keepalive PING is due, sent on `out`, or the last one's ACK is overdue: `Err` then,
    /// saying why the upstream is given up. No PING goes before the client's SETTINGS
    /// (`client_seen`), which the upstream's first frame must answer.
    pub(super) fn due(&mut self, client_seen: bool, out: &mut BytesMut) -> Result<(), String> {
        let Some(k) = self.keepalive else {
            return Ok(());
        };
        if !client_seen {
            self.next_in_an_interval();
            return Ok(());
        }
        if self.out {
            self.at = None;
            return Err(format!("no keepalive ping reply within {:?}", k.timeout));
        }
        frame::put(out, Kind::Ping, 0, StreamId::CONNECTION, &KEEPALIVE_PING);
        self.out = true;
        self.at = Some(Instant::now() + k.timeout);
        Ok(())
    }
}
