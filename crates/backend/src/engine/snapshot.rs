//! Snapshots: full copies of a volume's backing data, accounted against the pool, so a
//! snapshot outlives its source volume and restoring it is a plain copy.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use super::controller::{page, Page};
use super::error::{EngineError, ObjectKind, Result};
use super::model::Snapshot;
use super::{lock, rules, store, Engine};

impl Engine {
    pub fn create_snapshot(
        &self,
        name: &str,
        source_volume_id: &str,
        parameters: &BTreeMap<String, String>,
    ) -> Result<Snapshot> {
        if name.is_empty() {
            return Err(EngineError::missing("name"));
        }
        if source_volume_id.is_empty() {
            return Err(EngineError::missing("source_volume_id"));
        }
        rules::check_parameters("parameters", parameters, &[])?;
        let _guard = self
            .locks
            .try_lock([lock::name(name), lock::volume(source_volume_id)])?;
        if let Some(existing) = self.inner().state.snapshot_by_name(name).cloned() {
            if existing.source_volume_id == source_volume_id {
                return Ok(existing);
            }
            return Err(EngineError::AlreadyExists(format!(
                "a snapshot named {name:?} exists ({}) of another volume ({:?})",
                existing.id, existing.source_volume_id
            )));
        }
        let volume = self.volume(source_volume_id).map_err(|e| match e {
            EngineError::NotFound { id, .. } => {
                EngineError::not_found(ObjectKind::SourceVolume, id)
            }
            other => other,
        })?;
        let id = {
            let mut inner = self.inner();
            let free = self
                .cfg
                .pool_size
                .saturating_sub(inner.state.used())
                .saturating_sub(inner.reserved);
            if volume.capacity > free {
                return Err(EngineError::ResourceExhausted(format!(
                    "the pool has {free} bytes free, the snapshot needs {}",
                    volume.capacity
                )));
            }
            inner.reserved += volume.capacity;
            format!(
                "snap-{:06}-{}",
                inner.state.next_id + 1,
                super::controller::random_suffix()
            )
        };
        let result = self.copy_snapshot(&id, name, &volume, parameters);
        self.inner().reserved -= volume.capacity;
        result
    }

    fn copy_snapshot(
        &self,
        id: &str,
        name: &str,
        volume: &super::Volume,
        parameters: &BTreeMap<String, String>,
    ) -> Result<Snapshot> {
        let path = self.store.snapshot_path(id);
        store::copy_any(&self.store.volume_path(&volume.id), &path)?;
        self.fault_delay();
        let snapshot = Snapshot {
            id: id.to_string(),
            name: name.to_string(),
            source_volume_id: volume.id.clone(),
            kind: volume.kind,
            size: volume.capacity,
            created_at_ns: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos() as i64)
                .unwrap_or(0),
            parameters: parameters.clone(),
        };
        let committed = self.commit(|state| {
            state.next_id += 1;
            state.snapshots.insert(id.to_string(), snapshot.clone());
            Ok(())
        });
        if let Err(e) = committed {
            let _ = store::remove_any(&path);
            return Err(e);
        }
        Ok(snapshot)
    }

    pub fn delete_snapshot(&self, id: &str) -> Result<()> {
        if id.is_empty() {
            return Err(EngineError::missing("snapshot_id"));
        }
        let _guard = self.locks.try_lock([lock::snapshot(id)])?;
        if !self.inner().state.snapshots.contains_key(id) {
            return Ok(()); // idempotent
        }
        self.commit(|state| {
            state.snapshots.remove(id);
            Ok(())
        })?;
        store::remove_any(&self.store.snapshot_path(id))
    }

    pub fn get_snapshot(&self, id: &str) -> Result<Snapshot> {
        if id.is_empty() {
            return Err(EngineError::missing("snapshot_id"));
        }
        self.inner()
            .state
            .snapshots
            .get(id)
            .cloned()
            .ok_or_else(|| EngineError::not_found(ObjectKind::Snapshot, id))
    }

    /// ListSnapshots with the spec's filters (empty = no filter); an unknown snapshot id or
    /// source volume yields an empty list, not an error.
    pub fn list_snapshots(
        &self,
        snapshot_id: &str,
        source_volume_id: &str,
        max_entries: usize,
        token: &str,
    ) -> Result<Page<Snapshot>> {
        let all: Vec<Snapshot> = self
            .inner()
            .state
            .snapshots
            .values()
            .filter(|s| snapshot_id.is_empty() || s.id == snapshot_id)
            .filter(|s| source_volume_id.is_empty() || s.source_volume_id == source_volume_id)
            .cloned()
            .collect();
        page(all, max_entries, token)
    }
}
