//! The etcd store as a shared cluster would run it: etcd serving clients only over TLS with
//! client certificates (`--client-cert-auth`) and with authentication on, the gateway holding
//! a certificate from `csi-gateway gen-certs` and a user name and password; and staging records
//! kept apart per node when node gateways share one etcd.
//!
//! A real etcd (`/usr/bin/etcd`, Debian's `etcd-server`) and `etcdctl` (`etcd-client`) run on
//! loopback; without them the tests fail, saying so.

use csi_gateway_test_support as support;

use std::collections::HashMap;
use std::path::Path;

use csi_gateway::dialect::Dialect;
use support::etcd::Etcd;
use support::front::Front;
use support::gateway::Gateway;
use support::{Backend, Options};

fn gen_certs(dir: &Path) {
    let out = std::process::Command::new(support::gateway::binary())
        .arg("gen-certs")
        .arg(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

/// A root user (required by `auth enable`) and a gateway user allowed only under its prefix.
fn enable_auth(etcd: &Etcd, password: &str) {
    etcd.etcdctl(&["user", "add", "root:root-password"]);
    etcd.etcdctl(&["user", "grant-role", "root", "root"]);
    etcd.etcdctl(&["user", "add", &format!("gateway:{password}")]);
    etcd.etcdctl(&["role", "add", "gateway"]);
    etcd.etcdctl(&[
        "role",
        "grant-permission",
        "gateway",
        "--prefix=true",
        "readwrite",
        "/csi-gateway/",
    ]);
    etcd.etcdctl(&["user", "grant-role", "gateway", "gateway"]);
    etcd.etcdctl(&["auth", "enable"]);
}

fn config(dir: &Path, certs: &Path, etcd: &Etcd, password_file: &Path) -> std::path::PathBuf {
    let file = dir.join("gateway.toml");
    std::fs::write(
        &file,
        format!(
            "[listen]\nendpoint = \"unix:///unused/csi.sock\"\n[upstream]\nendpoint = \"unix:///unused/p.sock\"\n\
             [state]\ndir = \"/unused\"\nbackend = \"etcd\"\netcd_endpoints = [\"{}\"]\n\
             etcd_username = \"gateway\"\netcd_password_file = \"{}\"\n\
             [state.etcd_tls]\ncert = \"{}\"\nkey = \"{}\"\nca = \"{}\"\n",
            etcd.endpoint,
            password_file.display(),
            certs.join("client.pem").display(),
            certs.join("client.key").display(),
            certs.join("ca.pem").display(),
        ),
    )
    .unwrap();
    file
}

/// Runs the gateway with `config` and expects it to refuse to start; returns its stderr.
fn refused_start(config: &Path, upstream: &Path) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(support::gateway::binary())
        .arg("run")
        .arg(format!("--config={}", config.display()))
        .arg(format!(
            "--listen=unix://{}",
            dir.path().join("gw.sock").display()
        ))
        .arg(format!("--upstream=unix://{}", upstream.display()))
        .arg(format!(
            "--state-dir={}",
            dir.path().join("state").display()
        ))
        .arg("--metrics-listen=")
        .arg("--state-timeout=3s")
        .output()
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test]
async fn handles_live_in_an_etcd_that_wants_client_certificates_and_a_password() {
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    gen_certs(&certs);
    let etcd = Etcd::start_tls(&certs).await;
    enable_auth(&etcd, "gateway-password-3c9e");
    let password = dir.path().join("password");
    std::fs::write(&password, "gateway-password-3c9e\n").unwrap();
    let config = config(dir.path(), &certs, &etcd, &password);
    let backend = Backend::start(Options::new("v0.1-oneof")).await;

    let mut gateway = Gateway::start(
        &backend.socket,
        "v0.1",
        &[&format!("--config={}", config.display())],
    )
    .await;
    let f = Front::new(Dialect::V1, gateway.channel().await);
    let v = f.create("vol-tls", 1 << 20, &HashMap::new()).await.unwrap();
    // The handle is in etcd under the gateway's prefix, readable only with the credentials.
    let listed = etcd.etcdctl(&[
        "--user=gateway:gateway-password-3c9e",
        "get",
        "--prefix",
        "--keys-only",
        "/csi-gateway/handle/",
    ]);
    assert!(listed.contains(&v.id), "{listed}");
    // A restart reads it back over TLS: the id-only delete finds the plugin's metadata.
    gateway.kill_and_restart().await;
    Front::new(Dialect::V1, gateway.channel().await)
        .delete(&v.id_only(), &HashMap::new())
        .await
        .unwrap();
    assert!(
        !gateway.log_text().contains("gateway-password-3c9e"),
        "the etcd password reached the log"
    );

    // Refusals at start-up, each naming etcd: a wrong password; a client certificate from
    // another CA (etcd refuses the handshake).
    std::fs::write(&password, "wrong-password").unwrap();
    let err = refused_start(&config, &backend.socket);
    assert!(
        err.contains("etcd") && err.contains("authentication failed"),
        "{err}"
    );
    std::fs::write(&password, "gateway-password-3c9e").unwrap();
    let other = dir.path().join("other");
    gen_certs(&other);
    for name in ["client.pem", "client.key"] {
        std::fs::copy(other.join(name), certs.join(name)).unwrap();
    }
    let err = refused_start(&config, &backend.socket);
    assert!(err.contains("etcd"), "{err}");
}

#[tokio::test]
async fn node_gateways_sharing_etcd_keep_their_staging_records_apart() {
    let etcd = Etcd::start().await;
    let node = |id: &str, backend: &Backend, metrics: &str| {
        vec![
            "--state-backend=etcd".to_string(),
            format!("--etcd-endpoints={}", etcd.endpoint),
            format!("--node-id={id}"),
            format!("--staging-dir={}", backend.path("staging").display()),
            format!("--metrics-listen={metrics}"),
        ]
    };
    let (plugin_a, plugin_b) = (
        Backend::start(Options::new("v1").arg("--require-staging=true")).await,
        Backend::start(Options::new("v1").arg("--require-staging=true")).await,
    );
    let (metrics_a, metrics_b) = (
        format!("127.0.0.1:{}", support::free_port()),
        format!("127.0.0.1:{}", support::free_port()),
    );
    let flags_a = node("node-a", &plugin_a, &metrics_a);
    let flags_a: Vec<&str> = flags_a.iter().map(String::as_str).collect();
    let a = Gateway::start(&plugin_a.socket, "v0.1", &flags_a).await;
    let f = Front::new(Dialect::V0_1, a.channel().await);
    let v = f.create("vol-n", 1 << 20, &HashMap::new()).await.unwrap();
    let target = plugin_a.path("t1");
    f.node_publish(&v, &HashMap::new(), None, &target)
        .await
        .unwrap();
    assert_eq!(support::staging_references(&metrics_a), 1.0);
    let keys = etcd.etcdctl(&["get", "--prefix", "--keys-only", "/csi-gateway/node/"]);
    assert!(
        keys.contains(&format!("/csi-gateway/node/node-a/staging/{}", v.id)),
        "{keys}"
    );

    // Node B on the same etcd and prefix counts and sweeps only its own records.
    let flags_b = node("node-b", &plugin_b, &metrics_b);
    let flags_b: Vec<&str> = flags_b.iter().map(String::as_str).collect();
    let b = Gateway::start(&plugin_b.socket, "v0.1", &flags_b).await;
    assert_eq!(
        support::staging_references(&metrics_b),
        0.0,
        "node A's target counted on node B"
    );
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(
        !b.log_text().contains("staging sweep"),
        "node B swept node A's record:\n{}",
        b.log_text()
    );
    assert!(
        !plugin_b.log_text().contains("NodeUnstageVolume"),
        "node B's plugin was asked to unstage node A's volume"
    );
    // Node A's record is intact: its last unpublish unstages as usual.
    f.node_unpublish(&v, &target).await.unwrap();
    assert!(plugin_a.log_text().contains("NodeUnstageVolume"));
    assert_eq!(support::staging_references(&metrics_a), 0.0);
}
