//! The first second of a gateway's life. The gateway binds its socket at once and dials and
//! detects its plugin meanwhile; a call that arrives in between waits for that detection
//! (within its deadline and `upstream.connect_timeout`) instead of failing with "not connected
//! yet", and `csi-gateway check` run at once waits the same way, for the socket too.

use csi_gateway_test_support as support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use csi_gateway::dialect::Dialect;
use support::front::Front;
use support::gateway::Run;
use support::{Backend, Options};

/// Starts a gateway in front of `upstream` without waiting for anything.
fn start(dir: &Path, upstream: &Path) -> (Run, PathBuf) {
    let socket = dir.join("csi.sock");
    let args = [
        "run".to_string(),
        format!("--listen=unix://{}", socket.display()),
        format!("--upstream=unix://{}", upstream.display()),
        "--legacy-dialect=v0.1".into(),
        format!("--state-dir={}", dir.join("state").display()),
        "--metrics-listen=".into(),
        "--log-level=csi_gateway=debug".into(),
    ];
    (Run::start(dir, "gateway", &args), socket)
}

/// The plugin is stopped (SIGSTOP) while the gateway starts, so its dial is accepted and its
/// detection hangs: a v1 client's Probe (translated for the draft plugin), a same-dialect
/// call, and `check` started before the gateway's socket even exists all wait, and all are
/// answered once the plugin goes on (SIGCONT).
#[tokio::test]
async fn calls_made_before_the_plugin_is_detected_wait_for_it() {
    let backend = Backend::start(Options::new("v0.1-oneof")).await;
    backend.pause();
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("csi.sock");
    // `check` first, at a socket that is not there yet.
    let check = Command::new(support::gateway::binary())
        .args(["check", "--timeout=10s"])
        .arg(format!("--endpoint=unix://{}", socket.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    // The gateway, on the socket `check` waits for.
    let gw_dir = tempfile::tempdir().unwrap();
    let (mut gw, gw_socket) = start(gw_dir.path(), &backend.socket);
    std::os::unix::fs::symlink(&gw_socket, &socket).unwrap();
    let began = Instant::now();
    while std::os::unix::net::UnixStream::connect(&gw_socket).is_err() {
        assert!(began.elapsed() < Duration::from_secs(10), "{}", gw.log());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let front = |dialect| {
        let socket = gw_socket.clone();
        async move { Front::new(dialect, support::connect(&socket).await) }
    };
    let (v1, v0_1) = (front(Dialect::V1).await, front(Dialect::V0_1).await);
    let probe = tokio::spawn(async move { v1.probe().await });
    let same = tokio::spawn(async move { v0_1.plugin_name().await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !probe.is_finished() && !same.is_finished(),
        "calls were answered before the plugin was known:\n{}",
        gw.log()
    );
    backend.resume();
    let ready = within(probe).await.unwrap().unwrap();
    assert_eq!(ready.ok(), Some(true), "Probe:\n{}", gw.log());
    let name = within(same).await.unwrap().unwrap();
    assert!(name.is_ok(), "GetPluginInfo: {name:?}\n{}", gw.log());
    let out = tokio::task::spawn_blocking(|| check.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && report.contains("v1"),
        "check: {}\n{report}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        gw.log()
    );
    assert!(!gw.log().contains("not connected yet"), "{}", gw.log());
    let _ = gw.child.kill();
}

async fn within<F: std::future::Future>(f: F) -> Result<F::Output, tokio::time::error::Elapsed> {
    tokio::time::timeout(Duration::from_secs(10), f).await
}

/// A plugin that is not there at all is no reason to wait: a call made after the first
/// attempt failed is answered UNAVAILABLE at once, naming the plugin.
#[tokio::test]
async fn a_plugin_that_is_not_there_is_answered_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-plugin.sock");
    let (mut gw, socket) = start(dir.path(), &missing);
    gw.wait_log("upstream not reachable");
    let f = Front::new(Dialect::V1, support::connect(&socket).await);
    let asked = Instant::now();
    let e = f.probe().await.expect_err("no plugin");
    assert!(
        asked.elapsed() < Duration::from_secs(2),
        "{:?}",
        asked.elapsed()
    );
    assert_eq!(e.code, tonic::Code::Unavailable, "{e:?}");
    assert!(e.message.contains("no-plugin.sock"), "{e:?}");
}
