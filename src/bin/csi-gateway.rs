//! The `csi-gateway` command: `run` (the default) serves every CSI dialect on one socket;
//! `check` identifies any CSI endpoint; `health` is the container health check; `dialects` lists
//! what this build knows.
//!
//! `run` also takes the Kubernetes CSI sidecars' flags (`--csi-address`, `--v`,
//! `--http-endpoint`, `--metrics-path`, `--logging-format`) with their meaning, so a manifest
//! written for a sidecar starts the gateway unchanged; `--help` lists them under a heading of
//! their own.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
use csi_gateway::config::{self, Overrides, StateOverrides};
use csi_gateway::dialect::Dialect;
use csi_gateway::endpoint::Endpoint;

/// jemalloc, as linkerd2-proxy: with many calls in flight glibc's per-thread caches overflow and
/// its slow paths cost more than a translated call's own work (callgrind, issue 18's note).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read before `main` (its `malloc_conf`; the symbol is prefixed, as
/// tikv-jemalloc-sys builds it on Linux): pages freed go back to the kernel within about a
/// second, from a background thread, instead of staying resident until the process next
/// allocates enough to purge them (MADV_FREE'd pages count as resident too, so muzzy pages are
/// not kept). What clients' unfinished requests held (`max_buffered_bytes`) is given back once
/// they close: 100 connections left 198 MiB resident behind without it (tests/h2_limits.rs).
#[allow(non_upper_case_globals)]
#[export_name = "_rjem_malloc_conf"]
pub static malloc_conf: Option<&'static std::ffi::c_char> =
    // SAFETY: a C string literal lives for the whole program; its first byte is what jemalloc
    // reads, up to the literal's terminating NUL.
    Some(unsafe { &*c"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0".as_ptr() });

/// Exit code for a configuration the gateway refuses (sysexits EX_USAGE).
const EXIT_CONFIG: u8 = 64;

#[derive(Parser)]
#[command(
    version,
    about = "Serves every CSI dialect on one socket, translated to a plugin of any dialect"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Serve (the default): listen on the front socket and translate to the upstream plugin.
    // Boxed: the flags outweigh the other subcommands many times over.
    Run(Box<RunArgs>),
    /// Detect the dialect of a CSI endpoint and print its identity and capabilities.
    Check {
        /// The endpoint, e.g. unix:///var/lib/kubelet/plugins/driver/csi.sock.
        #[arg(long)]
        endpoint: String,
        /// Skip detection and assume this dialect.
        #[arg(long)]
        dialect: Option<String>,
        /// Timeout of each call.
        #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
        timeout: Duration,
        /// Run a lifecycle scenario (create, publish, stage where advertised, unpublish,
        /// delete, idempotency and error rows) in the endpoint's dialect and print what passed
        /// and failed; exit code 1 on any failure. Creates and deletes one volume.
        #[arg(long)]
        conformance: bool,
        #[command(flatten)]
        scenario: ScenarioArgs,
    },
    /// Ask a gateway's /healthz (exit 0 when healthy, 1 otherwise): the image's HEALTHCHECK,
    /// which needs no shell or curl.
    Health {
        #[arg(long, default_value = "http://127.0.0.1:9808/healthz")]
        url: String,
        #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
        timeout: Duration,
    },
    /// Print the CSI dialects this build knows, from its compiled descriptors.
    Dialects,
    /// Write a development CA, server and client certificates for the mTLS bridge into DIR.
    GenCerts {
        dir: PathBuf,
        /// DNS names or IP addresses of the appliance listener (repeat).
        #[arg(long = "server-name", default_values = ["localhost", "127.0.0.1"])]
        server_names: Vec<String>,
        /// DNS name in the client certificate (repeat).
        #[arg(long = "client-name", default_values = ["client.csi-gateway.local"])]
        client_names: Vec<String>,
        /// URI (e.g. a SPIFFE ID) in the client certificate (repeat).
        #[arg(long = "client-uri")]
        client_uris: Vec<String>,
    },
}

/// How `check --conformance` runs its scenario.
#[derive(Args)]
struct ScenarioArgs {
    /// Send controller calls to this endpoint (a controller plugin or gateway) and identity
    /// and node calls to --endpoint, as a CO does.
    #[arg(long, requires = "conformance")]
    controller_endpoint: Option<String>,
    /// Make the staging and target paths in a fresh directory inside DIR (created if
    /// missing; default: TMPDIR), e.g. under kubelet's directory, where a node plugin's
    /// mounts show.
    #[arg(long, value_name = "DIR", requires = "conformance")]
    work_dir: Option<PathBuf>,
    /// Also check, from this process's mount namespace, that a published target is a mount,
    /// that a file written through it is in the volume, and that unpublishing leaves no
    /// mount (nor, for a v1 endpoint, the target).
    #[arg(long, requires = "conformance")]
    check_mounts: bool,
}

#[derive(Args, Clone, Default)]
struct RunArgs {
    /// TOML configuration; without it the built-in default (config/gateway.toml) is used.
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// Front socket (overrides the file and CSI_ENDPOINT).
    #[arg(long)]
    listen: Option<String>,
    /// Upstream plugin endpoint, or "embedded".
    #[arg(long)]
    upstream: Option<String>,
    /// Upstream dialect: auto, v1, v0.3, v0.2, v0.1, v0.1-oneof.
    #[arg(long)]
    upstream_dialect: Option<String>,
    /// Which of v0.1 and v0.1-oneof the front serves under the package `csi`.
    #[arg(long)]
    legacy_dialect: Option<String>,
    /// Which revision the front serves under the package `csi.v0`: v0.3 or v0.2.
    #[arg(long)]
    v0_dialect: Option<String>,
    /// Log format: text or json.
    #[arg(long)]
    log_format: Option<String>,
    /// Log level filter, e.g. info or csi_gateway=debug.
    #[arg(long)]
    log_level: Option<String>,
    /// Metrics and health endpoint, host:port ("" for none).
    #[arg(long)]
    metrics_listen: Option<String>,
    /// Directory of the durable state database.
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// Durable state backend: embedded or etcd.
    #[arg(long)]
    state_backend: Option<String>,
    /// etcd endpoints, comma-separated http(s)://host:port.
    #[arg(long)]
    etcd_endpoints: Option<String>,
    /// Prefix of every key the gateway writes to etcd.
    #[arg(long)]
    etcd_prefix: Option<String>,
    /// Directory of the gateway-owned staging paths (staging emulation).
    #[arg(long)]
    staging_dir: Option<PathBuf>,
    /// Where a draft plugin's VolumeHandle metadata lives: store (default) or inline (in the id).
    #[arg(long)]
    handle_encoding: Option<String>,
    /// This node's name, keying its staging records (default: the host name).
    #[arg(long)]
    node_id: Option<String>,
    /// Bound of every durable state operation, e.g. 5s.
    #[arg(long, value_parser = humantime::parse_duration)]
    state_timeout: Option<std::time::Duration>,
    /// Check the configuration (file, flags and CSI_ENDPOINT, as `run` reads them) and exit:
    /// 0 when the gateway would start with it, 64 when not. Binds and opens nothing: the
    /// files it names are read only at start.
    #[arg(long)]
    check_config: bool,
    #[command(flatten)]
    sidecar: SidecarArgs,
    /// TEST HOOK, hidden: SIGKILL the gateway at this named staging-emulation step. Accepted
    /// only by a build with the `test-hooks` cargo feature (the test suite's); any other build
    /// refuses it as a configuration error, so a production gateway cannot be made to crash.
    #[arg(long, hide = true)]
    test_crash_at: Option<String>,
}

/// The Kubernetes CSI sidecars' names for settings the gateway has names of its own for, with
/// the sidecars' meaning. Each conflicts with the gateway's name for the same setting, so
/// nothing is set twice.
#[derive(Args, Clone, Default)]
#[command(next_help_heading = "Kubernetes CSI sidecar compatibility")]
struct SidecarArgs {
    /// The front socket, a path or unix:// URL (= --listen).
    #[arg(long, value_name = "PATH", conflicts_with = "listen")]
    csi_address: Option<String>,
    /// klog verbosity (= --log-level): 0-3 info, 4 debug (Probe calls, bodies with secrets
    /// stripped), 5 trace of the gateway's own logs, 6 and above trace of everything.
    #[arg(
        short = 'v',
        long = "v",
        value_name = "N",
        conflicts_with = "log_level"
    )]
    verbosity: Option<u8>,
    /// Metrics and health endpoint, host:port or :port for every interface
    /// (= --metrics-listen).
    #[arg(long, value_name = "ADDR", conflicts_with = "metrics_listen")]
    http_endpoint: Option<String>,
    /// Path of the Prometheus metrics on that endpoint (default /metrics; metrics.path).
    #[arg(long, value_name = "PATH")]
    metrics_path: Option<String>,
    /// text or json; json is Kubernetes' structured shape: {"ts","caller","msg","v",...}
    /// (= --log-format).
    #[arg(long, value_name = "FORMAT", conflicts_with = "log_format")]
    logging_format: Option<String>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Run(args)) => run(*args),
        None => run(cli.run),
        Some(Command::Check {
            endpoint,
            dialect,
            timeout,
            conformance: false,
            ..
        }) => check(&endpoint, dialect.as_deref(), timeout),
        Some(Command::Check {
            endpoint,
            dialect,
            timeout,
            conformance: true,
            scenario,
        }) => conformance(&endpoint, dialect.as_deref(), timeout, &scenario),
        Some(Command::GenCerts {
            dir,
            server_names,
            client_names,
            client_uris,
        }) => gen_certs(&dir, &server_names, &client_names, &client_uris),
        Some(Command::Health { url, timeout }) => health(&url, timeout),
        Some(Command::Dialects) => {
            print_dialects();
            Ok(ExitCode::SUCCESS)
        }
    };
    result.unwrap_or_else(|e| {
        eprintln!("csi-gateway: {e:#}");
        ExitCode::FAILURE
    })
}

fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let sidecar = args.sidecar;
    let overrides = Overrides {
        listen: args.listen.or(sidecar.csi_address),
        upstream: args.upstream,
        upstream_dialect: args.upstream_dialect,
        legacy_dialect: args.legacy_dialect,
        v0_dialect: args.v0_dialect,
        log_format: args.log_format.or(sidecar.logging_format),
        log_level: args.log_level.or_else(|| {
            sidecar
                .verbosity
                .map(|v| config::klog_filter(v).to_string())
        }),
        metrics_listen: args.metrics_listen.or(sidecar.http_endpoint),
        metrics_path: sidecar.metrics_path,
        state_dir: args.state_dir,
        state: StateOverrides {
            backend: args.state_backend,
            etcd_endpoints: args.etcd_endpoints,
            etcd_prefix: args.etcd_prefix,
            staging_dir: args.staging_dir,
            handle_encoding: args.handle_encoding,
            node_id: args.node_id,
            timeout: args.state_timeout,
        },
        test_crash_at: args.test_crash_at,
    };
    let config = match config::File::load(args.config.as_deref())
        .and_then(|f| f.resolve(std::env::var("CSI_ENDPOINT").ok(), overrides))
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("csi-gateway: configuration error: {e}");
            return Ok(ExitCode::from(EXIT_CONFIG));
        }
    };
    if args.check_config {
        println!("csi-gateway: configuration ok");
        return Ok(ExitCode::SUCCESS);
    }
    init_logging(
        config.log.format == config::LogFormat::Json,
        &config.log.level,
    )?;
    // Before the runtime starts its threads, which inherit the policy.
    set_scheduling(config.runtime.scheduling);
    let runtime = match config.runtime.worker_threads {
        1 => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        0 => tokio::runtime::Runtime::new(),
        n => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(n)
            .enable_all()
            .build(),
    }
    .context("starting the runtime")?;
    runtime.block_on(async {
        let running = match csi_gateway::gateway::start(&config).await {
            Ok(running) => running,
            // Certificate files the configuration names but that cannot be used are a
            // configuration error too: the same exit code as any other bad setting.
            Err(e @ csi_gateway::gateway::StartError::Tls(_)) => {
                eprintln!("csi-gateway: configuration error: {e}");
                return Ok(ExitCode::from(EXIT_CONFIG));
            }
            Err(e) => return Err(e.into()),
        };
        wait_for_signal().await?;
        tracing::info!(grace = ?config.listen.grace_period, "shutting down");
        running.shutdown().await;
        Ok(ExitCode::SUCCESS)
    })
}

/// Applies `[runtime] scheduling` to this thread. A refusal (a seccomp profile, say) is
/// logged and the gateway runs on as it was started.
fn set_scheduling(scheduling: config::Scheduling) {
    let policy = match scheduling {
        config::Scheduling::Batch => libc::SCHED_BATCH,
        config::Scheduling::Normal => return,
    };
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid `sched_param` that outlives the call; pid 0 is this thread.
    if unsafe { libc::sched_setscheduler(0, policy, &param) } != 0 {
        let e = std::io::Error::last_os_error();
        tracing::warn!(error = %e, ?scheduling, "cannot set the scheduling policy");
    } else {
        tracing::debug!(?scheduling, "scheduling policy set");
    }
}

fn check(endpoint: &str, dialect: Option<&str>, timeout: Duration) -> anyhow::Result<ExitCode> {
    let endpoint: Endpoint = endpoint.parse()?;
    let dialect = dialect.map(str::parse::<Dialect>).transpose()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let report = runtime.block_on(csi_gateway::check::check(&endpoint, dialect, timeout));
    match report {
        Ok(text) => {
            print!("{text}");
            Ok(ExitCode::SUCCESS)
        }
        Err(s) => anyhow::bail!("{endpoint}: {:?}: {}", s.code(), s.message()),
    }
}

fn health(url: &str, timeout: Duration) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let body = runtime.block_on(csi_gateway::ops::health_check::check(url, timeout))?;
    println!("{body}");
    Ok(ExitCode::SUCCESS)
}

fn conformance(
    endpoint: &str,
    dialect: Option<&str>,
    timeout: Duration,
    args: &ScenarioArgs,
) -> anyhow::Result<ExitCode> {
    let endpoint: Endpoint = endpoint.parse()?;
    let controller: Option<Endpoint> = args
        .controller_endpoint
        .as_deref()
        .map(str::parse)
        .transpose()?;
    let dialect = dialect.map(str::parse::<Dialect>).transpose()?;
    let work = work_dir(args.work_dir.as_deref())?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let outcome = runtime.block_on(csi_gateway::conformance::run(
        &csi_gateway::conformance::Options {
            endpoint: &endpoint,
            controller: controller.as_ref(),
            dialect,
            timeout,
            work: work.path(),
            check_mounts: args.check_mounts,
        },
    ));
    remove_work_dir(work);
    match outcome {
        Ok(outcome) => {
            print!("{}", outcome.render(&endpoint));
            Ok(if outcome.failed() == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Err(s) => anyhow::bail!("{endpoint}: {:?}: {}", s.code(), s.message()),
    }
}

/// A fresh directory for the scenario's staging and target paths, inside `parent` or TMPDIR.
fn work_dir(parent: Option<&std::path::Path>) -> anyhow::Result<tempfile::TempDir> {
    let mut builder = tempfile::Builder::new();
    builder.prefix("csi-gateway-conformance-");
    match parent {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("creating the work directory {}", dir.display()))?;
            builder.tempdir_in(dir)
        }
        None => builder.tempdir(),
    }
    .context("creating the scenario's work directory")
}

/// Removes the work directory, unless a mount is left in it: removing that recursively would
/// delete the volume's data through the mount.
fn remove_work_dir(work: tempfile::TempDir) {
    use csi_gateway_mountinfo::mounts_under;
    match mounts_under(work.path()) {
        Ok(left) if left.is_empty() => drop(work),
        Ok(left) => {
            let kept = work.keep();
            eprintln!(
                "csi-gateway: {} left in place: still mounted there: {left:?}",
                kept.display()
            );
        }
        Err(e) => {
            let kept = work.keep();
            eprintln!(
                "csi-gateway: {} left in place: cannot read its mounts: {e}",
                kept.display()
            );
        }
    }
}

fn gen_certs(
    dir: &std::path::Path,
    server: &[String],
    client: &[String],
    uris: &[String],
) -> anyhow::Result<ExitCode> {
    use csi_gateway::tls::gencerts::{write_dev_pki, Leaf};
    fn strs(v: &[String]) -> Vec<&str> {
        v.iter().map(String::as_str).collect()
    }
    write_dev_pki(
        dir,
        &Leaf::server(&strs(server)),
        &Leaf::client(&strs(client), &strs(uris)),
    )
    .with_context(|| format!("writing certificates into {}", dir.display()))?;
    println!(
        "wrote ca.pem, ca.key, server.pem, server.key, client.pem, client.key into {}",
        dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn init_logging(json: bool, level: &str) -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(level))
        .with_context(|| format!("log level {level:?}"))?;
    use std::io::IsTerminal as _;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    if json {
        builder
            .event_format(csi_gateway::observe::klog_json::KlogJson)
            .init();
    } else {
        builder.init();
    }
    Ok(())
}

async fn wait_for_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    Ok(())
}

fn print_dialects() {
    println!(
        "{:<12} {:<8} {:<90} {:>4}",
        "DIALECT", "PACKAGE", "SERVICES (RPCs)", "RPCS"
    );
    for d in Dialect::ALL {
        let mut services: Vec<(&str, usize)> = Vec::new();
        for m in d.methods() {
            match services.iter_mut().find(|(s, _)| *s == m.service) {
                Some((_, n)) => *n += 1,
                None => services.push((m.service, 1)),
            }
        }
        let list: Vec<String> = services.iter().map(|(s, n)| format!("{s} ({n})")).collect();
        println!(
            "{:<12} {:<8} {:<90} {:>4}",
            d.name(),
            d.package(),
            list.join(", "),
            d.methods().len()
        );
    }
}
