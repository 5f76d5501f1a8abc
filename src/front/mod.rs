//! The front: the UNIX socket orchestrators call, the route table, and each call's path from
//! request to reply.

pub mod limits;
pub mod listener;
pub mod router;
pub mod services;
pub mod socket;

use std::sync::Arc;

use crate::observe::Redactor;
use crate::translate::HandleStore;
use crate::upstream::Upstream;

pub use limits::Limits;
pub use router::Router;

/// What every call needs, shared by all connections.
pub struct Shared {
    pub router: Router,
    pub upstream: Arc<Upstream>,
    /// Durable VolumeHandle metadata for draft upstreams; `None` until a store is configured.
    pub store: Option<Arc<dyn HandleStore>>,
    /// Staging emulation for pre-staging clients (on the same store); `None`: refused.
    pub staging: Option<Arc<crate::staging::Emulation>>,
    /// Strips secrets from logged bodies.
    pub redactor: Redactor,
    /// What one client connection may make the gateway do.
    pub limits: Limits,
    /// Protection for fragile plugins, per method; also holds the `[calls]` policy.
    pub protection: crate::call::protect::Protection,
    /// The gateway's own services: reflection and health.
    pub services: services::Services,
    /// `appliance.node_paths`: where the appliance listener's peers' node paths are mirrored
    /// for the plugin ([`crate::target::mirror`]); `None` without an appliance listener.
    pub node_paths: Option<std::path::PathBuf>,
    /// Streams reset by clients, all connections together: `max_resets_per_second` bounds
    /// the gateway's, not one connection's (a client opens several).
    pub resets: std::sync::Mutex<limits::Rate>,
    /// Request bytes held for calls the gateway reads itself and its services, and reply bytes
    /// held for clients, all connections together (`max_buffered_bytes`).
    pub buffered: Arc<crate::budget::Budget>,
}
