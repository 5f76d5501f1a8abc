//! Making a volume visible at a path: a real bind mount (the default), or a symlink when the
//! operator explicitly asks for `--publish-mode symlink` (unprivileged runs). Bind mode is never
//! silently degraded: if the host refuses mounts, start-up fails and says so.

use std::fs;
use std::io::ErrorKind;
use std::path::Path;

pub use csi_gateway_mountinfo::is_mount_point;
use rustix::mount::{mount_bind, mount_remount, unmount, MountFlags, UnmountFlags};

use super::error::{EngineError, Result};
use super::model::Kind;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PublishMode {
    Bind,
    Symlink,
}

impl std::str::FromStr for PublishMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "bind" => Ok(PublishMode::Bind),
            "symlink" => Ok(PublishMode::Symlink),
            other => Err(format!(
                "unknown publish mode {other:?} (expected bind or symlink)"
            )),
        }
    }
}

/// Checks once, at start-up, that bind mounts work here, with a scratch pair under `dir`.
pub fn probe_bind(dir: &Path) -> Result<()> {
    let src = dir.join(".bind-probe-src");
    let dst = dir.join(".bind-probe-dst");
    for p in [&src, &dst] {
        let _ = fs::create_dir(p);
    }
    let outcome = mount_bind(&src, &dst);
    if outcome.is_ok() {
        let _ = unmount(&dst, UnmountFlags::DETACH);
    }
    let _ = fs::remove_dir(&src);
    let _ = fs::remove_dir(&dst);
    outcome.map_err(|e| {
        EngineError::Unavailable(format!(
            "--publish-mode bind needs bind mounts, and this host refused one ({e}); \
             run as root with CAP_SYS_ADMIN, or pass --publish-mode symlink explicitly"
        ))
    })
}

/// Makes `source` (a directory for mount access, a file for block access) appear at `target`.
pub fn attach(
    mode: PublishMode,
    kind: Kind,
    source: &Path,
    target: &Path,
    readonly: bool,
) -> Result<()> {
    let ctx = || format!("publishing {} at {}", source.display(), target.display());
    match mode {
        PublishMode::Symlink => {
            // The CO may have created the target (kubelet creates directories); an empty one is
            // replaced by the link, anything else is left alone and reported.
            match fs::symlink_metadata(target) {
                Ok(m) if m.is_dir() => fs::remove_dir(target).map_err(EngineError::io(ctx()))?,
                Ok(m) if m.is_file() && m.len() == 0 => {
                    fs::remove_file(target).map_err(EngineError::io(ctx()))?
                }
                // Our own link from a publish whose commit a crash prevented: done already.
                Ok(m)
                    if m.file_type().is_symlink()
                        && fs::read_link(target).ok().as_deref() == Some(source) =>
                {
                    return Ok(())
                }
                Ok(_) => {
                    return Err(EngineError::AlreadyExists(format!(
                        "{} exists and is not an empty directory or file",
                        target.display()
                    )))
                }
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(EngineError::io(ctx())(e)),
            }
            std::os::unix::fs::symlink(source, target).map_err(EngineError::io(ctx()))
        }
        PublishMode::Bind => {
            // A crash between mounting and committing leaves the mount without a record; the
            // CO's retry must not stack a second mount on top of it.
            if is_mount_point(target).map_err(EngineError::io(ctx()))? {
                return Ok(());
            }
            match kind {
                Kind::Mount => fs::create_dir_all(target).map_err(EngineError::io(ctx()))?,
                Kind::Block => {
                    if fs::symlink_metadata(target).is_err() {
                        fs::File::create(target).map_err(EngineError::io(ctx()))?;
                    }
                }
            }
            mount_bind(source, target).map_err(|e| EngineError::io(ctx())(e.into()))?;
            if readonly {
                // A bind mount only becomes read-only through a remount of the bind itself.
                let flags = MountFlags::BIND | MountFlags::RDONLY;
                if let Err(e) = mount_remount(target, flags, "") {
                    let _ = unmount(target, UnmountFlags::DETACH);
                    return Err(EngineError::io(ctx())(e.into()));
                }
            }
            Ok(())
        }
    }
}

/// Unmounts `target`; not mounted (EINVAL) or gone (ENOENT) is fine, as for a repeated call.
fn unmount_once(target: &Path) -> Result<()> {
    match unmount(target, UnmountFlags::empty()) {
        Ok(()) | Err(rustix::io::Errno::INVAL) | Err(rustix::io::Errno::NOENT) => Ok(()),
        Err(e) => Err(EngineError::io(format!(
            "unpublishing {}",
            target.display()
        ))(e.into())),
    }
}

/// Undoes [`attach`] on a target the CO owns (v0.x): unmounted, or the link replaced by the
/// empty directory it replaced, and left in place.
pub fn release(target: &Path, symlink: bool) -> Result<()> {
    let ctx = || format!("unpublishing {}", target.display());
    if !symlink {
        return unmount_once(target);
    }
    match fs::symlink_metadata(target) {
        Ok(m) if m.file_type().is_symlink() => {
            fs::remove_file(target).map_err(EngineError::io(ctx()))?;
            fs::create_dir(target).map_err(EngineError::io(ctx()))
        }
        _ => Ok(()),
    }
}

/// Undoes [`attach`]; a target that is already gone or not mounted is fine (idempotent).
pub fn detach(target: &Path, symlink: bool) -> Result<()> {
    let ctx = || format!("unpublishing {}", target.display());
    if !symlink {
        unmount_once(target)?;
    }
    match fs::symlink_metadata(target) {
        Ok(m) if m.is_dir() => fs::remove_dir(target).map_err(EngineError::io(ctx())),
        Ok(_) => fs::remove_file(target).map_err(EngineError::io(ctx())),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(EngineError::io(ctx())(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symlink_publish_replaces_an_empty_dir_and_detach_is_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("vol");
        fs::create_dir(&src).unwrap();
        fs::write(src.join("data"), b"hello").unwrap();
        let target = dir.path().join("target");
        fs::create_dir(&target).unwrap();
        attach(PublishMode::Symlink, Kind::Mount, &src, &target, false).unwrap();
        assert_eq!(fs::read(target.join("data")).unwrap(), b"hello");
        detach(&target, true).unwrap();
        assert!(!target.exists());
        detach(&target, true).unwrap();
    }

    #[test]
    fn symlink_publish_accepts_its_own_link_again() {
        let dir = tempfile::tempdir().unwrap();
        let (src, target) = (dir.path().join("vol"), dir.path().join("t"));
        fs::create_dir(&src).unwrap();
        attach(PublishMode::Symlink, Kind::Mount, &src, &target, false).unwrap();
        attach(PublishMode::Symlink, Kind::Mount, &src, &target, false).unwrap();
        let other = dir.path().join("other");
        fs::create_dir(&other).unwrap();
        assert!(attach(PublishMode::Symlink, Kind::Mount, &other, &target, false).is_err());
    }

    #[test]
    fn symlink_publish_refuses_a_non_empty_target() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        fs::create_dir(&target).unwrap();
        fs::write(target.join("keep"), b"x").unwrap();
        let err = attach(
            PublishMode::Symlink,
            Kind::Mount,
            dir.path(),
            &target,
            false,
        );
        assert!(err.is_err());
        assert!(target.join("keep").exists());
    }

    #[test]
    fn publish_mode_parses() {
        assert_eq!("bind".parse::<PublishMode>(), Ok(PublishMode::Bind));
        assert_eq!("symlink".parse::<PublishMode>(), Ok(PublishMode::Symlink));
        assert!("auto".parse::<PublishMode>().is_err());
    }
}
