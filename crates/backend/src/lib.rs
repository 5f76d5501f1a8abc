//! csi-gateway-backend: the reference CSI plugin — a real one (volumes are directories or
//! sparse files, snapshots are copies, state survives restarts and crashes), served in any of
//! the four dialects. The gateway is tested end to end against it, and runs it in-process as
//! the built-in default configuration's upstream (the gateway's `embedded` module). Its binary,
//! `csi-reference-backend` (`main.rs`), parses flags and hands over to [`serve`].
//!
//! Layout, from the storage up:
//! - [`engine`]: dialect-free storage (volumes, snapshots, attachments, durable state, locks).
//! - [`v1`], [`v0_3`], [`v0_1`], [`v0_1_oneof`]: each dialect's tonic services on its own
//!   generated types (from `csi-gateway-proto`), converting to engine calls and mapping engine
//!   errors to that dialect.
//! - [`serve`]: the socket (UNIX, or TCP with mutual TLS from `csi-gateway-tls`: [`listen`]),
//!   the chosen dialect's services and clean shutdown; [`rpclog`] logs one line per RPC;
//!   [`echo`] is a test hook that refuses chosen RPCs with an error quoting the request.
//!
//! Its own crate, depending on the generated code and TLS only, so that changing the plugin
//! does not recompile the generated code, and the gateway's code never reaches into it beyond
//! [`serve`] and the engine's configuration.
#![forbid(unsafe_code)]

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
