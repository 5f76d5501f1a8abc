//! The operator opt-in `[state] handle_encoding = "inline"`: a draft plugin's whole
//! `VolumeHandle` travels inside the `volume_id` the orchestrator sees — `csigwh1:` followed by
//! the unpadded URL-safe base64 of its deterministic protobuf encoding (entries sorted by key) —
//! so id-only calls need no store (stateless, and visible to the orchestrator). The spec limits
//! a volume id to 128 bytes; a handle that does not fit is refused, never truncated.

use std::collections::{BTreeMap, HashMap};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use prost::Message as _;
use tonic::Status;

pub const PREFIX: &str = "csigwh1:";
/// The longest volume id the CSI spec lets a plugin return.
pub const MAX_VOLUME_ID: usize = 128;

/// Wire-compatible with the draft's `VolumeHandle { string id = 1; map<string,string> metadata = 2; }`;
/// a BTreeMap makes the encoding deterministic.
#[derive(Clone, PartialEq, prost::Message)]
struct Handle {
    #[prost(string, tag = "1")]
    id: String,
    #[prost(btree_map = "string, string", tag = "2")]
    metadata: BTreeMap<String, String>,
}

/// The volume id carrying `id` and `metadata`, or a clear refusal when it exceeds 128 bytes.
pub fn encode(id: &str, metadata: &HashMap<String, String>) -> Result<String, Status> {
    let handle = Handle {
        id: id.to_string(),
        metadata: metadata
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    };
    let encoded = format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(handle.encode_to_vec()));
    if encoded.len() > MAX_VOLUME_ID {
        return Err(Status::failed_precondition(format!(
            "handle_encoding = \"inline\": the plugin's VolumeHandle for volume {id:?} needs a {}-byte volume_id, \
             over the spec's {MAX_VOLUME_ID}-byte limit; use handle_encoding = \"store\"",
            encoded.len()
        )));
    }
    Ok(encoded)
}

/// A plugin's volume id and its handle metadata.
pub type PluginHandle = (String, HashMap<String, String>);

/// The handle inside an inline volume id; `None` for an id that is not one.
pub fn decode(volume_id: &str) -> Result<Option<PluginHandle>, Status> {
    let Some(rest) = volume_id.strip_prefix(PREFIX) else {
        return Ok(None);
    };
    let bad = |why: String| {
        Status::invalid_argument(format!(
            "volume_id {volume_id:?} is not a valid inline handle: {why}"
        ))
    };
    let bytes = URL_SAFE_NO_PAD
        .decode(rest)
        .map_err(|e| bad(e.to_string()))?;
    let h = Handle::decode(bytes.as_slice()).map_err(|e| bad(e.to_string()))?;
    Ok(Some((h.id, h.metadata.into_iter().collect())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_deterministically_within_the_limit() {
        let meta: HashMap<String, String> = [
            ("kind".into(), "mount".into()),
            ("backing".into(), "volumes/vol-000001-abcdefgh".into()),
        ]
        .into();
        let a = encode("vol-000001-abcdefgh", &meta).unwrap();
        assert!(
            a.starts_with(PREFIX) && a.len() <= MAX_VOLUME_ID,
            "{a} ({} bytes)",
            a.len()
        );
        // Insertion order never changes the encoding.
        let mut reordered = HashMap::new();
        for k in ["kind", "backing"] {
            reordered.insert(k.to_string(), meta[k].clone());
        }
        assert_eq!(encode("vol-000001-abcdefgh", &reordered).unwrap(), a);
        assert_eq!(
            decode(&a).unwrap(),
            Some(("vol-000001-abcdefgh".to_string(), meta))
        );
        assert_eq!(decode("plain-id").unwrap(), None);
    }

    #[test]
    fn too_long_is_refused_and_garbage_is_invalid() {
        let big: HashMap<String, String> = [("k".into(), "x".repeat(120))].into();
        let e = encode("v", &big).unwrap_err();
        assert_eq!(e.code(), tonic::Code::FailedPrecondition);
        assert!(e.message().contains("128"), "{e:?}");
        assert_eq!(
            decode("csigwh1:!!!").unwrap_err().code(),
            tonic::Code::InvalidArgument
        );
    }
}
