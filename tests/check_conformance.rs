//! `csi-gateway check --conformance` through the built binaries: the reference plugin in every
//! dialect passes its own revision's rows (the draft's second DeleteVolume is an error, v0.1+
//! answers OK), so does the gateway in front of a draft plugin, and a malformed plugin fails
//! with a non-zero exit code. Split as a CO splits it (`--controller-endpoint`), a controller
//! and a node gateway sharing one etcd in front of one bind-mounting draft plugin pass with
//! their mounts checked from here (`--check-mounts`), which a symlink publish fails.

use csi_gateway_test_support as support;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use support::etcd::Etcd;
use support::gateway::Gateway;
use support::{Backend, Options, DIALECTS};

fn conformance(socket: &Path) -> (Output, String) {
    conformance_with(socket, &[])
}

fn conformance_with(socket: &Path, extra: &[String]) -> (Output, String) {
    let out = Command::new(support::gateway::binary())
        .args(["check", "--conformance", "--timeout=20s"])
        .arg(format!("--endpoint=unix://{}", socket.display()))
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out, text)
}

fn passed(text: &str, row: &str) -> bool {
    text.lines()
        .any(|l| l.starts_with("PASS") && l.contains(row))
}

#[tokio::test]
async fn the_reference_plugin_passes_in_every_dialect() {
    for dialect in DIALECTS {
        let backend = Backend::start(Options::new(dialect)).await;
        let (out, text) = conformance(&backend.socket);
        assert!(out.status.success(), "{dialect}:\n{text}");
        assert!(text.contains(&format!("(dialect {dialect})")), "{text}");
        assert!(text.contains(" 0 failed"), "{dialect}:\n{text}");
        for row in [
            "CreateVolume creates a volume",
            "CreateVolume again, same name: the same volume",
            "NodePublishVolume again: OK (idempotent)",
            "NodeUnpublishVolume again: OK (idempotent)",
            "CreateVolume without a name: INVALID_ARGUMENT",
            "NodeUnpublishVolume without a target path: INVALID_ARGUMENT",
        ] {
            assert!(passed(&text, row), "{dialect}: {row}\n{text}");
        }
        let second_delete = if dialect == "v0.1-oneof" {
            "DeleteVolume again: VOLUME_DOES_NOT_EXIST (draft)"
        } else {
            "DeleteVolume again: OK (idempotent)"
        };
        assert!(passed(&text, second_delete), "{dialect}:\n{text}");
        // The plugin stages in v1 and v0.3; there is no staging before v0.2.
        let staged = passed(&text, "NodeStageVolume");
        assert_eq!(
            staged,
            matches!(dialect, "v1" | "v0.3"),
            "{dialect}:\n{text}"
        );
        assert!(
            backend.log_text().contains("CreateVolume"),
            "the plugin was called"
        );
    }
}

#[tokio::test]
async fn the_gateway_in_front_of_a_draft_plugin_passes_as_v1() {
    let backend = Backend::start(Options::new("v0.1-oneof")).await;
    let gateway = Gateway::start(&backend.socket, "v0.1", &[]).await;
    let (out, text) = conformance(&gateway.socket);
    assert!(out.status.success(), "{text}\n{}", gateway.log_text());
    assert!(text.contains("(dialect v1)"), "{text}");
    assert!(
        passed(&text, "DeleteVolume again: OK (idempotent)"),
        "{text}"
    );
}

const MOUNT_ROWS: [&str; 4] = [
    "NodePublishVolume: the target is a mount here",
    "a file written through the target",
    "NodeUnpublishVolume: the mount is gone",
    "published again: the file is in the volume",
];

#[tokio::test]
async fn controller_and_node_gateways_pass_with_their_mounts_checked() {
    assert_eq!(
        support::best_publish_mode(),
        "bind",
        "the mount rows need a plugin that bind-mounts: run as root (CI does)"
    );
    let etcd = Etcd::start().await;
    let backend = Backend::start(Options::new("v0.1-oneof")).await;
    // One etcd prefix: the VolumeHandle metadata the controller gateway recorded at
    // CreateVolume is what the node gateway sends with the draft's id-only node calls.
    let shared = [
        "--state-backend=etcd".to_string(),
        format!("--etcd-endpoints={}", etcd.endpoint),
        "--etcd-prefix=/csi-gateway/".to_string(),
    ];
    let shared: Vec<&str> = shared.iter().map(String::as_str).collect();
    let controller = Gateway::start(&backend.socket, "v0.1", &shared).await;
    let node = Gateway::start(&backend.socket, "v0.1", &shared).await;
    let parent = tempfile::tempdir().unwrap();
    let work = parent.path().join("pods");
    let (out, text) = conformance_with(
        &node.socket,
        &[
            format!(
                "--controller-endpoint=unix://{}",
                controller.socket.display()
            ),
            format!("--work-dir={}", work.display()),
            "--check-mounts".to_string(),
        ],
    );
    let logs = || format!("{text}\n{}\n{}", node.log_text(), controller.log_text());
    assert!(out.status.success(), "{}", logs());
    assert!(
        text.contains(", controller calls on unix://") && text.contains(" 0 failed"),
        "{text}"
    );
    for row in MOUNT_ROWS.iter().chain(&[
        "GetPluginInfo on the controller: the same plugin",
        "CreateVolume creates a volume",
        "NodePublishVolume again: OK (idempotent)",
        "NodeUnpublishVolume again: OK (idempotent)",
        "DeleteVolume again: OK (idempotent)",
    ]) {
        assert!(passed(&text, row), "{row}\n{text}");
    }
    // Controller calls went to the controller gateway, node calls to the node gateway.
    assert!(controller.log_text().contains("CreateVolume"), "{}", logs());
    assert!(!node.log_text().contains("CreateVolume"), "{}", logs());
    assert!(node.log_text().contains("NodePublishVolume"), "{}", logs());
    // The targets were made inside --work-dir (created), and the scenario's directory is gone.
    let written = text.lines().find(|l| l.contains(MOUNT_ROWS[1])).unwrap();
    assert!(
        written.contains(&format!(" {}/", work.display())),
        "{written}"
    );
    let left: Vec<_> = std::fs::read_dir(&work).unwrap().collect();
    assert!(left.is_empty(), "left in {}: {left:?}", work.display());
}

#[tokio::test]
async fn a_symlink_publish_fails_the_mount_row() {
    let backend = Backend::start(Options {
        publish_mode: "symlink".into(),
        ..Options::new("v1")
    })
    .await;
    let (out, text) = conformance_with(&backend.socket, &["--check-mounts".to_string()]);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("FAIL") && l.contains(MOUNT_ROWS[0])),
        "{text}"
    );
    // The file went through the link into the volume, and unpublishing removed the link.
    for row in &MOUNT_ROWS[1..] {
        assert!(passed(&text, row), "{row}\n{text}");
    }
}

#[tokio::test]
async fn a_malformed_plugin_fails_with_a_non_zero_exit() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("plugin.sock");
    let mut plugin = Command::new(support::workspace_binary("csi-gateway-load"))
        .arg("fixed-upstream")
        .arg(format!("--listen={}", socket.display()))
        .spawn()
        .unwrap();
    let deadline = Instant::now() + support::PROCESS_TIMEOUT;
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(10));
    }
    let (out, text) = conformance(&socket);
    let _ = plugin.kill();
    let _ = plugin.wait();
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("FAIL") && l.contains("GetPluginInfo")),
        "{text}"
    );
}
