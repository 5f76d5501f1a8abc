//! Flow control and the gateway's buffer budget: the client's windows counted and enforced
//! (RFC 9113 §6.9.1), window granted for what the splice consumes, withheld while the gateway
//! has no room, and the connection window owed to either side.

use super::*;

/// Flow control, and what the connection holds of the gateway's buffer budget (`flow`).
pub(super) struct Flow {
    /// How much DATA the client may still send on the connection: the window it was granted,
    /// by the upstream's WINDOW_UPDATEs passed on and by the splice's own, less what it sent.
    /// Below zero it broke flow control (RFC 9113 §6.9.1).
    pub(super) client_credit: Window,
    /// Connection window the client's DATA for local calls took and that is not given back
    /// yet: the connection or the gateway holds all the request bytes it may (`give_back`).
    pub(super) withheld: u64,
    /// Since when window has been withheld, or the last request refused for room.
    pub(super) withheld_since: Option<Instant>,
    /// How much more DATA the client accepts on the connection, from anyone.
    pub(super) window: Window,
    /// Connection window the splice's own replies took and the upstream does not know about.
    pub(super) debt: u64,
    /// The upstream's DATA waits: forwarding it now would exceed the client's window.
    pub(super) held: bool,
    /// Connection window the upstream spent on frames the client never got (translated
    /// replies, replies to reset streams), not given back yet: netted against `debt`, and
    /// given back once it is worth a frame.
    pub(super) owed_upstream: u64,
    /// Request body bytes of local calls held now, on the gateway's budget.
    pub(super) requests: Hold,
    /// Request bytes the gateway's own services hold now (`ServiceStreams::held`), and the reply
    /// bytes waiting to go to the client, on the gateway's budget.
    pub(super) services: Hold,
    /// Reply bytes held for the client, on the gateway's budget: the splice's own replies not
    /// sent yet (`Local::reply`, waiting on the client's windows or buffer) and translated
    /// calls' replies as they come from the plugin (`Translated::reply`, until whole).
    pub(super) replies: Hold,
    /// Since when the upstream is not read: this connection holds replies and the gateway has
    /// no room for more (`reads_upstream`); looked at again every `BUDGET_RETRY`, and past
    /// `BUDGET_WAIT` a translated reply still coming is refused to make room (`make_reply_room`).
    pub(super) replies_paused: Option<Instant>,
}

/// Replies a connection may hold, whatever the gateway's budget, while it reads the upstream
/// (`Flow::reads_upstream`): a read's worth, the slack every connection already has past the
/// budget (it reads before it knows).
const READ_RESERVE: usize = 64 * 1024;

impl Flow {
    /// A new connection's: nothing held yet of the gateway's `budget`.
    pub(super) fn new(budget: &Arc<Budget>) -> Flow {
        Flow {
            client_credit: Window::default(),
            withheld: 0,
            withheld_since: None,
            window: Window::default(),
            debt: 0,
            held: false,
            owed_upstream: 0,
            requests: budget.hold(),
            services: budget.hold(),
            replies: budget.hold(),
            replies_paused: None,
        }
    }

    /// What this connection holds, of requests and replies, on the gateway's budget: given
    /// back when the connection is dropped, however it ends (the holds' own `Drop`).
    pub(super) fn holds(&self) -> usize {
        self.requests.len() + self.services.len() + self.replies.len()
    }

    /// Whether the client may be granted more window now: the connection and the gateway may
    /// hold more.
    pub(super) fn may_grant(&self, budget: &Budget) -> bool {
        self.holds() < limits::CONNECTION_BUFFERED && budget.room()
    }

    /// Whether the upstream is read: not while this connection holds `READ_RESERVE` of
    /// replies or more and it or the gateway may hold no more. The plugin's replies then wait
    /// in the plugin, paced by flow control, rather than in the gateway. Below the reserve a
    /// connection reads on whatever others hold, so that a client that reads its replies gets
    /// a small one whole even while clients that do not read hold the whole budget (it stopped
    /// midway before, and waited `BUDGET_WAIT` for a refusal).
    pub(super) fn reads_upstream(&self, budget: &Budget) -> bool {
        self.replies.len() < READ_RESERVE || self.may_grant(budget)
    }

    /// The splice grants the client `n` more bytes of connection window, counted where the
    /// client may send it (`client_credit`). A grant past 2^31-1 is the granter's error, which
    /// the client reports; the count stays.
    pub(super) fn grant(&mut self, n: u32, to_client: &mut ToClient) {
        to_client.window_update(StreamId::CONNECTION, n);
        let _ = self.client_credit.increase(n);
    }

    /// Connection window for `n` bytes of a request the splice consumed: given back now if
    /// the connection and the gateway may hold more, else once they may (`withheld`), so that
    /// a client obeying flow control sends no more meanwhile.
    pub(super) fn give_back(&mut self, n: u32, budget: &Budget, to_client: &mut ToClient) {
        self.withheld += n as u64;
        if self.withheld > 0 && self.withheld_since.is_none() {
            self.withheld_since = Some(Instant::now());
        }
        self.grant_withheld(budget, to_client);
    }

    pub(super) fn grant_withheld(&mut self, budget: &Budget, to_client: &mut ToClient) {
        if self.withheld == 0 || !self.may_grant(budget) {
            return;
        }
        // Never more than a window may be: only a client sending past its window withholds more.
        let n = std::mem::take(&mut self.withheld).min(frame::MAX_WINDOW as u64);
        self.withheld_since = None;
        self.grant(n as u32, to_client);
    }

    /// Nets the window owed to the upstream against what the splice's own replies took, and
    /// gives back the rest on `to_upstream` (`None`: gone) once it is worth a frame.
    pub(super) fn settle_owed(&mut self, to_upstream: Option<&mut BytesMut>) {
        let net = self.owed_upstream.min(self.debt);
        self.owed_upstream -= net;
        self.debt -= net;
        if let Some(out) = to_upstream.filter(|_| self.owed_upstream >= OWED_UPSTREAM_FLUSH) {
            frame::put_window_update(out, StreamId::CONNECTION, self.owed_upstream as u32);
            self.owed_upstream = 0;
        }
    }
}

impl Calls<'_> {
    /// A client DATA frame of `len` bytes, against the windows the client was granted (RFC
    /// 9113 §6.9.1). Past the connection's: a connection error, FLOW_CONTROL_ERROR (the
    /// gateway cannot tell what else the client sent past it). Past only the stream's: a
    /// stream error (§5.4.2), so that the connection's other calls go on; the frame is dropped
    /// and its connection window given back, as for any frame not passed on. `false` then.
    pub(super) fn within_window(&mut self, id: StreamId, len: usize) -> Result<bool, Broken> {
        if self.flow.client_credit.consume(len).is_err() {
            return Err(Broken::Client(
                "DATA past the connection's flow-control window",
                reason::FLOW_CONTROL_ERROR,
            ));
        }
        let Some(stream) = self.streams.map.get_mut(&id).filter(|s| !s.request_done()) else {
            return Ok(true);
        };
        if stream.credit.consume(len).is_ok() {
            return Ok(true);
        }
        self.flow.grant(len as u32, self.to_client);
        self.stream_error(
            id,
            reason::FLOW_CONTROL_ERROR,
            "DATA past the stream's flow-control window",
        );
        Ok(false)
    }

    pub(super) fn client_window_update(
        &mut self,
        stream: StreamId,
        n: u32,
        whole: &[u8],
    ) -> Result<(), Broken> {
        if stream.is_connection() {
            if n == 0 {
                return Err(Broken::Client("WINDOW_UPDATE of 0", reason::PROTOCOL_ERROR));
            }
            if self.flow.window.increase(n).is_err() {
                return Err(Broken::Client(
                    "connection window over 2^31-1",
                    reason::FLOW_CONTROL_ERROR,
                ));
            }
            // Keep back what the splice's own replies took, so the upstream's idea of the
            // window is never more than the client's.
            let repay = self.flow.debt.min(n as u64);
            self.flow.debt -= repay;
            let forward = n - repay as u32;
            if forward == n {
                self.to_upstream.extend_from_slice(whole);
            } else if forward > 0 {
                frame::put_window_update(self.to_upstream, StreamId::CONNECTION, forward);
            }
            return Ok(());
        }
        self.streams.idle_check(stream)?;
        let side = self.streams.map.get_mut(&stream).map(|s| &mut s.side);
        let own_window = match side {
            Some(Side::Local(l)) => Some(&mut l.window),
            Some(Side::Translated(t)) => Some(&mut t.window),
            _ => None,
        };
        if let Some(window) = own_window {
            let bad = match n {
                0 => Some(reason::PROTOCOL_ERROR),
                n => window.increase(n).err().map(|_| reason::FLOW_CONTROL_ERROR),
            };
            if let Some(code) = bad {
                self.to_client.rst_stream(stream, code);
                self.end_stream(stream, Code::Internal, Origin::Client, bad_window_update());
            }
            return Ok(());
        }
        match self.streams.map.get_mut(&stream).map(|s| &mut s.side) {
            Some(Side::Local(_)) | Some(Side::Translated(_)) => {}
            Some(Side::Relayed) => self.to_upstream.extend_from_slice(whole),
            Some(Side::Service) => {
                let bad = match n {
                    0 => Some(reason::PROTOCOL_ERROR),
                    n => (!self.services.window_update(stream, n))
                        .then_some(reason::FLOW_CONTROL_ERROR),
                };
                if let Some(code) = bad {
                    self.to_client.rst_stream(stream, code);
                    self.end_stream(stream, Code::Internal, Origin::Client, bad_window_update());
                }
            }
            // A stream that has ended: nothing is sent on it any more; an increment of 0 is
            // still an error (RFC 9113 §6.9).
            None if n == 0 => self.to_client.rst_stream(stream, reason::PROTOCOL_ERROR),
            None => {}
        }
        Ok(())
    }

    /// The upstream has not been read for `BUDGET_WAIT`. Replies whole and waiting for the
    /// client free their room as it reads; translated replies still coming would hold theirs
    /// without end (every connection's waiting for another's room): the largest is answered
    /// RESOURCE_EXHAUSTED, its stream reset on the upstream, and what it held let go.
    pub(super) fn make_reply_room(&mut self) {
        self.flow.replies_paused = Some(Instant::now());
        let largest = self
            .streams
            .map
            .iter()
            .filter_map(|(id, s)| match &s.side {
                Side::Translated(t) if !s.reply_done() && !t.reply.is_empty() => {
                    Some((t.reply.len(), *id))
                }
                _ => None,
            })
            .max();
        let Some((held, id)) = largest else {
            return;
        };
        tracing::debug!(
            stream = %id,
            held,
            "translated reply refused: no room to hold it"
        );
        let head_sent = self.streams.map.get(&id).is_some_and(|s| s.reply_started());
        let refusal = Status::resource_exhausted(format!(
            "the gateway holds all the replies it may (max_buffered_bytes, or {} bytes on this connection); this one waited {:?} for room",
            limits::CONNECTION_BUFFERED,
            limits::BUDGET_WAIT,
        ));
        self.release_translated(id);
        self.answering().reply_instead(id, Err(refusal), head_sent);
    }

    /// The upstream's WINDOW_UPDATE on a relayed stream or the connection, passed on: counted
    /// where the client may send it (past 2^31-1 the upstream's error, which the client
    /// reports). A connection one waits while the gateway holds all it may: granted later.
    pub(super) fn upstream_window_update(
        &mut self,
        head: Head,
        whole: &[u8],
    ) -> Result<(), Broken> {
        let n = frame::increment(&whole[frame::HEAD_LEN..]).map_err(upstream_malformed)?;
        let budget = &self.env.shared.buffered;
        if head.stream.is_connection() && !self.flow.may_grant(budget) {
            self.flow.give_back(n, budget, self.to_client);
            return Ok(());
        }
        self.to_client.pass(whole);
        let credit = match head.stream.is_connection() {
            true => Some(&mut self.flow.client_credit),
            false => self
                .streams
                .map
                .get_mut(&head.stream)
                .map(|s| &mut s.credit),
        };
        if let Some(credit) = credit {
            let _ = credit.increase(n);
        }
        Ok(())
    }

    /// Window withheld `BUDGET_WAIT`: the connection's largest unfinished local request is
    /// answered RESOURCE_EXHAUSTED now and what it held let go.
    pub(super) fn make_room(&mut self) {
        self.flow.withheld_since = Some(Instant::now());
        let largest = self
            .streams
            .map
            .iter()
            .filter_map(|(id, s)| match &s.side {
                Side::Local(l) if !s.request_done() && l.cancel.is_none() && !l.body.is_empty() => {
                    Some((l.body.len(), *id))
                }
                _ => None,
            })
            .max();
        let refusal = limits::no_room();
        // A service's stream, if it holds more: ended at the services' next poll.
        if let Some((held, id)) = self.services.largest_unfinished() {
            if largest.is_none_or(|(local, _)| held > local) {
                tracing::debug!(
                    stream = %id,
                    held,
                    "service request refused: no room to buffer it"
                );
                self.services.refuse(id, refusal);
                return;
            }
        }
        let Some((_, id)) = largest else {
            return;
        };
        let Some(Side::Local(local)) = self.streams.map.get_mut(&id).map(|s| &mut s.side) else {
            return;
        };
        local.refused = Some(refusal);
        let held = std::mem::take(&mut local.body).len();
        tracing::debug!(stream = %id, held, "request refused: no room to buffer it");
        self.flow.requests.release(held);
        self.answering().start(id);
        self.flow
            .grant_withheld(&self.env.shared.buffered, self.to_client);
    }
}
