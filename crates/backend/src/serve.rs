//! The socket side: resolve the endpoint, check the layout, build the chosen dialect's
//! services over one engine, serve until a shutdown signal, then remove the socket.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::net::{UnixListener, UnixStream};
use tonic::service::Routes;

use super::engine::{self, Engine, EngineError};
use csi_gateway_proto::dialect::Dialect;

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(
        "endpoint {0:?} is not a UNIX socket (expected unix:///path/csi.sock or /path/csi.sock)"
    )]
    Endpoint(String),
    #[error(
        "--data-dir {data:?} is the socket's directory; keep state elsewhere, the socket \
         directory holds only the socket"
    )]
    DataDirIsSocketDir { data: PathBuf },
    #[error("another plugin is already listening on {0:?}")]
    SocketInUse(PathBuf),
    #[error("opening the engine: {0}")]
    Engine(#[from] EngineError),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}: plaintext TCP is refused; give --tls-cert, --tls-key and --tls-client-ca")]
    PlaintextTcp(String),
    #[error("TLS: {0}")]
    Tls(String),
    #[error("serving: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// What to serve, besides the engine's own configuration.
#[derive(Clone, Debug)]
pub struct Options {
    pub endpoint: String,
    pub dialect: Dialect,
    pub driver_name: String,
    pub engine: engine::Config,
    /// Mutual TLS for a `tcp://host:port` endpoint (required there; plaintext TCP is refused).
    pub tls: Option<csi_gateway_tls::server::ServerSettings>,
    /// TEST HOOK: RPCs refused with an error quoting the request ([`super::echo`]).
    pub echo_errors: Vec<String>,
    /// tonic's `http2_adaptive_window` (windows from 64 KiB, adapting to the link).
    pub http2_adaptive_window: bool,
    /// TEST HOOK: how long each named RPC waits before it is served ([`super::rpclog`]).
    pub delays: Vec<(String, std::time::Duration)>,
}

/// `unix:///abs/path`, `unix:/abs/path` or a bare path → the socket path.
pub fn socket_path(endpoint: &str) -> Result<PathBuf, ServeError> {
    let path = if let Some(rest) = endpoint.strip_prefix("unix://") {
        rest
    } else if let Some(rest) = endpoint.strip_prefix("unix:") {
        rest
    } else if endpoint.contains("://") {
        return Err(ServeError::Endpoint(endpoint.to_string()));
    } else {
        endpoint
    };
    if path.is_empty() {
        return Err(ServeError::Endpoint(endpoint.to_string()));
    }
    Ok(PathBuf::from(path))
}

/// Refuses a data directory that is the socket's directory (the socket directory is shared
/// with the CO and must hold nothing but the socket).
pub fn check_layout(socket: &Path, data_dir: &Path) -> Result<(), ServeError> {
    let parent = socket
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    if canon(parent) == canon(data_dir) {
        return Err(ServeError::DataDirIsSocketDir {
            data: data_dir.to_path_buf(),
        });
    }
    Ok(())
}

/// Removes a stale socket left by a crashed run; refuses if something still answers on it.
async fn clear_stale(socket: &Path) -> Result<(), ServeError> {
    if std::fs::symlink_metadata(socket).is_err() {
        return Ok(());
    }
    if UnixStream::connect(socket).await.is_ok() {
        return Err(ServeError::SocketInUse(socket.to_path_buf()));
    }
    std::fs::remove_file(socket).map_err(|source| ServeError::Io {
        context: format!("removing stale socket {}", socket.display()),
        source,
    })
}

/// The services of `dialect`, all over `engine`.
pub fn routes(dialect: Dialect, engine: Arc<Engine>, driver_name: String) -> Routes {
    match dialect {
        Dialect::V1 => super::v1::routes(engine, driver_name),
        Dialect::V0_3 => super::v0_3::routes(engine, driver_name),
        Dialect::V0_1 => super::v0_1::routes(engine, driver_name),
        Dialect::V0_1Oneof => super::v0_1_oneof::routes(engine, driver_name),
    }
}

/// Validates, opens the engine, binds and serves until `shutdown` resolves; the socket is
/// removed on the way out, whatever happened.
pub async fn serve(opts: Options, shutdown: impl Future<Output = ()>) -> Result<(), ServeError> {
    let (incoming, socket, engine) = match opts.endpoint.strip_prefix("tcp://") {
        Some(addr) => {
            let settings = opts
                .tls
                .clone()
                .ok_or_else(|| ServeError::PlaintextTcp(opts.endpoint.clone()))?;
            let acceptor = csi_gateway_tls::server::Acceptor::new(&settings)
                .map_err(|e| ServeError::Tls(e.to_string()))?;
            let engine = Arc::new(Engine::open(opts.engine.clone())?);
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|source| ServeError::Io {
                    context: format!("binding {addr}"),
                    source,
                })?;
            (super::listen::tls(listener, acceptor), None, engine)
        }
        None => {
            let socket = socket_path(&opts.endpoint)?;
            check_layout(&socket, &opts.engine.data_dir)?;
            // A live plugin on this socket is refused before the engine touches the data directory.
            clear_stale(&socket).await?;
            let engine = Arc::new(Engine::open(opts.engine.clone())?);
            let listener = UnixListener::bind(&socket).map_err(|source| ServeError::Io {
                context: format!("binding {}", socket.display()),
                source,
            })?;
            (super::listen::unix(listener), Some(socket), engine)
        }
    };
    tracing::info!(
        endpoint = %opts.endpoint,
        dialect = %opts.dialect,
        driver = %opts.driver_name,
        data_dir = %opts.engine.data_dir.display(),
        tls = opts.tls.is_some(),
        "csi-reference-backend listening"
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let mut server = tokio::spawn(
        tonic::transport::Server::builder()
            .http2_adaptive_window(Some(opts.http2_adaptive_window))
            .layer(super::rpclog::RpcLog::delayed(&opts.delays))
            .layer(super::echo::Echo {
                rpcs: Arc::new(opts.echo_errors.clone()),
            })
            .add_routes(routes(opts.dialect, engine, opts.driver_name))
            .serve_with_incoming_shutdown(incoming, async {
                let _ = stopped.await;
            }),
    );
    let result = tokio::select! {
        r = &mut server => r,
        () = shutdown => {
            let _ = stop.send(());
            // A CO keeps its connection open forever; drain in-flight calls for a bounded
            // time, then stop regardless.
            match tokio::time::timeout(DRAIN, &mut server).await {
                Ok(r) => r,
                Err(_) => {
                    tracing::info!(?DRAIN, "connections still open after the drain period; closing");
                    server.abort();
                    Ok(Ok(()))
                }
            }
        }
    };
    if let Some(socket) = socket {
        let _ = std::fs::remove_file(&socket);
    }
    tracing::info!("csi-reference-backend stopped");
    match result {
        Ok(r) => Ok(r?),
        Err(e) => Err(ServeError::Io {
            context: "server task".into(),
            source: std::io::Error::other(e),
        }),
    }
}

/// How long a shutdown waits for in-flight calls.
const DRAIN: std::time::Duration = std::time::Duration::from_secs(2);

/// Installs the SIGTERM/SIGINT handlers now and returns a future that resolves on either.
///
/// Call it (inside the runtime) before [`serve`] binds: a handler installed lazily, when the
/// future is first polled, leaves a window after the socket is ready in which SIGTERM still
/// has its default action and kills the process instead of shutting it down cleanly.
pub fn shutdown_signal() -> std::io::Result<impl Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
            _ = int.recv() => tracing::info!("SIGINT: shutting down"),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints() {
        assert_eq!(
            socket_path("unix:///run/csi.sock").unwrap(),
            PathBuf::from("/run/csi.sock")
        );
        assert_eq!(
            socket_path("unix:/run/csi.sock").unwrap(),
            PathBuf::from("/run/csi.sock")
        );
        assert_eq!(
            socket_path("/run/csi.sock").unwrap(),
            PathBuf::from("/run/csi.sock")
        );
        assert!(socket_path("tcp://127.0.0.1:10000").is_err());
        assert!(socket_path("unix://").is_err());
    }

    #[test]
    fn data_dir_may_not_be_the_socket_dir() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("csi.sock");
        assert!(check_layout(&sock, dir.path()).is_err());
        assert!(check_layout(&sock, &dir.path().join("data")).is_ok());
    }
}
