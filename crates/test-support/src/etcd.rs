//! Test support: a real etcd (Debian's `etcd-server`, `/usr/bin/etcd`) on free loopback ports
//! with a temp data directory, killed on drop. A missing etcd fails the test, never skips it,
//! naming what installs it ([`super::deps`]).

use std::fs;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::PROCESS_TIMEOUT;

pub struct Etcd {
    /// `http://127.0.0.1:PORT` (`https://` with TLS), for `--etcd-endpoints`.
    pub endpoint: String,
    /// With TLS: the directory of `csi-gateway gen-certs` (ca.pem, server.*, client.*).
    certs: Option<PathBuf>,
    child: Child,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

/// The etcd binary: `$ETCD_BIN`, else `/usr/bin/etcd`.
fn binary() -> PathBuf {
    super::deps::ETCD.path()
}

impl Etcd {
    /// Starts a one-member cluster and returns once `/health` reports it healthy.
    pub async fn start() -> Etcd {
        Etcd::spawn(None).await
    }

    /// A member that serves clients only over TLS with a client certificate
    /// (`--client-cert-auth`), with the certificates in `certs` (`csi-gateway gen-certs`).
    pub async fn start_tls(certs: &std::path::Path) -> Etcd {
        Etcd::spawn(Some(certs.to_path_buf())).await
    }

    async fn spawn(certs: Option<PathBuf>) -> Etcd {
        let dir = tempfile::tempdir().expect("tempdir");
        let (client, peer) = (super::free_port(), super::free_port());
        let scheme = if certs.is_some() { "https" } else { "http" };
        let endpoint = format!("{scheme}://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let log = dir.path().join("etcd.log");
        let out = fs::File::create(&log).unwrap();
        let mut command = Command::new(binary());
        if let Some(c) = &certs {
            command
                .arg(format!("--cert-file={}", c.join("server.pem").display()))
                .arg(format!("--key-file={}", c.join("server.key").display()))
                .arg(format!("--trusted-ca-file={}", c.join("ca.pem").display()))
                .arg("--client-cert-auth");
        }
        let child = command
            .arg(format!("--data-dir={}", dir.path().join("data").display()))
            .arg(format!("--listen-client-urls={endpoint}"))
            .arg(format!("--advertise-client-urls={endpoint}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster=default={peer_url}"))
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("spawning etcd");
        let mut etcd = Etcd {
            endpoint,
            certs,
            child,
            log,
            _dir: dir,
        };
        etcd.wait_healthy().await;
        etcd
    }

    async fn wait_healthy(&mut self) {
        if self.certs.is_some() {
            // /health wants a client certificate too: the member's own word instead.
            return super::eventually(PROCESS_TIMEOUT, "etcd serves TLS clients", || {
                self.log_text().contains("serving client requests on")
            })
            .await;
        }
        let url = format!("{}/health", self.endpoint);
        let deadline = Instant::now() + PROCESS_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "etcd exited during start-up ({status}):\n{}",
                    self.log_text()
                );
            }
            let body = tokio::task::spawn_blocking({
                let url = url.clone();
                move || {
                    ureq::get(&url)
                        .call()
                        .ok()
                        .and_then(|mut r| r.body_mut().read_to_string().ok())
                }
            })
            .await
            .unwrap();
            if body.is_some_and(|b| b.contains("\"health\":\"true\"")) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "etcd not healthy within {PROCESS_TIMEOUT:?}:\n{}",
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Runs `etcdctl` (Debian's etcd-client) against this member, with the client
    /// certificate when it speaks TLS; panics unless it succeeds.
    pub fn etcdctl(&self, args: &[&str]) -> String {
        let mut command = Command::new(super::deps::ETCDCTL.path());
        command
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={}", self.endpoint));
        if let Some(c) = &self.certs {
            command
                .arg(format!("--cacert={}", c.join("ca.pem").display()))
                .arg(format!("--cert={}", c.join("client.pem").display()))
                .arg(format!("--key={}", c.join("client.key").display()));
        }
        let out = command
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("etcdctl: {e}"));
        assert!(out.status.success(), "etcdctl {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
