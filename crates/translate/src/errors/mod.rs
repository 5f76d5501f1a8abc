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

use super::CallError;
use crate::dialect::proto::v0_1_oneof::{error, Error};
use crate::dialect::Dialect;
use crate::hub::{v1, Method, Request as Req, Response as Resp};

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

/// REQUIRED request fields, in the order a plugin checks them: every field that any revision
/// having the RPC marks REQUIRED, nested ones included (`volume_capability.access_mode`;
/// `volume_capabilities[].x` is every entry's `x`). Since v0.1.0 a missing one is
/// INVALID_ARGUMENT, and the v1 error tables list their conditions (NOT_FOUND,
/// FAILED_PRECONDITION such as "staging target path not set") for requests that have them, so
/// the gateway checks these first, before any precondition of its own. A draft client gets
/// `GeneralError MISSING_REQUIRED_FIELD` (must not retry) instead of the `UNDEFINED` that the
/// plugin's INVALID_ARGUMENT would become.
///
/// Checked only on translated calls, and each of those has a gRPC-status revision on one side:
/// a field one side leaves OPTIONAL (the draft's ControllerPublishVolume `node_id`) is refused
/// because the other side's plugin would refuse it, or because the client broke its own rules.
#[rustfmt::skip]
pub static REQUIRED: &[(Method, &[&str])] = &[
    (Method::CreateVolume, &["name", "volume_capabilities",
        "volume_capabilities[].access_mode", "volume_capabilities[].access_type"]),
    (Method::DeleteVolume, &["volume_id"]),
    (Method::ControllerPublishVolume, &["volume_id", "node_id", "volume_capability",
        "volume_capability.access_mode", "volume_capability.access_type"]),
    (Method::ControllerUnpublishVolume, &["volume_id"]),
    (Method::ValidateVolumeCapabilities, &["volume_id", "volume_capabilities",
        "volume_capabilities[].access_mode", "volume_capabilities[].access_type"]),
    (Method::NodeStageVolume, &["volume_id", "staging_target_path", "volume_capability",
        "volume_capability.access_mode", "volume_capability.access_type"]),
    (Method::NodeUnstageVolume, &["volume_id", "staging_target_path"]),
    (Method::NodePublishVolume, &["volume_id", "target_path", "volume_capability",
        "volume_capability.access_mode", "volume_capability.access_type"]),
    (Method::NodeUnpublishVolume, &["volume_id", "target_path"]),
    (Method::CreateSnapshot, &["source_volume_id", "name"]),
    (Method::DeleteSnapshot, &["snapshot_id"]),
];

/// Whether `req` sets `field` (a name from [`REQUIRED`] or [`GENERAL_OVERRIDES`]); a field the
/// request does not have is not set.
pub fn field_set(req: &Req, field: &str) -> bool {
    if let Some(part) = field.strip_prefix("volume_capability.") {
        return capability_of(req).is_some_and(|c| capability_sets(c, part));
    }
    if let Some(part) = field.strip_prefix("volume_capabilities[].") {
        return capabilities_of(req)
            .iter()
            .all(|c| capability_sets(c, part));
    }
    match (req, field) {
        (Req::CreateVolume(r), "name") => !r.name.is_empty(),
        (Req::CreateVolume(r), "volume_capabilities") => !r.volume_capabilities.is_empty(),
        (Req::DeleteVolume(r), "volume_id") => !r.volume_id.is_empty(),
        (Req::ControllerPublishVolume(r), "volume_id") => !r.volume_id.is_empty(),
        (Req::ControllerPublishVolume(r), "node_id") => !r.node_id.is_empty(),
        (Req::ControllerUnpublishVolume(r), "volume_id") => !r.volume_id.is_empty(),
        (Req::ValidateVolumeCapabilities(r), "volume_id") => !r.volume_id.is_empty(),
        (Req::ValidateVolumeCapabilities(r), "volume_capabilities") => {
            !r.volume_capabilities.is_empty()
        }
        (Req::NodeStageVolume(r), "volume_id") => !r.volume_id.is_empty(),
        (Req::NodeStageVolume(r), "staging_target_path") => !r.staging_target_path.is_empty(),
        (Req::NodeUnstageVolume(r), "volume_id") => !r.volume_id.is_empty(),
        (Req::NodeUnstageVolume(r), "staging_target_path") => !r.staging_target_path.is_empty(),
        (Req::NodePublishVolume(r), "volume_id") => !r.volume_id.is_empty(),
        (Req::NodePublishVolume(r), "target_path") => !r.target_path.is_empty(),
        (Req::NodeUnpublishVolume(r), "volume_id") => !r.volume_id.is_empty(),
        (Req::NodeUnpublishVolume(r), "target_path") => !r.target_path.is_empty(),
        (Req::CreateSnapshot(r), "source_volume_id") => !r.source_volume_id.is_empty(),
        (Req::CreateSnapshot(r), "name") => !r.name.is_empty(),
        (Req::DeleteSnapshot(r), "snapshot_id") => !r.snapshot_id.is_empty(),
        (Req::ListVolumes(r), "starting_token") => !r.starting_token.is_empty(),
        (_, "volume_capability") => capability_of(req).is_some(),
        _ => false,
    }
}

/// The request's single `volume_capability`, on the RPCs that have one.
fn capability_of(req: &Req) -> Option<&v1::VolumeCapability> {
    match req {
        Req::ControllerPublishVolume(r) => r.volume_capability.as_ref(),
        Req::NodeStageVolume(r) => r.volume_capability.as_ref(),
        Req::NodePublishVolume(r) => r.volume_capability.as_ref(),
        _ => None,
    }
}

/// The request's `volume_capabilities` list, on the RPCs that have one.
fn capabilities_of(req: &Req) -> &[v1::VolumeCapability] {
    match req {
        Req::CreateVolume(r) => &r.volume_capabilities,
        Req::ValidateVolumeCapabilities(r) => &r.volume_capabilities,
        _ => &[],
    }
}

/// Every revision: `access_mode` "is a REQUIRED field"; of `access_type` "one of the following
/// fields MUST be specified".
fn capability_sets(c: &v1::VolumeCapability, part: &str) -> bool {
    match part {
        "access_mode" => c.access_mode.is_some(),
        "access_type" => c.access_type.is_some(),
        _ => false,
    }
}

/// The first [`REQUIRED`] field `req` leaves unset.
pub fn missing_required(req: &Req) -> Option<&'static str> {
    let method = req.method();
    REQUIRED
        .iter()
        .filter(|(m, _)| *m == method)
        .flat_map(|(_, fields)| fields.iter())
        .find(|f| !field_set(req, f))
        .copied()
}

/// INVALID_ARGUMENT for a missing [`REQUIRED`] field (v0.1.0+ "Missing required field").
pub fn missing_field(req: &Req, field: &str) -> Status {
    Status::invalid_argument(format!(
        "{field} is a required field of {} and is missing",
        req.method().name()
    ))
}

/// A draft `GeneralError` that means something more precise on one RPC, given what the request
/// set: the draft had no enum value for the condition, so its plugins report it as
/// `GeneralError`, and the v0.1.0 table has a code for it.
#[derive(Clone, Copy, Debug)]
pub struct GeneralOverride {
    pub rpc: DraftRpc,
    pub name: &'static str,
    pub value: i32,
    pub must_not_retry: bool,
    /// Applies only when the request sets this field.
    pub when_set: &'static str,
    pub code: Code,
    pub why: &'static str,
}

/// Per-RPC exceptions to [`GENERAL`].
#[rustfmt::skip]
pub static GENERAL_OVERRIDES: &[GeneralOverride] = &[
    // A ListVolumes request has no other argument a plugin can refuse (the version is
    // UNSUPPORTED_REQUEST_VERSION, max_entries is any uint32), so a must-not-retry UNDEFINED
    // answer to a request with a token is the invalid token.
    GeneralOverride { rpc: R::ListVolumes, name: "UNDEFINED", value: 1, must_not_retry: true,
        when_set: "starting_token", code: Aborted,
        why: "v0.1.0 ListVolumes \"Invalid starting_token\": restart with an empty token" },
];

/// [`draft_to_status`] for the draft reply to `req`: [`GENERAL_OVERRIDES`] apply.
pub fn draft_to_status_for(rpc: DraftRpc, e: Error, req: &Req) -> Result<String, Status> {
    if let Some(error::Value::GeneralError(g)) = &e.value {
        let hit = GENERAL_OVERRIDES.iter().find(|o| {
            o.rpc == rpc
                && o.value == g.error_code
                && o.must_not_retry == g.caller_must_not_retry
                && field_set(req, o.when_set)
        });
        if let Some(o) = hit {
            return Err(Status::new(o.code, g.error_description.clone()));
        }
    }
    draft_to_status(rpc, e)
}

/// Which dialects a [`CodeRow`] applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Only(Dialect),
    /// Every dialect older than v1 (v0.3, v0.1, the draft).
    PreV1,
}

impl Side {
    pub fn has(self, d: Dialect) -> bool {
        match self {
            Side::Only(x) => x == d,
            Side::PreV1 => d != Dialect::V1,
        }
    }

    pub fn label(self) -> String {
        match self {
            Side::Only(d) => d.name().to_string(),
            Side::PreV1 => "v0.3, v0.1, v0.1-oneof".to_string(),
        }
    }
}

/// A gRPC code from a plugin of one revision that a client of another revision must receive
/// differently (`to: None` = OK), on one RPC.
#[derive(Clone, Copy, Debug)]
pub struct CodeRow {
    pub method: Method,
    pub upstream: Side,
    pub front: Side,
    pub from: Code,
    pub to: Option<Code>,
    pub why: &'static str,
}

/// Status codes between gRPC-status revisions, per RPC and direction (the draft has its own
/// tables above; a draft plugin's `Error` reaches these rows as its v0.1.0 code).
#[rustfmt::skip]
pub static CODES: &[CodeRow] = &[
    // v1 kept NOT_FOUND in this RPC's error table and has no "SHOULD return OK" for it, but a
    // v1 CO (kubelet) cannot repair NOT_FOUND and retries its unmount forever, and v1 moved the
    // target to the plugin side, which the gateway takes for v0.x plugins: for the v1 client
    // nothing is published at the target. Applied only while the target is not a mount point
    // (see the gateway's `call::paths`).
    CodeRow { method: Method::NodeUnpublishVolume, upstream: Side::PreV1, front: Side::Only(Dialect::V1),
        from: NotFound, to: None,
        why: "v1 NodeUnpublishVolume: \"This operation MUST be idempotent.\" — its error table still lists \"Volume does not exist\" as 5 NOT_FOUND, with no OK rule for a deleted volume (csi-test dropped the case, spec issue #433); OK only while the target is not a mount point" },
    // v0.x plugins have one NOT_FOUND for "Volume does not exist" and "Node does not exist";
    // v1 narrowed NOT_FOUND to "... and volume not assumed ControllerUnpublished from node",
    // which a v0.x plugin cannot mean: it never had the notion, and its DeleteVolume refuses a
    // volume in use (FAILED_PRECONDITION "Volume in use"), so a volume that is gone is detached.
    CodeRow { method: Method::ControllerUnpublishVolume, upstream: Side::PreV1, front: Side::Only(Dialect::V1),
        from: NotFound, to: None,
        why: "v1 ControllerUnpublishVolume: \"If the volume corresponding to the `volume_id` or the node corresponding to `node_id` cannot be found by the Plugin and the volume can be safely regarded as ControllerUnpublished from the node, the plugin SHOULD return `0 OK`.\" (a v0.x NOT_FOUND is plain \"Volume does not exist\" / \"Node does not exist\")" },
];

/// The [`CODES`] row for a `from` status on `method` between these two dialects.
pub fn code_row(
    method: Method,
    upstream: Dialect,
    front: Dialect,
    from: Code,
) -> Option<&'static CodeRow> {
    CODES.iter().find(|r| {
        r.method == method && r.from == from && r.upstream.has(upstream) && r.front.has(front)
    })
}

/// A plugin's failed `method` as the `front` client must receive it, through [`CODES`].
pub fn recode(
    method: Method,
    upstream: Dialect,
    front: Dialect,
    s: Status,
) -> Result<Resp, Status> {
    let Some(row) = code_row(method, upstream, front, s.code()) else {
        return Err(s);
    };
    match row.to {
        None => {
            let ok = empty_reply(method).ok_or(s)?;
            tracing::info!(method = method.name(), code = ?row.from, "plugin answer mapped to OK for the client's revision");
            Ok(ok)
        }
        Some(code) => Err(Status::new(code, s.message().to_string())),
    }
}

/// [`recode`] of a failed call: a re-coded status is still the failure of whoever made it.
pub fn recode_call(
    method: Method,
    upstream: Dialect,
    front: Dialect,
    e: CallError,
) -> Result<Resp, CallError> {
    let origin = e.origin;
    recode(method, upstream, front, e.status).map_err(|status| CallError { origin, status })
}

/// The OK reply of an RPC whose reply is empty, for [`CODES`] rows that turn an error into OK.
pub fn empty_reply(method: Method) -> Option<Resp> {
    match method {
        Method::NodeUnpublishVolume => Some(Resp::NodeUnpublishVolume(
            v1::NodeUnpublishVolumeResponse {},
        )),
        Method::ControllerUnpublishVolume => Some(Resp::ControllerUnpublishVolume(
            v1::ControllerUnpublishVolumeResponse {},
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
