//! v0.3 wire types ↔ engine types. v0.3 knows access modes 1..=5 only, snapshot sources only
//! (no volume cloning), `attributes` instead of v1's `volume_context`, and snapshots with
//! `created_at` in nanoseconds and a status enum instead of `ready_to_use`.

use std::collections::{BTreeMap, HashMap};

use crate::engine::{self, AccessMode, Capability, EngineError, Kind, Segment, Source};
use csi::volume_capability::AccessType;
use csi_gateway_proto::dialect::proto::v0_3 as csi;

pub type Result<T> = std::result::Result<T, EngineError>;

/// The newest access mode v0.3 defines (MULTI_NODE_MULTI_WRITER).
const NEWEST_MODE: i32 = 5;

pub fn capability(field: &str, cap: Option<&csi::VolumeCapability>) -> Result<Capability> {
    let cap = cap.ok_or_else(|| EngineError::missing(field))?;
    let mode = cap
        .access_mode
        .as_ref()
        .ok_or_else(|| EngineError::missing(format!("{field}.access_mode")))?;
    let mode = AccessMode::from_wire(mode.mode, NEWEST_MODE).ok_or_else(|| {
        EngineError::invalid(
            format!("{field}.access_mode.mode"),
            format!("{} is not a supported access mode", mode.mode),
        )
    })?;
    let (kind, fs_type, mount_flags) = match &cap.access_type {
        Some(AccessType::Block(_)) => (Kind::Block, String::new(), Vec::new()),
        Some(AccessType::Mount(m)) => (Kind::Mount, m.fs_type.clone(), m.mount_flags.clone()),
        None => {
            return Err(EngineError::invalid(
                format!("{field}.access_type"),
                "is required (block or mount)",
            ))
        }
    };
    Ok(Capability {
        kind,
        fs_type,
        mount_flags,
        mode,
    })
}

pub fn capabilities(field: &str, caps: &[csi::VolumeCapability]) -> Result<Vec<Capability>> {
    if caps.is_empty() {
        return Err(EngineError::missing(field));
    }
    caps.iter()
        .enumerate()
        .map(|(i, c)| capability(&format!("{field}[{i}]"), Some(c)))
        .collect()
}

pub fn bytes(field: &str, n: i64) -> Result<u64> {
    u64::try_from(n).map_err(|_| EngineError::invalid(field, format!("{n} is negative")))
}

pub fn range(r: Option<&csi::CapacityRange>) -> Result<(u64, u64)> {
    match r {
        None => Ok((0, 0)),
        Some(r) => Ok((
            bytes("capacity_range.required_bytes", r.required_bytes)?,
            bytes("capacity_range.limit_bytes", r.limit_bytes)?,
        )),
    }
}

pub fn int64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

pub fn map(m: &HashMap<String, String>) -> BTreeMap<String, String> {
    m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

pub fn hash(m: &BTreeMap<String, String>) -> HashMap<String, String> {
    m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

pub fn segment(t: &csi::Topology) -> Segment {
    map(&t.segments)
}

pub fn topology(s: &Segment) -> csi::Topology {
    csi::Topology { segments: hash(s) }
}

pub fn source(src: Option<&csi::VolumeContentSource>) -> Result<Option<Source>> {
    use csi::volume_content_source::Type;
    match src.map(|s| &s.r#type) {
        None => Ok(None),
        Some(Some(Type::Snapshot(s))) => Ok(Some(Source::Snapshot(s.id.clone()))),
        Some(None) => Err(EngineError::missing("volume_content_source.type")),
    }
}

pub fn volume(v: &engine::Volume) -> csi::Volume {
    use csi::volume_content_source::{SnapshotSource, Type};
    let kind = match v.kind {
        Kind::Mount => "mount",
        Kind::Block => "block",
    };
    csi::Volume {
        capacity_bytes: int64(v.capacity),
        id: v.id.clone(),
        attributes: HashMap::from([("kind".to_string(), kind.to_string())]),
        content_source: match &v.source {
            Some(Source::Snapshot(id)) => Some(csi::VolumeContentSource {
                r#type: Some(Type::Snapshot(SnapshotSource { id: id.clone() })),
            }),
            // Clones are not expressible in v0.3 (they cannot be made through it either).
            _ => None,
        },
        accessible_topology: v.accessible_topology.iter().map(topology).collect(),
    }
}

pub fn snapshot(s: &engine::Snapshot) -> csi::Snapshot {
    use csi::snapshot_status::Type;
    csi::Snapshot {
        size_bytes: int64(s.size),
        id: s.id.clone(),
        source_volume_id: s.source_volume_id.clone(),
        created_at: s.created_at_ns,
        // Copies are complete when CreateSnapshot returns.
        status: Some(csi::SnapshotStatus {
            r#type: Type::Ready as i32,
            details: String::new(),
        }),
    }
}

pub fn max_entries(n: i32) -> Result<usize> {
    usize::try_from(n).map_err(|_| EngineError::invalid("max_entries", format!("{n} is negative")))
}

pub fn required(field: &str, value: &str) -> Result<()> {
    if value.is_empty() {
        return Err(EngineError::missing(field));
    }
    Ok(())
}
