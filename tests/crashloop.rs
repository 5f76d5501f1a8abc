//! The crash loop's short form (the full run is `cargo bench --bench crashloop`): the gateway
//! SIGKILLed at random moments under concurrent clients, on the embedded store and on a real
//! etcd (`/usr/bin/etcd`, Debian's etcd-server), then nothing lost or leaked.

use std::process::Command;

use csi_gateway_test_support::workspace_binary;

fn crashloop(store: &str) {
    let out = Command::new(workspace_binary("csi-gateway-load"))
        .args([
            "crashloop",
            "--store",
            store,
            "--iterations",
            "30",
            "--clients",
            "3",
        ])
        .args(["--gateway", env!("CARGO_BIN_EXE_csi-gateway")])
        .args(["--backend", workspace_binary("csi-reference-backend")])
        .output()
        .expect("running csi-gateway-load crashloop");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{store}:\n{text}");
    assert!(
        text.contains("kills: 30,") && text.contains("violations: none"),
        "{store}:\n{text}"
    );
    // Lifecycles completed through both gateways despite the kills.
    let lifecycles = text
        .lines()
        .find(|l| l.starts_with("kills:"))
        .unwrap_or_default();
    assert!(!lifecycles.contains(" 0 through"), "{store}: {lifecycles}");
}

#[test]
fn crashloop_on_the_embedded_store() {
    crashloop("embedded");
}

#[test]
fn crashloop_on_etcd() {
    // The load tool runs /usr/bin/etcd.
    csi_gateway_test_support::deps::ETCD.path();
    crashloop("etcd");
}
