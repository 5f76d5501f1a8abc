//! What the driver's guardian costs (issue 53), measured from outside like the e2e bench: a
//! fixed-reply v1 upstream behind gateways started from the same binary in the same run: one
//! with no `[calls.methods.*]` at all (`gateway`, the baseline), one with `single_flight` on
//! CreateVolume (`guarded`), and one that reads CreateVolume off the fast path with no single
//! flight (`read`: a `max_in_flight` never reached), which splits the guarded call's cost into
//! leaving the splice and the single-flight table. Two runs of the load tool, each target's
//! calls/s, latency and CPU µs per call (the gateway's and the plugin's, `csi-gateway-load run
//! --cpu`) as a ratio to the baseline gateway, and the median of the rounds paired in time
//! (`--compare=guarded=gateway`, and `guarded=read`):
//! - CreateVolume, the protected method: every call leaves the spliced fast path (the gateway
//!   reads its messages) and goes through the single-flight table (its idempotency key and the
//!   digest of the request's canonical form), against the same call spliced;
//! - Probe, a method with no protection, on the gateway whose guardian guards another method,
//!   against the one with none: it should show no loss.
//!
//! Every call of a run sends the same request, so with more than one call in flight the
//! guarded gateway joins the CreateVolumes that arrive while an identical one is at the plugin
//! (as it does for a CO's retries): at 1 in flight no call is joined and the figure is the
//! guardian's cost per call.
//!
//! `cargo build --release --workspace && cargo bench --bench guardian` (the load tool is another
//! workspace member's binary, taken from `target/release/`; env: E2E_DURATION=1s,
//! E2E_ROUNDS=5, E2E_CONCURRENCY=1,16, E2E_WARMUP=200ms — shorter than the e2e bench's
//! defaults: two or three targets, and the paired ratio is the figure read;
//! E2E_METHODS=CreateVolume,Probe, the default, or either alone).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use csi_gateway_test_support::{free_port, workspace_binary};
use prost::Message;

struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(cmd: &mut Command) -> Proc {
    Proc(
        cmd.stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn"),
    )
}

fn wait_for_socket(path: &Path) {
    let until = Instant::now() + Duration::from_secs(10);
    while std::os::unix::net::UnixStream::connect(path).is_err() {
        assert!(Instant::now() < until, "{} did not come up", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until the gateway's `/readyz` answers 200: its plugin is detected.
fn wait_ready(port: u16) {
    let until = Instant::now() + Duration::from_secs(10);
    while ureq::get(&format!("http://127.0.0.1:{port}/readyz"))
        .call()
        .is_err()
    {
        assert!(
            Instant::now() < until,
            "the gateway on port {port} never got ready"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` passes nothing: only measure when asked.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let sock = |name: &str| -> PathBuf { dir.path().join(name) };
    let load = workspace_binary("csi-gateway-load");

    let upstream = spawn(
        Command::new(load)
            .args(["fixed-upstream", "--listen"])
            .arg(sock("up.sock")),
    );
    wait_for_socket(&sock("up.sock"));
    // The same binary twice: `calls` is the whole difference.
    let start_gateway = |name: &str, calls: &str| {
        let config = dir.path().join(format!("{name}.toml"));
        std::fs::write(&config, calls).unwrap();
        let port = free_port();
        let gw = spawn(
            Command::new(env!("CARGO_BIN_EXE_csi-gateway"))
                .args(["run", "--log-level", "error", "--upstream-dialect", "v1"])
                .arg(format!("--config={}", config.display()))
                .arg(format!("--metrics-listen=127.0.0.1:{port}"))
                .arg("--state-dir")
                .arg(dir.path().join(format!("{name}-state")))
                .arg("--listen")
                .arg(sock(&format!("{name}.sock")))
                .arg("--upstream")
                .arg(sock("up.sock")),
        );
        wait_for_socket(&sock(&format!("{name}.sock")));
        wait_ready(port);
        (gw, port)
    };
    let (plain, _) = start_gateway("gateway", "");
    let (guarded, guarded_port) = start_gateway(
        "guarded",
        "[calls.methods.CreateVolume]\nsingle_flight = true\n",
    );
    // Off the fast path with no single flight (a limit never reached): what reading the call
    // costs, so that guarded / read is the single-flight table's own share.
    let (read, _) = start_gateway(
        "read",
        "[calls.methods.CreateVolume]\nmax_in_flight = 1000000\n",
    );
    std::thread::sleep(Duration::from_millis(300)); // the gateways' first upstream connection

    let env = |k: &str, d: &str| std::env::var(k).unwrap_or_else(|_| d.to_string());
    let create = dir.path().join("create-volume.request");
    std::fs::write(&create, {
        use csi_gateway::dialect::proto::v1;
        use v1::volume_capability::{AccessMode, AccessType};
        v1::CreateVolumeRequest {
            name: "bench-volume".into(),
            capacity_range: Some(v1::CapacityRange {
                required_bytes: 1 << 30,
                limit_bytes: 0,
            }),
            volume_capabilities: vec![v1::VolumeCapability {
                access_mode: Some(AccessMode { mode: 1 }),
                access_type: Some(AccessType::Mount(Default::default())),
            }],
            parameters: [("tier".to_string(), "fast".to_string())].into(),
            ..Default::default()
        }
        .encode_to_vec()
    })
    .unwrap();
    let measure = |path: &str, request: Option<&Path>, targets: &[(&str, &Proc)]| {
        let mut run = Command::new(load);
        run.arg("run")
            .args(["--duration", &env("E2E_DURATION", "1s")])
            .args(["--rounds", &env("E2E_ROUNDS", "5")])
            .args(["--warmup", &env("E2E_WARMUP", "200ms")])
            .args(["--concurrency", &env("E2E_CONCURRENCY", "1,16")])
            .args(["--path", path])
            .arg("--compare=guarded=gateway");
        if targets.iter().any(|(n, _)| *n == "read") {
            run.arg("--compare=guarded=read");
        }
        for (name, proc) in targets {
            run.arg("--target")
                .arg(format!(
                    "{name}=unix://{}",
                    sock(&format!("{name}.sock")).display()
                ))
                .arg("--cpu")
                .arg(format!(
                    "{name}=gateway:{},plugin:{}",
                    proc.0.id(),
                    upstream.0.id()
                ));
        }
        if let Some(request) = request {
            run.arg("--request-file").arg(request);
        }
        assert!(run.status().unwrap().success());
    };
    let methods = env("E2E_METHODS", "CreateVolume,Probe");
    let wanted = |m: &str| methods.split(',').any(|w| w.trim() == m);
    if wanted("CreateVolume") {
        println!(
            "# v1 CreateVolume: gateway without the guardian (spliced) vs gateway with \
             single_flight on it vs gateway reading it with no single flight (max_in_flight \
             never reached)"
        );
        measure(
            "/csi.v1.Controller/CreateVolume",
            Some(&create),
            &[("gateway", &plain), ("guarded", &guarded), ("read", &read)],
        );
        // How many of the guarded gateway's CreateVolumes joined an identical one instead of
        // reaching the plugin (warm-up included).
        let metrics = ureq::get(&format!("http://127.0.0.1:{guarded_port}/metrics"))
            .call()
            .expect("the guarded gateway's metrics")
            .into_body()
            .read_to_string()
            .unwrap();
        let joined = metrics
            .lines()
            .find(|l| l.starts_with("csi_gateway_single_flight_joined_total{"))
            .and_then(|l| l.rsplit(' ').next())
            .unwrap_or("0");
        println!("guarded CreateVolumes joined to an identical one running: {joined}");
    }
    if wanted("Probe") {
        println!("\n# v1 Probe (unprotected): gateway without the guardian vs the guarded gateway");
        measure(
            "/csi.v1.Identity/Probe",
            None,
            &[("gateway", &plain), ("guarded", &guarded)],
        );
    }
}
