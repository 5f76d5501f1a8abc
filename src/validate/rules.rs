//! The spec's rules as data, per dialect: which fields are REQUIRED (from the `This field is
//! REQUIRED` notes of each revision's `csi.proto`), and the size limits ("Size Limits": 128
//! bytes for a string, 4 KiB for a `map<string, string>`, unless a field says otherwise).
//! Only strings, messages, repeated and map fields are listed as required: a proto3 scalar
//! set to its default value is not on the wire, so its absence cannot be told.

use crate::dialect::Dialect;

/// Dialect sets, for rows that hold in several revisions.
const D: &[Dialect] = &[Dialect::V0_1Oneof];
const V01: &[Dialect] = &[Dialect::V0_1];
const V03: &[Dialect] = &[Dialect::V0_3];
const V1: &[Dialect] = &[Dialect::V1];
const LEGACY: &[Dialect] = &[Dialect::V0_1Oneof, Dialect::V0_1];
const IDS: &[Dialect] = &[Dialect::V0_1, Dialect::V0_3, Dialect::V1];
const NEW: &[Dialect] = &[Dialect::V0_3, Dialect::V1];
const ALL: &[Dialect] = &Dialect::ALL;

/// Any request message that has the field (the `version` every v0.1 / draft request carries).
pub const ANY_REQUEST: &str = "*Request";

/// (dialects, message name without the package, its REQUIRED fields).
pub const REQUIRED: &[(&[Dialect], &str, &[&str])] = &[
    // Requests.
    (LEGACY, ANY_REQUEST, &["version"]),
    (ALL, "CreateVolumeRequest", &["name", "volume_capabilities"]),
    (D, "DeleteVolumeRequest", &["volume_handle"]),
    (IDS, "DeleteVolumeRequest", &["volume_id"]),
    (
        D,
        "ControllerPublishVolumeRequest",
        &["volume_handle", "volume_capability"],
    ),
    (
        IDS,
        "ControllerPublishVolumeRequest",
        &["volume_id", "node_id", "volume_capability"],
    ),
    (D, "ControllerUnpublishVolumeRequest", &["volume_handle"]),
    (IDS, "ControllerUnpublishVolumeRequest", &["volume_id"]),
    (
        D,
        "ValidateVolumeCapabilitiesRequest",
        &["volume_info", "volume_capabilities"],
    ),
    (
        IDS,
        "ValidateVolumeCapabilitiesRequest",
        &["volume_id", "volume_capabilities"],
    ),
    (
        D,
        "NodePublishVolumeRequest",
        &["volume_handle", "target_path", "volume_capability"],
    ),
    (
        IDS,
        "NodePublishVolumeRequest",
        &["volume_id", "target_path", "volume_capability"],
    ),
    (
        D,
        "NodeUnpublishVolumeRequest",
        &["volume_handle", "target_path"],
    ),
    (
        IDS,
        "NodeUnpublishVolumeRequest",
        &["volume_id", "target_path"],
    ),
    (
        NEW,
        "NodeStageVolumeRequest",
        &["volume_id", "staging_target_path", "volume_capability"],
    ),
    (
        NEW,
        "NodeUnstageVolumeRequest",
        &["volume_id", "staging_target_path"],
    ),
    (NEW, "CreateSnapshotRequest", &["source_volume_id", "name"]),
    (NEW, "DeleteSnapshotRequest", &["snapshot_id"]),
    (
        V1,
        "NodeGetVolumeStatsRequest",
        &["volume_id", "volume_path"],
    ),
    (
        V1,
        "ControllerExpandVolumeRequest",
        &["volume_id", "capacity_range"],
    ),
    (V1, "NodeExpandVolumeRequest", &["volume_id", "volume_path"]),
    (V1, "ControllerGetVolumeRequest", &["volume_id"]),
    // Inside requests and replies.
    (ALL, "VolumeCapability", &["access_mode"]),
    (D, "VolumeHandle", &["id"]),
    (D, "VolumeInfo", &["handle"]),
    (V01, "VolumeInfo", &["id"]),
    (V03, "Volume", &["id"]),
    (V1, "Volume", &["volume_id"]),
    (V03, "Snapshot", &["id", "source_volume_id"]),
    (V1, "Snapshot", &["snapshot_id", "source_volume_id"]),
    // Replies (the draft's inside its `Result`).
    (
        D,
        "GetSupportedVersionsResponse.Result",
        &["supported_versions"],
    ),
    (V01, "GetSupportedVersionsResponse", &["supported_versions"]),
    (
        D,
        "GetPluginInfoResponse.Result",
        &["name", "vendor_version"],
    ),
    (IDS, "GetPluginInfoResponse", &["name", "vendor_version"]),
    (D, "CreateVolumeResponse.Result", &["volume_info"]),
    (V01, "CreateVolumeResponse", &["volume_info"]),
    (NEW, "CreateVolumeResponse", &["volume"]),
    (NEW, "CreateSnapshotResponse", &["snapshot"]),
    (V01, "GetNodeIDResponse", &["node_id"]),
    (V03, "NodeGetIdResponse", &["node_id"]),
    (NEW, "NodeGetInfoResponse", &["node_id"]),
];

/// The spec's general limit for a string field.
pub const STRING_BYTES: usize = 128;
/// The spec's general limit for a `map<string, string>` (keys and values together), and for
/// the repeated `mount_flags` (v0.1: "The total size of this repeated field SHALL NOT exceed
/// 4 KiB").
pub const MAP_BYTES: usize = 4096;

/// String fields held to a size limit, by name: identifiers and names. Paths, descriptions and
/// tokens are left alone (the spec's own sizes for them vary by revision and orchestrators
/// exceed 128 bytes with ordinary mount paths).
pub const LIMITED_STRINGS: &[(&[Dialect], &str, usize)] = &[
    (ALL, "name", STRING_BYTES),
    (ALL, "vendor_version", STRING_BYTES),
    (ALL, "id", STRING_BYTES),
    (ALL, "volume_id", STRING_BYTES),
    (ALL, "snapshot_id", STRING_BYTES),
    (ALL, "source_volume_id", STRING_BYTES),
    (ALL, "source_snapshot_id", STRING_BYTES),
    (V01, "node_id", STRING_BYTES),
    // v0.3 and v1 raise it for the node id ("SHALL NOT exceed 256 bytes").
    (NEW, "node_id", 256),
];

/// Repeated string fields whose total size is limited like a map.
pub const LIMITED_LISTS: &[&str] = &["mount_flags"];
