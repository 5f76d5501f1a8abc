//! One pipeline from a hub call to the plugin, its steps in order: target paths → staging
//! emulation → translation. Each step is a method of [`Pipeline`] that hands the call to the
//! next: [`Pipeline::call`] (the target paths, `target`), [`Pipeline::staged`] (the staging
//! emulation, `staging`), then `translate::call_upstream`.

use crate::dialect::Dialect;
use crate::hub::{Request as Req, Response as Resp};
use crate::translate::{self, CallError, HandleStore, RawUpstream, UpstreamSession};

use super::paths::Side;
use super::staging::{self, Emulation};

/// What every step of a call to the plugin needs.
pub struct Pipeline<'a> {
    /// Which hop the gateway is (`paths::Side`): whose node paths it handles.
    pub side: Side<'a>,
    /// Staging emulation for pre-staging clients; `None`: the plugin's refusal stands.
    pub emulation: Option<&'a Emulation>,
    /// The client's dialect.
    pub front: Dialect,
    pub session: &'a UpstreamSession,
    pub upstream: &'a dyn RawUpstream,
    /// Durable VolumeHandle metadata for a draft plugin.
    pub store: Option<&'a dyn HandleStore>,
}

impl Pipeline<'_> {
    /// The hub call through every step.
    pub async fn call(&self, request: Req) -> Result<Resp, CallError> {
        match self.side {
            Side::Appliance { root } => self.mirrored(root, request).await,
            side => self.targeted(side, request).await,
        }
    }

    /// The steps past the target paths: staging emulated where it applies and is configured
    /// (else the plugin's refusal, FAILED_PRECONDITION, stands), then the translation.
    pub async fn staged(&self, request: Req) -> Result<Resp, CallError> {
        let (session, upstream, store) = (self.session, self.upstream, self.store);
        match self.emulation {
            Some(e) if staging::emulated(self.front, session, &request) => match request {
                Req::NodePublishVolume(r) => e.publish(session, upstream, store, r).await,
                Req::NodeUnpublishVolume(r) => e.unpublish(session, upstream, store, r).await,
                _ => unreachable!("emulated() admits only node publish and unpublish"),
            },
            _ => translate::call_upstream(session, upstream, store, request).await,
        }
    }
}
