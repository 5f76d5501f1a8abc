//! The embedded store: one redb database file (ACID, copy-on-write, fsync on commit), so a
//! write that returned survives a crash of the gateway at any later moment.

use std::path::Path;

use redb::{Database, TableDefinition};

use super::{KeyValue, StoreError};

const TABLE: TableDefinition<&str, &[u8]> = TableDefinition::new("state");

pub struct Embedded {
    db: Database,
}

impl Embedded {
    /// Opens (or creates) the database at `path`; its directory is created if missing.
    pub fn open(path: &Path) -> Result<Embedded, StoreError> {
        let fail = |message: String| StoreError::Open {
            path: path.display().to_string(),
            message,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| fail(e.to_string()))?;
        }
        let db = Database::create(path).map_err(|e| fail(e.to_string()))?;
        // Create the table up front so readers never race its creation.
        let tx = db.begin_write().map_err(|e| fail(e.to_string()))?;
        tx.open_table(TABLE).map_err(|e| fail(e.to_string()))?;
        tx.commit().map_err(|e| fail(e.to_string()))?;
        Ok(Embedded { db })
    }
}

fn io(e: impl std::fmt::Display) -> StoreError {
    StoreError::Io(e.to_string())
}

impl KeyValue for Embedded {
    fn put(&self, key: &str, value: &[u8]) -> Result<(), StoreError> {
        let tx = self.db.begin_write().map_err(io)?;
        tx.open_table(TABLE)
            .map_err(io)?
            .insert(key, value)
            .map_err(io)?;
        tx.commit().map_err(io)
    }

    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let tx = self.db.begin_read().map_err(io)?;
        let table = tx.open_table(TABLE).map_err(io)?;
        Ok(table.get(key).map_err(io)?.map(|v| v.value().to_vec()))
    }

    fn delete(&self, key: &str) -> Result<(), StoreError> {
        let tx = self.db.begin_write().map_err(io)?;
        tx.open_table(TABLE).map_err(io)?.remove(key).map_err(io)?;
        tx.commit().map_err(io)
    }

    fn scan(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let tx = self.db.begin_read().map_err(io)?;
        let table = tx.open_table(TABLE).map_err(io)?;
        let mut out = Vec::new();
        for entry in table.range(prefix..).map_err(io)? {
            let (k, v) = entry.map_err(io)?;
            if !k.value().starts_with(prefix) {
                break;
            }
            out.push((k.value().to_string(), v.value().to_vec()));
        }
        Ok(out)
    }
}
