//! Controller-side volume operations: create, delete, attach, validate, list, capacity,
//! expand, get and modify. Each follows the spec's idempotency rules and error rows.

use std::collections::BTreeMap;
use std::fs;

use super::error::{EngineError, ObjectKind, Precondition, Result};
use super::model::{Attachment, Capability, Kind, Segment, Source, Volume};
use super::{lock, rules, store, Engine};

/// Dialect-free CreateVolume arguments. Sizes are 0 when unset.
#[derive(Clone, Debug, Default)]
pub struct CreateVolume {
    pub name: String,
    pub required_bytes: u64,
    pub limit_bytes: u64,
    pub capabilities: Vec<Capability>,
    pub parameters: BTreeMap<String, String>,
    pub mutable_parameters: BTreeMap<String, String>,
    pub source: Option<Source>,
    pub requisite: Vec<Segment>,
    pub preferred: Vec<Segment>,
}

/// One page of a listing and the token for the next one (empty at the end).
pub struct Page<T> {
    pub entries: Vec<T>,
    pub next_token: String,
}

impl Engine {
    pub fn create_volume(&self, req: CreateVolume) -> Result<Volume> {
        if req.name.is_empty() {
            return Err(EngineError::missing("name"));
        }
        let kind = rules::single_kind("volume_capabilities", &req.capabilities)?;
        rules::check_parameters("parameters", &req.parameters, rules::MUTABLE)?;
        rules::check_parameters(
            "mutable_parameters",
            &req.mutable_parameters,
            rules::MUTABLE,
        )?;
        if !req.requisite.is_empty() && !req.requisite.iter().any(|s| self.topology_matches(s)) {
            return Err(EngineError::ResourceExhausted(format!(
                "accessibility_requirements: no requisite segment matches this plugin's topology {:?}",
                self.cfg.topology
            )));
        }
        let mut keys = vec![lock::name(&req.name)];
        match &req.source {
            Some(Source::Volume(id)) => keys.push(lock::volume(id)),
            Some(Source::Snapshot(id)) => keys.push(lock::snapshot(id)),
            None => {}
        }
        let _guard = self.locks.try_lock(keys)?;

        if let Some(existing) = self.inner().state.volume_by_name(&req.name).cloned() {
            return compatible(&existing, &req, kind).map(|()| existing);
        }
        let (source_path, minimum) = self.source(&req.source, kind)?;
        let capacity = rules::choose_capacity(
            req.required_bytes,
            req.limit_bytes,
            minimum,
            self.cfg.pool_size,
        )?;
        let id = {
            let mut inner = self.inner();
            let free = self
                .cfg
                .pool_size
                .saturating_sub(inner.state.used())
                .saturating_sub(inner.reserved);
            if capacity > free {
                return Err(EngineError::ResourceExhausted(format!(
                    "the pool has {free} bytes free, {capacity} requested"
                )));
            }
            inner.reserved += capacity;
            // Ids come from the committed counter plus the reservation count would race; a
            // random suffix keeps concurrent creates apart and is never reused.
            format!("vol-{:06}-{}", inner.state.next_id + 1, random_suffix())
        };
        let result = self.materialize(&id, kind, capacity, source_path.as_deref(), &req);
        self.inner().reserved -= capacity;
        result
    }

    /// Writes the backing data, then commits the volume (see the store's crash contract).
    fn materialize(
        &self,
        id: &str,
        kind: Kind,
        capacity: u64,
        source: Option<&std::path::Path>,
        req: &CreateVolume,
    ) -> Result<Volume> {
        let path = self.store.volume_path(id);
        let ctx = || format!("creating {}", path.display());
        match (source, kind) {
            (Some(src), _) => store::copy_any(src, &path)?,
            (None, Kind::Mount) => fs::create_dir(&path).map_err(EngineError::io(ctx()))?,
            (None, Kind::Block) => {
                fs::File::create(&path).map_err(EngineError::io(ctx()))?;
            }
        }
        if kind == Kind::Block {
            let f = fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(EngineError::io(ctx()))?;
            f.set_len(capacity).map_err(EngineError::io(ctx()))?;
            f.sync_all().map_err(EngineError::io(ctx()))?;
        }
        self.fault_delay();
        let volume = Volume {
            id: id.to_string(),
            name: req.name.clone(),
            kind,
            capacity,
            parameters: req.parameters.clone(),
            mutable_parameters: req.mutable_parameters.clone(),
            source: req.source.clone(),
            capabilities: req.capabilities.clone(),
            accessible_topology: self.node_topology(),
            attachments: BTreeMap::new(),
            stagings: BTreeMap::new(),
            publications: BTreeMap::new(),
        };
        let committed = self.commit(|state| {
            state.next_id += 1;
            state.volumes.insert(id.to_string(), volume.clone());
            Ok(())
        });
        if let Err(e) = committed {
            let _ = store::remove_any(&path);
            return Err(e);
        }
        Ok(volume)
    }

    /// The backing path and size of a content source, checked against the new volume's kind.
    fn source(
        &self,
        source: &Option<Source>,
        kind: Kind,
    ) -> Result<(Option<std::path::PathBuf>, u64)> {
        let state = &self.inner().state;
        let (path, size, src_kind) = match source {
            None => return Ok((None, 0)),
            Some(Source::Snapshot(id)) => {
                let s = state
                    .snapshots
                    .get(id)
                    .ok_or_else(|| EngineError::not_found(ObjectKind::SourceSnapshot, id))?;
                (self.store.snapshot_path(id), s.size, s.kind)
            }
            Some(Source::Volume(id)) => {
                let v = state
                    .volumes
                    .get(id)
                    .ok_or_else(|| EngineError::not_found(ObjectKind::SourceVolume, id))?;
                (self.store.volume_path(id), v.capacity, v.kind)
            }
        };
        if src_kind != kind {
            return Err(EngineError::invalid(
                "volume_content_source",
                format!("the source is a {src_kind:?} volume, the request asks for {kind:?}"),
            ));
        }
        Ok((Some(path), size))
    }

    pub fn delete_volume(&self, id: &str) -> Result<()> {
        if id.is_empty() {
            return Err(EngineError::missing("volume_id"));
        }
        let _guard = self.locks.try_lock([lock::volume(id)])?;
        let Some(volume) = self.inner().state.volumes.get(id).cloned() else {
            return Ok(()); // already gone: DeleteVolume is idempotent
        };
        if !volume.attachments.is_empty()
            || !volume.publications.is_empty()
            || !volume.stagings.is_empty()
        {
            return Err(EngineError::precondition(
                Precondition::InUse,
                format!(
                    "volume {id:?} is still attached to {:?}, staged at {:?} or published at {:?}",
                    volume.attachments.keys().collect::<Vec<_>>(),
                    volume.stagings.keys().collect::<Vec<_>>(),
                    volume.publications.keys().collect::<Vec<_>>()
                ),
            ));
        }
        self.commit(|state| {
            state.volumes.remove(id);
            Ok(())
        })?;
        store::remove_any(&self.store.volume_path(id))
    }

    /// ControllerPublishVolume; returns the publish context.
    pub fn attach(
        &self,
        id: &str,
        node: &str,
        cap: &Capability,
        readonly: bool,
    ) -> Result<BTreeMap<String, String>> {
        if node.is_empty() {
            return Err(EngineError::missing("node_id"));
        }
        let _guard = self.locks.try_lock([lock::volume(id)])?;
        let volume = self.volume(id)?;
        if node != self.cfg.node_id && !self.cfg.peer_nodes.iter().any(|p| p == node) {
            return Err(EngineError::not_found(ObjectKind::Node, node));
        }
        if !rules::supports(volume.kind, cap) {
            return Err(EngineError::invalid(
                "volume_capability",
                format!("volume {id:?} is a {:?} volume", volume.kind),
            ));
        }
        let wanted = Attachment {
            readonly,
            capability: cap.clone(),
        };
        let context = BTreeMap::from([("attachedNode".to_string(), node.to_string())]);
        match volume.attachments.get(node) {
            Some(a) if *a == wanted => return Ok(context),
            Some(_) => {
                return Err(EngineError::AlreadyExists(format!(
                    "volume {id:?} is already attached to {node:?} with a different capability or readonly flag"
                )))
            }
            None => {}
        }
        if cap.mode.single_node() && !volume.attachments.is_empty() {
            return Err(EngineError::precondition(
                Precondition::AttachedElsewhere,
                format!(
                    "volume {id:?} has a single-node access mode and is attached to {:?}",
                    volume.attachments.keys().collect::<Vec<_>>()
                ),
            ));
        }
        self.commit(|state| {
            let max = self.cfg.max_volumes_per_node;
            if max != 0 && state.attached_to(node) as u64 >= max {
                return Err(EngineError::ResourceExhausted(format!(
                    "node {node:?} already has the maximum of {max} volumes attached"
                )));
            }
            let v = state
                .volumes
                .get_mut(id)
                .expect("checked under the volume lock");
            v.attachments.insert(node.to_string(), wanted);
            Ok(())
        })?;
        Ok(context)
    }

    /// ControllerUnpublishVolume; an empty `node` detaches from every node. Unknown volumes and
    /// nodes are already detached, so that is OK (v1.x rule).
    pub fn detach(&self, id: &str, node: &str) -> Result<()> {
        if id.is_empty() {
            return Err(EngineError::missing("volume_id"));
        }
        let _guard = self.locks.try_lock([lock::volume(id)])?;
        let Ok(volume) = self.volume(id) else {
            return Ok(());
        };
        if !node.is_empty() && !volume.attachments.contains_key(node) {
            return Ok(());
        }
        self.commit(|state| {
            let v = state
                .volumes
                .get_mut(id)
                .expect("checked under the volume lock");
            if node.is_empty() {
                v.attachments.clear();
            } else {
                v.attachments.remove(node);
            }
            Ok(())
        })
    }

    /// ValidateVolumeCapabilities: `Ok(true)` if every capability is supported.
    pub fn validate(&self, id: &str, caps: &[Capability]) -> Result<bool> {
        let volume = self.volume(id)?;
        if caps.is_empty() {
            return Err(EngineError::missing("volume_capabilities"));
        }
        Ok(caps.iter().all(|c| rules::supports(volume.kind, c)))
    }

    pub fn get_volume(&self, id: &str) -> Result<Volume> {
        self.volume(id)
    }

    pub fn list_volumes(&self, max_entries: usize, token: &str) -> Result<Page<Volume>> {
        let all: Vec<Volume> = self.inner().state.volumes.values().cloned().collect();
        page(all, max_entries, token)
    }

    /// ControllerExpandVolume; returns the new capacity. Never shrinks.
    pub fn expand(&self, id: &str, required: u64, limit: u64) -> Result<u64> {
        if limit != 0 && required > limit {
            return Err(EngineError::invalid(
                "capacity_range",
                format!("required_bytes {required} exceeds limit_bytes {limit}"),
            ));
        }
        let _guard = self.locks.try_lock([lock::volume(id)])?;
        let volume = self.volume(id)?;
        let wanted = if required == 0 { limit } else { required };
        if wanted <= volume.capacity {
            return Ok(volume.capacity);
        }
        let grow = wanted - volume.capacity;
        if grow > self.available() {
            return Err(EngineError::OutOfRange(format!(
                "capacity_range: growing to {wanted} bytes needs {grow} more, the pool has {} free",
                self.available()
            )));
        }
        if volume.kind == Kind::Block {
            let path = self.store.volume_path(id);
            let f = fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .and_then(|f| f.set_len(wanted).and_then(|()| f.sync_all()));
            f.map_err(EngineError::io(format!("growing {}", path.display())))?;
        }
        self.commit(|state| {
            state.volumes.get_mut(id).expect("locked").capacity = wanted;
            Ok(())
        })?;
        Ok(wanted)
    }

    pub fn modify(&self, id: &str, mutable: &BTreeMap<String, String>) -> Result<()> {
        rules::check_parameters("mutable_parameters", mutable, rules::MUTABLE)?;
        let _guard = self.locks.try_lock([lock::volume(id)])?;
        self.volume(id)?;
        self.commit(|state| {
            let v = state.volumes.get_mut(id).expect("locked");
            v.mutable_parameters.extend(mutable.clone());
            Ok(())
        })
    }

    /// Whether the volume's backing data is present (the volume condition).
    pub fn healthy(&self, id: &str) -> bool {
        self.store.volume_path(id).exists()
    }
}

/// Whether an existing volume satisfies a repeated CreateVolume; ALREADY_EXISTS if not.
fn compatible(existing: &Volume, req: &CreateVolume, kind: Kind) -> Result<()> {
    let mismatch = if existing.kind != kind {
        Some("access type")
    } else if !rules::in_range(existing.capacity, req.required_bytes, req.limit_bytes) {
        Some("capacity_range")
    } else if existing.parameters != req.parameters {
        Some("parameters")
    } else if existing.source != req.source {
        Some("volume_content_source")
    } else {
        None
    };
    match mismatch {
        None => Ok(()),
        Some(what) => Err(EngineError::AlreadyExists(format!(
            "a volume named {:?} exists ({}) with a different {what}",
            existing.name, existing.id
        ))),
    }
}

/// Paging over a sorted listing; the token is the index of the next entry.
pub(super) fn page<T>(all: Vec<T>, max_entries: usize, token: &str) -> Result<Page<T>> {
    let start = if token.is_empty() {
        0
    } else {
        match token.parse::<usize>() {
            Ok(n) if n <= all.len() => n,
            _ => return Err(EngineError::BadToken(token.to_string())),
        }
    };
    let end = if max_entries == 0 {
        all.len()
    } else {
        all.len().min(start + max_entries)
    };
    let next_token = if end < all.len() {
        end.to_string()
    } else {
        String::new()
    };
    let entries = all.into_iter().skip(start).take(end - start).collect();
    Ok(Page {
        entries,
        next_token,
    })
}

/// A short random hex suffix from the process's hasher seed and the clock (no extra crate).
pub(super) fn random_suffix() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    format!("{:08x}", h.finish() as u32)
}

#[cfg(test)]
mod tests {
    use super::page;

    #[test]
    fn paging() {
        let all: Vec<u32> = (0..5).collect();
        let p = page(all.clone(), 2, "").unwrap();
        assert_eq!((p.entries, p.next_token.as_str()), (vec![0, 1], "2"));
        let p = page(all.clone(), 2, "4").unwrap();
        assert_eq!((p.entries, p.next_token.as_str()), (vec![4], ""));
        let p = page(all.clone(), 0, "").unwrap();
        assert_eq!(p.entries.len(), 5);
        assert!(page(all.clone(), 2, "6").is_err());
        assert!(page(all, 2, "x").is_err());
    }
}
