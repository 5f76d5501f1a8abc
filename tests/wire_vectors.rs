//! Every encoded sample in `csi-wire/<dialect>/vectors.jsonl` must decode with our schema and
//! render to exactly the stored proto3 JSON, and survive decode → encode through the generated
//! prost types (which drop unknown fields, so a missing field shows up as a difference).

use std::path::PathBuf;

use base64::Engine as _;
use csi_gateway::dialect::Dialect;
use prost_reflect::{DynamicMessage, SerializeOptions};
use serde_json::Value;

struct Vector {
    message: String,
    case: String,
    binary: Vec<u8>,
    json: Value,
}

fn vectors(dialect: Dialect) -> Vec<Vector> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/csi-wire")
        .join(dialect.name())
        .join("vectors.jsonl");
    std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            Vector {
                message: v["message"].as_str().unwrap().to_string(),
                case: v["case"].as_str().unwrap().to_string(),
                binary: base64::engine::general_purpose::STANDARD
                    .decode(v["binary_b64"].as_str().unwrap())
                    .unwrap(),
                json: v["json"].clone(),
            }
        })
        .collect()
}

fn to_json(msg: &DynamicMessage) -> Value {
    let options = SerializeOptions::new()
        .use_proto_field_name(true)
        .skip_default_fields(true);
    msg.serialize_with_options(serde_json::value::Serializer, &options)
        .unwrap()
}

fn check(dialect: Dialect) {
    let pool = dialect.descriptor_pool();
    let all = vectors(dialect);
    let mut failures = Vec::new();
    for v in &all {
        let id = format!("{} {}", v.message, v.case);
        let desc = pool
            .get_message_by_name(&v.message)
            .unwrap_or_else(|| panic!("{id}: no such message"));
        let decoded = match DynamicMessage::decode(desc.clone(), v.binary.as_slice()) {
            Ok(m) => m,
            Err(e) => {
                failures.push(format!("{id}: decode: {e}"));
                continue;
            }
        };
        if decoded.unknown_fields().next().is_some() {
            failures.push(format!("{id}: fields unknown to our schema"));
        }
        let json = to_json(&decoded);
        if json != v.json {
            failures.push(format!(
                "{id}: JSON differs\n  want {}\n  got  {json}",
                v.json
            ));
        }
        // Through the generated type: decode, encode, decode again.
        let reencoded = dialect
            .reencode(&v.message, &v.binary)
            .unwrap_or_else(|| panic!("{id}: no generated type"))
            .unwrap_or_else(|e| panic!("{id}: generated decode: {e}"));
        let again = DynamicMessage::decode(desc, reencoded.as_slice()).unwrap();
        if again != decoded {
            failures.push(format!(
                "{id}: generated type round trip changed the message"
            ));
        }
    }
    // Every RPC request and response type is covered by at least one vector.
    for m in dialect.methods() {
        for t in [m.request, m.response] {
            assert!(
                all.iter().any(|v| v.message == t),
                "{dialect}: no vector for {t}"
            );
        }
    }
    assert!(
        failures.is_empty(),
        "{dialect}: {} of {} vectors failed:\n{}",
        failures.len(),
        all.len(),
        failures.join("\n")
    );
}

#[test]
fn v0_1_oneof_vectors() {
    check(Dialect::V0_1Oneof);
}

#[test]
fn v0_1_vectors() {
    check(Dialect::V0_1);
}

#[test]
fn v0_3_vectors() {
    check(Dialect::V0_3);
}

#[test]
fn v1_vectors() {
    check(Dialect::V1);
}
