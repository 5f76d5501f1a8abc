//! The route table: gRPC path → (front dialect, method). Built once from the generated method
//! tables of the dialects a listener serves; `csi.*` paths belong to whichever of `v0.1` and
//! `v0.1-oneof` the listener is configured for, since both use the package `csi`.

use std::collections::HashMap;

use crate::dialect::{Dialect, MethodInfo};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    pub dialect: Dialect,
    pub method: &'static MethodInfo,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("the front can serve {0} or {1} under the package `csi`, not both")]
pub struct PackageClash(pub Dialect, pub Dialect);

pub struct Router {
    routes: HashMap<&'static str, Route>,
}

impl Router {
    pub fn new(dialects: &[Dialect]) -> Result<Router, PackageClash> {
        let mut routes = HashMap::new();
        for &dialect in dialects {
            for method in dialect.methods() {
                if let Some(other) = routes.insert(method.path, Route { dialect, method }) {
                    if other.dialect != dialect {
                        return Err(PackageClash(other.dialect, dialect));
                    }
                }
            }
        }
        Ok(Router { routes })
    }

    pub fn route(&self, path: &str) -> Option<Route> {
        self.routes.get(path).copied()
    }

    /// The dialects served, newest first.
    pub fn dialects(&self) -> Vec<Dialect> {
        let mut d: Vec<Dialect> = self.routes.values().map(|r| r.dialect).collect();
        d.sort();
        d.dedup();
        d.reverse();
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_every_path_of_the_served_dialects() {
        let r = Router::new(&[Dialect::V1, Dialect::V0_3, Dialect::V0_1Oneof]).unwrap();
        for d in [Dialect::V1, Dialect::V0_3, Dialect::V0_1Oneof] {
            for m in d.methods() {
                assert_eq!(r.route(m.path).unwrap().dialect, d);
            }
        }
        assert_eq!(
            r.route("/csi.Identity/GetSupportedVersions")
                .unwrap()
                .dialect,
            Dialect::V0_1Oneof
        );
        assert!(r.route("/csi.v2.Identity/Probe").is_none());
        assert_eq!(
            r.dialects(),
            vec![Dialect::V1, Dialect::V0_3, Dialect::V0_1Oneof]
        );
    }

    #[test]
    fn the_two_csi_dialects_cannot_share_a_listener() {
        assert_eq!(
            Router::new(&[Dialect::V0_1, Dialect::V0_1Oneof]).err(),
            Some(PackageClash(Dialect::V0_1, Dialect::V0_1Oneof))
        );
    }
}
