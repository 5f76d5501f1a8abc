//! v0.1 field checks (called by the round trips in `translate::tests`) and v0.1-only cases.

use prost::Message;
use tonic::Code;

use super::{front_reply, front_request, upstream_request};
use crate::dialect::proto::v0_1 as d;
use crate::fixtures::{self, m};
use crate::hub::{v1, Method, Request as Req, Response as Resp};
use crate::version::Version;
use crate::FrontCall;

const V: Option<d::Version> = Some(d::Version {
    major: 0,
    minor: 1,
    patch: 0,
});

fn mount(c: &Option<d::VolumeCapability>) -> (String, Vec<String>, i32) {
    let c = c.clone().unwrap();
    let Some(d::volume_capability::AccessType::Mount(mnt)) = c.access_type else {
        panic!("mount expected")
    };
    (mnt.fs_type, mnt.mount_flags, c.access_mode.unwrap().mode)
}

/// Every mapped field of the v0.1 request the gateway sent for the fixture `req`.
pub(crate) fn check_request(req: &Req, path: &str, bytes: &[u8]) {
    let method = req.method();
    let name = if method == Method::NodeGetInfo {
        "GetNodeID"
    } else {
        method.name()
    };
    assert_eq!(path, format!("/csi.{}/{}", method.service(), name));
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
                (m("param"), m("secret"))
            );
        }
        Method::DeleteVolume => {
            let x = d::DeleteVolumeRequest::decode(bytes).unwrap();
            assert_eq!(
                (x.version, x.volume_id.as_str(), x.user_credentials),
                (V, "vol-1", m("secret"))
            );
        }
        Method::ControllerPublishVolume => {
            let x = d::ControllerPublishVolumeRequest::decode(bytes).unwrap();
            assert_eq!(
                (
                    x.version,
                    x.volume_id.as_str(),
                    x.node_id.as_str(),
                    x.readonly
                ),
                (V, "vol-1", "node-1", true)
            );
            assert_eq!(
                (x.user_credentials, x.volume_attributes),
                (m("secret"), m("ctx"))
            );
            assert_eq!(mount(&x.volume_capability), mnt);
        }
        Method::ControllerUnpublishVolume => {
            let x = d::ControllerUnpublishVolumeRequest::decode(bytes).unwrap();
            assert_eq!(
                (x.version, x.volume_id.as_str(), x.node_id.as_str()),
                (V, "vol-1", "node-1")
            );
            assert_eq!(x.user_credentials, m("secret"));
        }
        Method::ValidateVolumeCapabilities => {
            let x = d::ValidateVolumeCapabilitiesRequest::decode(bytes).unwrap();
            assert_eq!(
                (x.version, x.volume_id.as_str(), x.volume_attributes),
                (V, "vol-1", m("ctx"))
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
                    x.volume_id.as_str(),
                    x.target_path.as_str(),
                    x.readonly
                ),
                (V, "vol-1", "/target", true)
            );
            assert_eq!(
                (
                    x.publish_volume_info,
                    x.user_credentials,
                    x.volume_attributes
                ),
                (m("pub"), m("secret"), m("ctx"))
            );
            assert_eq!(mount(&x.volume_capability), mnt);
        }
        Method::NodeUnpublishVolume => {
            let x = d::NodeUnpublishVolumeRequest::decode(bytes).unwrap();
            assert_eq!(
                (x.version, x.volume_id.as_str(), x.target_path.as_str()),
                (V, "vol-1", "/target")
            );
        }
        // Version-only requests.
        _ => assert_eq!(
            d::GetPluginInfoRequest::decode(bytes).unwrap().version,
            V,
            "{method}"
        ),
    }
}

/// Every mapped field of the v0.1 reply the gateway sent for the fixture `resp`.
pub(crate) fn check_reply(resp: &Resp, bytes: &[u8]) {
    match resp.method() {
        Method::CreateVolume => {
            let v = d::CreateVolumeResponse::decode(bytes)
                .unwrap()
                .volume_info
                .unwrap();
            assert_eq!(
                (v.capacity_bytes, v.id.as_str(), v.attributes),
                (10 << 30, "vol-1", m("ctx"))
            );
        }
        Method::ControllerPublishVolume => {
            assert_eq!(
                d::ControllerPublishVolumeResponse::decode(bytes)
                    .unwrap()
                    .publish_volume_info,
                m("pub")
            );
        }
        Method::ValidateVolumeCapabilities => {
            let x = d::ValidateVolumeCapabilitiesResponse::decode(bytes).unwrap();
            assert_eq!((x.supported, x.message.as_str()), (true, "all good"));
        }
        Method::ListVolumes => {
            let x = d::ListVolumesResponse::decode(bytes).unwrap();
            let ids: Vec<String> = x
                .entries
                .iter()
                .map(|e| e.volume_info.clone().unwrap().id)
                .collect();
            assert_eq!(
                (ids, x.next_token.as_str()),
                (vec!["vol-1".to_string(), "vol-2".to_string()], "tok-next")
            );
        }
        Method::GetCapacity => assert_eq!(
            d::GetCapacityResponse::decode(bytes)
                .unwrap()
                .available_capacity,
            100 << 30
        ),
        Method::ControllerGetCapabilities => {
            let x = d::ControllerGetCapabilitiesResponse::decode(bytes).unwrap();
            let types: Vec<i32> = x
                .capabilities
                .iter()
                .map(|c| match c.r#type.unwrap() {
                    d::controller_service_capability::Type::Rpc(r) => r.r#type,
                })
                .collect();
            assert_eq!(
                types,
                vec![1, 2, 3, 4],
                "no snapshot, clone, expand, modify"
            );
        }
        Method::NodeGetCapabilities => {
            // Never STAGE_UNSTAGE_VOLUME: the one capability v0.1 has, UNKNOWN.
            let caps = d::NodeGetCapabilitiesResponse::decode(bytes)
                .unwrap()
                .capabilities;
            let types: Vec<i32> = caps
                .into_iter()
                .map(|c| match c.r#type.unwrap() {
                    d::node_service_capability::Type::Rpc(r) => r.r#type,
                })
                .collect();
            assert_eq!(types, vec![0], "[UNKNOWN], never STAGE_UNSTAGE_VOLUME");
        }
        Method::GetPluginInfo => {
            let x = d::GetPluginInfoResponse::decode(bytes).unwrap();
            assert_eq!(
                (x.name.as_str(), x.vendor_version.as_str(), x.manifest),
                ("example.csi.io", "1.2.3", m("manifest"))
            );
        }
        Method::NodeGetInfo => assert_eq!(
            d::GetNodeIdResponse::decode(bytes).unwrap().node_id,
            "node-1"
        ),
        _ => assert!(bytes.is_empty(), "{}", resp.method()),
    }
}

#[test]
fn front_version_is_checked() {
    let ok = d::DeleteVolumeRequest {
        version: V,
        volume_id: "v".into(),
        ..Default::default()
    };
    assert!(front_request("DeleteVolume", &ok.encode_to_vec()).is_ok());
    for version in [
        None,
        Some(d::Version {
            major: 0,
            minor: 2,
            patch: 0,
        }),
    ] {
        let body = d::DeleteVolumeRequest {
            version,
            ..ok.clone()
        }
        .encode_to_vec();
        let err = front_request("DeleteVolume", &body).unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{version:?}");
        assert!(err.message().contains("version"), "{}", err.message());
        let err = front_request(
            "NodeProbe",
            &d::NodeProbeRequest { version }.encode_to_vec(),
        )
        .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
    }
}

#[test]
fn get_supported_versions_is_answered_locally() {
    let FrontCall::Local(bytes) = front_request("GetSupportedVersions", &[]).unwrap() else {
        panic!()
    };
    let r = d::GetSupportedVersionsResponse::decode(bytes.as_slice()).unwrap();
    assert_eq!(r.supported_versions, vec![V.unwrap()]);
}

#[test]
fn probes_are_probe() {
    for name in ["ControllerProbe", "NodeProbe"] {
        let body = d::ControllerProbeRequest { version: V }.encode_to_vec();
        let FrontCall::Hub(req) = front_request(name, &body).unwrap() else {
            panic!()
        };
        assert_eq!(*req, Req::Probe(Default::default()));
        assert!(
            front_reply(name, Resp::Probe(v1::ProbeResponse { ready: None }))
                .unwrap()
                .is_empty()
        );
        let err =
            front_reply(name, Resp::Probe(v1::ProbeResponse { ready: Some(false) })).unwrap_err();
        assert_eq!(err.code(), Code::Unavailable);
    }
    let FrontCall::Hub(req) = front_request(
        "GetNodeID",
        &d::GetNodeIdRequest { version: V }.encode_to_vec(),
    )
    .unwrap() else {
        panic!()
    };
    assert_eq!(*req, Req::NodeGetInfo(Default::default()));
}

#[test]
fn no_version_negotiated_is_failed_precondition() {
    let err = upstream_request(fixtures::request(Method::DeleteVolume), None).unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
}

#[test]
fn negative_and_huge_list_sizes() {
    let err = upstream_request(
        Req::ListVolumes(v1::ListVolumesRequest {
            max_entries: -1,
            ..Default::default()
        }),
        Some(Version::new(0, 1, 0)),
    )
    .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    let body = d::ListVolumesRequest {
        version: V,
        max_entries: u32::MAX,
        ..Default::default()
    }
    .encode_to_vec();
    assert_eq!(
        front_request("ListVolumes", &body).unwrap_err().code(),
        Code::OutOfRange
    );
}
