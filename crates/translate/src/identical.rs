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
//!   ([`errors::CODES`], [`errors::REQUIRED`], the secret fields of `redact`), else
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
//! capability calls, both ways, and a v0.3 client's NodeGetId, which v1 renamed NodeGetInfo —
//! `build/identical.rs` pairs it, `RENAMED`) is half of this: its reply is translated in full, but its
//! request, which can only be the empty one, goes on as it came (`splice::conn`,
//! `Asked::Relayed`), with the same exception for bytes that are not valid protobuf.
//!
//! A call that fails only on rules about what its request holds — REQUIRED fields the gateway
//! checks first, secrets it scrubs from error messages ([`Part::Request`]) — or about its reply
//! alone, which the translation makes from the plugin's reply and the method whatever the
//! request held ([`Part::Reply`]: capability lists, clone sources, snapshot times, recoded
//! statuses), is [`checked`]. When the request's message comes whole in its first DATA frame,
//! [`RequestCheck::verdict`] reads it: if the translation would send it on unchanged (every
//! field, at any depth, one the front knows, read as the translation reads it — a string of
//! valid UTF-8, a number, a message, a map of strings — and the REQUIRED ones set), so does
//! the splice. With no rule about its reply and no secret the call is then relayed from there,
//! reply and status included (`Splice::turn_relayed`); otherwise its reply is translated as
//! above, for the method alone (`Asked::Relayed`): in full where a rule reads it, else only an
//! error, so that it is scrubbed of the secrets. Any other request is translated. The calls
//! are listed, and every request rule and reply tested against the full translation, in the
//! tests: between v0.3 and v1 most of the Controller service and a v0.3 client's node staging
//! and publishing (the gateway owns no target path of its; a plugin that requires staging has
//! it refuse a publish without, which the check reads: [`STAGED`]). The exception here: more
//! messages after the first are the plugin's to refuse.
//!
//! A request whose fields the upstream numbers differently, with the same meaning
//! ([`Schema::renumber`], from `crates/proto/build/identical.rs`'s `RENUMBERED`: a v0.3
//! client's ValidateVolumeCapabilities to a v1 plugin) is checked the same way, against its
//! renumbered fields only (one the table leaves out, which the translation does not copy, sends
//! the request to the translation), and goes on with their keys rewritten in place
//! ([`RequestCheck::renumber`]) — when its message ends with its DATA frame, so that no later
//! message reaches the plugin with the front's numbers.
//!
//! Everything a translated call leaves stays the same on this path: it is counted in
//! `csi_gateway_translations_total` with its dialect pair, path and outcome (an upstream
//! UNAVAILABLE, DEADLINE_EXCEEDED or CANCELLED counting as the gateway's, as a translated call
//! does), logged with both dialects, authorized and limited like any call; its reply, status
//! and trailers are the plugin's, as a translated call's are once decoded.

use std::sync::LazyLock;

use crate::dialect::Dialect;
use crate::errors;
use crate::hub::Method;

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
    pub part: Part,
}

/// What part of a call a rule reads or changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// What the request holds, which the splice can check on its bytes ([`RequestCheck`]): a
    /// REQUIRED field left empty, a secret.
    Request,
    /// The reply only, translated from the plugin's reply and the method alone, whatever the
    /// request held (asserted for every call it lets through, in the tests).
    Reply,
    /// Anything else: the call is translated.
    Call,
}

const fn both(method: &'static str, rule: &'static str) -> Exclusion {
    Exclusion {
        method,
        front: None,
        upstream: None,
        rule,
        part: Part::Call,
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
        part: Part::Call,
    }
}

/// A rule about the reply alone ([`Part::Reply`]).
const fn on_reply(e: Exclusion) -> Exclusion {
    Exclusion {
        part: Part::Reply,
        ..e
    }
}

const CAPABILITIES: &str = "translate::capabilities: capability lists are mapped value by value \
     (UNKNOWN and values the other revision lacks are dropped; staging emulation hides \
     STAGE_UNSTAGE_VOLUME)";
const TARGET: &str = "target: a v1 client's target path is created before NodePublishVolume \
     and removed after NodeUnpublishVolume for a v0.x plugin, NOT_FOUND remapped";
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
    on_reply(both("GetPluginCapabilities", CAPABILITIES)),
    on_reply(both("ControllerGetCapabilities", CAPABILITIES)),
    on_reply(both("NodeGetCapabilities", CAPABILITIES)),
    // v0.2 handling: a csi.v0 plugin that answers NodeGetInfo UNIMPLEMENTED is a v0.2 plugin,
    // asked NodeGetId instead (translate::upstream call_v0_3).
    to(Dialect::V1, Dialect::V0_3, "NodeGetInfo",
        "translate::upstream call_v0_3: NodeGetId fallback for a v0.2 plugin"),
    // Only a v1 client's: the gateway owns no target path of a v0.3 client
    // (`call::paths::owns_targets`).
    to(Dialect::V1, Dialect::V0_3, "NodePublishVolume", TARGET),
    to(Dialect::V1, Dialect::V0_3, "NodeUnpublishVolume", TARGET),
    // Staging emulation (publish, unpublish, stage) is for clients that predate staging, v0.1
    // and the draft, which never pair here (`staging::emulated`): between v0.3 and v1,
    // NodeStageVolume and NodeUnstageVolume are one call each.
    // v0.x `supported` ↔ v1 `confirmed`: a v0.3 plugin's answer is made into a v1 one from
    // the request (translate::v0_3 validate_reply); a v1 plugin's into a v0.3 one from the
    // reply alone (`supported` = `confirmed` present, translate::v0_3 front).
    to(Dialect::V1, Dialect::V0_3, "ValidateVolumeCapabilities",
        "translate::v0_3 validate_reply: confirmed built from the request"),
    on_reply(to(Dialect::V0_3, Dialect::V1, "ValidateVolumeCapabilities",
        "translate::v0_3 front: supported = confirmed present")),
    to(Dialect::V1, Dialect::V0_3, "CreateVolume", CLONING),
    // A v0.3 request cannot name a clone source; only the reply is read.
    on_reply(to(Dialect::V0_3, Dialect::V1, "CreateVolume", CLONING)),
    on_reply(to(Dialect::V0_3, Dialect::V1, "ListVolumes", CLONING)),
    to(Dialect::V1, Dialect::V0_3, "ControllerPublishVolume", CAPABILITY_FIELDS),
    to(Dialect::V1, Dialect::V0_3, "GetCapacity", CAPABILITY_FIELDS),
    on_reply(both("CreateSnapshot", SNAPSHOT_TIME)),
    on_reply(both("ListSnapshots", SNAPSHOT_TIME)),
];

/// Why `method` between a `front` client and an `upstream` plugin is not wire-identical
/// (every reason that applies); empty when it is.
pub fn why_not(s: &Schema) -> Vec<String> {
    reasons(s).into_iter().map(|r| r.text).collect()
}

/// A reason a call is not wire-identical.
struct Reason {
    text: String,
    part: Part,
}

fn reason(text: impl Into<String>, part: Part) -> Reason {
    Reason {
        text: text.into(),
        part,
    }
}

fn reasons(s: &Schema) -> Vec<Reason> {
    let mut out = Vec::new();
    if let Some(why) = s.why_not {
        let part = if s.request_subset {
            Part::Reply
        } else {
            Part::Call
        };
        out.push(reason(format!("schema: {why}"), part));
    }
    for e in EXCLUDED.iter().filter(|e| {
        e.method == s.method
            && e.front.is_none_or(|d| d == s.front)
            && e.upstream.is_none_or(|d| d == s.upstream)
    }) {
        out.push(reason(e.rule, e.part));
    }
    if !s.renumber.is_empty() {
        out.push(reason(
            "build/identical.rs RENUMBERED: the request's fields are renumbered (their keys \
             rewritten once checked)",
            Part::Request,
        ));
    }
    let method = Method::ALL.iter().copied().find(|m| m.name() == s.method);
    if let Some(method) = method {
        // A plugin's status the client's revision must receive differently: read from the
        // method and the two dialects alone (`errors::recode`).
        if errors::CODES
            .iter()
            .any(|r| r.method == method && r.upstream.has(s.upstream) && r.front.has(s.front))
        {
            out.push(reason(
                "translate::errors::CODES: a status is recoded for this direction",
                Part::Reply,
            ));
        }
        // Checked by the gateway before the plugin sees the call.
        if errors::REQUIRED.iter().any(|(m, _)| *m == method) {
            out.push(reason(
                "translate::errors::REQUIRED: required fields checked first",
                Part::Request,
            ));
        }
    } else {
        out.push(reason("not a hub RPC", Part::Call));
    }
    // A translated call's error message is scrubbed of the request's secret values
    // (observe::scrub); a relayed one reaches the client as the plugin wrote it.
    let request = s.front.method(s.front_path).map(|m| m.request);
    let secrets = crate::redact::secret_fields(s.front);
    if request.is_some_and(|r| secrets.iter().any(|f| f.starts_with(&format!("{r}.")))) {
        out.push(reason(
            "observe::scrub: the request carries secrets",
            Part::Request,
        ));
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

/// A call that would be wire-identical but for what its request may hold (REQUIRED fields
/// the gateway checks first, secrets it scrubs from error messages) and for rules about its
/// reply alone. The splice relays such a call's request as it came when
/// [`RequestCheck::verdict`] on its bytes says the translation would copy it; any other
/// request is translated.
#[derive(Debug)]
pub struct Checked {
    pub schema: &'static Schema,
    pub check: &'static RequestCheck,
    /// Its reply is translated, for the method alone, even when the request holds no
    /// secret: a rule about the reply applies ([`Part::Reply`]).
    pub reply_translated: bool,
}

/// What a front request must be for the translation to copy it: one uncompressed message
/// whose every field, at any depth, is one the front revision knows, read as the translation's
/// decoding reads it (a string of valid UTF-8, a bool or enum as a varint, a nested message
/// that passes the same check, a `map<string, string>`), and every REQUIRED field
/// ([`errors::REQUIRED`]) set: a string's last value not empty, a message or oneof present.
/// Built from the descriptors for requests made of such fields only.
#[derive(Debug, PartialEq, Eq)]
pub struct RequestCheck {
    root: Shape,
    /// One bit per REQUIRED field, each set by the field that marks it.
    required: u64,
    /// The top-level fields as the upstream numbers them, where it numbers them differently
    /// ([`Schema::renumber`]): `root` holds only these, and [`RequestCheck::renumber`] rewrites
    /// a request that passed before it goes on.
    renumber: &'static [(u32, u32)],
}

/// The fields of one message.
#[derive(Debug, PartialEq, Eq)]
struct Shape {
    fields: Vec<(u32, Field)>,
}

#[derive(Debug, PartialEq, Eq)]
struct Field {
    kind: Kind,
    /// The REQUIRED field this one is (a string's last value decides) or, for a message or a
    /// oneof member, makes present.
    marks: u64,
    /// The REQUIRED oneof this field is a member of: any member makes it present.
    oneof_marks: u64,
}

#[derive(Debug, PartialEq, Eq)]
enum Kind {
    Text,
    /// A varint the translation copies as it reads it: up to `max` (an `int32`, enum or bool
    /// past `i32::MAX` is left to the translation, which cuts it to 32 bits).
    Number {
        max: u64,
    },
    Message(Shape),
    /// A repeated message: each element is checked on its own, `element` the REQUIRED fields
    /// inside one (`volume_capabilities[].access_mode`), which every element must set.
    Messages {
        shape: Shape,
        element: u64,
    },
    /// A `map<string, string>`; its entries are the request's secrets when `secret`.
    Strings {
        secret: bool,
    },
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

/// Nesting past this is not checked (CSI requests nest three deep at most).
const MAX_DEPTH: usize = 4;

impl RequestCheck {
    /// For `front`'s request of `method`: `None` unless every field, at any depth, is a string,
    /// a bool, an enum, a message of such fields or a `map<string, string>` (secrets only as
    /// such maps), and every REQUIRED field ([`errors::REQUIRED`]) is one of them, or a oneof.
    /// `staged`: the plugin requires staging, and the gateway refuses a NodePublishVolume
    /// without `staging_target_path` itself ([`STAGED`]).
    fn new(front: Dialect, method: Method, staged: bool) -> Option<RequestCheck> {
        let info = front.methods().iter().find(|m| m.method == method.name())?;
        let message = front.descriptor_pool().get_message_by_name(info.request)?;
        let staged = STAGED.iter().filter(|(m, _)| staged && *m == method);
        let required: Vec<&str> = errors::REQUIRED
            .iter()
            .chain(staged)
            .filter(|(m, _)| *m == method)
            .flat_map(|(_, fields)| fields.iter().copied())
            .collect();
        if required.len() > 64 {
            return None;
        }
        let renumber = renumbered(front, method.name());
        let builder = Builder {
            required: &required,
            secrets: crate::redact::secret_fields(front),
            renumber,
        };
        let mut found = 0u64;
        let root = builder.shape(&message, "", 0, &mut found)?;
        let all = u64::MAX
            .checked_shr(64 - required.len() as u32)
            .unwrap_or(0);
        (found == all).then_some(RequestCheck {
            root,
            required: all,
            renumber,
        })
    }

    /// Whether a request that passes goes on with its fields renumbered
    /// ([`RequestCheck::renumber`]).
    pub fn renumbers(&self) -> bool {
        !self.renumber.is_empty()
    }

    /// Rewrites in place the keys of `message`'s top-level fields to the upstream's numbers:
    /// for a request [`RequestCheck::verdict`] let through, whose top-level fields are all
    /// listed. A key keeps its length (every number is below 16, asserted at build time, and a
    /// key padded with continuation bytes keeps them), so the message's length, its frame's
    /// and the window it takes stay the same. Stops at bytes that are not such fields.
    pub fn renumber(&self, message: &mut [u8]) {
        let mut at = 0;
        while at < message.len() {
            let Some((key, key_len)) = varint_at(message, at) else {
                return;
            };
            let (number, wire) = ((key >> 3) as u32, (key & 7) as u8);
            let Some(&(_, to)) = self.renumber.iter().find(|(from, _)| *from == number) else {
                return;
            };
            message[at] = (message[at] & 0x80) | ((to << 3) as u8 | wire);
            at += key_len;
            let Some((value, value_len)) = varint_at(message, at) else {
                return;
            };
            at += value_len;
            if wire == 2 {
                match usize::try_from(value).ok().and_then(|n| at.checked_add(n)) {
                    Some(end) => at = end,
                    None => return,
                }
            }
        }
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
        let mut read = Read::default();
        match (
            read.message(&self.root, message) && read.set == self.required,
            read.secrets,
        ) {
            (false, _) => Verdict::Translated,
            (true, false) => Verdict::Copied,
            (true, true) => Verdict::CopiedWithSecrets,
        }
    }
}

/// [`Schema::renumber`] of `front`'s request of `method`: v0.3 and v1 pair only with each
/// other, so the front and the method name the schema.
fn renumbered(front: Dialect, method: &str) -> &'static [(u32, u32)] {
    SCHEMA
        .iter()
        .find(|s| s.front == front && s.method == method)
        .map_or(&[], |s| s.renumber)
}

/// The varint at `at` in `bytes` and its length.
#[inline]
fn varint_at(bytes: &[u8], at: usize) -> Option<(u64, usize)> {
    let mut rest = bytes.get(at..)?;
    let before = rest.len();
    let value = varint(&mut rest)?;
    Some((value, before - rest.len()))
}

/// A varint read off the front of `bytes`, as prost reads it: most keys and lengths in a CSI
/// request are one byte, read here without prost's general path.
#[inline(always)]
fn varint(bytes: &mut &[u8]) -> Option<u64> {
    match bytes.first() {
        Some(&b) if b < 0x80 => {
            *bytes = &bytes[1..];
            Some(u64::from(b))
        }
        _ => prost::encoding::decode_varint(bytes).ok(),
    }
}

/// The wire types a request check reads.
const VARINT: u8 = 0;
const LENGTH_DELIMITED: u8 = 2;

/// A field's key read off the front of `bytes`: its number and wire type, where prost's
/// `decode_key` would read one (a number from 1 to 2^29 - 1, a key within 32 bits).
#[inline(always)]
fn key(bytes: &mut &[u8]) -> Option<(u32, u8)> {
    let key = u32::try_from(varint(bytes)?).ok()?;
    let (number, wire) = (key >> 3, (key & 7) as u8);
    (number >= 1 && wire <= 5).then_some((number, wire))
}

/// Builds a [`Shape`] from a descriptor, giving each REQUIRED field its bit.
struct Builder<'a> {
    required: &'a [&'a str],
    secrets: &'a std::collections::HashSet<String>,
    /// Where not empty, the only top-level fields a request may hold ([`Schema::renumber`]).
    renumber: &'static [(u32, u32)],
}

impl Builder<'_> {
    fn bit(&self, path: &str) -> u64 {
        self.required
            .iter()
            .position(|r| *r == path)
            .map_or(0, |i| 1 << i)
    }

    fn shape(
        &self,
        message: &prost_reflect::MessageDescriptor,
        prefix: &str,
        depth: usize,
        found: &mut u64,
    ) -> Option<Shape> {
        use prost_reflect::Kind as K;
        if depth > MAX_DEPTH {
            return None;
        }
        let mut fields = Vec::new();
        for f in message.fields() {
            if depth == 0
                && !self.renumber.is_empty()
                && !self.renumber.iter().any(|(from, _)| *from == f.number())
            {
                // Not copied: a request that sets it is translated.
                continue;
            }
            let path = format!("{prefix}{}", f.name());
            let secret = self.secrets.contains(f.full_name());
            let strings = f.is_map()
                && matches!(f.kind(), K::Message(entry)
                    if matches!(entry.map_entry_key_field().kind(), K::String)
                        && matches!(entry.map_entry_value_field().kind(), K::String));
            let kind = match f.kind() {
                _ if strings => Kind::Strings { secret },
                _ if secret || f.is_map() => return None,
                K::String => Kind::Text,
                _ if f.is_list() && !matches!(f.kind(), K::Message(_)) => return None,
                K::Bool | K::Enum(_) | K::Int32 => Kind::Number {
                    max: i32::MAX as u64,
                },
                K::Int64 | K::Uint64 => Kind::Number { max: u64::MAX },
                K::Message(m) if !f.is_list() => {
                    Kind::Message(self.shape(&m, &format!("{path}."), depth + 1, found)?)
                }
                K::Message(m) => {
                    let outside = *found;
                    let shape = self.shape(&m, &format!("{path}[]."), depth + 1, found)?;
                    Kind::Messages {
                        shape,
                        element: *found & !outside,
                    }
                }
                _ => return None,
            };
            // A repeated string has no last value to require.
            let marks = match kind {
                Kind::Text if f.is_list() => 0,
                Kind::Text | Kind::Message(_) | Kind::Messages { .. } => self.bit(&path),
                _ => 0,
            };
            let oneof_marks = f
                .containing_oneof()
                .map_or(0, |o| self.bit(&format!("{prefix}{}", o.name())));
            *found |= marks | oneof_marks;
            fields.push((
                f.number(),
                Field {
                    kind,
                    marks,
                    oneof_marks,
                },
            ));
        }
        Some(Shape { fields })
    }
}

/// What reading a request found so far.
#[derive(Default)]
struct Read {
    /// The REQUIRED fields set (a string's by its last value).
    set: u64,
    secrets: bool,
}

impl Read {
    /// Whether `bytes` is a `shape` message the translation would copy.
    fn message(&mut self, shape: &Shape, mut bytes: &[u8]) -> bool {
        while !bytes.is_empty() {
            let Some((number, wire)) = key(&mut bytes) else {
                return false;
            };
            let Some((_, field)) = shape.fields.iter().find(|(n, _)| *n == number) else {
                return false;
            };
            let Some(value) = varint(&mut bytes) else {
                return false;
            };
            self.set |= field.oneof_marks;
            match (wire, &field.kind) {
                // What prost reads and the translation copies; a plugin reads the same from
                // these bytes.
                (VARINT, Kind::Number { max }) if value <= *max => continue,
                (_, Kind::Number { .. }) => return false,
                (LENGTH_DELIMITED, _) => {}
                _ => return false,
            }
            let Some((value, rest)) = usize::try_from(value)
                .ok()
                .and_then(|len| bytes.split_at_checked(len))
            else {
                return false;
            };
            if !self.field(field, value) {
                return false;
            }
            bytes = rest;
        }
        true
    }

    fn field(&mut self, field: &Field, value: &[u8]) -> bool {
        match &field.kind {
            Kind::Text => {
                match value.is_empty() {
                    true => self.set &= !field.marks,
                    false => self.set |= field.marks,
                }
                is_text(value)
            }
            Kind::Message(shape) => {
                self.set |= field.marks;
                self.message(shape, value)
            }
            Kind::Messages { shape, element } => {
                // Each element sets its own REQUIRED fields; a list without one leaves them
                // unset, and the request to the translation (safe whatever the list must be).
                let before = self.set | field.marks;
                self.set &= !element;
                let whole = self.message(shape, value) && self.set & element == *element;
                self.set |= before;
                whole
            }
            Kind::Strings { secret } => {
                // A map entry: its key (1) and value (2), strings.
                self.secrets |= *secret;
                each_string(value, |n, s| matches!(n, 1 | 2) && is_text(s))
            }
            Kind::Number { .. } => false,
        }
    }
}

/// Reads `message` as length-delimited fields only, calling `each` with each one's number
/// and bytes; false as soon as it does, or where the bytes are not such fields.
fn each_string(mut message: &[u8], mut each: impl FnMut(u32, &[u8]) -> bool) -> bool {
    while !message.is_empty() {
        let Some((number, LENGTH_DELIMITED)) = key(&mut message) else {
            return false;
        };
        let Some(len) = varint(&mut message) else {
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
            // A request with no field is relayed anyway (`request_empty`).
            if s.request_empty || reasons.is_empty() || reasons.iter().any(|r| r.part == Part::Call)
            {
                return None;
            }
            let method = Method::ALL.iter().copied().find(|m| m.name() == s.method)?;
            let check = front_check(s.front, method, false)?;
            Some(Checked {
                schema: s,
                check,
                reply_translated: reasons.iter().any(|r| r.part == Part::Reply),
            })
        })
        .collect()
});

/// Fields the gateway itself requires of a request when the plugin requires staging: it
/// refuses a NodePublishVolume without staging (`translate::upstream::call_upstream`).
pub static STAGED: &[(Method, &[&str])] = &[(Method::NodePublishVolume, &["staging_target_path"])];

/// The check of `front`'s request of `method`, where one can be made ([`RequestCheck::new`]),
/// for a plugin that `requires_staging` or not; looked up on every such call, so indexed.
pub fn front_check(
    front: Dialect,
    method: Method,
    requires_staging: bool,
) -> Option<&'static RequestCheck> {
    // A check depends on the front's request, and on the plugin's staging alone.
    static CHECKS: LazyLock<Vec<[Option<RequestCheck>; 2]>> = LazyLock::new(|| {
        // In declaration order, as `as usize` counts them.
        let mut dialects = Dialect::ALL;
        dialects.sort();
        dialects
            .iter()
            .flat_map(|&d| {
                Method::ALL
                    .iter()
                    .map(move |&m| [false, true].map(|staged| RequestCheck::new(d, m, staged)))
            })
            .collect()
    });
    CHECKS[front as usize * Method::ALL.len() + method as usize][usize::from(requires_staging)]
        .as_ref()
}

/// Every call relayed once its request passes its check ([`Checked`]).
pub fn checked() -> &'static [Checked] {
    &CHECKED
}

/// Whether a call on `front_path` of `front` to an `upstream` plugin is one of [`checked`]
/// (its request goes on as it came when it passes [`front_check`]), and if so whether its
/// reply is translated ([`Checked::reply_translated`]).
pub fn request_checked(front: Dialect, front_path: &str, upstream: Dialect) -> Option<bool> {
    checked()
        .iter()
        .find(|c| {
            c.schema.front == front
                && c.schema.upstream == upstream
                && c.schema.front_path == front_path
        })
        .map(|c| c.reply_translated)
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
