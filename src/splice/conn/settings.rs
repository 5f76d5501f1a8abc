//! SETTINGS per hop: each side's values taken where they govern what passes unchanged,
//! acknowledged once the other side acknowledged them (RFC 9113 §6.5), and the splice's own.

use super::*;

/// SETTINGS per hop (`settings`).
pub(super) struct Settings {
    /// The client's first frame, its SETTINGS, came (RFC 9113 §3.4).
    pub(super) client_seen: bool,
    /// The client's settings, which the splice obeys when it sends replies itself.
    pub(super) client_initial_window: Window,
    /// The SETTINGS_INITIAL_WINDOW_SIZE the client was told (the upstream's, passed on): the
    /// window each new stream of the client's starts with (RFC 9113 §6.9.2).
    pub(super) client_stream_window: Window,
    pub(super) client_max_frame: usize,
    /// The upstream's largest frame, for re-encoded header blocks.
    pub(super) upstream_max_frame: usize,
    /// The largest frame each side was told it may send.
    pub(super) client_frame_limit: usize,
    pub(super) upstream_frame_limit: usize,
    /// SETTINGS sent to each side and not yet acknowledged, oldest first, with the header
    /// table size each carried: applied once acknowledged, when the other side gets its ACK.
    /// The client's also carry an initial window lowered, which counts from its ACK.
    pub(super) unacked_by_client: VecDeque<(Option<u32>, Option<Window>)>,
    pub(super) unacked_by_upstream: VecDeque<Option<u32>>,
    /// The upstream's decoder waits for a size update that the client's blocks, now
    /// re-encoded, no longer carry to it.
    pub(super) upstream_expects_update: Option<usize>,
    /// The upstream's SETTINGS_INITIAL_WINDOW_SIZE: what a translated request may be.
    pub(super) upstream_initial_window: Window,
}

impl Default for Settings {
    /// RFC 9113's initial values, until each side's SETTINGS says otherwise.
    fn default() -> Settings {
        Settings {
            client_seen: false,
            client_initial_window: Window::DEFAULT,
            client_stream_window: Window::DEFAULT,
            client_max_frame: frame::DEFAULT_MAX_FRAME,
            upstream_max_frame: frame::DEFAULT_MAX_FRAME,
            client_frame_limit: frame::DEFAULT_MAX_FRAME,
            upstream_frame_limit: frame::DEFAULT_MAX_FRAME,
            unacked_by_client: VecDeque::new(),
            unacked_by_upstream: VecDeque::new(),
            upstream_expects_update: None,
            upstream_initial_window: Window::DEFAULT,
        }
    }
}

impl<C: Io, U: Io> Splice<C, U> {
    /// The client's SETTINGS: obeyed by the gateway's own sending, and the values that govern
    /// what passes unchanged passed on to the upstream in a SETTINGS of the gateway's.
    pub(super) fn client_settings(&mut self, payload: &[u8]) -> Result<(), Broken> {
        frame::check_settings(payload).map_err(|(what, code)| Broken::Client(what, code))?;
        let mut upstream = vec![(frame::SETTINGS_ENABLE_PUSH, 0)];
        let mut table = None;
        for (id, value) in frame::settings(payload) {
            match id {
                frame::SETTINGS_INITIAL_WINDOW_SIZE => {
                    self.client_initial_window_size(value)?;
                    upstream.push((id, value));
                }
                frame::SETTINGS_MAX_FRAME_SIZE => {
                    // The splice's own frames stay within the size every peer accepts from
                    // the start: a raise counts only from the splice's ACK, which waits for the
                    // upstream's, and some clients (gRPC C-core) enforce it only from then on.
                    self.settings.client_max_frame = (value as usize).min(frame::DEFAULT_MAX_FRAME);
                    let value = value.min(MAX_FRAME);
                    self.settings.upstream_frame_limit =
                        self.settings.upstream_frame_limit.max(value as usize);
                    upstream.push((id, value));
                }
                frame::SETTINGS_HEADER_TABLE_SIZE => {
                    let value = value.min(headers::MAX_TABLE_SIZE);
                    self.upstream_decoder.allow_table_size(value);
                    table = Some(value);
                    upstream.push((id, value));
                }
                frame::SETTINGS_MAX_HEADER_LIST_SIZE => upstream.push((id, value)),
                _ => {}
            }
        }
        if self.go_away.upstream_gone {
            self.apply_upstream_ack(table);
        } else {
            frame::put_settings(&mut self.to_upstream, &upstream);
            self.settings.unacked_by_upstream.push_back(table);
        }
        Ok(())
    }

    /// The client's new SETTINGS_INITIAL_WINDOW_SIZE, applied to the windows of the streams
    /// the gateway sends on itself (RFC 9113 §6.9.2): one taken past 2^31-1 is a connection
    /// error, FLOW_CONTROL_ERROR.
    fn client_initial_window_size(&mut self, value: u32) -> Result<(), Broken> {
        let initial = Window::new(value);
        let delta = initial.get() - self.settings.client_initial_window.get();
        self.settings.client_initial_window = initial;
        let overflow = || {
            Broken::Client(
                "SETTINGS_INITIAL_WINDOW_SIZE takes a window over 2^31-1",
                reason::FLOW_CONTROL_ERROR,
            )
        };
        for s in self.streams.values_mut() {
            match &mut s.side {
                Side::Local(l) => l.window.adjust(delta).map_err(|_| overflow())?,
                Side::Translated(t) => t.window.adjust(delta).map_err(|_| overflow())?,
                _ => {}
            }
        }
        self.services.adjust_windows(delta).map_err(|_| overflow())
    }

    /// The upstream applies the client's values the gateway passed on: the client gets its
    /// ACK, and the gateway's own blocks follow a cut of the client's table.
    pub(super) fn apply_upstream_ack(&mut self, table: Option<u32>) {
        if let Some(size) = table {
            self.upstream_decoder.table_size_acknowledged(size);
        }
        self.to_client.settings_ack();
    }

    /// The client is told a new SETTINGS_INITIAL_WINDOW_SIZE: a raise counts at once for every
    /// stream (the client may apply it as soon as it reads it); a lowering only once the client
    /// acknowledged it (`lower_stream_window`), which it returns.
    pub(super) fn raise_stream_window(&mut self, window: Window) -> Option<Window> {
        if window < self.settings.client_stream_window {
            return Some(window);
        }
        self.set_stream_window(window);
        None
    }

    /// Every stream's credit moved as the client moves its windows (RFC 9113 §6.9.2). One the
    /// upstream's values take past 2^31-1 the client answers as a connection error; the
    /// credit stays where it was, past what the client may send anyway.
    pub(super) fn set_stream_window(&mut self, window: Window) {
        let delta = window.get() - self.settings.client_stream_window.get();
        self.settings.client_stream_window = window;
        for s in self.streams.values_mut() {
            let _ = s.credit.adjust(delta);
        }
    }

    /// The client's SETTINGS are not acknowledged yet (the splice's ACK follows the upstream's).
    /// The gateway's own replies wait for that ACK, as the upstream's do: a client applies its
    /// own SETTINGS once they are acknowledged, so DATA sent before counts against its old
    /// INITIAL_WINDOW_SIZE, and a client that then shrinks its window on the ACK may never give
    /// that credit back (h2 0.4 does not: the stream stalls with the gateway's window at 0).
    pub(super) fn client_settings_unacked(&self) -> bool {
        !self.settings.unacked_by_upstream.is_empty()
    }

    /// The gateway's limits as SETTINGS, for its server preface when the upstream's never came.
    pub(super) fn own_settings(&self) -> Vec<(u16, u32)> {
        vec![
            (
                frame::SETTINGS_MAX_CONCURRENT_STREAMS,
                self.limits.max_concurrent_streams,
            ),
            (
                frame::SETTINGS_MAX_HEADER_LIST_SIZE,
                self.limits.max_header_list_size,
            ),
        ]
    }

    /// The upstream's SETTINGS: the values that govern what passes unchanged, passed on to the
    /// client in a SETTINGS of the gateway's, with the gateway's own limits. The first is the
    /// gateway's server preface.
    pub(super) fn upstream_settings(&mut self, payload: &[u8]) -> Result<(), Broken> {
        frame::check_settings(payload).map_err(|(what, _)| Broken::Upstream(what.into()))?;
        let mut client = Vec::with_capacity(6);
        let (mut streams, mut list) = (None, None);
        let (mut table, mut lowered) = (None, None);
        for (id, value) in frame::settings(payload) {
            match id {
                frame::SETTINGS_MAX_FRAME_SIZE => {
                    self.settings.upstream_max_frame = value as usize;
                    let value = value.min(MAX_FRAME);
                    self.settings.client_frame_limit =
                        self.settings.client_frame_limit.max(value as usize);
                    client.push((id, value));
                }
                frame::SETTINGS_HEADER_TABLE_SIZE => {
                    let value = value.min(headers::MAX_TABLE_SIZE);
                    self.client_decoder.allow_table_size(value);
                    table = Some(value);
                    client.push((id, value));
                }
                frame::SETTINGS_INITIAL_WINDOW_SIZE => {
                    self.settings.upstream_initial_window = Window::new(value);
                    lowered = self.raise_stream_window(Window::new(value));
                    client.push((id, value));
                }
                frame::SETTINGS_MAX_CONCURRENT_STREAMS => streams = Some(value),
                frame::SETTINGS_MAX_HEADER_LIST_SIZE => list = Some(value),
                _ => {}
            }
        }
        let first = !self.to_client.preface_sent();
        if first || streams.is_some() {
            let limit = self.limits.max_concurrent_streams;
            client.push((
                frame::SETTINGS_MAX_CONCURRENT_STREAMS,
                streams.map_or(limit, |v| v.min(limit)),
            ));
        }
        if first || list.is_some() {
            let limit = self.limits.max_header_list_size;
            client.push((
                frame::SETTINGS_MAX_HEADER_LIST_SIZE,
                list.map_or(limit, |v| v.min(limit)),
            ));
        }
        if first {
            // The server preface first, then whatever the splice held meanwhile.
            self.to_client.preface(&client);
        } else {
            self.to_client.settings(&client);
        }
        self.settings.unacked_by_client.push_back((table, lowered));
        Ok(())
    }

    /// The gateway's SETTINGS as the client's server preface, the upstream's having never
    /// come (it is gone, or was given up on): what the splice held for the client follows.
    pub(super) fn own_preface(&mut self) {
        let settings = self.own_settings();
        self.to_client.preface(&settings);
        // The client's ACK of it is nobody else's.
        self.settings.unacked_by_client.push_back((None, None));
    }
}
