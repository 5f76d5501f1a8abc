//! The reference backend: a real CSI plugin, served in any of the four dialects, used to test
//! the gateway end to end.
//!
//! Layout, from the storage up:
//! - [`engine`](crate::backend::engine): dialect-free storage (volumes, snapshots, attachments, durable state, locks).
//! - [`v1`](crate::backend::v1), [`v0_3`](crate::backend::v0_3), [`v0_1`](crate::backend::v0_1), [`v0_1_oneof`](crate::backend::v0_1_oneof): each dialect's tonic services on its own
//!   generated types, converting to engine calls and mapping engine errors to that dialect.
//! - [`serve`](crate::backend::serve): the UNIX socket, the chosen dialect's services and clean shutdown;
//!   [`rpclog`](crate::backend::rpclog) logs one line per RPC.

pub mod echo;
pub mod engine;
pub mod listen;
pub mod rpclog;
pub mod serve;
pub mod v0_1;
pub mod v0_1_oneof;
pub mod v0_3;
pub mod v1;

use std::sync::Arc;

use engine::{Engine, EngineError};

/// Runs a blocking engine call off the async workers (engine calls do file I/O and may hold a
/// volume lock for a while), preserving its typed error.
pub async fn blocking<T, F>(engine: &Arc<Engine>, f: F) -> Result<T, EngineError>
where
    T: Send + 'static,
    F: FnOnce(&Engine) -> Result<T, EngineError> + Send + 'static,
{
    let engine = Arc::clone(engine);
    tokio::task::spawn_blocking(move || f(&engine))
        .await
        .unwrap_or_else(|e| Err(EngineError::Internal(format!("engine task failed: {e}"))))
}

/// Version reported by GetPluginInfo.
pub const VENDOR_VERSION: &str = env!("CARGO_PKG_VERSION");
