//! `csi-reference-backend`: the project's reference CSI plugin, served in one CSI dialect on
//! a UNIX socket. Thin: parse flags, validate, hand over to `csi_gateway_backend::serve`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use csi_gateway_backend::engine::{self, size::parse_size, PublishMode, Segment};
use csi_gateway_backend::serve::{self, Options};
use csi_gateway_proto::dialect::Dialect;

/// Exit status for configuration errors (sysexits EX_USAGE).
const EX_USAGE: u8 = 64;

#[derive(Parser, Debug)]
#[command(
    // The binary's name (clap would take the package's, `csi-gateway-backend`).
    name = "csi-reference-backend",
    version,
    about = "A real CSI plugin (directories and sparse files under --data-dir), served in any CSI dialect",
    long_about = "A real CSI plugin: volumes are directories (mount access) or sparse files (block \
access) under --data-dir, snapshots are copies, state survives restarts and crashes. It serves \
one dialect: v1 (default), v0.3 (also v0.2 peers), v0.1 or v0.1-oneof (the Sept 2017 draft)."
)]
struct Cli {
    /// Where to listen: unix:///path/csi.sock (or a bare path), or tcp://host:port with the
    /// --tls-* flags (mutual TLS; plaintext TCP is refused).
    #[arg(long, env = "CSI_ENDPOINT")]
    endpoint: String,

    /// Server certificate chain (PEM), for a tcp:// endpoint.
    #[arg(long, requires_all = ["tls_key", "tls_client_ca"])]
    tls_cert: Option<PathBuf>,
    /// Server private key (PEM).
    #[arg(long)]
    tls_key: Option<PathBuf>,
    /// CA bundle (PEM) client certificates must chain to.
    #[arg(long)]
    tls_client_ca: Option<PathBuf>,

    /// Directory holding volumes, snapshots and state.json. Must not be the socket's directory.
    #[arg(long)]
    data_dir: PathBuf,

    /// CSI dialect to serve: v1, v0.3 (v0.2), v0.1, v0.1-oneof.
    #[arg(long, default_value = "v1")]
    dialect: Dialect,

    /// Plugin name reported by GetPluginInfo.
    #[arg(long, default_value = "reference.csi-gateway.dev")]
    driver_name: String,

    /// This node's id (NodeGetInfo / NodeGetId / GetNodeID).
    #[arg(long, default_value = "node-1")]
    node_id: String,

    /// Other node ids ControllerPublish accepts (repeatable), so multi-node rules can be exercised.
    #[arg(long = "peer-node")]
    peer_nodes: Vec<String>,

    /// Capacity pool in bytes; suffixes Ki, Mi, Gi, Ti (binary) or k, M, G, T (decimal).
    #[arg(long, default_value = "100Gi", value_parser = parse_size)]
    pool_size: u64,

    /// Most volumes attached to one node (0 = no limit).
    #[arg(long, default_value_t = 0)]
    max_volumes_per_node: u64,

    /// One key=value of this node's topology segment (repeatable). Enables
    /// VOLUME_ACCESSIBILITY_CONSTRAINTS.
    #[arg(long = "topology", value_parser = parse_label)]
    topology: Vec<(String, String)>,

    /// How NodePublish exposes a volume: bind (real bind mounts; needs CAP_SYS_ADMIN, checked at
    /// start-up) or symlink (unprivileged; readonly is not enforced). Never switched silently.
    #[arg(long, default_value = "bind")]
    publish_mode: PublishMode,

    /// Advertise STAGE_UNSTAGE_VOLUME and require NodeStage before NodePublish (v1, v0.3).
    /// Ignored by v0.1 and v0.1-oneof, which have no staging.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    require_staging: bool,

    /// v1: serve the alpha GetSnapshot RPC and advertise its GET_SNAPSHOT capability.
    #[arg(long)]
    alpha_get_snapshot: bool,

    /// v0.3, v0.1, v0.1-oneof: the CO creates target_path before NodePublishVolume and removes
    /// it after NodeUnpublishVolume (the v0.x contract); a missing target is INVALID_ARGUMENT.
    /// Ignored by v1, whose plugins create and remove it.
    #[arg(long)]
    co_creates_target: bool,

    /// Test hook: hold the volume lock this long (e.g. 2s) after writing a new volume's or
    /// snapshot's data and before committing it.
    #[arg(long, hide = true, value_parser = humantime_ms)]
    fault_delay: Option<Duration>,

    /// Test hook: refuse these RPCs (comma-separated names, e.g. NodePublishVolume) with an
    /// error quoting every readable string of the request, as plugins that echo input do.
    #[arg(long, hide = true, value_delimiter = ',')]
    test_echo_errors: Vec<String>,

    /// Test hook: a slow driver. Each named RPC waits this long before it is served
    /// (comma-separated NAME=DURATION, e.g. CreateVolume=5s,NodeStageVolume=500ms), and logs
    /// `rpc begin` with `in_flight`, how many calls of it run at once, as it starts.
    #[arg(long, value_delimiter = ',', value_parser = parse_delay)]
    delay: Vec<(String, Duration)>,

    /// Serve HTTP/2 with tonic's adaptive flow-control window (`http2_adaptive_window`), as
    /// some plugins do: its windows start at HTTP/2's default 64 KiB, and with them h2's budget
    /// for the overhead of small DATA frames (`too_many_data_frames`).
    #[arg(long)]
    http2_adaptive_window: bool,
}

fn parse_label(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("{s:?} is not key=value")),
    }
}

/// `NodeStageVolume=5s`.
fn parse_delay(s: &str) -> Result<(String, Duration), String> {
    let (name, delay) = parse_label(s)?;
    Ok((name, humantime_ms(&delay)?))
}

/// `250ms` or `2s`.
fn humantime_ms(s: &str) -> Result<Duration, String> {
    if let Some(ms) = s.strip_suffix("ms") {
        ms.parse()
            .map(Duration::from_millis)
            .map_err(|e| e.to_string())
    } else if let Some(secs) = s.strip_suffix('s') {
        secs.parse()
            .map(Duration::from_secs)
            .map_err(|e| e.to_string())
    } else {
        Err(format!("{s:?}: expected e.g. 250ms or 2s"))
    }
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    let staging = cli.require_staging && matches!(cli.dialect, Dialect::V1 | Dialect::V0_3);
    let tls = match (cli.tls_cert, cli.tls_key, cli.tls_client_ca) {
        (Some(cert), Some(key), Some(ca)) => Some(csi_gateway_tls::server::ServerSettings {
            listen: cli.endpoint.trim_start_matches("tcp://").to_string(),
            material: csi_gateway_tls::Material { cert, key, ca },
            min_version: Default::default(),
            peers: Vec::new(),
            handshake_timeout: std::time::Duration::from_secs(10),
            reload_interval: std::time::Duration::from_secs(2),
            tcp_keepalive: std::time::Duration::from_secs(10),
        }),
        _ => None,
    };
    let opts = Options {
        tls,
        echo_errors: cli.test_echo_errors,
        http2_adaptive_window: cli.http2_adaptive_window,
        delays: cli.delay,
        endpoint: cli.endpoint,
        dialect: cli.dialect,
        driver_name: cli.driver_name,
        engine: engine::Config {
            data_dir: cli.data_dir,
            node_id: cli.node_id,
            peer_nodes: cli.peer_nodes,
            pool_size: cli.pool_size,
            max_volumes_per_node: cli.max_volumes_per_node,
            topology: cli.topology.into_iter().collect::<Segment>(),
            publish_mode: cli.publish_mode,
            require_staging: staging,
            alpha_get_snapshot: cli.alpha_get_snapshot,
            co_creates_target: cli.co_creates_target && cli.dialect != Dialect::V1,
            fault_delay: cli.fault_delay.unwrap_or_default(),
        },
    };
    match run(opts) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Every error here already names its cause in its message; `{e:#}` would repeat it.
            eprintln!("csi-reference-backend: {e}");
            let config_error = e
                .downcast_ref::<serve::ServeError>()
                .is_some_and(|e| !matches!(e, serve::ServeError::Transport(_)));
            ExitCode::from(if config_error { EX_USAGE } else { 1 })
        }
    }
}

fn run(opts: Options) -> anyhow::Result<()> {
    let rt = tokio::runtime::Runtime::new()
        .map_err(|e| anyhow::anyhow!("starting the async runtime: {e}"))?;
    rt.block_on(async {
        // Handlers first, so a SIGTERM right after the socket appears is a clean shutdown.
        let shutdown = serve::shutdown_signal()
            .map_err(|e| anyhow::anyhow!("installing signal handlers: {e}"))?;
        serve::serve(opts, shutdown)
            .await
            .map_err(anyhow::Error::from)
    })?;
    Ok(())
}
