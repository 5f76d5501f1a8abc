//! The layering rules, checked on the source: arrows point down.
//!
//! ```text
//! connection  src/splice/ (the one front: every client connection, attached to an upstream
//!             connection of its own or not), the listeners (src/front/{listener,socket}.rs,
//!             src/tls/appliance.rs)
//!    ↓
//! call        src/call/ (plan, answer, rescue, protection, checks, and the pipeline to the
//!             plugin: target paths, staging emulation), and the route table and the
//!             gateway's own services (src/front/{router,services,limits}.rs)
//!    ↓
//! below       config, observe, metrics, grpc, validate, store, upstream, …
//!    ↓
//! crates      csi-gateway-translate (everything that knows two dialects, on the protos alone),
//!             csi-gateway-wire (frames and HPACK: no I/O, no tokio)
//! ```
//!
//! A module may name what is below it, never what is above. The crates' rules are their
//! manifests' (a crate cannot name what it does not depend on), so this reads those too.

use std::path::{Path, PathBuf};

/// The layers of `src/`, top down: each entry is a path under `src/` (a file, or a folder and
/// everything in it) and the modules of the crate it may not name.
const RULES: &[(&str, &[&str])] = &[
    // The call layer knows nothing of the connection that carries it.
    ("call", CONNECTION),
    ("front/router.rs", CONNECTION),
    ("front/services.rs", CONNECTION),
    ("front/limits.rs", CONNECTION),
    // Below the call: nothing of the front, the connection or the assembly.
    ("config", BELOW_THE_CALL),
    ("observe", BELOW_THE_CALL),
    ("metrics", BELOW_THE_CALL),
    ("grpc", BELOW_THE_CALL),
    ("validate", BELOW_THE_CALL),
    ("store", BELOW_THE_CALL),
    ("upstream", BELOW_THE_CALL),
    ("backoff.rs", BELOW_THE_CALL),
    ("disk.rs", BELOW_THE_CALL),
    ("endpoint.rs", BELOW_THE_CALL),
];

/// What the call layer may not name: the connection.
const CONNECTION: &[&str] = &[
    "splice",
    "front::listener",
    "front::socket",
    "tls::appliance",
    "gateway",
];

/// What the modules below the call may not name: the call too (`staging` and `target` are
/// its, re-exported at the crate's root).
const BELOW_THE_CALL: &[&str] = &[
    "call",
    "staging",
    "target",
    "front",
    "splice",
    "tls::appliance",
    "gateway",
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file at `path` (a file, or a folder searched whole).
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
    out
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

/// The paths into this crate that `code` names: `crate::a::b`, and each member of a
/// `crate::{a, b::c}` group, as `a`, `b::c`.
fn crate_paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            out.extend(
                group[..end]
                    .split(',')
                    .map(|p| p.split_whitespace().collect::<String>())
                    .filter(|p| !p.is_empty()),
            );
        } else {
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest.len());
            out.push(rest[..end].trim_end_matches(':').to_string());
        }
    }
    out
}

/// Whether `path` (as [`crate_paths`] gives it) is `module` or inside it.
fn names(path: &str, module: &str) -> bool {
    path == module || path.starts_with(&format!("{module}::"))
}

#[test]
fn modules_name_nothing_above_their_layer() {
    let mut broken = Vec::new();
    for (place, forbidden) in RULES {
        let files = rust_files(&src().join(place));
        assert!(
            !files.is_empty(),
            "src/{place} has no Rust file: update RULES"
        );
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for path in crate_paths(&code(&text)) {
                if let Some(m) = forbidden.iter().find(|m| names(&path, m)) {
                    let file = file.strip_prefix(src()).unwrap().display().to_string();
                    broken.push(format!("src/{file} names crate::{path} ({m} is above it)"));
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "arrows pointing up:\n{}",
        broken.join("\n")
    );
}

/// The call layer has no transport: it names no HTTP/2 or HTTP type and no socket.
#[test]
fn the_call_layer_names_no_transport() {
    for file in rust_files(&src().join("call")) {
        let code = code(&std::fs::read_to_string(&file).unwrap());
        for transport in [
            "h2::",
            "http::",
            "hyper",
            "tokio::net",
            "UnixStream",
            "TcpStream",
        ] {
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
    let code = "use crate::front::Shared;\nuse crate::{splice, front::listener};\nlet x = crate::grpc::Code::Ok;";
    assert_eq!(
        crate_paths(code),
        [
            "front::Shared",
            "splice",
            "front::listener",
            "grpc::Code::Ok"
        ]
    );
    assert!(names("front::listener::serve", "front::listener"));
    assert!(!names("frontier", "front"));
}
