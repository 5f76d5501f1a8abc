//! Protection for fragile plugins (`[calls.methods.NAME]`) through the built gateway, in front
//! of the reference plugin slowed down (`--fault-delay`: CreateVolume of a new volume holds for
//! a while): per-volume serialization (ABORTED; the draft's OPERATION_PENDING_FOR_VOLUME),
//! `max_in_flight` (RESOURCE_EXHAUSTED), the default deadline for clients that set none, and
//! the metrics that show each.

use csi_gateway_test_support as support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use csi_gateway::dialect::Dialect;
use support::front::Front;
use support::gateway::{FrontPath, Gateway};
use support::{scrape, value, Backend, Options};
use tonic::Code;

/// A configuration file holding `calls`; the test's flags give the rest.
fn config(dir: &std::path::Path, calls: &str) -> String {
    let path = dir.join("gateway.toml");
    let text = format!(
        "[listen]\nendpoint = \"unix:///unused\"\n[upstream]\nendpoint = \"unix:///unused-plugin\"\n\
         [state]\ndir = \"/unused\"\n{calls}"
    );
    std::fs::write(&path, text).unwrap();
    format!("--config={}", path.display())
}

struct Setup {
    _backend: Backend,
    gateway: Gateway,
    metrics: u16,
    _dir: tempfile::TempDir,
}

/// A slow v1 plugin behind a gateway serving `legacy` with `calls`.
async fn setup(legacy: &str, calls: &str, extra: &[&str], path: FrontPath) -> Setup {
    let backend = Backend::start(Options::new("v1").arg("--fault-delay=1500ms")).await;
    let dir = tempfile::tempdir().unwrap();
    let metrics = support::free_port();
    let mut flags = vec![
        config(dir.path(), calls),
        format!("--metrics-listen=127.0.0.1:{metrics}"),
    ];
    flags.extend(extra.iter().map(|s| s.to_string()));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let gateway = path.start(&backend.socket, legacy, &flags).await;
    Setup {
        _backend: backend,
        gateway,
        metrics,
        _dir: dir,
    }
}

const SERIALIZED: &str = "[calls.methods.CreateVolume]\nserialize_per_volume = true\n\
     [calls.methods.DeleteVolume]\nserialize_per_volume = true\n";

/// Two calls on one volume at once: the second is turned away at once, the first completes.
async fn second_call_on_a_volume_is_refused(dialect: Dialect, legacy: &str, path: FrontPath) {
    let s = setup(legacy, SERIALIZED, &[], path).await;
    let f = Front::new(dialect, s.gateway.channel().await);
    let none = HashMap::new();
    let first = f.create("pvc-1", 1 << 20, &none);
    let second = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let began = Instant::now();
        (f.create("pvc-1", 1 << 20, &none).await, began.elapsed())
    };
    let (first, (second, waited)) = tokio::join!(first, second);
    let volume = first.expect("the first call goes through");
    let refused = second.expect_err("the second call is refused");
    assert!(
        refused.is(Code::Aborted, "OPERATION_PENDING_FOR_VOLUME"),
        "{refused:?}"
    );
    assert!(
        waited < Duration::from_millis(1000),
        "refused at once, not after {waited:?}"
    );
    // Another volume is not held up, and the volume is free again once the call is done.
    f.create("pvc-1", 1 << 20, &none).await.unwrap();
    f.delete(&volume, &none).await.unwrap();
    let metrics = scrape(s.metrics);
    let path = match dialect {
        Dialect::V1 => "/csi.v1.Controller/CreateVolume",
        _ => "/csi.Controller/CreateVolume",
    };
    let series = format!(
        "csi_gateway_protection_rejections_total{{method_name=\"{path}\",reason=\"volume_busy\"}}"
    );
    assert_eq!(value(&metrics, &series), Some(1.0), "{metrics}");
}

#[tokio::test]
async fn v1_second_call_on_a_volume_gets_aborted_spliced() {
    second_call_on_a_volume_is_refused(Dialect::V1, "v0.1", FrontPath::Spliced).await;
}

#[tokio::test]
async fn v1_second_call_on_a_volume_gets_aborted_unattached() {
    second_call_on_a_volume_is_refused(Dialect::V1, "v0.1", FrontPath::Unattached).await;
}

#[tokio::test]
async fn draft_second_call_on_a_volume_gets_operation_pending_for_volume() {
    second_call_on_a_volume_is_refused(Dialect::V0_1Oneof, "v0.1-oneof", FrontPath::Spliced).await;
}

#[tokio::test]
async fn max_in_flight_turns_away_the_call_over_the_limit() {
    let s = setup(
        "v0.1",
        "[calls.methods.CreateVolume]\nmax_in_flight = 1\n",
        &[],
        FrontPath::Spliced,
    )
    .await;
    let f = Front::new(Dialect::V1, s.gateway.channel().await);
    let none = HashMap::new();
    let first = f.create("pvc-a", 1 << 20, &none);
    let second = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let during = scrape(s.metrics);
        (f.create("pvc-b", 1 << 20, &none).await, during)
    };
    let (first, (second, during)) = tokio::join!(first, second);
    first.unwrap();
    let refused = second.unwrap_err();
    assert_eq!(refused.code, Code::ResourceExhausted, "{refused:?}");
    assert!(refused.message.contains("max_in_flight"), "{refused:?}");
    let gauge = "csi_gateway_protection_in_flight{method_name=\"/csi.v1.Controller/CreateVolume\"}";
    assert_eq!(value(&during, gauge), Some(1.0), "{during}");
    let after = scrape(s.metrics);
    assert_eq!(value(&after, gauge), Some(0.0), "{after}");
    let series = "csi_gateway_protection_rejections_total{method_name=\"/csi.v1.Controller/CreateVolume\",reason=\"max_in_flight\"}";
    assert_eq!(value(&after, series), Some(1.0), "{after}");
    // Below the limit again.
    f.create("pvc-b", 1 << 20, &none).await.unwrap();
}

#[tokio::test]
async fn default_deadline_applies_only_when_the_client_set_none() {
    let s = setup(
        "v0.1",
        "[calls.methods.CreateVolume]\ndefault_deadline = \"300ms\"\n",
        &[],
        FrontPath::Spliced,
    )
    .await;
    let f = Front::new(Dialect::V1, s.gateway.channel().await);
    let none = HashMap::new();
    let began = Instant::now();
    let e = f.create("pvc-slow", 1 << 20, &none).await.unwrap_err();
    assert_eq!(e.code, Code::DeadlineExceeded, "{e:?}");
    assert!(
        began.elapsed() < Duration::from_millis(1400),
        "{:?}",
        began.elapsed()
    );
    let series = "csi_gateway_protection_rejections_total{method_name=\"/csi.v1.Controller/CreateVolume\",reason=\"default_deadline\"}";
    assert_eq!(value(&scrape(s.metrics), series), Some(1.0));

    // A client deadline of its own wins over the default.
    use csi_gateway::dialect::proto::v1;
    let mut client = v1::controller_client::ControllerClient::new(s.gateway.channel().await);
    let mut request = tonic::Request::new(v1::CreateVolumeRequest {
        name: "pvc-patient".into(),
        volume_capabilities: vec![support::front::cap_v1()],
        ..Default::default()
    });
    request.set_timeout(Duration::from_secs(20));
    client.create_volume(request).await.unwrap();
}

/// With `[calls]` unset, the default, a same-dialect call stays on the fast path: the gateway
/// never times the upstream separately for it (it does for every call it decodes).
#[tokio::test]
async fn without_protection_calls_stay_on_the_fast_path() {
    let none = HashMap::new();
    for (calls, decoded) in [("", false), (SERIALIZED, true)] {
        let s = setup("v0.1", calls, &[], FrontPath::Spliced).await;
        let f = Front::new(Dialect::V1, s.gateway.channel().await);
        f.create("pvc-fast", 1 << 20, &none).await.unwrap();
        let metrics = scrape(s.metrics);
        let upstream_timed = metrics.contains(
            "csi_gateway_upstream_seconds_count{method_name=\"/csi.v1.Controller/CreateVolume\"}",
        );
        assert_eq!(upstream_timed, decoded, "{calls:?}:\n{metrics}");
    }
}

#[tokio::test]
async fn a_protection_for_an_unknown_method_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let flag = config(
        dir.path(),
        "[calls.methods.CreateVolumes]\nmax_in_flight = 1\n",
    );
    let out = std::process::Command::new(support::gateway::binary())
        .args(["run", &flag])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("calls.methods.CreateVolumes"), "{err}");
}
