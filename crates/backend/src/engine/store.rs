//! Durable state: one JSON document (`state.json`) under the data directory, always replaced
//! atomically (write a temp file, fsync it, rename over the old one, fsync the directory), so
//! a crash at any instant leaves either the old or the new state, never a torn one.
//!
//! Contract with the rest of the engine, which is what makes crash recovery work:
//! - creating: write the backing data first, then commit the state naming it;
//! - deleting: commit the state without it first, then remove the backing data.
//!
//! A crash between the two steps therefore only ever leaves backing data that no state names;
//! [`Store::reconcile`] removes such orphans at start-up.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::error::{EngineError, Result};
use super::model::State;

const STATE: &str = "state.json";
const STATE_TMP: &str = "state.json.tmp";

/// Paths under the data directory.
#[derive(Clone, Debug)]
pub struct Store {
    root: PathBuf,
}

impl Store {
    /// Creates the directory layout if needed.
    pub fn open(root: &Path) -> Result<Self> {
        for dir in [
            root.to_path_buf(),
            root.join("volumes"),
            root.join("snapshots"),
        ] {
            fs::create_dir_all(&dir)
                .map_err(EngineError::io(format!("creating {}", dir.display())))?;
        }
        Ok(Store {
            root: root.to_path_buf(),
        })
    }

    pub fn volume_path(&self, id: &str) -> PathBuf {
        self.root.join("volumes").join(id)
    }

    pub fn snapshot_path(&self, id: &str) -> PathBuf {
        self.root.join("snapshots").join(id)
    }

    /// Reads the last committed state; a missing file is an empty state.
    pub fn load(&self) -> Result<State> {
        let path = self.root.join(STATE);
        match fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                EngineError::Internal(format!("{} is not a valid state file: {e}", path.display()))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(State::default()),
            Err(e) => Err(EngineError::io(format!("reading {}", path.display()))(e)),
        }
    }

    /// Atomically replaces the committed state.
    pub fn commit(&self, state: &State) -> Result<()> {
        let tmp = self.root.join(STATE_TMP);
        let bytes = serde_json::to_vec_pretty(state)
            .map_err(|e| EngineError::Internal(format!("encoding state: {e}")))?;
        let ctx = || format!("writing {}", tmp.display());
        let mut file = fs::File::create(&tmp).map_err(EngineError::io(ctx()))?;
        file.write_all(&bytes).map_err(EngineError::io(ctx()))?;
        file.sync_all().map_err(EngineError::io(ctx()))?;
        drop(file);
        fs::rename(&tmp, self.root.join(STATE)).map_err(EngineError::io(format!(
            "renaming {} into place",
            tmp.display()
        )))?;
        // The rename is only durable once the directory entry is.
        fs::File::open(&self.root)
            .and_then(|d| d.sync_all())
            .map_err(EngineError::io(format!("syncing {}", self.root.display())))
    }

    /// Removes backing data no state names (left by a crash mid-create or mid-delete) and a
    /// stale temp file. Returns the removed paths, for the log.
    pub fn reconcile(&self, state: &State) -> Result<Vec<PathBuf>> {
        let mut removed = Vec::new();
        let _ = fs::remove_file(self.root.join(STATE_TMP));
        for (dir, known) in [
            ("volumes", state.volumes.keys().collect::<Vec<_>>()),
            ("snapshots", state.snapshots.keys().collect::<Vec<_>>()),
        ] {
            let dir = self.root.join(dir);
            let entries = fs::read_dir(&dir)
                .map_err(EngineError::io(format!("listing {}", dir.display())))?;
            for entry in entries {
                let entry = entry.map_err(EngineError::io(format!("listing {}", dir.display())))?;
                let name = entry.file_name().to_string_lossy().into_owned();
                if !known.iter().any(|k| **k == name) {
                    remove_any(&entry.path())?;
                    removed.push(entry.path());
                }
            }
        }
        Ok(removed)
    }
}

/// Removes a file or a directory tree; a missing path is fine (deletes are idempotent).
pub fn remove_any(path: &Path) -> Result<()> {
    let res = match fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    };
    res.map_err(EngineError::io(format!("removing {}", path.display())))
}

/// Copies a volume's or snapshot's backing data (a directory tree or a sparse file).
pub fn copy_any(from: &Path, to: &Path) -> Result<()> {
    let ctx = || format!("copying {} to {}", from.display(), to.display());
    let meta = fs::symlink_metadata(from).map_err(EngineError::io(ctx()))?;
    if meta.is_dir() {
        fs::create_dir(to).map_err(EngineError::io(ctx()))?;
        for entry in fs::read_dir(from).map_err(EngineError::io(ctx()))? {
            let entry = entry.map_err(EngineError::io(ctx()))?;
            copy_any(&entry.path(), &to.join(entry.file_name()))?;
        }
        Ok(())
    } else if meta.file_type().is_symlink() {
        let target = fs::read_link(from).map_err(EngineError::io(ctx()))?;
        std::os::unix::fs::symlink(target, to).map_err(EngineError::io(ctx()))
    } else {
        copy_sparse(from, to).map_err(EngineError::io(ctx()))
    }
}

/// Copies a file keeping its holes: only the data extents (SEEK_DATA/SEEK_HOLE) are read and
/// written, so snapshotting a mostly empty 100 GiB block volume costs what it holds.
fn copy_sparse(from: &Path, to: &Path) -> std::io::Result<()> {
    use rustix::fs::{seek, SeekFrom};
    use std::os::unix::fs::FileExt;
    let src = fs::File::open(from)?;
    let len = src.metadata()?.len();
    let dst = fs::File::create(to)?;
    dst.set_len(len)?;
    let mut buf = vec![0u8; 1 << 20];
    let mut pos = 0;
    while pos < len {
        let start = match seek(&src, SeekFrom::Data(pos)) {
            Ok(n) => n,
            Err(rustix::io::Errno::NXIO) => break, // only a hole remains
            Err(e) => return Err(e.into()),
        };
        let end = seek(&src, SeekFrom::Hole(start))?.min(len);
        let mut off = start;
        while off < end {
            let want = ((end - off) as usize).min(buf.len());
            let n = src.read_at(&mut buf[..want], off)?;
            if n == 0 {
                break;
            }
            dst.write_all_at(&buf[..n], off)?;
            off += n as u64;
        }
        pos = end;
    }
    dst.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::model::{Kind, Snapshot};

    #[test]
    fn commit_then_load_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.load().unwrap(), State::default());
        let mut state = State::default();
        let id = state.fresh_id("snap");
        state.snapshots.insert(
            id.clone(),
            Snapshot {
                id: id.clone(),
                name: "s".into(),
                source_volume_id: "v".into(),
                kind: Kind::Mount,
                size: 7,
                created_at_ns: 1,
                parameters: Default::default(),
            },
        );
        store.commit(&state).unwrap();
        assert_eq!(Store::open(dir.path()).unwrap().load().unwrap(), state);
        assert!(!dir.path().join(STATE_TMP).exists());
    }

    #[test]
    fn reconcile_removes_only_orphans() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut state = State::default();
        let kept = state.fresh_id("snap");
        state.snapshots.insert(
            kept.clone(),
            Snapshot {
                id: kept.clone(),
                name: "s".into(),
                source_volume_id: "v".into(),
                kind: Kind::Block,
                size: 1,
                created_at_ns: 1,
                parameters: Default::default(),
            },
        );
        fs::write(store.snapshot_path(&kept), b"x").unwrap();
        fs::create_dir(store.volume_path("vol-orphan")).unwrap();
        fs::write(store.volume_path("vol-orphan").join("f"), b"x").unwrap();
        fs::write(dir.path().join(STATE_TMP), b"{torn").unwrap();
        let removed = store.reconcile(&state).unwrap();
        assert_eq!(removed, vec![store.volume_path("vol-orphan")]);
        assert!(store.snapshot_path(&kept).exists());
        assert!(!dir.path().join(STATE_TMP).exists());
    }

    #[test]
    fn sparse_copy_keeps_data_and_holes() {
        use std::os::unix::fs::{FileExt, MetadataExt};
        let dir = tempfile::tempdir().unwrap();
        let (src, dst) = (dir.path().join("src"), dir.path().join("dst"));
        let f = fs::File::create(&src).unwrap();
        f.set_len(256 << 20).unwrap();
        f.write_all_at(b"head", 0).unwrap();
        f.write_all_at(b"tail", (256 << 20) - 4).unwrap();
        drop(f);
        copy_any(&src, &dst).unwrap();
        assert_eq!(fs::read(&src).unwrap(), fs::read(&dst).unwrap());
        let blocks = fs::metadata(&dst).unwrap().blocks() * 512;
        assert!(
            blocks < 16 << 20,
            "the copy stays sparse: {blocks} bytes allocated"
        );
    }

    #[test]
    fn corrupt_state_is_an_error_not_an_empty_state() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(STATE), b"{not json").unwrap();
        assert!(Store::open(dir.path()).unwrap().load().is_err());
    }
}
