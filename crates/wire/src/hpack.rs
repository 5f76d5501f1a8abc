//! HPACK (RFC 7541) as the splice needs it: the header table, integers, string literals and
//! the Huffman code. `headers` walks blocks with these; tests and the fuzz targets encode with
//! them.
//!
//! Why not a crate: the splice is a proxy in the middle of one HPACK context per direction,
//! and needs from a decoder what no maintained crate on crates.io offers together —
//! - the representation of each field (never-indexed must stay never-indexed when a block is
//!   re-encoded, RFC 7541 §7.1.3): `loona-hpack` 0.4 (the maintained fork of `hpack`, which
//!   has had no release since 2015) hands a callback name and value only;
//! - RFC 7541 §4.2 enforced: at most two size updates, only at the start of a block;
//!   `loona-hpack` accepts them anywhere in a block;
//! - table-driven Huffman decoding: `loona-hpack` walks each bit through hash maps;
//! - the table itself, to begin the gateway's own blocks with the size update a peer's decoder
//!   expects; `h2` (which does all of this) keeps its HPACK module private.
//!
//! `httlib-hpack`, used before, has had no release since 2021. This module is small, and its
//! tests check it against `loona-hpack`'s decoder and encoder as an independent reference.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::OnceLock;

#[derive(Clone, Copy, Debug, thiserror::Error, PartialEq, Eq)]
#[error("cannot decode a header block: {0}")]
pub struct CompressionError(pub &'static str);

/// The static table (RFC 7541 Appendix A); index 1 is the first entry.
pub const STATIC: [(&[u8], &[u8]); 61] = [
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
];

/// Each symbol's Huffman code length (RFC 7541 Appendix B; symbol 256 is EOS). The code is
/// canonical — codes of one length are consecutive, in symbol order — so the lengths alone
/// define it (checked against the RFC's codes in the tests).
const HUFFMAN_LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28,
    28, 28, 28, 28, 28, 28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5,
    5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, 15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6,
    6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22, 22, 23, 22,
    23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22,
    21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20,
    22, 22, 22, 23, 22, 22, 23, 26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19,
    21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22,
    22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, 30,
];

/// The static table's entry at `index` (1-based), if it is one: `'static`, so a decoded field
/// may borrow its name from it.
pub fn static_entry(index: usize) -> Option<(&'static [u8], &'static [u8])> {
    index.checked_sub(1).and_then(|i| STATIC.get(i)).copied()
}

/// A dynamic table entry: name and value.
type Entry = (Box<[u8]>, Box<[u8]>);

/// The header table: the static entries, then the dynamic ones, newest first (RFC 7541 §2.3).
/// Its sizes, and so its evictions, are kept by a [`Sizes`].
pub struct Table {
    dynamic: VecDeque<Entry>,
    sizes: Sizes,
}

impl Table {
    pub fn new(max: usize) -> Table {
        Table {
            dynamic: VecDeque::new(),
            sizes: Sizes::new(max),
        }
    }

    /// The entry at `index` (1-based, static entries first).
    pub fn get(&self, index: usize) -> Option<(&[u8], &[u8])> {
        match index {
            0..=61 => static_entry(index),
            _ => self.dynamic.get(index - 62).map(|(n, v)| (&n[..], &v[..])),
        }
    }

    /// Adds an entry, evicting the oldest ones it needs room from (RFC 7541 §4.4).
    pub fn insert(&mut self, name: &[u8], value: &[u8]) {
        let added = self.sizes.insert(entry_size(name, value));
        self.dynamic.truncate(self.sizes.entries() - added as usize);
        if added {
            self.dynamic.push_front((name.into(), value.into()));
        }
    }

    /// A new maximum size, evicting what no longer fits (RFC 7541 §4.3).
    pub fn set_max(&mut self, max: usize) {
        self.sizes.set_max(max);
        self.dynamic.truncate(self.sizes.entries());
    }

    pub fn max(&self) -> usize {
        self.sizes.max
    }
}

/// Only the sizes of a table's dynamic entries, newest first, and its maximum size: what
/// decides evictions. A [`Table`] keeps one beside its entries; the splice keeps one alone for
/// a peer that gets the same insertions as a table it decodes with, some of them a few octets
/// longer or shorter (see `headers::Follower`), to tell how many entries that peer still has.
pub struct Sizes {
    dynamic: VecDeque<usize>,
    size: usize,
    max: usize,
}

impl Sizes {
    pub fn new(max: usize) -> Sizes {
        Sizes {
            dynamic: VecDeque::new(),
            size: 0,
            max,
        }
    }

    /// How many dynamic entries the table has.
    pub fn entries(&self) -> usize {
        self.dynamic.len()
    }

    /// Adds an entry of `size` octets, evicting the oldest ones it needs room from; one larger
    /// than the table empties it and is not added (RFC 7541 §4.4). Whether it was added.
    pub fn insert(&mut self, size: usize) -> bool {
        if size > self.max {
            self.dynamic.clear();
            self.size = 0;
            return false;
        }
        while self.size + size > self.max {
            self.evict();
        }
        self.dynamic.push_front(size);
        self.size += size;
        true
    }

    /// A new maximum size, evicting what no longer fits (RFC 7541 §4.3).
    pub fn set_max(&mut self, max: usize) {
        self.max = max;
        while self.size > self.max {
            self.evict();
        }
    }

    fn evict(&mut self) {
        if let Some(size) = self.dynamic.pop_back() {
            self.size -= size;
        }
    }
}

fn entry_size(name: &[u8], value: &[u8]) -> usize {
    name.len() + value.len() + 32
}

/// An integer with an `n`-bit prefix (RFC 7541 §5.1); values past 2^28 are refused.
pub fn integer(block: &mut &[u8], n: u8) -> Result<usize, CompressionError> {
    let bad = CompressionError("truncated or oversized integer");
    let (&first, mut rest) = block.split_first().ok_or(bad)?;
    let max = (1usize << n) - 1;
    let mut value = first as usize & max;
    if value == max {
        let mut shift = 0;
        loop {
            let (&b, tail) = rest.split_first().ok_or(bad)?;
            rest = tail;
            if shift > 21 {
                return Err(bad);
            }
            value += ((b & 0x7f) as usize) << shift;
            shift += 7;
            if b & 0x80 == 0 {
                break;
            }
        }
    }
    *block = rest;
    Ok(value)
}

/// Appends an integer with an `n`-bit prefix; `flags` are the first octet's bits above it.
#[inline]
pub fn put_integer(out: &mut Vec<u8>, flags: u8, n: u8, mut value: usize) {
    let max = (1usize << n) - 1;
    if value < max {
        return out.push(flags | value as u8);
    }
    out.push(flags | max as u8);
    value -= max;
    while value >= 0x80 {
        out.push(0x80 | (value & 0x7f) as u8);
        value >>= 7;
    }
    out.push(value as u8);
}

/// A string literal (RFC 7541 §5.2), Huffman-coded or not.
pub fn string<'b>(block: &mut &'b [u8]) -> Result<Cow<'b, [u8]>, CompressionError> {
    let huffman = block.first().is_some_and(|b| b & 0x80 != 0);
    let len = integer(block, 7)?;
    if block.len() < len {
        return Err(CompressionError("string longer than the block"));
    }
    let (bytes, rest) = block.split_at(len);
    *block = rest;
    if !huffman {
        return Ok(Cow::Borrowed(bytes));
    }
    let mut out = Vec::with_capacity(len * 8 / 5 + 1);
    huffman_decode(bytes, &mut out)?;
    Ok(Cow::Owned(out))
}

/// Appends a string literal, Huffman-coded if asked.
#[inline]
pub fn put_string(out: &mut Vec<u8>, bytes: &[u8], huffman: bool) {
    if huffman {
        let mut coded = Vec::with_capacity(bytes.len());
        huffman_encode(bytes, &mut coded);
        put_integer(out, 0x80, 7, coded.len());
        out.extend_from_slice(&coded);
    } else {
        put_integer(out, 0, 7, bytes.len());
        out.extend_from_slice(bytes);
    }
}

/// A dynamic table size update (RFC 7541 §6.3).
pub fn put_size_update(out: &mut Vec<u8>, size: usize) {
    put_integer(out, 0x20, 5, size);
}

/// A literal field that no decoder adds to its table: without indexing, or never indexed
/// (RFC 7541 §6.2.2, §6.2.3). The name is a literal too.
pub fn put_literal(out: &mut Vec<u8>, name: &[u8], value: &[u8], never: bool) {
    out.push(if never { 0x10 } else { 0 });
    put_string(out, name, false);
    put_string(out, value, false);
}

/// The canonical code's decoding tables, built from the lengths once.
struct Huffman {
    codes: [u32; 257],
    /// Per length: the first code, how many codes, and where they start in `symbols`.
    first: [u32; 31],
    count: [u32; 31],
    offset: [u32; 31],
    /// Symbols ordered by code length, then symbol.
    symbols: [u16; 257],
}

fn huffman() -> &'static Huffman {
    static CODE: OnceLock<Huffman> = OnceLock::new();
    CODE.get_or_init(|| {
        let mut h = Huffman {
            codes: [0; 257],
            first: [0; 31],
            count: [0; 31],
            offset: [0; 31],
            symbols: [0; 257],
        };
        for &len in &HUFFMAN_LENGTHS {
            h.count[len as usize] += 1;
        }
        for len in 1..31 {
            h.first[len] = (h.first[len - 1] + h.count[len - 1]) << 1;
            h.offset[len] = h.offset[len - 1] + h.count[len - 1];
        }
        let mut next = h.first;
        let mut at = h.offset;
        for (symbol, &len) in HUFFMAN_LENGTHS.iter().enumerate() {
            let len = len as usize;
            h.codes[symbol] = next[len];
            next[len] += 1;
            h.symbols[at[len] as usize] = symbol as u16;
            at[len] += 1;
        }
        h
    })
}

/// Decodes a Huffman-coded string (RFC 7541 §5.2): EOS inside it, or padding that is longer
/// than 7 bits or not EOS's leading ones, is an error.
pub fn huffman_decode(bytes: &[u8], out: &mut Vec<u8>) -> Result<(), CompressionError> {
    let h = huffman();
    let (mut code, mut len) = (0u32, 0usize);
    for &byte in bytes {
        for shift in (0..8).rev() {
            code = code << 1 | (byte >> shift & 1) as u32;
            len += 1;
            if len > 30 {
                return Err(CompressionError("bad Huffman code"));
            }
            let index = code.wrapping_sub(h.first[len]);
            if code >= h.first[len] && index < h.count[len] {
                let symbol = h.symbols[(h.offset[len] + index) as usize];
                if symbol == 256 {
                    return Err(CompressionError("EOS inside a Huffman string"));
                }
                out.push(symbol as u8);
                (code, len) = (0, 0);
            }
        }
    }
    if len > 7 || code != (1 << len) - 1 {
        return Err(CompressionError("bad Huffman padding"));
    }
    Ok(())
}

/// Huffman-codes `bytes`, padded with EOS's leading ones.
pub fn huffman_encode(bytes: &[u8], out: &mut Vec<u8>) {
    let h = huffman();
    let (mut acc, mut bits) = (0u64, 0u32);
    for &b in bytes {
        let len = HUFFMAN_LENGTHS[b as usize] as u32;
        acc = acc << len | h.codes[b as usize] as u64;
        bits += len;
        while bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    if bits > 0 {
        out.push((acc << (8 - bits)) as u8 | (0xff >> bits));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_static_entries_are_indexes_1_to_61() {
        assert_eq!(static_entry(0), None);
        assert_eq!(static_entry(1), Some((&b":authority"[..], &b""[..])));
        assert_eq!(static_entry(4), Some((&b":path"[..], &b"/"[..])));
        assert_eq!(static_entry(61), Some((&b"www-authenticate"[..], &b""[..])));
        assert_eq!(static_entry(62), None);
        let table = Table::new(4096);
        assert_eq!(table.get(4), static_entry(4));
        assert_eq!(table.get(0), None);
    }

    /// The codes the lengths define are the RFC's: checked through `loona-hpack`'s decoder,
    /// which holds the RFC's table of codes, on every byte value.
    #[test]
    fn huffman_agrees_with_an_independent_decoder() {
        let all: Vec<u8> = (0..=255u8).collect();
        let mut coded = Vec::new();
        huffman_encode(&all, &mut coded);
        let theirs = loona_hpack::huffman::HuffmanDecoder::new()
            .decode(&coded)
            .unwrap();
        assert_eq!(theirs, all);
        let mut ours = Vec::new();
        huffman_decode(&coded, &mut ours).unwrap();
        assert_eq!(ours, all);
        // RFC 7541 C.4.1: "www.example.com"
        let mut c = Vec::new();
        huffman_encode(b"www.example.com", &mut c);
        assert_eq!(
            c,
            [0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff]
        );
    }

    #[test]
    fn bad_huffman_is_refused() {
        let mut out = Vec::new();
        assert!(
            huffman_decode(&[0xff, 0xff, 0xff, 0xff], &mut out).is_err(),
            "EOS"
        );
        assert!(
            huffman_decode(&[0x00], &mut out).is_err(),
            "padding of zeros"
        );
        assert!(
            huffman_decode(&[0xf1, 0xff], &mut out).is_err(),
            "8 bits of padding"
        );
    }

    #[test]
    fn integers_round_trip() {
        for n in [4u8, 5, 6, 7] {
            for v in [
                0usize,
                1,
                14,
                15,
                30,
                31,
                62,
                63,
                126,
                127,
                128,
                1337,
                1 << 20,
            ] {
                let mut out = Vec::new();
                put_integer(&mut out, 0, n, v);
                let mut rest = &out[..];
                assert_eq!(integer(&mut rest, n).unwrap(), v);
                assert!(rest.is_empty());
            }
        }
        let mut huge: &[u8] = &[0x1f, 0xff, 0xff, 0xff, 0xff, 0x7f];
        assert!(integer(&mut huge, 5).is_err(), "past 2^28");
    }

    #[test]
    fn the_table_evicts_oldest_first() {
        let mut t = Table::new(100);
        t.insert(b"a", b"1"); // 34
        t.insert(b"b", b"2"); // 68
        t.insert(b"c", b"3"); // 102 > 100: "a" goes
        assert_eq!(t.get(62), Some((&b"c"[..], &b"3"[..])));
        assert_eq!(t.get(63), Some((&b"b"[..], &b"2"[..])));
        assert_eq!(t.get(64), None);
        t.set_max(34);
        assert_eq!(t.get(62), Some((&b"c"[..], &b"3"[..])));
        assert_eq!(t.get(63), None);
        t.insert(&[b'x'; 100], b"");
        assert_eq!(t.get(62), None, "an entry larger than the table empties it");
        assert_eq!(t.get(0), None);
        assert_eq!(t.get(2), Some((&b":method"[..], &b"GET"[..])));
    }
}
