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

impl Settings {
    /// The client's SETTINGS are not acknowledged yet (the splice's ACK follows the upstream's).
    /// The gateway's own replies wait for that ACK, as the upstream's do: a client applies its
    /// own SETTINGS once they are acknowledged, so DATA sent before counts against its old
    /// INITIAL_WINDOW_SIZE, and a client that then shrinks its window on the ACK may never give
    /// that credit back (h2 0.4 does not: the stream stalls with the gateway's window at 0).
    pub(super) fn client_unacked(&self) -> bool {
        !self.unacked_by_upstream.is_empty()
    }
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
                    // Applied to the windows of the streams the gateway sends on itself (RFC
                    // 9113 §6.9.2): one taken past 2^31-1 is a connection error.
                    let delta = self.settings.client_initial_window.resize(value);
                    let adjusted = self.streams.adjust_own_windows(delta);
                    adjusted
                        .and_then(|()| self.services.adjust_windows(delta))
                        .map_err(|_| {
                            Broken::Client(
                                "SETTINGS_INITIAL_WINDOW_SIZE takes a window over 2^31-1",
                                reason::FLOW_CONTROL_ERROR,
                            )
                        })?;
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
                    self.blocks.upstream_decoder.allow_table_size(value);
                    table = Some(value);
                    upstream.push((id, value));
                }
                frame::SETTINGS_MAX_HEADER_LIST_SIZE => upstream.push((id, value)),
                _ => {}
            }
        }
        if self.go_away.upstream_gone {
            upstream_acked(
                table,
                &mut self.blocks.upstream_decoder,
                &mut self.to_client,
            );
        } else {
            frame::put_settings(&mut self.to_upstream, &upstream);
            self.settings.unacked_by_upstream.push_back(table);
        }
        Ok(())
    }

    /// The client acknowledged SETTINGS: it applies what the gateway passed on from the
    /// upstream, so may the upstream now rely on it (the client's ACK goes on).
    pub(super) fn client_settings_ack(&mut self) {
        let Some((table, lowered)) = self.settings.unacked_by_client.pop_front() else {
            return;
        };
        if let Some(window) = lowered {
            let delta = self
                .settings
                .client_stream_window
                .resize(window.get() as u32);
            self.streams.move_credits(delta);
        }
        if let Some(size) = table {
            let size = size as usize;
            if size < self.blocks.client_decoder.table_max() {
                self.settings.upstream_expects_update = Some(size);
            }
            self.blocks
                .client_decoder
                .table_size_acknowledged(size as u32);
        }
        if !self.go_away.upstream_gone {
            let ack = (Kind::Settings, frame::ACK, StreamId::CONNECTION);
            frame::put(&mut self.to_upstream, ack.0, ack.1, ack.2, &[]);
        }
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
                    self.blocks.client_decoder.allow_table_size(value);
                    table = Some(value);
                    client.push((id, value));
                }
                frame::SETTINGS_INITIAL_WINDOW_SIZE => {
                    self.settings.upstream_initial_window = Window::new(value);
                    // A raise counts at once for every stream (the client may apply it as soon
                    // as it reads it); a lowering only once the client acknowledged it.
                    let window = Window::new(value);
                    if window < self.settings.client_stream_window {
                        lowered = Some(window);
                    } else {
                        let delta = self.settings.client_stream_window.resize(value);
                        self.streams.move_credits(delta);
                    }
                    client.push((id, value));
                }
                frame::SETTINGS_MAX_CONCURRENT_STREAMS => streams = Some(value),
                frame::SETTINGS_MAX_HEADER_LIST_SIZE => list = Some(value),
                _ => {}
            }
        }
        let first = !self.to_client.preface_sent();
        if first || streams.is_some() {
            let limit = self.env.limits.max_concurrent_streams;
            client.push((
                frame::SETTINGS_MAX_CONCURRENT_STREAMS,
                streams.map_or(limit, |v| v.min(limit)),
            ));
        }
        if first || list.is_some() {
            let limit = self.env.limits.max_header_list_size;
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
        let settings = self.env.own_settings();
        self.to_client.preface(&settings);
        // The client's ACK of it is nobody else's.
        self.settings.unacked_by_client.push_back((None, None));
    }
}

/// The upstream applies the client's values the gateway passed on: the client gets its ACK,
/// and the gateway's own blocks follow a cut of the client's table.
pub(super) fn upstream_acked(
    table: Option<u32>,
    decoder: &mut headers::Decoder,
    to_client: &mut ToClient,
) {
    if let Some(size) = table {
        decoder.table_size_acknowledged(size);
    }
    to_client.settings_ack();
}
