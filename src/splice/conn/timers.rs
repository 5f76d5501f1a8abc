//! The connection's one timer: preface, header block, idle and stalled-request timeouts,
//! keepalive PINGs, the upstream's handshake, and call deadlines (`grpc-timeout`).

use super::*;

/// Since when each timeout counts (`timers`); the calls' deadlines are `Streams::deadlines`.
pub(super) struct Timers {
    /// When the connection was accepted (the preface timeout counts from it).
    pub(super) accepted: Instant,
    /// Since when the connection has had no stream, and since when a request header block
    /// waits for its CONTINUATION frames.
    pub(super) idle_since: Option<Instant>,
    /// When the client last sent a frame of a request — HEADERS, CONTINUATION or DATA — (or the
    /// stalled-request check last found none): with streams open, a request unfinished
    /// `idle_timeout` after it is stalled, whatever else (PINGs, WINDOW_UPDATEs) the client
    /// sends meanwhile.
    pub(super) client_heard: Instant,
    pub(super) block_since: Option<Instant>,
    /// Since when the client's frame at the front of `from_client` has been only partly read.
    pub(super) frame_since: Option<Instant>,
    /// When the client's preface went on to the upstream: the upstream's SETTINGS must follow
    /// within `Live::connect_timeout` (`Timeout::UpstreamHandshake`).
    pub(super) upstream_asked: Option<Instant>,
}

impl Timers {
    /// Restarts the timers of a frame or header block the client is part way through.
    pub(super) fn restart_client(&mut self) {
        if self.frame_since.is_some() || self.block_since.is_some() {
            let now = Instant::now();
            self.frame_since = self.frame_since.map(|_| now);
            self.block_since = self.block_since.map(|_| now);
        }
    }

    /// Notes when the connection last had no stream (`idle`), for the idle timeout.
    pub(super) fn note_idle(&mut self, idle: bool) {
        match (idle, self.idle_since) {
            (true, None) => self.idle_since = Some(Instant::now()),
            (false, Some(_)) => self.idle_since = None,
            _ => {}
        }
    }

    /// The next timeout of the client's side.
    pub(super) fn client_deadline(
        &self,
        preface: bool,
        limits: &Limits,
        going_away: bool,
        streams_open: bool,
    ) -> Option<(Instant, Timeout)> {
        if !preface {
            return Some((self.accepted + limits::PREFACE_TIMEOUT, Timeout::Preface));
        }
        if let Some(since) = self.block_since.into_iter().chain(self.frame_since).min() {
            return Some((since + limits.header_block_timeout, Timeout::HeaderBlock));
        }
        let idle = limits.idle_timeout;
        match self.idle_since {
            _ if idle.is_zero() => None,
            Some(since) if !going_away => Some((since + idle, Timeout::Idle)),
            // One stream opened and never finished would keep a connection from ever being
            // idle: a client silent that long with a request unfinished has stalled.
            None if streams_open => Some((self.client_heard + idle, Timeout::Stalled)),
            _ => None,
        }
    }

    /// A connection accepted now, with no stream yet.
    pub(super) fn new() -> Timers {
        let now = Instant::now();
        Timers {
            accepted: now,
            idle_since: Some(now),
            client_heard: now,
            block_since: None,
            frame_since: None,
            upstream_asked: None,
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub(super) enum Timeout {
    Preface,
    HeaderBlock,
    Idle,
    Keepalive,
    /// The upstream's SETTINGS did not come in time.
    UpstreamHandshake,
    /// A call on the upstream reached its deadline.
    Call,
    /// The client has sent nothing for `idle_timeout` while it has streams open: any whose
    /// request it never finished is stalled.
    Stalled,
    /// Window is withheld (`withheld`): whether it may be granted now.
    Budget,
}

impl<C: Io, U: Io> Splice<C, U> {
    /// The next timeout, and what it is for.
    pub(super) fn deadline(&self) -> Option<(Instant, Timeout)> {
        let keepalive = self
            .ping
            .at
            .filter(|_| !self.go_away.upstream_gone)
            .map(|at| (at, Timeout::Keepalive));
        let handshake = self
            .timers
            .upstream_asked
            .filter(|_| !self.to_client.preface_sent() && !self.go_away.upstream_gone)
            .zip(self.env.live.as_ref())
            .and_then(|(asked, live)| asked.checked_add(live.connect_timeout))
            .map(|at| (at, Timeout::UpstreamHandshake));
        // Inside the upstream's header block too: a plugin that never ends one would hold
        // every call past its deadline (`calls_expired` gives the upstream up then).
        let call = self
            .streams
            .deadlines
            .first()
            .map(|&(at, _)| (at, Timeout::Call));
        // Room another connection makes is not announced: looked for every `BUDGET_RETRY`.
        let budget = self
            .flow
            .withheld_since
            .filter(|_| self.flow.withheld > 0)
            .or(self.flow.replies_paused)
            .map(|since| (Instant::now() + BUDGET_RETRY).min(since + limits::BUDGET_WAIT))
            .or(self.local.room_retry)
            .map(|at| (at, Timeout::Budget));
        let client = self.timers.client_deadline(
            self.client.preface,
            &self.env.limits,
            self.go_away.going_away.is_some(),
            !self.streams.map.is_empty(),
        );
        [client, keepalive, handshake, call, budget]
            .into_iter()
            .flatten()
            .min_by_key(|&(at, _)| at)
    }

    /// `idle_timeout` passed with the client silent and streams open: the streams whose
    /// request it never finished are reset (CANCEL) and the connection asked to go away; with
    /// none such, the check starts over.
    pub(super) fn stalled(&mut self) {
        let stalled: Vec<StreamId> = self
            .streams
            .map
            .iter()
            .filter(|(_, s)| !s.request_done() && !matches!(s.side, Side::Service))
            .map(|(id, _)| *id)
            .collect();
        self.timers.client_heard = self.now;
        if stalled.is_empty() {
            return;
        }
        tracing::debug!(streams = stalled.len(), after = ?self.env.limits.idle_timeout, "requests not finished by a silent client: streams reset, connection asked to go away");
        for id in stalled {
            self.calls().stream_error(
                id,
                reason::CANCEL,
                "request not finished within idle_timeout",
            );
        }
        self.go_away();
    }

    /// A timeout fired: `Some` when the connection ends now.
    pub(super) fn timed_out(&mut self, why: Timeout) -> Option<Poll<()>> {
        match why {
            Timeout::Preface => {
                tracing::debug!(after = ?self.timers.accepted.elapsed(), "client sent no HTTP/2 preface");
                Some(Poll::Ready(()))
            }
            Timeout::HeaderBlock => Some(self.fail(Broken::Client(
                "header block or frame not finished in time",
                reason::PROTOCOL_ERROR,
            ))),
            Timeout::Idle => {
                tracing::debug!("idle client connection asked to go away");
                self.go_away();
                None
            }
            Timeout::Keepalive => {
                if let Err(why) = self
                    .ping
                    .due(self.settings.client_seen, &mut self.to_upstream)
                {
                    let upstream = self.env.upstream_name();
                    tracing::warn!(%upstream, reason = %why, "upstream peer unresponsive; dropping the connection");
                    self.upstream_lost(&why);
                }
                None
            }
            Timeout::UpstreamHandshake => {
                let timeout = self.env.live.as_ref().map(|l| l.connect_timeout);
                let why = format!(
                    "no HTTP/2 SETTINGS within {:?} (upstream.connect_timeout)",
                    timeout.unwrap_or_default()
                );
                self.upstream_lost(&why);
                None
            }
            Timeout::Call => {
                self.calls_expired();
                None
            }
            Timeout::Stalled => {
                self.stalled();
                None
            }
            // `poll_run` grants what it may.
            Timeout::Budget => {
                if self
                    .flow
                    .withheld_since
                    .is_some_and(|t| t.elapsed() >= limits::BUDGET_WAIT)
                {
                    self.calls().make_room();
                }
                if self
                    .flow
                    .replies_paused
                    .is_some_and(|t| t.elapsed() >= limits::BUDGET_WAIT)
                {
                    self.calls().make_reply_room();
                }
                if self.local.room_retry.is_some_and(|at| at <= Instant::now()) {
                    // Set again by `poll_run` while anything still waits.
                    self.local.room_retry = None;
                    self.calls().answering().expire_waiting();
                    self.calls().answering().admit_waiting();
                }
                None
            }
        }
    }

    /// The calls whose deadlines passed (the first one's at least, which the timer fired for):
    /// each gets DEADLINE_EXCEEDED from the gateway in the plugin's place. Before the
    /// upstream's SETTINGS nothing can reach the client but after a server preface of the
    /// gateway's own: the upstream connection is given up then, as when it closes; and so it
    /// is inside a reply header block of the upstream's.
    pub(super) fn calls_expired(&mut self) {
        let now = Instant::now();
        let due = self
            .streams
            .deadlines
            .first()
            .map_or(now, |&(at, _)| at.max(now));
        let mut expired = Vec::new();
        while let Some(&(at, id)) = self.streams.deadlines.first() {
            if at > due {
                break;
            }
            self.streams.deadlines.pop_first();
            let waiting = self
                .streams
                .map
                .get(&id)
                .is_some_and(|s| s.side.on_upstream() && !s.reply_done());
            if waiting {
                expired.push(id);
            }
        }
        if expired.is_empty() {
            return;
        }
        for &id in &expired {
            self.calls().deadline_exceeded(id);
        }
        if !self.to_client.preface_sent() {
            self.upstream_lost("no HTTP/2 SETTINGS before a call's deadline");
        }
        if self.blocks.reply_block.is_some() {
            // The upstream's header block is still open: nothing else of the upstream's may
            // come before its end, and nothing of the gateway's reach the client if it went
            // on midway. Given up as if it had closed (`upstream_lost`), so that the answers
            // go, or the client's connection closes, now rather than never.
            self.upstream_lost("a call's deadline passed inside an unfinished reply header block");
        }
    }
}

impl Calls<'_> {
    /// A call on the upstream whose deadline passed before its reply ended: answered
    /// DEADLINE_EXCEEDED by the gateway, as a call it answers gets it
    /// (`call::answer::with_deadline`), and its stream reset on the upstream (RST_STREAM
    /// CANCEL), whose frames on it from then on are dropped (`reset_upstream`).
    pub(super) fn deadline_exceeded(&mut self, id: StreamId) {
        let Some(stream) = self.streams.map.get(&id) else {
            return;
        };
        let timeout = stream.timeout.unwrap_or_default();
        let s = Status::deadline_exceeded(format!(
            "deadline of {timeout:?} exceeded waiting for upstream {}",
            self.env.upstream_name()
        ));
        tracing::debug!(
            stream = %id,
            ?timeout,
            "call past its deadline; answered by the gateway"
        );
        if matches!(stream.side, Side::Translated(_)) {
            let head_sent = stream.reply_started();
            self.release_translated(id);
            let Some(stream) = self.streams.map.get_mut(&id) else {
                return;
            };
            let answer = match stream.report.as_mut() {
                Some(report) => reply::error_reply(report.called, Origin::Gateway, s, report),
                None => Err(s),
            };
            return self.answering().reply_instead(id, answer, head_sent);
        }
        // From now on the upstream's stream frames are sorted (`passes_on`).
        self.streams.own = true;
        self.reset_on_upstream(id);
        self.answer_instead(id, &s);
    }
}
