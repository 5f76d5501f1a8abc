//! The gateway assembled, top to bottom: the upstream supervisor (connect, detect, reconnect),
//! the route table of the front dialects, the front socket, and the accept loop. Each piece is
//! built and checked before the socket is bound, so a failure leaves nothing half-started.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::call::protect::Protection;
use crate::call::router::PackageClash;
use crate::call::services::{ReflectionError, Services};
use crate::call::staging;
use crate::call::{Router, Shared};
use crate::config::{Config, StoreBackend, UpstreamTarget};
use crate::endpoint::Endpoint;
use crate::metrics;
use crate::observe::Redactor;
use crate::splice::{listener, socket};
use crate::store;
use crate::upstream::{self, Upstream};

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Routes(#[from] PackageClash),
    #[error(transparent)]
    Reflection(#[from] ReflectionError),
    #[error("front socket: {0}")]
    Socket(#[from] socket::SocketError),
    #[error(transparent)]
    Store(#[from] store::StoreError),
    #[error("metrics endpoint {0}: {1}")]
    Metrics(std::net::SocketAddr, std::io::Error),
    #[error("embedded reference backend: {0}")]
    Embedded(String),
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    #[error("appliance listener on {addr}: {source}")]
    Appliance {
        addr: String,
        source: std::io::Error,
    },
    #[cfg(feature = "test-hooks")]
    #[error("test hook: {0}")]
    Hook(String),
}

/// The configured durable store (the embedded database in `state.dir`, or etcd), every value
/// in it checked before anything is served: a damaged one is logged and counted, and refused
/// with DATA_LOSS to the calls that need it, but does not stop the start.
async fn open_store(config: &Config) -> Result<Arc<store::Store>, StartError> {
    let timeout = config.state.timeout;
    let kv: Arc<dyn store::KeyValue> = match &config.state.backend {
        StoreBackend::Embedded => {
            let file = config.state.dir.join("state.redb");
            let kv = store::embedded::Embedded::open(&file)?;
            tracing::info!(state = %file.display(), "durable state: embedded database");
            Arc::new(kv)
        }
        StoreBackend::Etcd(e) => {
            let kv = store::etcd::Etcd::open(e, timeout).await?;
            tracing::info!(endpoints = ?e.endpoints, prefix = %e.prefix, tls = e.tls.is_some(), user = e.username.as_deref(), "durable state: etcd");
            Arc::new(kv)
        }
    };
    let store = store::Store::new(kv, timeout);
    metrics::store_damaged_values(0);
    let entries = store.verify().await.map_err(|e| store::StoreError::Open {
        path: store.name().to_string(),
        message: e.to_string(),
    })?;
    tracing::info!(
        entries,
        damaged = store.damaged().len(),
        "durable state checked"
    );
    Ok(Arc::new(store))
}

/// The dialects the front serves, as `csi_gateway_info` names them (`v1,v0.3,v0.1-oneof`).
fn served_dialects(config: &Config) -> String {
    let v0 = match config.listen.serves_v0_2() {
        true => "v0.2",
        false => "v0.3",
    };
    let legacy = config.listen.front_dialects()[2];
    format!("v1,{v0},{}", legacy.name())
}

/// A running gateway.
pub struct Running {
    socket: PathBuf,
    shutdown: watch::Sender<bool>,
    serving: JoinHandle<()>,
    upstream: Arc<Upstream>,
    embedded: Option<crate::embedded::Embedded>,
    appliance: Option<JoinHandle<()>>,
}

/// Whether the plugin is across the bridge (TCP, mutual TLS), on another host.
fn bridged(target: &UpstreamTarget) -> bool {
    matches!(target, UpstreamTarget::Endpoint(Endpoint::Tcp(_)))
}

/// Starts the gateway described by `config`.
pub async fn start(config: &Config) -> Result<Running, StartError> {
    // First, so nothing recorded while starting up (the upstream's state) is lost.
    let prometheus = metrics::install();
    let router = Router::new(&config.listen.front_dialects())?
        .serving_v0_2(config.listen.serves_v0_2())
        .decoding(&config.calls)
        .bridging(bridged(&config.upstream.target), config.appliance.is_some());
    // The store before anything binds or spawns: a wrong etcd address fails the start-up.
    let kv = open_store(config).await?;
    // Staging emulation shares the store, so its records are as durable as the handles.
    #[cfg(feature = "test-hooks")]
    let crash = staging::CrashPoint::new(config.test_crash_at.clone()).map_err(StartError::Hook)?;
    #[cfg(not(feature = "test-hooks"))]
    let crash = staging::CrashPoint;
    let emulation = staging::Emulation::new(
        kv.clone(),
        &config.state.node_id,
        config.state.staging_dir.clone(),
        crash,
    )
    .await?;
    tracing::info!(staging_dir = %config.state.staging_dir.display(), node_id = %config.state.node_id, references = emulation.references(), "staging emulation");
    let embedded = match &config.upstream.target {
        UpstreamTarget::Embedded {
            dialect,
            socket,
            data_dir,
        } => Some(
            crate::embedded::start(*dialect, socket, data_dir)
                .await
                .map_err(StartError::Embedded)?,
        ),
        UpstreamTarget::Endpoint(_) => None,
    };
    let endpoint = match &config.upstream.target {
        UpstreamTarget::Endpoint(e) => e.clone(),
        UpstreamTarget::Embedded { socket, .. } => Endpoint::Unix(socket.clone()),
    };
    // TLS material is loaded before anything binds: unusable certificates stop the start.
    let dialer = config
        .upstream
        .tls
        .as_ref()
        .map(crate::tls::Dialer::new)
        .transpose()?;
    let acceptor = config
        .appliance
        .as_ref()
        .map(crate::tls::Acceptor::new)
        .transpose()?;
    metrics::gateway_info(
        env!("CARGO_PKG_VERSION"),
        served_dialects(config),
        endpoint.to_string(),
    );
    let upstream = Upstream::spawn(upstream::Settings {
        endpoint,
        dialect: config.upstream.dialect,
        connect_timeout: config.upstream.connect_timeout,
        backoff_initial: config.upstream.backoff_initial,
        backoff_max: config.upstream.backoff_max,
        failover: config.upstream.failover.clone(),
        tls: dialer,
        inline_handles: config.state.inline_handles,
    });
    let Endpoint::Unix(path) = &config.listen.endpoint else {
        unreachable!("config validation keeps the front on a UNIX socket")
    };
    // The appliance listener (mTLS peers on TCP get the same front as the UNIX socket) binds
    // first: if its port is taken, no front socket is left behind.
    let appliance = match (&config.appliance, acceptor) {
        (Some(a), Some(acceptor)) => {
            let tcp = tokio::net::TcpListener::bind(&a.listen)
                .await
                .map_err(|source| StartError::Appliance {
                    addr: a.listen.clone(),
                    source,
                })?;
            let local = tcp.local_addr().map(|a| a.to_string()).unwrap_or_default();
            tracing::info!(listen = %local, peers = a.peers.len(), "appliance listening (mutual TLS)");
            Some((tcp, acceptor))
        }
        _ => None,
    };
    let services = Services::new(
        &config.listen.front_dialects(),
        upstream.clone(),
        config.metrics.probe_timeout,
    )?;
    // The metrics port binds before the front socket, as the appliance's does: if it is
    // taken, no front socket file is left behind.
    let metrics_listener = match config.metrics.listen {
        Some(addr) => Some(
            TcpListener::bind(addr)
                .await
                .map_err(|e| StartError::Metrics(addr, e))?,
        ),
        None => None,
    };
    let listener = socket::bind(path, config.listen.socket_mode, config.listen.socket_owner)?;
    tracing::info!(listen = %config.listen.endpoint, dialects = ?router.dialects(), upstream = %upstream.endpoint(), "serving");
    let emulation = Arc::new(emulation);
    tokio::spawn({
        let (emulation, upstream) = (emulation.clone(), upstream.clone());
        async move { emulation.sweep(&upstream).await }
    });
    let shared = Arc::new(Shared {
        router,
        upstream: upstream.clone(),
        store: Some(Arc::new(store::Handles::new(kv.clone()))),
        staging: Some(emulation),
        redactor: Redactor::new(config.log.redact_keys.iter().cloned()),
        limits: crate::splice::limits::fit_open_files(config.listen.limits.clone()),
        services,
        protection: Protection::new(config.calls.clone()),
        node_paths: config.node_paths.clone(),
        resets: Default::default(),
        buffered: crate::call::budget::Budget::new(config.listen.limits.max_buffered_bytes),
    });
    let (shutdown, stop) = watch::channel(false);
    let appliance = appliance.map(|(tcp, acceptor)| {
        tokio::spawn(crate::splice::appliance::serve(
            tcp,
            acceptor,
            shared.clone(),
            stop.clone(),
            config.listen.grace_period,
            crate::splice::limits::fit_appliance_connections(config.appliance_max_connections),
        ))
    });
    if let Some(listener) = metrics_listener {
        let endpoint = Arc::new(crate::ops::Endpoint {
            prometheus,
            metrics_path: config.metrics.path.clone(),
            upstream: upstream.clone(),
            probe_timeout: config.metrics.probe_timeout,
            store: kv.clone(),
            socket: path.clone(),
            calls: shared.clone(),
        });
        tracing::info!(listen = %listener.local_addr().map(|a| a.to_string()).unwrap_or_default(), "metrics and health endpoint");
        tokio::spawn(crate::ops::serve(listener, endpoint, stop.clone()));
    }
    let serving = tokio::spawn(listener::serve(
        listener,
        shared,
        stop,
        config.listen.grace_period,
    ));
    Ok(Running {
        socket: path.clone(),
        shutdown,
        serving,
        upstream,
        embedded,
        appliance,
    })
}

impl Running {
    pub fn upstream(&self) -> &Arc<Upstream> {
        &self.upstream
    }

    /// Stops accepting, lets in-flight calls finish within the grace period, removes the socket.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        let _ = self.serving.await;
        if let Some(a) = self.appliance {
            let _ = a.await;
        }
        socket::unlink(&self.socket);
        self.upstream.stop();
        if let Some(e) = self.embedded {
            e.stop().await;
        }
        tracing::info!("stopped");
    }
}
