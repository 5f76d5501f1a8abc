//! What every call needs, shared by all connections (`Shared`): the route table, the plugin,
//! the store, the gateway's own services, and the budgets all connections count against.
//! Built once by the assembly (`gateway`); each connection holds it.

use std::sync::Arc;

use crate::observe::Redactor;
use crate::translate::HandleStore;
use crate::upstream::Upstream;

use super::budget::{Budget, Rate};
use super::protect::Protection;
use super::router::Router;
use super::services::Services;
use super::staging::Emulation;
use crate::config::limits::Limits;

/// What every call needs, shared by all connections.
pub struct Shared {
    pub router: Router,
    pub upstream: Arc<Upstream>,
    /// Durable VolumeHandle metadata for draft upstreams; `None` until a store is configured.
    pub store: Option<Arc<dyn HandleStore>>,
    /// Staging emulation for pre-staging clients (on the same store); `None`: refused.
    pub staging: Option<Arc<Emulation>>,
    /// Strips secrets from logged bodies.
    pub redactor: Redactor,
    /// What one client connection may make the gateway do.
    pub limits: Limits,
    /// Protection for fragile plugins, per method; also holds the `[calls]` policy.
    pub protection: Protection,
    /// The gateway's own services: reflection and health.
    pub services: Services,
    /// `appliance.node_paths`: where the appliance listener's peers' node paths are mirrored
    /// for the plugin ([`super::paths::mirror`]); `None` without an appliance listener.
    pub node_paths: Option<std::path::PathBuf>,
    /// Streams reset by clients, all connections together: `max_resets_per_second` bounds
    /// the gateway's, not one connection's (a client opens several).
    pub resets: std::sync::Mutex<Rate>,
    /// Request bytes held for calls the gateway reads itself and its services, and reply bytes
    /// held for clients, all connections together (`max_buffered_bytes`).
    pub buffered: Arc<Budget>,
}
