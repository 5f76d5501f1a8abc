//! The reference backend run in-process behind the gateway, for the built-in default
//! configuration: a newcomer gets a legacy plugin to translate to without installing one. It is
//! served on its own UNIX socket, so the gateway reaches it exactly as it reaches any plugin.

//!
//! It is the `embedded-backend` feature (on by default): a gateway built without it refuses
//! that configuration at start, naming the feature, and needs no reference backend crate.

use std::path::Path;
#[cfg(feature = "embedded-backend")]
use std::time::Duration;

use crate::dialect::Dialect;
#[cfg(feature = "embedded-backend")]
use csi_gateway_backend::{
    engine::{self, mounter::PublishMode},
    serve::{self, Options},
};

pub struct Embedded {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

/// Refused: this build has no reference backend to embed.
#[cfg(not(feature = "embedded-backend"))]
pub async fn start(_: Dialect, _: &Path, _: &Path) -> Result<Embedded, String> {
    Err(
        "this csi-gateway was built without the embedded reference backend (cargo feature \
         `embedded-backend`): set [upstream] endpoint to your plugin"
            .into(),
    )
}

/// Serves the reference backend in `dialect` on `socket`, storing volumes in `data_dir`.
/// Volumes are published as symlinks, so the demo needs no mount privilege.
#[cfg(feature = "embedded-backend")]
pub async fn start(dialect: Dialect, socket: &Path, data_dir: &Path) -> Result<Embedded, String> {
    let options = Options {
        endpoint: socket.display().to_string(),
        dialect,
        driver_name: "reference.csi-gateway.dev".into(),
        engine: engine::Config {
            data_dir: data_dir.to_path_buf(),
            node_id: "node-1".into(),
            peer_nodes: Vec::new(),
            pool_size: 10 << 30,
            max_volumes_per_node: 0,
            topology: Default::default(),
            publish_mode: PublishMode::Symlink,
            require_staging: false,
            alpha_get_snapshot: false,
            co_creates_target: false,
            fault_delay: Duration::ZERO,
        },
        tls: None,
        echo_errors: Vec::new(),
        http2_adaptive_window: false,
        delays: Vec::new(),
    };
    for dir in [socket.parent(), Some(data_dir)].into_iter().flatten() {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let socket_path = socket.to_path_buf();
    let task = tokio::spawn(async move {
        let shutdown = async {
            let _ = stopped.await;
        };
        if let Err(e) = serve::serve(options, shutdown).await {
            tracing::error!(error = %e, "embedded reference backend stopped");
        }
    });
    // Ready once the socket answers, so the gateway's first connect finds it.
    for _ in 0..200 {
        if tokio::net::UnixStream::connect(&socket_path).await.is_ok() {
            tracing::info!(%dialect, socket = %socket_path.display(), "embedded reference backend serving");
            return Ok(Embedded {
                stop: Some(stop),
                task,
            });
        }
        if task.is_finished() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Err(format!("did not come up on {}", socket_path.display()))
}

impl Embedded {
    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        let _ = self.task.await;
    }
}
