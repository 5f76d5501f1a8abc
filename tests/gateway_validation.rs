//! Spec validation (`[calls] validate`) through the built gateway. Bad replies come from a real
//! malformed plugin: the load tool's fixed-reply upstream answers every call with an empty
//! message (no plugin name, no node id, no volume), which a v1 gateway detects and serves.
//! Bad requests go to the reference plugin.

use csi_gateway_test_support as support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use csi_gateway::dialect::proto::{v0_3, v1};
use csi_gateway::dialect::Dialect;
use support::front::Front;
use support::gateway::Gateway;
use support::{scrape, value, Backend, Options};
use tonic::Code;

/// The load tool's fixed-reply upstream: every call answered OK with an empty message.
struct Malformed {
    child: Child,
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl Malformed {
    fn start() -> Malformed {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("plugin.sock");
        let child = Command::new(support::workspace_binary("csi-gateway-load"))
            .arg("fixed-upstream")
            .arg(format!("--listen={}", socket.display()))
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + support::PROCESS_TIMEOUT;
        while std::os::unix::net::UnixStream::connect(&socket).is_err() {
            assert!(Instant::now() < deadline, "fixed upstream did not listen");
            std::thread::sleep(Duration::from_millis(10));
        }
        Malformed {
            child,
            socket,
            _dir: dir,
        }
    }
}

impl Drop for Malformed {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn config(dir: &Path, calls: &str) -> String {
    let path = dir.join("gateway.toml");
    let text = format!(
        "[listen]\nendpoint = \"unix:///unused\"\n[upstream]\nendpoint = \"unix:///unused-plugin\"\n\
         [state]\ndir = \"/unused\"\n[calls]\n{calls}"
    );
    std::fs::write(&path, text).unwrap();
    format!("--config={}", path.display())
}

async fn gateway(
    upstream: &Path,
    legacy: &str,
    calls: &str,
    metrics: u16,
) -> (Gateway, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let flags = [
        config(dir.path(), calls),
        format!("--metrics-listen=127.0.0.1:{metrics}"),
    ];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    (Gateway::start(upstream, legacy, &flags).await, dir)
}

#[tokio::test]
async fn enforce_replaces_a_malformed_reply_with_internal_naming_the_rule() {
    let plugin = Malformed::start();
    let metrics = support::free_port();
    let (g, _dir) = gateway(&plugin.socket, "v0.1", "validate = \"enforce\"\n", metrics).await;

    // Same dialect (v1 to the v1 plugin): relayed unchanged, but checked.
    let mut identity = v1::identity_client::IdentityClient::new(g.channel().await);
    let e = identity
        .get_plugin_info(v1::GetPluginInfoRequest::default())
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::Internal, "{e:?}");
    assert!(e.message().contains("name is REQUIRED"), "{e:?}");
    assert!(e.message().contains("vendor_version is REQUIRED"), "{e:?}");
    let mut node = v1::node_client::NodeClient::new(g.channel().await);
    let e = node
        .node_get_info(v1::NodeGetInfoRequest::default())
        .await
        .unwrap_err();
    assert!(e.message().contains("node_id is REQUIRED"), "{e:?}");

    // Translated for a v0.1 client: the reply it would have received is checked.
    let f = Front::new(Dialect::V0_1, g.channel().await);
    let e = f.node_id().await.unwrap_err();
    assert_eq!(e.code, Code::Internal, "{e:?}");
    assert!(e.message.contains("node_id is REQUIRED"), "{e:?}");
    let e = f
        .create("pvc-1", 1 << 20, &HashMap::new())
        .await
        .unwrap_err();
    assert!(e.message.contains("volume_info is REQUIRED"), "{e:?}");

    let text = scrape(metrics);
    let series = "csi_gateway_validation_failures_total{method_name=\"/csi.v1.Identity/GetPluginInfo\",direction=\"reply\"}";
    assert_eq!(value(&text, series), Some(1.0), "{text}");
    assert!(g.log_text().contains("violates the CSI spec"));
}

#[tokio::test]
async fn warn_lets_a_malformed_reply_through_and_reports_it() {
    let plugin = Malformed::start();
    let metrics = support::free_port();
    let (g, _dir) = gateway(&plugin.socket, "v0.1", "validate = \"warn\"\n", metrics).await;
    let mut identity = v1::identity_client::IdentityClient::new(g.channel().await);
    let info = identity
        .get_plugin_info(v1::GetPluginInfoRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.name, "");
    let text = scrape(metrics);
    let series = "csi_gateway_validation_failures_total{method_name=\"/csi.v1.Identity/GetPluginInfo\",direction=\"reply\"}";
    assert_eq!(value(&text, series), Some(1.0), "{text}");
    let log = g.log_text();
    let line = log
        .lines()
        .find(|l| l.contains("violates the CSI spec"))
        .unwrap_or_else(|| panic!("no warning:\n{log}"));
    assert!(
        line.contains("WARN") && line.contains("name is REQUIRED"),
        "{line}"
    );
}

#[tokio::test]
async fn off_by_default_a_malformed_reply_passes_unchecked() {
    let plugin = Malformed::start();
    let metrics = support::free_port();
    let (g, _dir) = gateway(&plugin.socket, "v0.1", "", metrics).await;
    let mut identity = v1::identity_client::IdentityClient::new(g.channel().await);
    identity
        .get_plugin_info(v1::GetPluginInfoRequest::default())
        .await
        .unwrap();
    assert!(!scrape(metrics).contains("csi_gateway_validation_failures_total{"));
}

#[tokio::test]
async fn enforce_refuses_bad_requests_in_each_dialect() {
    let backend = Backend::start(Options::new("v1")).await;
    let metrics = support::free_port();
    let (g, _dir) = gateway(
        &backend.socket,
        "v0.1-oneof",
        "validate = \"enforce\"\n",
        metrics,
    )
    .await;
    let none = HashMap::new();

    // v1: missing name, a name over 128 bytes, an access mode v1 does not define.
    let f = Front::new(Dialect::V1, g.channel().await);
    let e = f.create("", 1 << 20, &none).await.unwrap_err();
    assert_eq!(e.code, Code::InvalidArgument, "{e:?}");
    assert!(
        e.message
            .contains("violates the CSI spec: name is REQUIRED"),
        "{e:?}"
    );
    let e = f
        .create(&"n".repeat(129), 1 << 20, &none)
        .await
        .unwrap_err();
    assert!(
        e.message
            .contains("name is 129 bytes, over the spec's limit of 128"),
        "{e:?}"
    );
    let mut controller = v1::controller_client::ControllerClient::new(g.channel().await);
    let mut cap = support::front::cap_v1();
    cap.access_mode = Some(v1::volume_capability::AccessMode { mode: 99 });
    let e = controller
        .create_volume(v1::CreateVolumeRequest {
            name: "pvc-enum".into(),
            volume_capabilities: vec![cap],
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(
        e.message()
            .contains("volume_capabilities[0].access_mode.mode is 99"),
        "{e:?}"
    );
    // A good request still goes through.
    f.create("pvc-good", 1 << 20, &none).await.unwrap();

    // The draft: its own MISSING_REQUIRED_FIELD error.
    let d = Front::new(Dialect::V0_1Oneof, g.channel().await);
    let e = d.create("", 1 << 20, &none).await.unwrap_err();
    assert!(
        e.is(Code::InvalidArgument, "MISSING_REQUIRED_FIELD"),
        "{e:?}"
    );

    // v0.3: missing volume id.
    let mut node = v0_3::node_client::NodeClient::new(g.channel().await);
    let e = node
        .node_unpublish_volume(v0_3::NodeUnpublishVolumeRequest {
            volume_id: String::new(),
            target_path: "/t".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("volume_id is REQUIRED"), "{e:?}");

    let text = scrape(metrics);
    let series = "csi_gateway_validation_failures_total{method_name=\"/csi.v1.Controller/CreateVolume\",direction=\"request\"}";
    assert_eq!(value(&text, series), Some(3.0), "{text}");
}
