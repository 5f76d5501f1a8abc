//! Test support: a real etcd (Debian's `etcd-server`, `/usr/bin/etcd`) on free loopback ports
//! with a temp data directory, killed on drop. A missing etcd fails the test, never skips it:
//! `.ci/run` installs the package.

use std::fs;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::PROCESS_TIMEOUT;

pub struct Etcd {
    /// `http://127.0.0.1:PORT`, for `--etcd-endpoints`.
    pub endpoint: String,
    child: Child,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

/// The etcd binary: `$ETCD_BIN`, else `/usr/bin/etcd`.
fn binary() -> PathBuf {
    let bin = std::env::var_os("ETCD_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/usr/bin/etcd".into());
    assert!(
        bin.exists(),
        "etcd not found at {}: install the Debian package etcd-server (`apt-get install -y \
         etcd-server`, as .ci/run does) or set ETCD_BIN",
        bin.display()
    );
    bin
}

impl Etcd {
    /// Starts a one-member cluster and returns once `/health` reports it healthy.
    pub async fn start() -> Etcd {
        let dir = tempfile::tempdir().expect("tempdir");
        let (client, peer) = (super::free_port(), super::free_port());
        let endpoint = format!("http://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let log = dir.path().join("etcd.log");
        let out = fs::File::create(&log).unwrap();
        let child = Command::new(binary())
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
            child,
            log,
            _dir: dir,
        };
        etcd.wait_healthy().await;
        etcd
    }

    async fn wait_healthy(&mut self) {
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
