//! Server reflection and health through the built gateway, driven by a client that knows no
//! CSI proto: Python's gRPC C-core with `grpcio-reflection` and `grpcio-health-checking`
//! (`tests/interop/grpc_tools.py`; `.ci/run` installs them). It lists the services, builds each
//! request from the reflected descriptors and calls GetPluginInfo in every dialect the front
//! serves, and asks Health about the upstream.

mod support;

use std::process::Command;

use serde_json::Value;
use support::gateway::Gateway;
use support::{Backend, Options};

const PLUGIN: &str = "reference.csi-gateway.dev";

/// Runs the tool; fails (never skips) when python3 or its packages are missing.
fn tool(gateway: &Gateway, args: &[&str]) -> Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/interop/grpc_tools.py");
    let target = format!("unix://{}", gateway.socket.display());
    let out = Command::new("timeout")
        .arg("60")
        .arg("python3")
        .arg(script)
        .arg(&target)
        .args(args)
        .output()
        .expect("running python3 (bash .ci/run installs it and the gRPC packages)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "grpc_tools.py {args:?} failed ({}):\n{stdout}\n{}\ngateway log:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        gateway.log_text()
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

fn names(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect()
}

/// Every dialect the front serves is listed and callable with reflected descriptors only.
async fn reflect_every_dialect(legacy: &str, extra: &[&str]) {
    let backend = Backend::start(Options::new(legacy)).await;
    let gateway = Gateway::start(&backend.socket, legacy, extra).await;
    let listed = tool(&gateway, &["list"]);
    for version in ["v1", "v1alpha"] {
        let services = names(&listed[version]);
        for s in [
            "csi.v1.Identity",
            "csi.v1.Controller",
            "csi.v1.Node",
            "csi.v0.Identity",
            "csi.v0.Node",
            "csi.Identity",
            "csi.Controller",
            "grpc.health.v1.Health",
            "grpc.reflection.v1.ServerReflection",
            "grpc.reflection.v1alpha.ServerReflection",
        ] {
            assert!(services.contains(&s), "{version} lists {services:?}");
        }
    }
    let v01 = r#"{"version": {"major": 0, "minor": 1, "patch": 0}}"#;
    for (service, request, expected_type) in [
        ("csi.v1.Identity", "{}", "csi.v1.GetPluginInfoRequest"),
        ("csi.v0.Identity", "{}", "csi.v0.GetPluginInfoRequest"),
        ("csi.Identity", v01, "csi.GetPluginInfoRequest"),
    ] {
        let out = tool(&gateway, &["call", service, "GetPluginInfo", request]);
        assert_eq!(out["ok"], true, "{service}: {out}");
        assert_eq!(out["request_type"], expected_type);
        // The draft answers inside `result`.
        let reply = &out["reply"];
        let name = reply.get("result").unwrap_or(reply)["name"].clone();
        assert_eq!(name, PLUGIN, "{service}: {out}");
    }
}

#[tokio::test]
async fn reflection_lists_and_calls_every_dialect_with_v0_1_spliced() {
    reflect_every_dialect("v0.1", &[]).await;
}

#[tokio::test]
async fn reflection_lists_and_calls_every_dialect_with_the_draft_terminated() {
    reflect_every_dialect("v0.1-oneof", &["--splice=false"]).await;
}

/// The legacy package `csi` is the configured dialect's: the draft's messages, not v0.1's.
#[tokio::test]
async fn reflection_describes_the_legacy_dialect_the_listener_serves() {
    let backend = Backend::start(Options::new("v0.1-oneof")).await;
    let gateway = Gateway::start(&backend.socket, "v0.1-oneof", &[]).await;
    let v01 = r#"{"version": {"major": 0, "minor": 1, "patch": 0}}"#;
    let out = tool(&gateway, &["call", "csi.Identity", "GetPluginInfo", v01]);
    assert_eq!(out["reply"]["result"]["name"], PLUGIN, "{out}");
}

/// grpcurl's way: one reflection stream, each request answered before the next is sent.
#[tokio::test]
async fn one_reflection_stream_answers_request_after_request_on_a_terminated_connection() {
    let backend = Backend::start(Options::new("v1")).await;
    let gateway = Gateway::start(&backend.socket, "v0.1", &["--splice=false"]).await;
    let out = tool(&gateway, &["stream"]);
    let files = out["files"].as_object().unwrap();
    assert!(files.len() >= 10, "{out}");
    for (service, n) in files {
        assert!(n.as_u64().unwrap() >= 1, "no file for {service}: {out}");
    }
}

#[tokio::test]
async fn health_reflects_the_upstream_probe() {
    let mut backend = Backend::start(Options::new("v0.3")).await;
    let gateway = Gateway::start(&backend.socket, "v0.1", &[]).await;
    for service in ["", "csi.v1.Controller", "csi.v0.Node", "csi.Identity"] {
        let out = tool(&gateway, &["check", service]);
        assert_eq!(out["status"], "SERVING", "{service:?}: {out}");
    }
    assert_eq!(tool(&gateway, &["watch", ""])["status"], "SERVING");
    let unknown = tool(&gateway, &["check", "csi.v2.Identity"]);
    assert_eq!(unknown["code"], "NOT_FOUND", "{unknown}");
    assert_eq!(
        tool(&gateway, &["watch", "csi.v2.Identity"])["status"],
        "SERVICE_UNKNOWN"
    );

    backend.kill();
    let deadline = std::time::Instant::now() + support::RPC_TIMEOUT;
    loop {
        let out = tool(&gateway, &["check", ""]);
        if out["status"] == "NOT_SERVING" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "still {out}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(
        tool(&gateway, &["watch", "csi.v1.Node"])["status"],
        "NOT_SERVING"
    );
}
