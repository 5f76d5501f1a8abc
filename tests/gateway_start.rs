//! The first second of a gateway's life. The gateway binds its socket at once and dials and
//! detects its plugin meanwhile; a call that arrives in between waits for that detection
//! (within its deadline and `upstream.connect_timeout`) instead of failing with "not connected
//! yet", and `csi-gateway check` run at once waits the same way, for the socket too.

use csi_gateway_test_support as support;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use csi_gateway::dialect::Dialect;
use support::front::Front;
use support::{Backend, Options};

fn signal(pid: u32, signal: rustix::process::Signal) {
    let pid = rustix::process::Pid::from_raw(pid as i32).unwrap();
    rustix::process::kill_process(pid, signal).unwrap();
}

struct Started {
    child: Child,
    socket: std::path::PathBuf,
    log: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Started {
    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts a gateway in front of `upstream` without waiting for anything.
fn start(upstream: &std::path::Path) -> Started {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("csi.sock");
    let log = dir.path().join("gateway.log");
    let out = std::fs::File::create(&log).unwrap();
    let child = Command::new(support::gateway::binary())
        .arg("run")
        .arg(format!("--listen=unix://{}", socket.display()))
        .arg(format!("--upstream=unix://{}", upstream.display()))
        .arg("--legacy-dialect=v0.1")
        .arg(format!("--state-dir={}", dir.path().join("state").display()))
        .arg("--metrics-listen=")
        .arg("--log-level=csi_gateway=debug")
        .env_remove("CSI_ENDPOINT")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .unwrap();
    Started {
        child,
        socket,
        log,
        _dir: dir,
    }
}

/// The plugin is stopped (SIGSTOP) while the gateway starts, so its dial is accepted and its
/// detection hangs: a v1 client's Probe (translated for the draft plugin), a same-dialect
/// call, and `check` started before the gateway's socket even exists all wait, and all are
/// answered once the plugin goes on (SIGCONT).
#[tokio::test]
async fn calls_made_before_the_plugin_is_detected_wait_for_it() {
    let backend = Backend::start(Options::new("v0.1-oneof")).await;
    signal(backend.pid(), rustix::process::Signal::STOP);
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
    let mut gw = start(&backend.socket);
    let _ = std::fs::remove_file(&socket);
    std::os::unix::fs::symlink(&gw.socket, &socket).unwrap();
    let began = Instant::now();
    while std::os::unix::net::UnixStream::connect(&gw.socket).is_err() {
        assert!(began.elapsed() < Duration::from_secs(10), "{}", gw.log_text());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let front = |dialect| {
        let socket = gw.socket.clone();
        async move { Front::new(dialect, support::connect(&socket).await) }
    };
    let (v1, v0_1) = (front(Dialect::V1).await, front(Dialect::V0_1).await);
    let probe = tokio::spawn(async move { v1.probe().await });
    let same = tokio::spawn(async move { v0_1.plugin_name().await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !probe.is_finished() && !same.is_finished(),
        "calls were answered before the plugin was known:\n{}",
        gw.log_text()
    );
    signal(backend.pid(), rustix::process::Signal::CONT);
    let ready = within(probe).await.unwrap().unwrap();
    assert_eq!(ready.ok(), Some(true), "Probe:\n{}", gw.log_text());
    let name = within(same).await.unwrap().unwrap();
    assert!(name.is_ok(), "GetPluginInfo: {name:?}\n{}", gw.log_text());
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
        gw.log_text()
    );
    assert!(!gw.log_text().contains("not connected yet"), "{}", gw.log_text());
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
    let gw = start(&missing);
    let began = Instant::now();
    while !gw.log_text().contains("upstream not reachable") {
        assert!(began.elapsed() < Duration::from_secs(10), "{}", gw.log_text());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let f = Front::new(Dialect::V1, support::connect(&gw.socket).await);
    let asked = Instant::now();
    let e = f.probe().await.expect_err("no plugin");
    assert!(asked.elapsed() < Duration::from_secs(2), "{:?}", asked.elapsed());
    assert_eq!(e.code, tonic::Code::Unavailable, "{e:?}");
    assert!(e.message.contains("no-plugin.sock"), "{e:?}");
}
