//! The appliance's mirror of its peers' node paths. A node gateway's calls name paths in its
//! CO's filesystem (kubelet's `staging_target_path` and `target_path`), on another host: none
//! of them exists next to the appliance's plugin, and a v0.x plugin there expects the CO to
//! have made them. The appliance listener therefore hands its plugin each such path under
//! `appliance.node_paths` instead (`/var/lib/kubelet/pods/…/mount` becomes
//! `<node_paths>/var/lib/kubelet/pods/…/mount`), makes there what the CO would have made
//! (the staging directory, the target's parent), and after an unstage or unpublish removes what
//! is left of it, up to the root: only empty directories and empty files that are not mount
//! points, so nothing the plugin keeps is ever removed.

use std::fs;
use std::io::ErrorKind;
use std::path::{Component, Path, PathBuf};

use crate::grpc::Status;
use crate::hub::Request as Req;

/// `request` with every node path it names moved under `root`; INVALID_ARGUMENT for a path
/// that is relative or climbs (`..`), which could leave the root. An empty path stays empty:
/// the plugin refuses it as it would have.
pub fn request(root: &Path, request: Req) -> Result<Req, Status> {
    let map = |field: &'static str, path: &mut String| -> Result<(), Status> {
        if !path.is_empty() {
            *path = under(root, field, path)?.to_string_lossy().into_owned();
        }
        Ok(())
    };
    let mut request = request;
    match &mut request {
        Req::NodeStageVolume(r) => map("staging_target_path", &mut r.staging_target_path)?,
        Req::NodeUnstageVolume(r) => map("staging_target_path", &mut r.staging_target_path)?,
        Req::NodePublishVolume(r) => {
            map("staging_target_path", &mut r.staging_target_path)?;
            map("target_path", &mut r.target_path)?;
        }
        Req::NodeUnpublishVolume(r) => map("target_path", &mut r.target_path)?,
        Req::NodeGetVolumeStats(r) => {
            map("volume_path", &mut r.volume_path)?;
            map("staging_target_path", &mut r.staging_target_path)?;
        }
        Req::NodeExpandVolume(r) => {
            map("volume_path", &mut r.volume_path)?;
            map("staging_target_path", &mut r.staging_target_path)?;
        }
        _ => {}
    }
    Ok(request)
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

/// `path` (absolute, in the peer's filesystem) under `root`.
fn under(root: &Path, field: &str, path: &str) -> Result<PathBuf, Status> {
    let p = Path::new(path);
    if !p.is_absolute() {
        return Err(Status::invalid_argument(format!(
            "{field} {path:?} must be an absolute path"
        )));
    }
    let mut out = root.to_path_buf();
    for c in p.components() {
        match c {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(part) => out.push(part),
            Component::ParentDir | Component::Prefix(_) => {
                return Err(Status::invalid_argument(format!(
                    "{field} {path:?} must not contain \"..\""
                )))
            }
        }
    }
    Ok(out)
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
        )
        .unwrap();
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
        for bad in ["relative/mount", "/var/lib/../../etc"] {
            let e = request(
                root,
                Req::NodeUnpublishVolume(v1::NodeUnpublishVolumeRequest {
                    volume_id: "v".into(),
                    target_path: bad.into(),
                }),
            )
            .unwrap_err();
            assert_eq!(e.code(), tonic::Code::InvalidArgument, "{bad}");
            assert!(e.message().contains("target_path"), "{}", e.message());
        }
        // An empty path is the plugin's to refuse.
        let r = request(
            root,
            Req::NodeUnstageVolume(v1::NodeUnstageVolumeRequest {
                volume_id: "v".into(),
                staging_target_path: String::new(),
            }),
        )
        .unwrap();
        assert!(matches!(r, Req::NodeUnstageVolume(r) if r.staging_target_path.is_empty()));
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
