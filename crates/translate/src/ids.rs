//! Draft `NodeID { map<string,string> values }` ↔ the `node_id` string of v0.1, v0.3 and v1.
//!
//! The controller-side gateway must decode a node id that a node-side gateway produced on
//! another machine, so the mapping is self-contained — deterministic, reversible, no lookups —
//! and stays within the 256-byte `node_id` limit of v1.
//!
//! Scheme:
//! - `NodeID { "node_id": s }` with `s` non-empty and not starting with [`PREFIX`] ↔ `s`
//!   unchanged (the common case reads naturally in orchestrator objects, and every id a non-draft
//!   plugin produces maps to exactly this).
//! - Any other `NodeID` (several keys, another key, an `s` that starts with the prefix, an
//!   empty or absent `NodeID`) ↔ [`PREFIX`] followed by the unpadded URL-safe base64 of the
//!   deterministic protobuf encoding of the `NodeID` (map entries sorted by key, each entry
//!   `key = 1, value = 2`, empty fields omitted).
//! - The empty string ↔ an absent `NodeID` (the draft makes it optional).
//! - An encoding over 256 bytes is refused with OUT_OF_RANGE naming the size: the gateway never
//!   truncates or hashes (that would not be reversible).

use std::collections::HashMap;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use prost::Message;
use tonic::Status;

use crate::dialect::proto::v0_1_oneof::NodeId;

/// Marks a `node_id` string that carries an encoded draft `NodeID`.
pub const PREFIX: &str = "csigw1:";
/// The key whose lone value maps to a plain `node_id` string.
pub const PLAIN_KEY: &str = "node_id";
/// v1: "The value of this field MUST NOT exceed 256 bytes."
pub const MAX_NODE_ID_BYTES: usize = 256;

/// Draft `NodeID` → `node_id` string.
pub fn node_id_to_string(id: Option<&NodeId>) -> Result<String, Status> {
    let Some(id) = id else {
        return Ok(String::new());
    };
    if id.values.len() == 1 {
        if let Some(s) = id.values.get(PLAIN_KEY) {
            if !s.is_empty() && !s.starts_with(PREFIX) {
                return check_len(s.clone());
            }
        }
    }
    check_len(format!(
        "{PREFIX}{}",
        URL_SAFE_NO_PAD.encode(deterministic_encoding(&id.values))
    ))
}

/// `node_id` string → draft `NodeID`. INVALID_ARGUMENT for a prefixed id that does not decode.
pub fn node_id_from_string(s: &str) -> Result<Option<NodeId>, Status> {
    if s.is_empty() {
        return Ok(None);
    }
    let Some(encoded) = s.strip_prefix(PREFIX) else {
        return Ok(Some(NodeId {
            values: HashMap::from([(PLAIN_KEY.to_string(), s.to_string())]),
        }));
    };
    let bytes = URL_SAFE_NO_PAD.decode(encoded).map_err(|e| {
        Status::invalid_argument(format!("node_id {s:?} is not a valid gateway node id: {e}"))
    })?;
    let id = NodeId::decode(bytes.as_slice()).map_err(|e| {
        Status::invalid_argument(format!("node_id {s:?} is not a valid gateway node id: {e}"))
    })?;
    Ok(Some(id))
}

fn check_len(s: String) -> Result<String, Status> {
    if s.len() > MAX_NODE_ID_BYTES {
        return Err(Status::out_of_range(format!(
            "the plugin's draft NodeID encodes to a {}-byte node_id, over the {MAX_NODE_ID_BYTES}-byte \
             limit of CSI v0.1+/v1",
            s.len()
        )));
    }
    Ok(s)
}

/// Protobuf encoding of `NodeID` with map entries sorted by key (prost's `HashMap` encoding
/// follows iteration order, which is not deterministic).
fn deterministic_encoding(values: &HashMap<String, String>) -> Vec<u8> {
    let mut keys: Vec<&String> = values.keys().collect();
    keys.sort();
    let mut out = Vec::new();
    for k in keys {
        let v = &values[k];
        let mut entry = Vec::new();
        if !k.is_empty() {
            prost::encoding::string::encode(1, k, &mut entry);
        }
        if !v.is_empty() {
            prost::encoding::string::encode(2, v, &mut entry);
        }
        prost::encoding::encode_key(1, prost::encoding::WireType::LengthDelimited, &mut out);
        prost::encoding::encode_varint(entry.len() as u64, &mut out);
        out.extend_from_slice(&entry);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(pairs: &[(&str, &str)]) -> NodeId {
        NodeId {
            values: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn plain_ids_stay_readable() {
        assert_eq!(
            node_id_to_string(Some(&id(&[("node_id", "worker-1")]))).unwrap(),
            "worker-1"
        );
        assert_eq!(
            node_id_from_string("worker-1").unwrap(),
            Some(id(&[("node_id", "worker-1")]))
        );
        assert_eq!(node_id_to_string(None).unwrap(), "");
        assert_eq!(node_id_from_string("").unwrap(), None);
    }

    #[test]
    fn round_trips() {
        let cases = [
            id(&[]),
            id(&[("node_id", "")]),
            id(&[("host", "a"), ("zone", "z1"), ("rack", "r9")]),
            id(&[("node_id", "csigw1:looks-encoded")]),
            id(&[("other", "x")]),
            id(&[("", "")]),
            id(&[("ünï", "çødé ☃")]),
        ];
        for c in cases {
            let s = node_id_to_string(Some(&c)).unwrap();
            assert!(s.starts_with(PREFIX), "{s}");
            assert_eq!(node_id_from_string(&s).unwrap(), Some(c.clone()), "{s}");
        }
    }

    #[test]
    fn deterministic_whatever_the_insertion_order() {
        let mut a = NodeId::default();
        let mut b = NodeId::default();
        for i in 0..50 {
            a.values.insert(format!("k{i}"), format!("v{i}"));
        }
        for i in (0..50).rev() {
            b.values.insert(format!("k{i}"), format!("v{i}"));
        }
        let sa = node_id_to_string(Some(&a));
        // 50 entries exceed the limit; take a smaller set for the equality check.
        assert!(sa.is_err());
        let small_a = id(&[("a", "1"), ("b", "2"), ("c", "3")]);
        let small_b = id(&[("c", "3"), ("a", "1"), ("b", "2")]);
        for _ in 0..20 {
            assert_eq!(
                node_id_to_string(Some(&small_a)).unwrap(),
                node_id_to_string(Some(&small_b)).unwrap()
            );
        }
        // Sorted encoding equals what a reference encoder gives entry by entry.
        let s = node_id_to_string(Some(&small_a)).unwrap();
        let bytes = URL_SAFE_NO_PAD.decode(&s[PREFIX.len()..]).unwrap();
        assert_eq!(
            bytes,
            [
                0x0a, 6, 0x0a, 1, b'a', 0x12, 1, b'1', 0x0a, 6, 0x0a, 1, b'b', 0x12, 1, b'2', 0x0a,
                6, 0x0a, 1, b'c', 0x12, 1, b'3'
            ]
        );
    }

    #[test]
    fn length_limit() {
        let long = "x".repeat(MAX_NODE_ID_BYTES);
        assert_eq!(
            node_id_to_string(Some(&id(&[("node_id", &long)]))).unwrap(),
            long
        );
        let too_long = "x".repeat(MAX_NODE_ID_BYTES + 1);
        let err = node_id_to_string(Some(&id(&[("node_id", &too_long)]))).unwrap_err();
        assert_eq!(err.code(), tonic::Code::OutOfRange);
        assert!(err.message().contains("257-byte"), "{}", err.message());
        let err = node_id_to_string(Some(&id(&[("host", &"y".repeat(200))]))).unwrap_err();
        assert_eq!(err.code(), tonic::Code::OutOfRange);
    }

    #[test]
    fn non_gateway_ids_and_garbage() {
        // An id from a non-draft plugin never starts with the prefix and maps to the plain key.
        assert_eq!(
            node_id_from_string("i-0abc:zone/1").unwrap(),
            Some(id(&[("node_id", "i-0abc:zone/1")]))
        );
        let err = node_id_from_string("csigw1:!!!").unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument);
        let err = node_id_from_string(&format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode([0xff])))
            .unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument);
    }

    #[test]
    fn pseudo_random_ids_round_trip_or_are_refused() {
        // A small LCG keeps the test deterministic without a dependency.
        let seed = std::cell::Cell::new(0x5eed_u64);
        let next = |n: u64| {
            seed.set(
                seed.get()
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407),
            );
            (seed.get() >> 33) % n
        };
        let alphabet: Vec<char> = "ab:/_-=+csigw1é☃ \0".chars().collect();
        let word = |len: u64| -> String {
            (0..len)
                .map(|_| alphabet[next(alphabet.len() as u64) as usize])
                .collect()
        };
        for _ in 0..2000 {
            let mut values = HashMap::new();
            for _ in 0..next(4) {
                let k = if next(3) == 0 {
                    PLAIN_KEY.to_string()
                } else {
                    word(next(12))
                };
                values.insert(k, word(next(120)));
            }
            let original = NodeId { values };
            match node_id_to_string(Some(&original)) {
                Ok(s) => {
                    assert!(s.len() <= MAX_NODE_ID_BYTES);
                    assert_eq!(node_id_from_string(&s).unwrap(), Some(original), "{s}");
                }
                Err(e) => assert_eq!(e.code(), tonic::Code::OutOfRange),
            }
        }
    }
}
