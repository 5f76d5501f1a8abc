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
//! `Asked::Empty`), with the same exception for bytes that are not valid protobuf.
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
    let mut out = Vec::new();
    if let Some(why) = s.why_not {
        out.push(format!("schema: {why}"));
    }
    for e in EXCLUDED.iter().filter(|e| {
        e.method == s.method
            && e.front.is_none_or(|d| d == s.front)
            && e.upstream.is_none_or(|d| d == s.upstream)
    }) {
        out.push(e.rule.to_string());
    }
    let method = Method::ALL.iter().copied().find(|m| m.name() == s.method);
    if let Some(method) = method {
        // A plugin's status the client's revision must receive differently.
        if errors::CODES
            .iter()
            .any(|r| r.method == method && r.upstream.has(s.upstream) && r.front.has(s.front))
        {
            out.push("translate::errors::CODES: a status is recoded for this direction".into());
        }
        // Checked by the gateway before the plugin sees the call.
        if errors::REQUIRED.iter().any(|(m, _)| *m == method) {
            out.push("translate::errors::REQUIRED: required fields checked first".into());
        }
    } else {
        out.push("not a hub RPC".into());
    }
    // A translated call's error message is scrubbed of the request's secret values
    // (observe::scrub); a relayed one reaches the client as the plugin wrote it.
    let request = s.front.method(s.front_path).map(|m| m.request);
    let secrets = crate::observe::redact::secret_fields(s.front);
    if request.is_some_and(|r| secrets.iter().any(|f| f.starts_with(&format!("{r}.")))) {
        out.push("observe::scrub: the request carries secrets".into());
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
/// the reply (`splice::conn`, `Asked::Empty`). The same exception as above holds: bytes
/// that are not valid protobuf, or unknown fields, reach the plugin instead of being dropped.
pub fn request_empty(front: Dialect, front_path: &str, upstream: Dialect) -> bool {
    SCHEMA.iter().any(|s| {
        s.front == front && s.upstream == upstream && s.front_path == front_path && s.request_empty
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
