//! Filesystem work off the async runtime. The gateway runs on one thread by default
//! (`[runtime] worker_threads`), so a call that waited on a slow disk, or on a hung mount under
//! the CO's directory, would stall every connection with it: target paths and staging
//! directories are made, read and removed on tokio's blocking pool instead.

use crate::grpc::Status;

/// Runs `work` on the blocking pool; `what` names it should the task itself fail.
pub async fn off_runtime<T: Send + 'static>(
    what: &'static str,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Status> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| Status::internal(format!("{what}: the filesystem task failed: {e}")))
}
