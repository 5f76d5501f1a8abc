//! The generator of each spoke's `generated.rs`: the same-name field copies between a dialect's
//! messages and their hub (v1) counterparts, read from the dialects' descriptors — what
//! kubernetes-csi/csi-proxy's `conversion_generated.go` is to its hand-written `conversion.go`.
//!
//! Why a committed file and not `build.rs` output: a newcomer reads the copies (and what is left
//! to `overrides.rs`) in the tree, reviews a change to them in a diff, and the build keeps one job
//! (the dialects' protos). The test below fails when a committed file is stale; regenerate with
//!
//! ```sh
//! CSI_GATEWAY_REGEN=1 cargo test --locked --lib translate::codegen
//! ```
//!
//! The rule, per message pair (dialect message → hub message and back):
//! - a field with the same name, label and scalar type (or map of the same scalars, or the same
//!   well-known message) is moved across (no clone);
//! - a field of a message type that has its own pair in the spoke's list goes through that
//!   pair's conversion;
//! - everything else (renamed or retyped fields, enums, oneofs, fields one side lacks) is left to
//!   the spoke's `overrides.rs`: the generated function first calls the override of the same
//!   name with the source and a default target (so a refusal there comes before any nested
//!   conversion's error, as the spec's field order had it), then moves the copied fields into
//!   the target; its doc comment names the fields it left.
//!
//! A pair marked [`Kind::Hand`] has no generated copies: `overrides.rs` converts it whole, and
//! the generated conversions of the messages that contain it call that.

use std::fmt::Write as _;

use prost::Message as _;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, FieldDescriptorProto, FileDescriptorSet};

/// How a pair is converted.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Kind {
    /// Generated copies, then the override for what is left.
    Gen,
    /// Converted whole in `overrides.rs` (`<name>_to_hub`, `<name>_from_hub`).
    Hand,
}

/// One spoke: its module, its descriptor set, and the message pairs it converts
/// (dialect message path, hub message path; nested messages as `Outer.Inner`), in groups.
pub(crate) struct Spoke {
    pub module: &'static str,
    pub label: &'static str,
    pub fds: &'static [u8],
    pub pairs: &'static [&'static [(&'static str, &'static str, Kind)]],
}

impl Spoke {
    fn pairs(&self) -> impl Iterator<Item = &'static (&'static str, &'static str, Kind)> {
        self.pairs.iter().flat_map(|g| g.iter())
    }
}

use Kind::{Gen, Hand};

/// What every pre-v1 spoke converts alike: the capability (converted whole), the requests of the
/// RPCs v0.1.0 already had, and the capacity range.
const COMMON: &[(&str, &str, Kind)] = &[
    ("VolumeCapability", "VolumeCapability", Hand),
    ("CapacityRange", "CapacityRange", Gen),
    ("CreateVolumeRequest", "CreateVolumeRequest", Gen),
    ("DeleteVolumeRequest", "DeleteVolumeRequest", Gen),
    (
        "ControllerPublishVolumeRequest",
        "ControllerPublishVolumeRequest",
        Gen,
    ),
    (
        "ControllerUnpublishVolumeRequest",
        "ControllerUnpublishVolumeRequest",
        Gen,
    ),
    (
        "ValidateVolumeCapabilitiesRequest",
        "ValidateVolumeCapabilitiesRequest",
        Gen,
    ),
    ("ListVolumesRequest", "ListVolumesRequest", Gen),
    ("GetCapacityRequest", "GetCapacityRequest", Gen),
    ("NodePublishVolumeRequest", "NodePublishVolumeRequest", Gen),
    (
        "NodeUnpublishVolumeRequest",
        "NodeUnpublishVolumeRequest",
        Gen,
    ),
];

pub(crate) const SPOKES: &[Spoke] = &[
    Spoke {
        module: "v0_3",
        label: "v0.3",
        fds: crate::dialect::proto::v0_3::FILE_DESCRIPTOR_SET,
        pairs: &[
            COMMON,
            &[
                ("Topology", "Topology", Gen),
                ("TopologyRequirement", "TopologyRequirement", Gen),
                ("Volume", "Volume", Gen),
                ("Snapshot", "Snapshot", Gen),
                ("CreateVolumeResponse", "CreateVolumeResponse", Gen),
                (
                    "ControllerPublishVolumeResponse",
                    "ControllerPublishVolumeResponse",
                    Gen,
                ),
                ("ListVolumesResponse", "ListVolumesResponse", Gen),
                (
                    "ListVolumesResponse.Entry",
                    "ListVolumesResponse.Entry",
                    Gen,
                ),
                ("GetCapacityResponse", "GetCapacityResponse", Gen),
                (
                    "ControllerGetCapabilitiesResponse",
                    "ControllerGetCapabilitiesResponse",
                    Gen,
                ),
                ("CreateSnapshotRequest", "CreateSnapshotRequest", Gen),
                ("CreateSnapshotResponse", "CreateSnapshotResponse", Gen),
                ("DeleteSnapshotRequest", "DeleteSnapshotRequest", Gen),
                ("ListSnapshotsRequest", "ListSnapshotsRequest", Gen),
                ("ListSnapshotsResponse", "ListSnapshotsResponse", Gen),
                (
                    "ListSnapshotsResponse.Entry",
                    "ListSnapshotsResponse.Entry",
                    Gen,
                ),
                (
                    "GetPluginCapabilitiesResponse",
                    "GetPluginCapabilitiesResponse",
                    Gen,
                ),
                ("GetPluginInfoResponse", "GetPluginInfoResponse", Gen),
                ("ProbeResponse", "ProbeResponse", Gen),
                (
                    "NodeGetCapabilitiesResponse",
                    "NodeGetCapabilitiesResponse",
                    Gen,
                ),
                ("NodeGetIdResponse", "NodeGetInfoResponse", Gen),
                ("NodeGetInfoResponse", "NodeGetInfoResponse", Gen),
                ("NodeStageVolumeRequest", "NodeStageVolumeRequest", Gen),
                ("NodeUnstageVolumeRequest", "NodeUnstageVolumeRequest", Gen),
            ],
        ],
    },
    Spoke {
        module: "v0_1",
        label: "v0.1",
        fds: crate::dialect::proto::v0_1::FILE_DESCRIPTOR_SET,
        pairs: &[
            COMMON,
            &[
                ("VolumeInfo", "Volume", Gen),
                ("CreateVolumeResponse", "CreateVolumeResponse", Gen),
                (
                    "ControllerPublishVolumeResponse",
                    "ControllerPublishVolumeResponse",
                    Gen,
                ),
                ("ListVolumesResponse", "ListVolumesResponse", Gen),
                (
                    "ListVolumesResponse.Entry",
                    "ListVolumesResponse.Entry",
                    Gen,
                ),
                ("GetCapacityResponse", "GetCapacityResponse", Gen),
                (
                    "ControllerGetCapabilitiesResponse",
                    "ControllerGetCapabilitiesResponse",
                    Gen,
                ),
                ("GetPluginInfoResponse", "GetPluginInfoResponse", Gen),
                ("GetNodeIDResponse", "NodeGetInfoResponse", Gen),
            ],
        ],
    },
    // The draft's replies wrap their fields in a `Result` (the `oneof reply`'s other branch is
    // the `Error`): the pairs are those `Result`s.
    Spoke {
        module: "v0_1_oneof",
        label: "v0.1-oneof",
        fds: crate::dialect::proto::v0_1_oneof::FILE_DESCRIPTOR_SET,
        pairs: &[
            COMMON,
            &[
                ("VolumeInfo", "Volume", Gen),
                ("CreateVolumeResponse.Result", "CreateVolumeResponse", Gen),
                (
                    "ControllerPublishVolumeResponse.Result",
                    "ControllerPublishVolumeResponse",
                    Gen,
                ),
                ("ListVolumesResponse.Result", "ListVolumesResponse", Gen),
                (
                    "ListVolumesResponse.Result.Entry",
                    "ListVolumesResponse.Entry",
                    Gen,
                ),
                ("GetCapacityResponse.Result", "GetCapacityResponse", Gen),
                (
                    "ControllerGetCapabilitiesResponse.Result",
                    "ControllerGetCapabilitiesResponse",
                    Gen,
                ),
                ("GetPluginInfoResponse.Result", "GetPluginInfoResponse", Gen),
                ("GetNodeIDResponse.Result", "NodeGetInfoResponse", Gen),
            ],
        ],
    },
];

/// Splits a proto name into words the way prost-build (heck) does: `GetNodeIDResponse` →
/// `Get Node ID Response`.
fn words(s: &str) -> Vec<String> {
    let c: Vec<char> = s.chars().collect();
    let mut out: Vec<String> = Vec::new();
    let mut cur = String::new();
    for i in 0..c.len() {
        if c[i] == '_' {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            continue;
        }
        let boundary = i > 0
            && c[i].is_uppercase()
            && (c[i - 1].is_lowercase()
                || c[i - 1].is_ascii_digit()
                || (c[i - 1].is_uppercase() && c.get(i + 1).is_some_and(|n| n.is_lowercase())));
        if boundary && !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
        cur.push(c[i]);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn camel(s: &str) -> String {
    words(s)
        .iter()
        .map(|w| {
            let mut ch = w.chars();
            let first = ch
                .next()
                .map(|f| f.to_ascii_uppercase())
                .unwrap_or_default();
            std::iter::once(first)
                .chain(ch.map(|x| x.to_ascii_lowercase()))
                .collect::<String>()
        })
        .collect()
}

fn snake(s: &str) -> String {
    words(s)
        .iter()
        .map(|w| w.to_ascii_lowercase())
        .collect::<Vec<_>>()
        .join("_")
}

fn field_ident(name: &str) -> String {
    match name {
        "type" => "r#type".to_string(),
        _ => name.to_string(),
    }
}

/// `ListVolumesResponse.Entry` → `list_volumes_response::Entry`.
fn rust_path(prefix: &str, path: &str) -> String {
    let parts: Vec<&str> = path.split('.').collect();
    let mut s = format!("{prefix}::");
    for p in &parts[..parts.len() - 1] {
        let _ = write!(s, "{}::", snake(p));
    }
    s.push_str(&camel(parts[parts.len() - 1]));
    s
}

/// The conversion functions' stem: `ListVolumesResponse.Entry` → `list_volumes_response_entry`.
fn stem(path: &str) -> String {
    path.split('.').map(snake).collect::<Vec<_>>().join("_")
}

struct Schema {
    package: String,
    messages: Vec<DescriptorProto>,
}

impl Schema {
    fn load(fds: &[u8]) -> Schema {
        let set = FileDescriptorSet::decode(fds).expect("a dialect's descriptor set decodes");
        let file = set
            .file
            .into_iter()
            .find(|f| !f.package().starts_with("google."))
            .expect("a CSI file in the set");
        Schema {
            package: file.package().to_string(),
            messages: file.message_type,
        }
    }

    fn find(&self, path: &str) -> &DescriptorProto {
        let mut parts = path.split('.');
        let first = parts.next().unwrap();
        let mut m = self
            .messages
            .iter()
            .find(|m| m.name() == first)
            .unwrap_or_else(|| panic!("no message {path} in {}", self.package));
        for p in parts {
            m = m
                .nested_type
                .iter()
                .find(|n| n.name() == p)
                .unwrap_or_else(|| panic!("no message {path} in {}", self.package));
        }
        m
    }

    /// `.csi.v0.ListVolumesResponse.Entry` → `ListVolumesResponse.Entry` (None: another package).
    fn local<'a>(&self, type_name: &'a str) -> Option<&'a str> {
        type_name
            .strip_prefix('.')?
            .strip_prefix(self.package.as_str())?
            .strip_prefix('.')
    }

    /// The (key, value) types of a map field, if it is one.
    fn map_entry(&self, f: &FieldDescriptorProto) -> Option<(Type, Type)> {
        if f.r#type() != Type::Message || f.label() != Label::Repeated {
            return None;
        }
        let entry = self.find(self.local(f.type_name())?);
        if !entry.options.as_ref().is_some_and(|o| o.map_entry()) {
            return None;
        }
        Some((entry.field[0].r#type(), entry.field[1].r#type()))
    }
}

/// How one field crosses from one side to the other.
enum Cross {
    /// Moved (or copied: a number, a bool) as it is.
    Move,
    /// Through the conversion of the pair with this stem (repeated or not).
    Convert(String, bool),
}

fn copy_of(
    spoke: &Spoke,
    from: (&Schema, &FieldDescriptorProto),
    to: (&Schema, &FieldDescriptorProto),
    to_hub: bool,
) -> Option<Cross> {
    let ((fs, f), (ts, t)) = (from, to);
    if f.oneof_index.is_some() || t.oneof_index.is_some() || f.label() != t.label() {
        return None;
    }
    if f.r#type() != t.r#type() {
        return None;
    }
    match f.r#type() {
        Type::Enum | Type::Group => None,
        Type::Message => {
            if let (Some(a), Some(b)) = (fs.map_entry(f), ts.map_entry(t)) {
                let scalar = |x: Type| !matches!(x, Type::Message | Type::Enum | Type::Group);
                return (a == b && scalar(a.0) && scalar(a.1)).then_some(Cross::Move);
            }
            match (fs.local(f.type_name()), ts.local(t.type_name())) {
                (None, None) => (f.type_name() == t.type_name()
                    && f.type_name().starts_with(".google.protobuf."))
                .then_some(Cross::Move),
                (Some(a), Some(b)) => {
                    let (dialect, hub) = if to_hub { (a, b) } else { (b, a) };
                    spoke
                        .pairs()
                        .any(|p| p.0 == dialect && p.1 == hub)
                        .then(|| Cross::Convert(stem(dialect), f.label() == Label::Repeated))
                }
                _ => None,
            }
        }
        _ => Some(Cross::Move),
    }
}

/// One direction of one pair.
fn render_fn(
    spoke: &Spoke,
    out: &mut String,
    (dialect_path, hub_path): (&str, &str),
    (ds, hs): (&Schema, &Schema),
    to_hub: bool,
) {
    let (from_s, to_s) = if to_hub { (ds, hs) } else { (hs, ds) };
    let (from_m, to_m) = if to_hub {
        (ds.find(dialect_path), hs.find(hub_path))
    } else {
        (hs.find(hub_path), ds.find(dialect_path))
    };
    let (from_ty, to_ty) = if to_hub {
        (rust_path("d", dialect_path), rust_path("v1", hub_path))
    } else {
        (rust_path("v1", hub_path), rust_path("d", dialect_path))
    };
    let name = format!(
        "{}_{}",
        stem(dialect_path),
        if to_hub { "to_hub" } else { "from_hub" }
    );
    // (field, the expression that moves it out of `from` and converts it)
    let mut copies: Vec<(String, String)> = Vec::new();
    let mut done_to = Vec::new();
    let mut left_from = Vec::new();
    for f in &from_m.field {
        let copy = to_m
            .field
            .iter()
            .find(|t| t.name() == f.name())
            .and_then(|t| copy_of(spoke, (from_s, f), (to_s, t), to_hub));
        let id = field_ident(f.name());
        let Some(copy) = copy else {
            left_from.push(f.name().to_string());
            continue;
        };
        done_to.push(f.name().to_string());
        let moved = match copy {
            Cross::Move => format!("from.{id}"),
            Cross::Convert(stem, repeated) => {
                let conv = format!("{stem}_{}", if to_hub { "to_hub" } else { "from_hub" });
                let hand = spoke
                    .pairs()
                    .any(|p| stem == self::stem(p.0) && p.2 == Hand);
                let conv = if hand {
                    format!("overrides::{conv}")
                } else {
                    conv
                };
                if repeated {
                    format!("from.{id}.into_iter().map({conv}).collect::<Result<_, _>>()?")
                } else {
                    format!("from.{id}.map({conv}).transpose()?")
                }
            }
        };
        copies.push((id, moved));
    }
    let left_to: Vec<String> = to_m
        .field
        .iter()
        .map(|t| t.name().to_string())
        .filter(|t| !done_to.contains(t))
        .collect();
    let list = |v: &[String]| {
        if v.is_empty() {
            "-".to_string()
        } else {
            v.join(", ")
        }
    };
    let (dir_from, dir_to) = if to_hub {
        (spoke.label, "v1")
    } else {
        ("v1", spoke.label)
    };
    let _ = writeln!(
        out,
        "/// {dir_from} `{}` → {dir_to} `{}`.",
        if to_hub { dialect_path } else { hub_path },
        if to_hub { hub_path } else { dialect_path },
    );
    let overridden = !left_from.is_empty() || !left_to.is_empty();
    if overridden {
        let _ = writeln!(
            out,
            "/// Left to `overrides::{name}`: from {} / to {}.",
            list(&left_from),
            list(&left_to)
        );
    }
    // One line a conversion, like a table (the file is not rustfmt'd: `#[rustfmt::skip]`).
    let mut fields: Vec<String> = copies.iter().map(|(id, e)| format!("{id}: {e}")).collect();
    if !overridden {
        // Every field of the target is copied: one struct literal.
        let _ = writeln!(
            out,
            "pub(crate) fn {name}(from: {from_ty}) -> Result<{to_ty}, Status> {{ Ok({to_ty} {{ {} }}) }}",
            fields.join(", ")
        );
        return;
    }
    // The override runs first, so its refusals come before any conversion's error; the copies
    // then move out of what it left.
    fields.push("..to".to_string());
    let _ = writeln!(
        out,
        "pub(crate) fn {name}(mut from: {from_ty}) -> Result<{to_ty}, Status> {{ \
         let mut to = {to_ty}::default(); overrides::{name}(&mut from, &mut to)?; Ok({to_ty} {{ {} }}) }}",
        fields.join(", ")
    );
}

/// The whole `generated.rs` of `spoke`.
pub(crate) fn render(spoke: &Spoke) -> String {
    let ds = Schema::load(spoke.fds);
    let hs = Schema::load(crate::dialect::proto::v1::FILE_DESCRIPTOR_SET);
    let mut out = format!(
        "// @generated by `translate::codegen` from the {label} and v1 descriptors: do not edit.\n\
         // Regenerate: CSI_GATEWAY_REGEN=1 cargo test --locked --lib translate::codegen\n\
         \n\
         //! Same-name field copies between CSI {label} and the hub (v1); everything else is in\n\
         //! `overrides.rs` (see `translate::codegen` for the rule).\n\
         #![allow(clippy::all)]\n\
         \n\
         use tonic::Status;\n\
         \n\
         use super::overrides;\n\
         use crate::dialect::proto::{module} as d;\n\
         use crate::hub::v1;\n\n",
        label = spoke.label,
        module = spoke.module,
    );
    for &(dialect, hub, kind) in spoke.pairs() {
        if kind == Hand {
            continue;
        }
        for to_hub in [true, false] {
            render_fn(spoke, &mut out, (dialect, hub), (&ds, &hs), to_hub);
            out.push('\n');
        }
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}

fn file_of(spoke: &Spoke) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src")
        .join(spoke.module)
        .join("generated.rs")
}

/// Fails when a committed `generated.rs` is not what the descriptors give (or writes it, with
/// `CSI_GATEWAY_REGEN=1`).
#[test]
fn generated_files_are_current() {
    let regen = std::env::var_os("CSI_GATEWAY_REGEN").is_some();
    for spoke in SPOKES {
        let want = render(spoke);
        let path = file_of(spoke);
        if regen {
            std::fs::write(&path, &want).unwrap();
            continue;
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            have == want,
            "{} is stale: regenerate it with CSI_GATEWAY_REGEN=1 cargo test --locked --lib \
             translate::codegen",
            path.display()
        );
    }
}

#[test]
fn names_follow_prost() {
    assert_eq!(camel("GetNodeIDResponse"), "GetNodeIdResponse");
    assert_eq!(snake("GetNodeIDResponse"), "get_node_id_response");
    assert_eq!(
        rust_path("d", "ListVolumesResponse.Entry"),
        "d::list_volumes_response::Entry"
    );
    assert_eq!(
        stem("ListVolumesResponse.Entry"),
        "list_volumes_response_entry"
    );
}
