//! Filesystem work never stalls the gateway. It runs on one thread by default, and the target
//! paths it makes and removes for a v1 client of a v0.x plugin live under the CO's directory,
//! where a slow disk or a hung mount can hold a call for seconds: every other call, on every
//! connection, must go on meanwhile. The slow disk is a real one: a FUSE filesystem
//! (`tests/slowfs/slowfs.py`, Debian's python3-fusepy) that takes seconds over every lookup of
//! a name beginning with "slow".

use csi_gateway_test_support as support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use csi_gateway::dialect::Dialect;
use support::front::Front;
use support::gateway::Gateway;
use support::{Backend, Options};

/// How long the slow disk takes over each lookup, create or removal of a "slow" name.
const DELAY: Duration = Duration::from_secs(2);

/// The slow filesystem, mounted; unmounted when dropped (also when a test fails).
struct SlowDisk {
    mount: PathBuf,
    server: Child,
    _dir: tempfile::TempDir,
}

impl SlowDisk {
    fn mount() -> SlowDisk {
        let dir = tempfile::tempdir().unwrap();
        let (backing, mount) = (dir.path().join("backing"), dir.path().join("mnt"));
        std::fs::create_dir(&backing).unwrap();
        std::fs::create_dir(&mount).unwrap();
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/slowfs/slowfs.py");
        support::deps::FUSEPY.check();
        let server = Command::new(support::deps::FUSEPY.python)
            .arg(script)
            .arg(&backing)
            .arg(&mount)
            .arg(DELAY.as_secs_f64().to_string())
            .spawn()
            .expect("/usr/bin/python3 runs tests/slowfs/slowfs.py");
        let disk = SlowDisk {
            mount,
            server,
            _dir: dir,
        };
        let started = Instant::now();
        while !mounted(&disk.mount) {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "the slow disk was not mounted (is /dev/fuse there? `{}` installs fusepy and fuse3)",
                support::deps::FUSEPY.install
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        disk
    }
}

impl Drop for SlowDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.mount).status();
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

fn mounted(path: &Path) -> bool {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let path = path.display().to_string();
    info.lines()
        .any(|l| l.split(' ').nth(4) == Some(path.as_str()))
}

/// A v1 client's NodePublishVolume to a v0.3 plugin makes its target on a disk that takes
/// seconds: meanwhile a Probe on another connection is answered at once, and the publish itself
/// is answered when the disk is done.
#[tokio::test]
async fn a_slow_target_path_stalls_only_its_own_call() {
    let disk = SlowDisk::mount();
    let backend = Backend::start(Options::new("v0.3").arg("--require-staging=false")).await;
    // The shipped default: one thread for everything.
    let gateway = Gateway::start(&backend.socket, "v0.1", &[]).await;
    let f = Front::new(Dialect::V1, gateway.channel().await);
    let v = f
        .create("vol-slow", 1 << 20, &HashMap::new())
        .await
        .unwrap();
    let node = f.node_id().await.unwrap();
    let publish = f.controller_publish(&v, &node).await.unwrap();
    let target = disk.mount.join("slow-target");
    let began = Instant::now();
    let slow = tokio::spawn({
        let f = Front::new(Dialect::V1, gateway.channel().await);
        let (v, target) = (v.clone(), target.clone());
        async move { f.node_publish(&v, &publish, None, &target).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let other = Front::new(Dialect::V1, gateway.channel().await);
    let asked = Instant::now();
    let ready = other.probe().await.expect("Probe");
    let probe_took = asked.elapsed();
    assert!(ready);
    assert!(
        !slow.is_finished(),
        "the publish ended before the disk could have answered ({:?})",
        began.elapsed()
    );
    assert!(
        probe_took < DELAY / 3,
        "a Probe waited {probe_took:?} for another call's filesystem work\n{}",
        gateway.log_text()
    );
    let published = tokio::time::timeout(Duration::from_secs(60), slow)
        .await
        .expect("the publish never ended")
        .unwrap();
    published.unwrap_or_else(|e| panic!("publish: {e:?}\n{}", gateway.log_text()));
    assert!(
        began.elapsed() >= DELAY,
        "the disk was not slow: {:?}",
        began.elapsed()
    );
    assert!(
        std::fs::symlink_metadata(&target).is_ok(),
        "the target was not made"
    );
    f.node_unpublish(&v, &target).await.unwrap();
}
