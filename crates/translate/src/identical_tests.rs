use std::collections::HashMap;

use prost::Message;
use tonic::{Code, Status};

use super::*;
use crate::dialect::proto::{v0_3, v1};
use crate::hub::Response as Resp;
use crate::{CallError, FrontCall};

fn schema(front: Dialect, upstream: Dialect, method: &str) -> &'static Schema {
    SCHEMA
        .iter()
        .find(|s| s.front == front && s.upstream == upstream && s.method == method)
        .unwrap_or_else(|| panic!("{method} {front} -> {upstream} is in the schema table"))
}

fn eligible_for(front: Dialect, upstream: Dialect, method: &str) -> bool {
    eligible()
        .iter()
        .any(|s| s.front == front && s.upstream == upstream && s.method == method)
}

#[test]
fn probe_and_plugin_info_pass_from_v0_3_to_v1() {
    for method in ["Probe", "GetPluginInfo"] {
        assert!(
            eligible_for(Dialect::V0_3, Dialect::V1, method),
            "{method}: {:?}",
            why_not(schema(Dialect::V0_3, Dialect::V1, method))
        );
    }
    assert_eq!(
        upstream_path(Dialect::V0_3, "/csi.v0.Identity/Probe"),
        Some((Dialect::V1, "/csi.v1.Identity/Probe"))
    );
    assert_eq!(
        upstream_path(Dialect::V1, "/csi.v1.Identity/Probe"),
        Some((Dialect::V0_3, "/csi.v0.Identity/Probe"))
    );
}

#[test]
fn capability_replies_from_v1_are_not_wire_identical_for_v0_3() {
    for method in [
        "NodeGetCapabilities",
        "ControllerGetCapabilities",
        "GetPluginCapabilities",
    ] {
        let s = schema(Dialect::V0_3, Dialect::V1, method);
        // The descriptors alone refuse it: v1 has enum values v0.3 lacks (and v0.3 numbered
        // the Controller and Plugin replies' `capabilities` 2, v1 1).
        let why = s
            .why_not
            .unwrap_or_else(|| panic!("{method}: the schema let it through"));
        assert!(why.starts_with("reply:"), "{method}: {why}");
        if method == "NodeGetCapabilities" {
            assert!(why.contains("has no value in"), "{method}: {why}");
        }
        assert!(!eligible_for(Dialect::V0_3, Dialect::V1, method));
        // The other way the enums fit, but the capability maps still filter.
        let back = why_not(schema(Dialect::V1, Dialect::V0_3, method));
        assert!(back.iter().any(|w| w.contains("capabilities")), "{back:?}");
    }
}

#[test]
fn validate_volume_capabilities_goes_on_renumbered_from_v0_3_only() {
    for (front, upstream) in [(Dialect::V0_3, Dialect::V1), (Dialect::V1, Dialect::V0_3)] {
        let s = schema(front, upstream, "ValidateVolumeCapabilities");
        assert!(
            s.why_not.is_some(),
            "supported (bool 1) vs confirmed (message 1)"
        );
        assert!(!eligible_for(front, upstream, "ValidateVolumeCapabilities"));
    }
    // v0.3's fields as v1 numbers them: volume_capabilities 2 → 3, volume_attributes 3 →
    // volume_context 2; accessible_topology (4) is not copied.
    let from_v0_3 = schema(Dialect::V0_3, Dialect::V1, "ValidateVolumeCapabilities");
    assert!(from_v0_3.request_subset);
    assert_eq!(from_v0_3.renumber, &[(1, 1), (2, 3), (3, 2)]);
    let back = schema(Dialect::V1, Dialect::V0_3, "ValidateVolumeCapabilities");
    assert!(back.renumber.is_empty());
    assert!(
        why_not(back)
            .iter()
            .any(|w| w.contains("built from the request")),
        "{:?}",
        why_not(back)
    );
    let checked: Vec<_> = checked()
        .iter()
        .filter(|c| c.schema.method == "ValidateVolumeCapabilities")
        .map(|c| (c.schema.front, c.reply_translated))
        .collect();
    assert_eq!(checked, [(Dialect::V0_3, true)]);
}

/// A key written with continuation bytes keeps them, its length and the message's; the rest
/// of the message is left as it is.
#[test]
fn renumbering_rewrites_keys_in_place() {
    use prost::encoding::{encode_key, encode_varint, string, WireType};
    let check = front_check(Dialect::V0_3, Method::ValidateVolumeCapabilities, false).unwrap();
    assert!(check.renumbers());
    let capability = capability_v0_3();
    // volume_attributes (3) first, then volume_capabilities (2) with its key padded to two
    // bytes, then volume_id (1).
    let mut message = Vec::new();
    let mut entry = Vec::new();
    string::encode(1, &"k".to_string(), &mut entry);
    string::encode(2, &"v".to_string(), &mut entry);
    encode_key(3, WireType::LengthDelimited, &mut message);
    encode_varint(entry.len() as u64, &mut message);
    message.extend_from_slice(&entry);
    message.extend_from_slice(&[2 << 3 | 2 | 0x80, 0x00]);
    encode_varint(capability.len() as u64, &mut message);
    message.extend_from_slice(&capability);
    string::encode(1, &"vol-1".to_string(), &mut message);
    let framed = frame(&message);
    assert_eq!(check.verdict(&framed), Verdict::Copied);
    let mut renumbered = message.clone();
    check.renumber(&mut renumbered);
    assert_eq!(renumbered.len(), message.len());
    let mut expected = message.clone();
    expected[0] = 2 << 3 | 2;
    let at = 2 + entry.len();
    expected[at] = 3 << 3 | 2 | 0x80;
    assert_eq!(renumbered, expected);
    let v1 = crate::dialect::proto::v1::ValidateVolumeCapabilitiesRequest::decode(&renumbered[..])
        .unwrap();
    assert_eq!(v1.volume_id, "vol-1");
    assert_eq!(v1.volume_context.get("k").map(String::as_str), Some("v"));
    assert_eq!(v1.volume_capabilities.len(), 1);
    // accessible_topology is not copied (the translation refuses it): the request is
    // translated.
    let mut topology = message.clone();
    encode_key(4, WireType::LengthDelimited, &mut topology);
    encode_varint(0, &mut topology);
    assert_eq!(check.verdict(&frame(&topology)), Verdict::Translated);
}

fn capability_v0_3() -> Vec<u8> {
    use crate::dialect::proto::v0_3::volume_capability::{AccessMode, AccessType};
    crate::dialect::proto::v0_3::VolumeCapability {
        access_mode: Some(AccessMode { mode: 1 }),
        access_type: Some(AccessType::Mount(Default::default())),
    }
    .encode_to_vec()
}

#[test]
fn controller_unpublish_from_v1_to_v0_3_keeps_its_codes_row() {
    let why = why_not(schema(
        Dialect::V1,
        Dialect::V0_3,
        "ControllerUnpublishVolume",
    ));
    assert!(why.iter().any(|w| w.contains("CODES")), "{why:?}");
    assert!(!eligible_for(
        Dialect::V1,
        Dialect::V0_3,
        "ControllerUnpublishVolume"
    ));
}

#[test]
fn snapshot_times_and_secrets_are_caught_by_schema_or_rule() {
    // created_at int64 vs creation_time Timestamp: a varint is not a message.
    let s = schema(Dialect::V0_3, Dialect::V1, "ListSnapshots");
    assert!(s.why_not.is_some_and(|w| w.contains("created_at")), "{s:?}");
    let why = why_not(schema(Dialect::V0_3, Dialect::V1, "DeleteVolume"));
    assert!(why.iter().any(|w| w.contains("secrets")), "{why:?}");
    assert!(why.iter().any(|w| w.contains("REQUIRED")), "{why:?}");
}

#[test]
fn only_v0_3_and_v1_ever_pair() {
    for s in SCHEMA {
        assert!(
            matches!(
                (s.front, s.upstream),
                (Dialect::V0_3, Dialect::V1) | (Dialect::V1, Dialect::V0_3)
            ),
            "{s:?}"
        );
    }
    for d in [Dialect::V0_1, Dialect::V0_1Oneof] {
        for m in d.methods() {
            assert_eq!(upstream_path(d, m.path), None, "{}", m.path);
        }
    }
}

#[test]
fn the_documented_list_is_the_computed_one() {
    let doc: Vec<(String, String, String, String)> = include_str!("identical.rs")
        .lines()
        .filter_map(|l| l.strip_prefix("//! | v"))
        .map(|row| {
            let cells: Vec<String> = format!("v{row}")
                .split('|')
                .map(|c| c.trim().trim_matches('`').to_string())
                .filter(|c| !c.is_empty())
                .collect();
            (
                cells[0].clone(),
                cells[1].clone(),
                cells[2].clone(),
                cells[3].clone(),
            )
        })
        .collect();
    let computed: Vec<(String, String, String, String)> = eligible()
        .iter()
        .map(|s| {
            (
                s.front.name().to_string(),
                s.upstream.name().to_string(),
                s.method.to_string(),
                s.upstream_path.to_string(),
            )
        })
        .collect();
    let mut sorted_doc = doc.clone();
    let mut sorted_computed = computed.clone();
    sorted_doc.sort();
    sorted_computed.sort();
    assert_eq!(
        sorted_doc, sorted_computed,
        "update the table in the module doc"
    );
}

const CODES_ALL: [Code; 16] = [
    Code::Cancelled,
    Code::Unknown,
    Code::InvalidArgument,
    Code::DeadlineExceeded,
    Code::NotFound,
    Code::AlreadyExists,
    Code::PermissionDenied,
    Code::ResourceExhausted,
    Code::FailedPrecondition,
    Code::Aborted,
    Code::OutOfRange,
    Code::Unimplemented,
    Code::Internal,
    Code::Unavailable,
    Code::DataLoss,
    Code::Unauthenticated,
];

/// A plugin's status on an eligible call reaches the client unchanged through the full
/// translation too: no CODES row applies, and the front encodes it as it is.
#[test]
fn an_eligible_calls_status_passes_through_unchanged() {
    for s in eligible() {
        let method = Method::ALL
            .iter()
            .copied()
            .find(|m| m.name() == s.method)
            .unwrap();
        for code in CODES_ALL {
            assert!(
                errors::code_row(method, s.upstream, s.front, code).is_none(),
                "{s:?} {code:?}"
            );
            let status = Status::new(code, format!("plugin says {code:?}"));
            let recoded = errors::recode(method, s.upstream, s.front, status.clone())
                .expect_err("stays an error");
            let encoded = crate::encode_front(s.front, s.front_path, Err(recoded))
                .expect_err("a status, not a reply");
            assert_eq!(
                (encoded.code(), encoded.message()),
                (code, status.message()),
                "{s:?}"
            );
        }
    }
}

fn canonical(dialect: Dialect, name: &str, bytes: &[u8]) -> Vec<u8> {
    let out = match dialect {
        Dialect::V1 => v1::reencode(name, bytes),
        Dialect::V0_3 => v0_3::reencode(name, bytes),
        other => panic!("{other}"),
    };
    out.unwrap_or_else(|| panic!("{name} in {dialect}"))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// A request for `method` in the front dialect, with every field set where it has any.
fn sample_request(front: Dialect, method: &str) -> Vec<u8> {
    match (front, method) {
        (Dialect::V1, "ListVolumes") => v1::ListVolumesRequest {
            max_entries: 3,
            starting_token: "page-2".into(),
        }
        .encode_to_vec(),
        (Dialect::V0_3, "ListVolumes") => v0_3::ListVolumesRequest {
            max_entries: 3,
            starting_token: "page-2".into(),
        }
        .encode_to_vec(),
        (_, "Probe" | "GetPluginInfo" | "NodeGetInfo") => Vec::new(),
        other => panic!("add a sample request for {other:?}"),
    }
}

/// A reply to `method` in the upstream dialect, with every field set.
fn sample_reply(upstream: Dialect, method: &str) -> Vec<u8> {
    let map = |k: &str, v: &str| HashMap::from([(k.to_string(), v.to_string())]);
    match (upstream, method) {
        (Dialect::V1, "Probe") => v1::ProbeResponse { ready: Some(false) }.encode_to_vec(),
        (Dialect::V0_3, "Probe") => v0_3::ProbeResponse { ready: Some(false) }.encode_to_vec(),
        (Dialect::V1, "GetPluginInfo") => v1::GetPluginInfoResponse {
            name: "p.example".into(),
            vendor_version: "1.2.3".into(),
            manifest: map("commit", "abc"),
        }
        .encode_to_vec(),
        (Dialect::V0_3, "GetPluginInfo") => v0_3::GetPluginInfoResponse {
            name: "p.example".into(),
            vendor_version: "1.2.3".into(),
            manifest: map("commit", "abc"),
        }
        .encode_to_vec(),
        (Dialect::V1, "NodeGetInfo") => v1::NodeGetInfoResponse {
            node_id: "node-7".into(),
            max_volumes_per_node: 9,
            accessible_topology: Some(v1::Topology {
                segments: map("zone", "a"),
            }),
        }
        .encode_to_vec(),
        (Dialect::V0_3, "ListVolumes") => {
            use v0_3::volume_content_source as s;
            v0_3::ListVolumesResponse {
                entries: vec![v0_3::list_volumes_response::Entry {
                    volume: Some(v0_3::Volume {
                        capacity_bytes: 1 << 30,
                        id: "vol-1".into(),
                        attributes: map("k", "v"),
                        content_source: Some(v0_3::VolumeContentSource {
                            r#type: Some(s::Type::Snapshot(s::SnapshotSource {
                                id: "snap-1".into(),
                            })),
                        }),
                        accessible_topology: vec![v0_3::Topology {
                            segments: map("zone", "a"),
                        }],
                    }),
                }],
                next_token: "page-3".into(),
            }
            .encode_to_vec()
        }
        other => panic!("add a sample reply for {other:?}"),
    }
}

/// The exact translation of an eligible call's bytes is the identity (up to encoding): the
/// request the upstream would get from the translation is the front's request read as the
/// upstream's type, on the upstream path; the reply the client would get is the plugin's
/// read as the front's type.
#[test]
fn the_translation_of_an_eligible_call_is_the_identity() {
    for s in eligible() {
        let front_info = s.front.method(s.front_path).unwrap();
        let up_info = s.upstream.method(s.upstream_path).unwrap();
        let request = sample_request(s.front, s.method);
        let Ok(FrontCall::Hub(hub)) = crate::decode_front(s.front, s.front_path, &request) else {
            panic!("{s:?}: not a hub call");
        };
        let (path, body) = match s.upstream {
            Dialect::V1 => (hub.method().path(), hub.encode()),
            Dialect::V0_3 => crate::v0_3::upstream_request(*hub.clone()).unwrap(),
            other => panic!("{other}"),
        };
        assert_eq!(path, s.upstream_path, "{s:?}");
        assert_eq!(
            body,
            canonical(s.upstream, up_info.request, &request),
            "{s:?}: request"
        );
        let reply = sample_reply(s.upstream, s.method);
        let resp = match s.upstream {
            Dialect::V1 => Resp::decode(hub.method(), &reply).unwrap(),
            _ => crate::v0_3::upstream_reply(&hub, &reply).unwrap(),
        };
        let client = crate::encode_front(s.front, s.front_path, Ok(resp)).unwrap();
        assert_eq!(
            client,
            canonical(s.front, front_info.response, &reply),
            "{s:?}: reply"
        );
    }
}

#[test]
fn empty_request_is_indexed_by_method() {
    for (i, &m) in Method::ALL.iter().enumerate() {
        assert_eq!(
            m as usize, i,
            "{m:?}: Method::ALL is not in declaration order"
        );
        assert_eq!(empty_request(m).method(), m);
    }
}

/// `bytes` read as the message `name` of `dialect`: equal when the plugin would read the same
/// (maps whatever their order).
fn read_as(dialect: Dialect, name: &str, bytes: &[u8]) -> prost_reflect::DynamicMessage {
    let desc = dialect.descriptor_pool().get_message_by_name(name).unwrap();
    prost_reflect::DynamicMessage::decode(desc, bytes).unwrap()
}

/// What the full translation does with a request the check is asked about.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Becomes {
    /// Sent on unchanged: the only requests the check may pass.
    Copied,
    /// Answered by the gateway (not protobuf, a REQUIRED field empty).
    Refused,
    /// Sent on unchanged, its secrets scrubbed from whatever error comes back.
    Scrubbed,
    /// Sent on without a field the front's revision does not have.
    Dropped,
}

/// Requests of a checked call, each with what the translation makes of it: built from the
/// front request's descriptor, so that every checked call gets every case.
fn check_samples(front: Dialect, method: &str) -> Vec<(&'static str, Vec<u8>, Becomes)> {
    use prost::encoding::{encode_key, encode_varint, string, WireType};
    use prost_reflect::Kind;
    let info = front.methods().iter().find(|m| m.method == method).unwrap();
    let message = front
        .descriptor_pool()
        .get_message_by_name(info.request)
        .unwrap();
    let hub = Method::ALL.iter().find(|m| m.name() == method).unwrap();
    let required: &[&str] = errors::REQUIRED
        .iter()
        .find(|(m, _)| m == hub)
        .map_or(&[], |(_, r)| r);
    let secrets = crate::redact::secret_fields(front);
    let secret = message
        .fields()
        .find(|f| secrets.contains(f.full_name()))
        .map(|f| f.number());
    let text = |number: u32, value: &str| {
        let mut out = Vec::new();
        string::encode(number, &value.to_string(), &mut out);
        out
    };
    let framed_field = |number: u32, inner: &[u8]| {
        let mut out = Vec::new();
        encode_key(number, WireType::LengthDelimited, &mut out);
        encode_varint(inner.len() as u64, &mut out);
        out.extend_from_slice(inner);
        out
    };
    // Every REQUIRED field set, at any depth, as the first part of each sample.
    let all_required = minimal(&message, "", required, None);
    let with = |rest: Vec<u8>| [all_required.clone(), rest].concat();
    let first = message.fields().next().unwrap().number();
    let mut cut_short = Vec::new();
    encode_key(first, WireType::LengthDelimited, &mut cut_short);
    encode_varint(5, &mut cut_short);
    cut_short.extend_from_slice(b"ab");
    let mut samples = vec![
        (
            "every required field set",
            all_required.clone(),
            Becomes::Copied,
        ),
        (
            "no field",
            Vec::new(),
            match required.is_empty() {
                true => Becomes::Copied,
                false => Becomes::Refused,
            },
        ),
        ("cut short", with(cut_short), Becomes::Refused),
        (
            "an unknown field",
            with(text(99, "extra")),
            Becomes::Dropped,
        ),
    ];
    // The first REQUIRED field, a string: its last value counts, and it must be one.
    if let Some(id) = required
        .first()
        .and_then(|r| message.get_field_by_name(r))
        .filter(|f| matches!(f.kind(), Kind::String))
        .map(|f| f.number())
    {
        let mut as_varint = Vec::new();
        encode_key(id, WireType::Varint, &mut as_varint);
        encode_varint(7, &mut as_varint);
        let not_utf8 = framed_field(id, &[0xff]);
        samples.extend([
            (
                "set twice, the last set",
                with([text(id, ""), text(id, "vol-2")].concat()),
                Becomes::Copied,
            ),
            (
                "the first required field empty",
                with(text(id, "")),
                Becomes::Refused,
            ),
            (
                "the first required field not UTF-8",
                with(not_utf8),
                Becomes::Refused,
            ),
            (
                "the first required field a varint",
                with(as_varint),
                Becomes::Refused,
            ),
        ]);
    }
    if let Some(secret) = secret {
        let entry = [text(1, "password"), text(2, "hunter2")].concat();
        let secret_entry = framed_field(secret, &entry);
        let mut bad_value = text(1, "password");
        bad_value.extend_from_slice(&[2 << 3 | 2, 1, 0xff]);
        samples.extend([
            ("a secret", with(secret_entry.clone()), Becomes::Scrubbed),
            (
                "two secrets",
                with(
                    [
                        secret_entry,
                        framed_field(secret, &[text(1, "user"), text(2, "hunter2")].concat()),
                    ]
                    .concat(),
                ),
                Becomes::Scrubbed,
            ),
            (
                "a secret not UTF-8",
                with(framed_field(secret, &bad_value)),
                Becomes::Refused,
            ),
        ]);
    }
    // Each REQUIRED message, oneof or nested field left out in turn.
    for r in required.iter().filter(|r| {
        message
            .get_field_by_name(r)
            .is_none_or(|f| f.kind().as_message().is_some())
    }) {
        let without = minimal(&message, "", required, Some(r));
        samples.push((leak(format!("without {r}")), without, Becomes::Refused));
    }
    // Where the revisions number the request's fields differently, the ones not renumbered
    // are not copied (`Schema::renumber`): the translation refuses them.
    let renumber = renumbered(front, method);
    let copied = |number: u32| match renumber.is_empty()
        || renumber.iter().any(|(from, _)| *from == number)
    {
        true => Becomes::Copied,
        false => Becomes::Refused,
    };
    // Every other field the front knows, set: numbers, maps and lists of messages the
    // translation copies.
    for f in message.fields() {
        let mut field = Vec::new();
        match f.kind() {
            _ if f.is_map() && Some(f.number()) != secret => field = entry_of_field(f.number()),
            Kind::Bool | Kind::Int32 | Kind::Int64 | Kind::Uint64 | Kind::Enum(_) => {
                encode_key(f.number(), WireType::Varint, &mut field);
                encode_varint(1, &mut field);
            }
            Kind::Message(sub) if f.is_list() && !required.contains(&f.name()) => {
                let prefix = format!("{}[].", f.name());
                field = framed_field(f.number(), &minimal(&sub, &prefix, required, None));
            }
            _ => continue,
        }
        samples.push((
            leak(format!("{} set", f.name())),
            with(field),
            copied(f.number()),
        ));
    }
    // A field the front does not know, inside a REQUIRED message.
    if let Some(f) = required
        .iter()
        .filter_map(|r| message.get_field_by_name(r))
        .find(|f| f.kind().as_message().is_some())
    {
        let sub = f.kind().as_message().unwrap().clone();
        let prefix = match f.is_list() {
            true => format!("{}[].", f.name()),
            false => format!("{}.", f.name()),
        };
        let inner = [minimal(&sub, &prefix, required, None), text(99, "extra")].concat();
        let others = minimal(&message, "", required, Some(f.name()));
        samples.push((
            "an unknown field in a required message",
            [others, framed_field(f.number(), &inner)].concat(),
            Becomes::Dropped,
        ));
    }
    samples
}

/// The message `name` of `dialect` with every field set, at any depth (a oneof's first
/// member, an enum's highest value, which the other revision may lack), encoded.
fn full_message(dialect: Dialect, name: &str) -> Vec<u8> {
    let desc = dialect.descriptor_pool().get_message_by_name(name).unwrap();
    full(&desc, 0).encode_to_vec()
}

fn full(desc: &prost_reflect::MessageDescriptor, depth: usize) -> prost_reflect::DynamicMessage {
    use prost_reflect::{DynamicMessage, Kind, MapKey, Value};
    let mut m = DynamicMessage::new(desc.clone());
    if depth > 4 {
        return m;
    }
    let one = |kind: &Kind| match kind {
        Kind::String => Value::String("x-1".into()),
        Kind::Bytes => Value::Bytes(bytes::Bytes::from_static(b"x")),
        Kind::Bool => Value::Bool(true),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => Value::I32(7),
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => Value::I64(7),
        Kind::Uint32 | Kind::Fixed32 => Value::U32(7),
        Kind::Uint64 | Kind::Fixed64 => Value::U64(7),
        Kind::Float => Value::F32(1.0),
        Kind::Double => Value::F64(1.0),
        Kind::Enum(e) => Value::EnumNumber(e.values().map(|v| v.number()).max().unwrap_or(0)),
        Kind::Message(sub) => Value::Message(full(sub, depth + 1)),
    };
    let mut oneofs = Vec::new();
    for f in desc.fields() {
        if let Some(o) = f.containing_oneof() {
            if oneofs.contains(&o.full_name().to_string()) {
                continue;
            }
            oneofs.push(o.full_name().to_string());
        }
        let value = match f.kind() {
            Kind::Message(entry) if f.is_map() => {
                let value = one(&entry.map_entry_value_field().kind());
                Value::Map(HashMap::from([(MapKey::String("k".into()), value)]))
            }
            kind if f.is_list() => Value::List(vec![one(&kind)]),
            kind => one(&kind),
        };
        m.set_field(&f, value);
    }
    m
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// A map entry of field `number`, not a secret's.
fn entry_of_field(number: u32) -> Vec<u8> {
    use prost::encoding::{encode_key, encode_varint, string, WireType};
    let mut entry = Vec::new();
    string::encode(1, &"key".to_string(), &mut entry);
    string::encode(2, &"value".to_string(), &mut entry);
    let mut out = Vec::new();
    encode_key(number, WireType::LengthDelimited, &mut out);
    encode_varint(entry.len() as u64, &mut out);
    out.extend_from_slice(&entry);
    out
}

/// `message` with every REQUIRED field under `prefix` set ("x-1" for a string, a message
/// holding its own required fields, a oneof's first member), but `skip`.
fn minimal(
    message: &prost_reflect::MessageDescriptor,
    prefix: &str,
    required: &[&str],
    skip: Option<&str>,
) -> Vec<u8> {
    use prost::encoding::{encode_key, encode_varint, string, WireType};
    let mut out = Vec::new();
    let wanted = |path: &str| required.contains(&path) && skip != Some(path);
    let mut oneofs_done = Vec::new();
    for f in message.fields() {
        let path = format!("{prefix}{}", f.name());
        let oneof = f
            .containing_oneof()
            .map(|o| format!("{prefix}{}", o.name()))
            .filter(|o| wanted(o) && !oneofs_done.contains(o));
        if !wanted(&path) && oneof.is_none() {
            continue;
        }
        oneofs_done.extend(oneof);
        match f.kind() {
            prost_reflect::Kind::String => string::encode(f.number(), &"x-1".to_string(), &mut out),
            prost_reflect::Kind::Message(sub) => {
                let nested = match f.is_list() {
                    true => format!("{path}[]."),
                    false => format!("{path}."),
                };
                let inner = minimal(&sub, &nested, required, skip);
                encode_key(f.number(), WireType::LengthDelimited, &mut out);
                encode_varint(inner.len() as u64, &mut out);
                out.extend_from_slice(&inner);
            }
            other => panic!("{path}: no sample for a required {other:?}"),
        }
    }
    out
}

/// The calls relayed once their request passes its check: which they are, and for each, on
/// requests that hit every rule, the check lets on exactly those the full translation sends on
/// unchanged (read as the plugin's type, on the path the splice names), telling those with
/// secrets apart, whose reply the translation makes the same from the method alone.
#[test]
fn a_request_goes_on_as_it_came_only_when_the_translation_would_copy_it() {
    let mut listed: Vec<String> = checked()
        .iter()
        .map(|c| {
            let s = c.schema;
            let reply = if c.reply_translated {
                ", reply translated"
            } else {
                ""
            };
            format!("{} -> {} {}{reply}", s.front, s.upstream, s.method)
        })
        .collect();
    listed.sort();
    assert_eq!(
        listed,
        [
            "v0.3 -> v1 ControllerPublishVolume",
            "v0.3 -> v1 ControllerUnpublishVolume",
            "v0.3 -> v1 CreateSnapshot, reply translated",
            "v0.3 -> v1 CreateVolume, reply translated",
            "v0.3 -> v1 DeleteSnapshot",
            "v0.3 -> v1 DeleteVolume",
            "v0.3 -> v1 GetCapacity, reply translated",
            "v0.3 -> v1 ListSnapshots, reply translated",
            "v0.3 -> v1 ListVolumes, reply translated",
            "v0.3 -> v1 NodePublishVolume",
            "v0.3 -> v1 NodeStageVolume",
            "v0.3 -> v1 NodeUnpublishVolume",
            "v0.3 -> v1 NodeUnstageVolume",
            "v0.3 -> v1 ValidateVolumeCapabilities, reply translated",
            "v1 -> v0.3 ControllerUnpublishVolume, reply translated",
            "v1 -> v0.3 CreateSnapshot, reply translated",
            "v1 -> v0.3 DeleteSnapshot",
            "v1 -> v0.3 DeleteVolume",
            "v1 -> v0.3 NodeUnstageVolume",
        ]
    );
    // The samples reach into nested messages where the request has them.
    let names: Vec<&str> = check_samples(Dialect::V0_3, "ControllerPublishVolume")
        .iter()
        .map(|s| s.0)
        .collect();
    for want in [
        "without volume_capability",
        "without volume_capability.access_mode",
        "without volume_capability.access_type",
        "readonly set",
        "volume_attributes set",
        "an unknown field in a required message",
    ] {
        assert!(names.contains(&want), "{want} in {names:?}");
    }
    for c in checked() {
        let s = c.schema;
        let info = s.front.method(s.front_path).unwrap();
        let up_info = s.upstream.method(s.upstream_path).unwrap();
        let session = crate::UpstreamSession::new(s.upstream, None);
        for (what, message, becomes) in check_samples(s.front, s.method) {
            let what = format!("{} -> {} {}: {what}", s.front, s.upstream, s.method);
            let framed = frame(&message);
            let verdict = match becomes {
                Becomes::Copied => Verdict::Copied,
                Becomes::Scrubbed => Verdict::CopiedWithSecrets,
                Becomes::Refused | Becomes::Dropped => Verdict::Translated,
            };
            assert_eq!(c.check.verdict(&framed), verdict, "{what}");
            let outcome = crate::front::decode_front_method(s.front, info, &message);
            let Ok(FrontCall::Hub(hub)) = outcome else {
                assert_eq!(becomes, Becomes::Refused, "{what}: refused");
                continue;
            };
            let (path, sent) = crate::upstream::single_call(s.front, &session, &hub).unwrap();
            assert_eq!(path, s.upstream_path, "{what}");
            // As the plugin gets it: renumbered where the revisions number it differently.
            let mut relayed = message.clone();
            c.check.renumber(&mut relayed);
            let same = read_as(s.upstream, up_info.request, &relayed)
                == read_as(s.upstream, up_info.request, &sent);
            match becomes {
                // The plugin would read the field the translation drops.
                Becomes::Dropped => assert!(!same, "{what}: sent {sent:?}"),
                Becomes::Copied | Becomes::Scrubbed => {
                    assert!(same, "{what}: sent {sent:?}");
                    if becomes == Becomes::Scrubbed {
                        let redactor = crate::redact::Redactor::new([]);
                        let values = redactor.secret_values(s.front, info.request, &message, false);
                        assert!(
                            values.contains(&"hunter2".to_string()),
                            "{what}: scrubs {values:?}"
                        );
                    }
                    let full = full_message(s.upstream, up_info.response);
                    if !c.reply_translated {
                        // Its OK reply goes as it came: the translation's is the same.
                        for reply in [&[][..], &full] {
                            let ok =
                                crate::upstream::single_reply(&session, s.front, &hub, Ok(reply))
                                    .map_err(Status::from);
                            assert_eq!(
                                crate::encode_front(s.front, s.front_path, ok).unwrap(),
                                canonical(s.front, info.response, reply),
                                "{what}: OK reply"
                            );
                        }
                    }
                    if becomes == Becomes::Copied && !c.reply_translated {
                        continue;
                    }
                    // Its reply is translated for the method alone (`Asked::Relayed`).
                    let alone = empty_request(hub.method());
                    let plugin = [Ok(Vec::new()), Ok(full)]
                        .into_iter()
                        .chain(CODES_ALL.iter().map(|&code| Err(Status::new(code, "no"))));
                    for reply in plugin {
                        let answer = |request: &crate::hub::Request| {
                            let reply = reply.as_ref().map(|b| &b[..]);
                            let reply = reply.map_err(|s| CallError::upstream(s.clone()));
                            let outcome =
                                crate::upstream::single_reply(&session, s.front, request, reply)
                                    .map_err(Status::from);
                            crate::encode_front(s.front, s.front_path, outcome)
                                .map_err(|e| (e.code(), e.message().to_string()))
                        };
                        assert_eq!(answer(alone), answer(&hub), "{what}: {reply:?}");
                    }
                }
                Becomes::Refused => panic!("{what}: the translation sent it on"),
            }
        }
        // Framing the translation refuses, or reads otherwise: compressed, or two messages.
        let request = check_samples(s.front, s.method).remove(0).1;
        let mut compressed = frame(&request).to_vec();
        compressed[0] = 1;
        assert_eq!(c.check.verdict(&compressed), Verdict::Translated);
        let one = frame(&request);
        assert_eq!(
            c.check.verdict(&[one.clone(), one].concat()),
            Verdict::Translated
        );
    }
}

/// A plugin that requires staging has the gateway refuse a NodePublishVolume without
/// `staging_target_path` itself: the check then sends such a request to the translation,
/// which does not make it one raw call, so that the gateway's refusal is the answer.
#[test]
fn a_publish_without_staging_is_the_gateways_to_refuse_when_the_plugin_stages() {
    use prost::encoding::string;
    let (front, method) = (Dialect::V0_3, Method::NodePublishVolume);
    let info = front.method("/csi.v0.Node/NodePublishVolume").unwrap();
    let message = front
        .descriptor_pool()
        .get_message_by_name(info.request)
        .unwrap();
    let (_, required) = errors::REQUIRED.iter().find(|(m, _)| *m == method).unwrap();
    let unstaged = minimal(&message, "", required, None);
    let mut staged = unstaged.clone();
    string::encode(3, &"/staging".to_string(), &mut staged);
    let plain = front_check(front, method, false).unwrap();
    let staging = front_check(front, method, true).unwrap();
    assert_eq!(plain.verdict(&frame(&unstaged)), Verdict::Copied);
    assert_eq!(staging.verdict(&frame(&unstaged)), Verdict::Translated);
    assert_eq!(staging.verdict(&frame(&staged)), Verdict::Copied);
    let mut session = crate::UpstreamSession::new(Dialect::V1, None);
    session.requires_staging = true;
    let hub = |bytes: &[u8]| match crate::front::decode_front_method(front, info, bytes) {
        Ok(FrontCall::Hub(h)) => h,
        _ => panic!("decodes"),
    };
    assert!(crate::upstream::single_call(front, &session, &hub(&unstaged)).is_none());
    assert!(crate::upstream::single_call(front, &session, &hub(&staged)).is_some());
}

/// One gRPC message framed as on the wire: uncompressed, its length, then its bytes.
fn frame(message: &[u8]) -> Vec<u8> {
    let mut out = vec![0];
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out
}
