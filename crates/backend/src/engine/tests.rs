//! Engine behaviour that needs no socket: id allocation across reopen, capacity reservations,
//! and the crash contract's visible effects.

use std::time::Duration;

use super::*;

fn config(dir: &std::path::Path, pool: u64) -> Config {
    Config {
        data_dir: dir.to_path_buf(),
        node_id: "n1".into(),
        peer_nodes: vec![],
        pool_size: pool,
        max_volumes_per_node: 0,
        topology: Segment::new(),
        publish_mode: PublishMode::Symlink,
        require_staging: false,
        alpha_get_snapshot: false,
        co_creates_target: false,
        fault_delay: Duration::ZERO,
    }
}

fn request(name: &str, kind: Kind, bytes: u64) -> CreateVolume {
    CreateVolume {
        name: name.into(),
        required_bytes: bytes,
        capabilities: vec![Capability {
            kind,
            fs_type: String::new(),
            mount_flags: vec![],
            mode: AccessMode::SingleNodeWriter,
        }],
        ..Default::default()
    }
}

#[test]
fn ids_are_never_reused_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let first = {
        let e = Engine::open(config(dir.path(), 1 << 30)).unwrap();
        let v = e.create_volume(request("a", Kind::Mount, 1)).unwrap();
        e.delete_volume(&v.id).unwrap();
        v.id
    };
    let e = Engine::open(config(dir.path(), 1 << 30)).unwrap();
    let second = e.create_volume(request("a", Kind::Mount, 1)).unwrap().id;
    assert_ne!(first, second);
    assert!(e.store.volume_path(&second).is_dir());
    assert!(!e.store.volume_path(&first).exists());
}

#[test]
fn failed_creates_release_their_reservation() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(config(dir.path(), 2 << 30)).unwrap();
    let mut from_nothing = request("x", Kind::Block, 1 << 30);
    from_nothing.source = Some(Source::Snapshot("snap-missing".into()));
    assert!(matches!(
        e.create_volume(from_nothing),
        Err(EngineError::NotFound { .. })
    ));
    assert_eq!(e.available(), 2 << 30);
    let v = e
        .create_volume(request("blk", Kind::Block, 1 << 30))
        .unwrap();
    assert_eq!(
        std::fs::metadata(e.store.volume_path(&v.id)).unwrap().len(),
        1 << 30
    );
    assert_eq!(e.available(), 1 << 30);
    // A snapshot copies the volume and is accounted too.
    e.create_snapshot("s", &v.id, &Default::default()).unwrap();
    assert_eq!(e.available(), 0);
    assert!(matches!(
        e.create_volume(request("more", Kind::Block, 1)),
        Err(EngineError::ResourceExhausted(_))
    ));
}

#[test]
fn state_on_disk_matches_memory_after_every_change() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(config(dir.path(), 4 << 30)).unwrap();
    let v = e.create_volume(request("m", Kind::Mount, 1 << 20)).unwrap();
    e.attach(&v.id, "n1", &v.capabilities[0], false).unwrap();
    let on_disk = Store::open(dir.path()).unwrap().load().unwrap();
    assert_eq!(on_disk.volumes[&v.id].attachments.len(), 1);
    assert_eq!(on_disk, e.inner().state);
}
