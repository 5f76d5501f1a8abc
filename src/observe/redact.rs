//! Secret stripping for logged message bodies. What counts as secret comes from each dialect's
//! own schema: v1 marks fields with the `csi_secret` option; v0.3 names them `*_secrets`; v0.1
//! has `user_credentials`; the draft has the `Credentials` message and calls `VolumeHandle`'s
//! `metadata` possibly sensitive.
//! Operators add map keys (e.g. a `volume_context` key) on top. In front of a draft plugin, a
//! volume's context *is* its VolumeHandle metadata, so every `volume_context`/`attributes` map
//! counts as secret too.
//! Bodies are decoded through reflection and rendered as JSON with those values replaced.
//!
//! Error messages are free text, and plugins echo their input in them: [`Redactor::scrub`]
//! replaces, inside a message, every secret value the call's request carried (the same values
//! [`Redactor::json`] strips), before the message reaches any log line or a translated reply.

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use prost_reflect::{DynamicMessage, FieldDescriptor, Kind, MessageDescriptor, SerializeOptions};
use serde_json::Value;

use crate::dialect::Dialect;

/// What replaces a secret value.
pub const STRIPPED: &str = "***stripped***";

/// Renders message bodies with secrets stripped.
#[derive(Clone, Debug, Default)]
pub struct Redactor {
    /// Map keys whose values are stripped wherever they appear.
    extra_keys: HashSet<String>,
}

impl Redactor {
    pub fn new(extra_keys: impl IntoIterator<Item = String>) -> Redactor {
        Redactor {
            extra_keys: extra_keys.into_iter().collect(),
        }
    }

    /// `bytes` (the protobuf message `message` of `dialect`) as JSON with secrets stripped.
    /// `draft_metadata`: the plugin speaks the draft, so volume contexts are its metadata.
    pub fn json(
        &self,
        dialect: Dialect,
        message: &str,
        bytes: &[u8],
        draft_metadata: bool,
    ) -> String {
        let (desc, mut json) = match render(dialect, message, bytes) {
            Ok(r) => r,
            Err(described) => return described,
        };
        self.strip(&Secrets::of(dialect, draft_metadata), &desc, &mut json);
        json.to_string()
    }

    /// Every secret value in `bytes` (the protobuf message `message` of `dialect`): what
    /// [`Redactor::json`] would strip, as the strings to remove from free text.
    pub fn secret_values(
        &self,
        dialect: Dialect,
        message: &str,
        bytes: &[u8],
        draft_metadata: bool,
    ) -> Vec<String> {
        let Ok((desc, mut json)) = render(dialect, message, bytes) else {
            return Vec::new();
        };
        let original = json.clone();
        self.strip(&Secrets::of(dialect, draft_metadata), &desc, &mut json);
        let mut out = Vec::new();
        stripped_values(&original, &json, &mut out);
        out
    }

    /// `message` with every one of `secrets` replaced by [`STRIPPED`], longest first (so a
    /// secret containing another is removed whole).
    pub fn scrub(message: &str, secrets: &[String]) -> String {
        let mut sorted: Vec<&String> = secrets.iter().filter(|s| !s.is_empty()).collect();
        sorted.sort_by_key(|s| std::cmp::Reverse(s.len()));
        sorted
            .into_iter()
            .fold(message.to_string(), |m, s| m.replace(s.as_str(), STRIPPED))
    }

    fn strip(&self, secrets: &Secrets, desc: &MessageDescriptor, json: &mut Value) {
        let Some(object) = json.as_object_mut() else {
            return;
        };
        for field in desc.fields() {
            let Some(value) = object.get_mut(field.name()) else {
                continue;
            };
            if secrets.fields.contains(field.full_name())
                || (secrets.contexts && field.is_map() && CONTEXTS.contains(&field.name()))
            {
                *value = Value::String(STRIPPED.into());
                continue;
            }
            self.strip_field(secrets, &field, value);
        }
    }

    fn strip_field(&self, secrets: &Secrets, field: &FieldDescriptor, value: &mut Value) {
        let Kind::Message(inner) = field.kind() else {
            return;
        };
        if field.is_map() {
            let entries = value.as_object_mut().into_iter().flat_map(|o| o.iter_mut());
            match inner.map_entry_value_field().kind() {
                Kind::Message(v) => entries.for_each(|(_, e)| self.strip(secrets, &v, e)),
                _ => entries
                    .filter(|(k, _)| self.extra_keys.contains(*k))
                    .for_each(|(_, e)| *e = Value::String(STRIPPED.into())),
            }
        } else if field.is_list() {
            value
                .as_array_mut()
                .into_iter()
                .flatten()
                .for_each(|e| self.strip(secrets, &inner, e));
        } else {
            self.strip(secrets, &inner, value);
        }
    }
}

/// The maps that carry a volume's context in each dialect: a draft plugin's VolumeHandle
/// metadata once translated.
const CONTEXTS: [&str; 3] = ["volume_context", "attributes", "volume_attributes"];

/// What counts as secret in one rendering.
struct Secrets {
    fields: &'static HashSet<String>,
    /// Every [`CONTEXTS`] map, in front of a draft plugin.
    contexts: bool,
}

impl Secrets {
    fn of(dialect: Dialect, draft_metadata: bool) -> Secrets {
        Secrets {
            fields: secret_fields(dialect),
            contexts: draft_metadata,
        }
    }
}

/// The message decoded and rendered as JSON, or a description of why it could not be.
fn render(
    dialect: Dialect,
    message: &str,
    bytes: &[u8],
) -> Result<(MessageDescriptor, Value), String> {
    let Some(desc) = dialect.descriptor_pool().get_message_by_name(message) else {
        return Err(format!("<{} bytes of unknown type {message}>", bytes.len()));
    };
    let Ok(decoded) = DynamicMessage::decode(desc.clone(), bytes) else {
        return Err(format!(
            "<{} bytes that do not decode as {message}>",
            bytes.len()
        ));
    };
    let options = SerializeOptions::new().use_proto_field_name(true);
    let json = decoded
        .serialize_with_options(serde_json::value::Serializer, &options)
        .map_err(|_| format!("<{message} that does not render as JSON>"))?;
    Ok((desc, json))
}

/// The string values of `original` that `stripped` replaced, wherever they are (a stripped
/// map or message gives all the strings inside it).
fn stripped_values(original: &Value, stripped: &Value, out: &mut Vec<String>) {
    match (original, stripped) {
        (o, Value::String(s)) if s == STRIPPED && o.as_str() != Some(STRIPPED) => {
            all_strings(o, out)
        }
        (Value::Object(o), Value::Object(s)) => {
            for (k, v) in o {
                if let Some(sv) = s.get(k) {
                    stripped_values(v, sv, out);
                }
            }
        }
        (Value::Array(o), Value::Array(s)) => o
            .iter()
            .zip(s)
            .for_each(|(o, s)| stripped_values(o, s, out)),
        _ => {}
    }
}

fn all_strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Object(o) => o.values().for_each(|v| all_strings(v, out)),
        Value::Array(a) => a.iter().for_each(|v| all_strings(v, out)),
        _ => {}
    }
}

/// Full names of the secret fields of `dialect`, computed once from its descriptors.
pub fn secret_fields(dialect: Dialect) -> &'static HashSet<String> {
    static SETS: OnceLock<HashMap<Dialect, HashSet<String>>> = OnceLock::new();
    &SETS.get_or_init(|| {
        Dialect::ALL
            .iter()
            .map(|&d| (d, find_secret_fields(d)))
            .collect()
    })[&dialect]
}

fn find_secret_fields(dialect: Dialect) -> HashSet<String> {
    let pool = dialect.descriptor_pool();
    let csi_secret = pool.get_extension_by_name("csi.v1.csi_secret");
    let mut out = HashSet::new();
    for message in pool
        .all_messages()
        .filter(|m| m.package_name() == dialect.package())
    {
        for field in message.fields() {
            let secret = match dialect {
                Dialect::V1 => csi_secret
                    .as_ref()
                    .is_some_and(|ext| field.options().get_extension(ext).as_bool() == Some(true)),
                Dialect::V0_3 => field.name().ends_with("_secrets"),
                Dialect::V0_1 => field.name() == "user_credentials",
                Dialect::V0_1Oneof => {
                    matches!(field.kind(), Kind::Message(m) if m.full_name() == "csi.Credentials")
                        || (message.full_name() == "csi.VolumeHandle" && field.name() == "metadata")
                }
            };
            if secret {
                out.insert(field.full_name().to_string());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dialect::proto::{v0_1, v0_1_oneof, v0_3, v1};
    use prost::Message;

    fn canary_map() -> HashMap<String, String> {
        [("password".to_string(), "CANARY-1".to_string())].into()
    }

    #[test]
    fn every_dialect_knows_its_secrets() {
        assert!(secret_fields(Dialect::V1).contains("csi.v1.CreateVolumeRequest.secrets"));
        assert!(secret_fields(Dialect::V1).contains("csi.v1.NodeStageVolumeRequest.secrets"));
        assert!(!secret_fields(Dialect::V1).contains("csi.v1.CreateVolumeRequest.parameters"));
        assert!(secret_fields(Dialect::V0_3)
            .contains("csi.v0.CreateVolumeRequest.controller_create_secrets"));
        assert!(secret_fields(Dialect::V0_1).contains("csi.CreateVolumeRequest.user_credentials"));
        assert!(
            secret_fields(Dialect::V0_1Oneof).contains("csi.CreateVolumeRequest.user_credentials")
        );
        assert!(secret_fields(Dialect::V0_1Oneof).contains("csi.VolumeHandle.metadata"));
    }

    #[test]
    fn canaries_never_survive_rendering() {
        let r = Redactor::new(["token".to_string()]);
        let v1 = v1::NodeStageVolumeRequest {
            volume_id: "vol-1".into(),
            secrets: canary_map(),
            volume_context: [
                ("token".to_string(), "CANARY-2".to_string()),
                ("size".into(), "1".into()),
            ]
            .into(),
            ..Default::default()
        };
        let out = r.json(
            Dialect::V1,
            "csi.v1.NodeStageVolumeRequest",
            &v1.encode_to_vec(),
            false,
        );
        assert!(
            out.contains("vol-1") && out.contains(STRIPPED) && out.contains("\"size\":\"1\""),
            "{out}"
        );
        assert!(!out.contains("CANARY"), "{out}");

        let v03 = v0_3::NodeStageVolumeRequest {
            node_stage_secrets: canary_map(),
            ..Default::default()
        };
        let out = r.json(
            Dialect::V0_3,
            "csi.v0.NodeStageVolumeRequest",
            &v03.encode_to_vec(),
            false,
        );
        assert!(!out.contains("CANARY") && out.contains(STRIPPED), "{out}");

        let v01 = v0_1::CreateVolumeRequest {
            user_credentials: canary_map(),
            ..Default::default()
        };
        let out = r.json(
            Dialect::V0_1,
            "csi.CreateVolumeRequest",
            &v01.encode_to_vec(),
            false,
        );
        assert!(!out.contains("CANARY") && out.contains(STRIPPED), "{out}");

        let draft = v0_1_oneof::DeleteVolumeRequest {
            volume_handle: Some(v0_1_oneof::VolumeHandle {
                id: "vol-2".into(),
                metadata: canary_map(),
            }),
            user_credentials: Some(v0_1_oneof::Credentials { data: canary_map() }),
            ..Default::default()
        };
        let out = r.json(
            Dialect::V0_1Oneof,
            "csi.DeleteVolumeRequest",
            &draft.encode_to_vec(),
            false,
        );
        assert!(!out.contains("CANARY") && out.contains("vol-2"), "{out}");
    }

    #[test]
    fn secret_values_are_scrubbed_from_free_text() {
        let r = Redactor::new(["token".to_string()]);
        let req = v1::NodePublishVolumeRequest {
            volume_id: "vol-1".into(),
            secrets: canary_map(),
            volume_context: [
                ("token".to_string(), "CANARY-2".to_string()),
                ("size".into(), "1Gi".into()),
            ]
            .into(),
            ..Default::default()
        };
        let bytes = req.encode_to_vec();
        let name = "csi.v1.NodePublishVolumeRequest";
        let mut values = r.secret_values(Dialect::V1, name, &bytes, false);
        values.sort();
        assert_eq!(values, ["CANARY-1", "CANARY-2"]);
        let echoed = "bad request {password: CANARY-1, token: CANARY-2, size: 1Gi} for vol-1";
        let out = Redactor::scrub(echoed, &values);
        assert!(
            !out.contains("CANARY") && out.contains("1Gi") && out.contains("vol-1"),
            "{out}"
        );
        // In front of a draft plugin the whole context is its metadata.
        let values = r.secret_values(Dialect::V1, name, &bytes, true);
        assert!(values.contains(&"1Gi".to_string()), "{values:?}");
        let json = r.json(Dialect::V1, name, &bytes, true);
        assert!(!json.contains("1Gi") && json.contains("vol-1"), "{json}");
        // A secret that contains another goes whole.
        let out = Redactor::scrub("x=abcdef", &["abc".into(), "abcdef".into()]);
        assert_eq!(out, format!("x={STRIPPED}"));
    }

    #[test]
    fn undecodable_bodies_are_described_not_dumped() {
        let out = Redactor::default().json(
            Dialect::V1,
            "csi.v1.CreateVolumeRequest",
            b"\xff\xff\xff",
            false,
        );
        assert!(out.starts_with("<3 bytes"), "{out}");
    }
}
