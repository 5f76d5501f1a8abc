//! HTTP/2 frames as the splice sees them (RFC 9113 §4, §6): a 9-byte header, then a payload the
//! splice mostly copies without looking. Only what the splice reads or writes itself is here.

use bytes::{BufMut, BytesMut};

/// The client connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
pub const HEAD_LEN: usize = 9;
/// The largest frame the protocol allows (2^24-1), whatever a peer's settings say.
pub const MAX_FRAME_LEN: usize = (1 << 24) - 1;
/// Every window's starting size and every frame size's floor (RFC 9113 §6.5.2).
pub const DEFAULT_WINDOW: i64 = 65_535;
pub const DEFAULT_MAX_FRAME: usize = 16_384;
/// The largest flow-control window (RFC 9113 §6.9.1).
pub const MAX_WINDOW: i64 = (1 << 31) - 1;

/// A stream identifier (RFC 9113 §5.1.1): 31 bits, the reserved bit cleared; 0 is the
/// connection itself, odd ids are the client's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId(u32);

impl StreamId {
    /// Stream 0: frames about the whole connection.
    pub const CONNECTION: StreamId = StreamId(0);
    /// The highest id: a GOAWAY naming it refuses no stream (RFC 9113 §6.8).
    pub const MAX: StreamId = StreamId(0x7fff_ffff);

    /// The id `n` names, its reserved (high) bit cleared as a receiver must (§4.1).
    pub const fn new(n: u32) -> StreamId {
        StreamId(n & 0x7fff_ffff)
    }

    pub const fn get(self) -> u32 {
        self.0
    }

    pub const fn is_connection(self) -> bool {
        self.0 == 0
    }

    /// A stream a client opens (§5.1.1: odd).
    pub const fn is_client(self) -> bool {
        self.0 % 2 == 1
    }

    fn read(b: [u8; 4]) -> StreamId {
        StreamId::new(u32::from_be_bytes(b))
    }
}

impl std::fmt::Display for StreamId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Data,
    Headers,
    Priority,
    RstStream,
    Settings,
    PushPromise,
    Ping,
    GoAway,
    WindowUpdate,
    Continuation,
    Unknown(u8),
}

impl Kind {
    fn from_byte(b: u8) -> Kind {
        match b {
            0 => Kind::Data,
            1 => Kind::Headers,
            2 => Kind::Priority,
            3 => Kind::RstStream,
            4 => Kind::Settings,
            5 => Kind::PushPromise,
            6 => Kind::Ping,
            7 => Kind::GoAway,
            8 => Kind::WindowUpdate,
            9 => Kind::Continuation,
            other => Kind::Unknown(other),
        }
    }

    fn byte(self) -> u8 {
        match self {
            Kind::Data => 0,
            Kind::Headers => 1,
            Kind::Priority => 2,
            Kind::RstStream => 3,
            Kind::Settings => 4,
            Kind::PushPromise => 5,
            Kind::Ping => 6,
            Kind::GoAway => 7,
            Kind::WindowUpdate => 8,
            Kind::Continuation => 9,
            Kind::Unknown(b) => b,
        }
    }
}

pub const END_STREAM: u8 = 0x1;
pub const ACK: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
pub const PADDED: u8 = 0x8;
pub const PRIORITY: u8 = 0x20;

/// An error code of RST_STREAM and GOAWAY (RFC 9113 §7). A peer may send any value, and an
/// unknown one means INTERNAL_ERROR to its reader (§7); the named ones are in [`reason`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Reason(pub u32);

impl Reason {
    /// Its name in RFC 9113 §7, or `None` for a code the RFC does not define.
    pub fn name(self) -> Option<&'static str> {
        const NAMES: [&str; 14] = [
            "NO_ERROR",
            "PROTOCOL_ERROR",
            "INTERNAL_ERROR",
            "FLOW_CONTROL_ERROR",
            "SETTINGS_TIMEOUT",
            "STREAM_CLOSED",
            "FRAME_SIZE_ERROR",
            "REFUSED_STREAM",
            "CANCEL",
            "COMPRESSION_ERROR",
            "CONNECT_ERROR",
            "ENHANCE_YOUR_CALM",
            "INADEQUATE_SECURITY",
            "HTTP_1_1_REQUIRED",
        ];
        NAMES.get(self.0 as usize).copied()
    }

    pub fn to_be_bytes(self) -> [u8; 4] {
        self.0.to_be_bytes()
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "error code {:#x}", self.0),
        }
    }
}

/// The error codes the splice sends or reads (RFC 9113 §7).
pub mod reason {
    use super::Reason;

    pub const NO_ERROR: Reason = Reason(0x0);
    pub const PROTOCOL_ERROR: Reason = Reason(0x1);
    pub const INTERNAL_ERROR: Reason = Reason(0x2);
    pub const FLOW_CONTROL_ERROR: Reason = Reason(0x3);
    pub const STREAM_CLOSED: Reason = Reason(0x5);
    pub const FRAME_SIZE_ERROR: Reason = Reason(0x6);
    pub const REFUSED_STREAM: Reason = Reason(0x7);
    pub const CANCEL: Reason = Reason(0x8);
    pub const COMPRESSION_ERROR: Reason = Reason(0x9);
    pub const ENHANCE_YOUR_CALM: Reason = Reason(0xb);
}

/// Settings identifiers the splice reads (RFC 9113 §6.5.2).
pub const SETTINGS_HEADER_TABLE_SIZE: u16 = 0x1;
pub const SETTINGS_ENABLE_PUSH: u16 = 0x2;
pub const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;
pub const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;
pub const SETTINGS_MAX_FRAME_SIZE: u16 = 0x5;
pub const SETTINGS_MAX_HEADER_LIST_SIZE: u16 = 0x6;

/// A connection error: what was wrong, and the error code its GOAWAY carries.
pub type ConnectionError = (&'static str, Reason);

/// On which streams each kind of frame may come, and how long its payload must be
/// (RFC 9113 §6): `None` where any length will do.
fn rule(kind: Kind) -> Option<(Stream, Option<Length>)> {
    use Length::*;
    Some(match kind {
        Kind::Data | Kind::Headers | Kind::Continuation => (Stream::NotZero, None),
        Kind::Priority => (Stream::NotZero, None), // a wrong length is a stream error
        Kind::RstStream => (Stream::NotZero, Some(Exactly(4))),
        Kind::Settings => (Stream::Zero, None), // see `check_settings`
        Kind::PushPromise => (Stream::NotZero, None),
        Kind::Ping => (Stream::Zero, Some(Exactly(8))),
        Kind::GoAway => (Stream::Zero, Some(AtLeast(8))),
        Kind::WindowUpdate => (Stream::Any, Some(Exactly(4))),
        Kind::Unknown(_) => return None,
    })
}

#[derive(Clone, Copy)]
enum Stream {
    Zero,
    NotZero,
    Any,
}

#[derive(Clone, Copy)]
enum Length {
    Exactly(usize),
    AtLeast(usize),
}

/// The checks every frame must pass whatever the stream's state: its stream id and length.
pub fn check(head: &Head, payload: &[u8]) -> Result<(), ConnectionError> {
    let Some((stream, length)) = rule(head.kind) else {
        return Ok(());
    };
    match (stream, head.stream.is_connection()) {
        (Stream::Zero, false) => return Err(("frame must be on stream 0", reason::PROTOCOL_ERROR)),
        (Stream::NotZero, true) => {
            return Err(("frame must not be on stream 0", reason::PROTOCOL_ERROR))
        }
        _ => {}
    }
    let fits = match length {
        None => true,
        Some(Length::Exactly(n)) => payload.len() == n,
        Some(Length::AtLeast(n)) => payload.len() >= n,
    };
    if !fits {
        return Err(("frame of the wrong length", reason::FRAME_SIZE_ERROR));
    }
    if head.kind == Kind::Settings && head.has(ACK) && !payload.is_empty() {
        return Err(("SETTINGS ACK with a payload", reason::FRAME_SIZE_ERROR));
    }
    Ok(())
}

/// A SETTINGS payload's length and values (RFC 9113 §6.5, §6.5.2).
pub fn check_settings(payload: &[u8]) -> Result<(), ConnectionError> {
    if !payload.len().is_multiple_of(6) {
        return Err(("SETTINGS of the wrong length", reason::FRAME_SIZE_ERROR));
    }
    for (id, value) in settings(payload) {
        match id {
            SETTINGS_ENABLE_PUSH if value > 1 => {
                return Err(("SETTINGS_ENABLE_PUSH not 0 or 1", reason::PROTOCOL_ERROR))
            }
            SETTINGS_INITIAL_WINDOW_SIZE if value as i64 > MAX_WINDOW => {
                return Err((
                    "SETTINGS_INITIAL_WINDOW_SIZE over 2^31-1",
                    reason::FLOW_CONTROL_ERROR,
                ))
            }
            SETTINGS_MAX_FRAME_SIZE
                if !(DEFAULT_MAX_FRAME..=MAX_FRAME_LEN).contains(&(value as usize)) =>
            {
                return Err((
                    "SETTINGS_MAX_FRAME_SIZE out of range",
                    reason::PROTOCOL_ERROR,
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

/// Appends a SETTINGS frame carrying `values`.
pub fn put_settings(out: &mut BytesMut, values: &[(u16, u32)]) {
    let mut payload = Vec::with_capacity(values.len() * 6);
    for (id, value) in values {
        payload.extend_from_slice(&id.to_be_bytes());
        payload.extend_from_slice(&value.to_be_bytes());
    }
    put(out, Kind::Settings, 0, StreamId::CONNECTION, &payload);
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    pub len: usize,
    pub kind: Kind,
    pub flags: u8,
    pub stream: StreamId,
}

impl Head {
    pub fn parse(b: &[u8]) -> Head {
        Head {
            len: u32::from_be_bytes([0, b[0], b[1], b[2]]) as usize,
            kind: Kind::from_byte(b[3]),
            flags: b[4],
            stream: StreamId::read([b[5], b[6], b[7], b[8]]),
        }
    }

    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    #[inline]
    fn put(&self, out: &mut BytesMut) {
        // One 9-octet write, not four checked ones: every frame the splice writes has a head.
        out.put_slice(&Head::bytes(self.len, self.kind, self.flags, self.stream));
    }

    #[inline]
    fn bytes(len: usize, kind: Kind, flags: u8, stream: StreamId) -> [u8; HEAD_LEN] {
        let mut head = [0u8; HEAD_LEN];
        head[..4].copy_from_slice(&(len as u32).to_be_bytes());
        head.copy_within(1..4, 0);
        head[3] = kind.byte();
        head[4] = flags;
        head[5..].copy_from_slice(&stream.0.to_be_bytes());
        head
    }
}

/// The header of the next whole frame at the front of `buf`, if one has arrived.
pub fn next(buf: &[u8]) -> Option<Head> {
    let head = Head::parse(buf.get(..HEAD_LEN)?);
    (buf.len() >= HEAD_LEN + head.len).then_some(head)
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("malformed {0:?} frame")]
pub struct Malformed(pub Kind);

/// The content of a DATA or HEADERS payload: padding, and a HEADERS frame's priority fields,
/// stripped (RFC 9113 §6.1, §6.2).
pub fn content(head: &Head, payload: &[u8]) -> Result<std::ops::Range<usize>, Malformed> {
    let bad = || Malformed(head.kind);
    let mut start = 0;
    let mut end = payload.len();
    if head.has(PADDED) {
        let pad = *payload.first().ok_or_else(bad)? as usize;
        start = 1;
        end = end.checked_sub(pad).ok_or_else(bad)?;
    }
    if head.kind == Kind::Headers && head.has(PRIORITY) {
        start += 5;
    }
    (start <= end).then_some(start..end).ok_or_else(bad)
}

/// Whether a HEADERS (with PRIORITY) or PRIORITY frame names its own stream as the one it
/// depends on (RFC 7540 §5.3.1: a stream error PROTOCOL_ERROR).
pub fn depends_on_itself(head: &Head, payload: &[u8]) -> bool {
    let at = match head.kind {
        Kind::Priority => 0,
        Kind::Headers if head.has(PRIORITY) => head.has(PADDED) as usize,
        _ => return false,
    };
    payload
        .get(at..at + 4)
        .is_some_and(|d| StreamId::read([d[0], d[1], d[2], d[3]]) == head.stream)
}

/// The identifier/value pairs of a SETTINGS payload.
pub fn settings(payload: &[u8]) -> impl Iterator<Item = (u16, u32)> + '_ {
    payload.chunks_exact(6).map(|c| {
        (
            u16::from_be_bytes([c[0], c[1]]),
            u32::from_be_bytes([c[2], c[3], c[4], c[5]]),
        )
    })
}

/// A WINDOW_UPDATE's increment.
pub fn increment(payload: &[u8]) -> Result<u32, Malformed> {
    let b: [u8; 4] = payload
        .try_into()
        .map_err(|_| Malformed(Kind::WindowUpdate))?;
    Ok(u32::from_be_bytes(b) & 0x7fff_ffff)
}

/// An RST_STREAM's error code.
pub fn rst_reason(payload: &[u8]) -> Result<Reason, Malformed> {
    let b: [u8; 4] = payload.try_into().map_err(|_| Malformed(Kind::RstStream))?;
    Ok(Reason(u32::from_be_bytes(b)))
}

/// A GOAWAY's last stream id and error code (its debug data follows them).
pub fn goaway(payload: &[u8]) -> Result<(StreamId, Reason), Malformed> {
    let bad = || Malformed(Kind::GoAway);
    let last: [u8; 4] = payload
        .get(..4)
        .ok_or_else(bad)?
        .try_into()
        .map_err(|_| bad())?;
    let code: [u8; 4] = payload
        .get(4..8)
        .ok_or_else(bad)?
        .try_into()
        .map_err(|_| bad())?;
    Ok((StreamId::read(last), Reason(u32::from_be_bytes(code))))
}

/// Appends a whole frame.
#[inline]
pub fn put(out: &mut BytesMut, kind: Kind, flags: u8, stream: StreamId, payload: &[u8]) {
    out.reserve(HEAD_LEN + payload.len());
    Head {
        len: payload.len(),
        kind,
        flags,
        stream,
    }
    .put(out);
    out.put_slice(payload);
}

/// One gRPC message (its 5-octet prefix, then `message`) as DATA frames of at most `max_frame`
/// octets, the last with `flags`: written in place, without framing the message elsewhere
/// first.
pub fn put_message(
    out: &mut BytesMut,
    stream: StreamId,
    message: &[u8],
    flags: u8,
    max_frame: usize,
) {
    let prefix = crate::grpc::prefix(message.len());
    let total = prefix.len() + message.len();
    if total <= max_frame {
        // The frame head and the message prefix as one write: a translated call's messages
        // are often a few octets, where each checked write costs more than its copy.
        let mut start = [0u8; HEAD_LEN + crate::grpc::HEADER];
        start[..HEAD_LEN].copy_from_slice(&Head::bytes(total, Kind::Data, flags, stream));
        start[HEAD_LEN..].copy_from_slice(&prefix);
        out.reserve(HEAD_LEN + total);
        out.put_slice(&start);
        if !message.is_empty() {
            out.put_slice(message);
        }
        return;
    }
    let mut framed = Vec::with_capacity(total);
    framed.extend_from_slice(&prefix);
    framed.extend_from_slice(message);
    let mut chunks = framed.chunks(max_frame.max(1)).peekable();
    while let Some(chunk) = chunks.next() {
        let last = chunks.peek().is_none();
        put(out, Kind::Data, if last { flags } else { 0 }, stream, chunk);
    }
}

pub fn put_window_update(out: &mut BytesMut, stream: StreamId, increment: u32) {
    put(out, Kind::WindowUpdate, 0, stream, &increment.to_be_bytes());
}

pub fn put_rst_stream(out: &mut BytesMut, stream: StreamId, reason: Reason) {
    put(out, Kind::RstStream, 0, stream, &reason.to_be_bytes());
}

pub fn put_goaway(out: &mut BytesMut, last_stream: StreamId, reason: Reason) {
    let mut payload = [0u8; 8];
    payload[..4].copy_from_slice(&last_stream.0.to_be_bytes());
    payload[4..].copy_from_slice(&reason.to_be_bytes());
    put(out, Kind::GoAway, 0, StreamId::CONNECTION, &payload);
}

/// A header block as HEADERS plus as many CONTINUATION frames as `max_frame` requires.
#[inline]
pub fn put_headers(
    out: &mut BytesMut,
    stream: StreamId,
    block: &[u8],
    end_stream: bool,
    max_frame: usize,
) {
    let mut pieces = block.chunks(max_frame.max(1)).peekable();
    let mut kind = Kind::Headers;
    let mut flags = if end_stream { END_STREAM } else { 0 };
    if pieces.peek().is_none() {
        return put(out, kind, flags | END_HEADERS, stream, &[]);
    }
    while let Some(piece) = pieces.next() {
        if pieces.peek().is_none() {
            flags |= END_HEADERS;
        }
        put(out, kind, flags, stream, piece);
        kind = Kind::Continuation;
        flags = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_read_as_rfc_9113_names_them() {
        assert_eq!(reason::FLOW_CONTROL_ERROR.to_string(), "FLOW_CONTROL_ERROR");
        assert_eq!(reason::ENHANCE_YOUR_CALM.to_string(), "ENHANCE_YOUR_CALM");
        assert_eq!(Reason(0xd).to_string(), "HTTP_1_1_REQUIRED");
        // A code the RFC does not define still reads as itself (§7: treated as INTERNAL_ERROR).
        assert_eq!(Reason(0x1234).to_string(), "error code 0x1234");
        let mut out = BytesMut::new();
        put_rst_stream(&mut out, StreamId::new(3), reason::CANCEL);
        let head = next(&out).unwrap();
        assert_eq!(
            rst_reason(&out[HEAD_LEN..HEAD_LEN + head.len]),
            Ok(reason::CANCEL)
        );
    }

    #[test]
    fn a_message_goes_as_one_frame_or_as_many_within_the_size() {
        for max in [4, 9, 10, 100] {
            let mut out = BytesMut::new();
            put_message(&mut out, StreamId::new(7), b"hello", END_STREAM, max);
            let (mut payload, mut frames) = (Vec::new(), Vec::new());
            let mut rest = &out[..];
            while let Some(head) = next(rest) {
                assert_eq!((head.kind, head.stream), (Kind::Data, StreamId::new(7)));
                assert!(head.len <= max, "{max}");
                payload.extend_from_slice(&rest[HEAD_LEN..HEAD_LEN + head.len]);
                frames.push(head.flags);
                rest = &rest[HEAD_LEN + head.len..];
            }
            assert!(rest.is_empty());
            assert_eq!(payload, b"\0\0\0\0\x05hello", "{max}");
            // Only the last frame ends the stream.
            assert_eq!(frames.pop(), Some(END_STREAM), "{max}");
            assert!(frames.iter().all(|f| *f == 0), "{max}");
            assert_eq!(frames.len(), 10usize.div_ceil(max) - 1, "{max}");
        }
    }

    #[test]
    fn frames_are_checked_by_kind() {
        let head = |kind, stream, len| Head {
            len,
            kind,
            flags: 0,
            stream: StreamId::new(stream),
        };
        assert!(check(&head(Kind::Ping, 0, 8), &[0; 8]).is_ok());
        assert_eq!(
            check(&head(Kind::Ping, 1, 8), &[0; 8]).unwrap_err().1,
            reason::PROTOCOL_ERROR
        );
        assert_eq!(
            check(&head(Kind::Ping, 0, 7), &[0; 7]).unwrap_err().1,
            reason::FRAME_SIZE_ERROR
        );
        assert_eq!(
            check(&head(Kind::Data, 0, 0), &[]).unwrap_err().1,
            reason::PROTOCOL_ERROR
        );
        assert_eq!(
            check(&head(Kind::RstStream, 1, 3), &[0; 3]).unwrap_err().1,
            reason::FRAME_SIZE_ERROR
        );
        assert!(check(&head(Kind::Unknown(0xfa), 7, 1), &[0]).is_ok());
        let mut ack = head(Kind::Settings, 0, 6);
        ack.flags = ACK;
        assert_eq!(
            check(&ack, &[0; 6]).unwrap_err().1,
            reason::FRAME_SIZE_ERROR
        );
        assert_eq!(
            check_settings(&[0; 5]).unwrap_err().1,
            reason::FRAME_SIZE_ERROR
        );
        assert_eq!(
            check_settings(&[0, 2, 0, 0, 0, 2]).unwrap_err().1,
            reason::PROTOCOL_ERROR
        );
        assert_eq!(
            check_settings(&[0, 4, 0x80, 0, 0, 0]).unwrap_err().1,
            reason::FLOW_CONTROL_ERROR
        );
        assert_eq!(
            check_settings(&[0, 5, 0, 0, 0x3f, 0xff]).unwrap_err().1,
            reason::PROTOCOL_ERROR
        );
        assert!(
            check_settings(&[0, 5, 0, 0, 0x40, 0, 0, 0x63, 0, 0, 0, 1]).is_ok(),
            "unknown ids are fine"
        );
    }

    #[test]
    fn heads_round_trip() {
        let mut out = BytesMut::new();
        put(&mut out, Kind::Data, END_STREAM, StreamId::new(7), b"hello");
        let head = next(&out).unwrap();
        assert_eq!(
            head,
            Head {
                len: 5,
                kind: Kind::Data,
                flags: END_STREAM,
                stream: StreamId::new(7)
            }
        );
        assert!(
            next(&out[..out.len() - 1]).is_none(),
            "a partial frame is not a frame"
        );
        assert_eq!(&out[HEAD_LEN..], b"hello");
    }

    #[test]
    fn a_goaway_reads_as_it_was_written() {
        let mut out = BytesMut::new();
        put_goaway(&mut out, StreamId::new(9), reason::ENHANCE_YOUR_CALM);
        let head = next(&out).unwrap();
        assert_eq!(head.stream, StreamId::CONNECTION);
        let payload = &out[HEAD_LEN..HEAD_LEN + head.len];
        assert_eq!(
            goaway(payload),
            Ok((StreamId::new(9), reason::ENHANCE_YOUR_CALM))
        );
        assert_eq!(goaway(&payload[..7]), Err(Malformed(Kind::GoAway)));
    }

    #[test]
    fn stream_ids_drop_the_reserved_bit() {
        let mut raw = [0u8; HEAD_LEN];
        raw[5..].copy_from_slice(&0x8000_0005u32.to_be_bytes());
        let head = Head::parse(&raw);
        assert_eq!(head.stream, StreamId::new(5));
        assert_eq!(head.stream.get(), 5);
        assert!(head.stream.is_client() && !head.stream.is_connection());
        assert!(!StreamId::new(2).is_client());
        assert!(StreamId::CONNECTION.is_connection());
        assert_eq!(StreamId::new(u32::MAX).get(), 0x7fff_ffff);
    }

    #[test]
    fn padding_and_priority_are_stripped() {
        let head = Head {
            len: 0,
            kind: Kind::Headers,
            flags: PADDED | PRIORITY,
            stream: StreamId::new(1),
        };
        // pad length 2, 5 priority bytes, block "ab", 2 padding bytes
        let payload = [2, 0, 0, 0, 0, 9, b'a', b'b', 0, 0];
        assert_eq!(&payload[content(&head, &payload).unwrap()], b"ab");
        assert!(
            content(&head, &[9, 1]).is_err(),
            "padding longer than the frame"
        );
    }

    #[test]
    fn long_blocks_continue() {
        let mut out = BytesMut::new();
        put_headers(&mut out, StreamId::new(3), &[7u8; 10], true, 4);
        let mut kinds = Vec::new();
        let mut rest = &out[..];
        while let Some(h) = next(rest) {
            kinds.push((h.kind, h.flags, h.len));
            rest = &rest[HEAD_LEN + h.len..];
        }
        assert_eq!(
            kinds,
            vec![
                (Kind::Headers, END_STREAM, 4),
                (Kind::Continuation, 0, 4),
                (Kind::Continuation, END_HEADERS, 2)
            ]
        );
    }
}
