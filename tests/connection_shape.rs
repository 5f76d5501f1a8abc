//! The connection layer's shape, checked on the source so that it does not drift back into one
//! object cut into drawers (issue "The connection layer finished the way h2 finishes its own"):
//! each concern owns its state and methods, a stream's work is on the `Calls` bundle, and
//! `Splice` keeps the connection's own work.
//!
//! - no function of the connection layer (`src/splice/`) is over 120 lines;
//! - no file of `src/splice/conn/` touches more than 12 of `Splice`'s fields;
//! - nothing but the budget module moves the shared buffer count (`buffered.take/give`);
//! - `impl Splice` has at most [`SPLICE_METHODS`] methods: a ratchet, lowered as methods move
//!   to the concern that owns them (never above 40).

use std::path::{Path, PathBuf};

/// The most methods `impl Splice` may have. Lower it when methods move out; never raise it.
const SPLICE_METHODS: usize = 37;
const LONGEST_FUNCTION: usize = 120;
const FIELDS_PER_FILE: usize = 12;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
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

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap()
}

/// The name of a `fn` declared on `line`, with its indentation.
fn function(line: &str) -> Option<(&str, &str)> {
    let indent = &line[..line.len() - line.trim_start().len()];
    let rest = line.trim_start();
    let rest = rest
        .strip_prefix("pub(super) ")
        .or_else(|| rest.strip_prefix("pub(crate) "))
        .or_else(|| rest.strip_prefix("pub "))
        .unwrap_or(rest);
    let rest = rest.strip_prefix("async ").unwrap_or(rest);
    let name = rest.strip_prefix("fn ")?;
    let end = name.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    Some((indent, &name[..end]))
}

/// Every function of `text`, with its length in lines (its closing brace at its own indent).
fn functions(text: &str) -> Vec<(String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some((indent, name)) = function(line) else {
            continue;
        };
        if line.trim_end().ends_with(';') {
            continue; // a declaration in a trait
        }
        if line.trim_end().ends_with('}') {
            out.push((name.to_string(), 1));
            continue;
        }
        let close = format!("{indent}}}");
        if let Some(j) = lines[i + 1..].iter().position(|l| *l == close) {
            out.push((name.to_string(), j + 2));
        }
    }
    out
}

/// `Splice`'s fields, from its definition.
fn splice_fields() -> Vec<String> {
    let text = read(&root().join("src/splice/conn/mod.rs"));
    let start = text
        .find("pub struct Splice<C, U> {")
        .expect("Splice is defined");
    let body = &text[start..];
    let body = &body[..body.find("\n}\n").unwrap()];
    body.lines()
        .skip(1)
        .filter_map(|l| {
            let l = l.trim();
            let (name, _) = l.split_once(':')?;
            let ok = !l.starts_with("//") && name.chars().all(|c| c.is_alphanumeric() || c == '_');
            ok.then(|| name.to_string())
        })
        .collect()
}

/// The methods of the `impl … Splice<…>` blocks of `text`.
fn splice_methods(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if line.starts_with("impl<") && line.contains(" Splice<") {
            inside = true;
        } else if line == "}" {
            inside = false;
        } else if inside && line.starts_with("    ") && !line.starts_with("     ") {
            if let Some((_, name)) = function(line) {
                out.push(name.to_string());
            }
        }
    }
    out
}

/// The fields of `Splice` that `text` names as `self.<field>` (not a method call).
fn fields_touched(text: &str, fields: &[String]) -> Vec<String> {
    let mut touched: Vec<String> = fields
        .iter()
        .filter(|f| {
            text.match_indices(&format!("self.{f}")).any(|(at, m)| {
                let next = text[at + m.len()..].chars().next();
                !next.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '(')
            })
        })
        .cloned()
        .collect();
    touched.sort();
    touched
}

fn conn_files() -> Vec<PathBuf> {
    rust_files(&root().join("src/splice/conn"))
        .into_iter()
        .filter(|p| !p.components().any(|c| c.as_os_str() == "tests"))
        .collect()
}

#[test]
fn no_connection_function_is_over_120_lines() {
    let mut long = Vec::new();
    for file in rust_files(&root().join("src/splice")) {
        for (name, lines) in functions(&read(&file)) {
            if lines > LONGEST_FUNCTION {
                long.push(format!("{}: {name} ({lines} lines)", file.display()));
            }
        }
    }
    assert!(
        long.is_empty(),
        "over {LONGEST_FUNCTION} lines:\n{}",
        long.join("\n")
    );
}

#[test]
fn no_conn_file_touches_more_than_12_of_splices_fields() {
    let fields = splice_fields();
    assert!(fields.len() >= 10, "Splice's fields read: {fields:?}");
    let mut wide = Vec::new();
    for file in conn_files() {
        let touched = fields_touched(&read(&file), &fields);
        if touched.len() > FIELDS_PER_FILE {
            wide.push(format!("{}: {touched:?}", file.display()));
        }
    }
    assert!(
        wide.is_empty(),
        "files touching more than {FIELDS_PER_FILE} of Splice's fields:\n{}",
        wide.join("\n")
    );
}

#[test]
fn impl_splice_methods_stay_under_the_ratchet() {
    let methods: Vec<String> = conn_files()
        .iter()
        .flat_map(|f| splice_methods(&read(f)))
        .collect();
    assert!(methods.len() > 10, "methods read: {methods:?}");
    assert!(
        methods.len() <= SPLICE_METHODS,
        "{} methods on impl Splice, more than {SPLICE_METHODS}: give the new ones to the concern \
         that owns their state",
        methods.len()
    );
}

#[test]
fn only_the_budget_moves_the_shared_buffer_count() {
    let mut found = Vec::new();
    for file in rust_files(&root().join("src")) {
        if file.ends_with("call/budget.rs") {
            continue;
        }
        let text = read(&file);
        for needle in [
            "buffered.take(",
            "buffered.give(",
            "buffered.used.",
            ".used.fetch_",
        ] {
            if text.contains(needle) {
                found.push(format!("{}: {needle}", file.display()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "the shared count moved outside call/budget.rs:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_readers_see_what_they_should() {
    let text = "impl<C: Io, U: Io> Splice<C, U> {\n    pub(super) fn a(&mut self) {\n        self.streams.map.len();\n        self.flow();\n    }\n\n    fn b(&self) {}\n}\n";
    assert_eq!(splice_methods(text), ["a", "b"]);
    let fields = vec!["streams".to_string(), "flow".to_string()];
    assert_eq!(
        fields_touched(text, &fields),
        ["streams"],
        "a method call is not a field"
    );
    assert_eq!(
        functions(text),
        [("a".to_string(), 4), ("b".to_string(), 1)]
    );
}
