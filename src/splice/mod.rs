//! The connection layer. The splice: the one front for every client connection — on the UNIX socket, or a peer of the
//! appliance listener over mutual TLS — to a UNIX-socket upstream, or to a remote appliance over
//! mutual TLS (`io` says how either side is read and written). The connection gets an upstream
//! connection of its own when one can be had and its HTTP/2 frames are copied across, looked at but not re-framed: the gateway decodes only header blocks (to
//! route each stream and to read its status for the log and the metrics) and the first message
//! of each call (for the volume id in the log). A call that needs translation and is one call
//! to the plugin (`Route::inline_call`) is translated on the connection's own upstream
//! connection: its head goes on with the plugin's path, its message is translated once whole,
//! the plugin's reply once it ends (`call::answer::inline_request`, `inline_reply`); a request
//! that has no field in either revision (the capability calls) goes on as it came, since it
//! can only be the empty request (`translate::identical::request_empty`). Other
//! translated calls, and calls the gateway refuses, are answered by the splice itself on the
//! same connection (`call::answer`, on the gateway's shared upstream connection); calls to the
//! gateway's own services (reflection, health) are served as streams both ways
//! (`conn::service`). A connection accepted while no upstream connection of its own can be had
//! (the plugin away) is unattached (`Splice::unattached`, `io::Unattached`): every call it
//! carries is answered that way, by the same code.
//!
//! Compared with terminating HTTP/2 on both sides (as the gateway once did), a relayed call costs two socket reads, two
//! writes and two header-block decodes, in one task; a call translated on the connection, the
//! same plus the translation of its two messages.

//!
//! Its rooms: the listeners that accept connections and hand each to a splice — the UNIX
//! socket ([`listener`], [`socket`]) and the appliance listener over mutual TLS
//! ([`appliance`]); the splice of one connection ([`conn`]) and how either side is read and
//! written ([`io`]); and what one connection may make the gateway do ([`limits`]). Calls go
//! down to the call layer (`call`), never the other way.

pub mod appliance;
pub mod conn;
pub mod io;
pub mod limits;
pub mod listener;
pub mod socket;

pub use conn::Splice;
pub use io::{Io, Unattached};
