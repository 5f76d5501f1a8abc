//! A development PKI for trying the bridge: one CA, a server certificate for the appliance
//! listener and a client certificate for the dialing gateway. `csi-gateway gen-certs DIR`
//! writes them; tests use [`DevCa`] directly to issue odd certificates (expired, other CA).
//! Not for production: keys are unencrypted and validity is long.

use std::path::Path;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use time::{Duration, OffsetDateTime};

/// A certificate and its key, PEM-encoded.
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
}

/// What a leaf certificate says.
#[derive(Clone, Debug, Default)]
pub struct Leaf {
    pub common_name: String,
    /// DNS names and IP addresses.
    pub names: Vec<String>,
    /// URI SANs, e.g. SPIFFE IDs.
    pub uris: Vec<String>,
    pub server: bool,
    /// Valid from `now + not_before` to `now + not_after` (negative: in the past).
    pub not_before: Duration,
    pub not_after: Duration,
}

impl Leaf {
    pub fn server(names: &[&str]) -> Leaf {
        Leaf {
            common_name: names.first().copied().unwrap_or("server").into(),
            names: names.iter().map(|s| s.to_string()).collect(),
            server: true,
            ..Leaf::valid_for(Duration::days(365))
        }
    }

    pub fn client(names: &[&str], uris: &[&str]) -> Leaf {
        Leaf {
            common_name: names
                .first()
                .or(uris.first())
                .copied()
                .unwrap_or("client")
                .into(),
            names: names.iter().map(|s| s.to_string()).collect(),
            uris: uris.iter().map(|s| s.to_string()).collect(),
            server: false,
            ..Leaf::valid_for(Duration::days(365))
        }
    }

    fn valid_for(d: Duration) -> Leaf {
        Leaf {
            not_before: Duration::minutes(-5),
            not_after: d,
            ..Leaf::default()
        }
    }
}

/// A certificate authority held in memory.
pub struct DevCa {
    issuer: Issuer<'static, KeyPair>,
    pub cert_pem: String,
    pub key_pem: String,
}

impl DevCa {
    pub fn new(name: &str) -> Result<DevCa, rcgen::Error> {
        DevCa::with_key(name, KeyPair::generate()?)
    }

    fn with_key(name: &str, key: KeyPair) -> Result<DevCa, rcgen::Error> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let now = OffsetDateTime::now_utc();
        params.not_before = now - Duration::minutes(5);
        params.not_after = now + Duration::days(3650);
        let cert = params.self_signed(&key)?;
        let key_pem = key.serialize_pem();
        Ok(DevCa {
            cert_pem: cert.pem(),
            key_pem,
            issuer: Issuer::new(params, key),
        })
    }

    /// A CA whose subject is `name` and a tag of its own key (`… CA 3f9a01c2`): two CAs never
    /// share a subject, so a certificate checked against the wrong one fails as "unknown
    /// issuer" (not signed by the configured CA) rather than as a bad signature under a CA of
    /// the same name.
    pub fn new_unique(name: &str) -> Result<DevCa, rcgen::Error> {
        let key = KeyPair::generate()?;
        // An uncompressed EC point: a format byte, then coordinates as random as the key.
        let tag: String = key.public_key_raw()[1..5]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        DevCa::with_key(&format!("{name} {tag}"), key)
    }

    /// Issues a leaf certificate with a fresh key.
    pub fn issue(&self, leaf: &Leaf) -> Result<Issued, rcgen::Error> {
        let mut params = CertificateParams::new(leaf.names.clone())?;
        for uri in &leaf.uris {
            params
                .subject_alt_names
                .push(SanType::URI(uri.as_str().try_into()?));
        }
        params
            .distinguished_name
            .push(DnType::CommonName, leaf.common_name.as_str());
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![if leaf.server {
            ExtendedKeyUsagePurpose::ServerAuth
        } else {
            ExtendedKeyUsagePurpose::ClientAuth
        }];
        params.use_authority_key_identifier_extension = true;
        let now = OffsetDateTime::now_utc();
        params.not_before = now + leaf.not_before;
        params.not_after = now + leaf.not_after;
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// Writes `ca.pem`, `server.pem`/`server.key` and `client.pem`/`client.key` into `dir` (and
/// `ca.key`, to issue more later with other tools).
pub fn write_dev_pki(dir: &Path, server: &Leaf, client: &Leaf) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let ca = DevCa::new_unique("csi-gateway development CA")?;
    write_atomic(&dir.join("ca.pem"), ca.cert_pem.as_bytes(), 0o644)?;
    write_atomic(&dir.join("ca.key"), ca.key_pem.as_bytes(), 0o600)?;
    for (name, leaf) in [("server", server), ("client", client)] {
        let issued = ca.issue(leaf)?;
        write_atomic(
            &dir.join(format!("{name}.pem")),
            issued.cert_pem.as_bytes(),
            0o644,
        )?;
        write_atomic(
            &dir.join(format!("{name}.key")),
            issued.key_pem.as_bytes(),
            0o600,
        )?;
    }
    Ok(())
}

/// Writes a file whole or not at all (temporary file, then rename), so a reloading reader
/// never sees half of it.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let tmp = path.with_extension("tmp~");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authz::Peer;
    use rustls_pki_types::pem::PemObject;

    #[test]
    fn issued_leaves_carry_their_names() {
        let ca = DevCa::new("test CA").unwrap();
        let c = ca
            .issue(&Leaf::client(
                &["node-1.example"],
                &["spiffe://example.org/node-1"],
            ))
            .unwrap();
        let der = rustls_pki_types::CertificateDer::from_pem_slice(c.cert_pem.as_bytes()).unwrap();
        let peer = Peer::from_cert(&der).unwrap();
        assert_eq!(peer.dns, vec!["node-1.example"]);
        assert_eq!(peer.uris, vec!["spiffe://example.org/node-1"]);
    }
}
