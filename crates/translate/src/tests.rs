//! Table-driven round trips of every RPC through every spoke, both directions:
//! hub request → dialect upstream bytes (fields checked by the dialect's own test module) → read
//! back as that dialect's front request → the same hub request; hub reply → dialect front reply
//! bytes (fields checked) → read back as that dialect's upstream reply → the same hub reply, less
//! what the revision cannot carry.

use std::collections::HashMap;

use tonic::Code;

use super::fixtures::{self, carried, m, served};
use super::*;
use crate::hub::{v1, Method, Request as Req, Response as Resp};

pub(crate) const OLD: [Dialect; 3] = [Dialect::V0_3, Dialect::V0_1, Dialect::V0_1Oneof];

/// The hub request → `dialect` upstream path and bytes (draft calls naming a volume get "ctx"
/// metadata, as `upstream.rs` would find it in the handle store).
pub(crate) fn up_req(dialect: Dialect, req: Req) -> Result<(&'static str, Vec<u8>), Status> {
    let v = Some(Version::new(0, 1, 0));
    match dialect {
        Dialect::V0_3 => v0_3::upstream_request(req),
        Dialect::V0_1 => v0_1::upstream_request(req, v),
        Dialect::V0_1Oneof => {
            let md = match req.method() {
                Method::DeleteVolume
                | Method::ControllerUnpublishVolume
                | Method::NodeUnpublishVolume
                | Method::ControllerPublishVolume
                | Method::NodePublishVolume
                | Method::ValidateVolumeCapabilities => m("ctx"),
                _ => HashMap::new(),
            };
            v0_1_oneof::upstream_request(req, v, md)
        }
        Dialect::V1 => Ok((req.method().path(), req.encode())),
    }
}

pub(crate) fn up_reply(dialect: Dialect, req: &Req, bytes: &[u8]) -> Result<Resp, Status> {
    match dialect {
        Dialect::V0_3 => Ok(v0_3::upstream_reply(req, bytes)?),
        Dialect::V0_1 => Ok(v0_1::upstream_reply(req, bytes)?),
        Dialect::V0_1Oneof => Ok(v0_1_oneof::upstream_reply(req, bytes)?),
        Dialect::V1 => Ok(Resp::decode(req.method(), bytes).unwrap()),
    }
}

/// Orchestrated by `upstream.rs` (several raw calls or synthesized), not a single conversion.
fn orchestrated(dialect: Dialect, m: Method) -> bool {
    match dialect {
        Dialect::V0_1 => matches!(m, Method::Probe | Method::GetPluginCapabilities),
        Dialect::V0_1Oneof => m == Method::GetPluginCapabilities,
        _ => false,
    }
}

/// What a hub reply looks like after a trip through `dialect` (front reply → upstream reply).
fn carried_reply(dialect: Dialect, req: &Req, resp: Resp) -> Resp {
    use capabilities::{CONTROLLER, NODE, PLUGIN_SERVICE};
    let pre_v0_3 = matches!(dialect, Dialect::V0_1 | Dialect::V0_1Oneof);
    let vol = |v: &mut v1::Volume| {
        if pre_v0_3 {
            v.content_source = None;
            v.accessible_topology.clear();
        }
    };
    let keep = |table: &[capabilities::CapRow], v: i32| {
        capabilities::from_hub(table, dialect, v).is_some()
    };
    match resp {
        Resp::CreateVolume(mut r) => {
            r.volume.iter_mut().for_each(vol);
            Resp::CreateVolume(r)
        }
        Resp::ListVolumes(mut r) => {
            for e in &mut r.entries {
                e.status = None;
                e.volume.iter_mut().for_each(vol);
            }
            Resp::ListVolumes(r)
        }
        Resp::GetCapacity(r) => Resp::GetCapacity(v1::GetCapacityResponse {
            available_capacity: r.available_capacity,
            ..Default::default()
        }),
        Resp::ControllerGetCapabilities(r) => {
            Resp::ControllerGetCapabilities(v1::ControllerGetCapabilitiesResponse {
                capabilities: capabilities::v1_ctrl_values(r.capabilities)
                    .filter(|v| keep(CONTROLLER, *v))
                    .map(capabilities::v1_ctrl_cap)
                    .collect(),
            })
        }
        Resp::NodeGetCapabilities(r) => {
            Resp::NodeGetCapabilities(v1::NodeGetCapabilitiesResponse {
                capabilities: capabilities::v1_node_values(r.capabilities)
                    .filter(|v| keep(NODE, *v))
                    .map(capabilities::v1_node_cap)
                    .collect(),
            })
        }
        Resp::GetPluginCapabilities(r) => {
            Resp::GetPluginCapabilities(v1::GetPluginCapabilitiesResponse {
                capabilities: capabilities::v1_plugin_values(r.capabilities)
                    .filter(|v| keep(PLUGIN_SERVICE, *v))
                    .map(capabilities::v1_plugin_cap)
                    .collect(),
            })
        }
        Resp::CreateSnapshot(mut r) => {
            r.snapshot
                .iter_mut()
                .for_each(|s| s.group_snapshot_id.clear());
            Resp::CreateSnapshot(r)
        }
        Resp::ListSnapshots(mut r) => {
            r.entries
                .iter_mut()
                .filter_map(|e| e.snapshot.as_mut())
                .for_each(|s| s.group_snapshot_id.clear());
            Resp::ListSnapshots(r)
        }
        Resp::ValidateVolumeCapabilities(r) => Resp::ValidateVolumeCapabilities(
            v0_3::validate_reply(req, r.confirmed.is_some(), r.message),
        ),
        Resp::NodeGetInfo(r) if pre_v0_3 => Resp::NodeGetInfo(v1::NodeGetInfoResponse {
            node_id: r.node_id,
            ..Default::default()
        }),
        // The draft's ProbeNode has no `ready`: success is ready (absent).
        Resp::Probe(_) if dialect == Dialect::V0_1Oneof => {
            Resp::Probe(v1::ProbeResponse { ready: None })
        }
        other => other,
    }
}

fn check_request(dialect: Dialect, req: &Req, path: &str, bytes: &[u8]) {
    match dialect {
        Dialect::V0_3 => v0_3::tests::check_request(req, path, bytes),
        Dialect::V0_1 => v0_1::tests::check_request(req, path, bytes),
        Dialect::V0_1Oneof => v0_1_oneof::tests::check_request(req, path, bytes),
        Dialect::V1 => {}
    }
}
fn check_reply(dialect: Dialect, resp: &Resp, bytes: &[u8]) {
    match dialect {
        Dialect::V0_3 => v0_3::tests::check_reply(resp, bytes),
        Dialect::V0_1 => v0_1::tests::check_reply(resp, bytes),
        Dialect::V0_1Oneof => v0_1_oneof::tests::check_reply(resp, bytes),
        Dialect::V1 => {}
    }
}

#[test]
fn every_hub_request_to_every_upstream_dialect_and_back() {
    let mut checked = 0;
    for dialect in OLD {
        for &method in Method::ALL {
            let full = fixtures::request(method);
            if !served(dialect, method) {
                let err = up_req(dialect, full).unwrap_err();
                assert_eq!(err.code(), Code::Unimplemented, "{dialect} {method}");
                assert!(err.message().contains(method.name()), "{}", err.message());
                continue;
            }
            if orchestrated(dialect, method) {
                continue;
            }
            let req = carried(dialect, full);
            let (path, bytes) =
                up_req(dialect, req.clone()).unwrap_or_else(|e| panic!("{dialect} {method}: {e}"));
            assert!(dialect.method(path).is_some(), "{dialect} has no {path}");
            check_request(dialect, &req, path, &bytes);
            let FrontCall::Hub(back) = decode_front(dialect, path, &bytes).unwrap() else {
                panic!("{dialect} {method}: answered locally")
            };
            assert_eq!(*back, req, "{dialect} {method}");
            checked += 1;
        }
    }
    assert_eq!(checked, 20 + 13 + 14);
}

#[test]
fn every_hub_reply_to_every_front_dialect_and_back() {
    let mut checked = 0;
    for dialect in OLD {
        for &method in Method::ALL {
            if !served(dialect, method) || orchestrated(dialect, method) {
                continue;
            }
            let req = carried(dialect, fixtures::request(method));
            let (path, _) = up_req(dialect, req.clone()).unwrap();
            let resp = fixtures::response(method);
            let bytes = encode_front(dialect, path, Ok(resp.clone()))
                .unwrap_or_else(|e| panic!("{dialect} {method}: {e}"));
            check_reply(dialect, &resp, &bytes);
            let back = up_reply(dialect, &req, &bytes)
                .unwrap_or_else(|e| panic!("{dialect} {method}: {e}"));
            assert_eq!(
                back,
                carried_reply(dialect, &req, resp),
                "{dialect} {method}"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 20 + 13 + 14);
}

#[test]
fn every_front_method_of_every_dialect_is_handled() {
    for dialect in Dialect::ALL {
        for info in dialect.methods().iter().filter(|m| !m.server_streaming) {
            // An empty body is a valid (if version-less) request of every RPC.
            match decode_front(dialect, info.path, &[]) {
                Ok(_) => {}
                Err(s) => assert_ne!(s.code(), Code::Unimplemented, "{dialect} {}", info.path),
            }
        }
        let err = decode_front(dialect, "/csi.Nope/Nothing", &[]).unwrap_err();
        assert_eq!(err.code(), Code::Unimplemented);
        let err =
            encode_front(dialect, "/csi.Nope/Nothing", Err(Status::internal("x"))).unwrap_err();
        assert_eq!(err.code(), Code::Unimplemented);
    }
}

#[test]
fn v1_front_is_the_identity() {
    for &method in Method::ALL {
        let req = fixtures::request(method);
        let FrontCall::Hub(back) = decode_front(Dialect::V1, method.path(), &req.encode()).unwrap()
        else {
            panic!()
        };
        assert_eq!(*back, req);
        let resp = fixtures::response(method);
        assert_eq!(
            encode_front(Dialect::V1, method.path(), Ok(resp.clone())).unwrap(),
            resp.encode()
        );
    }
    // A reply of the wrong method is a gateway bug, not silently encoded.
    let err = encode_front(
        Dialect::V1,
        Method::CreateVolume.path(),
        Ok(fixtures::response(Method::Probe)),
    )
    .unwrap_err();
    assert_eq!(err.code(), Code::Internal);
    // Errors pass through unchanged for status-code dialects.
    for d in [Dialect::V1, Dialect::V0_3, Dialect::V0_1] {
        let path = d
            .methods()
            .iter()
            .find(|m| m.method == "DeleteVolume")
            .unwrap()
            .path;
        let err = encode_front(d, path, Err(Status::aborted("busy"))).unwrap_err();
        assert_eq!((err.code(), err.message()), (Code::Aborted, "busy"));
    }
}

#[test]
fn uint64_overflow_is_out_of_range_never_wrapped() {
    assert_eq!(
        u64_to_i64(u64::MAX, "x").unwrap_err().code(),
        Code::OutOfRange
    );
    assert_eq!(u64_to_i64(i64::MAX as u64, "x").unwrap(), i64::MAX);
    assert_eq!(i64_to_u64(-1, "x").unwrap_err().code(), Code::OutOfRange);
    // v0.1 front: a capacity range over int64.
    use crate::dialect::proto::v0_1 as d;
    use prost::Message;
    let body = d::CreateVolumeRequest {
        version: Some(Version::new(0, 1, 0).into()),
        name: "n".into(),
        capacity_range: Some(d::CapacityRange {
            required_bytes: u64::MAX,
            limit_bytes: 0,
        }),
        ..Default::default()
    }
    .encode_to_vec();
    let err = decode_front(Dialect::V0_1, "/csi.Controller/CreateVolume", &body).unwrap_err();
    assert_eq!(err.code(), Code::OutOfRange);
    assert!(
        err.message().contains("capacity_range.required_bytes"),
        "{}",
        err.message()
    );
    // v0.1 upstream: an available capacity over int64.
    let reply = d::GetCapacityResponse {
        available_capacity: u64::MAX,
    }
    .encode_to_vec();
    let err = v0_1::upstream_reply(&fixtures::request(Method::GetCapacity), &reply).unwrap_err();
    assert_eq!(err.code(), Code::OutOfRange);
    // Draft upstream: a volume over int64.
    use crate::dialect::proto::v0_1_oneof as o;
    let reply = o::CreateVolumeResponse {
        reply: Some(o::create_volume_response::Reply::Result(
            o::create_volume_response::Result {
                volume_info: Some(o::VolumeInfo {
                    capacity_bytes: 1 << 63,
                    handle: None,
                }),
            },
        )),
    }
    .encode_to_vec();
    let err =
        v0_1_oneof::upstream_reply(&fixtures::request(Method::CreateVolume), &reply).unwrap_err();
    assert_eq!(err.code(), Code::OutOfRange);
    // Negative hub capacity to a v0.1 upstream.
    let Req::CreateVolume(mut r) = carried(Dialect::V0_1, fixtures::request(Method::CreateVolume))
    else {
        panic!()
    };
    r.capacity_range = Some(v1::CapacityRange {
        required_bytes: -5,
        limit_bytes: 0,
    });
    assert_eq!(
        up_req(Dialect::V0_1, Req::CreateVolume(r))
            .unwrap_err()
            .code(),
        Code::OutOfRange
    );
}

#[test]
fn fields_an_older_upstream_cannot_honour_are_invalid_argument_naming_the_field() {
    let cases: Vec<(Dialect, Method, &str)> = vec![
        (Dialect::V0_3, Method::CreateVolume, "mutable_parameters"),
        (
            Dialect::V0_3,
            Method::ValidateVolumeCapabilities,
            "parameters",
        ),
        (Dialect::V0_1, Method::CreateVolume, "volume_content_source"),
        (Dialect::V0_1, Method::GetCapacity, "accessible_topology"),
        (
            Dialect::V0_1,
            Method::NodePublishVolume,
            "staging_target_path",
        ),
        (
            Dialect::V0_1Oneof,
            Method::CreateVolume,
            "volume_content_source",
        ),
        (
            Dialect::V0_1Oneof,
            Method::ValidateVolumeCapabilities,
            "parameters",
        ),
        (
            Dialect::V0_1Oneof,
            Method::NodePublishVolume,
            "staging_target_path",
        ),
        (
            Dialect::V0_1,
            Method::ControllerPublishVolume,
            "volume_mount_group",
        ),
    ];
    for (d, method, field) in cases {
        let err = up_req(d, fixtures::request(method)).unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{d} {method}");
        assert!(
            err.message().contains(field),
            "{d} {method}: {}",
            err.message()
        );
    }
    // Topology requirements to a v0.1 plugin, once the content source is gone.
    let Req::CreateVolume(mut r) = fixtures::request(Method::CreateVolume) else {
        panic!()
    };
    r.volume_content_source = None;
    r.mutable_parameters.clear();
    let err = up_req(Dialect::V0_1, Req::CreateVolume(r.clone())).unwrap_err();
    assert!(
        err.message().contains("accessibility_requirements"),
        "{}",
        err.message()
    );
    // Cloning (v1.0) to a v0.3 plugin.
    r.volume_capabilities.iter_mut().for_each(fixtures::old_cap);
    r.volume_content_source = Some(v1::VolumeContentSource {
        r#type: Some(v1::volume_content_source::Type::Volume(
            v1::volume_content_source::VolumeSource {
                volume_id: "v".into(),
            },
        )),
    });
    let err = up_req(Dialect::V0_3, Req::CreateVolume(r)).unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().contains("volume_content_source.volume"),
        "{}",
        err.message()
    );
    // A v1.5 access mode.
    let Req::NodeStageVolume(mut s) = fixtures::request(Method::NodeStageVolume) else {
        panic!()
    };
    s.volume_capability = Some(fixtures::mount_cap());
    s.volume_capability.as_mut().unwrap().access_type = None;
    let err = up_req(Dialect::V0_3, Req::NodeStageVolume(s)).unwrap_err();
    assert!(
        err.message().contains("SINGLE_NODE_MULTI_WRITER"),
        "{}",
        err.message()
    );
}

#[test]
fn a_missing_required_field_is_refused_before_any_precondition() {
    use crate::dialect::proto::{v0_1_oneof as dd, v0_3 as d3};
    use prost::Message;
    // v0.3 NodePublishVolume without target_path nor staging path: INVALID_ARGUMENT.
    let body = d3::NodePublishVolumeRequest {
        volume_id: "v".into(),
        ..Default::default()
    }
    .encode_to_vec();
    let e = decode_front(Dialect::V0_3, "/csi.v0.Node/NodePublishVolume", &body).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("target_path"), "{e:?}");
    // The draft: MISSING_REQUIRED_FIELD, must not retry, in an OK reply.
    let body = dd::NodePublishVolumeRequest {
        version: Some(dd::Version {
            major: 0,
            minor: 1,
            patch: 0,
        }),
        volume_handle: Some(dd::VolumeHandle {
            id: "v".into(),
            metadata: HashMap::new(),
        }),
        target_path: "/t".into(),
        ..Default::default()
    }
    .encode_to_vec();
    let FrontCall::Local(reply) =
        decode_front(Dialect::V0_1Oneof, "/csi.Node/NodePublishVolume", &body).unwrap()
    else {
        panic!("answered by the gateway")
    };
    let reply = dd::NodePublishVolumeResponse::decode(reply.as_slice()).unwrap();
    let Some(dd::node_publish_volume_response::Reply::Error(dd::Error {
        value: Some(dd::error::Value::GeneralError(g)),
    })) = reply.reply
    else {
        panic!("{reply:?}")
    };
    assert_eq!(
        g.error_code,
        dd::error::general_error::GeneralErrorCode::MissingRequiredField as i32
    );
    assert!(g.caller_must_not_retry && g.error_description.contains("volume_capability"));
}

#[test]
fn v0_x_clients_get_unknown_for_no_node_capability() {
    use crate::dialect::proto::{v0_1 as d1, v0_3 as d3};
    use prost::Message;
    let empty = || Ok(Resp::NodeGetCapabilities(Default::default()));
    let bytes = encode_front(Dialect::V0_1, "/csi.Node/NodeGetCapabilities", empty()).unwrap();
    let r = d1::NodeGetCapabilitiesResponse::decode(bytes.as_slice()).unwrap();
    assert_eq!(r.capabilities.len(), 1, "{r:?}");
    let bytes = front::encode_front_v0_2("/csi.v0.Node/NodeGetCapabilities", empty()).unwrap();
    let r = d3::NodeGetCapabilitiesResponse::decode(bytes.as_slice()).unwrap();
    assert_eq!(r.capabilities.len(), 1, "{r:?}");
    // A `csi.v0` client may be of v0.2 whatever the listener assumes: [UNKNOWN], which both
    // revisions accept, rather than the empty list v0.2 rejects.
    let bytes = encode_front(Dialect::V0_3, "/csi.v0.Node/NodeGetCapabilities", empty()).unwrap();
    let r = d3::NodeGetCapabilitiesResponse::decode(bytes.as_slice()).unwrap();
    let types: Vec<_> = r.capabilities.iter().map(|c| c.r#type).collect();
    use d3::node_service_capability::{rpc, Rpc, Type};
    let unknown = Type::Rpc(Rpc {
        r#type: rpc::Type::Unknown as i32,
    });
    assert_eq!(types, [Some(unknown)], "{r:?}");
    // A list that is not empty is left as it is.
    let stage = Ok(Resp::NodeGetCapabilities(v1::NodeGetCapabilitiesResponse {
        capabilities: vec![capabilities::v1_node_cap(1)],
    }));
    let bytes = encode_front(Dialect::V0_3, "/csi.v0.Node/NodeGetCapabilities", stage).unwrap();
    let r = d3::NodeGetCapabilitiesResponse::decode(bytes.as_slice()).unwrap();
    assert_eq!(r.capabilities.len(), 1, "{r:?}");
}

#[test]
fn v0_2_clients_never_see_what_v0_3_added() {
    use crate::dialect::proto::v0_3 as d3;
    use prost::Message;
    let all = (1..=15).map(capabilities::v1_ctrl_cap).collect();
    let resp = Resp::ControllerGetCapabilities(v1::ControllerGetCapabilitiesResponse {
        capabilities: all,
    });
    let path = "/csi.v0.Controller/ControllerGetCapabilities";
    let bytes = front::encode_front_v0_2(path, Ok(resp.clone())).unwrap();
    let r = d3::ControllerGetCapabilitiesResponse::decode(bytes.as_slice()).unwrap();
    let values: Vec<i32> = r
        .capabilities
        .iter()
        .filter_map(|c| {
            c.r#type.as_ref().map(|t| match t {
                d3::controller_service_capability::Type::Rpc(x) => x.r#type,
            })
        })
        .collect();
    assert_eq!(values, vec![1, 2, 3, 4]);
    let v0_3 = d3::ControllerGetCapabilitiesResponse::decode(
        encode_front(Dialect::V0_3, path, Ok(resp))
            .unwrap()
            .as_slice(),
    )
    .unwrap();
    assert_eq!(v0_3.capabilities.len(), 6, "v0.3 keeps its snapshots");
    let topo = Resp::GetPluginCapabilities(v1::GetPluginCapabilitiesResponse {
        capabilities: vec![
            capabilities::v1_plugin_cap(1),
            capabilities::v1_plugin_cap(2),
        ],
    });
    let bytes =
        front::encode_front_v0_2("/csi.v0.Identity/GetPluginCapabilities", Ok(topo)).unwrap();
    let r = d3::GetPluginCapabilitiesResponse::decode(bytes.as_slice()).unwrap();
    assert_eq!(r.capabilities.len(), 1, "no topology for v0.2: {r:?}");
    for (rpc, _) in front::V0_2_ABSENT {
        assert_eq!(
            front::v0_2_refusal(rpc).unwrap().code(),
            Code::Unimplemented
        );
        assert!(front::v0_2_translates(rpc));
        assert!(
            Dialect::V0_3.methods().iter().any(|m| m.method == *rpc),
            "{rpc}"
        );
    }
    assert!(front::v0_2_refusal("CreateVolume").is_none());
}
