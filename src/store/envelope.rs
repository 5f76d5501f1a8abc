//! Every value the gateway stores is sealed with a SHA-256 of its key and payload, so a value
//! damaged at rest (a flipped bit on disk, an edit in etcd, a value copied under another key)
//! is refused when read instead of being sent to the plugin. redb checks its own pages only
//! when asked (the start-up integrity check); etcd not at all.
//!
//! Layout: `MAGIC` (4 bytes), digest (32 bytes), payload.

use ring::digest::{digest, SHA256};

const MAGIC: &[u8; 4] = b"csg1";
const DIGEST: usize = 32;

fn checksum(key: &str, payload: &[u8]) -> Vec<u8> {
    // The key takes part, so a value is valid only under the key it was written for.
    let mut input = Vec::with_capacity(key.len() + 1 + payload.len());
    input.extend_from_slice(key.as_bytes());
    input.push(0);
    input.extend_from_slice(payload);
    digest(&SHA256, &input).as_ref().to_vec()
}

/// `payload` sealed for `key`.
pub fn seal(key: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(MAGIC.len() + DIGEST + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&checksum(key, payload));
    out.extend_from_slice(payload);
    out
}

/// What is wrong with a stored value.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Damage {
    #[error("no checksum (not written by this gateway version)")]
    Unsealed,
    #[error("checksum mismatch: the value was changed after it was written")]
    Mismatch,
}

/// The payload of a value stored under `key`, if its checksum holds.
pub fn open<'a>(key: &str, stored: &'a [u8]) -> Result<&'a [u8], Damage> {
    let Some(rest) = stored.strip_prefix(MAGIC.as_slice()) else {
        return Err(Damage::Unsealed);
    };
    if rest.len() < DIGEST {
        return Err(Damage::Mismatch);
    }
    let (sum, payload) = rest.split_at(DIGEST);
    if sum != checksum(key, payload).as_slice() {
        return Err(Damage::Mismatch);
    }
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_value_opens_only_intact_and_under_its_key() {
        let sealed = seal("handle/v", b"{\"path\":\"/data/v\"}");
        assert_eq!(
            open("handle/v", &sealed).unwrap(),
            b"{\"path\":\"/data/v\"}"
        );
        assert_eq!(open("handle/w", &sealed), Err(Damage::Mismatch));
        for i in 0..sealed.len() {
            let mut flipped = sealed.clone();
            flipped[i] ^= 0x04;
            assert!(
                open("handle/v", &flipped).is_err(),
                "flip at {i} went unnoticed"
            );
        }
        assert_eq!(open("handle/v", b"{}"), Err(Damage::Unsealed));
        assert_eq!(open("handle/v", b"csg1short"), Err(Damage::Mismatch));
    }
}
