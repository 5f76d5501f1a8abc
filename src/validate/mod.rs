//! Spec validation of a message in its dialect: one generic walk over the message decoded with
//! the dialect's descriptors (prost-reflect), checking the rules of [`rules`] — required
//! fields, size limits of ids, names and maps — and that every enum value is one the dialect
//! defines. Requests are checked as the client sent them, replies as the client receives them.

pub mod idempotency;
pub mod rules;

use std::collections::HashMap;
use std::fmt;
use std::sync::OnceLock;

use prost_reflect::{DynamicMessage, FieldDescriptor, Kind, MapKey, ReflectMessage, Value};

use crate::dialect::Dialect;

/// One broken rule: where (a field path such as `volume.volume_id`) and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub field: String,
    pub rule: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.field, self.rule)
    }
}

/// Whether a violation is a missing field (the draft answers those with its own error code).
impl Violation {
    pub fn is_missing(&self) -> bool {
        self.rule == MISSING
    }
}

const MISSING: &str = "is REQUIRED";

/// Each dialect's rules, looked up by message name without the package.
struct Rules {
    required: HashMap<(Dialect, &'static str), Vec<&'static str>>,
    any_request: HashMap<Dialect, Vec<&'static str>>,
    strings: HashMap<(Dialect, &'static str), usize>,
}

fn table() -> &'static Rules {
    static RULES: OnceLock<Rules> = OnceLock::new();
    RULES.get_or_init(|| {
        let mut r = Rules {
            required: HashMap::new(),
            any_request: HashMap::new(),
            strings: HashMap::new(),
        };
        for (dialects, message, fields) in rules::REQUIRED {
            for &d in *dialects {
                let list = if *message == rules::ANY_REQUEST {
                    r.any_request.entry(d).or_default()
                } else {
                    r.required.entry((d, message)).or_default()
                };
                list.extend_from_slice(fields);
            }
        }
        for (dialects, field, limit) in rules::LIMITED_STRINGS {
            for &d in *dialects {
                r.strings.insert((d, field), *limit);
            }
        }
        r
    })
}

/// Checks `bytes`, a `message` (full name) of `dialect`. An undecodable message is one
/// violation.
pub fn check(dialect: Dialect, message: &str, bytes: &[u8]) -> Vec<Violation> {
    let Some(desc) = dialect.descriptor_pool().get_message_by_name(message) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    match DynamicMessage::decode(desc, bytes) {
        Ok(m) => walk(dialect, &m, "", &mut out),
        Err(e) => out.push(Violation {
            field: short(message).to_string(),
            rule: format!("does not decode: {e}"),
        }),
    }
    out
}

/// The message name without its package (`csi.v1.Volume` → `Volume`, and the draft's nested
/// `csi.CreateVolumeResponse.Result` → `CreateVolumeResponse.Result`).
fn short(full: &str) -> &str {
    let mut rest = full;
    for p in ["csi.v1.", "csi.v0.", "csi."] {
        if let Some(s) = full.strip_prefix(p) {
            rest = s;
            break;
        }
    }
    rest
}

fn walk(dialect: Dialect, m: &DynamicMessage, prefix: &str, out: &mut Vec<Violation>) {
    let desc = m.descriptor();
    let name = short(desc.full_name());
    let t = table();
    let mut required: Vec<&str> = t
        .required
        .get(&(dialect, name))
        .cloned()
        .unwrap_or_default();
    if name.ends_with("Request") && !name.contains('.') {
        if let Some(any) = t.any_request.get(&dialect) {
            required.extend(any.iter().filter(|f| desc.get_field_by_name(f).is_some()));
        }
    }
    for field in required {
        if let Some(f) = desc.get_field_by_name(field) {
            if !present(m, &f) {
                out.push(violation(prefix, f.name(), MISSING.into()));
            }
        }
    }
    for (f, value) in m.fields() {
        check_field(dialect, &f, value, prefix, out);
    }
}

fn check_field(
    dialect: Dialect,
    f: &FieldDescriptor,
    value: &Value,
    prefix: &str,
    out: &mut Vec<Violation>,
) {
    let path = format!("{prefix}{}", f.name());
    match value {
        Value::String(s) => {
            if let Some(&limit) = table().strings.get(&(dialect, f.name())) {
                if s.len() > limit {
                    out.push(violation(
                        prefix,
                        f.name(),
                        format!("is {} bytes, over the spec's limit of {limit}", s.len()),
                    ));
                }
            }
        }
        Value::EnumNumber(n) => enum_in_range(f, *n, &path, out),
        Value::Message(m) => walk(dialect, m, &format!("{path}."), out),
        Value::List(items) => {
            if rules::LIMITED_LISTS.contains(&f.name()) {
                let total: usize = items.iter().filter_map(|v| v.as_str()).map(str::len).sum();
                if total > rules::MAP_BYTES {
                    out.push(violation(
                        prefix,
                        f.name(),
                        format!(
                            "holds {total} bytes, over the spec's limit of {}",
                            rules::MAP_BYTES
                        ),
                    ));
                }
            }
            for (i, item) in items.iter().enumerate() {
                match item {
                    Value::Message(m) => walk(dialect, m, &format!("{path}[{i}]."), out),
                    Value::EnumNumber(n) => enum_in_range(f, *n, &format!("{path}[{i}]"), out),
                    _ => {}
                }
            }
        }
        Value::Map(map) => {
            let mut total = 0;
            for (k, v) in map {
                if let (MapKey::String(k), Value::String(v)) = (k, v) {
                    total += k.len() + v.len();
                }
                if let Value::Message(m) = v {
                    walk(dialect, m, &format!("{path}[{k:?}]."), out);
                }
            }
            if total > rules::MAP_BYTES {
                out.push(violation(
                    prefix,
                    f.name(),
                    format!(
                        "holds {total} bytes, over the spec's limit of {}",
                        rules::MAP_BYTES
                    ),
                ));
            }
        }
        _ => {}
    }
}

fn enum_in_range(f: &FieldDescriptor, n: i32, path: &str, out: &mut Vec<Violation>) {
    if let Kind::Enum(e) = f.kind() {
        if e.get_value(n).is_none() {
            out.push(Violation {
                field: path.to_string(),
                rule: format!("is {n}, not a value of {}", e.full_name()),
            });
        }
    }
}

/// Present as the spec means it: a non-empty string, a set message, a non-empty list or map.
fn present(m: &DynamicMessage, f: &FieldDescriptor) -> bool {
    if f.is_list() || f.is_map() || matches!(f.kind(), Kind::Message(_)) {
        return m.has_field(f) && !is_empty_collection(&m.get_field(f));
    }
    match f.kind() {
        Kind::String | Kind::Bytes => m.has_field(f),
        // Scalars at their default are not on the wire: absence cannot be told.
        _ => true,
    }
}

fn is_empty_collection(v: &Value) -> bool {
    match v {
        Value::List(l) => l.is_empty(),
        Value::Map(m) => m.is_empty(),
        _ => false,
    }
}

fn violation(prefix: &str, field: &str, rule: String) -> Violation {
    Violation {
        field: format!("{prefix}{field}"),
        rule,
    }
}

/// The violations as one line, for a log or an error message.
pub fn describe(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(Violation::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests;
