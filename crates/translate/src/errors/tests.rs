use super::*;
use crate::dialect::proto::v0_1_oneof::error as e;

/// The generated enum's name for `value` in `rpc`'s error enum.
fn enum_name(rpc: DraftRpc, value: i32) -> Option<&'static str> {
    Some(match rpc {
        R::CreateVolume => e::create_volume_error::CreateVolumeErrorCode::try_from(value)
            .ok()?
            .as_str_name(),
        R::DeleteVolume => e::delete_volume_error::DeleteVolumeErrorCode::try_from(value)
            .ok()?
            .as_str_name(),
        R::ControllerPublishVolume => {
            e::controller_publish_volume_error::ControllerPublishVolumeErrorCode::try_from(value)
                .ok()?
                .as_str_name()
        }
        R::ControllerUnpublishVolume => {
            e::controller_unpublish_volume_error::ControllerUnpublishVolumeErrorCode::try_from(
                value,
            )
            .ok()?
            .as_str_name()
        }
        R::ValidateVolumeCapabilities => {
            e::validate_volume_capabilities_error::ValidateVolumeCapabilitiesErrorCode::try_from(
                value,
            )
            .ok()?
            .as_str_name()
        }
        R::NodePublishVolume => {
            e::node_publish_volume_error::NodePublishVolumeErrorCode::try_from(value)
                .ok()?
                .as_str_name()
        }
        R::NodeUnpublishVolume => {
            e::node_unpublish_volume_error::NodeUnpublishVolumeErrorCode::try_from(value)
                .ok()?
                .as_str_name()
        }
        R::ProbeNode => e::probe_node_error::ProbeNodeErrorCode::try_from(value)
            .ok()?
            .as_str_name(),
        R::GetNodeId => e::get_node_id_error::GetNodeIdErrorCode::try_from(value)
            .ok()?
            .as_str_name(),
        _ => return None,
    })
}

#[test]
fn table_covers_every_draft_enum_value_with_its_generated_name() {
    for rpc in DraftRpc::ALL {
        for value in 0..32 {
            let generated = enum_name(rpc, value);
            let rows: Vec<_> = SPECIFIC
                .iter()
                .filter(|r| r.rpc == rpc && r.value == value)
                .collect();
            match generated {
                Some(name) => {
                    assert_eq!(rows.len(), 1, "{rpc:?} {name}");
                    assert_eq!(rows[0].name, name, "{rpc:?} {value}");
                }
                None => assert!(rows.is_empty(), "{rpc:?} {value}"),
            }
        }
        // Only RPCs with an own error message have rows.
        assert_eq!(
            SPECIFIC.iter().any(|r| r.rpc == rpc),
            rpc.error_message().is_some(),
            "{rpc:?}"
        );
    }
}

#[test]
fn every_specific_row_draft_to_grpc() {
    for r in SPECIFIC {
        let err = Error {
            value: Some(specific_error(
                r.rpc,
                r.value,
                format!("plugin said {}", r.name),
            )),
        };
        let out = draft_to_status(r.rpc, err);
        match r.code {
            None => assert_eq!(out.unwrap(), format!("plugin said {}", r.name), "{r:?}"),
            Some(code) => {
                let s = out.unwrap_err();
                assert_eq!(s.code(), code, "{r:?}");
                assert_eq!(s.message(), format!("plugin said {}", r.name), "{r:?}");
            }
        }
    }
}

#[test]
fn every_specific_row_grpc_to_draft() {
    for r in SPECIFIC {
        let Some(code) = r.code else { continue };
        let got = status_to_draft(r.rpc, &Status::new(code, "upstream message"));
        let v = got.value.expect("value set");
        match r.dir {
            Both => assert_eq!(
                v,
                specific_error(r.rpc, r.value, "upstream message".into()),
                "{r:?}"
            ),
            FromGrpc(_) => unreachable!("FromGrpc rows have no forward code"),
            ToGrpc => {
                // Maps back to this RPC's preferred row for the code, or to GeneralError UNDEFINED.
                match SPECIFIC
                    .iter()
                    .find(|b| b.rpc == r.rpc && b.back() == Some(code))
                {
                    Some(b) => {
                        assert_eq!(v, specific_error(r.rpc, b.value, "upstream message".into()))
                    }
                    None => assert_eq!(
                        v,
                        error::Value::GeneralError(error::GeneralError {
                            error_code: 1,
                            caller_must_not_retry: must_not_retry(r.rpc, code),
                            error_description: "upstream message".into(),
                        }),
                        "{r:?}"
                    ),
                }
            }
        }
    }
}

#[test]
fn one_preferred_row_per_rpc_and_code() {
    for a in SPECIFIC.iter().filter(|r| r.back().is_some()) {
        let n = SPECIFIC
            .iter()
            .filter(|b| b.rpc == a.rpc && b.back() == a.back())
            .count();
        assert_eq!(n, 1, "{a:?}");
        let back = status_to_draft(a.rpc, &Status::new(a.back().unwrap(), "m"));
        assert_eq!(
            back.value,
            Some(specific_error(a.rpc, a.value, "m".into())),
            "{a:?}"
        );
    }
    for a in SPECIFIC.iter().filter(|r| matches!(r.dir, FromGrpc(_))) {
        assert!(a.code.is_none(), "FromGrpc is for OK rows: {a:?}");
    }
}

#[test]
fn every_general_row() {
    for g in GENERAL {
        for retry in [false, true] {
            if g.must_not_retry.is_some_and(|m| m != retry) {
                continue;
            }
            let err = general_error(
                error::general_error::GeneralErrorCode::try_from(g.value).unwrap(),
                retry,
                "d".into(),
            );
            let s = draft_to_status(R::ListVolumes, err).unwrap_err();
            assert_eq!(s.code(), g.code, "{g:?} retry={retry}");
            assert_eq!(s.message(), "d");
        }
        assert_eq!(
            error::general_error::GeneralErrorCode::try_from(g.value)
                .unwrap()
                .as_str_name(),
            g.name
        );
    }
}

#[test]
fn every_code_to_general_error_with_retry_from_table() {
    assert_eq!(RETRY.len(), 16, "every non-OK gRPC code");
    for (code, mnr, _) in RETRY {
        let got = status_to_draft(R::GetCapacity, &Status::new(*code, "m"));
        assert_eq!(
            got.value,
            Some(error::Value::GeneralError(error::GeneralError {
                error_code: 1,
                caller_must_not_retry: *mnr,
                error_description: "m".into()
            })),
            "{code:?}"
        );
    }
    // Spot checks that justify the table from the seeds.
    for c in [Aborted, Unavailable, DeadlineExceeded, ResourceExhausted] {
        assert!(!must_not_retry(R::ListVolumes, c), "{c:?}");
    }
    for c in [
        InvalidArgument,
        NotFound,
        AlreadyExists,
        Unimplemented,
        OutOfRange,
    ] {
        assert!(must_not_retry(R::ListVolumes, c), "{c:?}");
    }
}

#[test]
fn retry_overrides_apply_per_rpc() {
    for (rpc, code, mnr, _) in RETRY_OVERRIDES {
        assert_eq!(must_not_retry(*rpc, *code), *mnr);
        let Some(error::Value::GeneralError(g)) =
            status_to_draft(*rpc, &Status::new(*code, "x")).value
        else {
            panic!("general error expected")
        };
        assert_eq!(g.caller_must_not_retry, *mnr);
    }
    assert!(must_not_retry(R::CreateVolume, FailedPrecondition));
}

#[test]
fn idempotency_overrides() {
    let gone = Error {
        value: Some(specific_error(R::DeleteVolume, 4, "gone".into())),
    };
    assert_eq!(draft_to_status(R::DeleteVolume, gone).unwrap(), "gone");
    let not_attached = Error {
        value: Some(specific_error(R::ControllerUnpublishVolume, 7, "n".into())),
    };
    assert!(draft_to_status(R::ControllerUnpublishVolume, not_attached).is_ok());
    // A newer plugin's NOT_FOUND still reaches a draft client as the RPC's own value.
    let back = status_to_draft(R::DeleteVolume, &Status::not_found("x"));
    assert_eq!(
        back.value,
        Some(specific_error(R::DeleteVolume, 4, "x".into()))
    );
}

#[test]
fn empty_error_is_unknown_and_gateway_failures_retryable() {
    assert_eq!(
        draft_to_status(R::CreateVolume, Error { value: None })
            .unwrap_err()
            .code(),
        Unknown
    );
    for c in [Unavailable, DeadlineExceeded] {
        let Some(error::Value::GeneralError(g)) = status_to_draft(
            R::CreateVolume,
            &Status::new(c, "gateway: upstream unreachable"),
        )
        .value
        else {
            panic!()
        };
        assert!(!g.caller_must_not_retry);
        assert_eq!(g.error_description, "gateway: upstream unreachable");
    }
}

#[test]
fn published_node_ids_join_the_message() {
    use crate::dialect::proto::v0_1_oneof::NodeId;
    let e = Error {
        value: Some(error::Value::ControllerPublishVolumeError(
            error::ControllerPublishVolumeError {
                error_code: 5,
                error_description: "already published".into(),
                node_ids: vec![NodeId {
                    values: [("node_id".to_string(), "n1".to_string())].into(),
                }],
            },
        )),
    };
    let s = draft_to_status(R::ControllerPublishVolume, e).unwrap_err();
    assert_eq!(s.code(), FailedPrecondition);
    assert_eq!(s.message(), "already published (published at node_id: n1)");
}

#[test]
fn required_fields_are_checked_in_table_order() {
    use crate::hub::v1;
    use v1::volume_capability::{AccessMode, AccessType, MountVolume};
    let whole = || v1::VolumeCapability {
        access_type: Some(AccessType::Mount(MountVolume::default())),
        access_mode: Some(AccessMode { mode: 1 }),
    };
    let publish = |id: &str, target: &str, cap: bool| {
        Req::NodePublishVolume(v1::NodePublishVolumeRequest {
            volume_id: id.into(),
            target_path: target.into(),
            volume_capability: cap.then(whole),
            ..Default::default()
        })
    };
    assert_eq!(missing_required(&publish("", "", false)), Some("volume_id"));
    assert_eq!(
        missing_required(&publish("v", "", false)),
        Some("target_path")
    );
    assert_eq!(
        missing_required(&publish("v", "/t", false)),
        Some("volume_capability")
    );
    assert_eq!(missing_required(&publish("v", "/t", true)), None);
    // Nested fields every revision requires, and one only the draft leaves OPTIONAL.
    let mut bare = whole();
    bare.access_mode = None;
    let nested = Req::NodePublishVolume(v1::NodePublishVolumeRequest {
        volume_id: "v".into(),
        target_path: "/t".into(),
        volume_capability: Some(bare),
        ..Default::default()
    });
    assert_eq!(
        missing_required(&nested),
        Some("volume_capability.access_mode")
    );
    let mut typeless = whole();
    typeless.access_type = None;
    let create = Req::CreateVolume(v1::CreateVolumeRequest {
        name: "n".into(),
        volume_capabilities: vec![whole(), typeless],
        ..Default::default()
    });
    assert_eq!(
        missing_required(&create),
        Some("volume_capabilities[].access_type")
    );
    let attach = Req::ControllerPublishVolume(v1::ControllerPublishVolumeRequest {
        volume_id: "v".into(),
        volume_capability: Some(whole()),
        ..Default::default()
    });
    assert_eq!(missing_required(&attach), Some("node_id"));
    // Every listed field is one `field_set` knows: a typo would make it always missing.
    for (m, fields) in REQUIRED {
        let full = crate::fixtures::request(*m);
        for f in *fields {
            assert!(field_set(&full, f), "{m:?}.{f} is unknown to field_set");
        }
    }
    let s = missing_field(&publish("v", "", false), "target_path");
    assert_eq!(s.code(), Code::InvalidArgument);
    assert!(s.message().contains("target_path"), "{s:?}");
}

#[test]
fn a_bad_list_token_from_a_draft_plugin_is_aborted() {
    use crate::hub::v1;
    let undefined = |must_not_retry| Error {
        value: Some(e::Value::GeneralError(e::GeneralError {
            error_code: e::general_error::GeneralErrorCode::Undefined as i32,
            caller_must_not_retry: must_not_retry,
            error_description: "bad token".into(),
        })),
    };
    let list = |token: &str| {
        Req::ListVolumes(v1::ListVolumesRequest {
            max_entries: 0,
            starting_token: token.into(),
        })
    };
    let code = |e, req: &Req| {
        draft_to_status_for(R::ListVolumes, e, req)
            .unwrap_err()
            .code()
    };
    assert_eq!(code(undefined(true), &list("zz")), Aborted);
    // Without a token the cause is unknown: the general row stands.
    assert_eq!(code(undefined(true), &list("")), Internal);
    // Retryable UNDEFINED is a transient failure, not the token.
    assert_eq!(code(undefined(false), &list("zz")), Unavailable);
}

#[test]
fn code_rows_apply_per_rpc_and_direction() {
    use crate::hub::Method;
    for up in [Dialect::V0_3, Dialect::V0_1, Dialect::V0_1Oneof] {
        let r = code_row(Method::NodeUnpublishVolume, up, Dialect::V1, NotFound).unwrap();
        assert_eq!(r.to, None);
    }
    assert!(code_row(
        Method::NodeUnpublishVolume,
        Dialect::V1,
        Dialect::V1,
        NotFound
    )
    .is_none());
    assert!(code_row(
        Method::NodeUnpublishVolume,
        Dialect::V0_1,
        Dialect::V0_3,
        NotFound
    )
    .is_none());
    assert!(code_row(Method::DeleteVolume, Dialect::V0_1, Dialect::V1, NotFound).is_none());
}

#[test]
fn controller_unpublish_not_found_is_ok_only_for_v1_clients_of_older_plugins() {
    use crate::hub::{Method, Response};
    let m = Method::ControllerUnpublishVolume;
    for up in [Dialect::V0_3, Dialect::V0_1, Dialect::V0_1Oneof] {
        let r = recode(
            m,
            up,
            Dialect::V1,
            Status::not_found("node x does not exist"),
        );
        assert!(
            matches!(r, Ok(Response::ControllerUnpublishVolume(_))),
            "{up}"
        );
        // Other codes pass unchanged.
        let e = recode(m, up, Dialect::V1, Status::aborted("pending")).unwrap_err();
        assert_eq!((e.code(), e.message()), (Aborted, "pending"));
    }
    for (up, front) in [
        (Dialect::V1, Dialect::V1),
        (Dialect::V0_1, Dialect::V0_3),
        (Dialect::V0_1Oneof, Dialect::V0_1),
    ] {
        let e = recode(m, up, front, Status::not_found("gone")).unwrap_err();
        assert_eq!(e.code(), NotFound, "{up} -> {front}");
    }
}

#[test]
fn every_row_that_answers_ok_has_an_empty_reply() {
    for r in CODES.iter().filter(|r| r.to.is_none()) {
        assert!(empty_reply(r.method).is_some(), "{}", r.method.name());
    }
}
