//! Which dialect a plugin speaks, found by asking: v1 first, then v0.3 (a v0.2 plugin is one
//! whose `NodeGetInfo` is UNIMPLEMENTED), then the two `csi` dialects, told apart by how their
//! `GetSupportedVersions` replies decode (the draft wraps the list in `Result`).

use crate::dialect::Dialect;
use crate::grpc::{Code, Status};
use crate::translate::{self, Version};

use super::conn::Connection;

/// What detection learned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Detected {
    pub dialect: Dialect,
    /// The version negotiated with a `csi`-package plugin.
    pub version: Option<Version>,
    /// A `csi.v0` plugin without `NodeGetInfo`: a v0.2 plugin.
    pub v0_2: bool,
}

impl Detected {
    /// The translation session for what was detected (a v0.2 plugin answers NodeGetId only).
    pub fn session(&self) -> translate::UpstreamSession {
        let session = translate::UpstreamSession::new(self.dialect, self.version);
        if self.v0_2 {
            session
                .node_get_id_fallback
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        session
    }
}

/// Finds the dialect of the plugin on `conn`, or checks the configured one.
pub async fn detect(conn: &Connection, configured: Option<Dialect>) -> Result<Detected, Status> {
    let dialect = match configured {
        Some(d) => d,
        None => probe_dialect(conn).await?,
    };
    let version = match dialect {
        Dialect::V0_1 | Dialect::V0_1Oneof => Some(negotiate(conn, dialect).await?),
        _ => None,
    };
    let v0_2 = dialect == Dialect::V0_3 && lacks(conn, "/csi.v0.Node/NodeGetInfo").await?;
    Ok(Detected {
        dialect,
        version,
        v0_2,
    })
}

async fn probe_dialect(conn: &Connection) -> Result<Dialect, Status> {
    // A plugin that answers at all on a package's path serves that package.
    if !lacks(conn, "/csi.v1.Identity/GetPluginInfo").await? {
        return Ok(Dialect::V1);
    }
    if !lacks(conn, "/csi.v0.Identity/GetPluginInfo").await? {
        return Ok(Dialect::V0_3);
    }
    let (path, request) = translate::supported_versions_request(Dialect::V0_1);
    let reply = conn.unary(path, &request).await.map_err(|e| {
        if e.code() == Code::Unimplemented {
            Status::unavailable(format!(
                "upstream {} answers none of the CSI packages csi.v1, csi.v0, csi",
                conn.endpoint()
            ))
        } else {
            e.status
        }
    })?;
    Ok(dialect_of_versions_reply(&reply))
}

/// v0.1-oneof when the reply parses as the draft's `Result`-wrapped list, else v0.1.
fn dialect_of_versions_reply(reply: &[u8]) -> Dialect {
    match translate::parse_supported_versions(Dialect::V0_1Oneof, reply) {
        Ok(v) if !v.is_empty() => Dialect::V0_1Oneof,
        _ => Dialect::V0_1,
    }
}

async fn negotiate(conn: &Connection, dialect: Dialect) -> Result<Version, Status> {
    let (path, request) = translate::supported_versions_request(dialect);
    let reply = conn.unary(path, &request).await?;
    let offered = translate::parse_supported_versions(dialect, &reply)?;
    translate::negotiate(dialect, &offered).ok_or_else(|| {
        Status::failed_precondition(format!(
            "upstream {} supports versions {offered:?}; the gateway knows {:?} for {dialect}",
            conn.endpoint(),
            translate::known_versions(dialect)
        ))
    })
}

/// True when `path` is UNIMPLEMENTED upstream; other errors mean the method exists.
async fn lacks(conn: &Connection, path: &str) -> Result<bool, Status> {
    match conn.unary(path, &[]).await {
        Ok(_) => Ok(false),
        Err(s) if s.code() == Code::Unimplemented => Ok(true),
        Err(e) if e.code() == Code::Unavailable => Err(e.status),
        Err(_) => Ok(false),
    }
}
