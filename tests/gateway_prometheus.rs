//! A real Prometheus server (Debian's `prometheus`, installed by `.ci/setup`) scrapes the gateway
//! during a volume lifecycle; the series must then exist in Prometheus with the labels existing
//! CSI dashboards expect, and with the right counts, as read through its HTTP query API.

use csi_gateway_test_support as support;

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use csi_gateway::dialect::Dialect;
use serde_json::Value;
use support::front::Front;
use support::gateway::Gateway;
use support::{Backend, Options};

struct Prometheus {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts Prometheus scraping `target` every 200ms; fails the test if it is not installed.
fn start_prometheus(target: u16) -> Prometheus {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 200ms\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: csi-gateway\n    static_configs:\n      - targets: ['127.0.0.1:{target}']\n"
        ),
    )
    .unwrap();
    let port = support::free_port();
    let child = Command::new(support::deps::PROMETHEUS.path())
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("running prometheus");
    Prometheus {
        child,
        port,
        _dir: dir,
    }
}

impl Prometheus {
    /// The result vector of an instant query (empty until the series exist).
    fn query(&self, q: &str) -> Vec<Value> {
        let url = format!("http://127.0.0.1:{}/api/v1/query", self.port);
        let Ok(mut resp) = ureq::get(&url).query("query", q).call() else {
            return Vec::new();
        };
        let body: Value =
            serde_json::from_str(&resp.body_mut().read_to_string().unwrap_or_default())
                .unwrap_or_default();
        body["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// Polls `q` until `ok` accepts its result, within a bound.
    async fn wait_for(&self, q: &str, ok: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let r = self.query(q);
            if ok(&r) {
                return r;
            }
            assert!(
                Instant::now() < deadline,
                "Prometheus never answered {q} as expected; last: {r:?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

fn value(sample: &Value) -> f64 {
    sample["value"][1].as_str().unwrap().parse().unwrap()
}

#[tokio::test]
async fn prometheus_scrapes_sidecar_compatible_series() {
    let backend = Backend::start(Options::new("v0.1-oneof")).await;
    let metrics_port = support::free_port();
    let gateway = Gateway::start(
        &backend.socket,
        "v0.1",
        &[&format!("--metrics-listen=127.0.0.1:{metrics_port}")],
    )
    .await;
    let prometheus = start_prometheus(metrics_port);

    // A lifecycle from a v1 orchestrator, translated to the draft plugin, with one failure.
    let f = Front::new(Dialect::V1, gateway.channel().await);
    let none = HashMap::new();
    let v = f.create("vol-p", 1 << 20, &none).await.unwrap();
    f.create("vol-p", 1 << 20, &none).await.unwrap();
    let node = f.node_id().await.unwrap();
    f.controller_publish(&v, &node).await.unwrap();
    f.controller_unpublish(&v, &node).await.unwrap();
    f.delete(&v, &none).await.unwrap();
    let ghost = support::front::Volume {
        id: "ghost".into(),
        context: HashMap::new(),
        capacity: 0,
    };
    f.controller_publish(&ghost, &node).await.unwrap_err();

    let create =
        r#"csi_sidecar_operations_seconds_count{method_name="/csi.v1.Controller/CreateVolume"}"#;
    let r = prometheus
        .wait_for(create, |r| r.len() == 1 && value(&r[0]) == 2.0)
        .await;
    let labels = &r[0]["metric"];
    assert_eq!(
        labels["driver_name"], "reference.csi-gateway.dev",
        "{labels}"
    );
    assert_eq!(labels["grpc_status_code"], "OK", "{labels}");
    assert_eq!(labels["job"], "csi-gateway");

    let not_found = r#"csi_sidecar_operations_seconds_count{method_name="/csi.v1.Controller/ControllerPublishVolume",grpc_status_code="NotFound"}"#;
    prometheus
        .wait_for(not_found, |r| r.len() == 1 && value(&r[0]) == 1.0)
        .await;
    // The sidecars' buckets, so their dashboards' histogram_quantile queries work unchanged.
    let buckets = prometheus
        .wait_for(r#"csi_sidecar_operations_seconds_bucket{method_name="/csi.v1.Controller/DeleteVolume"}"#, |r| r.len() == 14)
        .await;
    let mut les: Vec<String> = buckets
        .iter()
        .map(|b| b["metric"]["le"].as_str().unwrap().to_string())
        .collect();
    les.sort_by(|a, b| {
        a.parse::<f64>()
            .unwrap_or(f64::MAX)
            .total_cmp(&b.parse::<f64>().unwrap_or(f64::MAX))
    });
    assert_eq!(
        les,
        [
            "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "15", "25", "50", "120", "300", "600",
            "+Inf"
        ]
    );

    let translations = r#"csi_gateway_translations_total{front_dialect="v1",upstream_dialect="v0.1-oneof",method_name="/csi.v1.Controller/DeleteVolume",outcome="ok"}"#;
    prometheus
        .wait_for(translations, |r| r.len() == 1 && value(&r[0]) == 1.0)
        .await;
    // The failed publish: the plugin's own NotFound, so the upstream's failure.
    let failed = r#"csi_gateway_translations_total{method_name="/csi.v1.Controller/ControllerPublishVolume",outcome="upstream"}"#;
    prometheus
        .wait_for(failed, |r| r.len() == 1 && value(&r[0]) == 1.0)
        .await;
    prometheus
        .wait_for("csi_gateway_upstream_connected", |r| {
            r.len() == 1 && value(&r[0]) == 1.0
        })
        .await;
    let info = prometheus
        .wait_for("csi_gateway_upstream_dialect_info == 1", |r| r.len() == 1)
        .await;
    assert_eq!(info[0]["metric"]["dialect"], "v0.1-oneof");
    prometheus
        .wait_for("csi_gateway_store_operations_total", |r| !r.is_empty())
        .await;
    prometheus
        .wait_for("csi_gateway_upstream_seconds_count", |r| !r.is_empty())
        .await;

    // The gateway's own services are not CSI operations: a shared Prometheus (or an alert on
    // the sidecars' histogram) must not count them as the driver's calls.
    let mut health = tonic_health::pb::health_client::HealthClient::new(gateway.channel().await);
    for _ in 0..2 {
        health
            .check(tonic_health::pb::HealthCheckRequest::default())
            .await
            .unwrap();
    }
    let checks = r#"csi_gateway_service_calls_total{method_name="/grpc.health.v1.Health/Check",grpc_status_code="OK"}"#;
    prometheus
        .wait_for(checks, |r| r.len() == 1 && value(&r[0]) == 2.0)
        .await;
    let services =
        prometheus.query(r#"csi_sidecar_operations_seconds_count{method_name=~"/grpc\\..*"}"#);
    assert!(
        services.is_empty(),
        "services counted as CSI operations: {services:?}"
    );
    // What dashboards and alerts select gateways by: exported by gateways alone.
    let info = prometheus
        .wait_for("csi_gateway_info == 1", |r| r.len() == 1)
        .await;
    let labels = &info[0]["metric"];
    assert_eq!(labels["version"], env!("CARGO_PKG_VERSION"), "{labels}");
    assert_eq!(labels["dialects"], "v1,v0.3,v0.1", "{labels}");
    assert_eq!(
        labels["upstream"],
        format!("unix://{}", backend.socket.display()),
        "{labels}"
    );
    // The alerts' selection: the sidecar histogram of gateways only.
    let selected = prometheus.query(
        "count(csi_sidecar_operations_seconds_count and on(job, instance) csi_gateway_info)",
    );
    assert!(
        selected.len() == 1 && value(&selected[0]) >= 5.0,
        "{selected:?}"
    );
}
