//! The front side: a call that arrived on a front dialect → [`FrontCall`], and the hub outcome
//! → that dialect's reply. One dispatch by dialect; the per-RPC work lives in the spokes.

use tonic::Status;

use super::{capabilities, errors, v0_1, v0_1_oneof, v0_3, FrontCall};
use crate::dialect::{Dialect, MethodInfo};
use crate::hub::{Method, Request, Response};

fn unknown_path(dialect: Dialect, path: &str) -> Status {
    Status::unimplemented(format!(
        "{path} is not a CSI {dialect} method served by the gateway"
    ))
}

/// Decode the protobuf `body` of a request that a client of `dialect` sent on gRPC `path`
/// (e.g. "/csi.Controller/CreateVolume") into a [`FrontCall`]. Validates the front's own rules
/// (the v0.1/draft `version` field: INVALID_ARGUMENT for v0.1; for the draft an OK reply carrying
/// `GeneralError UNSUPPORTED_REQUEST_VERSION` / `MISSING_REQUIRED_FIELD`, must-not-retry, as
/// `FrontCall::Local`). A draft request the gateway cannot translate is likewise answered
/// locally with the RPC's error from [`super::errors`]. Unknown path → UNIMPLEMENTED.
pub fn decode_front(dialect: Dialect, path: &str, body: &[u8]) -> Result<FrontCall, Status> {
    let info = dialect
        .method(path)
        .ok_or_else(|| unknown_path(dialect, path))?;
    decode_front_method(dialect, info, body)
}

/// [`decode_front`] for a method already looked up (a route's).
pub fn decode_front_method(
    dialect: Dialect,
    info: &'static MethodInfo,
    body: &[u8],
) -> Result<FrontCall, Status> {
    let path = info.path;
    let call = match dialect {
        Dialect::V1 => {
            // The streaming SnapshotMetadata RPCs are not part of the hub.
            let method = Method::from_v1_path(path).ok_or_else(|| unknown_path(dialect, path))?;
            let req =
                Request::decode(method, body).map_err(|e| super::bad_request(info.request, e))?;
            FrontCall::Hub(Box::new(req))
        }
        Dialect::V0_3 => v0_3::front_request(info.method, body)?,
        Dialect::V0_1 => v0_1::front_request(info.method, body)?,
        Dialect::V0_1Oneof => v0_1_oneof::front_request(info.method, body)?,
    };
    required_fields(dialect, call)
}

/// A request missing a field every revision requires is refused before anything else the
/// gateway or the plugin would check ([`errors::REQUIRED`]): INVALID_ARGUMENT, and for a draft
/// client `GeneralError MISSING_REQUIRED_FIELD`, must not retry.
fn required_fields(dialect: Dialect, call: FrontCall) -> Result<FrontCall, Status> {
    let FrontCall::Hub(req) = &call else {
        return Ok(call);
    };
    let Some(field) = errors::missing_required(req) else {
        return Ok(call);
    };
    let status = errors::missing_field(req, field);
    if dialect != Dialect::V0_1Oneof {
        return Err(status);
    }
    use crate::dialect::proto::v0_1_oneof::error::general_error::GeneralErrorCode;
    let error = errors::general_error(
        GeneralErrorCode::MissingRequiredField,
        true,
        status.message().to_string(),
    );
    Ok(FrontCall::Local(v0_1_oneof::error_reply(&error)))
}

/// Encode the outcome of the hub call as `dialect`'s reply to `path`. For v0.1-oneof an
/// `Err(status)` becomes `Ok(bytes)` of the reply with the `error` branch set (per-RPC table in
/// [`super::errors`]); for the other dialects `Err` passes through unchanged — v0.1.0, v0.3 and
/// v1 use the same codes for the conditions they share.
pub fn encode_front(
    dialect: Dialect,
    path: &str,
    outcome: Result<Response, Status>,
) -> Result<Vec<u8>, Status> {
    let info = dialect
        .method(path)
        .ok_or_else(|| unknown_path(dialect, path))?;
    encode_front_method(dialect, info, outcome)
}

/// [`encode_front`] for a method already looked up (a route's).
pub fn encode_front_method(
    dialect: Dialect,
    info: &'static MethodInfo,
    outcome: Result<Response, Status>,
) -> Result<Vec<u8>, Status> {
    let path = info.path;
    match dialect {
        Dialect::V0_1Oneof => v0_1_oneof::front_reply(info.method, outcome),
        Dialect::V1 => {
            let resp = outcome?;
            if resp.method().path() != path {
                return Err(super::wrong_reply(info.method, &resp));
            }
            Ok(resp.encode())
        }
        Dialect::V0_3 => v0_3::front_reply(info.method, outcome?),
        Dialect::V0_1 => v0_1::front_reply(info.method, outcome?),
    }
}

/// RPCs of the `csi.v0` package that v0.2 does not have: a client told apart as v0.2
/// (`listen.v0_dialect = "v0.2"`) gets UNIMPLEMENTED, as from a v0.2 plugin.
pub static V0_2_ABSENT: &[(&str, &str)] = &[
    ("CreateSnapshot", "snapshots arrived in v0.3"),
    ("DeleteSnapshot", "snapshots arrived in v0.3"),
    ("ListSnapshots", "snapshots arrived in v0.3"),
    ("NodeGetInfo", "v0.3; a v0.2 client calls NodeGetId"),
];

/// RPCs whose answer a v0.2 client gets filtered to what v0.2 has ([`capabilities`] `v0_2`
/// column): translated even when the plugin speaks `csi.v0` too, never relayed.
pub static V0_2_FILTERED: &[&str] = &[
    "GetPluginCapabilities",
    "ControllerGetCapabilities",
    "NodeGetCapabilities",
];

/// Whether a v0.2 client's call of `method` must be answered by the gateway rather than
/// relayed to a `csi.v0` plugin.
pub fn v0_2_translates(method: &str) -> bool {
    V0_2_FILTERED.contains(&method) || V0_2_ABSENT.iter().any(|(m, _)| *m == method)
}

/// UNIMPLEMENTED for a v0.2 client's call of an RPC v0.2 does not have.
pub fn v0_2_refusal(method: &str) -> Option<Status> {
    V0_2_ABSENT
        .iter()
        .find(|(m, _)| *m == method)
        .map(|(m, why)| {
            Status::unimplemented(format!(
                "{m} does not exist in CSI v0.2 ({why}); this listener serves csi.v0 as v0.2 \
                 (listen.v0_dialect)"
            ))
        })
}

/// [`encode_front`] for a v0.2 client on `path` (a `csi.v0` path): capabilities v0.2 lacks are
/// dropped, and an empty node capability list is `[UNKNOWN]` as for any `csi.v0` client
/// ([`capabilities::NODE_UNKNOWN_WHEN_EMPTY`]).
pub fn encode_front_v0_2(path: &str, outcome: Result<Response, Status>) -> Result<Vec<u8>, Status> {
    use crate::hub::v1;
    use capabilities::{v0_2_has, CONTROLLER, NODE, PLUGIN_SERVICE};
    let outcome = outcome.map(|resp| match resp {
        Response::GetPluginCapabilities(mut r) => {
            use v1::plugin_capability::Type as T;
            r.capabilities.retain(|c| match &c.r#type {
                Some(T::Service(s)) => v0_2_has(PLUGIN_SERVICE, s.r#type),
                _ => false,
            });
            Response::GetPluginCapabilities(r)
        }
        Response::ControllerGetCapabilities(mut r) => {
            use v1::controller_service_capability::Type as T;
            r.capabilities.retain(|c| match &c.r#type {
                Some(T::Rpc(x)) => v0_2_has(CONTROLLER, x.r#type),
                None => false,
            });
            Response::ControllerGetCapabilities(r)
        }
        Response::NodeGetCapabilities(mut r) => {
            use v1::node_service_capability::Type as T;
            r.capabilities.retain(|c| match &c.r#type {
                Some(T::Rpc(x)) => v0_2_has(NODE, x.r#type),
                None => false,
            });
            Response::NodeGetCapabilities(r)
        }
        other => other,
    });
    // What is left is a v0.3 answer, an empty node list `[UNKNOWN]` for both revisions.
    encode_front(Dialect::V0_3, path, outcome)
}
