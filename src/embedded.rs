//! The reference backend run in-process behind the gateway, for the built-in default
//! configuration: a newcomer gets a legacy plugin to translate to without installing one.

use std::path::Path;

use crate::dialect::Dialect;

pub struct Embedded {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

/// Serves the reference backend in `dialect` on `socket`, storing volumes in `data_dir`.
pub async fn start(dialect: Dialect, socket: &Path, data_dir: &Path) -> Result<Embedded, String> {
    let _ = (dialect, socket, data_dir);
    Err("the reference backend is not part of this build yet".into())
}

impl Embedded {
    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        let _ = self.task.await;
    }
}
