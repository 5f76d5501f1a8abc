//! What a connection serves and for whom: the gateway's shared state, the plugin its upstream
//! connection reaches, the client's limits and rule, and the listener's mark. Read by every
//! concern; changed by none but the reset budget.

use super::*;
use crate::splice::listener::Served;

pub(super) struct Env {
    pub(super) shared: Arc<Shared>,
    /// The plugin this connection's upstream connection reaches; `None` on a connection
    /// started without one when no plugin was ever detected (`unattached`).
    pub(super) live: Option<Arc<Live>>,
    pub(super) limits: Limits,
    /// What the client may call, for a peer of the appliance listener (`None`: anything).
    pub(super) authorization: Option<Arc<Authorization>>,
    /// Set once the client finished a request (`served`): a call in flight counts, however
    /// long its plugin takes.
    pub(super) served: Served,
    /// What the calls the splice answers itself do with a wire-identical message: passed on
    /// on an unattached connection, translated on a spliced one (`call::answer::Identical`).
    pub(super) identical: Identical,
    /// The client's resets counted against `max_resets_per_second`.
    resets: Rate,
}

impl Env {
    pub(super) fn new(shared: Arc<Shared>, live: Option<Arc<Live>>) -> Env {
        Env {
            limits: shared.limits.clone(),
            shared,
            live,
            authorization: None,
            served: Served::default(),
            identical: Identical::Translated,
            resets: Rate::default(),
        }
    }

    /// What the upstream is called in messages and logs.
    pub(super) fn upstream_name(&self) -> String {
        match &self.live {
            Some(live) => live.conn.endpoint().to_string(),
            None => "(no plugin detected)".to_string(),
        }
    }

    /// One more counted reset: past `max_resets_per_second` on this connection, or on all of
    /// the gateway's together (a client spreading resets over connections).
    pub(super) fn too_many_resets(&mut self, now: Instant) -> bool {
        let per_second = self.limits.max_resets_per_second;
        let here = self.resets.exceeded(now, per_second);
        let all = self
            .shared
            .resets
            .lock()
            .map(|mut r| r.exceeded(now, per_second))
            .unwrap_or(false);
        here || all
    }

    /// The decoding context of the client's request blocks. It follows the `:path`s the
    /// upstream's dialect renames, keeping apart the table of the plugin they go on to where
    /// the splice rewrites a `:path` to one of another length; only a connection with an
    /// upstream of its own relays such calls.
    pub(super) fn client_decoder(&self) -> headers::Decoder {
        let mut decoder = headers::Decoder::default();
        if let Some(live) = &self.live {
            let staging = live.session.requires_staging;
            decoder.follow_renames(self.shared.router.renames(live.detected.dialect, staging));
        }
        decoder
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
}
