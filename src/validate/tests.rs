use std::collections::HashMap;

use prost::Message;

use super::*;
use crate::dialect::proto::{v0_1, v0_1_oneof as draft, v1};

fn fields(v: &[Violation]) -> Vec<String> {
    v.iter().map(|v| v.to_string()).collect()
}

#[test]
fn every_rule_names_a_field_of_its_dialects() {
    for (dialects, message, names) in rules::REQUIRED {
        for &d in *dialects {
            let pool = d.descriptor_pool();
            if *message == rules::ANY_REQUEST {
                for f in *names {
                    let carried = pool
                        .all_messages()
                        .filter(|m| m.name().ends_with("Request"))
                        .any(|m| m.get_field_by_name(f).is_some());
                    assert!(carried, "{d}: no request has {f}");
                }
                continue;
            }
            let full = format!("{}.{message}", d.package());
            let desc = pool
                .get_message_by_name(&full)
                .unwrap_or_else(|| panic!("{d}: no message {full}"));
            for f in *names {
                assert!(
                    desc.get_field_by_name(f).is_some(),
                    "{d}: {full} has no {f}"
                );
            }
        }
    }
}

#[test]
fn missing_required_fields_are_named_with_their_path() {
    let empty = v1::CreateVolumeRequest::default().encode_to_vec();
    assert_eq!(
        fields(&check(Dialect::V1, "csi.v1.CreateVolumeRequest", &empty)),
        ["name is REQUIRED", "volume_capabilities is REQUIRED"]
    );
    let reply = v1::CreateVolumeResponse {
        volume: Some(v1::Volume::default()),
    }
    .encode_to_vec();
    let v = check(Dialect::V1, "csi.v1.CreateVolumeResponse", &reply);
    assert_eq!(fields(&v), ["volume.volume_id is REQUIRED"]);
    assert!(v[0].is_missing());
    let cap = v1::CreateVolumeRequest {
        name: "pvc".into(),
        volume_capabilities: vec![v1::VolumeCapability::default()],
        ..Default::default()
    };
    assert_eq!(
        fields(&check(
            Dialect::V1,
            "csi.v1.CreateVolumeRequest",
            &cap.encode_to_vec()
        )),
        ["volume_capabilities[0].access_mode is REQUIRED"]
    );
}

#[test]
fn legacy_requests_need_their_version_and_draft_results_their_fields() {
    let no_version = v0_1::GetPluginInfoRequest::default().encode_to_vec();
    assert_eq!(
        fields(&check(
            Dialect::V0_1,
            "csi.GetPluginInfoRequest",
            &no_version
        )),
        ["version is REQUIRED"]
    );
    // GetSupportedVersions is the one request without a version.
    assert!(check(Dialect::V0_1, "csi.GetSupportedVersionsRequest", &[]).is_empty());
    use draft::get_plugin_info_response::{Reply, Result as R};
    let result = draft::GetPluginInfoResponse {
        reply: Some(Reply::Result(R {
            name: "x".into(),
            ..Default::default()
        })),
    };
    assert_eq!(
        fields(&check(
            Dialect::V0_1Oneof,
            "csi.GetPluginInfoResponse",
            &result.encode_to_vec()
        )),
        ["result.vendor_version is REQUIRED"]
    );
    // An error reply has no result to check.
    let error = draft::GetPluginInfoResponse {
        reply: Some(Reply::Error(draft::Error::default())),
    };
    assert!(check(
        Dialect::V0_1Oneof,
        "csi.GetPluginInfoResponse",
        &error.encode_to_vec()
    )
    .is_empty());
}

#[test]
fn size_limits_per_dialect() {
    let long = |n| "x".repeat(n);
    let create = v1::CreateVolumeRequest {
        name: long(129),
        volume_capabilities: vec![crate::hub::v1::VolumeCapability {
            access_mode: Some(v1::volume_capability::AccessMode { mode: 1 }),
            ..Default::default()
        }],
        parameters: HashMap::from([("k".to_string(), long(4096))]),
        ..Default::default()
    };
    assert_eq!(
        fields(&check(
            Dialect::V1,
            "csi.v1.CreateVolumeRequest",
            &create.encode_to_vec()
        )),
        [
            "name is 129 bytes, over the spec's limit of 128",
            "parameters holds 4097 bytes, over the spec's limit of 4096"
        ]
    );
    // node_id: 256 bytes in v1, the general 128 in v0.1.
    let info = v1::NodeGetInfoResponse {
        node_id: long(200),
        ..Default::default()
    };
    assert!(check(
        Dialect::V1,
        "csi.v1.NodeGetInfoResponse",
        &info.encode_to_vec()
    )
    .is_empty());
    let id = v0_1::GetNodeIdResponse { node_id: long(200) };
    assert_eq!(
        fields(&check(
            Dialect::V0_1,
            "csi.GetNodeIDResponse",
            &id.encode_to_vec()
        )),
        ["node_id is 200 bytes, over the spec's limit of 128"]
    );
}

#[test]
fn enum_values_outside_the_dialect_are_named() {
    let caps = v1::ControllerGetCapabilitiesResponse {
        capabilities: vec![v1::ControllerServiceCapability {
            r#type: Some(v1::controller_service_capability::Type::Rpc(
                v1::controller_service_capability::Rpc { r#type: 999 },
            )),
        }],
    };
    let v = check(
        Dialect::V1,
        "csi.v1.ControllerGetCapabilitiesResponse",
        &caps.encode_to_vec(),
    );
    assert_eq!(v.len(), 1, "{v:?}");
    assert_eq!(v[0].field, "capabilities[0].rpc.type");
    assert!(v[0].rule.contains("999"), "{v:?}");
}

#[test]
fn garbage_is_one_violation() {
    let v = check(Dialect::V1, "csi.v1.ProbeResponse", &[0xff, 0xff, 0xff]);
    assert_eq!(v.len(), 1);
    assert!(v[0].rule.starts_with("does not decode"), "{v:?}");
}
