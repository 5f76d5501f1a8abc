//! The spec's idempotency keys, per RPC: the fields that name what a call acts on, so that
//! two calls on one key are the same operation (a retry, when their requests are equal) or
//! contend (the spec's "operation pending for volume"). Single flight (`call::guard`) keys on
//! them; the configuration allows `single_flight` only for an RPC that has one.

/// One part of an idempotency key.
#[derive(Clone, Copy, Debug)]
pub enum Part {
    /// The volume id, wherever the method's dialect keeps it.
    Volume,
    /// A top-level string field of the request.
    Field(&'static str),
}

use Part::{Field, Volume};

/// The spec's idempotency keys, per method: calls on one key contend; the namespace makes
/// the methods that undo each other (stage and unstage, …) contend with each other.
pub const KEYS: &[(&str, &str, &[Part])] = &[
    ("CreateVolume", "volume-name", &[Field("name")]),
    ("DeleteVolume", "volume", &[Volume]),
    ("ControllerExpandVolume", "volume", &[Volume]),
    (
        "ControllerPublishVolume",
        "attach",
        &[Volume, Field("node_id")],
    ),
    (
        "ControllerUnpublishVolume",
        "attach",
        &[Volume, Field("node_id")],
    ),
    (
        "NodeStageVolume",
        "stage",
        &[Volume, Field("staging_target_path")],
    ),
    (
        "NodeUnstageVolume",
        "stage",
        &[Volume, Field("staging_target_path")],
    ),
    (
        "NodePublishVolume",
        "publish",
        &[Volume, Field("target_path")],
    ),
    (
        "NodeUnpublishVolume",
        "publish",
        &[Volume, Field("target_path")],
    ),
    ("NodeExpandVolume", "node-expand", &[Volume]),
    ("CreateSnapshot", "snapshot-name", &[Field("name")]),
    ("DeleteSnapshot", "snapshot", &[Field("snapshot_id")]),
];

/// Whether `method` (an RPC name) has an idempotency key, so may be single-flight.
pub fn has_key(method: &str) -> bool {
    KEYS.iter().any(|(m, _, _)| *m == method)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_mutating_rpcs_have_a_key() {
        assert!(has_key("NodeUnpublishVolume") && has_key("CreateSnapshot"));
        assert!(!has_key("ListVolumes") && !has_key("Probe"));
    }
}
