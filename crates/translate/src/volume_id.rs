//! The volume id of a request, for the per-call log line, read straight from the protobuf bytes
//! by field number — no decode on the hot path. Which field holds it (`volume_id`, the draft's
//! `volume_handle.id`, a snapshot's `source_volume_id`) is looked up once per RPC from the
//! dialect's descriptors.

use std::collections::HashMap;
use std::sync::OnceLock;

use bytes::Buf;
use prost::encoding::{decode_key, decode_varint, skip_field, DecodeContext, WireType};
use prost_reflect::{Kind, MessageDescriptor};

use crate::dialect::Dialect;

/// Field numbers from the request down to the volume id, per dialect and gRPC path (the two
/// `csi` dialects share paths but not layouts).
fn table() -> &'static HashMap<(Dialect, &'static str), Vec<u32>> {
    static TABLE: OnceLock<HashMap<(Dialect, &'static str), Vec<u32>>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = HashMap::new();
        for d in Dialect::ALL {
            for m in d.methods() {
                if let Some(desc) = d.descriptor_pool().get_message_by_name(m.request) {
                    if let Some(path) = id_path(&desc) {
                        t.insert((d, m.path), path);
                    }
                }
            }
        }
        t
    })
}

fn id_path(desc: &MessageDescriptor) -> Option<Vec<u32>> {
    for name in ["volume_id", "source_volume_id"] {
        if let Some(f) = desc
            .get_field_by_name(name)
            .filter(|f| f.kind() == Kind::String)
        {
            return Some(vec![f.number()]);
        }
    }
    let handle = desc.get_field_by_name("volume_handle")?;
    let Kind::Message(h) = handle.kind() else {
        return None;
    };
    Some(vec![handle.number(), h.get_field_by_name("id")?.number()])
}

/// The volume id in `message`, the request of `dialect`'s RPC at `path`.
pub fn volume_id(dialect: Dialect, path: &'static str, message: &[u8]) -> Option<String> {
    let mut bytes = message;
    for &number in table().get(&(dialect, path))? {
        bytes = field(bytes, number)?;
    }
    std::str::from_utf8(bytes).ok().map(str::to_owned)
}

/// The bytes of the first length-delimited field `number` at the top level of `message`.
fn field(mut message: &[u8], number: u32) -> Option<&[u8]> {
    while message.has_remaining() {
        let (tag, wire) = decode_key(&mut message).ok()?;
        if tag == number && wire == WireType::LengthDelimited {
            let len = decode_varint(&mut message).ok()? as usize;
            return message.get(..len);
        }
        skip_field(wire, tag, &mut message, DecodeContext::default()).ok()?;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dialect::proto::{v0_1_oneof, v1};
    use prost::Message;

    #[test]
    fn finds_the_id_in_every_shape() {
        let m = v1::NodePublishVolumeRequest {
            volume_id: "vol-9".into(),
            target_path: "/t".into(),
            readonly: true,
            ..Default::default()
        };
        assert_eq!(
            volume_id(
                Dialect::V1,
                "/csi.v1.Node/NodePublishVolume",
                &m.encode_to_vec()
            )
            .as_deref(),
            Some("vol-9")
        );
        let d = v0_1_oneof::DeleteVolumeRequest {
            version: Some(v0_1_oneof::Version {
                major: 0,
                minor: 1,
                patch: 0,
            }),
            volume_handle: Some(v0_1_oneof::VolumeHandle {
                id: "h-1".into(),
                metadata: [("k".into(), "v".into())].into(),
            }),
            ..Default::default()
        };
        assert_eq!(
            volume_id(
                Dialect::V0_1Oneof,
                "/csi.Controller/DeleteVolume",
                &d.encode_to_vec()
            )
            .as_deref(),
            Some("h-1")
        );
        let s = v1::CreateSnapshotRequest {
            source_volume_id: "vol-3".into(),
            name: "s".into(),
            ..Default::default()
        };
        assert_eq!(
            volume_id(
                Dialect::V1,
                "/csi.v1.Controller/CreateSnapshot",
                &s.encode_to_vec()
            )
            .as_deref(),
            Some("vol-3")
        );
        assert_eq!(volume_id(Dialect::V1, "/csi.v1.Identity/Probe", &[]), None);
        let v01 = crate::dialect::proto::v0_1::DeleteVolumeRequest {
            volume_id: "v01".into(),
            ..Default::default()
        };
        assert_eq!(
            volume_id(
                Dialect::V0_1,
                "/csi.Controller/DeleteVolume",
                &v01.encode_to_vec()
            )
            .as_deref(),
            Some("v01")
        );
        assert_eq!(
            volume_id(Dialect::V1, "/csi.v1.Node/NodePublishVolume", b"\xff\xff"),
            None
        );
    }
}
