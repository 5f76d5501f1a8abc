//! The upstream side: one hub call performed against a plugin of any dialect — translate the
//! request, make one or more raw calls, translate the reply and errors back.
//!
//! Multi-call cases, in the order the revisions introduced them:
//! - `Probe` (v0.2) ← `ControllerProbe` + `NodeProbe` (v0.1) ← `ProbeNode` (draft).
//! - `GetPluginCapabilities` (v0.2) is synthesized for v0.1/draft plugins: CONTROLLER_SERVICE
//!   only if the plugin serves the controller service (it answers `ControllerGetCapabilities`;
//!   UNIMPLEMENTED means it does not). Nothing else is ever synthesized.
//! - `NodeGetInfo` (v0.3) → `NodeGetId` (v0.2) when a `csi.v0` plugin answers UNIMPLEMENTED; the
//!   session remembers it.
//! - draft plugins need their `VolumeHandle.metadata` back on every call naming a volume: read
//!   from the [`HandleStore`], written only from the plugin's own `CreateVolume`/`ListVolumes`
//!   reply (before that reply leaves the gateway), removed after a successful delete. Nothing a
//!   client sends is stored.
//! - a pre-staging front (v0.1, draft) cannot stage: while the plugin requires staging, the
//!   gateway emulates it around this function (the gateway's `call::staging`); a `NodePublishVolume`
//!   without a staging path that reaches this function is FAILED_PRECONDITION.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use tonic::{Code, Status};

use super::capabilities;
use super::{v0_1, v0_1_oneof, v0_3, CallError, HandleStore, RawUpstream, UpstreamSession};
use crate::dialect::Dialect;
use crate::hub::{v1, Method, Request as Req, Response as Resp};

/// The message of the FAILED_PRECONDITION when metadata is needed and there is no store.
pub const STORE_REQUIRED: &str = "the durable handle store is required";

/// Perform one hub call against an upstream of `session.dialect`.
pub async fn call_upstream(
    session: &UpstreamSession,
    upstream: &dyn RawUpstream,
    store: Option<&dyn HandleStore>,
    request: Req,
) -> Result<Resp, CallError> {
    if let Some(refusal) = unstaged_publish(session, &request) {
        // A client whose revision has staging skipped it: its request is at fault.
        return Err(CallError::client(refusal));
    }
    match session.dialect {
        Dialect::V1 => {
            let method = request.method();
            let bytes = upstream.unary(method.path(), request.encode()).await?;
            v1_reply(method, &bytes)
        }
        Dialect::V0_3 => call_v0_3(session, upstream, request).await,
        Dialect::V0_1 => call_v0_1(session, upstream, request).await,
        Dialect::V0_1Oneof => call_draft(session, upstream, store, request).await,
    }
}

/// The gateway's refusal of a NodePublishVolume without staging when the plugin requires
/// staging (the emulation, where it applies, has already taken the call: the gateway's `call::staging`).
fn unstaged_publish(session: &UpstreamSession, request: &Req) -> Option<Status> {
    match request {
        Req::NodePublishVolume(r)
            if session.requires_staging && r.staging_target_path.is_empty() =>
        {
            Some(Status::failed_precondition(
                "the plugin requires NodeStageVolume (STAGE_UNSTAGE_VOLUME) but this \
                 NodePublishVolume has no staging_target_path (the gateway emulates staging \
                 only for clients whose CSI revision predates it, v0.1 and the draft)",
            ))
        }
        _ => None,
    }
}

async fn call_v0_3(
    session: &UpstreamSession,
    upstream: &dyn RawUpstream,
    request: Req,
) -> Result<Resp, CallError> {
    if let Req::NodeGetInfo(_) = request {
        if !session.node_get_id_fallback.load(Ordering::Relaxed) {
            let (path, body) = v0_3::upstream_request(request.clone())?;
            match upstream.unary(path, body).await {
                Ok(bytes) => return v0_3::upstream_reply(&request, &bytes),
                // A v0.2 plugin: NodeGetInfo arrived in v0.3.
                Err(s) if s.code() == Code::Unimplemented => {
                    session.node_get_id_fallback.store(true, Ordering::Relaxed)
                }
                Err(s) => return Err(s),
            }
        }
        let bytes = upstream.unary(v0_3::NODE_GET_ID, Vec::new()).await?;
        return v0_3::node_get_id_reply(&bytes);
    }
    let (path, body) = v0_3::upstream_request(request.clone())?;
    let bytes = upstream.unary(path, body).await?;
    v0_3::upstream_reply(&request, &bytes)
}

/// A v1 plugin's reply to `method`; one that does not decode is the plugin's failure.
fn v1_reply(method: Method, bytes: &[u8]) -> Result<Resp, CallError> {
    Resp::decode(method, bytes)
        .map_err(|e| CallError::upstream(super::decode_error(method.name(), e)))
}

/// The reply, or `None` when the plugin does not implement the call (UNIMPLEMENTED).
async fn answers(
    upstream: &dyn RawUpstream,
    path: &'static str,
    body: Vec<u8>,
) -> Result<Option<Vec<u8>>, CallError> {
    match upstream.unary(path, body).await {
        Ok(bytes) => Ok(Some(bytes)),
        Err(s) if s.code() == Code::Unimplemented => Ok(None),
        Err(s) => Err(s),
    }
}

/// The synthesized v0.2+ `GetPluginCapabilities` answer.
fn plugin_capabilities(controller: bool) -> Resp {
    let capabilities = if controller {
        // PLUGIN_SERVICE row CONTROLLER_SERVICE: the only service a pre-v0.2 plugin can offer.
        vec![capabilities::v1_plugin_cap(
            v1::plugin_capability::service::Type::ControllerService as i32,
        )]
    } else {
        Vec::new()
    };
    Resp::GetPluginCapabilities(v1::GetPluginCapabilitiesResponse { capabilities })
}

async fn call_v0_1(
    session: &UpstreamSession,
    upstream: &dyn RawUpstream,
    request: Req,
) -> Result<Resp, CallError> {
    let ver = session.version;
    match request {
        // v0.1: ControllerProbe + NodeProbe. Either service may be absent on this machine
        // (UNIMPLEMENTED); a plugin that answered is ready (v1 `ready` absent).
        Req::Probe(_) => {
            let (controller, node) = v0_1::probe_requests(ver)?;
            if session.controller_service != Some(false) {
                answers(upstream, v0_1::CONTROLLER_PROBE, controller).await?;
            }
            answers(upstream, v0_1::NODE_PROBE, node).await?;
            Ok(Resp::Probe(v1::ProbeResponse { ready: None }))
        }
        Req::GetPluginCapabilities(_) => {
            let controller = match session.controller_service {
                Some(c) => c,
                None => {
                    let req = Req::ControllerGetCapabilities(Default::default());
                    let (path, body) = v0_1::upstream_request(req, ver)?;
                    answers(upstream, path, body).await?.is_some()
                }
            };
            Ok(plugin_capabilities(controller))
        }
        request => {
            let (path, body) = v0_1::upstream_request(request.clone(), ver)?;
            let bytes = upstream.unary(path, body).await?;
            v0_1::upstream_reply(&request, &bytes)
        }
    }
}

/// The volume a call names, and the context its client sent (`None`: an id-only call).
fn named_volume(req: &Req) -> Option<(&str, Option<&HashMap<String, String>>)> {
    match req {
        Req::DeleteVolume(r) => Some((&r.volume_id, None)),
        Req::ControllerUnpublishVolume(r) => Some((&r.volume_id, None)),
        Req::NodeUnpublishVolume(r) => Some((&r.volume_id, None)),
        Req::ControllerPublishVolume(r) => Some((&r.volume_id, Some(&r.volume_context))),
        Req::NodePublishVolume(r) => Some((&r.volume_id, Some(&r.volume_context))),
        Req::ValidateVolumeCapabilities(r) => Some((&r.volume_id, Some(&r.volume_context))),
        _ => None,
    }
}

/// The `VolumeHandle.metadata` to send for a call naming volume `id`: the plugin's own, as
/// its CreateVolume or ListVolumes reply gave it, whatever the client sent — orchestrators add
/// keys of their own to `volume_context` (pod info, service-account tokens), and the plugin
/// checks the metadata it issued. A volume the store does not know (created before the
/// gateway, or already deleted) goes with the client's context, or empty on id-only calls: the
/// plugin answers for it. No store: refused (never silently lossy).
async fn metadata_for(
    store: Option<&dyn HandleStore>,
    req: &Req,
    id: &str,
    context: Option<&HashMap<String, String>>,
) -> Result<HashMap<String, String>, Status> {
    let Some(store) = store else {
        return match context {
            Some(c) => Ok(c.clone()),
            None => Err(Status::failed_precondition(format!(
                "{STORE_REQUIRED} to send {} of volume {id:?} to a CSI v0.1-oneof plugin \
                 (its VolumeHandle metadata is not in the request)",
                req.method().name()
            ))),
        };
    };
    Ok(match store.get(id).await? {
        Some(stored) => stored,
        None => context.cloned().unwrap_or_default(),
    })
}

/// `handle_encoding = "inline"`: turns an inline volume id in `request` back into the plugin's
/// id, fills an empty volume context from it, and returns the handle's metadata.
fn unwrap_inline(request: &mut Req) -> Result<Option<HashMap<String, String>>, Status> {
    let (id, context) = match request {
        Req::DeleteVolume(r) => (&mut r.volume_id, None),
        Req::ControllerUnpublishVolume(r) => (&mut r.volume_id, None),
        Req::NodeUnpublishVolume(r) => (&mut r.volume_id, None),
        Req::ControllerPublishVolume(r) => (&mut r.volume_id, Some(&mut r.volume_context)),
        Req::NodePublishVolume(r) => (&mut r.volume_id, Some(&mut r.volume_context)),
        Req::ValidateVolumeCapabilities(r) => (&mut r.volume_id, Some(&mut r.volume_context)),
        _ => return Ok(None),
    };
    let Some((plugin_id, metadata)) = super::inline::decode(id)? else {
        return Ok(None);
    };
    *id = plugin_id;
    if let Some(context) = context.filter(|c| c.is_empty()) {
        *context = metadata.clone();
    }
    Ok(Some(metadata))
}

/// `handle_encoding = "inline"`: the volume ids a reply reveals carry their whole handle.
fn wrap_inline(resp: &mut Resp) -> Result<(), Status> {
    let volumes: Vec<&mut v1::Volume> = match resp {
        Resp::CreateVolume(r) => r.volume.iter_mut().collect(),
        Resp::ListVolumes(r) => r
            .entries
            .iter_mut()
            .filter_map(|e| e.volume.as_mut())
            .collect(),
        _ => Vec::new(),
    };
    for v in volumes {
        v.volume_id = super::inline::encode(&v.volume_id, &v.volume_context)?;
    }
    Ok(())
}

async fn call_draft(
    session: &UpstreamSession,
    upstream: &dyn RawUpstream,
    store: Option<&dyn HandleStore>,
    request: Req,
) -> Result<Resp, CallError> {
    let ver = session.version;
    if let Req::GetPluginCapabilities(_) = request {
        let controller = match session.controller_service {
            Some(c) => c,
            None => {
                let req = Req::ControllerGetCapabilities(Default::default());
                let (path, body) = v0_1_oneof::upstream_request(req.clone(), ver, HashMap::new())?;
                match answers(upstream, path, body).await? {
                    None => false,
                    Some(bytes) => match v0_1_oneof::upstream_reply(&req, &bytes) {
                        Ok(_) => true,
                        Err(s) if s.code() == Code::Unimplemented => false,
                        Err(s) => return Err(s),
                    },
                }
            }
        };
        return Ok(plugin_capabilities(controller));
    }
    let mut request = request;
    let inline = if session.inline_handles {
        unwrap_inline(&mut request)?
    } else {
        None
    };
    let metadata = match (inline, named_volume(&request)) {
        (Some(meta), _) => meta,
        (None, Some((id, context))) => metadata_for(store, &request, id, context).await?,
        (None, None) => HashMap::new(),
    };
    let sent: Vec<String> = metadata.values().cloned().collect();
    // Nothing a client sent is ever stored: the store holds only what the plugin answered.
    let (path, body) = v0_1_oneof::upstream_request(request.clone(), ver, metadata)?;
    // The plugin's errors may echo the metadata it was sent: not passed on (`redact`).
    let hide = |e: CallError| {
        let message = crate::redact::Redactor::scrub_sensitive(e.status.message(), &sent);
        let status = Status::new(e.code(), message);
        e.with_status(status)
    };
    let bytes = upstream.unary(path, body).await.map_err(hide)?;
    let mut resp = v0_1_oneof::upstream_reply(&request, &bytes).map_err(hide)?;
    if session.inline_handles {
        wrap_inline(&mut resp)?;
        return Ok(resp);
    }
    if let Some(store) = store {
        match (&request.method(), &resp) {
            // Written before the reply that reveals the metadata leaves the gateway.
            (Method::CreateVolume, Resp::CreateVolume(r)) => {
                if let Some(v) = &r.volume {
                    store.put(&v.volume_id, &v.volume_context).await?;
                }
            }
            // Written only where it differs, so listing is not a write per volume. A damaged
            // value differs too: the plugin's answer replaces it, and the volume is served again.
            (Method::ListVolumes, Resp::ListVolumes(r)) => {
                for v in r.entries.iter().filter_map(|e| e.volume.as_ref()) {
                    let stored = match store.get(&v.volume_id).await {
                        Err(e) if e.code() == Code::DataLoss => None,
                        other => other?,
                    };
                    if stored.as_ref() != Some(&v.volume_context) {
                        store.put(&v.volume_id, &v.volume_context).await?;
                    }
                }
            }
            (Method::DeleteVolume, _) => {
                if let Req::DeleteVolume(r) = &request {
                    store.remove(&r.volume_id).await?;
                }
            }
            _ => {}
        }
    }
    Ok(resp)
}

/// The path of the one raw call that `method` of a `front` client is to a plugin of
/// `upstream`, when that is all it is: one request translated on its own, one call, one reply
/// translated on its own — no handle store, no fallback call, no answer the gateway makes up,
/// no staging or target paths around it (the gateway's `call::staging`, `call::paths`). Known from
/// the method alone, so that a call's request head can go to the plugin before its message has
/// arrived (the splice's translated streams); [`single_call`] then confirms it for the request
/// itself.
pub fn single_call_path(front: Dialect, upstream: Dialect, method: Method) -> Option<&'static str> {
    if acted_around(front, upstream, method) {
        return None;
    }
    let path = method.path();
    let wanted = match upstream {
        Dialect::V1 => return Some(path),
        // csi.v0 names these methods as v1 does, under its own package.
        Dialect::V0_3 => path.strip_prefix("/csi.v1.")?,
        Dialect::V0_1 | Dialect::V0_1Oneof => return None,
    };
    upstream
        .methods()
        .iter()
        .find(|m| !m.server_streaming && m.path.strip_prefix("/csi.v0.") == Some(wanted))
        .map(|m| m.path)
}

/// Whether the gateway does more than one call's translation for `method` between a `front`
/// client and an `upstream` plugin on one host (across the bridge, or on the appliance
/// listener, the routes that name node paths are read by the gateway: `Router::bridging`):
/// node publish and unpublish where it owns the target path
/// (`call::paths::owns_targets`), emulates staging for a client that predates it
/// (the gateway's `call::staging`) or recodes a status by the target's state ([`errors::CODES`]);
/// NodeGetInfo to a `csi.v0` plugin, which may answer as v0.2's, asked NodeGetId instead (a
/// v0.3 client's NodeGetInfo to a v1 plugin is relayed anyway, `identical`, and its
/// NodeGetId is one NodeGetInfo call; the draft's and v0.1's node id calls stay the
/// gateway's).
fn acted_around(front: Dialect, upstream: Dialect, method: Method) -> bool {
    match method {
        Method::NodePublishVolume | Method::NodeUnpublishVolume => {
            crate::gateway_owns_targets(front, upstream)
                || matches!(front, Dialect::V0_1 | Dialect::V0_1Oneof)
                || super::errors::CODES
                    .iter()
                    .any(|r| r.method == method && r.upstream.has(upstream) && r.front.has(front))
        }
        Method::NodeGetInfo => {
            upstream == Dialect::V0_3 || matches!(front, Dialect::V0_1 | Dialect::V0_1Oneof)
        }
        _ => false,
    }
}

/// The one raw call (path and body) `request` of a `front` client is to the plugin of
/// `session`, where [`single_call_path`] says it is one; `None` where it is not (then
/// [`call_upstream`] makes it), and for a request that does not translate (its error is
/// [`call_upstream`]'s to give).
pub fn single_call(
    front: Dialect,
    session: &UpstreamSession,
    request: &Req,
) -> Option<(&'static str, Vec<u8>)> {
    single_call_path(front, session.dialect, request.method())?;
    if unstaged_publish(session, request).is_some() {
        return None;
    }
    match session.dialect {
        Dialect::V1 => Some((request.method().path(), request.encode())),
        Dialect::V0_3 => v0_3::upstream_request(request.clone()).ok(),
        Dialect::V0_1 | Dialect::V0_1Oneof => None,
    }
}

/// The hub reply to a [`single_call`]: the plugin's reply, or its error, translated as
/// [`call_upstream`] translates it (errors through [`super::errors::recode`]
/// for the `front` revision).
pub fn single_reply(
    session: &UpstreamSession,
    front: Dialect,
    request: &Req,
    reply: Result<&[u8], CallError>,
) -> Result<Resp, CallError> {
    let method = request.method();
    let reply = reply.and_then(|bytes| match session.dialect {
        Dialect::V1 => v1_reply(method, bytes),
        _ => v0_3::upstream_reply(request, bytes),
    });
    reply.or_else(|e| super::errors::recode_call(method, session.dialect, front, e))
}

#[cfg(test)]
mod tests;
