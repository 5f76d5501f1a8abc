//! The binary's command line. The load tool's real tests are in the workspace root's `tests/`
//! (`load_tool.rs`, `crashloop.rs`), which need the gateway and the reference backend too.
//!
//! Also why `cargo test --workspace` can run those: a package's binaries are built when one of
//! its integration tests is, so this file is what puts a fresh `csi-gateway-load` in
//! `target/<profile>/` before any test runs (csi-gateway-test-support's `workspace_binary`).

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_csi-gateway-load");

#[test]
fn help_lists_the_subcommands() {
    let out = Command::new(BIN).arg("--help").output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let help = String::from_utf8_lossy(&out.stdout);
    for command in ["fixed-upstream", "tonic-proxy", "crashloop"] {
        assert!(
            help.contains(command),
            "{command} missing from --help:\n{help}"
        );
    }
}
