//! The wire-identical fast path: calls between v0.3 and v1 whose exact translation is the
//! identity on the wire, relayed like same-dialect calls with only their gRPC path rewritten
//! (`/csi.v0.Identity/Probe` → `/csi.v1.Identity/Probe`).
//!
//! CSI kept its field numbers across revisions, so for some RPCs a v0.3 message *is* the v1
//! message. A call is eligible for a (front, upstream) pair when both hold:
//! - its schema: the front's request is a subset of the upstream's and the upstream's reply a
//!   subset of the front's, recursively (same numbers, wire types, scalar kinds, labels, oneofs;
//!   enum values with the same number and meaning) — decided at build time from the
//!   descriptors by `crates/proto/build/identical.rs` ([`SCHEMA`]);
//! - nothing the translation layer does for that RPC and direction goes beyond copying fields:
//!   the rules below, each read from the table that implements it where there is one
//!   ([`errors::CODES`], [`errors::REQUIRED`], the secret fields of `observe::redact`), else
//!   listed in [`EXCLUDED`] naming the code that does it.
//!
//! The client then receives exactly what the full translation would give it, up to unknown
//! fields (which the relay leaves in and protobuf decoders skip) — with one exception no
//! table can express: a request that is not valid protobuf reaches the plugin, which answers
//! it, where the translation would have answered INVALID_ARGUMENT itself (or, for the RPCs
//! whose request it never reads, sent an empty one). The draft and v0.1 never qualify (their
//! requests carry `version`, the draft answers errors in an `Error` oneof), nor does a
//! `csi.v0` listener serving v0.2 for the RPCs it filters or refuses ([`super::router`]), nor
//! a method the gateway reads (`[calls]` protection or validation).
//!
//! The eligible calls (asserted by `the_documented_list_is_the_computed_one` below):
//!
//! | front | upstream | RPC | upstream path |
//! | --- | --- | --- | --- |
//! | v0.3 | v1 | GetPluginInfo | `/csi.v1.Identity/GetPluginInfo` |
//! | v0.3 | v1 | Probe | `/csi.v1.Identity/Probe` |
//! | v0.3 | v1 | NodeGetInfo | `/csi.v1.Node/NodeGetInfo` |
//! | v1 | v0.3 | ListVolumes | `/csi.v0.Controller/ListVolumes` |
//! | v1 | v0.3 | GetPluginInfo | `/csi.v0.Identity/GetPluginInfo` |
//! | v1 | v0.3 | Probe | `/csi.v0.Identity/Probe` |
//!
//! A call whose request has no field in either revision ([`request_empty`]: the three
//! capability calls, both ways) is half of this: its reply is translated in full, but its
//! request, which can only be the empty one, goes on as it came (`splice::conn`,
//! `Asked::Relayed`), with the same exception for bytes that are not valid protobuf.
//!
//! A call that fails only on rules about what its request holds — REQUIRED fields the gateway
//! checks first, secrets it scrubs from error messages — is [`checked`]. When the request's
//! message comes whole in its first DATA frame, [`RequestCheck::verdict`] reads it: if the
//! translation would send it on unchanged (every field one the front knows, a string of valid
//! UTF-8 or a map of them, the REQUIRED ones not empty), so does the splice
//! (`Splice::turn_relayed`). Without secrets the call is then relayed from there, reply and
//! status included; with secrets an OK reply goes as it came and an error is translated as
//! above, for the method alone, so that it is scrubbed of them. Any other request is
//! translated. Today DeleteVolume and DeleteSnapshot both ways, and a v0.3 client's
//! ControllerUnpublishVolume to a v1 plugin (asserted in the tests). The exception here: more
//! messages after the first are the plugin's to refuse.
//!
//! Everything a translated call leaves stays the same on this path: it is counted in
//! `csi_gateway_translations_total` with its dialect pair, path and outcome (an upstream
//! UNAVAILABLE, DEADLINE_EXCEEDED or CANCELLED counting as the gateway's, as a translated call
//! does), logged with both dialects, authorized and limited like any call; its reply, status
//! and trailers are the plugin's, as a translated call's are once decoded.

use std::sync::LazyLock;

use crate::dialect::Dialect;
use crate::hub::Method;
use crate::translate::errors;

/// The schema verdicts, computed at build time from the descriptors (crates/proto).
pub use csi_gateway_proto::identical::{Schema, SCHEMA};

/// A direction a rule applies to: `None` matches either dialect.
#[derive(Clone, Copy, Debug)]
pub struct Exclusion {
    pub method: &'static str,
    pub front: Option<Dialect>,
    pub upstream: Option<Dialect>,
    /// The rule, naming the code that goes beyond copying fields.
    pub rule: &'static str,
}

const fn both(method: &'static str, rule: &'static str) -> Exclusion {
    Exclusion {
        method,
        front: None,
        upstream: None,
        rule,
    }
}

const fn to(
    front: Dialect,
    upstream: Dialect,
    method: &'static str,
    rule: &'static str,
) -> Exclusion {
    Exclusion {
        method,
        front: Some(front),
        upstream: Some(upstream),
        rule,
    }
}

const CAPABILITIES: &str = "translate::capabilities: capability lists are mapped value by value \
     (UNKNOWN and values the other revision lacks are dropped; staging emulation hides \
     STAGE_UNSTAGE_VOLUME)";
const TARGET: &str = "target: a v1 client's target path is created before NodePublishVolume \
     and removed after NodeUnpublishVolume for a v0.x plugin, NOT_FOUND remapped";
const STAGING: &str =
    "staging: staging emulation (publish, unpublish, stage) for pre-staging clients";
const CAPABILITY_FIELDS: &str = "translate::volume_capability_conversions: v1.5 \
     volume_mount_group and access modes 6, 7 refused with INVALID_ARGUMENT for a v0.x plugin";
const CLONING: &str = "translate::v0_3 source_from_hub: a v1 clone source is refused for a \
     v0.3 plugin (INVALID_ARGUMENT) and left out of a reply to a v0.3 client";
const SNAPSHOT_TIME: &str = "translate::v0_3 snapshot_to_hub/snapshot_from_hub: created_at \
     (int64 ns) + status ↔ creation_time (Timestamp) + ready_to_use";

/// What the translation layer does beyond copying fields, for the RPCs and directions no
/// table of its own says so. Rules that are tables ([`errors::CODES`], [`errors::REQUIRED`],
/// secret fields) are read from them in [`why_not`]. Most of these RPCs already fail the
/// schema check; they are listed so that a schema change cannot let them through.
#[rustfmt::skip]
pub static EXCLUDED: &[Exclusion] = &[
    both("GetPluginCapabilities", CAPABILITIES),
    both("ControllerGetCapabilities", CAPABILITIES),
    both("NodeGetCapabilities", CAPABILITIES),
    // v0.2 handling: a csi.v0 plugin that answers NodeGetInfo UNIMPLEMENTED is a v0.2 plugin,
    // asked NodeGetId instead (translate::upstream call_v0_3).
    to(Dialect::V1, Dialect::V0_3, "NodeGetInfo",
        "translate::upstream call_v0_3: NodeGetId fallback for a v0.2 plugin"),
    both("NodePublishVolume", TARGET),
    both("NodeUnpublishVolume", TARGET),
    both("NodeStageVolume", STAGING),
    both("NodeUnstageVolume", STAGING),
    // v0.x `supported` ↔ v1 `confirmed` (translate::v0_3 validate_reply), and the
    // accessible_topology v1 checks.
    both("ValidateVolumeCapabilities",
        "translate::v0_3 validate_reply: supported ↔ confirmed, built from the request"),
    to(Dialect::V1, Dialect::V0_3, "CreateVolume", CLONING),
    to(Dialect::V0_3, Dialect::V1, "CreateVolume", CLONING),
    to(Dialect::V0_3, Dialect::V1, "ListVolumes", CLONING),
    to(Dialect::V1, Dialect::V0_3, "ControllerPublishVolume", CAPABILITY_FIELDS),
    to(Dialect::V1, Dialect::V0_3, "GetCapacity", CAPABILITY_FIELDS),
    both("CreateSnapshot", SNAPSHOT_TIME),
    both("ListSnapshots", SNAPSHOT_TIME),
];

/// Why `method` between a `front` client and an `upstream` plugin is not wire-identical
/// (every reason that applies); empty when it is.
pub fn why_not(s: &Schema) -> Vec<String> {
    reasons(s).into_iter().map(|r| r.text).collect()
}

/// A reason a call is not wire-identical.
struct Reason {
    text: String,
    /// It is about what a request holds, which the splice can check on its bytes
    /// ([`RequestCheck`]): a REQUIRED field left empty, a secret.
    on_request: bool,
}

fn reason(text: impl Into<String>, on_request: bool) -> Reason {
    Reason {
        text: text.into(),
        on_request,
    }
}

fn reasons(s: &Schema) -> Vec<Reason> {
    let mut out = Vec::new();
    if let Some(why) = s.why_not {
        out.push(reason(format!("schema: {why}"), false));
    }
    for e in EXCLUDED.iter().filter(|e| {
        e.method == s.method
            && e.front.is_none_or(|d| d == s.front)
            && e.upstream.is_none_or(|d| d == s.upstream)
    }) {
        out.push(reason(e.rule, false));
    }
    let method = Method::ALL.iter().copied().find(|m| m.name() == s.method);
    if let Some(method) = method {
        // A plugin's status the client's revision must receive differently.
        if errors::CODES
            .iter()
            .any(|r| r.method == method && r.upstream.has(s.upstream) && r.front.has(s.front))
        {
            out.push(reason(
                "translate::errors::CODES: a status is recoded for this direction",
                false,
            ));
        }
        // Checked by the gateway before the plugin sees the call.
        if errors::REQUIRED.iter().any(|(m, _)| *m == method) {
            out.push(reason(
                "translate::errors::REQUIRED: required fields checked first",
                true,
            ));
        }
    } else {
        out.push(reason("not a hub RPC", false));
    }
    // A translated call's error message is scrubbed of the request's secret values
    // (observe::scrub); a relayed one reaches the client as the plugin wrote it.
    let request = s.front.method(s.front_path).map(|m| m.request);
    let secrets = crate::observe::redact::secret_fields(s.front);
    if request.is_some_and(|r| secrets.iter().any(|f| f.starts_with(&format!("{r}.")))) {
        out.push(reason("observe::scrub: the request carries secrets", true));
    }
    out
}

/// The eligible calls, computed once.
static ELIGIBLE: LazyLock<Vec<&'static Schema>> =
    LazyLock::new(|| SCHEMA.iter().filter(|s| why_not(s).is_empty()).collect());

/// Every wire-identical call: (front, upstream, RPC, front path, upstream path).
pub fn eligible() -> &'static [&'static Schema] {
    &ELIGIBLE
}

/// For a call on `front_path` of `front`: the upstream dialect it is wire-identical to, and
/// the path to call there.
pub fn upstream_path(front: Dialect, front_path: &str) -> Option<(Dialect, &'static str)> {
    eligible()
        .iter()
        .find(|s| s.front == front && s.front_path == front_path)
        .map(|s| (s.upstream, s.upstream_path))
}

/// Whether the request of a call on `front_path` of `front` to an `upstream` plugin has no
/// field in either revision ([`Schema::request_empty`]): every request such a client sends
/// decodes to the one empty request, so the splice relays it as it came and translates only
/// the reply (`splice::conn`, `Asked::Relayed`). The same exception as above holds: bytes
/// that are not valid protobuf, or unknown fields, reach the plugin instead of being dropped.
pub fn request_empty(front: Dialect, front_path: &str, upstream: Dialect) -> bool {
    SCHEMA.iter().any(|s| {
        s.front == front && s.upstream == upstream && s.front_path == front_path && s.request_empty
    })
}

/// A call that would be wire-identical but for what its request may hold: REQUIRED fields
/// the gateway checks first, secrets it scrubs from error messages. The splice relays such a
/// call's request as it came when [`RequestCheck::verdict`] on its bytes says the translation
/// would copy it; any other request is translated.
#[derive(Debug)]
pub struct Checked {
    pub schema: &'static Schema,
    pub check: &'static RequestCheck,
}

/// What a front request must be for the translation to copy it: one uncompressed message
/// whose every field is one the front revision knows, a string of valid UTF-8 (what the
/// translation's decoding requires) or a map of such strings, every REQUIRED one's value not
/// empty. Built from the descriptors for requests made of strings and secret maps only, so
/// that nothing deeper needs reading.
#[derive(Debug, PartialEq, Eq)]
pub struct RequestCheck {
    fields: Vec<(u32, Field)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Text,
    Required,
    /// A `map<string, string>` of secrets.
    Secret,
}

/// What the translation would do with a request, as [`RequestCheck::verdict`] reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Send it on as it is: the call is wire-identical.
    Copied,
    /// Send it on as it is, and scrub its secrets from an error the plugin answers: the request
    /// may go on as it came, an error in its reply is the translation's.
    CopiedWithSecrets,
    /// Anything else (refuse it, drop a field): the request is translated.
    Translated,
}

impl RequestCheck {
    /// For `front`'s request of `method`: `None` unless every field is a plain string or a
    /// `map<string, string>` of secrets, and every REQUIRED field ([`errors::REQUIRED`]) is one
    /// of its strings.
    fn new(front: Dialect, method: Method) -> Option<RequestCheck> {
        use prost_reflect::Kind;
        let info = front.methods().iter().find(|m| m.method == method.name())?;
        let message = front.descriptor_pool().get_message_by_name(info.request)?;
        let secrets = crate::observe::redact::secret_fields(front);
        let required: Vec<&str> = errors::REQUIRED
            .iter()
            .filter(|(m, _)| *m == method)
            .flat_map(|(_, fields)| fields.iter().copied())
            .collect();
        let mut fields = Vec::new();
        for f in message.fields() {
            let text = matches!(f.kind(), Kind::String)
                && !f.is_list()
                && !f.is_map()
                && f.containing_oneof().is_none();
            let strings = f.is_map()
                && matches!(f.kind(), Kind::Message(entry)
                    if matches!(entry.map_entry_key_field().kind(), Kind::String)
                        && matches!(entry.map_entry_value_field().kind(), Kind::String));
            let field = match (secrets.contains(f.full_name()), text, strings) {
                (true, _, true) => Field::Secret,
                (false, true, _) if required.contains(&f.name()) => Field::Required,
                (false, true, _) => Field::Text,
                _ => return None,
            };
            fields.push((f.number(), field));
        }
        let all_there = required.iter().all(|r| {
            message
                .get_field_by_name(r)
                .is_some_and(|f| fields.contains(&(f.number(), Field::Required)))
        });
        (all_there && fields.len() <= 64).then_some(RequestCheck { fields })
    }

    /// What the translation would do with `framed`, the request as the client sent it (gRPC's
    /// 5-byte prefix and one message).
    pub fn verdict(&self, framed: &[u8]) -> Verdict {
        let Some((prefix, message)) = framed.split_first_chunk::<5>() else {
            return Verdict::Translated;
        };
        let length = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]);
        if prefix[0] != 0 || length as usize != message.len() {
            return Verdict::Translated;
        }
        // Bit i: the last value of the i-th field is not empty (a string's last value wins).
        let mut set = 0u64;
        let mut secrets = false;
        let read = each_string(message, |number, value| {
            let Some(i) = self.fields.iter().position(|(n, _)| *n == number) else {
                return false;
            };
            if self.fields[i].1 == Field::Secret {
                // A map entry: its key (1) and value (2), strings.
                secrets = true;
                return each_string(value, |n, s| matches!(n, 1 | 2) && is_text(s));
            }
            match value.is_empty() {
                true => set &= !(1 << i),
                false => set |= 1 << i,
            }
            is_text(value)
        });
        let required = self
            .fields
            .iter()
            .enumerate()
            .all(|(i, (_, f))| *f != Field::Required || set & (1 << i) != 0);
        match (read && required, secrets) {
            (false, _) => Verdict::Translated,
            (true, false) => Verdict::Copied,
            (true, true) => Verdict::CopiedWithSecrets,
        }
    }
}

/// Reads `message` as length-delimited fields only, calling `each` with each one's number
/// and bytes; false as soon as it does, or where the bytes are not such fields.
fn each_string(mut message: &[u8], mut each: impl FnMut(u32, &[u8]) -> bool) -> bool {
    use prost::encoding::{decode_key, decode_varint, WireType};
    while !message.is_empty() {
        let Ok((number, WireType::LengthDelimited)) = decode_key(&mut message) else {
            return false;
        };
        let Ok(len) = decode_varint(&mut message) else {
            return false;
        };
        let Some((value, rest)) = usize::try_from(len)
            .ok()
            .and_then(|len| message.split_at_checked(len))
        else {
            return false;
        };
        if !each(number, value) {
            return false;
        }
        message = rest;
    }
    true
}

fn is_text(value: &[u8]) -> bool {
    // Ids and secrets are mostly ASCII, which is read a word at a time.
    value.is_ascii() || std::str::from_utf8(value).is_ok()
}

/// Every call relayed once its request passes its check, computed once.
static CHECKED: LazyLock<Vec<Checked>> = LazyLock::new(|| {
    SCHEMA
        .iter()
        .filter_map(|s| {
            let reasons = reasons(s);
            if reasons.is_empty() || !reasons.iter().all(|r| r.on_request) {
                return None;
            }
            let method = Method::ALL.iter().copied().find(|m| m.name() == s.method)?;
            let check = front_check(s.front, method)?;
            Some(Checked { schema: s, check })
        })
        .collect()
});

/// The check of `front`'s request of `method`, where one can be made ([`RequestCheck::new`]);
/// looked up on every such call, so indexed.
pub fn front_check(front: Dialect, method: Method) -> Option<&'static RequestCheck> {
    // A check depends on the front's request only.
    static CHECKS: LazyLock<Vec<Option<RequestCheck>>> = LazyLock::new(|| {
        // In declaration order, as `as usize` counts them.
        let mut dialects = Dialect::ALL;
        dialects.sort();
        dialects
            .iter()
            .flat_map(|&d| Method::ALL.iter().map(move |&m| RequestCheck::new(d, m)))
            .collect()
    });
    CHECKS[front as usize * Method::ALL.len() + method as usize].as_ref()
}

/// Every call relayed once its request passes its check ([`Checked`]).
pub fn checked() -> &'static [Checked] {
    &CHECKED
}

/// Whether a call on `front_path` of `front` to an `upstream` plugin is one of [`checked`]:
/// its request goes on as it came when it passes [`front_check`].
pub fn request_checked(front: Dialect, front_path: &str, upstream: Dialect) -> bool {
    checked().iter().any(|c| {
        c.schema.front == front
            && c.schema.upstream == upstream
            && c.schema.front_path == front_path
    })
}

/// The one request a call of `method` stands for when its request has no field
/// ([`request_empty`]): the empty message, decoded once.
pub fn empty_request(method: Method) -> &'static crate::hub::Request {
    static EMPTY: LazyLock<Vec<crate::hub::Request>> = LazyLock::new(|| {
        Method::ALL
            .iter()
            .map(|&m| crate::hub::Request::decode(m, &[]).expect("an empty message decodes"))
            .collect()
    });
    // `Method::ALL` lists the methods in declaration order (asserted in the tests).
    &EMPTY[method as usize]
}

#[cfg(test)]
#[path = "identical_tests.rs"]
mod tests;
