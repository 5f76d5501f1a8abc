//! Endpoints as operators write them: `unix:///run/csi/csi.sock` (the spec's `CSI_ENDPOINT`
//! form), `unix:/run/csi/csi.sock` (gRPC's other spelling of a UNIX address), a bare absolute
//! path (what the Kubernetes sidecars' `--csi-address` takes), or `tcp://host:port`.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Unix(PathBuf),
    Tcp(String),
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EndpointError {
    #[error("endpoint is empty")]
    Empty,
    #[error(
        "endpoint {0:?}: a unix endpoint needs an absolute path, as in unix:///run/csi/csi.sock"
    )]
    RelativeUnixPath(String),
    #[error("endpoint {0:?}: tcp endpoints are written tcp://host:port")]
    BadTcp(String),
    #[error("endpoint {0:?}: unsupported scheme (use unix:// or tcp://)")]
    Scheme(String),
}

impl FromStr for Endpoint {
    type Err = EndpointError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.is_empty() {
            return Err(EndpointError::Empty);
        }
        // unix:///abs/path has an empty authority, unix:/abs/path none at all (gRPC names
        // both); unix://relative is not a path.
        if let Some(path) = s
            .strip_prefix("unix://")
            .or_else(|| s.strip_prefix("unix:"))
        {
            return if path.starts_with('/') {
                Ok(Endpoint::Unix(PathBuf::from(path)))
            } else {
                Err(EndpointError::RelativeUnixPath(s.to_string()))
            };
        }
        if let Some(addr) = s.strip_prefix("tcp://") {
            let ok = addr
                .rsplit_once(':')
                .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
            return if ok {
                Ok(Endpoint::Tcp(addr.to_string()))
            } else {
                Err(EndpointError::BadTcp(s.to_string()))
            };
        }
        if s.starts_with('/') {
            return Ok(Endpoint::Unix(PathBuf::from(s)));
        }
        if s.contains("://") {
            return Err(EndpointError::Scheme(s.to_string()));
        }
        Err(EndpointError::RelativeUnixPath(s.to_string()))
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Unix(p) => write!(f, "unix://{}", p.display()),
            Endpoint::Tcp(a) => write!(f, "tcp://{a}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_forms_operators_write() {
        assert_eq!(
            "unix:///run/csi.sock".parse(),
            Ok(Endpoint::Unix("/run/csi.sock".into()))
        );
        assert_eq!(
            "unix:/run/csi.sock".parse(),
            Ok(Endpoint::Unix("/run/csi.sock".into()))
        );
        assert_eq!(
            "unix:run/csi.sock".parse::<Endpoint>(),
            Err(EndpointError::RelativeUnixPath("unix:run/csi.sock".into()))
        );
        assert_eq!(
            "/run/csi.sock".parse(),
            Ok(Endpoint::Unix("/run/csi.sock".into()))
        );
        assert_eq!(
            "tcp://10.0.0.1:9000".parse(),
            Ok(Endpoint::Tcp("10.0.0.1:9000".into()))
        );
        assert_eq!(
            "unix://run/csi.sock".parse::<Endpoint>(),
            Err(EndpointError::RelativeUnixPath(
                "unix://run/csi.sock".into()
            ))
        );
        assert_eq!(
            "tcp://host".parse::<Endpoint>(),
            Err(EndpointError::BadTcp("tcp://host".into()))
        );
        assert_eq!(
            "http://x".parse::<Endpoint>(),
            Err(EndpointError::Scheme("http://x".into()))
        );
        assert_eq!("".parse::<Endpoint>(), Err(EndpointError::Empty));
        assert_eq!(Endpoint::Unix("/a".into()).to_string(), "unix:///a");
    }
}
