//! The binary's command line, run as a user would. The whole-plugin tests are in the workspace
//! root's `tests/` (`backend_*.rs`), against this same binary.
//!
//! Also why `cargo test --workspace` can run those: a package's binaries are built when one of
//! its integration tests is, so this file is what puts a fresh `csi-reference-backend` in
//! `target/<profile>/` before any test runs (csi-gateway-test-support's `workspace_binary`).

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_csi-reference-backend");

#[test]
fn help_names_every_dialect() {
    let out = Command::new(BIN).arg("--help").output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let help = String::from_utf8_lossy(&out.stdout);
    for dialect in ["v1", "v0.3", "v0.1", "v0.1-oneof"] {
        assert!(
            help.contains(dialect),
            "{dialect} missing from --help:\n{help}"
        );
    }
}

#[test]
fn plaintext_tcp_is_a_configuration_error() {
    let data = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["--endpoint", "tcp://127.0.0.1:1", "--data-dir"])
        .arg(data.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("plaintext TCP is refused"), "{stderr}");
}
