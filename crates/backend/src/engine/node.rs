//! Node-side operations on this machine: stage, publish (bind mount or symlink), unpublish,
//! unstage, volume statistics and node expansion.

use std::path::Path;

use super::error::{EngineError, ObjectKind, Precondition, Result};
use super::model::{AccessMode, Capability, Kind, Publication, Staging};
use super::mounter::{self, PublishMode};
use super::{lock, rules, Engine};

/// Dialect-free NodePublishVolume arguments.
#[derive(Clone, Debug)]
pub struct Publish {
    pub volume_id: String,
    pub target_path: String,
    /// Empty when the CO did not stage (older dialects, or staging not required).
    pub staging_path: String,
    pub capability: Capability,
    pub readonly: bool,
    /// Apply the v0.1/v0.3 table strictly: a volume without a MULTI_NODE access mode may be
    /// published at one target only (FAILED_PRECONDITION for a second). v1 leaves that to
    /// SINGLE_NODE_SINGLE_WRITER, which is what Kubernetes relies on for RWO volumes.
    pub strict_single_target: bool,
}

/// Usage figures for NodeGetVolumeStats; inode figures are absent for block volumes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stats {
    pub total_bytes: u64,
    pub available_bytes: u64,
    pub used_bytes: u64,
    pub inodes: Option<(u64, u64, u64)>,
    /// `Some(message)` when the volume is abnormal (its backing data vanished).
    pub abnormal: Option<String>,
}

/// Bytes allocated by a directory tree (st_blocks, so holes and sparse files count as stored).
fn allocated(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    let mut total = meta.blocks() * 512;
    if meta.is_dir() {
        if let Ok(entries) = std::fs::read_dir(path) {
            total += entries.flatten().map(|e| allocated(&e.path())).sum::<u64>();
        }
    }
    total
}

fn required(field: &str, value: &str) -> Result<()> {
    if value.is_empty() {
        return Err(EngineError::missing(field));
    }
    Ok(())
}

impl Engine {
    pub fn stage(&self, id: &str, staging_path: &str, cap: &Capability) -> Result<()> {
        required("volume_id", id)?;
        required("staging_target_path", staging_path)?;
        let _guard = self.locks.try_lock([lock::volume(id)])?;
        let volume = self.volume(id)?;
        if !rules::supports(volume.kind, cap) {
            return Err(EngineError::precondition(
                Precondition::Other,
                format!(
                    "volume_capability: volume {id:?} is a {:?} volume",
                    volume.kind
                ),
            ));
        }
        let wanted = Staging {
            capability: cap.clone(),
        };
        match volume.stagings.get(staging_path) {
            // Staged already: make sure the bind is still there (it is gone after a reboot).
            Some(s) if *s == wanted => {
                if volume.kind == Kind::Mount {
                    let path = Path::new(staging_path);
                    let src = self.store.volume_path(id);
                    mounter::attach(self.cfg.publish_mode, Kind::Mount, &src, path, false)?;
                }
                return Ok(());
            }
            Some(_) => {
                return Err(EngineError::AlreadyExists(format!(
                    "volume {id:?} is staged at {staging_path:?} with a different capability"
                )))
            }
            None => {}
        }
        // Mount volumes get their directory bound at the staging path; block volumes are
        // published straight from the backing file, staging only records the intent.
        if volume.kind == Kind::Mount {
            let path = Path::new(staging_path);
            mounter::attach(
                self.cfg.publish_mode,
                Kind::Mount,
                &self.store.volume_path(id),
                path,
                false,
            )?;
        }
        self.commit(|state| {
            let v = state.volumes.get_mut(id).expect("locked");
            v.stagings.insert(staging_path.to_string(), wanted);
            Ok(())
        })
    }

    pub fn unstage(&self, id: &str, staging_path: &str) -> Result<()> {
        required("volume_id", id)?;
        required("staging_target_path", staging_path)?;
        let _guard = self.locks.try_lock([lock::volume(id)])?;
        let volume = self.volume(id)?;
        if !volume.stagings.contains_key(staging_path) {
            return Ok(());
        }
        if let Some(target) = volume
            .publications
            .iter()
            .find(|(_, p)| p.staging_path == staging_path)
        {
            return Err(EngineError::precondition(
                Precondition::InUse,
                format!(
                    "volume {id:?} is still published at {:?} from this staging path",
                    target.0
                ),
            ));
        }
        if volume.kind == Kind::Mount {
            mounter::detach(
                Path::new(staging_path),
                self.cfg.publish_mode == PublishMode::Symlink,
            )?;
        }
        self.commit(|state| {
            state
                .volumes
                .get_mut(id)
                .expect("locked")
                .stagings
                .remove(staging_path);
            Ok(())
        })
    }

    pub fn publish(&self, req: &Publish) -> Result<()> {
        let id = req.volume_id.as_str();
        required("volume_id", id)?;
        required("target_path", &req.target_path)?;
        if self.cfg.co_creates_target && std::fs::symlink_metadata(&req.target_path).is_err() {
            return Err(EngineError::invalid(
                "target_path",
                format!(
                    "{:?} does not exist: in CSI v0.x the CO creates it before NodePublishVolume",
                    req.target_path
                ),
            ));
        }
        let _guard = self.locks.try_lock([lock::volume(id)])?;
        // The error table's order: "Volume does not exist" (NOT_FOUND) before "Staging target
        // path not set" (FAILED_PRECONDITION) — a CO fixes the first by other means.
        let volume = self.volume(id)?;
        if self.cfg.require_staging && req.staging_path.is_empty() {
            // The spec's own row: "Staging target path not set" is FAILED_PRECONDITION.
            return Err(EngineError::precondition(
                Precondition::NotStaged,
                "staging_target_path is not set, and this plugin requires NodeStageVolume (STAGE_UNSTAGE_VOLUME)",
            ));
        }
        if !rules::supports(volume.kind, &req.capability) {
            return Err(EngineError::precondition(
                Precondition::Other,
                format!(
                    "volume_capability: volume {id:?} is a {:?} volume",
                    volume.kind
                ),
            ));
        }
        let staged =
            !req.staging_path.is_empty() && volume.stagings.contains_key(&req.staging_path);
        if !req.staging_path.is_empty() && !staged {
            return Err(EngineError::precondition(
                Precondition::NotStaged,
                format!("volume {id:?} is not staged at {:?}", req.staging_path),
            ));
        }
        let symlink = self.cfg.publish_mode == PublishMode::Symlink;
        let wanted = Publication {
            readonly: req.readonly,
            capability: req.capability.clone(),
            staging_path: req.staging_path.clone(),
            symlink,
        };
        let source = match volume.kind {
            Kind::Mount if staged => Path::new(&req.staging_path).to_path_buf(),
            _ => self.store.volume_path(id),
        };
        let target = Path::new(&req.target_path);
        // The same publication again (how the mount was made does not matter) is OK; it is
        // made again if it vanished (a reboot), as kubelet re-publishes after one.
        let same = |p: &Publication| {
            p.readonly == wanted.readonly
                && p.capability == wanted.capability
                && p.staging_path == wanted.staging_path
        };
        match volume.publications.get(&req.target_path) {
            Some(p) if same(p) => {
                let mode = if p.symlink {
                    PublishMode::Symlink
                } else {
                    PublishMode::Bind
                };
                return mounter::attach(mode, volume.kind, &source, target, req.readonly);
            }
            Some(_) => {
                return Err(EngineError::AlreadyExists(format!(
                    "volume {id:?} is published at {:?} with different arguments",
                    req.target_path
                )))
            }
            None => {}
        }
        let exclusive = req.capability.mode == AccessMode::SingleNodeSingleWriter
            || (req.strict_single_target && req.capability.mode.single_node());
        if exclusive && !volume.publications.is_empty() {
            return Err(EngineError::precondition(
                Precondition::InUse,
                format!(
                    "volume {id:?} has the single-node access mode {:?} and is already published at {:?}",
                    req.capability.mode,
                    volume.publications.keys().collect::<Vec<_>>()
                ),
            ));
        }
        mounter::attach(
            self.cfg.publish_mode,
            volume.kind,
            &source,
            target,
            req.readonly,
        )?;
        let committed = self.commit(|state| {
            let v = state.volumes.get_mut(id).expect("locked");
            v.publications.insert(req.target_path.clone(), wanted);
            Ok(())
        });
        if committed.is_err() {
            // Unrecorded mounts would outlive the error the CO sees; take it back.
            let _ = mounter::detach(target, symlink);
        }
        committed
    }

    pub fn unpublish(&self, id: &str, target: &str) -> Result<()> {
        required("volume_id", id)?;
        required("target_path", target)?;
        let _guard = self.locks.try_lock([lock::volume(id)])?;
        let volume = self.volume(id)?;
        let Some(p) = volume.publications.get(target) else {
            return Ok(());
        };
        if self.cfg.co_creates_target {
            // The target is the CO's: unmount, and leave it as the CO made it.
            mounter::release(Path::new(target), p.symlink)?;
        } else {
            mounter::detach(Path::new(target), p.symlink)?;
        }
        self.commit(|state| {
            state
                .volumes
                .get_mut(id)
                .expect("locked")
                .publications
                .remove(target);
            Ok(())
        })
    }

    /// NodeGetVolumeStats: real statvfs figures of the filesystem holding the volume, capped by
    /// the volume's capacity (mount), or the backing file's size (block).
    pub fn stats(&self, id: &str, volume_path: &str) -> Result<Stats> {
        required("volume_id", id)?;
        required("volume_path", volume_path)?;
        let volume = self.volume(id)?;
        if !volume.publications.contains_key(volume_path)
            && !volume.stagings.contains_key(volume_path)
        {
            return Err(EngineError::not_found(
                ObjectKind::Volume,
                format!("{id} at {volume_path}"),
            ));
        }
        let backing = self.store.volume_path(id);
        if !backing.exists() {
            return Ok(Stats {
                total_bytes: volume.capacity,
                available_bytes: 0,
                used_bytes: 0,
                inodes: None,
                abnormal: Some(format!("backing data {} is missing", backing.display())),
            });
        }
        let st = rustix::fs::statvfs(&backing)
            .map_err(|e| EngineError::io(format!("statvfs {}", backing.display()))(e.into()))?;
        let frsize = st.f_frsize.max(1);
        match volume.kind {
            Kind::Block => Ok(Stats {
                total_bytes: volume.capacity,
                available_bytes: 0,
                used_bytes: volume.capacity,
                inodes: None,
                abnormal: None,
            }),
            Kind::Mount => {
                // The directory shares its filesystem with others: "used" is what the volume's
                // own tree allocates, "available" is bounded by both the capacity and statvfs.
                let fs_avail = st.f_bavail * frsize;
                let used = allocated(&backing).min(volume.capacity);
                Ok(Stats {
                    total_bytes: volume.capacity,
                    available_bytes: fs_avail.min(volume.capacity - used),
                    used_bytes: used,
                    inodes: Some((st.f_files, st.f_ffree, st.f_files - st.f_ffree)),
                    abnormal: None,
                })
            }
        }
    }

    /// NodeExpandVolume: the controller already grew the backing data; the node side has
    /// nothing to resize (no filesystem of its own), so it checks and reports the capacity.
    pub fn node_expand(&self, id: &str, volume_path: &str, required_bytes: u64) -> Result<u64> {
        required("volume_id", id)?;
        required("volume_path", volume_path)?;
        let _guard = self.locks.try_lock([lock::volume(id)])?;
        let volume = self.volume(id)?;
        if required_bytes > volume.capacity {
            return Err(EngineError::OutOfRange(format!(
                "capacity_range: {required_bytes} bytes requested, the volume has {} (expand it on the controller first)",
                volume.capacity
            )));
        }
        Ok(volume.capacity)
    }
}
