//! CSI `Version` negotiation for the two dialects that name a version in every request (v0.1 and
//! the draft). Both sides of the gateway speak exactly the versions in [`known_versions`]; an
//! upstream is asked `GetSupportedVersions` at connect and the highest common version is filled
//! into every request ([`negotiate`]).
//!
//! v0.1 and the draft share the package `csi` and decode `GetSupportedVersionsResponse`
//! differently (the draft wraps the list in `oneof reply { Result result = 1; Error error = 2; }`):
//! parsing a reply with the wrong one of the two fails or yields no version, which is how the
//! transport tells them apart.

use std::fmt;

use prost::Message;
use tonic::Status;

use crate::dialect::proto::{v0_1, v0_1_oneof};
use crate::dialect::Dialect;

/// A CSI spec version, `major.minor.patch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl Version {
    pub const fn new(major: u32, minor: u32, patch: u32) -> Self {
        Version {
            major,
            minor,
            patch,
        }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl From<v0_1::Version> for Version {
    fn from(v: v0_1::Version) -> Self {
        Version::new(v.major, v.minor, v.patch)
    }
}
impl From<Version> for v0_1::Version {
    fn from(v: Version) -> Self {
        v0_1::Version {
            major: v.major,
            minor: v.minor,
            patch: v.patch,
        }
    }
}
impl From<v0_1_oneof::Version> for Version {
    fn from(v: v0_1_oneof::Version) -> Self {
        Version::new(v.major, v.minor, v.patch)
    }
}
impl From<Version> for v0_1_oneof::Version {
    fn from(v: Version) -> Self {
        v0_1_oneof::Version {
            major: v.major,
            minor: v.minor,
            patch: v.patch,
        }
    }
}

/// Both the draft ("The initial version of the CSI specification is 0.1.0") and v0.1.0 name
/// themselves 0.1.0.
static V0_1: [Version; 1] = [Version::new(0, 1, 0)];
/// v0.2 peers speak a subset of v0.3 under the same package.
static V0_3: [Version; 2] = [Version::new(0, 3, 0), Version::new(0, 2, 0)];
static V1: [Version; 1] = [Version::new(1, 12, 0)];

/// Versions the gateway knows for a dialect, newest first.
pub fn known_versions(dialect: Dialect) -> &'static [Version] {
    match dialect {
        Dialect::V0_1 | Dialect::V0_1Oneof => &V0_1,
        Dialect::V0_3 => &V0_3,
        Dialect::V1 => &V1,
    }
}

/// The request the transport sends at connect to learn the upstream's versions:
/// `GetSupportedVersions` for v0.1 and the draft. v0.3 and v1 have no such RPC and name no
/// version in requests; for them this is `GetPluginInfo` (served by every plugin), and
/// [`parse_supported_versions`] answers [`known_versions`] when its reply decodes.
pub fn supported_versions_request(dialect: Dialect) -> (&'static str, Vec<u8>) {
    match dialect {
        Dialect::V0_1 | Dialect::V0_1Oneof => ("/csi.Identity/GetSupportedVersions", Vec::new()),
        Dialect::V0_3 => ("/csi.v0.Identity/GetPluginInfo", Vec::new()),
        Dialect::V1 => ("/csi.v1.Identity/GetPluginInfo", Vec::new()),
    }
}

/// Parses the reply to [`supported_versions_request`]. A draft reply read as v0.1 fails to
/// decode (its `Result` is not a `Version`); a v0.1 reply read as the draft yields no version.
/// Version 0.0.0 (an empty message, e.g. a draft `Result{}` read as v0.1) is not a version.
pub fn parse_supported_versions(dialect: Dialect, reply: &[u8]) -> Result<Vec<Version>, Status> {
    let what = "GetSupportedVersionsResponse";
    match dialect {
        Dialect::V0_1 => {
            let r = v0_1::GetSupportedVersionsResponse::decode(reply)
                .map_err(|e| super::decode_error(what, e))?;
            Ok(real(r.supported_versions.into_iter().map(Version::from)))
        }
        Dialect::V0_1Oneof => {
            use v0_1_oneof::get_supported_versions_response::Reply;
            let r = v0_1_oneof::GetSupportedVersionsResponse::decode(reply)
                .map_err(|e| super::decode_error(what, e))?;
            match r.reply {
                Some(Reply::Result(res)) => {
                    Ok(real(res.supported_versions.into_iter().map(Version::from)))
                }
                Some(Reply::Error(e)) => Err(super::errors::draft_to_status(
                    super::errors::DraftRpc::GetSupportedVersions,
                    e,
                )
                .err()
                .unwrap_or_else(|| Status::internal("GetSupportedVersions failed"))),
                None => Ok(Vec::new()),
            }
        }
        Dialect::V0_3 => {
            crate::dialect::proto::v0_3::GetPluginInfoResponse::decode(reply)
                .map_err(|e| super::decode_error("GetPluginInfoResponse", e))?;
            Ok(known_versions(dialect).to_vec())
        }
        Dialect::V1 => {
            crate::hub::v1::GetPluginInfoResponse::decode(reply)
                .map_err(|e| super::decode_error("GetPluginInfoResponse", e))?;
            Ok(known_versions(dialect).to_vec())
        }
    }
}

fn real(vs: impl Iterator<Item = Version>) -> Vec<Version> {
    vs.filter(|v| *v != Version::new(0, 0, 0)).collect()
}

/// The highest version both the gateway (for `dialect`) and the upstream know.
pub fn negotiate(dialect: Dialect, offered: &[Version]) -> Option<Version> {
    known_versions(dialect)
        .iter()
        .copied()
        .find(|v| offered.contains(v))
}

/// Checks the `version` a v0.1 / draft front client named in its request.
pub(crate) fn check_front_version(
    dialect: Dialect,
    version: Option<Version>,
) -> Result<(), FrontVersionError> {
    match version {
        None => Err(FrontVersionError::Missing),
        Some(v) if known_versions(dialect).contains(&v) => Ok(()),
        Some(v) => Err(FrontVersionError::Unsupported(v)),
    }
}

/// Why a front request's version was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FrontVersionError {
    Missing,
    Unsupported(Version),
}

impl FrontVersionError {
    pub(crate) fn message(self, dialect: Dialect) -> String {
        let served: Vec<String> = known_versions(dialect)
            .iter()
            .map(|v| v.to_string())
            .collect();
        match self {
            FrontVersionError::Missing => "version is a required field".to_string(),
            FrontVersionError::Unsupported(v) => format!(
                "CSI version {v} is not supported by the gateway (supported: {})",
                served.join(", ")
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiate_picks_highest_common() {
        let offered = [Version::new(0, 1, 0), Version::new(0, 0, 9)];
        assert_eq!(
            negotiate(Dialect::V0_1, &offered),
            Some(Version::new(0, 1, 0))
        );
        assert_eq!(negotiate(Dialect::V0_1, &[Version::new(0, 2, 0)]), None);
        assert_eq!(
            negotiate(
                Dialect::V0_3,
                &[Version::new(0, 2, 0), Version::new(0, 3, 0)]
            ),
            Some(Version::new(0, 3, 0))
        );
    }

    #[test]
    fn v0_1_and_draft_replies_are_told_apart() {
        let v01 = v0_1::GetSupportedVersionsResponse {
            supported_versions: vec![Version::new(0, 1, 0).into()],
        }
        .encode_to_vec();
        let draft = v0_1_oneof::GetSupportedVersionsResponse {
            reply: Some(v0_1_oneof::get_supported_versions_response::Reply::Result(
                v0_1_oneof::get_supported_versions_response::Result {
                    supported_versions: vec![Version::new(0, 1, 0).into()],
                },
            )),
        }
        .encode_to_vec();
        assert_eq!(
            parse_supported_versions(Dialect::V0_1, &v01).unwrap(),
            vec![Version::new(0, 1, 0)]
        );
        assert_eq!(
            parse_supported_versions(Dialect::V0_1Oneof, &draft).unwrap(),
            vec![Version::new(0, 1, 0)]
        );
        // The wrong one of the two fails or yields nothing.
        assert!(parse_supported_versions(Dialect::V0_1, &draft).is_err());
        assert_eq!(
            parse_supported_versions(Dialect::V0_1Oneof, &v01).unwrap(),
            vec![]
        );
    }

    #[test]
    fn empty_draft_result_is_no_version_for_v0_1() {
        let draft = v0_1_oneof::GetSupportedVersionsResponse {
            reply: Some(v0_1_oneof::get_supported_versions_response::Reply::Result(
                Default::default(),
            )),
        }
        .encode_to_vec();
        assert_eq!(
            parse_supported_versions(Dialect::V0_1, &draft).unwrap(),
            vec![]
        );
    }

    #[test]
    fn requests_and_front_checks() {
        assert_eq!(
            supported_versions_request(Dialect::V0_1).0,
            "/csi.Identity/GetSupportedVersions"
        );
        assert_eq!(
            supported_versions_request(Dialect::V0_1Oneof).0,
            "/csi.Identity/GetSupportedVersions"
        );
        assert!(check_front_version(Dialect::V0_1, Some(Version::new(0, 1, 0))).is_ok());
        assert_eq!(
            check_front_version(Dialect::V0_1, Some(Version::new(0, 2, 0))),
            Err(FrontVersionError::Unsupported(Version::new(0, 2, 0)))
        );
        assert_eq!(
            check_front_version(Dialect::V0_1, None),
            Err(FrontVersionError::Missing)
        );
        assert_eq!(known_versions(Dialect::V1)[0], Version::new(1, 12, 0));
    }

    #[test]
    fn a_draft_error_reply_is_a_status() {
        use v0_1_oneof::error;
        let reply = v0_1_oneof::GetSupportedVersionsResponse {
            reply: Some(v0_1_oneof::get_supported_versions_response::Reply::Error(
                v0_1_oneof::Error {
                    value: Some(error::Value::GeneralError(error::GeneralError {
                        error_code: 1,
                        caller_must_not_retry: false,
                        error_description: "warming up".into(),
                    })),
                },
            )),
        }
        .encode_to_vec();
        let err = parse_supported_versions(Dialect::V0_1Oneof, &reply).unwrap_err();
        assert_eq!(
            (err.code(), err.message()),
            (tonic::Code::Unavailable, "warming up")
        );
        // v0.3 and v1 have no version RPC: a decodable GetPluginInfo reply means the known ones.
        let (path, _) = supported_versions_request(Dialect::V0_3);
        assert_eq!(path, "/csi.v0.Identity/GetPluginInfo");
        assert_eq!(
            parse_supported_versions(Dialect::V0_3, &[]).unwrap(),
            known_versions(Dialect::V0_3)
        );
    }
}
