//! The same measurement made by h2load (nghttp2's HTTP/2 load generator, Debian's
//! `nghttp2-client`): a generator in C that shares no code with the gateway, so that a figure
//! does not depend on this crate's own client. It runs one thread per connection, up to the
//! machine's CPUs, as the tool's own client does.
//!
//! h2load sees HTTP/2 responses, not gRPC statuses, so the load tool first has each target
//! answer one call through this crate's client (`answers_ok` in `csi-gateway-load`), and a
//! response other than 2xx counts as an error here.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::process::Command;

use super::{Figures, Load};
use csi_gateway::endpoint::Endpoint;
use csi_gateway::grpc::frame;

/// The program run: `$H2LOAD`, else `h2load` on the PATH.
pub fn program() -> PathBuf {
    std::env::var_os("H2LOAD")
        .map(PathBuf::from)
        .unwrap_or_else(|| "h2load".into())
}

/// Runs h2load once for `load`.
pub async fn measure(load: &Load) -> Result<Figures, String> {
    // h2load reads the request body from a file.
    let work = tempfile::tempdir().map_err(|e| format!("a temp dir for h2load: {e}"))?;
    let body = work.path().join("request.grpc");
    std::fs::write(&body, frame::encode(&load.request))
        .map_err(|e| format!("writing {}: {e}", body.display()))?;
    // h2load connects, warms up, then measures: the window is timed from its start.
    let from = std::time::Instant::now() + load.warmup.max(Duration::from_millis(1));
    let cpu = tokio::spawn(super::cpu::window(
        load.cpu.clone(),
        from,
        from + load.duration,
    ));
    let out = Command::new(program())
        .args(arguments(
            load,
            &body,
            super::generator_threads(load.connections),
        )?)
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| {
            format!(
                "running {}: {e} (install Debian's nghttp2-client or set H2LOAD)",
                program().display()
            )
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "h2load failed ({}): {}{}",
            out.status,
            text.trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let mut figures = parse(&text, load.duration)?;
    figures.cpu = cpu.await.map_err(|e| e.to_string())??;
    Ok(figures)
}

/// h2load's command line: `connections` clients, each with its share of the calls in flight,
/// on `threads` threads (see `generator_threads`).
fn arguments(load: &Load, body: &Path, threads: usize) -> Result<Vec<String>, String> {
    let clients = load.connections.max(1);
    if load.concurrency == 0 || !load.concurrency.is_multiple_of(clients) {
        return Err(format!(
            "h2load runs the same number of streams on every connection: {} in flight do not \
             divide among {clients} connections",
            load.concurrency
        ));
    }
    let (base, authority) = match &load.target {
        Endpoint::Unix(path) => (
            vec!["-B".to_string(), format!("unix:{}", path.display())],
            "localhost".to_string(),
        ),
        Endpoint::Tcp(host_port) => (Vec::new(), host_port.clone()),
    };
    let mut args = base;
    args.extend([
        "-c".into(),
        clients.to_string(),
        "-t".into(),
        threads.to_string(),
        "-m".into(),
        (load.concurrency / clients).to_string(),
        "-D".into(),
        millis(load.duration),
        // h2load wants a warm-up of at least a millisecond whenever -D is given.
        format!(
            "--warm-up-time={}",
            millis(load.warmup.max(Duration::from_millis(1)))
        ),
        "-d".into(),
        body.display().to_string(),
        "-H".into(),
        "content-type: application/grpc".into(),
        "-H".into(),
        "te: trailers".into(),
        format!("http://{authority}{}", load.path),
    ]);
    Ok(args)
}

fn millis(d: Duration) -> String {
    format!("{}ms", d.as_millis())
}

/// Reads the summary h2load prints at the end of a run.
fn parse(out: &str, duration: Duration) -> Result<Figures, String> {
    let line = |prefix: &str| {
        out.lines()
            .map(str::trim_start)
            .find(|l| l.starts_with(prefix))
            .ok_or_else(|| format!("h2load printed no {prefix:?} line:\n{out}"))
    };
    // requests: 349703 total, 349703 started, 349703 done, 349703 succeeded, 0 failed, 0 errored, 0 timeout
    let requests = line("requests:")?;
    let count = |what: &str| -> Result<u64, String> {
        requests
            .split(',')
            .map(str::trim)
            .find_map(|part| {
                part.strip_suffix(what)?
                    .trim()
                    .rsplit(' ')
                    .next()?
                    .parse()
                    .ok()
            })
            .ok_or_else(|| format!("h2load's requests line has no {what:?} count: {requests}"))
    };
    // h2load's "succeeded" are 2xx and 3xx answers; its "failed" are every other request,
    // "errored" (reset, refused, cut off) and "timeout" among them. Both count a stream when it
    // closes inside the measured window, while the status codes count it when its headers come:
    // a call whose headers came in the warm-up and whose end came in the window (or the other
    // way round at the window's end) is in one count and not the other, so the calls are read
    // from "succeeded", and the status codes give only the 3xx to take out of them.
    let succeeded = count("succeeded")?;
    let failed = count("failed")?;
    // status codes: 349703 2xx, 0 3xx, 0 4xx, 0 5xx
    let codes = line("status codes:")?;
    let redirected: u64 = codes
        .trim_start_matches("status codes:")
        .split(',')
        .find_map(|part| part.trim().strip_suffix(" 3xx")?.parse().ok())
        .ok_or_else(|| format!("h2load's status line has no 3xx count: {codes}"))?;
    // time for request:      156us      8.71ms       349us       168us    94.33%
    let times = line("time for request:")?;
    let mean = times
        .trim_start_matches("time for request:")
        .split_whitespace()
        .nth(2)
        .and_then(parse_time)
        .ok_or_else(|| format!("h2load's request times have no mean: {times}"))?;
    // A gRPC answer is a 200: a 3xx is an error here.
    let redirected = redirected.min(succeeded);
    let calls = succeeded - redirected;
    Ok(Figures {
        calls,
        errors: failed + redirected,
        calls_per_sec: calls as f64 / duration.as_secs_f64(),
        mean,
        p50: None,
        p99: None,
        cpu: Vec::new(),
    })
}

/// One of h2load's times: `349us`, `8.71ms`, `1.02s`.
fn parse_time(s: &str) -> Option<Duration> {
    let (number, scale) = if let Some(n) = s.strip_suffix("us") {
        (n, 1e-6)
    } else if let Some(n) = s.strip_suffix("ms") {
        (n, 1e-3)
    } else {
        (s.strip_suffix('s')?, 1.0)
    };
    Some(Duration::from_secs_f64(number.parse::<f64>().ok()? * scale))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The summary of a real run (h2load 1.52.0, 64 streams on one connection, through the
    /// gateway to the fixed-reply upstream).
    const RUN: &str = "\
starting benchmark...
spawning thread #0: 1 total client(s). Timing-based test with 1s of warm-up time and 2s of main duration for measurements.
Main benchmark duration is over for thread #0. Stopping all clients.
Stopped all clients for thread #0

finished in 3.00s, 174851.50 req/s, 5.84MB/s
requests: 349703 total, 349703 started, 349703 done, 349703 succeeded, 0 failed, 0 errored, 0 timeout
status codes: 349703 2xx, 0 3xx, 0 4xx, 0 5xx
traffic: 11.67MB (12240645) total, 1007.23KB (1031406) headers (space savings 94.74%), 2.46MB (2578485) data
                     min         max         mean         sd        +/- sd
time for request:      156us      8.71ms       349us       168us    94.33%
time for connect:        0us         0us         0us         0us     0.00%
time to 1st byte:        0us         0us         0us         0us     0.00%
req/s           :  174844.35   174844.35   174844.35        0.00   100.00%
";

    #[test]
    fn a_run_gives_calls_per_second_over_the_measured_time_and_the_mean() {
        let f = parse(RUN, Duration::from_secs(2)).unwrap();
        assert_eq!(f.calls, 349703);
        assert_eq!(f.errors, 0);
        assert_eq!(f.calls_per_sec, 349703.0 / 2.0);
        assert_eq!(f.mean, Duration::from_micros(349));
        assert_eq!((f.p50, f.p99), (None, None));
    }

    #[test]
    fn failures_and_non_2xx_answers_are_errors_each_counted_once() {
        // As h2load counts: 1500 answered 4xx and 200 errored (3 of them timed out) make the
        // 1700 failed; 1000 of the succeeded answered 3xx.
        let run = RUN
            .replace(
                "349703 done, 349703 succeeded, 0 failed, 0 errored, 0 timeout",
                "349700 done, 348000 succeeded, 1700 failed, 200 errored, 3 timeout",
            )
            .replace("349703 2xx, 0 3xx, 0 4xx", "347000 2xx, 1000 3xx, 1500 4xx");
        let f = parse(&run, Duration::from_secs(1)).unwrap();
        assert_eq!(f.calls, 347000);
        assert_eq!(f.errors, 1700 + 1000);
        assert_eq!(f.calls + f.errors, 349700, "every request done, once");
    }

    #[test]
    fn a_call_astride_an_edge_of_the_measured_window_is_a_call_not_an_error() {
        // Through a proxy that sends a reply's headers and its end in separate writes: a call
        // whose headers came in the warm-up and its end in the window leaves one 2xx fewer than
        // succeeded (as CI saw); one whose headers came in the window and its end after it,
        // one more (816 / 817 here).
        for (succeeded, ok_2xx) in [(572, 571), (816, 817)] {
            let run = RUN
                .replace(
                    "349703 done, 349703 succeeded",
                    &format!("{succeeded} done, {succeeded} succeeded"),
                )
                .replace("349703 2xx", &format!("{ok_2xx} 2xx"));
            let f = parse(&run, Duration::from_secs(1)).unwrap();
            assert_eq!((f.calls, f.errors), (succeeded, 0), "{ok_2xx} 2xx");
        }
    }

    #[test]
    fn output_without_a_summary_is_an_error_that_shows_it() {
        let e = parse(
            "connect: No such file or directory\n",
            Duration::from_secs(1),
        )
        .unwrap_err();
        assert!(e.contains("requests:") && e.contains("No such file"), "{e}");
    }

    #[test]
    fn times_in_each_unit() {
        assert_eq!(parse_time("156us"), Some(Duration::from_micros(156)));
        assert_eq!(parse_time("8.71ms"), Some(Duration::from_micros(8710)));
        assert_eq!(parse_time("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_time("fast"), None);
    }

    #[test]
    fn streams_are_shared_evenly_among_connections() {
        let load = |concurrency, connections| Load {
            target: Endpoint::Unix("/run/gw.sock".into()),
            path: "/csi.v1.Identity/Probe".into(),
            request: Vec::new(),
            concurrency,
            connections,
            warmup: Duration::ZERO,
            duration: Duration::from_secs(3),
            cpu: Vec::new(),
        };
        let args = arguments(&load(64, 4), Path::new("/tmp/r"), 2).unwrap();
        let joined = args.join(" ");
        assert!(
            joined.starts_with("-B unix:/run/gw.sock -c 4 -t 2 -m 16 -D 3000ms --warm-up-time=1ms"),
            "{joined}"
        );
        let one = arguments(&load(16, 1), Path::new("/tmp/r"), 1)
            .unwrap()
            .join(" ");
        assert!(one.contains("-c 1 -t 1 -m 16 "), "{one}");
        assert_eq!(
            args.last().unwrap(),
            "http://localhost/csi.v1.Identity/Probe"
        );
        let e = arguments(&load(6, 4), Path::new("/tmp/r"), 2).unwrap_err();
        assert!(
            e.contains("6 in flight") && e.contains("4 connections"),
            "{e}"
        );
    }
}
