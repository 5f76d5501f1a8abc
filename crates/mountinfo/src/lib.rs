//! Whether a path is a mount point, from the kernel's `/proc/self/mountinfo`: what the
//! gateway reads before it removes a target path (`src/call/paths/`), what the reference
//! backend reads before it mounts, and what `check --conformance` reads of a node plugin's
//! mounts. One reading, shared, so they can never disagree on escaped names.

use std::fs;
use std::path::{Path, PathBuf};

/// Whether `path` is a mount point now, from /proc/self/mountinfo. A mountinfo that cannot be
/// read is an error, never "not a mount point": a caller that took it for one would stack a
/// second mount, or forget a mount that exists.
pub fn is_mount_point(path: &Path) -> std::io::Result<bool> {
    is_mount_point_in(Path::new("/proc/self/mountinfo"), path)
}

/// [`is_mount_point`] against the mountinfo file `mountinfo`.
pub fn is_mount_point_in(mountinfo: &Path, path: &Path) -> std::io::Result<bool> {
    Ok(mount_points(mountinfo)?.iter().any(|p| p == path))
}

/// Mount points at or under `dir` now, from /proc/self/mountinfo: a directory holding one
/// must not be removed recursively, which would delete the mounted volume's data through it.
pub fn mounts_under(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut points = mount_points(Path::new("/proc/self/mountinfo"))?;
    points.retain(|p| p.starts_with(dir));
    Ok(points)
}

/// Every mount point in the mountinfo file `mountinfo`, unescaped.
fn mount_points(mountinfo: &Path) -> std::io::Result<Vec<PathBuf>> {
    use std::os::unix::ffi::OsStrExt as _;
    let info = fs::read(mountinfo).map_err(|e| {
        std::io::Error::new(e.kind(), format!("reading {}: {e}", mountinfo.display()))
    })?;
    // Field 5 is the mount point.
    Ok(info
        .split(|b| *b == b'\n')
        .filter_map(|line| line.split(|b| *b == b' ').nth(4))
        .map(|field| PathBuf::from(std::ffi::OsStr::from_bytes(&unescape(field))))
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
