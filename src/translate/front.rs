//! The front side: a call that arrived on a front dialect → [`FrontCall`], and the hub outcome
//! → that dialect's reply. One dispatch by dialect; the per-RPC work lives in the spokes.

use tonic::Status;

use super::{v0_1, v0_1_oneof, v0_3, FrontCall};
use crate::dialect::Dialect;
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
    match dialect {
        Dialect::V1 => {
            // The streaming SnapshotMetadata RPCs are not part of the hub.
            let method = Method::from_v1_path(path).ok_or_else(|| unknown_path(dialect, path))?;
            let req =
                Request::decode(method, body).map_err(|e| super::bad_request(info.request, e))?;
            Ok(FrontCall::Hub(req))
        }
        Dialect::V0_3 => v0_3::front_request(info.method, body),
        Dialect::V0_1 => v0_1::front_request(info.method, body),
        Dialect::V0_1Oneof => v0_1_oneof::front_request(info.method, body),
    }
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
