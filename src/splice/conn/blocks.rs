//! Header blocks: the decoding contexts of both sides, a block whose CONTINUATION frames are
//! still to come on either side, and how the client's request blocks go on to the upstream —
//! as they came while the upstream's decoding context follows the client's, re-encoded once
//! it does not.

use super::*;

pub(super) struct Block {
    pub(super) stream: StreamId,
    pub(super) end_stream: bool,
    /// The header block fragments joined.
    pub(super) bytes: Vec<u8>,
    /// A request block's frames as they came, for forwarding as they are; a reply block's
    /// when they wait to be passed on or not (a translated call's trailers).
    pub(super) frames: Vec<u8>,
    /// A reply block whose frames go to the client as they come.
    pub(super) passes: bool,
}

/// Header blocks of both sides (`blocks`).
pub(super) struct Blocks {
    pub(super) client_decoder: headers::Decoder,
    pub(super) upstream_decoder: headers::Decoder,
    /// A request header block still waiting for its CONTINUATION frames.
    pub(super) request_block: Option<Block>,
    /// A reply header block whose frames went on but which is not complete: nothing may be
    /// written to the client between its frames.
    pub(super) reply_block: Option<Block>,
    /// A request block whose `:path` was rewritten in place, kept to be reused by the next.
    pub(super) rewritten: Vec<u8>,
    /// The `:path` fields put in place of the client's in its frames as they came.
    pub(super) path_fields: headers::PathFields,
    /// Set once a request block was not forwarded (see `forward_request_block`).
    pub(super) reencode: bool,
    /// Set once an upstream header block was kept from the client and changed the upstream's
    /// table: the client's table no longer follows it, and every reply block the client gets
    /// from then on is re-encoded as literals (`headers::reply_reencoded`).
    pub(super) reencode_replies: bool,
}

impl Blocks {
    pub(super) fn new(client_decoder: headers::Decoder) -> Blocks {
        Blocks {
            client_decoder,
            upstream_decoder: headers::Decoder::default(),
            request_block: None,
            reply_block: None,
            rewritten: Vec::new(),
            path_fields: headers::PathFields::default(),
            reencode: false,
            reencode_replies: false,
        }
    }

    /// Gives a new stream's request the `:authority` every UNIX-socket leg of the gateway sends
    /// (`headers::LOCAL_AUTHORITY`), so that a plugin that checks it (any tonic plugin) serves
    /// clients that send the socket path. A client that sends something else gets its blocks
    /// re-encoded from then on. False when the block cannot be rewritten (its fields were not
    /// kept): the splice answers that stream itself, on the gateway's own upstream connection.
    pub(super) fn localize(&mut self, request: &mut headers::Request, kept: bool) -> bool {
        if request.local_authority {
            return true;
        }
        self.reencode = true;
        if kept {
            headers::localize_authority(&mut request.fields);
        }
        kept
    }

    /// Gives a wire-identical call's request the upstream's `:path`. While the upstream's
    /// decoding context follows the client's, in place ([`headers::rebuild`]: every such
    /// path is rewritten the same way on this connection, and where the two differ in length
    /// the client's decoder keeps the upstream's table apart, `headers::Follower`); else with
    /// the local `:authority`, re-encoding the connection's request blocks from now on. False
    /// when the block can be neither (its fields were not kept): the splice answers that
    /// stream itself, translated, on the gateway's own upstream connection.
    pub(super) fn rewrite_path(
        &mut self,
        request: &mut headers::Request,
        kept: bool,
        from: &str,
        path: &'static str,
    ) -> bool {
        if !self.reencode
            && request.local_authority
            && request.paths == 1
            && self.client_decoder.follows(from, path.len())
        {
            if let Some(span) = request.path_span {
                request.rewrite = Some((span, path));
                return true;
            }
        }
        self.reencode = true;
        if !kept {
            return false;
        }
        if !request.local_authority {
            headers::localize_authority(&mut request.fields);
        }
        headers::set_path(&mut request.fields, path);
        true
    }

    /// A reply block that changed the upstream's table was kept from the client: the client's
    /// table stops following the upstream's (see `reencode_replies`), and a size update the
    /// client waits for is still owed to it.
    pub(super) fn part_replies(&mut self) {
        self.upstream_decoder.withheld();
        self.reencode_replies = true;
    }
}
