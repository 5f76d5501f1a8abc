//! Draft field checks (called by the round trips in `translate::tests`) and draft-only cases.

use std::collections::HashMap;

use prost::Message;
use tonic::{Code, Status};

use super::{error_reply, front_reply, front_request, upstream_reply, upstream_request};
use crate::dialect::proto::v0_1_oneof as d;
use crate::errors::{self, DraftRpc};
use crate::fixtures::{self, m};
use crate::hub::{v1, Method, Request as Req, Response as Resp};
use crate::ids;
use crate::version::Version;
use crate::FrontCall;

const V: Option<d::Version> = Some(d::Version {
    major: 0,
    minor: 1,
    patch: 0,
});

fn h(id: &str, md: HashMap<String, String>) -> Option<d::VolumeHandle> {
    Some(d::VolumeHandle {
        id: id.into(),
        metadata: md,
    })
}
fn c(tag: &str) -> Option<d::Credentials> {
    Some(d::Credentials { data: m(tag) })
}
fn node(s: &str) -> Option<d::NodeId> {
    Some(d::NodeId {
        values: HashMap::from([("node_id".to_string(), s.to_string())]),
    })
}
fn mount(c: &Option<d::VolumeCapability>) -> (String, Vec<String>, i32) {
    let c = c.clone().unwrap();
    let Some(d::volume_capability::AccessType::Mount(mnt)) = c.access_type else {
        panic!("mount expected")
    };
    (mnt.fs_type, mnt.mount_flags, c.access_mode.unwrap().mode)
}

/// Every mapped field of the draft request the gateway sent for the fixture `req` (id-only
/// calls carry the "ctx" metadata the test passed as if read from the handle store).
pub(crate) fn check_request(req: &Req, path: &str, bytes: &[u8]) {
    let method = req.method();
    let name = match method {
        Method::NodeGetInfo => "GetNodeID",
        Method::Probe => "ProbeNode",
        m => m.name(),
    };
    let service = if method == Method::Probe {
        "Node"
    } else {
        method.service()
    };
    assert_eq!(path, format!("/csi.{service}/{name}"));
    let mnt = (
        "ext4".to_string(),
        vec!["noatime".to_string(), "ro".to_string()],
        1,
    );
    match method {
        Method::CreateVolume => {
            let x = d::CreateVolumeRequest::decode(bytes).unwrap();
            assert_eq!((x.version, x.name.as_str()), (V, "pvc-1"));
            assert_eq!(
                x.capacity_range,
                Some(d::CapacityRange {
                    required_bytes: 1 << 30,
                    limit_bytes: 2 << 30
                })
            );
            assert_eq!(x.volume_capabilities.len(), 2);
            assert_eq!(
                (x.parameters, x.user_credentials),
                (m("param"), c("secret"))
            );
        }
        Method::DeleteVolume => {
            let x = d::DeleteVolumeRequest::decode(bytes).unwrap();
            assert_eq!(
                (x.version, x.volume_handle, x.user_credentials),
                (V, h("vol-1", m("ctx")), c("secret"))
            );
        }
        Method::ControllerPublishVolume => {
            let x = d::ControllerPublishVolumeRequest::decode(bytes).unwrap();
            assert_eq!(
                (x.version, x.volume_handle, x.node_id, x.readonly),
                (V, h("vol-1", m("ctx")), node("node-1"), true)
            );
            assert_eq!(x.user_credentials, c("secret"));
            assert_eq!(mount(&x.volume_capability), mnt);
        }
        Method::ControllerUnpublishVolume => {
            let x = d::ControllerUnpublishVolumeRequest::decode(bytes).unwrap();
            assert_eq!(
                (x.version, x.volume_handle, x.node_id),
                (V, h("vol-1", m("ctx")), node("node-1"))
            );
            assert_eq!(x.user_credentials, c("secret"));
        }
        Method::ValidateVolumeCapabilities => {
            let x = d::ValidateVolumeCapabilitiesRequest::decode(bytes).unwrap();
            assert_eq!(x.version, V);
            assert_eq!(
                x.volume_info,
                Some(d::VolumeInfo {
                    capacity_bytes: 0,
                    handle: h("vol-1", m("ctx"))
                })
            );
            assert_eq!(x.volume_capabilities.len(), 2);
        }
        Method::ListVolumes => {
            let x = d::ListVolumesRequest::decode(bytes).unwrap();
            assert_eq!(
                (x.version, x.max_entries, x.starting_token.as_str()),
                (V, 7, "tok-1")
            );
        }
        Method::GetCapacity => {
            let x = d::GetCapacityRequest::decode(bytes).unwrap();
            assert_eq!(
                (x.version, x.parameters, x.volume_capabilities.len()),
                (V, m("param"), 2)
            );
        }
        Method::NodePublishVolume => {
            let x = d::NodePublishVolumeRequest::decode(bytes).unwrap();
            assert_eq!(
                (
                    x.version,
                    x.volume_handle,
                    x.target_path.as_str(),
                    x.readonly
                ),
                (V, h("vol-1", m("ctx")), "/target", true)
            );
            assert_eq!(
                x.publish_volume_info,
                Some(d::PublishVolumeInfo { values: m("pub") })
            );
            assert_eq!(x.user_credentials, c("secret"));
            assert_eq!(mount(&x.volume_capability), mnt);
        }
        Method::NodeUnpublishVolume => {
            let x = d::NodeUnpublishVolumeRequest::decode(bytes).unwrap();
            assert_eq!(
                (x.version, x.volume_handle, x.target_path.as_str()),
                (V, h("vol-1", m("ctx")), "/target")
            );
        }
        _ => assert_eq!(
            d::GetPluginInfoRequest::decode(bytes).unwrap().version,
            V,
            "{method}"
        ),
    }
}

/// Every mapped field of the draft reply the gateway sent for the fixture `resp`.
pub(crate) fn check_reply(resp: &Resp, bytes: &[u8]) {
    macro_rules! result {
        ($m:ident, $t:ident) => {{
            match d::$t::decode(bytes).unwrap().reply {
                Some(d::$m::Reply::Result(r)) => r,
                other => panic!("result expected, got {other:?}"),
            }
        }};
    }
    match resp.method() {
        Method::CreateVolume => {
            let v = result!(create_volume_response, CreateVolumeResponse)
                .volume_info
                .unwrap();
            assert_eq!(
                (v.capacity_bytes, v.handle),
                (10 << 30, h("vol-1", m("ctx")))
            );
        }
        Method::DeleteVolume => {
            result!(delete_volume_response, DeleteVolumeResponse);
        }
        Method::ControllerPublishVolume => {
            let r = result!(
                controller_publish_volume_response,
                ControllerPublishVolumeResponse
            );
            assert_eq!(
                r.publish_volume_info,
                Some(d::PublishVolumeInfo { values: m("pub") })
            );
        }
        Method::ControllerUnpublishVolume => {
            result!(
                controller_unpublish_volume_response,
                ControllerUnpublishVolumeResponse
            );
        }
        Method::ValidateVolumeCapabilities => {
            let r = result!(
                validate_volume_capabilities_response,
                ValidateVolumeCapabilitiesResponse
            );
            assert_eq!((r.supported, r.message.as_str()), (true, "all good"));
        }
        Method::ListVolumes => {
            let r = result!(list_volumes_response, ListVolumesResponse);
            let hs: Vec<_> = r
                .entries
                .iter()
                .map(|e| e.volume_info.clone().unwrap().handle)
                .collect();
            assert_eq!(hs, vec![h("vol-1", m("ctx")), h("vol-2", m("ctx"))]);
            assert_eq!(r.next_token, "tok-next");
        }
        Method::GetCapacity => assert_eq!(
            result!(get_capacity_response, GetCapacityResponse).available_capacity,
            100 << 30
        ),
        Method::ControllerGetCapabilities => {
            let r = result!(
                controller_get_capabilities_response,
                ControllerGetCapabilitiesResponse
            );
            let types: Vec<i32> = r
                .capabilities
                .iter()
                .map(|c| match c.r#type.unwrap() {
                    d::controller_service_capability::Type::Rpc(r) => r.r#type,
                })
                .collect();
            assert_eq!(types, vec![1, 2, 3, 4]);
        }
        Method::NodeGetCapabilities => {
            assert!(
                result!(node_get_capabilities_response, NodeGetCapabilitiesResponse)
                    .capabilities
                    .is_empty()
            );
        }
        Method::GetPluginInfo => {
            let r = result!(get_plugin_info_response, GetPluginInfoResponse);
            assert_eq!(
                (r.name.as_str(), r.vendor_version.as_str(), r.manifest),
                ("example.csi.io", "1.2.3", m("manifest"))
            );
        }
        Method::NodeGetInfo => assert_eq!(
            result!(get_node_id_response, GetNodeIdResponse).node_id,
            node("node-1")
        ),
        Method::Probe => {
            result!(probe_node_response, ProbeNodeResponse);
        }
        Method::NodePublishVolume => {
            result!(node_publish_volume_response, NodePublishVolumeResponse);
        }
        Method::NodeUnpublishVolume => {
            result!(node_unpublish_volume_response, NodeUnpublishVolumeResponse);
        }
        other => panic!("{other} is not a draft RPC"),
    }
}

fn general(bytes: &[u8]) -> d::error::GeneralError {
    match d::DeleteVolumeResponse::decode(bytes).unwrap().reply {
        Some(d::delete_volume_response::Reply::Error(d::Error {
            value: Some(d::error::Value::GeneralError(g)),
        })) => g,
        other => panic!("GeneralError expected, got {other:?}"),
    }
}

#[test]
fn unserved_or_missing_version_is_answered_locally_with_a_general_error() {
    use d::error::general_error::GeneralErrorCode as G;
    for (version, code) in [
        (None, G::MissingRequiredField),
        (
            Some(d::Version {
                major: 9,
                minor: 0,
                patch: 0,
            }),
            G::UnsupportedRequestVersion,
        ),
    ] {
        let body = d::DeleteVolumeRequest {
            version,
            ..Default::default()
        }
        .encode_to_vec();
        let FrontCall::Local(bytes) = front_request("DeleteVolume", &body).unwrap() else {
            panic!("local answer expected")
        };
        let g = general(&bytes);
        assert_eq!(g.error_code, code as i32);
        assert!(g.caller_must_not_retry);
        assert!(
            g.error_description.contains("version"),
            "{}",
            g.error_description
        );
    }
    let FrontCall::Local(bytes) = front_request("GetSupportedVersions", &[]).unwrap() else {
        panic!()
    };
    let Some(d::get_supported_versions_response::Reply::Result(r)) =
        d::GetSupportedVersionsResponse::decode(bytes.as_slice())
            .unwrap()
            .reply
    else {
        panic!()
    };
    assert_eq!(r.supported_versions, vec![V.unwrap()]);
}

#[test]
fn hub_errors_become_the_error_branch() {
    let bytes = front_reply("DeleteVolume", Err(Status::not_found("no such volume"))).unwrap();
    let Some(d::delete_volume_response::Reply::Error(e)) =
        d::DeleteVolumeResponse::decode(bytes.as_slice())
            .unwrap()
            .reply
    else {
        panic!()
    };
    assert_eq!(
        e.value,
        Some(errors::specific_error(
            DraftRpc::DeleteVolume,
            4,
            "no such volume".into()
        ))
    );
    // Same wire shape for every RPC's reply (field 2 = Error).
    let bytes = front_reply("GetNodeID", Err(Status::failed_precondition("bad config"))).unwrap();
    let Some(d::get_node_id_response::Reply::Error(e)) =
        d::GetNodeIdResponse::decode(bytes.as_slice())
            .unwrap()
            .reply
    else {
        panic!()
    };
    assert_eq!(
        e.value,
        Some(errors::specific_error(
            DraftRpc::GetNodeId,
            1,
            "bad config".into()
        ))
    );
    let bytes = front_reply(
        "ListVolumes",
        Err(Status::unavailable("gateway: upstream unreachable")),
    )
    .unwrap();
    let Some(d::list_volumes_response::Reply::Error(e)) =
        d::ListVolumesResponse::decode(bytes.as_slice())
            .unwrap()
            .reply
    else {
        panic!()
    };
    let Some(d::error::Value::GeneralError(g)) = e.value else {
        panic!()
    };
    assert!(!g.caller_must_not_retry);
    // Not ready: retryable general error; a capacity the draft cannot hold: the RPC's error.
    let g = general(
        &front_reply(
            "ProbeNode",
            Ok(Resp::Probe(v1::ProbeResponse { ready: Some(false) })),
        )
        .unwrap(),
    );
    assert!(!g.caller_must_not_retry);
    let bytes = front_reply(
        "GetCapacity",
        Ok(Resp::GetCapacity(v1::GetCapacityResponse {
            available_capacity: -1,
            ..Default::default()
        })),
    )
    .unwrap();
    assert!(matches!(
        d::GetCapacityResponse::decode(bytes.as_slice())
            .unwrap()
            .reply,
        Some(d::get_capacity_response::Reply::Error(_))
    ));
}

fn err_reply(v: d::error::Value) -> Vec<u8> {
    error_reply(&d::Error { value: Some(v) })
}

#[test]
fn idempotency_overrides_from_a_draft_plugin() {
    let del = fixtures::request(Method::DeleteVolume);
    let gone = err_reply(errors::specific_error(
        DraftRpc::DeleteVolume,
        4,
        "gone".into(),
    ));
    assert_eq!(
        upstream_reply(&del, &gone).unwrap(),
        Resp::DeleteVolume(Default::default())
    );
    let unpub = fixtures::request(Method::ControllerUnpublishVolume);
    let not_attached = err_reply(errors::specific_error(
        DraftRpc::ControllerUnpublishVolume,
        7,
        "n".into(),
    ));
    assert_eq!(
        upstream_reply(&unpub, &not_attached).unwrap(),
        Resp::ControllerUnpublishVolume(Default::default())
    );
    // But a volume that does not exist is still NOT_FOUND for ControllerUnpublishVolume.
    let missing = err_reply(errors::specific_error(
        DraftRpc::ControllerUnpublishVolume,
        4,
        "missing".into(),
    ));
    let err = upstream_reply(&unpub, &missing).unwrap_err();
    assert_eq!((err.code(), err.message()), (Code::NotFound, "missing"));
    // An unsupported capability is a "not supported" answer since v0.1.0.
    let val = fixtures::request(Method::ValidateVolumeCapabilities);
    let fs = err_reply(errors::specific_error(
        DraftRpc::ValidateVolumeCapabilities,
        4,
        "no xfs".into(),
    ));
    assert_eq!(
        upstream_reply(&val, &fs).unwrap(),
        Resp::ValidateVolumeCapabilities(v1::ValidateVolumeCapabilitiesResponse {
            confirmed: None,
            message: "no xfs".into()
        })
    );
    // A reply with neither branch.
    assert_eq!(upstream_reply(&del, &[]).unwrap_err().code(), Code::Unknown);
}

#[test]
fn node_ids_cross_in_both_directions() {
    let id = d::NodeId {
        values: HashMap::from([
            ("host".to_string(), "h1".to_string()),
            ("rack".to_string(), "r1".to_string()),
        ]),
    };
    let body = d::ControllerPublishVolumeRequest {
        version: V,
        node_id: Some(id.clone()),
        ..Default::default()
    }
    .encode_to_vec();
    let FrontCall::Hub(req) = front_request("ControllerPublishVolume", &body).unwrap() else {
        panic!()
    };
    let Req::ControllerPublishVolume(r) = *req else {
        panic!()
    };
    assert!(r.node_id.starts_with(ids::PREFIX));
    // The same string sent to another gateway's draft plugin decodes to the same NodeID.
    let (_, bytes) = upstream_request(
        Req::ControllerPublishVolume(r),
        Some(Version::new(0, 1, 0)),
        HashMap::new(),
    )
    .unwrap();
    assert_eq!(
        d::ControllerPublishVolumeRequest::decode(bytes.as_slice())
            .unwrap()
            .node_id,
        Some(id.clone())
    );
    // GetNodeID from a draft plugin → NodeGetInfo node_id.
    let reply = d::GetNodeIdResponse {
        reply: Some(d::get_node_id_response::Reply::Result(
            d::get_node_id_response::Result { node_id: Some(id) },
        )),
    }
    .encode_to_vec();
    let Resp::NodeGetInfo(info) =
        upstream_reply(&Req::NodeGetInfo(Default::default()), &reply).unwrap()
    else {
        panic!()
    };
    assert!(info.node_id.starts_with(ids::PREFIX));
}

#[test]
fn untranslatable_requests_are_answered_with_the_rpcs_error() {
    let body = d::CreateVolumeRequest {
        version: V,
        capacity_range: Some(d::CapacityRange {
            required_bytes: u64::MAX,
            limit_bytes: 0,
        }),
        ..Default::default()
    }
    .encode_to_vec();
    let FrontCall::Local(bytes) = front_request("CreateVolume", &body).unwrap() else {
        panic!("local answer expected")
    };
    let Some(d::create_volume_response::Reply::Error(e)) =
        d::CreateVolumeResponse::decode(bytes.as_slice())
            .unwrap()
            .reply
    else {
        panic!()
    };
    // OUT_OF_RANGE ↔ UNSUPPORTED_CAPACITY_RANGE.
    let Some(d::error::Value::CreateVolumeError(c)) = e.value else {
        panic!()
    };
    assert_eq!(c.error_code, 4);
    assert!(
        c.error_description.contains("required_bytes"),
        "{}",
        c.error_description
    );
    // A node id over 256 bytes.
    let big = d::NodeId {
        values: HashMap::from([("node_id".to_string(), "x".repeat(300))]),
    };
    let body = d::ControllerPublishVolumeRequest {
        version: V,
        node_id: Some(big),
        ..Default::default()
    }
    .encode_to_vec();
    assert!(matches!(
        front_request("ControllerPublishVolume", &body).unwrap(),
        FrontCall::Local(_)
    ));
    // Garbage.
    assert!(matches!(
        front_request("DeleteVolume", &[0xff, 0xff]).unwrap(),
        FrontCall::Local(_)
    ));
    assert_eq!(
        front_request("NodeStageVolume", &[]).unwrap_err().code(),
        Code::Unimplemented
    );
}
