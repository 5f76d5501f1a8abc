//! The engine's typed failures. Each dialect module maps them to its own wire representation
//! (a gRPC status, or the draft's `Error` oneof), so the variants follow the spec's error rows
//! rather than any one encoding.

use std::fmt;

/// What kind of object a lookup failed to find; the draft dialect needs it to pick its
/// per-RPC error enum (`VOLUME_DOES_NOT_EXIST`, `NODE_DOES_NOT_EXIST`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjectKind {
    Volume,
    Snapshot,
    Node,
    SourceSnapshot,
    SourceVolume,
}

impl fmt::Display for ObjectKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ObjectKind::Volume => "volume",
            ObjectKind::Snapshot => "snapshot",
            ObjectKind::Node => "node",
            ObjectKind::SourceSnapshot => "source snapshot",
            ObjectKind::SourceVolume => "source volume",
        })
    }
}

/// Why a precondition failed; the draft dialect has one enum value per reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precondition {
    /// The volume is attached or published and the operation needs it not to be.
    InUse,
    /// A single-node volume is already attached to another node.
    AttachedElsewhere,
    /// The volume must be staged (or published) first.
    NotStaged,
    /// Anything else.
    Other,
}

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A request field is missing or malformed; `field` names it as the spec spells it.
    #[error("{field}: {reason}")]
    InvalidArgument { field: String, reason: String },
    #[error("{kind} {id:?} does not exist")]
    NotFound { kind: ObjectKind, id: String },
    /// An object of the same name or at the same path exists with incompatible properties.
    #[error("{0}")]
    AlreadyExists(String),
    #[error("{message}")]
    FailedPrecondition {
        reason: Precondition,
        message: String,
    },
    /// The pool or the node's attachment limit is used up.
    #[error("{0}")]
    ResourceExhausted(String),
    /// A requested capacity the plugin cannot honour at all.
    #[error("{0}")]
    OutOfRange(String),
    /// Another operation holds the volume (or name); retry later.
    #[error("an operation on {0:?} is already in progress")]
    Aborted(String),
    /// A paging token this plugin did not issue.
    #[error("starting_token {0:?} is not valid")]
    BadToken(String),
    /// Bind mounts were requested but the host refuses them; never silently degraded.
    #[error("{0}")]
    Unavailable(String),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Internal(String),
}

/// The reason text of a missing required field.
const MISSING: &str = "is required and must not be empty";

pub type Result<T, E = EngineError> = std::result::Result<T, E>;

impl EngineError {
    pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        EngineError::InvalidArgument {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// A required field that is absent or empty.
    pub fn missing(field: impl Into<String>) -> Self {
        EngineError::invalid(field, MISSING)
    }

    /// Whether this is [`EngineError::missing`] (the draft has its own code for that).
    pub fn is_missing(&self) -> bool {
        matches!(self, EngineError::InvalidArgument { reason, .. } if reason == MISSING)
    }

    pub fn not_found(kind: ObjectKind, id: impl Into<String>) -> Self {
        EngineError::NotFound {
            kind,
            id: id.into(),
        }
    }

    pub fn precondition(reason: Precondition, message: impl Into<String>) -> Self {
        EngineError::FailedPrecondition {
            reason,
            message: message.into(),
        }
    }

    /// Wraps an I/O error with what the engine was doing.
    pub fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let context = context.into();
        move |source| EngineError::Io { context, source }
    }

    /// The gRPC code the v0.1.0+ error tables assign; shared by the status-code dialects.
    pub fn code(&self) -> tonic::Code {
        use tonic::Code;
        match self {
            EngineError::InvalidArgument { .. } => Code::InvalidArgument,
            EngineError::NotFound { .. } => Code::NotFound,
            EngineError::AlreadyExists(_) => Code::AlreadyExists,
            EngineError::FailedPrecondition { .. } => Code::FailedPrecondition,
            EngineError::ResourceExhausted(_) => Code::ResourceExhausted,
            EngineError::OutOfRange(_) => Code::OutOfRange,
            EngineError::Aborted(_) | EngineError::BadToken(_) => Code::Aborted,
            EngineError::Unavailable(_) => Code::Unavailable,
            EngineError::Io { .. } | EngineError::Internal(_) => Code::Internal,
        }
    }

    /// Converts to a gRPC status with the v0.1.0+ code and this error's message.
    pub fn into_status(self) -> tonic::Status {
        tonic::Status::new(self.code(), self.to_string())
    }
}
