//! Build-time half of the wire-identical fast path (the gateway's `crates/translate/src/identical.rs`): for
//! every RPC that v0.3 and v1 both have, whether its messages are wire-compatible between the
//! two, decided from the descriptors alone.
//!
//! For a client of dialect F calling a plugin of dialect U, the call's bytes may pass unchanged
//! (only the gRPC path rewritten) when the exact translation of those bytes is the identity:
//! - every field of F's request exists in U's request, and
//! - every field of U's reply exists in F's reply,
//!
//! where "exists" is checked recursively through nested messages, oneofs and maps: the same
//! field number, the same declared type (so the same wire type and the same scalar kind: an
//! `int32` is not an `int64`), the same label (singular, repeated, proto3 `optional`), fields
//! of one oneof in one oneof on the other side, and for an enum, every value the sending side
//! has present on the receiving side with the same number and the same name (or a rename of
//! the same meaning, [`ENUM_RENAMES`]). Field names are free to differ: they never travel.
//!
//! Nothing here knows what the translation layer does beyond copying fields (error code tables,
//! capability filters, required-field checks, …): those exclusions are applied on top, in
//! the gateway's `crates/translate/src/identical.rs`, from the translation tables themselves.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, EnumDescriptorProto, FileDescriptorSet};

/// Enum values renamed between revisions with the same meaning: (old name, new name).
const ENUM_RENAMES: &[(&str, &str)] = &[
    // v1.0 renamed PluginCapability.Service.Type ACCESSIBILITY_CONSTRAINTS (v0.3) to
    // VOLUME_ACCESSIBILITY_CONSTRAINTS; same number, same meaning ("volume accessibility
    // constraints", the topology the plugin reports).
    (
        "ACCESSIBILITY_CONSTRAINTS",
        "VOLUME_ACCESSIBILITY_CONSTRAINTS",
    ),
];

/// (front dialect, RPC, [(front field, upstream field)]).
type Renumbered = (&'static str, &'static str, &'static [(u32, u32)]);

/// Requests whose fields one revision numbers differently from the other, with the same
/// meaning: (front dialect, RPC, [(front field, upstream field)]), top-level fields only. The
/// request is compared as a subset with its fields renumbered so; a front field not listed is
/// one the translation does not copy (it refuses or drops it), so a request holding one is
/// translated. The gateway rewrites the listed fields' keys in place, so every number is
/// below 16 (a key of one byte both ways; asserted below).
const RENUMBERED: &[Renumbered] = &[
    // v1.0 put `volume_context` (v0.3's `volume_attributes`, 3) at 2 and moved
    // `volume_capabilities` from 2 to 3; v0.3's `accessible_topology` (4) was removed, and the
    // translation refuses a request that sets it.
    (
        "V0_3",
        "ValidateVolumeCapabilities",
        &[(1, 1), (2, 3), (3, 2)],
    ),
];

/// RPCs one revision renamed: (front dialect, front RPC, the upstream's RPC of the same
/// service). Paired like RPCs of the same name; the schema's `method` is the front's.
const RENAMED: &[(&str, &str, &str)] = &[
    // v1.0 kept only NodeGetInfo of v0.3's two node id calls (v0.2's NodeGetId and v0.3's
    // NodeGetInfo); a v0.3 client's NodeGetId is the v1 plugin's NodeGetInfo.
    ("V0_3", "NodeGetId", "NodeGetInfo"),
];

/// Every message and enum of a descriptor set (imports included), by full name with the
/// leading dot, as field `type_name`s spell them.
struct Index<'a> {
    messages: HashMap<String, &'a DescriptorProto>,
    enums: HashMap<String, &'a EnumDescriptorProto>,
}

impl<'a> Index<'a> {
    fn new(fds: &'a FileDescriptorSet) -> Index<'a> {
        let mut index = Index {
            messages: HashMap::new(),
            enums: HashMap::new(),
        };
        for file in &fds.file {
            let prefix = match file.package() {
                "" => String::new(),
                p => format!(".{p}"),
            };
            for e in &file.enum_type {
                index.enums.insert(format!("{prefix}.{}", e.name()), e);
            }
            for m in &file.message_type {
                index.add(&prefix, m);
            }
        }
        index
    }

    fn add(&mut self, prefix: &str, m: &'a DescriptorProto) {
        let name = format!("{prefix}.{}", m.name());
        for e in &m.enum_type {
            self.enums.insert(format!("{name}.{}", e.name()), e);
        }
        for n in &m.nested_type {
            self.add(&name, n);
        }
        self.messages.insert(name, m);
    }
}

/// Whether every field of `from`'s message `a` can be read, with the same meaning, as `to`'s
/// message `b`; `Err` names the first field or value that cannot.
struct Subset<'a> {
    from: &'a Index<'a>,
    to: &'a Index<'a>,
    /// Message pairs checked or being checked (CSI has no recursive messages, but a pair met
    /// twice needs checking once).
    seen: HashSet<(String, String)>,
}

impl Subset<'_> {
    fn message(&mut self, a: &str, b: &str) -> Result<(), String> {
        self.renumbered(a, b, &[])
    }

    /// [`Subset::message`] with `a`'s own fields renumbered by `renumber` (`RENUMBERED`),
    /// those it does not list left out; none when it is empty.
    fn renumbered(&mut self, a: &str, b: &str, renumber: &[(u32, u32)]) -> Result<(), String> {
        if renumber.is_empty() && !self.seen.insert((a.to_string(), b.to_string())) {
            return Ok(());
        }
        let ma = self.from.messages.get(a).ok_or(format!("{a}: not found"))?;
        let mb = self.to.messages.get(b).ok_or(format!("{b}: not found"))?;
        let a_name = a.trim_start_matches('.');
        let b_name = b.trim_start_matches('.');
        // Fields of one oneof on the sending side must share one oneof on the receiving side
        // (a later member clears an earlier one only within a oneof).
        let (mut oneofs, mut back) = (HashMap::new(), HashMap::new());
        for fa in &ma.field {
            let what = format!("{a_name}.{} (field {})", fa.name(), fa.number());
            let number = match renumber
                .iter()
                .find(|(from, _)| *from == fa.number() as u32)
            {
                Some(&(_, to)) => to as i32,
                None if renumber.is_empty() => fa.number(),
                None => continue,
            };
            let Some(fb) = mb.field.iter().find(|f| f.number() == number) else {
                return Err(format!("{what} has no counterpart in {b_name}"));
            };
            if fa.r#type() != fb.r#type() {
                return Err(format!(
                    "{what} is {:?} but {b_name}.{} is {:?}",
                    fa.r#type(),
                    fb.name(),
                    fb.r#type()
                ));
            }
            if fa.label() != fb.label() || fa.proto3_optional() != fb.proto3_optional() {
                return Err(format!(
                    "{what} is {} but {b_name}.{} is {}",
                    label(fa.label(), fa.proto3_optional()),
                    fb.name(),
                    label(fb.label(), fb.proto3_optional())
                ));
            }
            let (oa, ob) = (fa.oneof_index, fb.oneof_index);
            match (oa, ob) {
                (None, None) => {}
                (Some(oa), Some(ob)) => {
                    if *oneofs.entry(oa).or_insert(ob) != ob || *back.entry(ob).or_insert(oa) != oa
                    {
                        return Err(format!("{what} is in a oneof that {b_name} does not keep"));
                    }
                }
                (Some(_), None) => {
                    return Err(format!("{what} is in a oneof, but not in {b_name}"))
                }
                (None, Some(_)) => {
                    return Err(format!("{what} is not in a oneof, but is in {b_name}"))
                }
            }
            match fa.r#type() {
                Type::Message | Type::Group => self.message(fa.type_name(), fb.type_name())?,
                Type::Enum => self.enumeration(fa.type_name(), fb.type_name())?,
                _ => {}
            }
        }
        Ok(())
    }

    fn enumeration(&self, a: &str, b: &str) -> Result<(), String> {
        let ea = self.from.enums.get(a).ok_or(format!("{a}: not found"))?;
        let eb = self.to.enums.get(b).ok_or(format!("{b}: not found"))?;
        for va in &ea.value {
            let Some(vb) = eb.value.iter().find(|v| v.number() == va.number()) else {
                return Err(format!(
                    "{}.{} = {} has no value in {}",
                    a.trim_start_matches('.'),
                    va.name(),
                    va.number(),
                    b.trim_start_matches('.')
                ));
            };
            let renamed = ENUM_RENAMES.iter().any(|&(x, y)| {
                (x, y) == (va.name(), vb.name()) || (y, x) == (va.name(), vb.name())
            });
            if va.name() != vb.name() && !renamed {
                return Err(format!(
                    "{}.{} = {} is {} in {}",
                    a.trim_start_matches('.'),
                    va.name(),
                    va.number(),
                    vb.name(),
                    b.trim_start_matches('.')
                ));
            }
        }
        Ok(())
    }
}

fn label(l: Label, proto3_optional: bool) -> &'static str {
    match (l, proto3_optional) {
        (Label::Repeated, _) => "repeated",
        (Label::Required, _) => "required",
        (_, true) => "optional",
        _ => "singular",
    }
}

/// Whether `from`'s message `a` is a subset of `to`'s message `b`, with `a`'s fields
/// renumbered by `renumber` (`RENUMBERED`) when it lists any.
fn subset(
    from: &Index<'_>,
    to: &Index<'_>,
    a: &str,
    b: &str,
    renumber: &[(u32, u32)],
) -> Result<(), String> {
    Subset {
        from,
        to,
        seen: HashSet::new(),
    }
    .renumbered(a, b, renumber)
}

/// One unary RPC of a dialect: (service, method, gRPC path, request type, reply type).
fn unary_rpcs(fds: &FileDescriptorSet) -> Vec<(String, String, String, String, String)> {
    let file = fds
        .file
        .iter()
        .find(|f| !f.package().starts_with("google."))
        .expect("a CSI file in the set");
    let mut out = Vec::new();
    for svc in &file.service {
        for m in &svc.method {
            if m.server_streaming() || m.client_streaming() {
                continue;
            }
            out.push((
                svc.name().to_string(),
                m.name().to_string(),
                format!("/{}.{}/{}", file.package(), svc.name(), m.name()),
                m.input_type().to_string(),
                m.output_type().to_string(),
            ));
        }
    }
    out
}

/// `SCHEMA`: for each (front, upstream) pair among {v0.3 → v1, v1 → v0.3} and each unary RPC
/// both dialects have (same service, same name, or as `RENAMED` pairs them), the two paths
/// and the schema verdict.
pub fn render(v0_3: &FileDescriptorSet, v1: &FileDescriptorSet) -> String {
    let dialects = [
        ("V0_3", Index::new(v0_3), unary_rpcs(v0_3)),
        ("V1", Index::new(v1), unary_rpcs(v1)),
    ];
    let mut s = String::from(
        "// @generated by build/identical.rs from the v0.3 and v1 descriptors.\n\n\
         /// Every unary RPC v0.3 and v1 both have, for each direction, with the schema verdict:\n\
         /// `why_not: None` when the front's request is a subset of the upstream's and the\n\
         /// upstream's reply a subset of the front's; `request_subset` when the first half\n\
         /// holds (with the request's fields renumbered by `renumber`, where it lists any);\n\
         /// `request_empty` when neither request has a field.\n\
         pub static SCHEMA: &[Schema] = &[\n",
    );
    for (f, u) in [(0, 1), (1, 0)] {
        let (front_name, front, front_rpcs) = &dialects[f];
        let (upstream_name, upstream, upstream_rpcs) = &dialects[u];
        for (svc, method, front_path, front_req, front_resp) in front_rpcs {
            let upstream_method = RENAMED
                .iter()
                .find(|(d, m, _)| d == front_name && *m == method.as_str())
                .map_or(method.as_str(), |r| r.2);
            let Some((_, _, upstream_path, up_req, up_resp)) = upstream_rpcs
                .iter()
                .find(|r| &r.0 == svc && r.1 == upstream_method)
            else {
                continue;
            };
            let renumber: &[(u32, u32)] = RENUMBERED
                .iter()
                .find(|(d, m, _)| d == front_name && *m == method.as_str())
                .map_or(&[], |r| r.2);
            assert!(
                renumber.iter().all(|&(a, b)| a < 16 && b < 16),
                "RENUMBERED {method}: a field number of 16 or more takes a key of two bytes"
            );
            assert!(
                renumber.iter().all(|&(a, b)| renumber
                    .iter()
                    .filter(|r| r.0 == a || r.1 == b)
                    .count()
                    == 1),
                "RENUMBERED {method}: each field once on each side"
            );
            let request = subset(front, upstream, front_req, up_req, renumber);
            let request_subset = request.is_ok();
            let verdict = request.map_err(|e| format!("request: {e}")).and_then(|()| {
                subset(upstream, front, up_resp, front_resp, &[]).map_err(|e| format!("reply: {e}"))
            });
            let empty = |index: &Index<'_>, name: &str| {
                index.messages.get(name).is_some_and(|m| m.field.is_empty())
            };
            let request_empty = empty(front, front_req) && empty(upstream, up_req);
            let why_not = match verdict {
                Ok(()) => "None".to_string(),
                Err(e) => format!("Some({e:?})"),
            };
            let _ = writeln!(
                s,
                "    Schema {{ front: Dialect::{front_name}, upstream: Dialect::{upstream_name}, method: {method:?}, front_path: {front_path:?}, upstream_path: {upstream_path:?}, why_not: {why_not}, request_subset: {request_subset}, request_empty: {request_empty}, renumber: &{renumber:?} }},"
            );
        }
    }
    s.push_str("];\n");
    s
}
