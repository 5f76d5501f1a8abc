//! The gateway as an operator meets it: dialect detection (`check` and across reconnects), the
//! plugin dying and coming back during a run of calls, shutdown, bad configuration, and the
//! refusals the spec prescribes where one side cannot do what the other asks.

use csi_gateway_test_support as support;

use std::collections::HashMap;
use std::process::Command;
use std::time::{Duration, Instant};

use csi_gateway::dialect::proto::{v0_1, v1};
use csi_gateway::dialect::Dialect;
use support::front::Front;
use support::gateway::{self, Gateway};
use support::{Backend, Options};
use tonic::Code;

#[tokio::test]
async fn check_detects_every_dialect() {
    for d in Dialect::ALL {
        let backend = Backend::start(Options::new(d.name())).await;
        let out = Command::new(gateway::binary())
            .args(["check", "--endpoint"])
            .arg(format!("unix://{}", backend.socket.display()))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{d}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["dialect:", d.name()]),
            "{d}:\n{text}"
        );
        assert!(text.contains("reference.csi-gateway.dev"), "{d}:\n{text}");
        if matches!(d, Dialect::V0_1 | Dialect::V0_1Oneof) {
            assert!(text.contains("0.1.0 (negotiated)"), "{d}:\n{text}");
        }
    }
}

#[tokio::test]
async fn check_on_a_dead_endpoint_fails_with_a_message() {
    let out = Command::new(gateway::binary())
        .args(["check", "--endpoint", "unix:///nonexistent/csi.sock"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/csi.sock"));
}

#[tokio::test]
async fn plugin_killed_and_restarted_during_a_run_of_calls() {
    let mut backend = Backend::start(Options::new("v0.1-oneof")).await;
    let gateway = Gateway::start(&backend.socket, "v0.1", &[]).await;
    let f = Front::new(Dialect::V1, gateway.channel().await);
    assert!(f.probe().await.unwrap());

    backend.kill();
    let down_since = Instant::now();
    // While the plugin is down every call fails fast with UNAVAILABLE naming the plugin.
    let e = f.probe().await.expect_err("plugin is down");
    assert_eq!(e.code, Code::Unavailable, "{e:?}");
    assert!(
        e.message.contains(&backend.socket.display().to_string()),
        "{e:?}"
    );
    let e = f
        .create("vol-x", 1 << 20, &HashMap::new())
        .await
        .expect_err("plugin is down");
    assert_eq!(e.code, Code::Unavailable, "{e:?}");

    backend.restart(None).await;
    // Back within the bounded reconnect backoff, on the same client connection.
    let mut outcomes = Vec::new();
    loop {
        match f.probe().await {
            Ok(_) => break,
            Err(e) => outcomes.push(e.code),
        }
        assert!(
            down_since.elapsed() < Duration::from_secs(20),
            "gateway never reconnected:\n{}",
            gateway.log_text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        outcomes.iter().all(|c| *c == Code::Unavailable),
        "{outcomes:?}"
    );
    let v = f
        .create("vol-after", 1 << 20, &HashMap::new())
        .await
        .unwrap();
    assert_eq!(v.context.get("kind").map(String::as_str), Some("mount"));
    let log = gateway.log_text();
    assert!(
        log.contains("upstream connection lost; reconnecting"),
        "{log}"
    );
    assert_eq!(log.matches("upstream connected").count(), 2, "{log}");
}

#[tokio::test]
async fn dialect_change_across_a_reconnect_is_renegotiated() {
    let mut backend = Backend::start(Options::new("v0.1")).await;
    let gateway = Gateway::start(&backend.socket, "v0.1", &[]).await;
    let f = Front::new(Dialect::V1, gateway.channel().await);
    let before = f.controller_caps().await.unwrap();
    assert!(!before.iter().any(|c| c.contains("SNAPSHOT")), "{before:?}");

    // The driver is upgraded in place: same socket, now v1.
    backend.kill();
    backend.restart(Some(Options::new("v1"))).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let after = loop {
        if let Ok(caps) = f.controller_caps().await {
            if caps.iter().any(|c| c.contains("SNAPSHOT")) {
                break caps;
            }
        }
        assert!(
            Instant::now() < deadline,
            "no re-detection:\n{}",
            gateway.log_text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        after.iter().any(|c| c == "CREATE_DELETE_SNAPSHOT"),
        "{after:?}"
    );
    let log = gateway.log_text();
    assert!(
        log.contains("upstream dialect changed across a reconnect"),
        "{log}"
    );
}

#[tokio::test]
async fn unknown_paths_are_unimplemented() {
    let backend = Backend::start(Options::new("v1")).await;
    let gateway = Gateway::start(&backend.socket, "v0.1", &[]).await;
    let conn = csi_gateway::upstream::Connection::connect(
        &csi_gateway::endpoint::Endpoint::Unix(gateway.socket.clone()),
        Duration::from_secs(5),
    )
    .await
    .unwrap();
    let s = conn.unary("/csi.v2.Identity/Probe", &[]).await.unwrap_err();
    assert_eq!(s.code(), Code::Unimplemented);
    assert!(s.message().contains("/csi.v2.Identity/Probe"), "{s:?}");
}

#[tokio::test]
async fn a_v0_1_capacity_beyond_int64_is_out_of_range() {
    let backend = Backend::start(Options::new("v1")).await;
    let gateway = Gateway::start(&backend.socket, "v0.1", &[]).await;
    let mut c = v0_1::controller_client::ControllerClient::new(gateway.channel().await);
    let e = c
        .create_volume(v0_1::CreateVolumeRequest {
            version: Some(v0_1::Version {
                major: 0,
                minor: 1,
                patch: 0,
            }),
            name: "huge".into(),
            capacity_range: Some(v0_1::CapacityRange {
                required_bytes: u64::MAX,
                limit_bytes: 0,
            }),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::OutOfRange, "{e:?}");
    // …and an unserved version is INVALID_ARGUMENT for v0.1.
    let e = c
        .create_volume(v0_1::CreateVolumeRequest {
            version: Some(v0_1::Version {
                major: 9,
                minor: 0,
                patch: 0,
            }),
            name: "v".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
}

#[tokio::test]
async fn handle_metadata_survives_a_gateway_sigkill() {
    let backend = Backend::start(Options::new("v0.1-oneof")).await;
    let mut gateway = Gateway::start(&backend.socket, "v0.1", &[]).await;
    let f = Front::new(Dialect::V1, gateway.channel().await);
    let v = f.create("vol-k", 1 << 20, &HashMap::new()).await.unwrap();
    gateway.kill_and_restart().await;
    // v1 deletes by id alone; the draft plugin needs the metadata back, from the durable store.
    let f = Front::new(Dialect::V1, gateway.channel().await);
    let id_only = support::front::Volume {
        id: v.id.clone(),
        context: HashMap::new(),
        capacity: 0,
    };
    f.delete(&id_only, &HashMap::new()).await.unwrap();
    assert!(
        backend.log_text().contains("DeleteVolume"),
        "{}",
        backend.log_text()
    );
}

#[tokio::test]
async fn sigterm_exits_cleanly_and_removes_the_socket() {
    let backend = Backend::start(Options::new("v1")).await;
    let mut gateway = Gateway::start(&backend.socket, "v0.1", &[]).await;
    let mut identity = v1::identity_client::IdentityClient::new(gateway.channel().await);
    identity.probe(v1::ProbeRequest {}).await.unwrap();
    let status = gateway.terminate();
    assert!(status.success(), "{status}:\n{}", gateway.log_text());
    assert!(!gateway.socket.exists(), "socket left behind");
    assert!(gateway.log_text().contains("stopped"));
}

#[tokio::test]
async fn the_shipped_default_serves_the_embedded_backend_and_stops_without_alarms() {
    // The README's first command: config/gateway.toml as shipped, moved into a temp dir.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gateway.toml");
    let shipped = std::fs::read_to_string("config/gateway.toml").unwrap();
    assert!(shipped.contains("endpoint = \"embedded\""));
    let root = dir.path().display().to_string();
    std::fs::write(&config, shipped.replace("/tmp/csi-gateway", &root)).unwrap();
    let embedded_socket = dir.path().join("backend").join("csi.sock");
    let mut gateway = Gateway::start(
        &embedded_socket,
        "v0.1-oneof",
        &[
            &format!("--config={}", config.display()),
            "--upstream=embedded",
        ],
    )
    .await;
    let ch = gateway.channel().await;
    let mut identity = v1::identity_client::IdentityClient::new(ch);
    let info = identity
        .get_plugin_info(v1::GetPluginInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.name, "reference.csi-gateway.dev");
    let log = gateway.log_text();
    assert!(
        log.contains("embedded reference backend serving") && log.contains("v0.1-oneof"),
        "{log}"
    );

    let status = gateway.terminate();
    let log = gateway.log_text();
    assert!(status.success(), "{status}:\n{log}");
    // Stopping the plugin it runs itself is no reason for the gateway to warn or reconnect.
    let stopping = &log[log.find("shutting down").expect("shutdown logged")..];
    assert!(
        !stopping.contains("WARN") && !stopping.contains("ERROR"),
        "{stopping}"
    );
    assert!(
        stopping.contains("csi-reference-backend stopped"),
        "{stopping}"
    );
    assert!(!gateway.socket.exists(), "socket left behind");
}

/// The scheduling policy of a process, as `/proc/<pid>/stat` reports it (field 41).
fn policy_of(pid: u32) -> u32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name, which is in parentheses and may hold spaces; the state
    // is field 3.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    rest.split(' ').nth(41 - 3).unwrap().parse().unwrap()
}

#[tokio::test]
async fn runs_under_sched_batch_unless_configured_otherwise() {
    const SCHED_OTHER: u32 = 0;
    const SCHED_BATCH: u32 = 3;
    let backend = Backend::start(Options::new("v1")).await;
    let batch = Gateway::start(&backend.socket, "v0.1", &[]).await;
    assert_eq!(policy_of(batch.pid()), SCHED_BATCH, "{}", batch.log_text());

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gateway.toml");
    let shipped = std::fs::read_to_string("config/gateway.toml").unwrap();
    assert!(shipped.contains("scheduling = \"batch\""));
    std::fs::write(
        &config,
        shipped.replace("scheduling = \"batch\"", "scheduling = \"normal\""),
    )
    .unwrap();
    let normal = Gateway::start(
        &backend.socket,
        "v0.1",
        &[&format!("--config={}", config.display())],
    )
    .await;
    assert_eq!(
        policy_of(normal.pid()),
        SCHED_OTHER,
        "{}",
        normal.log_text()
    );
    // Both serve.
    for g in [&batch, &normal] {
        let mut identity = v1::identity_client::IdentityClient::new(g.channel().await);
        identity.probe(v1::ProbeRequest {}).await.unwrap();
    }
}

#[tokio::test]
async fn bad_configuration_exits_64_before_binding() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("gw.sock");
    let cases: [&[&str]; 4] = [
        &["--listen", "relative.sock"],
        &["--upstream-dialect", "v7"],
        &["--legacy-dialect", "v0.3"],
        &["--upstream", "tcp://10.0.0.1:9000"],
    ];
    for args in cases {
        let mut cmd = Command::new(gateway::binary());
        cmd.arg("run").arg(format!(
            "--state-dir={}",
            dir.path().join("state").display()
        ));
        if !args.contains(&"--listen") {
            cmd.arg(format!("--listen=unix://{}", sock.display()));
        }
        let out = cmd.args(args).output().unwrap();
        // `--check-config` says the same, and so does nothing either.
        let checked = cmd.arg("--check-config").output().unwrap();
        assert_eq!(checked.status.code(), Some(64), "{args:?} --check-config");
        assert_eq!(
            out.status.code(),
            Some(64),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("configuration error"),
            "{args:?}"
        );
        assert!(
            !sock.exists(),
            "{args:?}: bound despite a bad configuration"
        );
    }
    let missing = Command::new(gateway::binary())
        .args(["run", "--config", "/nonexistent.toml"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(64));
    // A good configuration passes `--check-config`, which binds nothing and returns at once.
    let good = Command::new(gateway::binary())
        .arg("run")
        .arg(format!(
            "--state-dir={}",
            dir.path().join("state").display()
        ))
        .arg(format!("--listen=unix://{}", sock.display()))
        .arg("--check-config")
        .output()
        .unwrap();
    assert_eq!(
        good.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&good.stderr)
    );
    assert!(String::from_utf8_lossy(&good.stdout).contains("configuration ok"));
    assert!(!sock.exists() && !dir.path().join("state").exists());
}

/// A configuration file with several bad values: every one is reported, each naming its
/// field, before the gateway exits 64 (not only the first, which would take the operator one
/// round per mistake).
#[test]
fn every_bad_value_of_a_configuration_file_is_reported_then_exit_64() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("gw.sock");
    let file = dir.path().join("gateway.toml");
    let text = format!(
        r#"
[listen]
endpoint = "unix://{sock}"
legacy_dialect = "v0.9"
mode = "rw"
[upstream]
endpoint = "unix:///nonexistent/csi.sock"
dialect = "v7"
[state]
dir = "{state}"
handle_encoding = "url"
[log]
format = "xml"
[metrics]
listen = "localhost"
[runtime]
scheduling = "fifo"
"#,
        sock = sock.display(),
        state = dir.path().join("state").display(),
    );
    std::fs::write(&file, text).unwrap();
    let out = Command::new(gateway::binary())
        .arg("run")
        .arg("--config")
        .arg(&file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{stderr}");
    assert!(
        stderr.contains("configuration error: 7 problems:"),
        "{stderr}"
    );
    for field in [
        "listen.legacy_dialect: \"v0.9\" is not one of \"v0.1\", \"v0.1-oneof\"",
        "listen.mode:",
        "upstream.dialect: \"v7\" is not one of",
        "state.handle_encoding: \"url\" is not one of \"store\", \"inline\"",
        "log.format: \"xml\" is not one of \"text\", \"json\"",
        "metrics.listen:",
        "runtime.scheduling: \"fifo\" is not one of \"batch\", \"normal\"",
    ] {
        assert!(
            stderr.contains(&format!("\n  {field}")),
            "{field} in:\n{stderr}"
        );
    }
    assert!(!sock.exists(), "bound despite a bad configuration");
}

#[tokio::test]
async fn inline_handle_encoding_needs_no_state() {
    let backend = Backend::start(Options::new("v0.1-oneof")).await;
    let first = Gateway::start(&backend.socket, "v0.1", &["--handle-encoding=inline"]).await;
    let f = Front::new(Dialect::V1, first.channel().await);
    let v = f
        .create("vol-inline", 1 << 20, &HashMap::new())
        .await
        .unwrap();
    assert!(
        v.id.starts_with("csigwh1:") && v.id.len() <= 128,
        "{} ({} bytes)",
        v.id,
        v.id.len()
    );
    drop(first);

    // A different gateway with empty state: everything it needs is in the volume id.
    let second = Gateway::start(&backend.socket, "v0.1", &["--handle-encoding=inline"]).await;
    let f = Front::new(Dialect::V1, second.channel().await);
    let id_only = support::front::Volume {
        id: v.id.clone(),
        context: HashMap::new(),
        capacity: 0,
    };
    let node = f.node_id().await.unwrap();
    f.controller_publish(&id_only, &node).await.unwrap();
    f.controller_unpublish(&id_only, &node).await.unwrap();
    f.delete(&id_only, &HashMap::new()).await.unwrap();
    f.delete(&id_only, &HashMap::new()).await.unwrap();

    let bad = support::front::Volume {
        id: "csigwh1:not-base64!".into(),
        context: HashMap::new(),
        capacity: 0,
    };
    let e = f
        .delete(&bad, &HashMap::new())
        .await
        .expect_err("garbage inline id");
    assert_eq!(e.code, Code::InvalidArgument, "{e:?}");
}
