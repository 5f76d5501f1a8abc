//! The embedded store: one redb database file (ACID, copy-on-write, fsync on commit), so a
//! write that returned survives a crash of the gateway at any later moment.
//!
//! Opening is strict, because an empty store silently loses every handle:
//! - a missing file is created under a temporary name and renamed into place once redb has
//!   written it, so a crash while creating never leaves a 0-byte `state.redb` behind;
//! - an existing file that is empty, truncated or fails redb's page checksums is refused with
//!   the file and the damage named (redb panics on some truncations and on some header
//!   damage, opening or repairing; that is caught);
//! - a file another gateway holds open (redb's `flock`) is refused as in use, naming that
//!   gateway's pid when `/proc/locks` shows it: the file is fine, and moving it away would
//!   lose every handle the other gateway holds;
//! - the directory is made 0700 and the file 0600: the store holds draft plugins' metadata.
//!
//! Every operation runs on tokio's blocking pool, so a slow disk stalls no runtime thread. A disk
//! error fails the operation that met it; the next one opens the file again, so the store works
//! again once the disk does, without a restart.

use std::fs;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use redb::{Database, TableDefinition};

use super::{KeyValue, KvFuture, StoreError};

const TABLE: TableDefinition<&str, &[u8]> = TableDefinition::new("state");

pub struct Embedded {
    file: Arc<File>,
    name: String,
}

/// The database file and, while it works, the database open on it.
struct File {
    path: PathBuf,
    /// `None` after a disk error: redb fails every later operation of that `Database`
    /// (`PreviousIo`), so the next operation opens the file again (redb repairs it to its last
    /// commit), and the store works again once the cause (a full disk, a size limit) is gone.
    db: Mutex<Option<Arc<Database>>>,
}

fn damaged(path: &Path, message: impl std::fmt::Display) -> StoreError {
    StoreError::Open {
        path: path.display().to_string(),
        message: format!("the file is damaged: {message}; the gateway will not start on it (restore it from a backup, or move it away to start with an empty store, losing every handle it held)"),
    }
}

impl Embedded {
    /// Opens the database at `path`, creating it (and its directory) if missing.
    pub fn open(path: &Path) -> Result<Embedded, StoreError> {
        let fail = |message: String| StoreError::Open {
            path: path.display().to_string(),
            message,
        };
        if let Some(dir) = path.parent() {
            private_dir(dir).map_err(|e| fail(format!("state directory: {e}")))?;
        }
        // redb asserts on some damage (truncations, header fields outside its checksums)
        // instead of returning an error, while opening or while repairing: caught, as damage.
        let db = without_panics(path, || prepare(path))?;
        Ok(Embedded {
            file: Arc::new(File {
                path: path.to_path_buf(),
                db: Mutex::new(Some(Arc::new(db))),
            }),
            name: format!("embedded database {}", path.display()),
        })
    }

    /// Runs `f` on the blocking pool, on the database as it is now; after a disk error, the
    /// database is dropped so the next operation opens it again.
    fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Database) -> Result<T, StoreError> + Send + 'static,
    ) -> KvFuture<'static, T> {
        let file = self.file.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let db = file.database()?;
                let out = f(&db);
                if let Err(StoreError::Io(_)) = out {
                    file.discard(&db);
                }
                out
            })
            .await
            .map_err(|e| StoreError::Io(format!("store task: {e}")))?
        })
    }
}

impl File {
    /// The open database, opened again if a disk error dropped it.
    fn database(&self) -> Result<Arc<Database>, StoreError> {
        let mut slot = self.db.lock().expect("embedded database");
        if let Some(db) = slot.as_ref() {
            return Ok(db.clone());
        }
        // Fails (as in use) while an operation begun before the error still holds the old
        // database; the next operation tries again.
        let db = without_panics(&self.path, || prepare(&self.path))
            .map_err(|e| StoreError::Io(format!("opening it again after a disk error: {e}")))?;
        tracing::info!(state = %self.path.display(), "state file opened again after a disk error");
        let db = Arc::new(db);
        *slot = Some(db.clone());
        Ok(db)
    }

    /// Drops `db` after a disk error, unless it was already replaced.
    fn discard(&self, db: &Arc<Database>) {
        let mut slot = self.db.lock().expect("embedded database");
        if slot
            .as_ref()
            .is_some_and(|current| Arc::ptr_eq(current, db))
        {
            *slot = None;
        }
    }
}

/// The database at `path` opened (or created), checked and repaired, with its table.
fn prepare(path: &Path) -> Result<Database, StoreError> {
    let fail = |message: String| StoreError::Open {
        path: path.display().to_string(),
        message,
    };
    let mut db = match fs::metadata(path) {
        Ok(m) if m.len() == 0 => {
            return Err(damaged(
                path,
                "it is empty (0 bytes), so every handle is gone",
            ))
        }
        Ok(_) => {
            check_layout(path)?;
            open_existing(path)?
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => create(path)?,
        Err(e) => return Err(fail(e.to_string())),
    };
    fs::set_permissions(path, fs::Permissions::from_mode(0o600))
        .map_err(|e| fail(format!("making it 0600: {e}")))?;
    match db.check_integrity() {
        Ok(true) => {}
        Ok(false) => {
            tracing::warn!(state = %path.display(), "redb found damage in the state file and repaired it to its last intact commit")
        }
        Err(e) => return Err(damaged(path, e)),
    }
    // Create the table up front so readers never race its creation.
    let tx = db.begin_write().map_err(|e| damaged(path, e))?;
    tx.open_table(TABLE).map_err(|e| damaged(path, e))?;
    tx.commit().map_err(|e| damaged(path, e))?;
    Ok(db)
}

/// The state directory, created 0700; an existing one is narrowed to 0700 unless it is a
/// shared sticky directory such as /tmp, which is not the gateway's to change.
fn private_dir(dir: &Path) -> std::io::Result<()> {
    if !dir.exists() {
        return fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir);
    }
    let mode = fs::metadata(dir)?.permissions().mode();
    if mode & 0o1000 == 0 && mode & 0o077 != 0 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// A new database, written under a temporary name and renamed into place.
fn create(path: &Path) -> Result<Database, StoreError> {
    let fail = |e: &dyn std::fmt::Display| StoreError::Open {
        path: path.display().to_string(),
        message: format!("creating it: {e}"),
    };
    let mut tmp = PathBuf::from(path);
    tmp.as_mut_os_string().push(".new");
    // A leftover of a crash during an earlier creation holds nothing.
    let _ = fs::remove_file(&tmp);
    drop(Database::create(&tmp).map_err(|e| fail(&e))?);
    fs::set_permissions(&tmp, fs::Permissions::from_mode(0o600)).map_err(|e| fail(&e))?;
    fs::rename(&tmp, path).map_err(|e| fail(&e))?;
    if let Some(dir) = path.parent() {
        fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| fail(&e))?;
    }
    Database::open(path).map_err(|e| fail(&e))
}

fn open_existing(path: &Path) -> Result<Database, StoreError> {
    match Database::open(path) {
        Ok(db) => Ok(db),
        Err(redb::DatabaseError::DatabaseAlreadyOpen) => Err(in_use(path)),
        Err(e) => Err(damaged(path, describe(&e))),
    }
}

/// `f`, with a panic inside redb caught (and kept off stderr) and reported as damage to the
/// file, so the gateway exits with the file named and what to do rather than with a panic.
fn without_panics<T>(
    path: &Path,
    f: impl FnOnce() -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    std::panic::set_hook(hook);
    out.unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(damaged(
            path,
            format!("it is truncated or its header is damaged: redb: {what}"),
        ))
    })
}

/// redb's file header begins with its magic number and the region layout, which no checksum
/// covers and which redb sizes its allocators by when it repairs the file: a damaged field
/// made it allocate for 25 s and then panic. Values redb never writes are refused first.
fn check_layout(path: &Path) -> Result<(), StoreError> {
    const MAGIC: &[u8] = b"redb\x1a\x0a\xa9\x0d\x0a";
    /// redb's largest region: 2^20 pages (its `MAX_MAX_PAGE_ORDER`).
    const MAX_REGION_PAGES: u32 = 1 << 20;
    let mut header = [0u8; 24];
    let read = fs::File::open(path).and_then(|mut f| {
        use std::io::Read as _;
        f.read_exact(&mut header)
    });
    // Too short (truncated), or not redb's: redb's own open says which.
    if read.is_err() || !header.starts_with(MAGIC) {
        return Ok(());
    }
    let field = |at: usize| u32::from_le_bytes(header[at..at + 4].try_into().expect("4 bytes"));
    let (page_size, region_header_pages, region_data_pages) = (field(12), field(16), field(20));
    let bad = if !page_size.is_power_of_two() || !(512..=65536).contains(&page_size) {
        Some(format!("page size {page_size}"))
    } else if region_data_pages == 0 || region_data_pages > MAX_REGION_PAGES {
        Some(format!("{region_data_pages} pages per region"))
    } else if region_header_pages > region_data_pages {
        Some(format!("{region_header_pages} header pages per region"))
    } else {
        None
    };
    match bad {
        Some(what) => Err(damaged(path, format!("its header is damaged ({what})"))),
        None => Ok(()),
    }
}

/// The file is locked by another process: not damage, and never to be moved away.
fn in_use(path: &Path) -> StoreError {
    let holder = lock_holder(path).map_or(String::new(), |pid| format!(" (pid {pid})"));
    StoreError::Open {
        path: path.display().to_string(),
        message: format!(
            "the file is in use by another gateway{holder}; stop that gateway, or give this \
             one a state directory of its own (state.dir, --state-dir)"
        ),
    }
}

/// The pid holding a lock on `path`, from `/proc/locks` (Linux; `None` where it cannot tell).
/// Its lines read `1: FLOCK  ADVISORY  WRITE 4242 08:01:1234 0 EOF`: the pid, then the
/// device (major:minor, hex) and inode of the locked file. Only the inode is compared: under
/// overlayfs (a container's) `stat` reports another device than the lock's.
fn lock_holder(path: &Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt as _;
    let inode = fs::metadata(path).ok()?.ino().to_string();
    let locks = fs::read_to_string("/proc/locks").ok()?;
    locks.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (kind, pid, file) = (fields.get(1)?, fields.get(4)?, fields.get(5)?);
        (*kind == "FLOCK" && file.rsplit(':').next() == Some(inode.as_str()))
            .then(|| pid.parse().ok())
            .flatten()
    })
}

fn describe(e: &redb::DatabaseError) -> String {
    match e {
        redb::DatabaseError::Storage(redb::StorageError::Io(io))
            if io.kind() == std::io::ErrorKind::UnexpectedEof =>
        {
            "it ends inside its header (truncated)".into()
        }
        e => e.to_string(),
    }
}

fn io(e: impl std::fmt::Display) -> StoreError {
    StoreError::Io(e.to_string())
}

impl KeyValue for Embedded {
    fn name(&self) -> &str {
        &self.name
    }

    fn put<'a>(&'a self, key: &'a str, value: Vec<u8>) -> KvFuture<'a, ()> {
        let key = key.to_string();
        self.blocking(move |db| {
            let tx = db.begin_write().map_err(io)?;
            tx.open_table(TABLE)
                .map_err(io)?
                .insert(key.as_str(), value.as_slice())
                .map_err(io)?;
            tx.commit().map_err(io)
        })
    }

    fn get<'a>(&'a self, key: &'a str) -> KvFuture<'a, Option<Vec<u8>>> {
        let key = key.to_string();
        self.blocking(move |db| {
            let tx = db.begin_read().map_err(io)?;
            let table = tx.open_table(TABLE).map_err(io)?;
            let value = table.get(key.as_str()).map_err(io)?;
            Ok(value.map(|v| v.value().to_vec()))
        })
    }

    fn delete<'a>(&'a self, key: &'a str) -> KvFuture<'a, ()> {
        let key = key.to_string();
        self.blocking(move |db| {
            let tx = db.begin_write().map_err(io)?;
            tx.open_table(TABLE)
                .map_err(io)?
                .remove(key.as_str())
                .map_err(io)?;
            tx.commit().map_err(io)
        })
    }

    fn scan<'a>(&'a self, prefix: &'a str) -> KvFuture<'a, Vec<(String, Vec<u8>)>> {
        let prefix = prefix.to_string();
        self.blocking(move |db| {
            let tx = db.begin_read().map_err(io)?;
            let table = tx.open_table(TABLE).map_err(io)?;
            let mut out = Vec::new();
            for entry in table.range(prefix.as_str()..).map_err(io)? {
                let (k, v) = entry.map_err(io)?;
                if !k.value().starts_with(prefix.as_str()) {
                    break;
                }
                out.push((k.value().to_string(), v.value().to_vec()));
            }
            Ok(out)
        })
    }
}
