//! Our compiled descriptors, rendered in the shape of `csi-wire/<dialect>/schema.json`, must
//! equal the official facts field for field: messages, nested messages, fields (name, number,
//! JSON name, label, type, oneof, map key/value), enums and their values, services, gRPC paths,
//! streaming flags, standard and custom options, extensions.

use std::collections::BTreeMap;
use std::path::PathBuf;

use csi_gateway::dialect::Dialect;
use prost_reflect::{
    Cardinality, DescriptorPool, DynamicMessage, EnumDescriptor, FieldDescriptor, FileDescriptor,
    Kind, MessageDescriptor, Syntax,
};
use serde_json::{json, Map, Value};

fn fixture(dialect: Dialect) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/csi-wire")
        .join(dialect.name())
        .join("schema.json");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn csi_file(pool: &DescriptorPool) -> FileDescriptor {
    pool.files()
        .find(|f| !f.package_name().starts_with("google."))
        .unwrap()
}

fn kind_name(kind: &Kind) -> (String, &'static str) {
    let scalar = |s: &str| (s.to_string(), "scalar");
    match kind {
        Kind::Double => scalar("double"),
        Kind::Float => scalar("float"),
        Kind::Int32 => scalar("int32"),
        Kind::Int64 => scalar("int64"),
        Kind::Uint32 => scalar("uint32"),
        Kind::Uint64 => scalar("uint64"),
        Kind::Sint32 => scalar("sint32"),
        Kind::Sint64 => scalar("sint64"),
        Kind::Fixed32 => scalar("fixed32"),
        Kind::Fixed64 => scalar("fixed64"),
        Kind::Sfixed32 => scalar("sfixed32"),
        Kind::Sfixed64 => scalar("sfixed64"),
        Kind::Bool => scalar("bool"),
        Kind::String => scalar("string"),
        Kind::Bytes => scalar("bytes"),
        Kind::Message(m) => (m.full_name().to_string(), "message"),
        Kind::Enum(e) => (e.full_name().to_string(), "enum"),
    }
}

/// Standard options that are set (`deprecated`, `go_package`, …) and custom ones (extensions).
fn split_options(options: &DynamicMessage) -> (Map<String, Value>, Map<String, Value>) {
    let mut std = Map::new();
    for (f, v) in options.fields() {
        std.insert(f.name().to_string(), option_value(v));
    }
    let mut custom = Map::new();
    for (e, v) in options.extensions() {
        custom.insert(e.name().to_string(), option_value(v));
    }
    (std, custom)
}

fn option_value(v: &prost_reflect::Value) -> Value {
    match v {
        prost_reflect::Value::Bool(b) => json!(b),
        prost_reflect::Value::String(s) => json!(s),
        other => json!(format!("{other:?}")),
    }
}

fn put_options(
    obj: &mut Map<String, Value>,
    options: &DynamicMessage,
    usage: &mut Usage,
    full_name: &str,
) {
    let (std, custom) = split_options(options);
    if !std.is_empty() {
        obj.insert("options".into(), Value::Object(std));
    }
    if !custom.is_empty() {
        for k in custom.keys() {
            usage
                .entry(k.clone())
                .or_default()
                .push(full_name.to_string());
        }
        obj.insert("custom_options".into(), Value::Object(custom));
    }
}

type Usage = BTreeMap<String, Vec<String>>;

fn render_field(f: &FieldDescriptor, usage: &mut Usage) -> Value {
    let mut o = Map::new();
    o.insert("name".into(), json!(f.name()));
    o.insert("number".into(), json!(f.number()));
    o.insert("json_name".into(), json!(f.json_name()));
    let label = if f.cardinality() == Cardinality::Repeated {
        "repeated"
    } else {
        "optional"
    };
    o.insert("label".into(), json!(label));
    if f.is_map() {
        let entry = f.kind().as_message().unwrap().clone();
        let (k, kk) = kind_name(&entry.map_entry_key_field().kind());
        let (v, vk) = kind_name(&entry.map_entry_value_field().kind());
        o.insert("type".into(), json!(entry.full_name()));
        o.insert("type_kind".into(), json!("map"));
        o.insert(
            "map".into(),
            json!({"key": k, "key_kind": kk, "value": v, "value_kind": vk}),
        );
    } else {
        let (t, tk) = kind_name(&f.kind());
        o.insert("type".into(), json!(t));
        o.insert("type_kind".into(), json!(tk));
    }
    if let Some(oneof) = f.containing_oneof().filter(|o| !o.is_synthetic()) {
        o.insert("oneof".into(), json!(oneof.name()));
    }
    put_options(&mut o, &f.options(), usage, f.full_name());
    Value::Object(o)
}

fn render_message(m: &MessageDescriptor, usage: &mut Usage) -> Value {
    let mut o = Map::new();
    o.insert("full_name".into(), json!(m.full_name()));
    o.insert("name".into(), json!(m.name()));
    if let Some(p) = m.parent_message() {
        o.insert("parent".into(), json!(p.full_name()));
    }
    let mut sorted: Vec<FieldDescriptor> = m.fields().collect();
    sorted.sort_by_key(|f| f.number());
    o.insert(
        "fields".into(),
        Value::Array(sorted.iter().map(|f| render_field(f, usage)).collect()),
    );
    let source: Vec<&str> = m
        .descriptor_proto()
        .field
        .iter()
        .map(|f| f.name())
        .collect();
    if source.iter().copied().ne(sorted.iter().map(|f| f.name())) {
        o.insert("declaration_order".into(), json!(source));
    }
    let oneofs: Vec<Value> = m
        .oneofs()
        .filter(|o| !o.is_synthetic())
        .map(|o| json!({"name": o.name(), "fields": o.fields().map(|f| f.name().to_string()).collect::<Vec<_>>()}))
        .collect();
    if !oneofs.is_empty() {
        o.insert("oneofs".into(), Value::Array(oneofs));
    }
    put_options(&mut o, &m.options(), usage, m.full_name());
    Value::Object(o)
}

fn render_enum(e: &EnumDescriptor, usage: &mut Usage) -> Value {
    let mut o = Map::new();
    o.insert("full_name".into(), json!(e.full_name()));
    o.insert("name".into(), json!(e.name()));
    if let Some(p) = e.parent_message() {
        o.insert("parent".into(), json!(p.full_name()));
    }
    let mut sorted: Vec<_> = e.values().collect();
    sorted.sort_by_key(|v| v.number());
    let values: Vec<Value> = sorted
        .iter()
        .map(|v| {
            let mut vo = Map::new();
            vo.insert("name".into(), json!(v.name()));
            vo.insert("number".into(), json!(v.number()));
            put_options(
                &mut vo,
                &v.options(),
                usage,
                &format!("{}.{}", e.full_name(), v.name()),
            );
            Value::Object(vo)
        })
        .collect();
    o.insert("values".into(), Value::Array(values));
    let source: Vec<&str> = e
        .enum_descriptor_proto()
        .value
        .iter()
        .map(|v| v.name())
        .collect();
    if source.iter().copied().ne(sorted.iter().map(|v| v.name())) {
        o.insert("declaration_order".into(), json!(source));
    }
    put_options(&mut o, &e.options(), usage, e.full_name());
    Value::Object(o)
}

/// Our descriptors in the shape of `schema.json` (the keys that state schema facts).
fn render(dialect: Dialect) -> Map<String, Value> {
    let pool = dialect.descriptor_pool();
    let file = csi_file(pool);
    let mut usage = Usage::new();
    let mut out = Map::new();
    out.insert("package".into(), json!(file.package_name()));
    out.insert(
        "syntax".into(),
        json!(if file.syntax() == Syntax::Proto3 {
            "proto3"
        } else {
            "proto2"
        }),
    );
    out.insert(
        "dependencies".into(),
        json!(file
            .dependencies()
            .map(|d| d.name().to_string())
            .collect::<Vec<_>>()),
    );
    out.insert(
        "file_options".into(),
        Value::Object(split_options(&file.options()).0),
    );

    let mut services: Vec<_> = file.services().collect();
    services.sort_by(|a, b| a.name().cmp(b.name()));
    let mut rendered_services = Vec::new();
    let mut rpc_types = std::collections::BTreeSet::new();
    for s in &services {
        let mut methods: Vec<_> = s.methods().collect();
        methods.sort_by(|a, b| a.name().cmp(b.name()));
        let methods: Vec<Value> = methods
            .iter()
            .map(|m| {
                rpc_types.insert(m.input().full_name().to_string());
                rpc_types.insert(m.output().full_name().to_string());
                let mut mo = Map::new();
                mo.insert("name".into(), json!(m.name()));
                mo.insert(
                    "path".into(),
                    json!(format!("/{}/{}", s.full_name(), m.name())),
                );
                mo.insert("request".into(), json!(m.input().full_name()));
                mo.insert("response".into(), json!(m.output().full_name()));
                mo.insert("client_streaming".into(), json!(m.is_client_streaming()));
                mo.insert("server_streaming".into(), json!(m.is_server_streaming()));
                put_options(&mut mo, &m.options(), &mut usage, m.full_name());
                Value::Object(mo)
            })
            .collect();
        let mut so = Map::new();
        so.insert("full_name".into(), json!(s.full_name()));
        so.insert("name".into(), json!(s.name()));
        put_options(&mut so, &s.options(), &mut usage, s.full_name());
        so.insert("methods".into(), Value::Array(methods));
        rendered_services.push(Value::Object(so));
    }
    out.insert("services".into(), Value::Array(rendered_services));
    out.insert("rpc_message_types".into(), json!(rpc_types));

    let mut messages: Vec<_> = pool
        .all_messages()
        .filter(|m| m.parent_file() == file && !m.is_map_entry())
        .collect();
    messages.sort_by(|a, b| a.full_name().cmp(b.full_name()));
    out.insert(
        "messages".into(),
        Value::Array(
            messages
                .iter()
                .map(|m| render_message(m, &mut usage))
                .collect(),
        ),
    );

    let mut enums: Vec<_> = pool
        .all_enums()
        .filter(|e| e.parent_file() == file)
        .collect();
    enums.sort_by(|a, b| a.full_name().cmp(b.full_name()));
    out.insert(
        "enums".into(),
        Value::Array(enums.iter().map(|e| render_enum(e, &mut usage)).collect()),
    );

    let mut exts: Vec<_> = file.extensions().collect();
    exts.sort_by(|a, b| a.full_name().cmp(b.full_name()));
    let exts: Vec<Value> = exts
        .iter()
        .map(|x| {
            json!({"full_name": x.full_name(), "name": x.name(), "number": x.number(),
                   "extendee": x.containing_message().full_name(), "type": kind_name(&x.kind()).0,
                   "label": if x.cardinality() == Cardinality::Repeated { "repeated" } else { "optional" }})
        })
        .collect();
    out.insert("extensions".into(), Value::Array(exts));
    for names in usage.values_mut() {
        names.sort();
    }
    out.insert("custom_option_usage".into(), json!(usage));
    out
}

/// Every difference between `want` and `got`, with its JSON path.
fn diff(path: &str, want: &Value, got: &Value, out: &mut Vec<String>) {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            for (k, wv) in w {
                match g.get(k) {
                    Some(gv) => diff(&format!("{path}.{k}"), wv, gv, out),
                    None => out.push(format!("{path}.{k}: missing, want {wv}")),
                }
            }
            for k in g.keys().filter(|k| !w.contains_key(*k)) {
                out.push(format!("{path}.{k}: unexpected {}", g[k]));
            }
        }
        (Value::Array(w), Value::Array(g)) => {
            for (i, (wv, gv)) in w.iter().zip(g).enumerate() {
                let label = wv
                    .get("full_name")
                    .or(wv.get("name"))
                    .map(|n| n.to_string())
                    .unwrap_or(i.to_string());
                diff(&format!("{path}[{label}]"), wv, gv, out);
            }
            if w.len() != g.len() {
                out.push(format!("{path}: {} entries, want {}", g.len(), w.len()));
            }
        }
        _ if want != got => out.push(format!("{path}: got {got}, want {want}")),
        _ => {}
    }
}

fn check(dialect: Dialect) {
    let want = fixture(dialect);
    let got = render(dialect);
    let mut problems = Vec::new();
    for key in got.keys() {
        diff(key, &want[key], &got[key], &mut problems);
    }
    // The external well-known types our fields use must be the same ones.
    let pool = dialect.descriptor_pool();
    for ext in want["external_types"].as_array().unwrap() {
        let m = pool
            .get_message_by_name(ext["full_name"].as_str().unwrap())
            .unwrap();
        for f in ext["fields"].as_array().unwrap() {
            let ours = m.get_field_by_name(f["name"].as_str().unwrap()).unwrap();
            assert_eq!(ours.number() as u64, f["number"].as_u64().unwrap());
            assert_eq!(kind_name(&ours.kind()).0, f["type"].as_str().unwrap());
        }
    }
    assert!(
        problems.is_empty(),
        "{dialect}: {} differences from schema.json:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn v0_1_oneof_matches_schema() {
    check(Dialect::V0_1Oneof);
}

#[test]
fn v0_1_matches_schema() {
    check(Dialect::V0_1);
}

#[test]
fn v0_3_matches_schema() {
    check(Dialect::V0_3);
}

#[test]
fn v1_matches_schema() {
    check(Dialect::V1);
}

#[test]
fn generated_method_tables_match_schema_paths() {
    for d in Dialect::ALL {
        let want = fixture(d);
        let mut paths: Vec<&str> = want["services"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|s| {
                s["methods"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|m| m["path"].as_str().unwrap())
            })
            .collect();
        let mut ours: Vec<&str> = d.methods().iter().map(|m| m.path).collect();
        paths.sort();
        ours.sort();
        assert_eq!(ours, paths, "{d}");
    }
}
