//! v1 wire types ↔ engine types. Missing or malformed fields become INVALID_ARGUMENT naming
//! the field as the spec spells it.

use std::collections::{BTreeMap, HashMap};

use prost_types::Timestamp;

use crate::engine::{self, AccessMode, Capability, EngineError, Kind, Segment, Source};
use csi::volume_capability::{access_mode::Mode, AccessType, BlockVolume, MountVolume};
use csi_gateway_proto::dialect::proto::v1 as csi;

pub type Result<T> = std::result::Result<T, EngineError>;

pub fn capability(field: &str, cap: Option<&csi::VolumeCapability>) -> Result<Capability> {
    let cap = cap.ok_or_else(|| EngineError::missing(field))?;
    let mode = cap
        .access_mode
        .as_ref()
        .ok_or_else(|| EngineError::missing(format!("{field}.access_mode")))?;
    let mode = match Mode::try_from(mode.mode) {
        Ok(Mode::SingleNodeWriter) => AccessMode::SingleNodeWriter,
        Ok(Mode::SingleNodeReaderOnly) => AccessMode::SingleNodeReaderOnly,
        Ok(Mode::MultiNodeReaderOnly) => AccessMode::MultiNodeReaderOnly,
        Ok(Mode::MultiNodeSingleWriter) => AccessMode::MultiNodeSingleWriter,
        Ok(Mode::MultiNodeMultiWriter) => AccessMode::MultiNodeMultiWriter,
        Ok(Mode::SingleNodeSingleWriter) => AccessMode::SingleNodeSingleWriter,
        Ok(Mode::SingleNodeMultiWriter) => AccessMode::SingleNodeMultiWriter,
        Ok(Mode::Unknown) | Err(_) => {
            return Err(EngineError::invalid(
                format!("{field}.access_mode.mode"),
                format!("{} is not a supported access mode", mode.mode),
            ))
        }
    };
    match &cap.access_type {
        Some(AccessType::Block(_)) => Ok(Capability {
            kind: Kind::Block,
            fs_type: String::new(),
            mount_flags: Vec::new(),
            mode,
        }),
        Some(AccessType::Mount(m)) => Ok(Capability {
            kind: Kind::Mount,
            fs_type: m.fs_type.clone(),
            mount_flags: m.mount_flags.clone(),
            mode,
        }),
        None => Err(EngineError::invalid(
            format!("{field}.access_type"),
            "is required (block or mount)",
        )),
    }
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

pub fn capability_to(cap: &Capability) -> csi::VolumeCapability {
    let mode = match cap.mode {
        AccessMode::SingleNodeWriter => Mode::SingleNodeWriter,
        AccessMode::SingleNodeReaderOnly => Mode::SingleNodeReaderOnly,
        AccessMode::MultiNodeReaderOnly => Mode::MultiNodeReaderOnly,
        AccessMode::MultiNodeSingleWriter => Mode::MultiNodeSingleWriter,
        AccessMode::MultiNodeMultiWriter => Mode::MultiNodeMultiWriter,
        AccessMode::SingleNodeSingleWriter => Mode::SingleNodeSingleWriter,
        AccessMode::SingleNodeMultiWriter => Mode::SingleNodeMultiWriter,
    };
    csi::VolumeCapability {
        access_mode: Some(csi::volume_capability::AccessMode { mode: mode as i32 }),
        access_type: Some(match cap.kind {
            Kind::Block => AccessType::Block(BlockVolume {}),
            Kind::Mount => AccessType::Mount(MountVolume {
                fs_type: cap.fs_type.clone(),
                mount_flags: cap.mount_flags.clone(),
                volume_mount_group: String::new(),
            }),
        }),
    }
}

/// A non-negative int64 size as u64 (0 = unset).
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

/// An engine size back to int64; sizes are bounded by the pool size, which fits.
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
    let Some(src) = src else { return Ok(None) };
    match &src.r#type {
        Some(Type::Snapshot(s)) => Ok(Some(Source::Snapshot(s.snapshot_id.clone()))),
        Some(Type::Volume(v)) => Ok(Some(Source::Volume(v.volume_id.clone()))),
        None => Err(EngineError::missing("volume_content_source.type")),
    }
}

pub fn source_to(src: &Source) -> csi::VolumeContentSource {
    use csi::volume_content_source::{SnapshotSource, Type, VolumeSource};
    csi::VolumeContentSource {
        r#type: Some(match src {
            Source::Snapshot(id) => Type::Snapshot(SnapshotSource {
                snapshot_id: id.clone(),
            }),
            Source::Volume(id) => Type::Volume(VolumeSource {
                volume_id: id.clone(),
            }),
        }),
    }
}

/// The volume context handed to the CO: what the node side needs to know about the volume.
pub fn volume_context(v: &engine::Volume) -> HashMap<String, String> {
    let kind = match v.kind {
        Kind::Mount => "mount",
        Kind::Block => "block",
    };
    HashMap::from([("kind".to_string(), kind.to_string())])
}

pub fn volume(v: &engine::Volume) -> csi::Volume {
    csi::Volume {
        capacity_bytes: int64(v.capacity),
        volume_id: v.id.clone(),
        volume_context: volume_context(v),
        content_source: v.source.as_ref().map(source_to),
        accessible_topology: v.accessible_topology.iter().map(topology).collect(),
    }
}

pub fn snapshot(s: &engine::Snapshot) -> csi::Snapshot {
    csi::Snapshot {
        size_bytes: int64(s.size),
        snapshot_id: s.id.clone(),
        source_volume_id: s.source_volume_id.clone(),
        creation_time: Some(Timestamp {
            seconds: s.created_at_ns.div_euclid(1_000_000_000),
            nanos: s.created_at_ns.rem_euclid(1_000_000_000) as i32,
        }),
        ready_to_use: true,
        group_snapshot_id: String::new(),
    }
}

pub fn max_entries(n: i32) -> Result<usize> {
    usize::try_from(n).map_err(|_| EngineError::invalid("max_entries", format!("{n} is negative")))
}
