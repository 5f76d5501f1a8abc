//! `csi-gateway-load`: a minimal fixed-reply upstream, and a closed-loop load generator that
//! measures several targets in the same run and prints each one's ratio to the first.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use csi_gateway::endpoint::Endpoint;
use csi_gateway::upstream::Connection;
use csi_gateway_load::{self as load, Load};

#[derive(Parser)]
#[command(about = "Load tool for csi-gateway: fixed-reply upstream and load generator")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve a minimal upstream that answers every unary call with an empty OK reply.
    FixedUpstream {
        #[arg(long)]
        listen: PathBuf,
    },
    /// Relay --listen to --upstream through a plain tonic pass-through proxy (HTTP/2 server,
    /// tonic `Channel`): the reference point the gateway's performance target names.
    TonicProxy {
        #[arg(long)]
        listen: PathBuf,
        #[arg(long)]
        upstream: PathBuf,
    },
    /// Measure each target (the first is the baseline) at each concurrency, interleaved.
    Run {
        /// name=endpoint, e.g. direct=unix:///tmp/up.sock (repeat; the first is the baseline).
        #[arg(long = "target", required = true)]
        targets: Vec<String>,
        #[arg(long, default_value = "/csi.v1.Identity/Probe")]
        path: String,
        /// NAME=PATH — call target NAME on this gRPC path instead of --path, e.g. a v0.3
        /// client's path through a translating gateway beside a v1 client's (repeat per target).
        #[arg(long = "path-for")]
        path_for: Vec<String>,
        /// Comma-separated calls in flight.
        #[arg(long, default_value = "1,16,64", value_delimiter = ',')]
        concurrency: Vec<usize>,
        #[arg(long, default_value = "1")]
        connections: usize,
        #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
        warmup: Duration,
        #[arg(long, default_value = "3s", value_parser = humantime::parse_duration)]
        duration: Duration,
        /// Rounds per (target, concurrency); the median round is reported.
        #[arg(long, default_value = "3")]
        rounds: usize,
        /// Who makes the calls: this crate's HTTP/2 client, or h2load (nghttp2), which
        /// shares no code with the gateway and reports a mean latency instead of percentiles.
        #[arg(long, value_enum, default_value = "builtin")]
        generator: Generator,
        /// NAME=label:pid,label:pid — report the CPU time these processes (each with its
        /// descendants) spend per call while target NAME is measured, read from
        /// /proc/PID/stat before and after each measured window (repeat per target).
        #[arg(long = "cpu")]
        cpu: Vec<String>,
        /// A=B — after each concurrency, the median over rounds of A's calls/s over B's in the
        /// same round, and of the CPU per call of the processes watched for each (repeat).
        #[arg(long = "compare")]
        compare: Vec<String>,
        /// A file holding the request message (protobuf bytes, without the gRPC prefix) every
        /// call sends; without it, calls send the empty message.
        #[arg(long = "request-file")]
        request_file: Option<PathBuf>,
        /// NAME=PATH — target NAME's calls send this file's message instead, e.g. a v0.3
        /// client's request where the revisions number its fields differently (repeat per
        /// target).
        #[arg(long = "request-file-for")]
        request_file_for: Vec<String>,
    },
    /// SIGKILL the gateway at random moments while concurrent clients run volume lifecycles
    /// through it (a draft plugin's handles, and staging emulation), then check that no volume,
    /// staging or store entry was lost or left behind. Exits 1 on any violation.
    Crashloop {
        /// Kills.
        #[arg(long, default_value = "300")]
        iterations: usize,
        /// Concurrent clients per gateway.
        #[arg(long, default_value = "4")]
        clients: usize,
        #[arg(long, value_enum, default_value = "embedded")]
        store: Store,
        /// The gateway and plugin binaries; default: beside this tool.
        #[arg(long)]
        gateway: Option<PathBuf>,
        #[arg(long)]
        backend: Option<PathBuf>,
        /// etcd for `--store etcd` (Debian's etcd-server).
        #[arg(long, default_value = "/usr/bin/etcd")]
        etcd: PathBuf,
        #[arg(long, default_value = "1")]
        seed: u64,
        /// Longest random pause between two kills.
        #[arg(long, default_value = "250ms", value_parser = humantime::parse_duration)]
        max_pause: Duration,
        /// A step still failing after this long is a violation.
        #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
        step_timeout: Duration,
    },
    /// Run volume lifecycles through a controller gateway and node gateways that share one
    /// etcd, until --stop-file exists; then check that nothing answered OK was lost and print
    /// the figures of each phase --phases marks. Exits 1 on any violation.
    Lifecycles {
        /// The controller gateway's socket.
        #[arg(long)]
        controller: PathBuf,
        /// NAME=SOCKET of a node gateway (repeat).
        #[arg(long = "node", required = true)]
        nodes: Vec<String>,
        #[arg(long, default_value = "4")]
        clients: usize,
        /// Volumes created first and kept through every phase, checked at the end.
        #[arg(long, default_value = "4")]
        standing: usize,
        /// Where the plugin makes publish targets (a directory in the plugin's file system).
        #[arg(long, default_value = "/tmp")]
        target_dir: String,
        #[arg(long)]
        stop_file: PathBuf,
        /// Phase marks, `UNIX_SECONDS NAME` per line, written by whoever injects the faults.
        #[arg(long)]
        phases: PathBuf,
        /// Every call, one TSV line each.
        #[arg(long)]
        journal: Option<PathBuf>,
        #[arg(long, default_value = "90s", value_parser = humantime::parse_duration)]
        step_timeout: Duration,
    },
    /// Check one gateway cut off from its store: Probe and GetPluginInfo answer OK, and a call
    /// that needs the store answers UNAVAILABLE naming etcd within --bound. Exits 1 otherwise.
    StoreProbe {
        #[arg(long)]
        socket: PathBuf,
        /// The target path of the NodePublishVolume that needs the store.
        #[arg(long)]
        target: String,
        #[arg(long, value_parser = humantime::parse_duration)]
        bound: Duration,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Store {
    Embedded,
    Etcd,
}

#[derive(Clone, Copy, ValueEnum)]
enum Generator {
    Builtin,
    H2load,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        // Servers use every core, as a plugin would.
        Command::FixedUpstream { listen } => {
            tokio::runtime::Runtime::new()?.block_on(load::fixed::serve(&listen))?
        }
        Command::TonicProxy { listen, upstream } => tokio::runtime::Runtime::new()?
            .block_on(load::tonic_proxy::serve(&listen, &upstream))
            .map_err(anyhow::Error::msg)?,
        Command::Run {
            targets,
            path,
            path_for,
            concurrency,
            connections,
            warmup,
            duration,
            rounds,
            generator,
            cpu,
            compare,
            request_file,
            request_file_for,
        } => {
            let read = |f: &std::path::Path| {
                std::fs::read(f).map_err(|e| anyhow::anyhow!("--request-file {}: {e}", f.display()))
            };
            let request = match &request_file {
                Some(f) => read(f)?,
                None => Vec::new(),
            };
            let mut requests = std::collections::HashMap::new();
            for r in &request_file_for {
                let (name, file) = r.split_once('=').ok_or_else(|| {
                    anyhow::anyhow!("--request-file-for wants NAME=PATH, got {r:?}")
                })?;
                requests.insert(name.to_string(), read(std::path::Path::new(file))?);
            }
            let mut watched = std::collections::HashMap::new();
            for c in &cpu {
                let (name, list) = c
                    .split_once('=')
                    .ok_or_else(|| anyhow::anyhow!("--cpu wants NAME=label:pid,..., got {c:?}"))?;
                watched.insert(
                    name.to_string(),
                    load::cpu::parse_list(list).map_err(anyhow::Error::msg)?,
                );
            }
            let mut paths = std::collections::HashMap::new();
            for p in &path_for {
                let (name, path) = p
                    .split_once('=')
                    .ok_or_else(|| anyhow::anyhow!("--path-for wants NAME=PATH, got {p:?}"))?;
                paths.insert(name.to_string(), path.to_string());
            }
            let targets = targets
                .iter()
                .map(|t| {
                    let (name, ep) = t.split_once('=').ok_or_else(|| {
                        anyhow::anyhow!("--target wants name=endpoint, got {t:?}")
                    })?;
                    Ok(Target {
                        name: name.to_string(),
                        endpoint: ep.parse::<Endpoint>()?,
                        path: paths.remove(name).unwrap_or_else(|| path.clone()),
                        request: requests.remove(name).unwrap_or_else(|| request.clone()),
                        cpu: watched.remove(name).unwrap_or_default(),
                    })
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            if let Some(name) = watched.keys().next() {
                anyhow::bail!("--cpu names {name:?}, which is no --target");
            }
            if let Some(name) = paths.keys().next() {
                anyhow::bail!("--path-for names {name:?}, which is no --target");
            }
            if let Some(name) = requests.keys().next() {
                anyhow::bail!("--request-file-for names {name:?}, which is no --target");
            }
            let index = |name: &str| {
                targets.iter().position(|t| t.name == name).ok_or_else(|| {
                    anyhow::anyhow!("--compare names {name:?}, which is no --target")
                })
            };
            let compare = compare
                .iter()
                .map(|c| {
                    let (a, b) = c
                        .split_once('=')
                        .ok_or_else(|| anyhow::anyhow!("--compare wants A=B, got {c:?}"))?;
                    Ok((index(a)?, index(b)?))
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            let plan = Plan {
                connections,
                warmup,
                duration,
                rounds,
                generator,
                compare,
            };
            generator_runtime(connections)?.block_on(run(targets, concurrency, plan))?;
        }
        Command::Crashloop {
            iterations,
            clients,
            store,
            gateway,
            backend,
            etcd,
            seed,
            max_pause,
            step_timeout,
        } => {
            let beside = |name: &str| -> anyhow::Result<PathBuf> {
                Ok(std::env::current_exe()?.with_file_name(name))
            };
            let settings = load::crashloop::Settings {
                gateway: gateway.map_or_else(|| beside("csi-gateway"), Ok)?,
                backend: backend.map_or_else(|| beside("csi-reference-backend"), Ok)?,
                etcd: matches!(store, Store::Etcd).then_some(etcd),
                iterations,
                clients,
                seed,
                step_timeout,
                max_pause,
            };
            let store = match store {
                Store::Embedded => "embedded",
                Store::Etcd => "etcd",
            };
            println!(
                "crash loop: {iterations} SIGKILLs, {clients} clients per gateway, {store} store, seed {seed}"
            );
            let report = tokio::runtime::Runtime::new()?
                .block_on(load::crashloop::run(&settings))
                .map_err(anyhow::Error::msg)?;
            finish(&report, report.violations.is_empty());
        }
        Command::Lifecycles {
            controller,
            nodes,
            clients,
            standing,
            target_dir,
            stop_file,
            phases,
            journal,
            step_timeout,
        } => {
            let settings = load::cluster::Settings {
                controller,
                nodes: load::cluster::named_paths(&nodes).map_err(anyhow::Error::msg)?,
                clients,
                standing,
                target_dir,
                stop_file,
                phases,
                journal,
                step_timeout,
            };
            let report = tokio::runtime::Runtime::new()?
                .block_on(load::cluster::run(&settings))
                .map_err(anyhow::Error::msg)?;
            finish(&report, report.violations.is_empty());
        }
        Command::StoreProbe {
            socket,
            target,
            bound,
        } => {
            let out = tokio::runtime::Runtime::new()?
                .block_on(load::cluster::probe(&socket, &target, bound))
                .map_err(anyhow::Error::msg)?;
            print!("{out}");
        }
    }
    Ok(())
}

/// The generator's runtime: a thread per connection, up to the CPUs (see
/// `load::generator_threads`).
fn generator_runtime(connections: usize) -> std::io::Result<tokio::runtime::Runtime> {
    match load::generator_threads(connections) {
        1 => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        n => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(n)
            .enable_all()
            .build(),
    }
}

/// One measured target: its endpoint, the gRPC path it is called on, the processes whose CPU
/// time is reported for it.
struct Target {
    name: String,
    endpoint: Endpoint,
    path: String,
    /// The request message its calls send.
    request: Vec<u8>,
    cpu: Vec<load::cpu::Process>,
}

/// How every target is measured.
struct Plan {
    connections: usize,
    warmup: Duration,
    duration: Duration,
    rounds: usize,
    generator: Generator,
    /// Pairs of targets (by index) whose round-by-round ratios are reported.
    compare: Vec<(usize, usize)>,
}

async fn run(targets: Vec<Target>, concurrency: Vec<usize>, plan: Plan) -> anyhow::Result<()> {
    if let Generator::H2load = plan.generator {
        // h2load sees HTTP/2 statuses only: each target must first answer a call with OK.
        for t in &targets {
            answers_ok(&t.endpoint, &t.path, &t.request)
                .await
                .map_err(|e| anyhow::anyhow!("target {}: {e}", t.name))?;
        }
    }
    // The CPU column only when some target's processes are watched (`--cpu`).
    let with_cpu = targets.iter().any(|t| !t.cpu.is_empty());
    println!(
        "{:<12} {:>8} {:>12} {:>10} {:>10} {:>10} {:>8} {:>7}{}",
        "target",
        "inflight",
        "calls/s",
        "mean",
        "p50",
        "p99",
        "errors",
        "ratio",
        if with_cpu { "  cpu µs/call" } else { "" }
    );
    for &c in &concurrency {
        // Rounds interleave the targets so drift on the machine hits them alike, and each
        // round starts one target later so none always runs right after the same one.
        let mut results: Vec<Vec<load::Figures>> = vec![Vec::new(); targets.len()];
        for round in 0..plan.rounds.max(1) {
            for i in (0..targets.len()).map(|k| (k + round) % targets.len()) {
                let l = Load {
                    target: targets[i].endpoint.clone(),
                    path: targets[i].path.clone(),
                    request: targets[i].request.clone(),
                    concurrency: c,
                    connections: plan.connections,
                    warmup: plan.warmup,
                    duration: plan.duration,
                    cpu: targets[i].cpu.clone(),
                };
                let figures = match plan.generator {
                    Generator::Builtin => load::measure(&l).await,
                    Generator::H2load => load::h2load::measure(&l).await,
                };
                results[i].push(figures.map_err(anyhow::Error::msg)?);
            }
        }
        let compared: Vec<String> = plan
            .compare
            .iter()
            .map(|&(a, b)| compared(&targets, &results, a, b))
            .collect();
        let medians: Vec<load::Figures> = results
            .into_iter()
            .map(|mut r| {
                r.sort_by(|a, b| a.calls_per_sec.total_cmp(&b.calls_per_sec));
                r[r.len() / 2].clone()
            })
            .collect();
        let base = medians[0].calls_per_sec;
        for (t, f) in targets.iter().zip(&medians) {
            println!(
                "{:<12} {:>8} {:>12.0} {:>10} {:>10} {:>10} {:>8} {:>7.2}{}",
                t.name,
                c,
                f.calls_per_sec,
                format!("{:?}", f.mean),
                shown(f.p50),
                shown(f.p99),
                f.errors,
                f.calls_per_sec / base,
                match with_cpu {
                    true => format!("  {}", load::cpu::per_call(&t.cpu, &f.cpu, f.calls)),
                    false => String::new(),
                }
            );
        }
        for line in compared {
            println!("{line}");
        }
    }
    Ok(())
}

/// `a` against `b`, round by round: calls/s, and the CPU per call of all the processes
/// watched for each (relays or gateways and the plugin); each the median over rounds with its
/// quartiles in brackets.
fn compared(targets: &[Target], results: &[Vec<load::Figures>], a: usize, b: usize) -> String {
    let calls = |i: usize| -> Vec<f64> { results[i].iter().map(|f| f.calls_per_sec).collect() };
    let cpu = |i: usize| -> Vec<f64> {
        results[i]
            .iter()
            .map(|f| match f.calls {
                0 => 0.0,
                n => f.cpu.iter().map(Duration::as_secs_f64).sum::<f64>() / n as f64,
            })
            .collect()
    };
    // The median, then the middle half of the rounds.
    let shown = |r: Option<load::Spread>| {
        r.map_or_else(
            || "-".to_string(),
            |r| format!("{:.2} [{:.2}–{:.2}]", r.median, r.low, r.high),
        )
    };
    format!(
        "  {} / {}, median of {} paired rounds: calls/s {}, CPU per call (watched processes) {}",
        targets[a].name,
        targets[b].name,
        results[a].len(),
        shown(load::paired_ratio(&calls(a), &calls(b))),
        shown(load::paired_ratio(&cpu(a), &cpu(b))),
    )
}

fn shown(d: Option<Duration>) -> String {
    d.map_or_else(|| "-".to_string(), |d| format!("{d:?}"))
}

/// One call through this crate's client, which reads the gRPC status h2load does not.
async fn answers_ok(target: &Endpoint, path: &str, request: &[u8]) -> anyhow::Result<()> {
    let conn = Connection::connect(target, Duration::from_secs(5)).await?;
    conn.unary(path, request)
        .await
        .map_err(|s| anyhow::anyhow!("{path} answered {:?}: {}", s.code(), s.message()))?;
    Ok(())
}

/// Prints a run's report; exit code 1 unless it found nothing wrong.
fn finish(report: &impl std::fmt::Display, clean: bool) {
    println!("{report}");
    if !clean {
        std::process::exit(1);
    }
}
