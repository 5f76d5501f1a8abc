//! A raw HTTP/2 peer for conformance tests: frames written byte by byte (the `h2` crate keeps
//! its frame types private) and read back one by one, with an independent HPACK decoder
//! (`loona-hpack`) for the replies' header blocks.

use std::path::Path;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

pub const DATA: u8 = 0;
pub const HEADERS: u8 = 1;
pub const PRIORITY: u8 = 2;
pub const RST_STREAM: u8 = 3;
pub const SETTINGS: u8 = 4;
pub const PING: u8 = 6;
pub const GOAWAY: u8 = 7;
pub const WINDOW_UPDATE: u8 = 8;
pub const CONTINUATION: u8 = 9;

pub const END_STREAM: u8 = 0x1;
pub const ACK: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;

pub const NO_ERROR: u32 = 0x0;
pub const PROTOCOL_ERROR: u32 = 0x1;
pub const FLOW_CONTROL_ERROR: u32 = 0x3;
pub const FRAME_SIZE_ERROR: u32 = 0x6;
pub const STREAM_CLOSED: u32 = 0x5;
pub const REFUSED_STREAM: u32 = 0x7;
pub const CANCEL: u32 = 0x8;
pub const COMPRESSION_ERROR: u32 = 0x9;
pub const ENHANCE_YOUR_CALM: u32 = 0xb;

const WAIT: Duration = Duration::from_secs(10);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

impl Frame {
    /// A GOAWAY's or RST_STREAM's error code.
    pub fn code(&self) -> u32 {
        let at = if self.kind == GOAWAY { 4 } else { 0 };
        u32::from_be_bytes(self.payload[at..at + 4].try_into().unwrap())
    }

    /// A GOAWAY's last stream id.
    pub fn last_stream(&self) -> u32 {
        u32::from_be_bytes(self.payload[..4].try_into().unwrap()) & 0x7fff_ffff
    }
}

pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(9 + payload.len());
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

pub fn settings(values: &[(u16, u32)]) -> Vec<u8> {
    let mut p = Vec::new();
    for (id, v) in values {
        p.extend_from_slice(&id.to_be_bytes());
        p.extend_from_slice(&v.to_be_bytes());
    }
    frame(SETTINGS, 0, 0, &p)
}

/// A request's header block for `path`, every field a literal without indexing (the
/// gateway's decoder and nothing else decides what it means), after `prefix` (size updates).
pub fn request_block(prefix: &[u8], path: &str, extra: &[(&str, &str)]) -> Vec<u8> {
    let mut block = prefix.to_vec();
    block.extend_from_slice(&[0x83, 0x86]); // :method POST, :scheme http (static 3, 6)
    for (n, v) in [
        (":path", path),
        (":authority", "localhost"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ]
    .iter()
    .chain(extra.iter())
    {
        literal(&mut block, n.as_bytes(), v.as_bytes());
    }
    block
}

/// A literal field without indexing, name and value raw (RFC 7541 §6.2.2).
pub fn literal(block: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    block.push(0);
    string(block, name);
    string(block, value);
}

fn string(block: &mut Vec<u8>, s: &[u8]) {
    integer(block, 0, 7, s.len());
    block.extend_from_slice(s);
}

pub fn integer(out: &mut Vec<u8>, flags: u8, n: u8, mut v: usize) {
    let max = (1usize << n) - 1;
    if v < max {
        return out.push(flags | v as u8);
    }
    out.push(flags | max as u8);
    v -= max;
    while v >= 0x80 {
        out.push(0x80 | (v & 0x7f) as u8);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A unary gRPC message (5-byte prefix).
pub fn message(bytes: &[u8]) -> Vec<u8> {
    let mut m = vec![0];
    m.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    m.extend_from_slice(bytes);
    m
}

pub struct Peer {
    io: UnixStream,
    buf: Vec<u8>,
    decoder: loona_hpack::Decoder<'static>,
    /// Every frame read so far.
    pub seen: Vec<Frame>,
    /// The server's first SETTINGS.
    pub server_settings: Vec<(u16, u32)>,
    /// The server closed the connection (a read returned its end).
    pub closed: bool,
    /// Every reply block checked against the rule of 2018's HPACK decoder (see [`Hpack2018`]).
    pub hpack_2018: Hpack2018,
}

/// The dynamic table as golang.org/x/net/http2/hpack's decoder before 2018-12 kept it (the one
/// kubelet, csi-sanity and the sidecars of CSI v0.x vendor): it refused a dynamic table size
/// update whenever its table held an entry (`dynTab.size > 0`), wherever the update stood, and
/// the client closed its connection ("transport is closing"). RFC 7541 allows such an update at
/// the start of any block; a server that serves those clients sends one only when the client's
/// own SETTINGS_HEADER_TABLE_SIZE requires it. This model counts the table's bytes from the
/// representations of each block and notes every size update that decoder would refuse.
#[derive(Debug)]
pub struct Hpack2018 {
    /// Entry sizes, newest first.
    entries: std::collections::VecDeque<usize>,
    size: usize,
    max: usize,
    /// Header blocks checked.
    pub blocks: usize,
    /// One line for each size update the old decoder would have refused.
    pub refused: Vec<String>,
}

impl Default for Hpack2018 {
    fn default() -> Self {
        Hpack2018 {
            entries: Default::default(),
            size: 0,
            max: 4096,
            blocks: 0,
            refused: Vec::new(),
        }
    }
}

impl Hpack2018 {
    /// Walks `block`, whose fields a full decoder gave as `fields` (for the sizes of the
    /// entries it adds: a Huffman-coded string's length is known only once decoded).
    pub fn check(&mut self, block: &[u8], fields: &[(Vec<u8>, Vec<u8>)]) {
        let mut at = 0;
        let mut field = 0;
        while at < block.len() {
            let octet = block[at];
            if octet & 0x80 != 0 {
                read_integer(block, &mut at, 7);
                field += 1;
            } else if octet & 0x40 != 0 {
                let index = read_integer(block, &mut at, 6);
                skip_literal(block, &mut at, index);
                let (n, v) = &fields[field];
                self.insert(n.len() + v.len() + 32);
                field += 1;
            } else if octet & 0x20 != 0 {
                let size = read_integer(block, &mut at, 5);
                if self.size > 0 {
                    self.refused.push(format!(
                        "block {}: size update to {size} with {} entries ({} bytes) in the table: {:02x?}",
                        self.blocks,
                        self.entries.len(),
                        self.size,
                        &block[..block.len().min(16)]
                    ));
                }
                self.max = size;
                self.evict();
            } else {
                let index = read_integer(block, &mut at, 4);
                skip_literal(block, &mut at, index);
                field += 1;
            }
        }
        self.blocks += 1;
    }

    fn insert(&mut self, size: usize) {
        self.entries.push_front(size);
        self.size += size;
        self.evict();
    }

    fn evict(&mut self) {
        while self.size > self.max {
            self.size -= self.entries.pop_back().expect("entries hold the size");
        }
    }
}

fn read_integer(block: &[u8], at: &mut usize, prefix: u8) -> usize {
    let max = (1usize << prefix) - 1;
    let mut v = (block[*at] as usize) & max;
    *at += 1;
    if v < max {
        return v;
    }
    let mut shift = 0;
    loop {
        let b = block[*at];
        *at += 1;
        v += ((b & 0x7f) as usize) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            return v;
        }
    }
}

/// Skips a literal's name (when not indexed) and value.
fn skip_literal(block: &[u8], at: &mut usize, index: usize) {
    let strings = if index == 0 { 2 } else { 1 };
    for _ in 0..strings {
        let len = read_integer(block, at, 7);
        *at += len;
    }
}

/// What a call got: the reply's header fields (headers then trailers), its DATA, and a
/// RST_STREAM's code if the stream was reset instead.
#[derive(Debug, Default)]
pub struct Reply {
    pub fields: Vec<(String, String)>,
    pub data: Vec<u8>,
    pub reset: Option<u32>,
}

impl Reply {
    pub fn get(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

impl Peer {
    /// Connects and sends the preface with `values` as SETTINGS, nothing more.
    pub async fn open(socket: &Path, values: &[(u16, u32)]) -> Peer {
        Peer::open_after(socket, values, std::time::Duration::ZERO).await
    }

    /// [`Peer::open`], with the preface sent `delay` after connecting: a client slower than
    /// the server's first bytes.
    pub async fn open_after(
        socket: &Path,
        values: &[(u16, u32)],
        delay: std::time::Duration,
    ) -> Peer {
        let mut io = UnixStream::connect(socket).await.expect("connect");
        tokio::time::sleep(delay).await;
        let mut out = PREFACE.to_vec();
        out.extend_from_slice(&settings(values));
        io.write_all(&out).await.unwrap();
        Peer {
            io,
            buf: Vec::new(),
            decoder: loona_hpack::Decoder::new(),
            seen: Vec::new(),
            server_settings: Vec::new(),
            closed: false,
            hpack_2018: Hpack2018::default(),
        }
    }

    /// Connects and completes the exchange of SETTINGS (both acknowledged).
    pub async fn connect(socket: &Path) -> Peer {
        let mut p = Peer::open(socket, &[]).await;
        let s = p.expect(|f| f.kind == SETTINGS && f.flags & ACK == 0).await;
        p.server_settings = s
            .payload
            .chunks_exact(6)
            .map(|c| {
                (
                    u16::from_be_bytes([c[0], c[1]]),
                    u32::from_be_bytes([c[2], c[3], c[4], c[5]]),
                )
            })
            .collect();
        p.send(&frame(SETTINGS, ACK, 0, &[])).await;
        p.expect(|f| f.kind == SETTINGS && f.flags & ACK != 0).await;
        p
    }

    pub async fn send(&mut self, bytes: &[u8]) {
        // A peer that already closed may refuse the rest: what it sent back still counts.
        let _ = self.io.write_all(bytes).await;
    }

    /// The next frame; `None` once the connection ends (or nothing comes within 10 s).
    pub async fn next(&mut self) -> Option<Frame> {
        self.next_within(WAIT).await
    }

    /// The next frame; `None` once the connection ends (`closed`) or nothing comes for `wait`.
    pub async fn next_within(&mut self, wait: Duration) -> Option<Frame> {
        loop {
            if self.buf.len() >= 9 {
                let len = u32::from_be_bytes([0, self.buf[0], self.buf[1], self.buf[2]]) as usize;
                if self.buf.len() >= 9 + len {
                    let f = Frame {
                        kind: self.buf[3],
                        flags: self.buf[4],
                        stream: u32::from_be_bytes(self.buf[5..9].try_into().unwrap())
                            & 0x7fff_ffff,
                        payload: self.buf[9..9 + len].to_vec(),
                    };
                    self.buf.drain(..9 + len);
                    self.seen.push(f.clone());
                    return Some(f);
                }
            }
            let mut chunk = [0u8; 16 * 1024];
            match tokio::time::timeout(wait, self.io.read(&mut chunk)).await {
                Ok(Ok(n)) if n > 0 => self.buf.extend_from_slice(&chunk[..n]),
                Ok(_) => {
                    self.closed = true;
                    return None;
                }
                Err(_) => return None,
            }
        }
    }

    /// Reads until a frame `wanted` picks; panics with what came instead if none does.
    pub async fn expect(&mut self, wanted: impl Fn(&Frame) -> bool) -> Frame {
        while let Some(f) = self.next().await {
            if wanted(&f) {
                return f;
            }
        }
        panic!("the frame wanted never came; got {:?}", self.seen);
    }

    /// Reads until the connection ends; the GOAWAY it got, if any.
    pub async fn goaway(&mut self) -> Option<Frame> {
        let mut last = None;
        while let Some(f) = self.next().await {
            if f.kind == GOAWAY {
                last = Some(f);
            }
        }
        last
    }

    /// Reads until the server closes the connection, answering its PINGs (a server going away
    /// gracefully may wait for one); `true` if it closed within `limit`.
    pub async fn until_closed(&mut self, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        while !self.closed {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return false;
            }
            if let Some(f) = self.next_within(left).await {
                if f.kind == PING && f.flags & ACK == 0 {
                    self.send(&frame(PING, ACK, 0, &f.payload)).await;
                }
            }
        }
        true
    }

    /// Sends a unary call on `stream` with a raw header `block` (END_HEADERS) and `body`.
    pub async fn call(&mut self, stream: u32, block: &[u8], body: &[u8]) {
        let mut out = frame(HEADERS, END_HEADERS, stream, block);
        out.extend_from_slice(&frame(DATA, END_STREAM, stream, &message(body)));
        self.send(&out).await;
    }

    /// Reads the reply on `stream` to its end (other frames are kept in `seen`).
    pub async fn reply(&mut self, stream: u32) -> Reply {
        self.replies(&[stream])
            .await
            .remove(&stream)
            .unwrap_or_default()
    }

    /// Reads the replies on `streams` to their ends, in whatever order they come (other
    /// frames are kept in `seen`).
    pub async fn replies(&mut self, streams: &[u32]) -> std::collections::HashMap<u32, Reply> {
        let mut replies: std::collections::HashMap<u32, Reply> =
            streams.iter().map(|s| (*s, Reply::default())).collect();
        let mut open: std::collections::BTreeSet<u32> = streams.iter().copied().collect();
        let mut block = Vec::new();
        while !open.is_empty() {
            let f = self
                .next()
                .await
                .unwrap_or_else(|| panic!("streams {open:?} never ended; got {:?}", self.seen));
            if f.kind == HEADERS || f.kind == CONTINUATION {
                // Header blocks of every stream go through the one decoding context.
                block.extend_from_slice(&f.payload);
                if f.flags & END_HEADERS != 0 {
                    let fields = self
                        .decoder
                        .decode(&block)
                        .expect("a decodable reply block");
                    self.hpack_2018.check(&block, &fields);
                    block.clear();
                    if let (Some(reply), true) =
                        (replies.get_mut(&f.stream), open.contains(&f.stream))
                    {
                        reply.fields.extend(fields.into_iter().map(|(n, v)| {
                            (String::from_utf8(n).unwrap(), String::from_utf8(v).unwrap())
                        }));
                    }
                }
            }
            if !open.contains(&f.stream) {
                continue;
            }
            let reply = replies
                .get_mut(&f.stream)
                .expect("every open stream has a reply");
            match f.kind {
                DATA => reply.data.extend_from_slice(&f.payload),
                RST_STREAM => {
                    reply.reset = Some(f.code());
                    open.remove(&f.stream);
                    continue;
                }
                _ => {}
            }
            if (f.kind == DATA || f.kind == HEADERS || f.kind == CONTINUATION)
                && f.flags & END_STREAM != 0
            {
                open.remove(&f.stream);
            }
        }
        replies
    }
}

/// A plugin's connection-level behaviour, put between the gateway and a real plugin: it copies
/// frames both ways, records the gateway's, and answers the way a grpc-go plugin does.
#[derive(Clone, Copy, Debug)]
pub enum Hostile {
    /// A PING gets GOAWAY ENHANCE_YOUR_CALM "too_many_pings" (grpc-go's keepalive
    /// enforcement towards a connection with no calls), then the connection closes.
    GoawayOnPing,
    /// A request whose raw header block names `GetPluginCapabilities` is taken, then the
    /// connection gets GOAWAY NO_ERROR naming that stream last, and closes soon after.
    GoawayAfterTrigger,
    /// Every reply header block is sent as HEADERS, then 300 ms later its CONTINUATION: the
    /// gateway must put nothing of its own between them (RFC 9113 §6.10).
    SplitReplyBlocks,
    /// The plugin's SETTINGS ACK reaches the gateway 300 ms late (with whatever came with it),
    /// so the gateway's ACK of the client's SETTINGS, which follows the plugin's, is late too.
    DelaySettingsAck,
    /// Nothing: the tap only copies and records.
    Quiet,
    /// Every connection but the first (the gateway's own, on which it detects the dialect) is
    /// accepted and never answered, as a stopped plugin's are.
    Silent,
    /// Every connection but the first gets an HTTP/1.1 answer: a socket that is not HTTP/2.
    NotHttp2,
    /// On every connection but the first, the plugin's frames from the first reply HEADERS on
    /// reach the gateway [`LATE`] late, in order: replies that come after a call's deadline.
    LateReplies,
    /// The plugin's windows as the gateway (and so its clients) see them are small: its
    /// SETTINGS_INITIAL_WINDOW_SIZE reads [`SMALL_WINDOW`], and its first connection
    /// WINDOW_UPDATE (the raise a tonic plugin sends at once) is dropped, so the connection
    /// window stays at 65,535 until the plugin has taken half of what it thinks it granted.
    SmallWindows,
}

/// The stream window a [`Hostile::SmallWindows`] plugin advertises.
pub const SMALL_WINDOW: u32 = 16_384;

/// How late the plugin's replies are with [`Hostile::LateReplies`].
pub const LATE: Duration = Duration::from_secs(2);

/// What a [`Hostile::NotHttp2`] plugin answers.
pub const NOT_HTTP2: &[u8] = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";

pub struct Tap {
    pub socket: std::path::PathBuf,
    /// The gateway's frames: (connection number, frame).
    log: std::sync::Arc<std::sync::Mutex<Vec<(usize, Frame)>>>,
    _dir: tempfile::TempDir,
    _accept: tokio::task::JoinHandle<()>,
}

impl Tap {
    pub async fn start(upstream: &Path, hostile: Hostile) -> Tap {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("tap.sock");
        let listener = tokio::net::UnixListener::bind(&socket).unwrap();
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let upstream = upstream.to_path_buf();
        let accept_log = log.clone();
        let accept = tokio::spawn(async move {
            let mut n = 0;
            while let Ok((gw, _)) = listener.accept().await {
                if n > 0 && matches!(hostile, Hostile::Silent | Hostile::NotHttp2) {
                    tokio::spawn(unanswered(gw, hostile));
                    n += 1;
                    continue;
                }
                let Ok(up) = UnixStream::connect(&upstream).await else {
                    continue;
                };
                tokio::spawn(tap_connection(n, gw, up, hostile, accept_log.clone()));
                n += 1;
            }
        });
        Tap {
            socket,
            log,
            _dir: dir,
            _accept: accept,
        }
    }

    pub fn frames(&self) -> Vec<(usize, Frame)> {
        self.log.lock().unwrap().clone()
    }

    /// Request header blocks the plugin received (HEADERS that open a stream).
    pub fn requests(&self) -> usize {
        let frames = self.frames();
        let mut opened = std::collections::HashSet::new();
        for (conn, f) in frames {
            if f.kind == HEADERS {
                opened.insert((conn, f.stream));
            }
        }
        opened.len()
    }
}

/// A connection the plugin never serves: [`Hostile::NotHttp2`]'s answer, or nothing; what the
/// gateway sends is read and dropped until it closes.
async fn unanswered(mut gw: UnixStream, hostile: Hostile) {
    if matches!(hostile, Hostile::NotHttp2) && gw.write_all(NOT_HTTP2).await.is_err() {
        return;
    }
    let mut sink = [0u8; 16 * 1024];
    while let Ok(1..) = gw.read(&mut sink).await {}
}

async fn tap_connection(
    conn: usize,
    gw: UnixStream,
    up: UnixStream,
    hostile: Hostile,
    log: std::sync::Arc<std::sync::Mutex<Vec<(usize, Frame)>>>,
) {
    let (mut gw_read, gw_write) = gw.into_split();
    let (mut up_read, mut up_write) = up.into_split();
    let gw_write = std::sync::Arc::new(tokio::sync::Mutex::new(gw_write));
    // The plugin's frames go back whole, so that a GOAWAY of the tap's never splits one.
    let back = gw_write.clone();
    let mut late = matches!(hostile, Hostile::LateReplies) && conn > 0;
    let mut raise_dropped = false;
    let replies = tokio::spawn(async move {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 16 * 1024];
        loop {
            let Ok(n) = up_read.read(&mut chunk).await else {
                return;
            };
            if n == 0 {
                return;
            }
            buf.extend_from_slice(&chunk[..n]);
            let whole = whole_frames(&buf, 0);
            if matches!(hostile, Hostile::DelaySettingsAck) && has_settings_ack(&buf[..whole]) {
                tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            }
            if late && has_headers(&buf[..whole]) {
                // What the plugin sends meanwhile waits in the socket, read after.
                tokio::time::sleep(LATE).await;
                late = false;
            }
            if matches!(hostile, Hostile::SmallWindows) {
                let out = small_windows(&buf[..whole], &mut raise_dropped);
                if back.lock().await.write_all(&out).await.is_err() {
                    return;
                }
                buf.drain(..whole);
                continue;
            }
            if matches!(hostile, Hostile::SplitReplyBlocks) {
                if split_blocks(&buf[..whole], &back).await.is_err() {
                    return;
                }
                buf.drain(..whole);
                continue;
            }
            if whole > 0 {
                if back.lock().await.write_all(&buf[..whole]).await.is_err() {
                    return;
                }
                buf.drain(..whole);
            }
        }
    });
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let mut preface = false;
    let mut closing = false;
    loop {
        let n = match gw_read.read(&mut chunk).await {
            Ok(n) if n > 0 => n,
            _ => break,
        };
        buf.extend_from_slice(&chunk[..n]);
        let start = if !preface && buf.len() >= PREFACE.len() {
            PREFACE.len()
        } else {
            0
        };
        if !preface && start == 0 {
            continue;
        }
        preface = true;
        let whole = whole_frames(&buf, start);
        let mut at = start;
        let mut goaway = None;
        while at < whole {
            let len = u32::from_be_bytes([0, buf[at], buf[at + 1], buf[at + 2]]) as usize;
            let f = Frame {
                kind: buf[at + 3],
                flags: buf[at + 4],
                stream: u32::from_be_bytes(buf[at + 5..at + 9].try_into().unwrap()) & 0x7fff_ffff,
                payload: buf[at + 9..at + 9 + len].to_vec(),
            };
            at += 9 + len;
            let trigger = match hostile {
                Hostile::GoawayOnPing => f.kind == PING && f.flags & ACK == 0,
                Hostile::GoawayAfterTrigger => {
                    f.kind == HEADERS
                        && f.payload.windows(21).any(|w| w == b"GetPluginCapabilities")
                }
                _ => false,
            };
            let last = log
                .lock()
                .unwrap()
                .iter()
                .filter(|(c, g)| *c == conn && g.kind == HEADERS)
                .map(|(_, g)| g.stream)
                .max()
                .unwrap_or(0)
                .max(if f.kind == HEADERS { f.stream } else { 0 });
            log.lock().unwrap().push((conn, f));
            if trigger && !closing {
                goaway = Some(last);
            }
        }
        if up_write.write_all(&buf[..whole]).await.is_err() {
            break;
        }
        buf.drain(..whole);
        if let Some(last) = goaway {
            closing = true;
            let (code, debug): (u32, &[u8]) = match hostile {
                Hostile::GoawayOnPing => (ENHANCE_YOUR_CALM, b"too_many_pings"),
                _ => (NO_ERROR, b"bye"),
            };
            let mut p = last.to_be_bytes().to_vec();
            p.extend_from_slice(&code.to_be_bytes());
            p.extend_from_slice(debug);
            let _ = gw_write
                .lock()
                .await
                .write_all(&frame(GOAWAY, 0, 0, &p))
                .await;
            let gw_write = gw_write.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(300)).await;
                let _ = gw_write.lock().await.shutdown().await;
            });
        }
    }
    replies.abort();
}

/// `frames` as a [`Hostile::SmallWindows`] plugin sends them: SETTINGS_INITIAL_WINDOW_SIZE
/// rewritten, the first connection WINDOW_UPDATE dropped (`dropped` once it was).
fn small_windows(mut frames: &[u8], dropped: &mut bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(frames.len());
    while frames.len() >= 9 {
        let len = u32::from_be_bytes([0, frames[0], frames[1], frames[2]]) as usize;
        let (f, rest) = frames.split_at(9 + len);
        frames = rest;
        let (kind, flags, stream) = (f[3], f[4], u32::from_be_bytes(f[5..9].try_into().unwrap()));
        if kind == WINDOW_UPDATE && stream == 0 && !*dropped {
            *dropped = true;
            continue;
        }
        let at = out.len();
        out.extend_from_slice(f);
        if kind == SETTINGS && flags & ACK == 0 {
            for entry in out[at + 9..].chunks_exact_mut(6) {
                if entry[..2] == [0, 4] {
                    entry[2..].copy_from_slice(&SMALL_WINDOW.to_be_bytes());
                }
            }
        }
    }
    out
}

/// Writes `frames`, each HEADERS that ends its block as HEADERS and, after a pause, a
/// CONTINUATION.
async fn split_blocks(
    mut frames: &[u8],
    to: &tokio::sync::Mutex<tokio::net::unix::OwnedWriteHalf>,
) -> std::io::Result<()> {
    while frames.len() >= 9 {
        let len = u32::from_be_bytes([0, frames[0], frames[1], frames[2]]) as usize;
        let (f, rest) = frames.split_at(9 + len);
        frames = rest;
        let (kind, flags) = (f[3], f[4]);
        if kind != HEADERS || flags & END_HEADERS == 0 || flags & 0x28 != 0 || len < 2 {
            to.lock().await.write_all(f).await?;
            continue;
        }
        let stream = u32::from_be_bytes(f[5..9].try_into().unwrap());
        let (head, tail) = f[9..].split_at(len / 2);
        to.lock()
            .await
            .write_all(&frame(HEADERS, flags & !END_HEADERS, stream, head))
            .await?;
        tokio::time::sleep(Duration::from_millis(300)).await;
        to.lock()
            .await
            .write_all(&frame(CONTINUATION, END_HEADERS, stream, tail))
            .await?;
    }
    Ok(())
}

/// Where the whole frames in `buf` (from `start`) end.
fn whole_frames(buf: &[u8], start: usize) -> usize {
    let mut at = start;
    while buf.len() >= at + 9 {
        let len = u32::from_be_bytes([0, buf[at], buf[at + 1], buf[at + 2]]) as usize;
        if buf.len() < at + 9 + len {
            break;
        }
        at += 9 + len;
    }
    at
}

/// Whether the whole frames in `bytes` include a SETTINGS ACK.
fn has_settings_ack(bytes: &[u8]) -> bool {
    has_frame(bytes, |kind, flags| kind == SETTINGS && flags & ACK != 0)
}

/// Whether the whole frames in `bytes` include a HEADERS.
fn has_headers(bytes: &[u8]) -> bool {
    has_frame(bytes, |kind, _| kind == HEADERS)
}

/// Whether the whole frames in `bytes` include one whose type and flags `wanted` picks.
fn has_frame(bytes: &[u8], wanted: impl Fn(u8, u8) -> bool) -> bool {
    let mut at = 0;
    while at + 9 <= bytes.len() {
        let len = u32::from_be_bytes([0, bytes[at], bytes[at + 1], bytes[at + 2]]) as usize;
        if wanted(bytes[at + 3], bytes[at + 4]) {
            return true;
        }
        at += 9 + len;
    }
    false
}
