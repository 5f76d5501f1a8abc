//! Staging emulation: a client whose CSI revision predates staging (v0.1, the draft) cannot call
//! NodeStageVolume, yet a plugin that advertises STAGE_UNSTAGE_VOLUME needs it. The gateway
//! stages on the first NodePublishVolume of a volume at a path it owns, publishes from there,
//! counts the published targets durably, and unstages after the last NodeUnpublishVolume.
//!
//! Every step is safe to redo, so a gateway killed anywhere and a client that retries converge:
//! - publish: record the target (write-ahead) → NodeStageVolume unless recorded staged →
//!   record `staged` → NodePublishVolume from the staging path;
//! - unpublish: NodeUnpublishVolume → drop the target from the record → when none is left,
//!   NodeUnstageVolume → delete the record.
//!
//! A target is in the record before the plugin may have published it and leaves only after
//! the plugin unpublished it, so the volume is never unstaged under a published target; the
//! record exists from before NodeStageVolume until after NodeUnstageVolume, so a staging is
//! never forgotten. CSI makes stage, publish, unpublish and unstage idempotent, which is what
//! makes redoing a step after a crash harmless. Calls on one volume are serialized in-process.
//!
//! A last unpublish interrupted after its target left the record is finished without a client:
//! once the plugin is connected after a start, [`Emulation::sweep`] unstages every volume whose
//! record has no target left.
//!
//! Only calls the plugin can accept leave a record: a NodePublishVolume missing what CSI
//! requires (volume id, target path, capability) is refused before anything is written, and a
//! call the plugin refuses outright (a code saying it did nothing, e.g. NOT_FOUND or
//! INVALID_ARGUMENT) takes back the target it recorded — unstaging if it was the last — so
//! neither records nor staging directories accumulate from refused calls.
//!
//! The records live in the gateway's store, keyed by node id (`state.node_id`): node gateways
//! sharing one etcd keep their mounts apart.

// The crash hook of the test suite's build (`--test-crash-at`), else a no-op in its place.
#[cfg(feature = "test-hooks")]
mod crash;
#[cfg(not(feature = "test-hooks"))]
#[path = "no_crash.rs"]
mod crash;
mod record;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::dialect::Dialect;
use crate::grpc::Status;
use crate::hub::{v1, Request as Req, Response as Resp};
use crate::store::{Store, StoreError};
use crate::translate::{self, CallError, HandleStore, RawUpstream, UpstreamSession};

pub use crash::CrashPoint;
pub use record::{staging_path, Record};

/// Staging emulation over a durable store.
pub struct Emulation {
    records: record::Records,
    dir: PathBuf,
    crash: CrashPoint,
    /// One async lock per volume with calls in flight.
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl Emulation {
    /// `dir` holds the staging paths (created on demand); `node_id` keys this node's records.
    pub async fn new(
        store: Arc<Store>,
        node_id: &str,
        dir: PathBuf,
        crash: CrashPoint,
    ) -> Result<Self, StoreError> {
        Ok(Emulation {
            records: record::Records::open(store, node_id).await?,
            dir,
            crash,
            locks: Mutex::new(HashMap::new()),
        })
    }

    /// Published targets holding an emulated staging, all volumes together.
    pub fn references(&self) -> i64 {
        self.records.references()
    }

    async fn lock(&self, volume_id: &str) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = {
            let mut locks = self.locks.lock().expect("lock table");
            // Forget locks nobody holds or waits for, so the table stays small.
            locks.retain(|_, l| Arc::strong_count(l) > 1);
            locks.entry(volume_id.to_string()).or_default().clone()
        };
        lock.lock_owned().await
    }

    /// Unstages the volumes a crash left staged with no target (see the module comment), once
    /// the plugin is connected; a plugin that does not require staging has none to unstage.
    pub async fn sweep(&self, upstream: &crate::upstream::Upstream) {
        let live = loop {
            if let Ok(live) = upstream.ready(std::time::Duration::from_secs(60)).await {
                break live;
            }
        };
        if !live.session.requires_staging {
            return;
        }
        let orphans = match self.records.orphans().await {
            Ok(o) => o,
            Err(e) => {
                return tracing::warn!(error = %e.message(), "staging sweep: cannot list records")
            }
        };
        for id in orphans {
            let _serial = self.lock(&id).await;
            // Re-read under the lock: a publish may have claimed the volume since the scan.
            let rec = match self.records.load(&id).await {
                Ok(Some(rec)) if rec.targets.is_empty() => rec,
                Ok(_) => continue,
                Err(e) => {
                    tracing::warn!(volume_id = %id, error = %e.message(), "staging sweep");
                    continue;
                }
            };
            match self
                .unstage(&live.session, &live.conn, None, &id, &rec)
                .await
            {
                Ok(()) => {
                    tracing::info!(volume_id = %id, "staging sweep: finished an interrupted unstage")
                }
                Err(e) => {
                    tracing::warn!(volume_id = %id, error = %e.status.message(), "staging sweep: unstage failed; the next unpublish retries it")
                }
            }
        }
    }

    /// NodeUnstageVolume at the record's path, then the record (and the directory) go.
    async fn unstage(
        &self,
        session: &UpstreamSession,
        upstream: &dyn RawUpstream,
        store: Option<&dyn HandleStore>,
        id: &str,
        rec: &Record,
    ) -> Result<(), CallError> {
        let unstage = Req::NodeUnstageVolume(v1::NodeUnstageVolumeRequest {
            volume_id: id.to_string(),
            staging_target_path: rec.staging_path.clone(),
        });
        translate::call_upstream(session, upstream, store, unstage).await?;
        tracing::info!(volume_id = %id, staging_path = %rec.staging_path, "emulated NodeUnstageVolume");
        self.crash.at("unpublish:unstaged");
        self.records.remove(id).await?;
        // The directory is the gateway's; an error here only leaves an empty directory.
        remove_dir(&rec.staging_path).await;
        Ok(())
    }

    pub(super) async fn publish(
        &self,
        session: &UpstreamSession,
        upstream: &dyn RawUpstream,
        store: Option<&dyn HandleStore>,
        mut req: v1::NodePublishVolumeRequest,
    ) -> Result<Resp, CallError> {
        // The client's request at fault, found before anything is recorded.
        let path = staging_path(&self.dir, &req.volume_id).map_err(CallError::client)?;
        required(&req).map_err(CallError::client)?;
        let _serial = self.lock(&req.volume_id).await;
        let id = req.volume_id.clone();
        let loaded = self.records.load(&id).await?;
        let created = loaded.is_none();
        let mut rec = loaded.unwrap_or_else(|| Record {
            staging_path: path.display().to_string(),
            ..Record::default()
        });
        let added = rec.targets.insert(req.target_path.clone());
        if added {
            self.records.save(&id, &rec, 1).await?;
        }
        self.crash.at("publish:recorded");
        let target = req.target_path.clone();
        if !rec.staged {
            // The record's path, not `path`: a staging made before a change of
            // `state.staging_dir` stays where it is.
            let dir = rec.staging_path.clone();
            crate::disk::off_runtime("staging path", move || std::fs::create_dir_all(dir))
                .await?
                .map_err(|e| {
                    Status::internal(format!("creating staging path {}: {e}", rec.staging_path))
                })?;
            let stage = Req::NodeStageVolume(v1::NodeStageVolumeRequest {
                volume_id: id.clone(),
                publish_context: req.publish_context.clone(),
                staging_target_path: rec.staging_path.clone(),
                volume_capability: req.volume_capability.clone(),
                secrets: req.secrets.clone(),
                volume_context: req.volume_context.clone(),
            });
            if let Err(e) = translate::call_upstream(session, upstream, store, stage).await {
                if added && refused(&e) {
                    self.take_back(&id, rec, &target, created).await;
                }
                return Err(e);
            }
            tracing::info!(volume_id = %id, staging_path = %rec.staging_path, "emulated NodeStageVolume");
            self.crash.at("publish:staged");
            rec.staged = true;
            self.records.save(&id, &rec, 0).await?;
        }
        req.staging_target_path = rec.staging_path.clone();
        let publish = Req::NodePublishVolume(req);
        match translate::call_upstream(session, upstream, store, publish).await {
            Ok(resp) => {
                self.crash.at("publish:published");
                Ok(resp)
            }
            Err(e) => {
                if added && refused(&e) {
                    self.withdraw(session, upstream, store, &id, rec, &target)
                        .await;
                }
                Err(e)
            }
        }
    }

    /// The plugin refused the NodeStageVolume of a target this call recorded: the target
    /// leaves the record, and a record this call created goes with its directory.
    async fn take_back(&self, id: &str, mut rec: Record, target: &str, created: bool) {
        rec.targets.remove(target);
        let outcome = if rec.targets.is_empty() && created {
            let removed = self.records.remove(id).await;
            if removed.is_ok() {
                self.records.adjust(-1);
                remove_dir(&rec.staging_path).await;
            }
            removed
        } else {
            self.records.save(id, &rec, -1).await
        };
        if let Err(e) = outcome {
            tracing::warn!(volume_id = %id, error = %e.message(), "staging emulation: a refused publish stays recorded until its unpublish");
        }
    }

    /// The plugin refused the NodePublishVolume of a target this call recorded: the target
    /// leaves the record, and with the last one the volume is unstaged.
    async fn withdraw(
        &self,
        session: &UpstreamSession,
        upstream: &dyn RawUpstream,
        store: Option<&dyn HandleStore>,
        id: &str,
        mut rec: Record,
        target: &str,
    ) {
        rec.targets.remove(target);
        if rec.targets.is_empty() {
            rec.staged = false;
        }
        let mut outcome = self
            .records
            .save(id, &rec, -1)
            .await
            .map_err(CallError::from);
        if outcome.is_ok() && rec.targets.is_empty() {
            outcome = self.unstage(session, upstream, store, id, &rec).await;
        }
        if let Err(e) = outcome {
            tracing::warn!(volume_id = %id, error = %e.status.message(), "staging emulation: undoing a refused publish; the next unpublish or the start-up sweep finishes it");
        }
    }

    pub(super) async fn unpublish(
        &self,
        session: &UpstreamSession,
        upstream: &dyn RawUpstream,
        store: Option<&dyn HandleStore>,
        req: v1::NodeUnpublishVolumeRequest,
    ) -> Result<Resp, CallError> {
        let _serial = self.lock(&req.volume_id).await;
        let id = req.volume_id.clone();
        let target = req.target_path.clone();
        let Some(mut rec) = self.records.load(&id).await? else {
            // Not a volume this gateway staged: an ordinary unpublish.
            return translate::call_upstream(
                session,
                upstream,
                store,
                Req::NodeUnpublishVolume(req),
            )
            .await;
        };
        let resp =
            translate::call_upstream(session, upstream, store, Req::NodeUnpublishVolume(req))
                .await?;
        self.crash.at("unpublish:unpublished");
        if rec.targets.remove(&target) {
            // With the last target gone the volume is about to be unstaged: a publish that
            // comes after a crash past this point must stage again, not trust `staged`.
            if rec.targets.is_empty() {
                rec.staged = false;
            }
            self.records.save(&id, &rec, -1).await?;
        }
        self.crash.at("unpublish:unrecorded");
        if rec.targets.is_empty() {
            self.unstage(session, upstream, store, &id, &rec).await?;
        }
        Ok(resp)
    }
}

/// What CSI requires of a NodePublishVolume, checked before anything is recorded.
fn required(req: &v1::NodePublishVolumeRequest) -> Result<(), Status> {
    let missing = if req.target_path.is_empty() {
        "target_path"
    } else if req.volume_capability.is_none() {
        "volume_capability"
    } else {
        return Ok(());
    };
    Err(Status::invalid_argument(format!(
        "NodePublishVolume: {missing} is required"
    )))
}

/// Whether the plugin's answer says it did nothing, so what this call recorded can be taken
/// back. Timeouts, UNAVAILABLE, ABORTED, INTERNAL and the like leave the outcome open: the
/// record stays for the client's retry or unpublish.
fn refused(e: &CallError) -> bool {
    use tonic::Code::*;
    matches!(
        e.code(),
        InvalidArgument
            | NotFound
            | AlreadyExists
            | PermissionDenied
            | Unauthenticated
            | FailedPrecondition
            | OutOfRange
            | Unimplemented
            | ResourceExhausted
    )
}

/// Whether a call from a `front` client must be emulated: the client predates staging, the
/// plugin requires it, and this is a node publish without staging or a node unpublish.
pub(super) fn emulated(front: Dialect, session: &UpstreamSession, request: &Req) -> bool {
    let pre_staging = matches!(front, Dialect::V0_1 | Dialect::V0_1Oneof);
    pre_staging
        && session.requires_staging
        && match request {
            Req::NodePublishVolume(r) => r.staging_target_path.is_empty(),
            Req::NodeUnpublishVolume(_) => true,
            _ => false,
        }
}

/// Removes a staging directory of the gateway's, off the runtime; one left behind is empty.
async fn remove_dir(path: &str) {
    let path = path.to_string();
    let _ = crate::disk::off_runtime("staging path", move || std::fs::remove_dir(path)).await;
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
