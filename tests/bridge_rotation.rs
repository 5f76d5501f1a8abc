//! Certificate rotation under load, with zero failed calls. A steady run of calls goes
//! client → gateway A → mTLS → gateway B (appliance) → plugin, each call on a new front
//! connection so A makes a new TLS connection (a new handshake) per call. During the run:
//! B's key is broken (the reload fails and B keeps serving with the old material); both sides
//! then trust old and new CA; then both sides switch to certificates from the new CA. B reloads
//! by noticing the file changes, A only on SIGHUP (its poll interval is an hour).

use csi_gateway_test_support::bridge as bridge_support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bridge_support::*;
use csi_gateway::tls::gencerts::{write_atomic, Issued, Leaf};

const ALLOWED: &str = "node-1.csi-gateway.test";
const ROTATED: &str = "spiffe://csi-gateway.test/node-1/rotated";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_rotate_during_a_run_of_calls_without_a_failed_call() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (old, new) = (Pki::new(d, "old"), Pki::new(d, "new"));
    let put = |name: &str, text: &str| {
        write_atomic(&d.join(name), text.as_bytes(), 0o600).unwrap();
        d.join(name)
    };
    let s1 = old.ca.issue(&Leaf::server(&["localhost"])).unwrap();
    let c1 = old.ca.issue(&Leaf::client(&[ALLOWED], &[])).unwrap();
    let (b_cert, b_key, b_ca) = (
        put("b.pem", &s1.cert_pem),
        put("b.key", &s1.key_pem),
        put("b-ca.pem", &old.ca.cert_pem),
    );
    let (a_cert, a_key, a_ca) = (
        put("a.pem", &c1.cert_pem),
        put("a.key", &c1.key_pem),
        put("a-ca.pem", &old.ca.cert_pem),
    );

    let _plugin = fixed_upstream(&d.join("up.sock"));
    let port = free_port();
    let rules = format!("reload_interval = \"100ms\"\n[[appliance.peers]]\ndns = [\"{ALLOWED}\"]\nservices = [\"Identity\"]\n");
    let b = gateway(
        "appliance",
        d,
        &(front_section(
            &d.join("b.sock"),
            &format!("unix://{}", d.join("up.sock").display()),
        ) + &appliance_section(port, &b_cert, &b_key, &b_ca, &rules)),
    );
    b.wait_log("appliance listening");
    let a = gateway(
        "node",
        d,
        &(front_section(&d.join("a.sock"), &format!("tcp://127.0.0.1:{port}"))
            + &upstream_tls_section(&a_cert, &a_key, &a_ca, "reload_interval = \"1h\"")),
    );
    a.wait_log("upstream connected");

    // The run of calls.
    let (ok, stop) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    let failures = Arc::new(Mutex::new(Vec::<String>::new()));
    let run = {
        let (ok, stop, failures, sock) =
            (ok.clone(), stop.clone(), failures.clone(), d.join("a.sock"));
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                match call(&sock, "/csi.v1.Identity/Probe").await {
                    Ok(_) => ok.fetch_add(1, Ordering::Relaxed),
                    Err(s) => {
                        failures
                            .lock()
                            .unwrap()
                            .push(format!("{:?}: {}", s.code(), s.message()));
                        0
                    }
                };
            }
        })
    };
    let progress = |n: u64| {
        let (ok, target) = (ok.clone(), ok.load(Ordering::Relaxed) + n);
        async move {
            let until = Instant::now() + WAIT;
            while ok.load(Ordering::Relaxed) < target {
                assert!(Instant::now() < until, "calls stalled below {target}");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };
    progress(20).await;

    // 1. A half-written key: B's reload fails and it keeps the old material.
    put("b.key", "-----BEGIN PRIVATE KEY-----\ntruncated\n");
    b.wait_log("TLS reload failed; keeping the previous certificates");
    progress(20).await;

    // 2. Both sides trust the old and the new CA; B's key is whole again.
    let both = format!("{}{}", old.ca.cert_pem, new.ca.cert_pem);
    put("b.key", &s1.key_pem);
    put("b-ca.pem", &both);
    put("a-ca.pem", &both);
    let a_reloads = a.count("reloaded TLS material");
    a.hangup();
    a.wait_log_n("reloaded TLS material", a_reloads + 1);
    let probe_client = new.ca.issue(&Leaf::client(&[ALLOWED], &[])).unwrap();
    until_probe_ok(port, &both, &probe_client).await; // B trusts the new CA now
    progress(20).await;

    // 3. Both sides switch to certificates from the new CA.
    let s2 = new.ca.issue(&Leaf::server(&["localhost"])).unwrap();
    let c2 = new.ca.issue(&Leaf::client(&[ALLOWED], &[ROTATED])).unwrap();
    put("b.pem", &s2.cert_pem);
    put("b.key", &s2.key_pem);
    put("a.pem", &c2.cert_pem);
    put("a.key", &c2.key_pem);
    let a_reloads = a.count("reloaded TLS material");
    a.hangup();
    a.wait_log_n("reloaded TLS material", a_reloads + 1);
    until_probe_ok(port, &new.ca.cert_pem, &probe_client).await; // B serves the new certificate
    progress(20).await;
    b.wait_log(&format!("\"identity\":\"{ROTATED}\"")); // A's new connections use the new one

    stop.store(true, Ordering::Relaxed);
    tokio::time::timeout(Duration::from_secs(15), run)
        .await
        .unwrap()
        .unwrap();
    let failures = failures.lock().unwrap();
    assert!(
        failures.is_empty(),
        "{} failed calls: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    assert!(ok.load(Ordering::Relaxed) >= 80);
}

/// Retries a direct mTLS probe (trusting `roots`, presenting `client`) until B accepts it.
async fn until_probe_ok(port: u16, roots: &str, client: &Issued) {
    let until = Instant::now() + WAIT;
    loop {
        match tls_probe(port, client_config(roots, Some(client))).await {
            Ok(()) => return,
            Err(e) => assert!(Instant::now() < until, "B never accepted the probe: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
