//! The appliance's mirror of its peers' node paths. A node gateway's calls name paths in its
//! CO's filesystem (kubelet's `staging_target_path` and `target_path`), on another host: none
//! of them exists next to the appliance's plugin, and a v0.x plugin there expects the CO to
//! have made them. The appliance listener therefore hands its plugin each such path under
//! `appliance.node_paths` instead (`/var/lib/kubelet/pods/…/mount` becomes
//! `<node_paths>/var/lib/kubelet/pods/…/mount`), makes there what the CO would have made
//! (the staging directory, the target's parent), and after an unstage or unpublish removes what
//! is left of it, up to the root: only empty directories and empty files that are not mount
//! points, so nothing the plugin keeps is ever removed.
//!
//! A path the mirror cannot map to the same place — relative (`some/path`, which csi-sanity
//! sends to NodeGetVolumeStats and NodeExpandVolume), climbing (`..`), or already under
//! [`UNMAPPED`] — is not refused: whether the call is valid is the plugin's to say (NOT_FOUND for
//! a volume it does not know, as it answers a local CO). The plugin gets it as one opaque name,
//! `<root>/.unmapped/<SHA-256 of the path, base64url>`: one component, so it cannot leave the
//! root or be resolved against any process's working directory on the appliance, and a name no
//! mappable path turns into, so it never meets another call's staging or target path — the same
//! path in two calls is the same name, so a stage or publish there is undone by its unstage or
//! unpublish.

use std::fs;
use std::io::ErrorKind;
use std::path::{Component, Path, PathBuf};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use ring::digest::{digest, SHA256};

use crate::grpc::Status;
use crate::hub::Request as Req;

/// The directory under the root of the paths the mirror cannot map (module doc).
pub const UNMAPPED: &str = ".unmapped";

/// `request` with every node path it names moved under `root` (`under`). An empty path
/// stays empty: the plugin refuses it as it would have.
pub fn request(root: &Path, request: Req) -> Req {
    let map = |path: &mut String| {
        if !path.is_empty() {
            *path = under(root, path).to_string_lossy().into_owned();
        }
    };
    let mut request = request;
    match &mut request {
        Req::NodeStageVolume(r) => map(&mut r.staging_target_path),
        Req::NodeUnstageVolume(r) => map(&mut r.staging_target_path),
        Req::NodePublishVolume(r) => {
            map(&mut r.staging_target_path);
            map(&mut r.target_path);
        }
        Req::NodeUnpublishVolume(r) => map(&mut r.target_path),
        Req::NodeGetVolumeStats(r) => {
            map(&mut r.volume_path);
            map(&mut r.staging_target_path);
        }
        Req::NodeExpandVolume(r) => {
            map(&mut r.volume_path);
            map(&mut r.staging_target_path);
        }
        _ => {}
    }
    request
}

/// Whether `method` names node paths the mirror moves.
pub fn names_paths(method: crate::hub::Method) -> bool {
    use crate::hub::Method as M;
    matches!(
        method,
        M::NodeStageVolume
            | M::NodeUnstageVolume
            | M::NodePublishVolume
            | M::NodeUnpublishVolume
            | M::NodeGetVolumeStats
            | M::NodeExpandVolume
    )
}

/// `path` (in the peer's filesystem) under `root`: an absolute one at the same place below
/// `root`, any other as one opaque name in `<root>/.unmapped` (module doc). Never outside
/// `root`, never relative.
fn under(root: &Path, path: &str) -> PathBuf {
    let p = Path::new(path);
    let parts = p.components();
    let mappable = p.is_absolute()
        && parts
            .clone()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
        && parts.clone().nth(1) != Some(Component::Normal(UNMAPPED.as_ref()));
    let mut out = root.to_path_buf();
    if mappable {
        out.extend(parts.filter(|c| matches!(c, Component::Normal(_))));
    } else {
        out.push(UNMAPPED);
        out.push(URL_SAFE_NO_PAD.encode(digest(&SHA256, path.as_bytes())));
    }
    out
}

/// Makes `dir` and its missing parents, as the CO makes a staging directory or a target's
/// parent before the call that names it.
pub fn make_dir(dir: &Path) -> Result<(), Status> {
    fs::create_dir_all(dir).map_err(|e| {
        Status::internal(format!(
            "making {} for the plugin (the appliance's copy of the node's path): {e}",
            dir.display()
        ))
    })
}

/// Removes `path` if it is an empty directory or empty file and no mount point, then each
/// parent up to `root` (not `root` itself) while it is empty: what the mirror made for one
/// call, once the plugin is done with it.
pub fn prune(root: &Path, path: &Path) {
    if !path.starts_with(root) || path == root {
        return;
    }
    super::remove_leftover(path);
    let mut dir = path.parent();
    while let Some(d) = dir.filter(|d| *d != root && d.starts_with(root)) {
        match fs::remove_dir(d) {
            Ok(()) => dir = d.parent(),
            // Not empty (another volume's paths, or the plugin's), or gone: stop there.
            Err(e) if e.kind() == ErrorKind::NotFound => dir = d.parent(),
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hub::v1;

    fn unpublish(root: &Path, target_path: &str) -> String {
        let r = request(
            root,
            Req::NodeUnpublishVolume(v1::NodeUnpublishVolumeRequest {
                volume_id: "v".into(),
                target_path: target_path.into(),
            }),
        );
        let Req::NodeUnpublishVolume(r) = r else {
            unreachable!()
        };
        r.target_path
    }

    #[test]
    fn paths_move_under_the_root_and_may_not_leave_it() {
        let root = Path::new("/srv/node-paths");
        let r = request(
            root,
            Req::NodePublishVolume(v1::NodePublishVolumeRequest {
                volume_id: "v".into(),
                staging_target_path: "/var/lib/kubelet/plugins/x/globalmount".into(),
                target_path: "/var/lib/kubelet/pods/u/volumes/mount".into(),
                ..Default::default()
            }),
        );
        let Req::NodePublishVolume(r) = r else {
            unreachable!()
        };
        assert_eq!(
            r.staging_target_path,
            "/srv/node-paths/var/lib/kubelet/plugins/x/globalmount"
        );
        assert_eq!(
            r.target_path,
            "/srv/node-paths/var/lib/kubelet/pods/u/volumes/mount"
        );
        assert_eq!(unpublish(root, "//a/./b/"), "/srv/node-paths/a/b");
        // An empty path is the plugin's to refuse.
        assert_eq!(unpublish(root, ""), "");
    }

    /// (path, whether the mirror maps it to the same place): what it cannot map becomes one
    /// opaque name under `.unmapped`, the same for the same path, another for another path.
    #[test]
    fn a_path_it_cannot_map_is_one_opaque_name_under_the_root() {
        let root = Path::new("/srv/node-paths");
        let cases = [
            ("/var/lib/kubelet/pods/u/mount", true),
            ("some/path", false),
            ("./some/path", false),
            ("some", false),
            (".", false),
            ("..", false),
            ("/var/lib/../../etc", false),
            ("/a/b/..", false),
            ("../../../etc/passwd", false),
            // What an unmappable path turns into, sent back: another name.
            ("/.unmapped/x", false),
            ("/a/.unmapped", true),
        ];
        let mut names = std::collections::HashSet::new();
        for (path, mappable) in cases {
            let out = unpublish(root, path);
            let out = Path::new(&out);
            assert!(
                out.is_absolute() && out.starts_with(root),
                "{path}: {out:?}"
            );
            assert!(
                out.components()
                    .all(|c| matches!(c, Component::RootDir | Component::Normal(_))),
                "{path}: {out:?}"
            );
            let opaque = out.parent() == Some(root.join(UNMAPPED).as_path());
            assert_eq!(opaque, !mappable, "{path}: {out:?}");
            if opaque {
                let name = out.file_name().unwrap().to_str().unwrap();
                assert_eq!(name.len(), 43, "SHA-256, base64url: {name}");
                assert!(!name.contains(['/', '.']), "{name}");
            }
            assert!(
                names.insert(out.to_path_buf()),
                "{path}: {out:?} seen before"
            );
            // The same path, the same name: an unpublish finds what its publish made.
            assert_eq!(unpublish(root, path), out.to_string_lossy());
        }
        // Every field that names a path, in each call that names one.
        let r = request(
            root,
            Req::NodeGetVolumeStats(v1::NodeGetVolumeStatsRequest {
                volume_id: "v".into(),
                volume_path: "some/path".into(),
                staging_target_path: "rel".into(),
            }),
        );
        let Req::NodeGetVolumeStats(r) = r else {
            unreachable!()
        };
        assert!(r.volume_path.starts_with("/srv/node-paths/.unmapped/"));
        assert!(r
            .staging_target_path
            .starts_with("/srv/node-paths/.unmapped/"));
        let r = request(
            root,
            Req::NodeExpandVolume(v1::NodeExpandVolumeRequest {
                volume_id: "v".into(),
                volume_path: "some/path".into(),
                ..Default::default()
            }),
        );
        let Req::NodeExpandVolume(r) = r else {
            unreachable!()
        };
        assert!(r.volume_path.starts_with("/srv/node-paths/.unmapped/"));
    }

    #[test]
    fn pruning_removes_empty_leftovers_up_to_the_root_only() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let a = root.join("var/lib/kubelet/pods/a/mount");
        let b = root.join("var/lib/kubelet/pods/b/mount");
        make_dir(&a).unwrap();
        make_dir(&b).unwrap();
        prune(&root, &a);
        assert!(!root.join("var/lib/kubelet/pods/a").exists());
        assert!(b.is_dir(), "another volume's path stays");
        prune(&root, &b);
        assert!(root.is_dir() && fs::read_dir(&root).unwrap().next().is_none());
        // What the plugin keeps (content) stays, and so do its parents.
        make_dir(&a).unwrap();
        fs::write(a.join("data"), b"x").unwrap();
        prune(&root, &a);
        assert!(a.join("data").exists());
        // Nothing outside the root is touched.
        let outside = dir.path().join("outside");
        make_dir(&outside).unwrap();
        prune(&root, &outside);
        assert!(outside.is_dir());
    }
}
