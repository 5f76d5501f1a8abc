//! The translation layer: pure, socket-free conversions between each CSI dialect and the hub
//! model (CSI v1), hub and spoke like kubernetes-csi/csi-proxy's conversion files. A crate of
//! its own so that everything that knows two dialects is in one place, and knows nothing of the
//! gateway's connections, calls or configuration: it depends on the generated protos alone.
//!
//! - [`front`]: a call that arrived on a front dialect → [`FrontCall`]; the hub outcome → the
//!   front dialect's reply ([`decode_front`], [`encode_front`]).
//! - [`upstream`]: a hub call performed against an upstream of any dialect, with the multi-call
//!   orchestration older revisions need ([`call_upstream`]).
//! - [`v0_3`], [`v0_1`], [`v0_1_oneof`]: one folder per spoke — `generated.rs`, the same-name
//!   field copies of each message pair generated from the dialects' descriptors (csi-proxy's
//!   `conversion_generated.go`; the generator and its staleness test are `codegen`);
//!   `overrides.rs`, everything else, each entry saying what changed in which revision
//!   (csi-proxy's `conversion.go`); `front.rs` and `upstream.rs`, the per-RPC dispatch.
//! - [`errors`]: the draft `Error` ↔ gRPC status tables, as data. [`capabilities`]: the
//!   capability maps, as data. [`ids`]: the draft `NodeID` ↔ `node_id` string scheme.
//!   [`version`]: `Version` negotiation. [`docs`]: `docs/translation.md` rendered from the tables.
//! - [`identical`]: which calls are the same bytes in two dialects, so relayed untranslated.
//! - [`redact`]: what each dialect holds secret, and how a body is logged without it;
//!   [`volume_id`]: where each dialect's request names its volume (for the log line).
//!
//! The v1 ↔ hub conversion is the identity, so the `v1` spoke is just encode/decode.

pub mod capabilities;
#[cfg(test)]
mod codegen;
pub mod docs;
pub mod errors;
#[cfg(test)]
mod fixtures;
pub mod front;
pub mod identical;
pub mod ids;
pub mod inline;
pub mod redact;
pub mod upstream;
pub mod v0_1;
pub mod v0_1_oneof;
pub mod v0_3;
pub mod version;
pub mod volume_id;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::AtomicBool;

use tonic::{Code, Status};

use csi_gateway_proto::{dialect, hub};

use crate::dialect::Dialect;

pub use front::{decode_front, encode_front};
pub use upstream::call_upstream;
pub use version::{
    known_versions, negotiate, parse_supported_versions, supported_versions_request, Version,
};

/// Whose failure a failed call is: the `outcome` label of the translation counter (`ok` when
/// the call succeeded) and the `origin` of the call's log line. Set where the failure is made,
/// never read off its code ([`CallError`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The client's request: an unknown method, a service the peer may not call, a malformed or
    /// oversized message, a call its own revision does not have, or a field CSI requires
    /// missing where the gateway acts before the plugin (staging emulation).
    Client,
    /// The gateway: the upstream is down, unreachable or too slow, a stream it reset, a call
    /// the gateway cannot carry (a streaming RPC between dialects, a field or access mode the
    /// plugin's revision cannot honour), or the gateway's own work failing (its store, staging
    /// emulation, target paths).
    Gateway,
    /// The upstream answered with this error (its status, a draft plugin's `Error`, also as
    /// re-coded for the client's revision), or with a reply that is no valid answer.
    Upstream,
}

impl Origin {
    pub fn name(self) -> &'static str {
        match self {
            Origin::Client => "client",
            Origin::Gateway => "gateway",
            Origin::Upstream => "upstream",
        }
    }
}

/// Whether the gateway, on the host it shares with the CO, owns the target path between a
/// `front` client and an `upstream` plugin: a v1 client leaves the target to the plugin
/// side, which a plugin of an earlier revision does not make.
pub fn gateway_owns_targets(front: Dialect, upstream: Dialect) -> bool {
    front == Dialect::V1 && upstream != Dialect::V1
}

/// What a call that arrived on a front dialect becomes.
#[derive(Debug, Clone, PartialEq)]
pub enum FrontCall {
    /// Forward upstream as this hub request; the reply is then encoded with `encode_front`.
    /// Boxed: built once, it then moves through several frames, and the largest request is
    /// ~300 bytes (each move of it was a memcpy; callgrind, a translated call).
    Hub(Box<crate::hub::Request>),
    /// Answered by the gateway itself (e.g. v0.1 `GetSupportedVersions`): encoded reply bytes.
    Local(Vec<u8>),
}

/// A call that failed, and whose failure it is, set where the status is made: only a status
/// the plugin answered is [`Origin::Upstream`] — the one in its reply's `grpc-status`
/// ([`crate::upstream::Connection::unary`], the splice's translated streams) or in a draft
/// plugin's `Error` branch — and it stays the plugin's when the gateway re-codes it for the
/// client's revision ([`errors::recode`]) or scrubs its message. A status the gateway makes
/// converts as [`Origin::Gateway`] (`From<Status>`, so `?` on the gateway's own refusals,
/// store failures and undecodable replies needs no mark); the few that are the client's
/// request at fault say so ([`CallError::client`]).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{status}")]
pub struct CallError {
    pub origin: Origin,
    pub status: Status,
}

impl CallError {
    /// The plugin's own answer.
    pub fn upstream(status: Status) -> CallError {
        CallError {
            origin: Origin::Upstream,
            status,
        }
    }

    /// A failure of the client's request, found by the gateway before the plugin saw it.
    pub fn client(status: Status) -> CallError {
        CallError {
            origin: Origin::Client,
            status,
        }
    }

    pub fn code(&self) -> Code {
        self.status.code()
    }

    pub fn message(&self) -> &str {
        self.status.message()
    }

    /// The same failure, whoever's it is, with its status replaced (re-coded or scrubbed).
    pub fn with_status(self, status: Status) -> CallError {
        CallError { status, ..self }
    }
}

impl From<Status> for CallError {
    fn from(status: Status) -> CallError {
        CallError {
            origin: Origin::Gateway,
            status,
        }
    }
}

impl From<CallError> for Status {
    fn from(e: CallError) -> Status {
        e.status
    }
}

/// A boxed future returned by [`RawUpstream::unary`].
pub type UnaryFuture<'a> = Pin<Box<dyn Future<Output = Result<Vec<u8>, CallError>> + Send + 'a>>;

/// One raw unary call to the upstream plugin (implemented by the transport over HTTP/2): the
/// reply, or the plugin's error status marked as its own ([`CallError`]).
pub trait RawUpstream: Send + Sync {
    fn unary<'a>(&'a self, path: &'static str, body: Vec<u8>) -> UnaryFuture<'a>;
}

/// A boxed future returned by [`HandleStore`].
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, Status>> + Send + 'a>>;

/// Durable VolumeHandle metadata for calls to a draft upstream ([`crate::store::Handles`]).
/// Asynchronous: a slow store delays only the calls that need it.
pub trait HandleStore: Send + Sync {
    fn put<'a>(
        &'a self,
        volume_id: &'a str,
        metadata: &'a HashMap<String, String>,
    ) -> StoreFuture<'a, ()>;
    fn get<'a>(&'a self, volume_id: &'a str) -> StoreFuture<'a, Option<HashMap<String, String>>>;
    fn remove<'a>(&'a self, volume_id: &'a str) -> StoreFuture<'a, ()>;
}

/// What the transport learned about the upstream at connect (detection/negotiation).
#[derive(Debug)]
pub struct UpstreamSession {
    pub dialect: Dialect,
    /// Negotiated version for v0.1 / v0.1-oneof upstreams (filled into every request).
    pub version: Option<Version>,
    /// Upstream advertises STAGE_UNSTAGE_VOLUME (its NodeGetCapabilities).
    pub requires_staging: bool,
    /// Set once a v0.3-package upstream answered NodeGetInfo with UNIMPLEMENTED (a v0.2 plugin):
    /// use NodeGetId.
    pub node_get_id_fallback: AtomicBool,
    /// Whether the upstream serves the controller service, when the transport already knows
    /// (e.g. from configuration). `None`: `call_upstream` probes `ControllerGetCapabilities`
    /// when it must synthesize `GetPluginCapabilities` for a pre-v0.2 upstream.
    pub controller_service: Option<bool>,
    /// `handle_encoding = "inline"`: a draft plugin's VolumeHandle rides inside the volume id
    /// ([`inline`]) instead of the handle store.
    pub inline_handles: bool,
}

impl UpstreamSession {
    /// A session for an upstream of `dialect` with the negotiated `version` (v0.1*, else None).
    pub fn new(dialect: Dialect, version: Option<Version>) -> Self {
        UpstreamSession {
            dialect,
            version,
            requires_staging: false,
            node_get_id_fallback: AtomicBool::new(false),
            inline_handles: false,
            controller_service: None,
        }
    }
}

/// `INVALID_ARGUMENT` naming a field the target revision cannot honour.
pub(crate) fn unsupported_field(field: &str, dialect: Dialect) -> Status {
    Status::invalid_argument(format!(
        "{field} is not supported by a CSI {dialect} plugin (the gateway cannot honour it)"
    ))
}

/// `UNIMPLEMENTED` for an RPC the target revision does not have.
pub(crate) fn missing_rpc(rpc: &str, dialect: Dialect) -> Status {
    Status::unimplemented(format!("{rpc} does not exist in CSI {dialect}"))
}

/// A protobuf decode failure of a message that came from `who`.
pub(crate) fn decode_error(what: &str, err: prost::DecodeError) -> Status {
    Status::new(Code::Internal, format!("cannot decode {what}: {err}"))
}

/// A front request that does not decode is the client's fault.
pub(crate) fn bad_request(what: &str, err: prost::DecodeError) -> Status {
    Status::invalid_argument(format!("cannot decode {what}: {err}"))
}

/// uint64 (v0.1, draft) → int64 (v0.3+, v1): a value over `i64::MAX` is OUT_OF_RANGE, never a
/// wrap.
pub(crate) fn u64_to_i64(v: u64, field: &str) -> Result<i64, Status> {
    i64::try_from(v).map_err(|_| {
        Status::out_of_range(format!(
            "{field} = {v} does not fit the int64 of CSI v0.3+/v1 (max {})",
            i64::MAX
        ))
    })
}

/// int64 (v0.3+, v1) → uint64 (v0.1, draft): a negative value is OUT_OF_RANGE.
pub(crate) fn i64_to_u64(v: i64, field: &str) -> Result<u64, Status> {
    u64::try_from(v).map_err(|_| {
        Status::out_of_range(format!(
            "{field} = {v} is negative and does not fit the uint64 of CSI v0.1"
        ))
    })
}

/// v0.2 made `CapacityRange` int64: `(required_bytes, limit_bytes)` of a v0.1 or draft range,
/// OUT_OF_RANGE over `i64::MAX`.
pub(crate) fn range_to_i64(required: u64, limit: u64) -> Result<(i64, i64), Status> {
    Ok((
        u64_to_i64(required, "capacity_range.required_bytes")?,
        u64_to_i64(limit, "capacity_range.limit_bytes")?,
    ))
}

/// The reverse of [`range_to_i64`]: a negative bound is OUT_OF_RANGE.
pub(crate) fn range_to_u64(required: i64, limit: i64) -> Result<(u64, u64), Status> {
    Ok((
        i64_to_u64(required, "capacity_range.required_bytes")?,
        i64_to_u64(limit, "capacity_range.limit_bytes")?,
    ))
}

/// `ListVolumes.max_entries` became int32 in v0.2: a v0.1 or draft uint32 over `i32::MAX` is
/// OUT_OF_RANGE.
pub(crate) fn max_entries_to_i32(v: u32) -> Result<i32, Status> {
    i32::try_from(v)
        .map_err(|_| Status::out_of_range(format!("max_entries = {v} does not fit int32")))
}

/// The reverse of [`max_entries_to_i32`]: a negative value is invalid in v1.
pub(crate) fn max_entries_to_u32(v: i32) -> Result<u32, Status> {
    u32::try_from(v).map_err(|_| Status::invalid_argument(format!("max_entries = {v} is negative")))
}

/// v1.0 added `parameters` and v1.9 `mutable_parameters` to ValidateVolumeCapabilities: a v0.x
/// plugin cannot confirm them.
pub(crate) fn refuse_validate_parameters(
    r: &crate::hub::v1::ValidateVolumeCapabilitiesRequest,
    dialect: Dialect,
) -> Result<(), Status> {
    if !r.parameters.is_empty() {
        return Err(unsupported_field("parameters", dialect));
    }
    if !r.mutable_parameters.is_empty() {
        return Err(unsupported_field("mutable_parameters", dialect));
    }
    Ok(())
}

/// A CreateVolume a v0.1 or draft plugin cannot honour: a content source or topology (v0.3),
/// `mutable_parameters` (v1.9).
pub(crate) fn refuse_create_after_v0_1(
    r: &crate::hub::v1::CreateVolumeRequest,
    dialect: Dialect,
) -> Result<(), Status> {
    if r.volume_content_source.is_some() {
        return Err(unsupported_field("volume_content_source", dialect));
    }
    if r.accessibility_requirements.is_some() {
        return Err(unsupported_field("accessibility_requirements", dialect));
    }
    if !r.mutable_parameters.is_empty() {
        return Err(unsupported_field("mutable_parameters", dialect));
    }
    Ok(())
}

/// Conversions of `VolumeCapability`, identical in shape in every pre-v1 dialect (the spokes'
/// `overrides.rs` instantiate it; `generated.rs` calls it for every capability field).
/// v1 added `MountVolume.volume_mount_group` (v1.5) and the access modes
/// SINGLE_NODE_SINGLE_WRITER / SINGLE_NODE_MULTI_WRITER (v1.5): an older upstream cannot honour
/// them, so they are refused with INVALID_ARGUMENT naming the field.
macro_rules! volume_capability_conversions {
    ($p:ident, $dialect:expr) => {
        pub(crate) fn volume_capability_to_hub(
            c: crate::dialect::proto::$p::VolumeCapability,
        ) -> Result<crate::hub::v1::VolumeCapability, tonic::Status> {
            use crate::dialect::proto::$p::volume_capability as d;
            use crate::hub::v1::volume_capability as h;
            Ok(crate::hub::v1::VolumeCapability {
                access_type: c.access_type.map(|t| match t {
                    d::AccessType::Block(_) => h::AccessType::Block(h::BlockVolume {}),
                    d::AccessType::Mount(m) => h::AccessType::Mount(h::MountVolume {
                        fs_type: m.fs_type,
                        mount_flags: m.mount_flags,
                        volume_mount_group: String::new(),
                    }),
                }),
                access_mode: c.access_mode.map(|m| h::AccessMode { mode: m.mode }),
            })
        }

        pub(crate) fn volume_capability_from_hub(
            c: crate::hub::v1::VolumeCapability,
        ) -> Result<crate::dialect::proto::$p::VolumeCapability, tonic::Status> {
            use crate::dialect::proto::$p::volume_capability as d;
            use crate::hub::v1::volume_capability as h;
            let access_type = match c.access_type {
                None => None,
                Some(h::AccessType::Block(_)) => Some(d::AccessType::Block(d::BlockVolume {})),
                Some(h::AccessType::Mount(m)) => {
                    if !m.volume_mount_group.is_empty() {
                        return Err(crate::unsupported_field(
                            "volume_capability.mount.volume_mount_group",
                            $dialect,
                        ));
                    }
                    Some(d::AccessType::Mount(d::MountVolume {
                        fs_type: m.fs_type,
                        mount_flags: m.mount_flags,
                    }))
                }
            };
            let access_mode = match c.access_mode {
                None => None,
                // Modes 0..=5 exist since the draft; 6 and 7 arrived in v1.5.
                Some(m) if (0..=5).contains(&m.mode) => Some(d::AccessMode { mode: m.mode }),
                Some(m) => {
                    let name = h::access_mode::Mode::try_from(m.mode)
                        .map(|x| x.as_str_name())
                        .unwrap_or("unknown");
                    return Err(crate::unsupported_field(
                        &format!("volume_capability.access_mode {name}"),
                        $dialect,
                    ));
                }
            };
            Ok(crate::dialect::proto::$p::VolumeCapability {
                access_type,
                access_mode,
            })
        }
    };
}
pub(crate) use volume_capability_conversions;

/// Decodes a front client's request body (`INVALID_ARGUMENT` when it does not decode).
pub(crate) fn front_msg<M: prost::Message + Default>(body: &[u8], what: &str) -> Result<M, Status> {
    M::decode(body).map_err(|e| bad_request(what, e))
}

/// Decodes an upstream plugin's reply body (`INTERNAL` when it does not decode: a reply the
/// plugin sent that is no answer is its failure, as a reply that fails validation is).
pub(crate) fn upstream_msg<M: prost::Message + Default>(
    body: &[u8],
    what: &str,
) -> Result<M, CallError> {
    M::decode(body).map_err(|e| CallError::upstream(decode_error(what, e)))
}

/// The hub response for a front reply must be of the front RPC's hub method.
pub(crate) fn wrong_reply(rpc: &str, got: &crate::hub::Response) -> Status {
    Status::internal(format!(
        "gateway bug: {rpc} got a {} reply",
        got.method().name()
    ))
}

/// Unwraps the hub response variant `$v`, or an INTERNAL status naming the mismatch.
macro_rules! hub_reply {
    ($resp:expr, $v:ident, $rpc:expr) => {
        match $resp {
            crate::hub::Response::$v(r) => r,
            other => return Err(crate::wrong_reply($rpc, &other)),
        }
    };
}
pub(crate) use hub_reply;
