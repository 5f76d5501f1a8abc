//! The crash loop at full length, on the embedded store and then on etcd: the load tool's
//! `crashloop` (see `crates/load/src/crashloop.rs`) against the built gateway and reference
//! plugin.
//!
//! `cargo build --release --workspace && cargo bench --bench crashloop` (the load tool and the
//! plugin are other workspace members' binaries, taken from `target/release/`; env:
//! CRASHLOOP_ITERATIONS=300, CRASHLOOP_CLIENTS=4, CRASHLOOP_SEED=1,
//! CRASHLOOP_STORES=embedded,etcd). Fails if any run finds a violation.

use std::process::Command;

use csi_gateway_test_support::workspace_binary;

fn env(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

fn main() {
    // `cargo bench` passes --bench; nothing else is understood.
    let iterations = env("CRASHLOOP_ITERATIONS", "300");
    let clients = env("CRASHLOOP_CLIENTS", "4");
    let seed = env("CRASHLOOP_SEED", "1");
    let mut failed = Vec::new();
    for store in env("CRASHLOOP_STORES", "embedded,etcd").split(',') {
        let status = Command::new(workspace_binary("csi-gateway-load"))
            .args(["crashloop", "--store", store])
            .args([
                "--iterations",
                &iterations,
                "--clients",
                &clients,
                "--seed",
                &seed,
            ])
            .args(["--gateway", env!("CARGO_BIN_EXE_csi-gateway")])
            .args(["--backend", workspace_binary("csi-reference-backend")])
            .status()
            .expect("running csi-gateway-load crashloop");
        if !status.success() {
            failed.push(store.to_string());
        }
    }
    assert!(failed.is_empty(), "crash loop violations on: {failed:?}");
}
