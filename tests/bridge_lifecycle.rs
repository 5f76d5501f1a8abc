//! The full volume lifecycle across the network hop, with real mutual TLS on loopback:
//! - gateway (UNIX socket) → mTLS TCP → the reference backend listening on TCP itself;
//! - gateway (UNIX socket) → mTLS TCP → appliance gateway → the reference backend (UNIX socket),
//!   two gateways bridging an unmodified legacy plugin.

use csi_gateway_test_support as support;
use csi_gateway_test_support::bridge as bridge_support;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use bridge_support::*;
use csi_gateway::dialect::Dialect;
use csi_gateway::tls::gencerts::Leaf;
use support::front::Front;

/// Create, attach, publish, unpublish, detach, delete — and the second delete is OK.
async fn lifecycle(f: &Front, work: &Path) {
    let none = HashMap::new();
    let v = f.create("vol-bridge", 1 << 20, &none).await.unwrap();
    assert!(!v.id.is_empty());
    let node = f.node_id().await.unwrap();
    assert_eq!(node.name(), "node-1");
    let publish = f.controller_publish(&v, &node).await.unwrap();
    let target = work.join("target");
    f.node_publish(&v, &publish, None, &target).await.unwrap();
    assert!(
        std::fs::symlink_metadata(&target).is_ok(),
        "nothing published at {}",
        target.display()
    );
    f.node_unpublish(&v, &target).await.unwrap();
    f.controller_unpublish(&v, &node).await.unwrap();
    f.delete(&v, &none).await.unwrap();
    f.delete(&v, &none).await.unwrap();
}

fn wait_tcp(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "nothing listens on 127.0.0.1:{port}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_to_a_reference_backend_on_mutual_tls() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let pki = Pki::new(d, "appliance");
    let (scert, skey) = pki.issue("server", &Leaf::server(&["localhost"]));
    let (ccert, ckey) = pki.issue("client", &Leaf::client(&["node-1.test"], &[]));
    let port = free_port();
    let _backend = Proc::spawn(
        "backend",
        Command::new(support::workspace_binary("csi-reference-backend"))
            .arg(format!("--endpoint=tcp://127.0.0.1:{port}"))
            .arg(format!("--data-dir={}", d.join("data").display()))
            .args(["--publish-mode=symlink", "--require-staging=false"])
            .arg("--tls-cert")
            .arg(&scert)
            .arg("--tls-key")
            .arg(&skey)
            .arg("--tls-client-ca")
            .arg(&pki.ca_path),
    );
    wait_tcp(port);
    let config = front_section(&d.join("gw.sock"), &format!("tcp://127.0.0.1:{port}"))
        .replace("dialect = \"v1\"", "dialect = \"auto\"")
        + &upstream_tls_section(&ccert, &ckey, &pki.ca_path, "");
    let gateway = gateway("node", d, &config);
    gateway.wait_log("upstream connected");
    assert!(
        gateway.log().contains("\"dialect\":\"v1\""),
        "{}",
        gateway.log()
    );

    // A v0.1 orchestrator, translated to v1, over the encrypted hop.
    let f = Front::new(Dialect::V0_1, support::connect(&d.join("gw.sock")).await);
    std::fs::create_dir_all(d.join("work")).unwrap();
    lifecycle(&f, &d.join("work")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gateways_bridge_a_legacy_plugin_for_a_whole_lifecycle() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let pki = Pki::new(d, "bridge");
    let (scert, skey) = pki.issue("server", &Leaf::server(&["localhost"]));
    let (ccert, ckey) = pki.issue("client", &Leaf::client(&["node-1.test"], &[]));
    let backend = support::Backend::start(support::Options::new("v0.1-oneof")).await;
    let port = free_port();
    // The appliance side: the draft plugin on a UNIX socket, served on mTLS TCP (all services).
    let b_config = front_section(
        &d.join("b.sock"),
        &format!("unix://{}", backend.socket.display()),
    )
    .replace("dialect = \"v1\"", "dialect = \"auto\"")
        + &appliance_section(port, &scert, &skey, &pki.ca_path, "");
    let b = gateway("appliance", d, &b_config);
    b.wait_log("appliance listening");
    b.wait_log("upstream connected");
    // The node side: a UNIX socket for the orchestrator, the appliance over mTLS.
    let a_config = front_section(&d.join("a.sock"), &format!("tcp://127.0.0.1:{port}"))
        .replace("dialect = \"v1\"", "dialect = \"auto\"")
        + &upstream_tls_section(&ccert, &ckey, &pki.ca_path, "");
    let a = gateway("node", d, &a_config);
    a.wait_log("upstream connected");

    // A v1 orchestrator; the appliance translates to the draft plugin and keeps its handles.
    let f = Front::new(Dialect::V1, support::connect(&d.join("a.sock")).await);
    lifecycle(&f, &backend.work_dir).await;
    assert!(
        b.log().contains("\"upstream\":\"v0.1-oneof\""),
        "{}",
        b.log()
    );
    assert!(b.log().contains("bridge peer connected"), "{}", b.log());
    drop(a);
}
