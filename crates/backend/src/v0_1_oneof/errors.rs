//! Engine errors as the September 2017 draft's `Error` message: gRPC OK with `reply.error`,
//! the RPC's own error enum where it has a value for the condition, else `GeneralError` with
//! `caller_must_not_retry` set from the condition's recovery behaviour. This is the one place
//! the draft's error tables live.

use crate::engine::{EngineError, ObjectKind, Precondition};
use csi::error::{self as e, general_error::GeneralErrorCode, Value};
use csi_gateway_proto::dialect::proto::v0_1_oneof as csi;

/// Whether a caller must not retry the same request after this error (the draft's
/// `caller_must_not_retry`): argument, lookup and conflict errors never heal by themselves;
/// contention, exhaustion, preconditions and I/O may.
pub fn must_not_retry(err: &EngineError) -> bool {
    matches!(
        err,
        EngineError::InvalidArgument { .. }
            | EngineError::NotFound { .. }
            | EngineError::AlreadyExists(_)
            | EngineError::OutOfRange(_)
            | EngineError::BadToken(_)
    )
}

pub fn general(
    code: GeneralErrorCode,
    must_not_retry: bool,
    description: impl Into<String>,
) -> csi::Error {
    csi::Error {
        value: Some(Value::GeneralError(e::GeneralError {
            error_code: code as i32,
            caller_must_not_retry: must_not_retry,
            error_description: description.into(),
        })),
    }
}

/// The fallback for conditions an RPC's enum has no value for.
pub fn general_from(err: &EngineError) -> csi::Error {
    if err.is_missing() {
        return general(
            GeneralErrorCode::MissingRequiredField,
            true,
            err.to_string(),
        );
    }
    general(
        GeneralErrorCode::Undefined,
        must_not_retry(err),
        err.to_string(),
    )
}

pub fn missing(field: &str) -> csi::Error {
    general_from(&EngineError::missing(field))
}

fn field_of(err: &EngineError) -> &str {
    match err {
        EngineError::InvalidArgument { field, .. } if !err.is_missing() => field,
        _ => "",
    }
}

pub fn create_volume(err: EngineError) -> csi::Error {
    use e::create_volume_error::CreateVolumeErrorCode as C;
    let field = field_of(&err);
    let code = match &err {
        EngineError::Aborted(_) => Some(C::OperationPendingForVolume),
        _ if field == "name" => Some(C::InvalidVolumeName),
        _ if field.starts_with("capacity_range") => Some(C::UnsupportedCapacityRange),
        EngineError::OutOfRange(_) => Some(C::UnsupportedCapacityRange),
        EngineError::AlreadyExists(_) => Some(C::VolumeAlreadyExists),
        EngineError::InvalidArgument { reason, .. } if field.starts_with("parameters") => {
            Some(if reason.starts_with("unknown parameter") {
                C::UnsupportedParameterKey
            } else {
                C::InvalidParameterValue
            })
        }
        _ => None,
    };
    match code {
        Some(c) => one(Value::CreateVolumeError(e::CreateVolumeError {
            error_code: c as i32,
            error_description: err.to_string(),
        })),
        None => general_from(&err),
    }
}

pub fn delete_volume(err: EngineError) -> csi::Error {
    use e::delete_volume_error::DeleteVolumeErrorCode as C;
    let code = match &err {
        EngineError::Aborted(_) => Some(C::OperationPendingForVolume),
        EngineError::NotFound {
            kind: ObjectKind::Volume,
            ..
        } => Some(C::VolumeDoesNotExist),
        _ => None,
    };
    match code {
        Some(c) => one(Value::DeleteVolumeError(e::DeleteVolumeError {
            error_code: c as i32,
            error_description: err.to_string(),
        })),
        None => general_from(&err),
    }
}

/// `node_ids` are where the volume is attached (the draft requires them with
/// VOLUME_ALREADY_PUBLISHED).
pub fn controller_publish(err: EngineError, node_ids: Vec<csi::NodeId>) -> csi::Error {
    use e::controller_publish_volume_error::ControllerPublishVolumeErrorCode as C;
    let code = match &err {
        EngineError::Aborted(_) => Some(C::OperationPendingForVolume),
        EngineError::NotFound {
            kind: ObjectKind::Volume,
            ..
        } => Some(C::VolumeDoesNotExist),
        EngineError::NotFound {
            kind: ObjectKind::Node,
            ..
        } => Some(C::NodeDoesNotExist),
        EngineError::FailedPrecondition {
            reason: Precondition::AttachedElsewhere,
            ..
        } => Some(C::VolumeAlreadyPublished),
        EngineError::InvalidArgument { field, .. } if field == "node_id" => Some(C::InvalidNodeId),
        EngineError::InvalidArgument { field, .. }
            if field.starts_with("volume_capability") && !err.is_missing() =>
        {
            Some(C::UnsupportedVolumeType)
        }
        _ => None,
    };
    match code {
        Some(c) => one(Value::ControllerPublishVolumeError(
            e::ControllerPublishVolumeError {
                error_code: c as i32,
                error_description: err.to_string(),
                node_ids: if c == C::VolumeAlreadyPublished {
                    node_ids
                } else {
                    Vec::new()
                },
            },
        )),
        None => general_from(&err),
    }
}

pub fn controller_unpublish(err: EngineError) -> csi::Error {
    use e::controller_unpublish_volume_error::ControllerUnpublishVolumeErrorCode as C;
    let code = match &err {
        EngineError::Aborted(_) => Some(C::OperationPendingForVolume),
        EngineError::NotFound {
            kind: ObjectKind::Volume,
            ..
        } => Some(C::VolumeDoesNotExist),
        EngineError::NotFound {
            kind: ObjectKind::Node,
            ..
        } => Some(C::NodeDoesNotExist),
        EngineError::FailedPrecondition {
            reason: Precondition::Other,
            ..
        } => Some(C::VolumeNotAttachedToSpecifiedNode),
        _ => None,
    };
    match code {
        Some(c) => one(Value::ControllerUnpublishVolumeError(
            e::ControllerUnpublishVolumeError {
                error_code: c as i32,
                error_description: err.to_string(),
            },
        )),
        None => general_from(&err),
    }
}

pub fn validate(err: EngineError) -> csi::Error {
    use e::validate_volume_capabilities_error::ValidateVolumeCapabilitiesErrorCode as C;
    let code = match &err {
        EngineError::NotFound {
            kind: ObjectKind::Volume,
            ..
        } => Some(C::VolumeDoesNotExist),
        _ => None,
    };
    match code {
        Some(c) => one(Value::ValidateVolumeCapabilitiesError(
            e::ValidateVolumeCapabilitiesError {
                error_code: c as i32,
                error_description: err.to_string(),
            },
        )),
        None => general_from(&err),
    }
}

pub fn node_publish(err: EngineError) -> csi::Error {
    use e::node_publish_volume_error::NodePublishVolumeErrorCode as C;
    let code = match &err {
        EngineError::Aborted(_) => Some(C::OperationPendingForVolume),
        EngineError::NotFound {
            kind: ObjectKind::Volume,
            ..
        } => Some(C::VolumeDoesNotExist),
        EngineError::FailedPrecondition {
            reason: Precondition::Other,
            ..
        } => Some(C::UnsupportedVolumeType),
        EngineError::Io { .. } => Some(C::MountError),
        _ => None,
    };
    match code {
        Some(c) => one(Value::NodePublishVolumeError(e::NodePublishVolumeError {
            error_code: c as i32,
            error_description: err.to_string(),
        })),
        None => general_from(&err),
    }
}

pub fn node_unpublish(err: EngineError) -> csi::Error {
    use e::node_unpublish_volume_error::NodeUnpublishVolumeErrorCode as C;
    let code = match &err {
        EngineError::Aborted(_) => Some(C::OperationPendingForVolume),
        EngineError::NotFound {
            kind: ObjectKind::Volume,
            ..
        } => Some(C::VolumeDoesNotExist),
        EngineError::Io { .. } => Some(C::UnmountError),
        _ => None,
    };
    match code {
        Some(c) => one(Value::NodeUnpublishVolumeError(
            e::NodeUnpublishVolumeError {
                error_code: c as i32,
                error_description: err.to_string(),
            },
        )),
        None => general_from(&err),
    }
}

/// An INVALID_VOLUME_HANDLE-style error for each RPC that carries a handle.
pub fn bad_handle(rpc: Rpc, description: String) -> csi::Error {
    match rpc {
        Rpc::DeleteVolume => one(Value::DeleteVolumeError(e::DeleteVolumeError {
            error_code: e::delete_volume_error::DeleteVolumeErrorCode::InvalidVolumeHandle as i32,
            error_description: description,
        })),
        Rpc::ControllerPublish => one(Value::ControllerPublishVolumeError(e::ControllerPublishVolumeError {
            error_code: e::controller_publish_volume_error::ControllerPublishVolumeErrorCode::InvalidVolumeHandle as i32,
            error_description: description,
            node_ids: Vec::new(),
        })),
        Rpc::ControllerUnpublish => one(Value::ControllerUnpublishVolumeError(e::ControllerUnpublishVolumeError {
            error_code: e::controller_unpublish_volume_error::ControllerUnpublishVolumeErrorCode::InvalidVolumeHandle as i32,
            error_description: description,
        })),
        Rpc::Validate => one(Value::ValidateVolumeCapabilitiesError(e::ValidateVolumeCapabilitiesError {
            error_code: e::validate_volume_capabilities_error::ValidateVolumeCapabilitiesErrorCode::InvalidVolumeInfo as i32,
            error_description: description,
        })),
        Rpc::NodePublish => one(Value::NodePublishVolumeError(e::NodePublishVolumeError {
            error_code: e::node_publish_volume_error::NodePublishVolumeErrorCode::InvalidVolumeHandle as i32,
            error_description: description,
        })),
        Rpc::NodeUnpublish => one(Value::NodeUnpublishVolumeError(e::NodeUnpublishVolumeError {
            error_code: e::node_unpublish_volume_error::NodeUnpublishVolumeErrorCode::InvalidVolumeHandle as i32,
            error_description: description,
        })),
    }
}

/// The RPCs that carry a `VolumeHandle`.
#[derive(Clone, Copy, Debug)]
pub enum Rpc {
    DeleteVolume,
    ControllerPublish,
    ControllerUnpublish,
    Validate,
    NodePublish,
    NodeUnpublish,
}

impl Rpc {
    /// The RPC's error for an engine failure.
    pub fn error(self, err: EngineError) -> csi::Error {
        match self {
            Rpc::DeleteVolume => delete_volume(err),
            Rpc::ControllerPublish => controller_publish(err, Vec::new()),
            Rpc::ControllerUnpublish => controller_unpublish(err),
            Rpc::Validate => validate(err),
            Rpc::NodePublish => node_publish(err),
            Rpc::NodeUnpublish => node_unpublish(err),
        }
    }
}

fn one(value: Value) -> csi::Error {
    csi::Error { value: Some(value) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn general_of(err: csi::Error) -> (i32, bool) {
        match err.value {
            Some(Value::GeneralError(g)) => (g.error_code, g.caller_must_not_retry),
            other => panic!("expected a GeneralError, got {other:?}"),
        }
    }

    #[test]
    fn retry_flags_follow_recovery_behaviour() {
        let cases = [
            (
                EngineError::missing("name"),
                GeneralErrorCode::MissingRequiredField,
                true,
            ),
            (
                EngineError::invalid("x", "bad"),
                GeneralErrorCode::Undefined,
                true,
            ),
            (
                EngineError::ResourceExhausted("full".into()),
                GeneralErrorCode::Undefined,
                false,
            ),
            (
                EngineError::Internal("boom".into()),
                GeneralErrorCode::Undefined,
                false,
            ),
            (
                EngineError::precondition(Precondition::InUse, "busy"),
                GeneralErrorCode::Undefined,
                false,
            ),
        ];
        for (err, code, no_retry) in cases {
            assert_eq!(
                general_of(general_from(&err)),
                (code as i32, no_retry),
                "{err}"
            );
        }
    }

    #[test]
    fn rpc_specific_codes() {
        use e::create_volume_error::CreateVolumeErrorCode as C;
        let code = |err: csi::Error| match err.value {
            Some(Value::CreateVolumeError(c)) => c.error_code,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            code(create_volume(EngineError::invalid("name", "bad"))),
            C::InvalidVolumeName as i32
        );
        assert_eq!(
            code(create_volume(EngineError::OutOfRange("big".into()))),
            C::UnsupportedCapacityRange as i32
        );
        assert_eq!(
            code(create_volume(EngineError::AlreadyExists("x".into()))),
            C::VolumeAlreadyExists as i32
        );
        assert_eq!(
            code(create_volume(EngineError::Aborted("x".into()))),
            C::OperationPendingForVolume as i32
        );
        assert_eq!(
            code(create_volume(EngineError::invalid(
                "parameters[\"k\"]",
                "unknown parameter (...)"
            ))),
            C::UnsupportedParameterKey as i32
        );
        assert_eq!(
            code(create_volume(EngineError::invalid(
                "parameters[\"iops\"]",
                "invalid value"
            ))),
            C::InvalidParameterValue as i32
        );
        // A missing name is the general MISSING_REQUIRED_FIELD, not INVALID_VOLUME_NAME.
        assert_eq!(
            general_of(create_volume(EngineError::missing("name"))).0,
            GeneralErrorCode::MissingRequiredField as i32
        );
    }
}
