//! The storage engine, free of any CSI dialect: volumes (directories or sparse files under the
//! data directory), snapshots (real copies), attachments, stagings and publications, a capacity
//! pool, durable state and per-volume locking. Each dialect module converts its wire types to
//! the plain arguments here and maps [`EngineError`] back to its own error representation.

mod controller;
pub mod error;
pub mod lock;
pub mod model;
pub mod mounter;
mod node;
pub mod rules;
pub mod size;
mod snapshot;
pub mod store;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

pub use controller::{CreateVolume, Page};
pub use error::{EngineError, ObjectKind, Precondition, Result};
pub use model::{AccessMode, Attachment, Capability, Kind, Segment, Snapshot, Source, Volume};
pub use mounter::PublishMode;
pub use node::{Publish, Stats};

use model::State;
use store::Store;

/// Everything the engine needs to know about its host; built from the command line.
#[derive(Clone, Debug)]
pub struct Config {
    pub data_dir: PathBuf,
    pub node_id: String,
    /// Further node ids the controller accepts in ControllerPublish (a multi-node cluster as
    /// seen from the controller), so attachment limits and single-node rules are observable.
    pub peer_nodes: Vec<String>,
    pub pool_size: u64,
    /// 0 means no limit.
    pub max_volumes_per_node: u64,
    /// This node's topology segment; empty means the plugin has no topology.
    pub topology: Segment,
    pub publish_mode: PublishMode,
    /// NodePublish requires a prior NodeStage (and STAGE_UNSTAGE_VOLUME is advertised).
    pub require_staging: bool,
    /// v1: serve the alpha GetSnapshot RPC and advertise GET_SNAPSHOT (off by default, as real
    /// plugins gate alpha features: a conformance suite that predates it rejects the value).
    pub alpha_get_snapshot: bool,
    /// v0.x semantics of `target_path`: the CO creates it before NodePublishVolume (a missing
    /// one is INVALID_ARGUMENT) and removes it after NodeUnpublishVolume, which only unmounts.
    /// Off: the plugin creates and removes it, as v1 says.
    pub co_creates_target: bool,
    /// Test hook: hold the volume lock this long after writing backing data and before
    /// committing it, so tests can observe ABORTED and crash mid-operation.
    pub fault_delay: Duration,
}

pub struct Engine {
    cfg: Config,
    /// An exclusive flock on the data directory, held for the engine's lifetime: two plugins
    /// on one data directory would reconcile away each other's in-flight data.
    _dir_lock: std::fs::File,
    store: Store,
    inner: Mutex<Inner>,
    locks: lock::Locks,
}

struct Inner {
    state: State,
    /// Capacity promised to creates that are still copying data.
    reserved: u64,
}

impl Engine {
    /// Opens the data directory, loads the committed state and removes crash leftovers.
    pub fn open(cfg: Config) -> Result<Engine> {
        let store = Store::open(&cfg.data_dir)?;
        let dir_lock = lock_dir(&cfg.data_dir)?;
        let state = store.load()?;
        for path in store.reconcile(&state)? {
            tracing::warn!(path = %path.display(), "removed backing data no state names (crash leftover)");
        }
        if cfg.publish_mode == PublishMode::Bind {
            mounter::probe_bind(&cfg.data_dir)?;
        }
        Ok(Engine {
            cfg,
            _dir_lock: dir_lock,
            store,
            inner: Mutex::new(Inner { state, reserved: 0 }),
            locks: lock::Locks::default(),
        })
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    fn inner(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().expect("engine state poisoned")
    }

    /// Applies `change` to a copy of the state and commits it; the in-memory state only
    /// changes if the commit succeeded.
    fn commit<T>(&self, change: impl FnOnce(&mut State) -> Result<T>) -> Result<T> {
        let mut inner = self.inner();
        let mut next = inner.state.clone();
        let out = change(&mut next)?;
        self.store.commit(&next)?;
        inner.state = next;
        Ok(out)
    }

    fn volume(&self, id: &str) -> Result<Volume> {
        if id.is_empty() {
            return Err(EngineError::missing("volume_id"));
        }
        self.inner()
            .state
            .volumes
            .get(id)
            .cloned()
            .ok_or_else(|| EngineError::not_found(ObjectKind::Volume, id))
    }

    /// Bytes of the pool not used by volumes, snapshots or in-flight creates.
    pub fn available(&self) -> u64 {
        let inner = self.inner();
        self.cfg
            .pool_size
            .saturating_sub(inner.state.used())
            .saturating_sub(inner.reserved)
    }

    fn fault_delay(&self) {
        if !self.cfg.fault_delay.is_zero() {
            std::thread::sleep(self.cfg.fault_delay);
        }
    }

    /// Whether ControllerPublish knows `node` (this node or a configured peer).
    pub fn knows_node(&self, node: &str) -> bool {
        node == self.cfg.node_id || self.cfg.peer_nodes.iter().any(|p| p == node)
    }

    /// Whether the node's topology satisfies a requirement segment (every key it names
    /// must be present on the node with the same value).
    pub fn topology_matches(&self, wanted: &Segment) -> bool {
        rules::segment_matches(&self.cfg.topology, wanted)
    }

    /// The volume's accessible topology as advertised: this node's segment, if any.
    fn node_topology(&self) -> Vec<Segment> {
        if self.cfg.topology.is_empty() {
            Vec::new()
        } else {
            vec![self.cfg.topology.clone()]
        }
    }
}

/// Takes the data directory's exclusive lock, or says who has it.
fn lock_dir(dir: &std::path::Path) -> Result<std::fs::File> {
    use rustix::fs::{flock, FlockOperation};
    let file =
        std::fs::File::open(dir).map_err(EngineError::io(format!("opening {}", dir.display())))?;
    match flock(&file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(file),
        Err(rustix::io::Errno::WOULDBLOCK) => Err(EngineError::Unavailable(format!(
            "--data-dir {} is in use by another csi-reference-backend",
            dir.display()
        ))),
        Err(e) => Err(EngineError::io(format!("locking {}", dir.display()))(
            e.into(),
        )),
    }
}
