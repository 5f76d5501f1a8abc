//! The load tool (`csi-gateway-load`) as a user runs it: its fixed-reply upstream, and a short
//! run against that upstream directly and through the built gateway, with each generator —
//! its own HTTP/2 client and h2load (Debian's `nghttp2-client`; a missing h2load fails these
//! tests, naming what installs it: `support::deps`).

use csi_gateway_test_support as support;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use support::gateway::Gateway;
use support::PROCESS_TIMEOUT;

fn load_tool() -> &'static str {
    support::workspace_binary("csi-gateway-load")
}

/// A server the load tool runs (its fixed-reply upstream, its tonic proxy), killed on drop.
struct Served {
    socket: PathBuf,
    child: Child,
    _dir: Option<tempfile::TempDir>,
}

impl Served {
    /// Runs `csi-gateway-load <args>` and waits until `socket` accepts.
    fn start(args: &[&OsStr], socket: PathBuf, dir: Option<tempfile::TempDir>) -> Served {
        let child = Command::new(load_tool())
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawning the load tool");
        let until = Instant::now() + PROCESS_TIMEOUT;
        while std::os::unix::net::UnixStream::connect(&socket).is_err() {
            assert!(Instant::now() < until, "{args:?} did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        Served {
            socket,
            child,
            _dir: dir,
        }
    }

    fn fixed_upstream() -> Served {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("up.sock");
        let args = [
            "fixed-upstream".as_ref(),
            "--listen".as_ref(),
            socket.as_os_str(),
        ];
        Served::start(&args, socket.clone(), Some(dir))
    }

    /// The tool's plain tonic pass-through proxy in front of `upstream`.
    fn tonic_proxy(upstream: &Path) -> Served {
        let socket = upstream.with_file_name("tonic.sock");
        let args = [
            "tonic-proxy".as_ref(),
            "--listen".as_ref(),
            socket.as_os_str(),
            "--upstream".as_ref(),
            upstream.as_os_str(),
        ];
        Served::start(&args, socket.clone(), None)
    }
}

impl Served {
    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `csi-gateway-load run` with short timings (one round, unless `args` set the rounds) and
/// `args`, bounded in time.
async fn run(args: &[String]) -> Output {
    if args.iter().any(|a| a == "--generator=h2load") {
        support::deps::H2LOAD.path();
    }
    let mut cmd = tokio::process::Command::new(load_tool());
    cmd.args(["run", "--warmup", "100ms", "--duration", "500ms"]);
    if !args.iter().any(|a| a.starts_with("--rounds")) {
        cmd.args(["--rounds", "1"]);
    }
    cmd.args(args).kill_on_drop(true);
    tokio::time::timeout(PROCESS_TIMEOUT * 2, cmd.output())
        .await
        .expect("the load tool did not finish")
        .expect("running the load tool")
}

/// A run with `generator` that must succeed; its rows, and stdout for messages.
async fn measured(generator: &str, args: &[String]) -> (Vec<Row>, String) {
    let mut all = vec![format!("--generator={generator}")];
    all.extend_from_slice(args);
    let out = run(&all).await;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{generator}: {stderr}");
    (rows(&stdout), stdout)
}

fn target(name: &str, socket: &Path) -> String {
    format!("--target={name}=unix://{}", socket.display())
}

/// One printed row: target, in flight, calls/s, mean, p50, p99, errors, ratio.
struct Row {
    target: String,
    inflight: usize,
    calls_per_sec: f64,
    p50: String,
    errors: u64,
    ratio: f64,
}

fn rows(stdout: &str) -> Vec<Row> {
    let mut lines = stdout.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["target", "inflight", "calls/s", "mean", "p50", "p99", "errors", "ratio"],
        "{stdout}"
    );
    lines
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 8, "row {l:?}");
            Row {
                target: f[0].to_string(),
                inflight: f[1].parse().unwrap(),
                calls_per_sec: f[2].parse().unwrap(),
                p50: f[4].to_string(),
                errors: f[6].parse().unwrap(),
                ratio: f[7].parse().unwrap(),
            }
        })
        .collect()
}

#[tokio::test]
async fn each_generator_measures_the_upstream_directly_and_through_the_gateway_in_one_run() {
    let upstream = Served::fixed_upstream();
    let gw = Gateway::start(&upstream.socket, "v0.1", &["--upstream-dialect=v1"]).await;
    for generator in ["builtin", "h2load"] {
        let args = [
            "--concurrency=1,4".into(),
            target("direct", &upstream.socket),
            target("gateway", &gw.socket),
        ];
        let (rows, stdout) = measured(generator, &args).await;
        let seen: Vec<(&str, usize)> = rows.iter().map(|r| (&*r.target, r.inflight)).collect();
        assert_eq!(
            seen,
            [("direct", 1), ("gateway", 1), ("direct", 4), ("gateway", 4)],
            "{generator}: {stdout}"
        );
        for r in &rows {
            assert!(r.calls_per_sec > 0.0, "{generator}: {stdout}");
            assert_eq!(r.errors, 0, "{generator}: {stdout}");
            assert!(r.ratio > 0.0, "{generator}: {stdout}");
            if r.target == "direct" {
                assert_eq!(r.ratio, 1.0, "the first target is the base: {stdout}");
            }
            // h2load reports a mean only; the builtin client keeps a histogram.
            assert_eq!(r.p50 == "-", generator == "h2load", "{generator}: {stdout}");
        }
    }
}

/// Runs the tool with `args`, which must fail with each of `says` in its message; returns stdout.
async fn refused(args: &[String], says: &[&str]) -> String {
    let out = run(args).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    for s in says {
        assert!(stderr.contains(s), "no {s:?} in: {stderr}");
    }
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn h2load_is_not_run_against_a_target_whose_call_fails() {
    // h2load counts HTTP/2 answers; a gRPC error inside a 200 must not pass as a call made.
    let upstream = Served::fixed_upstream();
    let gw = Gateway::start(&upstream.socket, "v0.1", &["--upstream-dialect=v1"]).await;
    let args = [
        "--generator=h2load".into(),
        "--path=/csi.v1.Identity/NoSuchMethod".into(),
        "--concurrency=1".into(),
        target("gateway", &gw.socket),
    ];
    let says = [
        "target gateway",
        "/csi.v1.Identity/NoSuchMethod answered",
        "Unimplemented",
    ];
    assert_eq!(refused(&args, &says).await, "", "nothing measured");
}

#[tokio::test]
async fn h2load_needs_the_calls_in_flight_to_divide_among_the_connections() {
    let upstream = Served::fixed_upstream();
    let args = [
        "--generator=h2load".into(),
        "--connections=2".into(),
        "--concurrency=3".into(),
        target("direct", &upstream.socket),
    ];
    refused(&args, &["3 in flight do not divide among 2 connections"]).await;
}

#[tokio::test]
async fn the_tonic_reference_proxy_relays_every_call_of_either_generator_over_two_connections() {
    let upstream = Served::fixed_upstream();
    let proxy = Served::tonic_proxy(&upstream.socket);
    for generator in ["builtin", "h2load"] {
        let args = [
            "--connections=2".into(),
            "--concurrency=4".into(),
            target("direct", &upstream.socket),
            target("tonic", &proxy.socket),
        ];
        let (rows, stdout) = measured(generator, &args).await;
        assert_eq!(rows.len(), 2, "{generator}: {stdout}");
        assert_eq!(rows[1].target, "tonic", "{stdout}");
        for r in &rows {
            assert!(r.calls_per_sec > 0.0, "{generator}: {stdout}");
            assert_eq!(r.errors, 0, "{generator}: {stdout}");
        }
    }
}

#[tokio::test]
async fn the_tonic_proxy_says_which_upstream_it_cannot_reach() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nobody.sock");
    let out = tokio::time::timeout(
        PROCESS_TIMEOUT,
        tokio::process::Command::new(load_tool())
            .args(["tonic-proxy", "--listen"])
            .arg(dir.path().join("tonic.sock"))
            .arg("--upstream")
            .arg(&missing)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the tonic proxy did not give up")
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains(&*missing.to_string_lossy()), "{stderr}");
}

/// `--cpu NAME=label:pid,...` adds each watched process's CPU µs per call to NAME's row, with
/// either generator; a `--cpu` for no target is refused.
#[tokio::test]
async fn cpu_per_call_is_reported_for_each_watched_process() {
    let upstream = Served::fixed_upstream();
    let gw = Gateway::start(&upstream.socket, "v0.1", &["--upstream-dialect=v1"]).await;
    let plugin = upstream.pid();
    for generator in ["builtin", "h2load"] {
        let args = [
            "--concurrency=4".into(),
            target("direct", &upstream.socket),
            target("gateway", &gw.socket),
            format!("--cpu=direct=plugin:{plugin}"),
            format!("--cpu=gateway=gateway:{},plugin:{plugin}", gw.pid()),
        ];
        let stdout = measured_raw(generator, &args).await;
        let mut lines = stdout.lines();
        assert!(lines.next().unwrap().ends_with("cpu µs/call"), "{stdout}");
        for line in lines {
            let f: Vec<&str> = line.split_whitespace().collect();
            let watched: Vec<(&str, f64)> = f[8..]
                .chunks(2)
                .map(|p| (p[0], p[1].parse::<f64>().unwrap()))
                .collect();
            let labels: Vec<&str> = watched.iter().map(|w| w.0).collect();
            match f[0] {
                "direct" => assert_eq!(labels, ["plugin"], "{stdout}"),
                _ => assert_eq!(labels, ["gateway", "plugin"], "{stdout}"),
            }
            // Each process did work for the calls: a call costs it some CPU, and not a second.
            for (label, us) in watched {
                assert!(us > 0.0 && us < 1e6, "{generator}: {label} {us}: {stdout}");
            }
        }
    }
    let args = [
        target("direct", &upstream.socket),
        format!("--cpu=gateway=gateway:{plugin}"),
    ];
    refused(&args, &["--cpu names \"gateway\", which is no --target"]).await;
}

/// A run with `generator` that must succeed: its stdout.
async fn measured_raw(generator: &str, args: &[String]) -> String {
    let mut all = vec![format!("--generator={generator}")];
    all.extend_from_slice(args);
    let out = run(&all).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{generator}: {stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `--path-for NAME=PATH` calls target NAME on its own path, the others on `--path` (the e2e
/// bench's translated rows beside spliced ones); one naming no target is refused.
#[tokio::test]
async fn each_target_may_be_called_on_a_path_of_its_own() {
    let upstream = Served::fixed_upstream();
    let gw = Gateway::start(&upstream.socket, "v0.1", &["--upstream-dialect=v1"]).await;
    let args = [
        "--concurrency=2".into(),
        "--path=/csi.v1.Identity/Probe".into(),
        target("v1", &gw.socket),
        target("v0.3", &gw.socket),
        target("unknown", &gw.socket),
        "--path-for=v0.3=/csi.v0.Identity/Probe".into(),
        "--path-for=unknown=/csi.v1.Identity/NoSuchMethod".into(),
    ];
    let (rows, stdout) = measured("builtin", &args).await;
    let errors: Vec<(&str, bool)> = rows.iter().map(|r| (&*r.target, r.errors > 0)).collect();
    assert_eq!(
        errors,
        [("v1", false), ("v0.3", false), ("unknown", true)],
        "only the target on a path the gateway does not route fails: {stdout}"
    );
    let args = [
        target("direct", &upstream.socket),
        "--path-for=other=/csi.v0.Identity/Probe".into(),
    ];
    refused(&args, &["--path-for names \"other\", which is no --target"]).await;
}

/// `--request-file PATH` sends that message on every call, with either generator: a v0.3
/// DeleteVolume, whose volume id the gateway requires, fails without it and is answered with
/// it (the e2e bench's DeleteVolume rows); a file that cannot be read is refused.
#[tokio::test]
async fn every_call_may_send_a_request_read_from_a_file() {
    let upstream = Served::fixed_upstream();
    let gw = Gateway::start(&upstream.socket, "v0.1", &["--upstream-dialect=v1"]).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("delete.request");
    // DeleteVolumeRequest { volume_id: "v" } (field 1, the same in v0.3 and v1).
    std::fs::write(&file, [0x0a, 0x01, b'v']).unwrap();
    let base = [
        "--concurrency=2".to_string(),
        "--path=/csi.v0.Controller/DeleteVolume".into(),
        target("gw", &gw.socket),
    ];
    let (rows, stdout) = measured("builtin", &base).await;
    assert!(
        rows[0].errors > 0,
        "an empty request was answered: {stdout}"
    );
    let mut with_file = base.to_vec();
    with_file.push(format!("--request-file={}", file.display()));
    for generator in ["builtin", "h2load"] {
        let (rows, stdout) = measured(generator, &with_file).await;
        assert_eq!(rows[0].errors, 0, "{generator}: {stdout}");
        assert!(rows[0].calls_per_sec > 0.0, "{generator}: {stdout}");
    }
    let mut missing = base.to_vec();
    missing.push(format!(
        "--request-file={}",
        dir.path().join("none").display()
    ));
    refused(&missing, &["--request-file"]).await;
    // One target's own request: the empty one for the default, the file's for "gw".
    let mut for_one = base.to_vec();
    for_one.push(target("empty", &gw.socket));
    for_one.push(format!("--request-file-for=gw={}", file.display()));
    let (rows, stdout) = measured("builtin", &for_one).await;
    assert_eq!(rows[0].errors, 0, "{stdout}");
    assert!(rows[1].errors > 0, "{stdout}");
    let mut unknown = base.to_vec();
    unknown.push(format!("--request-file-for=nobody={}", file.display()));
    refused(&unknown, &["--request-file-for", "nobody"]).await;
}

/// `--compare A=B` adds, after each concurrency's rows, the median over the rounds of A's
/// calls/s over B's in the same round and of their watched CPU per call: a target against
/// itself is 1 exactly; a pair naming no target is refused.
#[tokio::test]
async fn compare_reports_paired_round_ratios_after_each_concurrency() {
    let upstream = Served::fixed_upstream();
    let gw = Gateway::start(&upstream.socket, "v0.1", &["--upstream-dialect=v1"]).await;
    let plugin = upstream.pid();
    let args = [
        "--concurrency=1,4".into(),
        "--rounds=3".into(),
        target("direct", &upstream.socket),
        target("gateway", &gw.socket),
        format!("--cpu=direct=plugin:{plugin}"),
        format!("--cpu=gateway=gateway:{},plugin:{plugin}", gw.pid()),
        "--compare=gateway=direct".into(),
        "--compare=direct=direct".into(),
    ];
    let stdout = measured_raw("builtin", &args).await;
    let compared: Vec<&str> = stdout.lines().filter(|l| l.starts_with("  ")).collect();
    assert_eq!(
        compared.len(),
        4,
        "two pairs at two concurrencies: {stdout}"
    );
    let figures = |line: &str| -> (f64, f64) {
        let number = |after: &str| -> f64 {
            let rest = &line[line.find(after).unwrap() + after.len()..];
            rest.split(|c: char| c == ',' || c.is_whitespace())
                .next()
                .unwrap()
                .parse()
                .unwrap_or_else(|e| panic!("{after}: {e}: {line}"))
        };
        (
            number("calls/s "),
            number("CPU per call (watched processes) "),
        )
    };
    for line in &compared {
        assert!(line.contains("median of 3 paired rounds"), "{line}");
        let (calls, cpu) = figures(line);
        if line.starts_with("  direct / direct") {
            assert_eq!((calls, cpu), (1.0, 1.0), "{line}");
            // Every round's ratio is 1: the quartiles too, for calls/s and for CPU.
            assert_eq!(line.matches("[1.00–1.00]").count(), 2, "{line}");
        } else {
            assert!(line.starts_with("  gateway / direct"), "{line}");
            // The gateway is one more process in the way, and its CPU adds to the plugin's.
            assert!(calls > 0.0 && calls < 1.5, "{line}");
            assert!(cpu > 1.0, "{line}");
        }
    }
    let args = [
        target("direct", &upstream.socket),
        "--compare=direct=nobody".into(),
    ];
    refused(&args, &["--compare names \"nobody\", which is no --target"]).await;
}
