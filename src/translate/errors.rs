//! Errors across revisions, as data.
//!
//! The September 2017 draft answers every RPC with gRPC OK and `oneof reply { result, error }`;
//! `Error` holds one sub-message per RPC with its own enum plus `GeneralError`. v0.1.0 replaced it
//! with gRPC status codes and gave, per RPC, a table of conditions → codes. [`SPECIFIC`] pairs each
//! draft enum value with the v0.1.0 code for the same condition; [`GENERAL`] does the same for
//! `GeneralError`; [`RETRY`] gives, for a code with no fitting draft enum value, the
//! `caller_must_not_retry` of the `GeneralError` a draft client receives (from the code's recovery
//! behaviour in v0.1.0/v1), and [`RETRY_OVERRIDES`] the RPCs whose tables say otherwise.
//!
//! Idempotency changed between the draft and v0.1.0: `DeleteVolume` of a volume that does not
//! exist and `ControllerUnpublishVolume` of a volume not attached to the node reply OK since
//! v0.1.0; the draft returned errors. Those rows have `code: None` (= OK).

use tonic::{Code, Status};

use crate::dialect::proto::v0_1_oneof::{error, Error};

/// A draft RPC, as far as its errors are concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DraftRpc {
    CreateVolume,
    DeleteVolume,
    ControllerPublishVolume,
    ControllerUnpublishVolume,
    ValidateVolumeCapabilities,
    ListVolumes,
    GetCapacity,
    ControllerGetCapabilities,
    GetSupportedVersions,
    GetPluginInfo,
    GetNodeId,
    ProbeNode,
    NodePublishVolume,
    NodeUnpublishVolume,
    NodeGetCapabilities,
}

impl DraftRpc {
    pub const ALL: [DraftRpc; 15] = [
        DraftRpc::CreateVolume,
        DraftRpc::DeleteVolume,
        DraftRpc::ControllerPublishVolume,
        DraftRpc::ControllerUnpublishVolume,
        DraftRpc::ValidateVolumeCapabilities,
        DraftRpc::ListVolumes,
        DraftRpc::GetCapacity,
        DraftRpc::ControllerGetCapabilities,
        DraftRpc::GetSupportedVersions,
        DraftRpc::GetPluginInfo,
        DraftRpc::GetNodeId,
        DraftRpc::ProbeNode,
        DraftRpc::NodePublishVolume,
        DraftRpc::NodeUnpublishVolume,
        DraftRpc::NodeGetCapabilities,
    ];

    /// The draft RPC name (the last path segment).
    pub fn name(self) -> &'static str {
        match self {
            DraftRpc::CreateVolume => "CreateVolume",
            DraftRpc::DeleteVolume => "DeleteVolume",
            DraftRpc::ControllerPublishVolume => "ControllerPublishVolume",
            DraftRpc::ControllerUnpublishVolume => "ControllerUnpublishVolume",
            DraftRpc::ValidateVolumeCapabilities => "ValidateVolumeCapabilities",
            DraftRpc::ListVolumes => "ListVolumes",
            DraftRpc::GetCapacity => "GetCapacity",
            DraftRpc::ControllerGetCapabilities => "ControllerGetCapabilities",
            DraftRpc::GetSupportedVersions => "GetSupportedVersions",
            DraftRpc::GetPluginInfo => "GetPluginInfo",
            DraftRpc::GetNodeId => "GetNodeID",
            DraftRpc::ProbeNode => "ProbeNode",
            DraftRpc::NodePublishVolume => "NodePublishVolume",
            DraftRpc::NodeUnpublishVolume => "NodeUnpublishVolume",
            DraftRpc::NodeGetCapabilities => "NodeGetCapabilities",
        }
    }

    pub fn from_name(name: &str) -> Option<DraftRpc> {
        DraftRpc::ALL.into_iter().find(|r| r.name() == name)
    }

    /// The `Error` sub-message name, for RPCs that have their own enum.
    pub fn error_message(self) -> Option<&'static str> {
        Some(match self {
            DraftRpc::CreateVolume => "CreateVolumeError",
            DraftRpc::DeleteVolume => "DeleteVolumeError",
            DraftRpc::ControllerPublishVolume => "ControllerPublishVolumeError",
            DraftRpc::ControllerUnpublishVolume => "ControllerUnpublishVolumeError",
            DraftRpc::ValidateVolumeCapabilities => "ValidateVolumeCapabilitiesError",
            DraftRpc::NodePublishVolume => "NodePublishVolumeError",
            DraftRpc::NodeUnpublishVolume => "NodeUnpublishVolumeError",
            DraftRpc::ProbeNode => "ProbeNodeError",
            DraftRpc::GetNodeId => "GetNodeIDError",
            _ => return None,
        })
    }
}

/// Which way a row is used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// draft error → code, and code → this draft error (the code's preferred row for the RPC).
    Both,
    /// draft error → code only (the code maps back to another row or to `GeneralError`).
    ToGrpc,
    /// draft error → code (or OK), and this other code → this draft error: for conditions that
    /// became success in v0.1.0 but that a newer plugin may still report as an error.
    FromGrpc(Code),
}

impl SpecificRow {
    /// The gRPC code that maps back to this draft value, if any.
    pub fn back(&self) -> Option<Code> {
        match self.dir {
            Dir::Both => self.code,
            Dir::ToGrpc => None,
            Dir::FromGrpc(c) => Some(c),
        }
    }
}

/// One draft enum value of an RPC's own error and the gRPC code for the same condition.
#[derive(Clone, Copy, Debug)]
pub struct SpecificRow {
    pub rpc: DraftRpc,
    pub name: &'static str,
    pub value: i32,
    /// `None`: the condition is success since v0.1.0 (idempotency).
    pub code: Option<Code>,
    pub dir: Dir,
    pub why: &'static str,
}

const fn row(
    rpc: DraftRpc,
    name: &'static str,
    value: i32,
    code: Option<Code>,
    dir: Dir,
    why: &'static str,
) -> SpecificRow {
    SpecificRow {
        rpc,
        name,
        value,
        code,
        dir,
        why,
    }
}

use Code::{
    Aborted, AlreadyExists, Cancelled, DataLoss, DeadlineExceeded, FailedPrecondition, Internal,
    InvalidArgument, NotFound, OutOfRange, PermissionDenied, ResourceExhausted, Unauthenticated,
    Unavailable, Unimplemented, Unknown,
};
use Dir::*;
use DraftRpc as R;

const UNK: &str = "draft: client should update; no v0.1.0 condition";
const NI: &str = "v0.1.0 \"Call not implemented\"";
const PEND: &str = "v0.1.0 \"Operation pending for volume\"";
const BADARG: &str = "v0.1.0 \"Invalid or unsupported field\" (INVALID_ARGUMENT)";
const VNF: &str = "v0.1.0 \"Volume does not exist\"";
const NNF: &str = "v0.1.0 \"Node does not exist\"";

/// Draft per-RPC error enums ↔ gRPC codes (v0.1.0 per-RPC tables).
#[rustfmt::skip]
pub static SPECIFIC: &[SpecificRow] = &[
    row(R::CreateVolume, "UNKNOWN", 0, Some(Unknown), ToGrpc, UNK),
    row(R::CreateVolume, "CALL_NOT_IMPLEMENTED", 1, Some(Unimplemented), Both, NI),
    row(R::CreateVolume, "OPERATION_PENDING_FOR_VOLUME", 2, Some(Aborted), Both, PEND),
    row(R::CreateVolume, "INVALID_VOLUME_NAME", 3, Some(InvalidArgument), ToGrpc, BADARG),
    row(R::CreateVolume, "UNSUPPORTED_CAPACITY_RANGE", 4, Some(OutOfRange), Both,
        "v0.1.0 \"Unsupported capacity_range\""),
    // The draft says "caller MAY assume CreateVolume succeeded", but the error carries no
    // VolumeInfo to build a reply from; v0.1.0's ALREADY_EXISTS is "exists but incompatible",
    // so ALREADY_EXISTS maps back to a must-not-retry GeneralError, not to this value.
    row(R::CreateVolume, "VOLUME_ALREADY_EXISTS", 5, Some(AlreadyExists), ToGrpc,
        "v0.1.0 \"Volume already exists\""),
    row(R::CreateVolume, "UNSUPPORTED_PARAMETER_KEY", 6, Some(InvalidArgument), ToGrpc, BADARG),
    row(R::CreateVolume, "INVALID_PARAMETER_VALUE", 7, Some(InvalidArgument), ToGrpc, BADARG),
    row(R::DeleteVolume, "UNKNOWN", 0, Some(Unknown), ToGrpc, UNK),
    row(R::DeleteVolume, "CALL_NOT_IMPLEMENTED", 1, Some(Unimplemented), Both, NI),
    row(R::DeleteVolume, "OPERATION_PENDING_FOR_VOLUME", 2, Some(Aborted), Both, PEND),
    row(R::DeleteVolume, "INVALID_VOLUME_HANDLE", 3, Some(InvalidArgument), Both, BADARG),
    // Idempotency: v0.1.0+ "If a volume corresponding to the specified volume_id does not exist
    // or the artifacts associated with the volume do not exist anymore, the Plugin MUST reply 0
    // OK"; the draft answered VOLUME_DOES_NOT_EXIST ("caller SHOULD assume DeleteVolume
    // succeeded"). NOT_FOUND from a newer plugin still maps back to it.
    row(R::DeleteVolume, "VOLUME_DOES_NOT_EXIST", 4, None, FromGrpc(NotFound),
        "idempotent since v0.1.0: OK"),
    row(R::ControllerPublishVolume, "UNKNOWN", 0, Some(Unknown), ToGrpc, UNK),
    row(R::ControllerPublishVolume, "CALL_NOT_IMPLEMENTED", 1, Some(Unimplemented), Both, NI),
    row(R::ControllerPublishVolume, "OPERATION_PENDING_FOR_VOLUME", 2, Some(Aborted), Both, PEND),
    row(R::ControllerPublishVolume, "INVALID_VOLUME_HANDLE", 3, Some(InvalidArgument), ToGrpc, BADARG),
    row(R::ControllerPublishVolume, "VOLUME_DOES_NOT_EXIST", 4, Some(NotFound), Both, VNF),
    row(R::ControllerPublishVolume, "VOLUME_ALREADY_PUBLISHED", 5, Some(FailedPrecondition), Both,
        "v0.1.0 \"Volume published to another node\""),
    row(R::ControllerPublishVolume, "NODE_DOES_NOT_EXIST", 6, Some(NotFound), ToGrpc, NNF),
    // Attached to the maximum number of nodes = published elsewhere without room for another
    // node; v0.1.0's RESOURCE_EXHAUSTED is about volumes per *node*, a different condition.
    row(R::ControllerPublishVolume, "MAX_ATTACHED_NODES", 7, Some(FailedPrecondition), ToGrpc,
        "v0.1.0 \"Volume published to another node\""),
    row(R::ControllerPublishVolume, "INVALID_NODE_ID", 8, Some(InvalidArgument), ToGrpc, BADARG),
    row(R::ControllerPublishVolume, "UNSUPPORTED_MOUNT_FLAGS", 9, Some(InvalidArgument), ToGrpc, BADARG),
    row(R::ControllerPublishVolume, "UNSUPPORTED_VOLUME_TYPE", 10, Some(InvalidArgument), ToGrpc, BADARG),
    row(R::ControllerPublishVolume, "UNSUPPORTED_FS_TYPE", 11, Some(InvalidArgument), ToGrpc, BADARG),
    row(R::ControllerUnpublishVolume, "UNKNOWN", 0, Some(Unknown), ToGrpc, UNK),
    row(R::ControllerUnpublishVolume, "CALL_NOT_IMPLEMENTED", 1, Some(Unimplemented), Both, NI),
    row(R::ControllerUnpublishVolume, "OPERATION_PENDING_FOR_VOLUME", 2, Some(Aborted), Both, PEND),
    row(R::ControllerUnpublishVolume, "INVALID_VOLUME_HANDLE", 3, Some(InvalidArgument), ToGrpc, BADARG),
    row(R::ControllerUnpublishVolume, "VOLUME_DOES_NOT_EXIST", 4, Some(NotFound), Both, VNF),
    row(R::ControllerUnpublishVolume, "NODE_DOES_NOT_EXIST", 5, Some(NotFound), ToGrpc, NNF),
    row(R::ControllerUnpublishVolume, "INVALID_NODE_ID", 6, Some(InvalidArgument), ToGrpc, BADARG),
    // Idempotency: since v0.1.0 unpublishing a volume that is not published to the node is OK.
    row(R::ControllerUnpublishVolume, "VOLUME_NOT_ATTACHED_TO_SPECIFIED_NODE", 7, None, ToGrpc,
        "idempotent since v0.1.0: OK"),
    row(R::ControllerUnpublishVolume, "NODE_ID_REQUIRED", 8, Some(InvalidArgument), ToGrpc, BADARG),
    row(R::ValidateVolumeCapabilities, "UNKNOWN", 0, Some(Unknown), ToGrpc, UNK),
    row(R::ValidateVolumeCapabilities, "VOLUME_DOES_NOT_EXIST", 1, Some(NotFound), Both, VNF),
    // Since v0.1.0 an unsupported capability is an OK reply with `supported = false` (v1: no
    // `confirmed`) and the description as `message`, not an error.
    row(R::ValidateVolumeCapabilities, "UNSUPPORTED_MOUNT_FLAGS", 2, None, ToGrpc,
        "v0.1.0+: OK, not supported"),
    row(R::ValidateVolumeCapabilities, "UNSUPPORTED_VOLUME_TYPE", 3, None, ToGrpc,
        "v0.1.0+: OK, not supported"),
    row(R::ValidateVolumeCapabilities, "UNSUPPORTED_FS_TYPE", 4, None, ToGrpc,
        "v0.1.0+: OK, not supported"),
    row(R::ValidateVolumeCapabilities, "INVALID_VOLUME_INFO", 5, Some(InvalidArgument), Both, BADARG),
    row(R::NodePublishVolume, "UNKNOWN", 0, Some(Unknown), ToGrpc, UNK),
    row(R::NodePublishVolume, "OPERATION_PENDING_FOR_VOLUME", 1, Some(Aborted), Both, PEND),
    row(R::NodePublishVolume, "VOLUME_DOES_NOT_EXIST", 2, Some(NotFound), Both, VNF),
    row(R::NodePublishVolume, "UNSUPPORTED_MOUNT_FLAGS", 3, Some(InvalidArgument), ToGrpc, BADARG),
    row(R::NodePublishVolume, "UNSUPPORTED_VOLUME_TYPE", 4, Some(InvalidArgument), ToGrpc, BADARG),
    row(R::NodePublishVolume, "UNSUPPORTED_FS_TYPE", 5, Some(InvalidArgument), ToGrpc, BADARG),
    // A mount failure is the plugin's internal failure; INTERNAL from a newer plugin's
    // NodePublishVolume is almost always one.
    row(R::NodePublishVolume, "MOUNT_ERROR", 6, Some(Internal), Both, "no v0.1.0 condition"),
    row(R::NodePublishVolume, "INVALID_VOLUME_HANDLE", 7, Some(InvalidArgument), ToGrpc, BADARG),
    row(R::NodeUnpublishVolume, "UNKNOWN", 0, Some(Unknown), ToGrpc, UNK),
    row(R::NodeUnpublishVolume, "OPERATION_PENDING_FOR_VOLUME", 1, Some(Aborted), Both, PEND),
    row(R::NodeUnpublishVolume, "VOLUME_DOES_NOT_EXIST", 2, Some(NotFound), Both, VNF),
    row(R::NodeUnpublishVolume, "UNMOUNT_ERROR", 3, Some(Internal), Both, "no v0.1.0 condition"),
    row(R::NodeUnpublishVolume, "INVALID_VOLUME_HANDLE", 4, Some(InvalidArgument), ToGrpc, BADARG),
    row(R::ProbeNode, "UNKNOWN", 0, Some(Unknown), ToGrpc, UNK),
    row(R::ProbeNode, "BAD_PLUGIN_CONFIG", 1, Some(FailedPrecondition), Both,
        "v0.1.0 NodeProbe \"Bad plugin config\""),
    row(R::ProbeNode, "MISSING_REQUIRED_HOST_DEPENDENCY", 2, Some(FailedPrecondition), ToGrpc,
        "v0.1.0 NodeProbe \"Missing required dependency\""),
    row(R::GetNodeId, "UNKNOWN", 0, Some(Unknown), ToGrpc, UNK),
    row(R::GetNodeId, "BAD_PLUGIN_CONFIG", 1, Some(FailedPrecondition), Both,
        "as NodeProbe \"Bad plugin config\""),
    row(R::GetNodeId, "MISSING_REQUIRED_HOST_DEPENDENCY", 2, Some(FailedPrecondition), ToGrpc,
        "as NodeProbe \"Missing required dependency\""),
];

/// One `GeneralError` case and its code. `must_not_retry: None` matches either value.
#[derive(Clone, Copy, Debug)]
pub struct GeneralRow {
    pub name: &'static str,
    pub value: i32,
    pub must_not_retry: Option<bool>,
    pub code: Code,
    pub why: &'static str,
}

/// Draft `GeneralError` → gRPC code (any RPC).
#[rustfmt::skip]
pub static GENERAL: &[GeneralRow] = &[
    GeneralRow { name: "UNKNOWN", value: 0, must_not_retry: None, code: Unknown,
        why: "draft: client should update" },
    GeneralRow { name: "UNDEFINED", value: 1, must_not_retry: Some(false), code: Unavailable,
        why: "retryable: v1 clients retry UNAVAILABLE with backoff" },
    GeneralRow { name: "UNDEFINED", value: 1, must_not_retry: Some(true), code: Internal,
        why: "not retryable, cause unknown" },
    GeneralRow { name: "UNSUPPORTED_REQUEST_VERSION", value: 2, must_not_retry: None,
        code: InvalidArgument, why: "v0.1.0 \"Unsupported request version\"" },
    GeneralRow { name: "MISSING_REQUIRED_FIELD", value: 3, must_not_retry: None,
        code: InvalidArgument, why: "v0.1.0 \"Missing required field\"" },
];

/// For a code with no fitting draft enum value: the draft client gets `GeneralError UNDEFINED`
/// with this `caller_must_not_retry` (the code's recovery behaviour in v0.1.0 / v1).
pub static RETRY: &[(Code, bool, &str)] = &[
    (Cancelled, false, "the call was cancelled, not refused"),
    (Unknown, false, "cause unknown; retry with backoff"),
    (InvalidArgument, true, "v0.1.0: caller MUST fix the request"),
    (
        DeadlineExceeded,
        false,
        "transient; the gateway's own timeout too",
    ),
    (
        NotFound,
        true,
        "v0.1.0: caller MUST verify the id before retrying",
    ),
    (
        AlreadyExists,
        true,
        "v0.1.0: caller MUST fix arguments or use another name",
    ),
    (PermissionDenied, true, "credentials must change first"),
    (
        ResourceExhausted,
        false,
        "v0.1.0: retry once resources are released",
    ),
    (
        FailedPrecondition,
        true,
        "gRPC: do not retry until the system state is fixed",
    ),
    (Aborted, false, "v0.1.0: retry with exponential back off"),
    (
        OutOfRange,
        true,
        "v0.1.0: caller MUST fix the capacity range",
    ),
    (Unimplemented, true, "v0.1.0: caller MUST NOT retry"),
    (Internal, true, "serious plugin failure"),
    (
        Unavailable,
        false,
        "transient; the gateway's own connect failures too",
    ),
    (DataLoss, true, "unrecoverable"),
    (Unauthenticated, true, "credentials must change first"),
];

/// RPCs whose v0.1.0 table gives a code a different recovery than [`RETRY`].
pub static RETRY_OVERRIDES: &[(DraftRpc, Code, bool, &str)] = &[(
    R::DeleteVolume,
    FailedPrecondition,
    false,
    "v0.1.0 DeleteVolume \"Volume in use\": retry with exponential back off",
)];

/// `caller_must_not_retry` for `code` on `rpc`.
pub fn must_not_retry(rpc: DraftRpc, code: Code) -> bool {
    if let Some(o) = RETRY_OVERRIDES.iter().find(|o| o.0 == rpc && o.1 == code) {
        return o.2;
    }
    RETRY
        .iter()
        .find(|r| r.0 == code)
        .map(|r| r.1)
        .unwrap_or(true)
}

/// A draft `Error` → the gRPC outcome. `Ok(description)` when the condition is success in
/// v0.1.0+ (the idempotency rows).
pub fn draft_to_status(rpc: DraftRpc, e: Error) -> Result<String, Status> {
    let (value, description) = match e.value {
        None => {
            return Err(Status::unknown(format!(
                "{} replied with an empty Error",
                rpc.name()
            )))
        }
        Some(error::Value::GeneralError(g)) => {
            let row = GENERAL.iter().find(|r| {
                r.value == g.error_code
                    && r.must_not_retry
                        .is_none_or(|m| m == g.caller_must_not_retry)
            });
            let code = row.map(|r| r.code).unwrap_or(Unknown);
            return Err(Status::new(code, g.error_description));
        }
        Some(v) => specific_parts(v),
    };
    match SPECIFIC.iter().find(|r| r.rpc == rpc && r.value == value) {
        Some(SpecificRow { code: None, .. }) => Ok(description),
        Some(SpecificRow {
            code: Some(code), ..
        }) => Err(Status::new(*code, description)),
        // A value this table does not know (newer draft?) — the draft's own fallback is UNKNOWN.
        None => Err(Status::new(Unknown, description)),
    }
}

fn specific_parts(v: error::Value) -> (i32, String) {
    use error::Value as V;
    match v {
        V::GeneralError(g) => (g.error_code, g.error_description),
        V::CreateVolumeError(e) => (e.error_code, e.error_description),
        V::DeleteVolumeError(e) => (e.error_code, e.error_description),
        // VOLUME_ALREADY_PUBLISHED / MAX_ATTACHED_NODES name the nodes the volume is attached
        // to; v0.1.0 asks for "the node_id ... as part of the gRPC status.message".
        V::ControllerPublishVolumeError(e) if !e.node_ids.is_empty() => {
            let nodes: Vec<String> = e
                .node_ids
                .iter()
                .map(|n| {
                    super::ids::node_id_to_string(Some(n))
                        .unwrap_or_else(|_| format!("{:?}", n.values))
                })
                .collect();
            (
                e.error_code,
                format!(
                    "{} (published at node_id: {})",
                    e.error_description,
                    nodes.join(", ")
                ),
            )
        }
        V::ControllerPublishVolumeError(e) => (e.error_code, e.error_description),
        V::ControllerUnpublishVolumeError(e) => (e.error_code, e.error_description),
        V::ValidateVolumeCapabilitiesError(e) => (e.error_code, e.error_description),
        V::NodePublishVolumeError(e) => (e.error_code, e.error_description),
        V::NodeUnpublishVolumeError(e) => (e.error_code, e.error_description),
        V::ProbeNodeError(e) => (e.error_code, e.error_description),
        V::GetNodeIdError(e) => (e.error_code, e.error_description),
    }
}

/// A gRPC status from a newer revision → the draft `Error` for `rpc`: the RPC's own enum value
/// where a `Both` row fits, else `GeneralError UNDEFINED` with `caller_must_not_retry` from
/// [`must_not_retry`]. The message is kept as `error_description`.
pub fn status_to_draft(rpc: DraftRpc, status: &Status) -> Error {
    let description = status.message().to_string();
    let specific = SPECIFIC
        .iter()
        .find(|r| r.rpc == rpc && r.back() == Some(status.code()));
    let value = match specific {
        Some(r) => specific_error(rpc, r.value, description),
        None => error::Value::GeneralError(error::GeneralError {
            error_code: error::general_error::GeneralErrorCode::Undefined as i32,
            caller_must_not_retry: must_not_retry(rpc, status.code()),
            error_description: description,
        }),
    };
    Error { value: Some(value) }
}

/// A `GeneralError` built by the gateway itself (e.g. UNSUPPORTED_REQUEST_VERSION).
pub fn general_error(
    code: error::general_error::GeneralErrorCode,
    must_not_retry: bool,
    description: String,
) -> Error {
    Error {
        value: Some(error::Value::GeneralError(error::GeneralError {
            error_code: code as i32,
            caller_must_not_retry: must_not_retry,
            error_description: description,
        })),
    }
}

/// The `Error` sub-message of `rpc` with `value`. Only called for RPCs that have one.
pub fn specific_error(rpc: DraftRpc, value: i32, d: String) -> error::Value {
    use error::Value as V;
    match rpc {
        R::CreateVolume => V::CreateVolumeError(error::CreateVolumeError {
            error_code: value,
            error_description: d,
        }),
        R::DeleteVolume => V::DeleteVolumeError(error::DeleteVolumeError {
            error_code: value,
            error_description: d,
        }),
        R::ControllerPublishVolume => {
            V::ControllerPublishVolumeError(error::ControllerPublishVolumeError {
                error_code: value,
                error_description: d,
                node_ids: Vec::new(),
            })
        }
        R::ControllerUnpublishVolume => {
            V::ControllerUnpublishVolumeError(error::ControllerUnpublishVolumeError {
                error_code: value,
                error_description: d,
            })
        }
        R::ValidateVolumeCapabilities => {
            V::ValidateVolumeCapabilitiesError(error::ValidateVolumeCapabilitiesError {
                error_code: value,
                error_description: d,
            })
        }
        R::NodePublishVolume => V::NodePublishVolumeError(error::NodePublishVolumeError {
            error_code: value,
            error_description: d,
        }),
        R::NodeUnpublishVolume => V::NodeUnpublishVolumeError(error::NodeUnpublishVolumeError {
            error_code: value,
            error_description: d,
        }),
        R::ProbeNode => V::ProbeNodeError(error::ProbeNodeError {
            error_code: value,
            error_description: d,
        }),
        R::GetNodeId => V::GetNodeIdError(error::GetNodeIdError {
            error_code: value,
            error_description: d,
        }),
        _ => V::GeneralError(error::GeneralError {
            error_code: error::general_error::GeneralErrorCode::Undefined as i32,
            caller_must_not_retry: true,
            error_description: d,
        }),
    }
}

#[cfg(test)]
#[path = "errors_tests.rs"]
mod tests;
