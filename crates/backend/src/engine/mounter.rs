//! Making a volume visible at a path: a real bind mount (the default), or a symlink when the
//! operator explicitly asks for `--publish-mode symlink` (unprivileged runs). Bind mode is never
//! silently degraded: if the host refuses mounts, start-up fails and says so.

use std::fs;
use std::io::ErrorKind;
use std::path::Path;

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

/// Whether `path` is a mount point now, from /proc/self/mountinfo. A mountinfo that cannot be
/// read is an error, never "not a mount point": a caller that took it for one would stack a
/// second mount, or forget a mount that exists.
pub fn is_mount_point(path: &Path) -> std::io::Result<bool> {
    is_mount_point_in(Path::new("/proc/self/mountinfo"), path)
}

/// [`is_mount_point`] against the mountinfo file `mountinfo`.
fn is_mount_point_in(mountinfo: &Path, path: &Path) -> std::io::Result<bool> {
    use std::os::unix::ffi::OsStrExt as _;
    let info = fs::read(mountinfo).map_err(|e| {
        std::io::Error::new(e.kind(), format!("reading {}: {e}", mountinfo.display()))
    })?;
    let want = path.as_os_str().as_bytes();
    // Field 5 is the mount point.
    Ok(info
        .split(|b| *b == b'\n')
        .filter_map(|line| line.split(|b| *b == b' ').nth(4))
        .any(|field| unescape(field) == want))
}

/// Mount points at or under `dir` in this process's mount namespace (/proc/self/mountinfo):
/// a directory holding one must not be removed recursively, which would delete the mounted
/// volume's data through it.
pub fn mounts_under(dir: &Path) -> std::io::Result<Vec<std::path::PathBuf>> {
    use std::os::unix::ffi::OsStrExt as _;
    let info = fs::read("/proc/self/mountinfo")?;
    Ok(info
        .split(|b| *b == b'\n')
        .filter_map(|line| line.split(|b| *b == b' ').nth(4))
        .map(|field| std::path::PathBuf::from(std::ffi::OsStr::from_bytes(&unescape(field))))
        .filter(|p| p.starts_with(dir))
        .collect())
}

/// A mountinfo field with the kernel's octal escapes undone: `\040` space, `\011` tab, `\012`
/// newline, `\134` backslash (any `\` and three octal digits).
fn unescape(field: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        let octal = field
            .get(i + 1..i + 4)
            .filter(|d| field[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)))
            .and_then(|d| u8::from_str_radix(std::str::from_utf8(d).ok()?, 8).ok());
        match octal {
            Some(byte) => {
                out.push(byte);
                i += 4;
            }
            None => {
                out.push(field[i]);
                i += 1;
            }
        }
    }
    out
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
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape(br"/a\040b\011c\012d\134e"), b"/a b\tc\nd\\e");
        assert_eq!(unescape(br"/plain\9x\"), br"/plain\9x\");
        let dir = tempfile::tempdir().unwrap();
        let info = dir.path().join("mountinfo");
        fs::write(
            &info,
            "36 35 98:0 / /mnt/with\\040space\\011tab rw - ext3 /dev/x rw\n",
        )
        .unwrap();
        assert!(is_mount_point_in(&info, Path::new("/mnt/with space\ttab")).unwrap());
        assert!(!is_mount_point_in(&info, Path::new("/mnt/with")).unwrap());
        let e = is_mount_point_in(&dir.path().join("gone"), Path::new("/")).unwrap_err();
        assert!(e.to_string().contains("reading"), "{e}");
    }

    #[test]
    fn mounts_under_a_dir_are_listed() {
        let under_proc = mounts_under(Path::new("/proc")).unwrap();
        assert!(
            under_proc.iter().any(|p| p == Path::new("/proc")),
            "{under_proc:?}"
        );
        assert!(
            under_proc.iter().all(|p| p.starts_with("/proc")),
            "{under_proc:?}"
        );
        let dir = tempfile::tempdir().unwrap();
        assert!(mounts_under(dir.path()).unwrap().is_empty());
    }

    #[test]
    fn publish_mode_parses() {
        assert_eq!("bind".parse::<PublishMode>(), Ok(PublishMode::Bind));
        assert_eq!("symlink".parse::<PublishMode>(), Ok(PublishMode::Symlink));
        assert!("auto".parse::<PublishMode>().is_err());
    }
}
