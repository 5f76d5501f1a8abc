//! The layering rules, checked on the source: arrows point down.
//!
//! ```text
//! assembly    lib.rs, gateway.rs (assembles the pieces and starts them), bin/
//!    ↓
//! around      ops/ (the operations endpoint: /metrics, /healthz, /readyz, /livez, and its
//!             client), check.rs, conformance.rs (any CSI endpoint checked), embedded.rs (the
//!             reference backend in-process)
//!    ↓
//! connection  src/splice/: the listeners (listener.rs and socket.rs: the UNIX socket;
//!             appliance.rs: the appliance listener over mutual TLS), the one front
//!             (conn/: every client connection, attached to an upstream connection of its own
//!             or not), its I/O (io.rs) and one connection's limits (limits.rs)
//!    ↓
//! call        src/call/: the route table (router.rs), what every call needs (Shared, and
//!             the budgets all connections share: budget.rs), plan, answer, rescue,
//!             protection, checks, the gateway's own services (services.rs, services/) and
//!             the pipeline to the plugin (upstream.rs: target paths in paths/, staging
//!             emulation in staging/)
//!    ↓
//! below       config, observe, metrics, grpc, validate, store, upstream, tls, backoff.rs,
//!             disk.rs, endpoint.rs
//!    ↓
//! crates      csi-gateway-translate (everything that knows two dialects, on the protos alone),
//!             csi-gateway-wire (frames and HPACK: no I/O, no tokio)
//! ```
//!
//! Every file of `src/` is in one layer ([`LAYERS`]; a file in none fails
//! `every_file_is_in_a_layer`). A module may name what is in its layer or below it, never what
//! is above (`crate::…` paths and `super::…` paths that leave a module are both read). Folders
//! name each other without a cycle. The crates' rules are their manifests' (a crate cannot name
//! what it does not depend on), so this reads those too.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers of `src/`, top down: each a name and the places in it, a place being a path
/// under `src/` (a file, or a folder and everything in it). A place may not name a module of
/// a layer above its own.
const LAYERS: &[(&str, &[&str])] = &[
    ("assembly", &["lib.rs", "gateway.rs", "bin"]),
    (
        "around",
        &["ops", "check.rs", "conformance.rs", "embedded.rs"],
    ),
    ("connection", &["splice"]),
    ("call", &["call"]),
    (
        "below",
        &[
            "config",
            "observe",
            "metrics",
            "grpc",
            "validate",
            "store",
            "upstream",
            "tls",
            "backoff.rs",
            "disk.rs",
            "endpoint.rs",
        ],
    ),
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file at `path` (a file, or a folder searched whole), sorted.
fn rust_files(path: &Path) -> Vec<PathBuf> {
    if path.is_file() {
        return vec![path.to_path_buf()];
    }
    let mut out = Vec::new();
    for entry in std::fs::read_dir(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())) {
        let p = entry.unwrap().path();
        if p.is_dir() {
            out.extend(rust_files(&p));
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// `file`'s path under `src/`, with `/` between its parts.
fn relative(file: &Path) -> String {
    let rel = file.strip_prefix(src()).unwrap();
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// The module a place is (`splice`, `gateway`, `call::staging`): what naming it looks like.
fn module_of_place(place: &str) -> String {
    place.trim_end_matches(".rs").replace('/', "::")
}

/// The layer `file` (under `src/`, `/`-separated) is in, by its place: its index in [`LAYERS`].
fn layer_of(file: &str) -> Option<usize> {
    LAYERS.iter().position(|(_, places)| {
        places
            .iter()
            .any(|p| file == *p || file.starts_with(&format!("{p}/")))
    })
}

/// The code of a source file without its comments (doc comments name modules in prose).
fn code(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            Some(at) => &l[..at],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths that follow each `prefix` in `code`: `prefix a::b`, and each member of a
/// `prefix {a, b::c}` group, as `a`, `b::c`; with the offset of the line each is on.
fn paths_after<'a>(code: &'a str, prefix: &str) -> Vec<(String, &'a str)> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(found) = code[at..].find(prefix) {
        let start = at + found;
        at = start + prefix.len();
        // `super::` inside `super::super::` is read from the first; `crate::` after an
        // identifier (`my_crate::`) is not this crate.
        if start > 0 {
            let before = code[..start].chars().next_back().unwrap();
            if before.is_alphanumeric() || before == '_' || (prefix == "super::" && before == ':') {
                continue;
            }
        }
        let line_start = code[..start].rfind('\n').map_or(0, |n| n + 1);
        let line = &code[line_start..];
        let line = &line[..line.find('\n').unwrap_or(line.len())];
        let rest = &code[at..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            out.extend(
                group[..end]
                    .split(',')
                    .map(|p| p.split_whitespace().collect::<String>())
                    .filter(|p| !p.is_empty())
                    .map(|p| (p, line)),
            );
        } else {
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest.len());
            out.push((rest[..end].trim_end_matches(':').to_string(), line));
        }
    }
    out
}

/// The paths into this crate that `code` names with `crate::`: `crate::a::b`, and each member
/// of a `crate::{a, b::c}` group, as `a`, `b::c`.
fn crate_paths(code: &str) -> Vec<String> {
    paths_after(code, "crate::")
        .into_iter()
        .map(|(p, _)| p)
        .collect()
}

/// The module path of `file` (under `src/`, `/`-separated): `call/staging/mod.rs` is
/// `call::staging`, `call/plan.rs` `call::plan`, `lib.rs` the crate's root (empty).
fn module_path(file: &str) -> Vec<String> {
    let file = file.trim_end_matches(".rs");
    let mut parts: Vec<String> = file.split('/').map(String::from).collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// The paths into this crate that `code` of `file` names with `super::`, made absolute
/// (`call::paths::Side`). A `super::` on an indented line is taken to be in a module inline in
/// the file (`mod tests { use super::*; }`), whose `super` is the file's own module.
fn super_paths(file: &str, code: &str) -> Vec<String> {
    let own = module_path(file);
    let mut out = Vec::new();
    for (path, line) in paths_after(code, "super::") {
        let mut base = own.clone();
        let inline = line.starts_with(char::is_whitespace);
        if !inline {
            base.pop();
        }
        let mut rest = path.as_str();
        while let Some(r) = rest.strip_prefix("super::") {
            base.pop();
            rest = r;
        }
        if rest == "*" || rest.is_empty() {
            out.push(base.join("::"));
        } else {
            base.push(rest.to_string());
            out.push(base.join("::"));
        }
    }
    out
}

/// Everything in this crate `file` names: its `crate::` paths and its `super::` paths, made
/// absolute.
fn named(file: &str, code: &str) -> Vec<String> {
    let mut out = crate_paths(code);
    out.extend(super_paths(file, code));
    out
}

/// Whether `path` (as [`crate_paths`] gives it) is `module` or inside it.
fn names(path: &str, module: &str) -> bool {
    path == module || path.starts_with(&format!("{module}::"))
}

#[test]
fn every_file_is_in_a_layer() {
    let mut outside = Vec::new();
    for file in rust_files(&src()) {
        let file = relative(&file);
        if layer_of(&file).is_none() {
            outside.push(format!("src/{file}"));
        }
    }
    assert!(
        outside.is_empty(),
        "in no layer (add each to LAYERS in tests/layers.rs):\n{}",
        outside.join("\n")
    );
    for (layer, places) in LAYERS {
        for place in *places {
            assert!(
                !rust_files(&src().join(place)).is_empty(),
                "{layer}: src/{place} has no Rust file: update LAYERS"
            );
        }
    }
}

#[test]
fn modules_name_nothing_above_their_layer() {
    let mut broken = Vec::new();
    for file in rust_files(&src()) {
        let rel = relative(&file);
        let Some(layer) = layer_of(&rel) else {
            continue; // every_file_is_in_a_layer names it
        };
        if in_process_tests(&rel) {
            continue;
        }
        let above: Vec<(String, &str)> = LAYERS[..layer]
            .iter()
            .flat_map(|(name, places)| places.iter().map(move |p| (module_of_place(p), *name)))
            .filter(|(m, _)| m != "lib" && m != "bin")
            .collect();
        let text = std::fs::read_to_string(&file).unwrap();
        for path in named(&rel, &code(&text)) {
            if let Some((m, name)) = above.iter().find(|(m, _)| names(&path, m)) {
                broken.push(format!(
                    "src/{rel} ({}) names crate::{path} ({m}: {name})",
                    LAYERS[layer].0
                ));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "arrows pointing up:\n{}",
        broken.join("\n")
    );
}

/// A folder of in-process tests (`#[cfg(test)] mod tests;`, never in the build): it may
/// assemble what its layer's code may not name, as the connection's tests start the embedded
/// reference backend to have a real plugin behind their scripted upstream.
fn in_process_tests(rel: &str) -> bool {
    rel.split('/').any(|part| part == "tests")
}

/// The folder a module's code is in, where its files and its submodules' are: `call::plan`
/// (`call/plan.rs`) is in `call`; `call::services` (`call/services.rs` and `call/services/`)
/// and `call::staging` (`call/staging/mod.rs`) are folders of their own; a file at the top
/// of `src/` (`gateway.rs`) is its own.
fn folder(module: &[String]) -> String {
    let path = module.join("/");
    if module.len() <= 1 || src().join(&path).is_dir() {
        path
    } else {
        module[..module.len() - 1].join("/")
    }
}

/// The module of this crate a named path is in: its longest prefix with a file
/// (`call::paths::Side` is in `call::paths`); `None` for what is not a module of `src/` (the
/// crates re-exported at the root: `translate`, `dialect`, `hub`).
fn module_named(path: &str) -> Option<Vec<String>> {
    let parts: Vec<String> = path.split("::").map(String::from).collect();
    (1..=parts.len()).rev().find_map(|k| {
        let p = parts[..k].join("/");
        let exists = src().join(format!("{p}.rs")).is_file() || src().join(&p).is_dir();
        exists.then(|| parts[..k].to_vec())
    })
}

/// Whether one folder holds the other (a module naming its parent or its children is the
/// module tree, not an arrow between rooms).
fn nested(a: &str, b: &str) -> bool {
    a.starts_with(&format!("{b}/")) || b.starts_with(&format!("{a}/"))
}

/// The arrows between the folders of `src/`: which folder names which, each with the first
/// file and path that does.
fn folder_graph() -> BTreeMap<String, BTreeMap<String, String>> {
    let mut graph: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for file in rust_files(&src()) {
        let rel = relative(&file);
        if rel == "lib.rs" || rel.starts_with("bin/") {
            continue; // the root declares every module; the binary is another crate
        }
        let from = folder(&module_path(&rel));
        let text = std::fs::read_to_string(&file).unwrap();
        for path in named(&rel, &code(&text)) {
            let Some(module) = module_named(&path) else {
                continue;
            };
            let to = folder(&module);
            if to != from && !nested(&from, &to) {
                graph
                    .entry(from.clone())
                    .or_default()
                    .entry(to)
                    .or_insert_with(|| format!("src/{rel}: crate::{path}"));
            }
        }
    }
    graph
}

/// A cycle in `graph`, as the folders on it and the evidence of each arrow.
fn find_cycle(graph: &BTreeMap<String, BTreeMap<String, String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeMap<String, String>>,
        done: &mut BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flat_map(|e| e.keys()) {
            if let Some(cycle) = visit(next, graph, done, path) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut done, &mut Vec::new()))
}

#[test]
fn folders_name_each_other_without_a_cycle() {
    let graph = folder_graph();
    if let Some(cycle) = find_cycle(&graph) {
        let arrows: Vec<String> = cycle
            .windows(2)
            .map(|w| format!("  {} → {}  ({})", w[0], w[1], graph[&w[0]][&w[1]]))
            .collect();
        panic!(
            "an import cycle between folders of src/: {}\n{}",
            cycle.join(" → "),
            arrows.join("\n")
        );
    }
}

/// The call layer has no transport: it names no socket and no HTTP/2. Only the gateway's own
/// services (`call/services`), which are tonic services, name http's requests and bodies
/// (`http::`, `hyper`): what a tonic service takes and returns, not a connection.
#[test]
fn the_call_layer_names_no_transport() {
    for file in rust_files(&src().join("call")) {
        let code = code(&std::fs::read_to_string(&file).unwrap());
        let service = relative(&file).starts_with("call/services");
        for transport in [
            "h2::",
            "http::",
            "hyper",
            "tokio::net",
            "UnixStream",
            "TcpStream",
        ] {
            if service && (transport == "http::" || transport == "hyper") {
                continue;
            }
            assert!(
                !code.contains(transport),
                "{} names {transport}",
                file.display()
            );
        }
    }
}

/// A crate's `[dependencies]` names.
fn dependencies(krate: &str) -> Vec<String> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(krate)
        .join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let doc: toml::Table = text.parse().unwrap();
    doc.get("dependencies")
        .and_then(|d| d.as_table())
        .map(|t| t.keys().cloned().collect())
        .unwrap_or_default()
}

#[test]
fn the_wire_crate_knows_no_runtime_and_nothing_of_the_gateway() {
    for dep in dependencies("crates/wire") {
        assert!(
            !dep.starts_with("csi-gateway") && !dep.starts_with("tokio") && dep != "h2",
            "crates/wire depends on {dep}"
        );
    }
}

#[test]
fn the_translate_crate_depends_on_the_protos_alone_of_the_gateway() {
    let deps = dependencies("crates/translate");
    assert!(deps.iter().any(|d| d == "csi-gateway-proto"));
    for dep in deps {
        assert!(
            dep == "csi-gateway-proto" || (!dep.starts_with("csi-gateway") && dep != "tokio"),
            "crates/translate depends on {dep}"
        );
    }
}

/// The reference backend is the embedded default's alone (the `embedded-backend` feature).
#[test]
fn only_the_embedded_default_names_the_reference_backend() {
    for file in rust_files(&src()) {
        let text = std::fs::read_to_string(&file).unwrap();
        if code(&text).contains("csi_gateway_backend") {
            assert!(
                file.ends_with("embedded.rs"),
                "{} names csi_gateway_backend",
                file.display()
            );
        }
    }
}

#[test]
fn crate_paths_reads_paths_and_groups() {
    let code = "use crate::call::Shared;\nuse crate::{splice, call::router};\nlet x = crate::grpc::Code::Ok;\nuse other_crate::x;";
    assert_eq!(
        crate_paths(code),
        ["call::Shared", "splice", "call::router", "grpc::Code::Ok"]
    );
    assert!(names("splice::listener::serve", "splice::listener"));
    assert!(!names("splicer", "splice"));
}

#[test]
fn super_paths_are_made_absolute() {
    let code = "use super::paths::Side;\nuse super::{budget::Rate, Held};\nmod tests {\n    use super::*;\n}\nuse super::super::io;";
    assert_eq!(
        super_paths("call/upstream.rs", code),
        [
            "call::paths::Side",
            "call::budget::Rate",
            "call::Held",
            "call::upstream",
            "io"
        ]
    );
    assert_eq!(
        super_paths("splice/conn/service.rs", "use super::Held;"),
        ["splice::conn::Held"]
    );
    assert_eq!(module_path("call/staging/mod.rs"), ["call", "staging"]);
}

#[test]
fn a_cycle_is_found_and_named() {
    let mut graph: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for (from, to) in [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")] {
        graph
            .entry(from.into())
            .or_default()
            .insert(to.into(), String::new());
    }
    assert_eq!(find_cycle(&graph).unwrap(), ["a", "b", "c", "a"]);
    graph.get_mut("c").unwrap().remove("a");
    assert_eq!(find_cycle(&graph), None);
}
