//! Socket hygiene for the front's UNIX socket: a stale socket left by a crash is removed, a live
//! one (another process serving it) is never stolen, anything that is not a socket is never
//! deleted, and the socket gets the configured mode and owner.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use tokio::net::UnixListener;

#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error("{0} is in use by another process")]
    InUse(PathBuf),
    #[error("{0} exists and is not a socket; refusing to replace it")]
    NotASocket(PathBuf),
    #[error("cannot prepare {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Binds `path`, replacing a stale socket, then applies `mode` and `owner` (uid, gid).
pub fn bind(
    path: &Path,
    mode: Option<u32>,
    owner: Option<(u32, u32)>,
) -> Result<UnixListener, SocketError> {
    let io = |source| SocketError::Io {
        path: path.to_path_buf(),
        source,
    };
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(SocketError::InUse(path.to_path_buf()));
            }
            std::fs::remove_file(path).map_err(io)?;
        }
        Ok(_) => return Err(SocketError::NotASocket(path.to_path_buf())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(e)),
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    let listener = UnixListener::bind(path).map_err(io)?;
    if let Some(mode) = mode {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(io)?;
    }
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::chown(path, Some(uid), Some(gid)).map_err(io)?;
    }
    Ok(listener)
}

/// Removes the socket on exit, if it is still ours.
pub fn unlink(path: &Path) {
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket()) {
        let _ = std::fs::remove_file(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn replaces_stale_sockets_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("csi.sock");
        let live = bind(&path, Some(0o660), None).unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o660
        );
        assert!(matches!(
            bind(&path, None, None),
            Err(SocketError::InUse(_))
        ));
        drop(live); // the socket file stays behind, as after a crash
        assert!(path.exists());
        let _again = bind(&path, None, None).unwrap();
        let file = dir.path().join("plain");
        std::fs::write(&file, b"data").unwrap();
        assert!(matches!(
            bind(&file, None, None),
            Err(SocketError::NotASocket(_))
        ));
        assert_eq!(std::fs::read(&file).unwrap(), b"data");
    }
}
