//! Per-object serialization. A second operation on a volume (or a name) that is still being
//! worked on is refused with ABORTED instead of queued, as gocsi's serialvolume middleware
//! does: the CO retries with backoff, and a stuck operation never piles up waiters.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use super::error::{EngineError, Result};

#[derive(Clone, Default)]
pub struct Locks {
    held: Arc<Mutex<HashSet<String>>>,
}

/// Releases its keys when dropped.
pub struct Guard {
    held: Arc<Mutex<HashSet<String>>>,
    keys: Vec<String>,
}

impl Locks {
    /// Takes all `keys` or none; ABORTED if any is held.
    pub fn try_lock<I, S>(&self, keys: I) -> Result<Guard>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let keys: Vec<String> = keys.into_iter().map(Into::into).collect();
        let mut held = self.held.lock().expect("lock table poisoned");
        if let Some(busy) = keys.iter().find(|k| held.contains(*k)) {
            let display = busy.split_once(':').map_or(busy.as_str(), |(_, id)| id);
            return Err(EngineError::Aborted(display.to_string()));
        }
        let mut unique = Vec::new();
        for k in keys {
            if held.insert(k.clone()) {
                unique.push(k);
            }
        }
        Ok(Guard {
            held: Arc::clone(&self.held),
            keys: unique,
        })
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Ok(mut held) = self.held.lock() {
            for k in &self.keys {
                held.remove(k);
            }
        }
    }
}

/// Lock key for a volume id.
pub fn volume(id: &str) -> String {
    format!("volume:{id}")
}

/// Lock key for a volume or snapshot name being created.
pub fn name(name: &str) -> String {
    format!("name:{name}")
}

/// Lock key for a snapshot id.
pub fn snapshot(id: &str) -> String {
    format!("snapshot:{id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_holder_is_aborted_until_release() {
        let locks = Locks::default();
        let g = locks.try_lock([volume("a")]).unwrap();
        let err = locks.try_lock([volume("a")]).err().unwrap();
        assert!(matches!(err, EngineError::Aborted(ref id) if id == "a"));
        // Other keys are independent.
        let _other = locks.try_lock([volume("b")]).unwrap();
        drop(g);
        locks.try_lock([volume("a")]).unwrap();
    }

    #[test]
    fn all_or_nothing() {
        let locks = Locks::default();
        let _b = locks.try_lock([volume("b")]).unwrap();
        assert!(locks.try_lock([volume("a"), volume("b")]).is_err());
        // "a" must not have been left held by the failed attempt.
        locks.try_lock([volume("a")]).unwrap();
    }

    #[test]
    fn duplicate_keys_in_one_call_are_fine() {
        let locks = Locks::default();
        let g = locks.try_lock([volume("a"), volume("a")]).unwrap();
        drop(g);
        locks.try_lock([volume("a")]).unwrap();
    }
}
