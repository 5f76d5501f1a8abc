//! Who may call through the appliance listener. The CA decides who is a peer at all; the
//! allow-list rules decide which peers are let in (by SAN DNS name or URI, e.g. a SPIFFE ID)
//! and which services each may call: the CSI services, and the gateway's own (`Health`,
//! `ServerReflection`), each by its name without the package. A node plugin's gateway, say,
//! needs Identity and Node but never Controller: a stolen node identity then cannot create or
//! delete volumes, nor learn the plugin's health.

use std::collections::BTreeSet;

use rustls_pki_types::CertificateDer;

use tonic::Status;

/// One `[[appliance.peers]]` entry: a peer whose certificate names any of `dns` or `uris`
/// may call `services` (all of them, the gateway's own included, when `None`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PeerRule {
    pub dns: Vec<String>,
    pub uris: Vec<String>,
    pub services: Option<BTreeSet<String>>,
}

/// The names a peer certificate carries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Peer {
    pub subject: String,
    pub dns: Vec<String>,
    pub uris: Vec<String>,
}

impl Peer {
    /// Reads the subject and SANs of a (verified) peer certificate.
    pub fn from_cert(cert: &CertificateDer<'_>) -> Result<Peer, String> {
        use x509_parser::extensions::GeneralName;
        let (_, x509) = x509_parser::parse_x509_certificate(cert)
            .map_err(|e| format!("cannot parse the peer certificate: {e}"))?;
        let mut peer = Peer {
            subject: x509.subject().to_string(),
            ..Peer::default()
        };
        if let Ok(Some(san)) = x509.subject_alternative_name() {
            for name in &san.value.general_names {
                match name {
                    GeneralName::DNSName(d) => peer.dns.push(d.to_string()),
                    GeneralName::URI(u) => peer.uris.push(u.to_string()),
                    _ => {}
                }
            }
        }
        Ok(peer)
    }

    /// How logs name the peer: its first URI, else first DNS name, else subject.
    pub fn name(&self) -> &str {
        self.uris
            .first()
            .or(self.dns.first())
            .map_or(&self.subject, |s| s.as_str())
    }
}

/// What one authenticated connection may do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Authorization {
    pub peer: String,
    /// `None`: every service.
    pub services: Option<BTreeSet<String>>,
}

impl Authorization {
    pub fn allows(&self, service: &str) -> bool {
        self.services.as_ref().is_none_or(|s| s.contains(service))
    }

    /// PERMISSION_DENIED for a call to `service` the peer may not make.
    pub fn denied(&self, path: &str, service: &str) -> Status {
        Status::permission_denied(format!(
            "{path}: peer {} may not call the CSI {service} service through this gateway",
            self.peer
        ))
    }

    /// `Ok` when the peer may call the gateway's own service `name` (see
    /// `call::services::rule_name`), else PERMISSION_DENIED naming the rule's key.
    pub fn check_gateway_service(&self, path: &str, name: &str) -> Result<(), Status> {
        match self.allows(name) {
            true => Ok(()),
            false => Err(Status::permission_denied(format!(
                "{path}: peer {} may not call the gateway's {name} service ([[appliance.peers]] services does not name it)",
                self.peer
            ))),
        }
    }
}

/// Decides who of the CA's peers gets in, and with what.
pub fn authorize(rules: &[PeerRule], peer: &Peer) -> Result<Authorization, String> {
    if rules.is_empty() {
        // No allow-list: the CA alone decides, and a peer may call everything.
        return Ok(Authorization {
            peer: peer.name().to_string(),
            services: None,
        });
    }
    let mut services: Option<BTreeSet<String>> = Some(BTreeSet::new());
    let mut matched = false;
    for rule in rules {
        let hit = rule.dns.iter().any(|d| peer.dns.contains(d))
            || rule.uris.iter().any(|u| peer.uris.contains(u));
        if !hit {
            continue;
        }
        matched = true;
        match (&mut services, &rule.services) {
            (Some(all), Some(these)) => all.extend(these.iter().cloned()),
            (_, None) => services = None,
            (None, Some(_)) => {}
        }
    }
    if !matched {
        return Err(format!(
            "peer certificate (subject {:?}, DNS {:?}, URI {:?}) matches no [[appliance.peers]] rule",
            peer.subject, peer.dns, peer.uris
        ));
    }
    Ok(Authorization {
        peer: peer.name().to_string(),
        services,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(dns: &[&str], uris: &[&str], services: Option<&[&str]>) -> PeerRule {
        PeerRule {
            dns: dns.iter().map(|s| s.to_string()).collect(),
            uris: uris.iter().map(|s| s.to_string()).collect(),
            services: services.map(|s| s.iter().map(|s| s.to_string()).collect()),
        }
    }

    #[test]
    fn rules_admit_by_san_and_limit_services() {
        let node = Peer {
            subject: "CN=node".into(),
            dns: vec!["node-1.example".into()],
            uris: vec!["spiffe://example.org/node-1".into()],
        };
        let rules = [
            rule(&["ctrl.example"], &[], None),
            rule(
                &[],
                &["spiffe://example.org/node-1"],
                Some(&["Identity", "Node"]),
            ),
        ];
        let a = authorize(&rules, &node).unwrap();
        assert!(a.allows("Node") && a.allows("Identity") && !a.allows("Controller"));
        assert_eq!(a.peer, "spiffe://example.org/node-1");

        let ctrl = Peer {
            dns: vec!["ctrl.example".into()],
            ..Peer::default()
        };
        assert!(authorize(&rules, &ctrl).unwrap().allows("Controller"));
        let stranger = Peer {
            dns: vec!["other.example".into()],
            ..Peer::default()
        };
        assert!(authorize(&rules, &stranger).is_err());
        assert!(authorize(&[], &stranger).unwrap().allows("Controller"));
        // The gateway's own services: only where named, or where a rule allows everything.
        assert!(a
            .check_gateway_service("/grpc.health.v1.Health/Check", "Health")
            .is_err());
        assert!(authorize(&rules, &ctrl).unwrap().allows("ServerReflection"));
        let health = [rule(&["node-1.example"], &[], Some(&["Node", "Health"]))];
        let a = authorize(&health, &node).unwrap();
        assert!(a
            .check_gateway_service("/grpc.health.v1.Health/Watch", "Health")
            .is_ok());
        let e = a
            .check_gateway_service(
                "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
                "ServerReflection",
            )
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::PermissionDenied);
        assert!(e.message().contains("ServerReflection"), "{}", e.message());
    }
}
