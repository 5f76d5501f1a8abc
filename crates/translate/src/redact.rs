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
//! replaces, inside a message, every secret value the call's request carried, before the
//! message reaches any log line or a translated reply. Free text has no fields, so there a value
//! is found by its text, and two kinds are told apart:
//! - secrets (the fields the dialects mark, `Credentials`, `log.redact_keys`) go wherever they
//!   appear, however short;
//! - values that are only possibly sensitive (VolumeHandle metadata, and every volume context in
//!   front of a draft plugin) go when they are at least [`SENSITIVE_MIN_LEN`] bytes long. A
//!   shorter one (`kind: mount`, `fs: ext4`) is as likely the text of a path or a word as an
//!   echo, and cutting it mangled unrelated text (`target/***stripped***`); it says next to
//!   nothing on its own. Rendered bodies strip both kinds by field, whatever their length.

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use prost_reflect::{DynamicMessage, FieldDescriptor, Kind, MessageDescriptor, SerializeOptions};
use serde_json::Value;

use crate::dialect::Dialect;

/// What replaces a secret value.
pub const STRIPPED: &str = "***stripped***";

/// The shortest possibly sensitive (not secret) value scrubbed from free text.
pub const SENSITIVE_MIN_LEN: usize = 8;

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

    /// The values in `bytes` (the protobuf message `message` of `dialect`) to remove from free
    /// text: every secret, and every possibly sensitive value of [`SENSITIVE_MIN_LEN`] bytes or
    /// more (see the module's documentation).
    pub fn secret_values(
        &self,
        dialect: Dialect,
        message: &str,
        bytes: &[u8],
        draft_metadata: bool,
    ) -> Vec<String> {
        let Ok((desc, original)) = render(dialect, message, bytes) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut secret = original.clone();
        self.strip(&Secrets::only_secret(dialect), &desc, &mut secret);
        stripped_values(&original, &secret, &mut out);
        let mut all = secret.clone();
        self.strip(&Secrets::of(dialect, draft_metadata), &desc, &mut all);
        let mut sensitive = Vec::new();
        stripped_values(&secret, &all, &mut sensitive);
        // A map stripped whole in the second pass holds the first pass's placeholders too.
        out.extend(
            sensitive
                .into_iter()
                .filter(|v| v.len() >= SENSITIVE_MIN_LEN && v != STRIPPED),
        );
        out
    }

    /// `message` without the possibly sensitive `values` of [`SENSITIVE_MIN_LEN`] bytes or
    /// more: for text that can echo a draft plugin's metadata but no secret.
    pub fn scrub_sensitive(message: &str, values: &[String]) -> String {
        let long: Vec<String> = values
            .iter()
            .filter(|v| v.len() >= SENSITIVE_MIN_LEN)
            .cloned()
            .collect();
        Redactor::scrub(message, &long)
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
            let sensitive = SENSITIVE.contains(&field.full_name());
            if (secrets.fields.contains(field.full_name()) && (secrets.sensitive || !sensitive))
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

/// Fields the draft calls possibly sensitive: stripped from bodies like secrets, but not
/// secrets (see the module's documentation for free text).
const SENSITIVE: [&str; 1] = ["csi.VolumeHandle.metadata"];

/// What is stripped in one rendering.
struct Secrets {
    fields: &'static HashSet<String>,
    /// The [`SENSITIVE`] fields (listed among the secret ones).
    sensitive: bool,
    /// Every [`CONTEXTS`] map, in front of a draft plugin.
    contexts: bool,
}

impl Secrets {
    /// Secrets and possibly sensitive values: what a rendered body loses.
    fn of(dialect: Dialect, draft_metadata: bool) -> Secrets {
        Secrets {
            fields: secret_fields(dialect),
            sensitive: true,
            contexts: draft_metadata,
        }
    }

    /// Secrets alone.
    fn only_secret(dialect: Dialect) -> Secrets {
        Secrets {
            fields: secret_fields(dialect),
            sensitive: false,
            contexts: false,
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
                // VolumeHandle metadata is listed too (the fast path keeps every call carrying
                // it translated, so scrubbed), though only possibly sensitive: [`SENSITIVE`].
                Dialect::V0_1Oneof => {
                    matches!(field.kind(), Kind::Message(m) if m.full_name() == "csi.Credentials")
                        || SENSITIVE.contains(&field.full_name())
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
        // In front of a draft plugin the whole context is its metadata: stripped from the body
        // by field, and from free text when long enough to be more than a common word.
        let mut draft = req.clone();
        draft
            .volume_context
            .insert("path".into(), "volumes/vol-1-0a9f".into());
        let bytes = draft.encode_to_vec();
        let mut values = r.secret_values(Dialect::V1, name, &bytes, true);
        values.sort();
        assert_eq!(values, ["CANARY-1", "CANARY-2", "volumes/vol-1-0a9f"]);
        let json = r.json(Dialect::V1, name, &bytes, true);
        assert!(!json.contains("1Gi") && json.contains("vol-1"), "{json}");
        // A secret that contains another goes whole.
        let out = Redactor::scrub("x=abcdef", &["abc".into(), "abcdef".into()]);
        assert_eq!(out, format!("x={STRIPPED}"));
    }

    /// Short metadata values (`kind: mount`) are not cut out of unrelated text; long ones and
    /// every secret still are, however short the secret.
    #[test]
    fn short_metadata_values_do_not_mangle_text() {
        let draft = v0_1_oneof::NodePublishVolumeRequest {
            volume_handle: Some(v0_1_oneof::VolumeHandle {
                id: "vol-3".into(),
                metadata: [
                    ("kind".to_string(), "mount".to_string()),
                    ("path".into(), "volumes/vol-3-77c1".into()),
                ]
                .into(),
            }),
            target_path: "/var/lib/kubelet/pods/p/target/mount".into(),
            user_credentials: Some(v0_1_oneof::Credentials {
                data: [("pin".to_string(), "42".to_string())].into(),
            }),
            ..Default::default()
        };
        let bytes = draft.encode_to_vec();
        let name = "csi.NodePublishVolumeRequest";
        let r = Redactor::default();
        let values = r.secret_values(Dialect::V0_1Oneof, name, &bytes, false);
        let message = "cannot publish volumes/vol-3-77c1 (pin 42) at /pods/p/target/mount";
        assert_eq!(
            Redactor::scrub(message, &values),
            format!("cannot publish {STRIPPED} (pin {STRIPPED}) at /pods/p/target/mount")
        );
        let sent = ["mount".to_string(), "volumes/vol-3-77c1".to_string()];
        assert_eq!(
            Redactor::scrub_sensitive("no volumes/vol-3-77c1 at target/mount", &sent),
            format!("no {STRIPPED} at target/mount")
        );
        let json = r.json(Dialect::V0_1Oneof, name, &bytes, false);
        assert!(
            !json.contains("\"mount\"")
                && !json.contains("\"42\"")
                && json.contains("target/mount"),
            "{json}"
        );
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
