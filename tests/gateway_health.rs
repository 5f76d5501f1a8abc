//! `csi-gateway health`, the container image's HEALTHCHECK, against the built gateway's
//! operations endpoint: healthy while the plugin answers Probe, unhealthy (exit 1, the reason
//! on stderr) once it is gone, and a clear refusal of what it cannot ask.

use csi_gateway_test_support as support;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use support::gateway::Gateway;
use support::{Backend, Options};

fn health(url: &str) -> Output {
    Command::new(support::gateway::binary())
        .args(["health", "--url", url, "--timeout", "5s"])
        .output()
        .expect("running csi-gateway health")
}

fn text(out: &[u8]) -> String {
    String::from_utf8_lossy(out).trim().to_string()
}

#[tokio::test]
async fn health_follows_the_plugin() {
    let mut backend = Backend::start(Options::new("v0.1-oneof")).await;
    let port = support::free_port();
    let _gateway = Gateway::start(
        &backend.socket,
        "v0.1-oneof",
        &[&format!("--metrics-listen=127.0.0.1:{port}")],
    )
    .await;
    let healthz = format!("http://127.0.0.1:{port}/healthz");

    let out = health(&healthz);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "ok");
    let out = health(&format!("http://127.0.0.1:{port}/readyz"));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "ready");

    backend.kill();
    // The gateway notices the plugin is gone on its next call or reconnect attempt.
    let deadline = Instant::now() + Duration::from_secs(30);
    let out = loop {
        let out = health(&healthz);
        if !out.status.success() || Instant::now() > deadline {
            break out;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let err = text(&out.stderr);
    assert!(err.contains("500 Internal Server Error"), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn health_refuses_what_it_cannot_ask() {
    let out = health("https://127.0.0.1:9808/healthz");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("is not an http:// URL with a host and port"),
        "{}",
        text(&out.stderr)
    );

    // Nothing listens on a port just freed: refused at once, not a hang.
    let port = support::free_port();
    let out = health(&format!("http://127.0.0.1:{port}/healthz"));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("Connection refused"),
        "{}",
        text(&out.stderr)
    );
}

/// `/livez` is the gateway's own liveness, for its own container (`/healthz` belongs on the
/// driver's): a dead driver leaves it 200, and only the gateway itself failing — here its front
/// socket taken away, which kubelet could no longer reach — makes it 500, naming the socket.
#[tokio::test]
async fn livez_fails_only_for_the_gateway_itself() {
    let mut backend = Backend::start(Options::new("v1")).await;
    let port = support::free_port();
    let gateway = Gateway::start(
        &backend.socket,
        "v0.1",
        &[&format!("--metrics-listen=127.0.0.1:{port}")],
    )
    .await;
    let livez = format!("http://127.0.0.1:{port}/livez");
    let out = health(&livez);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "alive");

    backend.kill();
    let healthz = format!("http://127.0.0.1:{port}/healthz");
    let deadline = Instant::now() + Duration::from_secs(30);
    while health(&healthz).status.success() {
        assert!(
            Instant::now() < deadline,
            "/healthz never noticed the driver is gone"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let out = health(&livez);
    assert!(
        out.status.success(),
        "a dead driver failed the gateway's liveness: {}",
        text(&out.stderr)
    );

    std::fs::remove_file(&gateway.socket).unwrap();
    let out = health(&livez);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(text(&out.stderr).contains("500"), "{}", text(&out.stderr));
}
