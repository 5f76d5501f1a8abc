//! Target paths between a v1 client and an older plugin, and which hop owns them. v1 made the
//! plugin responsible for `target_path` ("the SP MUST delete the file or directory it
//! created"; kubelet and csi-sanity leave it to the plugin), while v0.x said the CO creates it
//! and the plugin mounts onto it. The gateway that shares the CO's filesystem fills that gap, as
//! the plugin side ([`Side`]):
//!
//! - before NodePublishVolume it creates a missing target — a directory for mount access, an
//!   empty file for block access (the parent is the CO's, as v1 says; it is never created);
//! - after a successful NodeUnpublishVolume it removes the target if it is an empty directory
//!   or an empty file that is not a mount point (/proc/self/mountinfo) — never anything else;
//! - a publish the plugin refused removes a target this call created, on the same terms;
//! - a NodeUnpublishVolume of a target where nothing is published (no such path, or an empty
//!   directory or file that is not a mount point) is answered OK without the plugin, as v1
//!   says, after removing it: a 2018 v0.x driver answers INTERNAL ("no mount point
//!   specified") for it, and kubelet after a crash and csi-sanity's clean-up both send it.
//!
//! A node gateway whose plugin is across the bridge does the first three for a v1 client
//! whatever the plugin's dialect, since the plugin's host has none of the CO's paths; whether
//! anything is published is then the far side's to tell, so every unpublish goes on. The
//! appliance gateway never touches its peers' paths: it gives its plugin a mirror of them
//! ([`mirror`]), where the rules above apply as between a local CO and plugin.
//!
//! All of it runs off the runtime ([`crate::disk`]).
//!
//! No record is kept of which targets the gateway made: the removal rule is safe for any path
//! (nothing mounted, nothing inside), so a gateway restarted between creating a target and the
//! publish, or between the unpublish and the removal, converges when the CO retries — create
//! and remove are both no-ops when already done.
//!
//! Every translated call's failure passes through [`errors::CODES`] here: NOT_FOUND from a v0.x
//! plugin's NodeUnpublishVolume is OK for a v1 client unless the target is still mounted, and
//! its ControllerUnpublishVolume's NOT_FOUND (volume or node gone) is OK for a v1 client.

pub mod mirror;

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use crate::dialect::Dialect;
use crate::disk::off_runtime;
use crate::grpc::Status;
use crate::hub::{v1, Method, Request as Req, Response as Resp};
use crate::translate::{errors, CallError};

use super::Pipeline;
use csi_gateway_mountinfo::is_mount_point;

/// Where the CO that made a call keeps its node paths, seen from this gateway.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side<'a> {
    /// A client on this host, of a plugin on this host: one filesystem for all three.
    Local,
    /// A client on this host, of a plugin across the bridge: the CO's paths are here, and the
    /// plugin's mounts are on its own host.
    Bridged,
    /// A node gateway on another host, on the appliance listener: its CO's paths are given to
    /// the plugin here under `root` ([`mirror`]).
    Appliance { root: &'a Path },
}

impl<'a> Side<'a> {
    /// The side of a call from a `bridge_peer` (the appliance listener) or a local client, to
    /// an upstream reached over the bridge or not; `root` is `appliance.node_paths`.
    pub fn of(bridge_peer: bool, bridged_upstream: bool, root: Option<&'a Path>) -> Side<'a> {
        match (bridge_peer, root) {
            (true, Some(root)) => Side::Appliance { root },
            _ if bridged_upstream => Side::Bridged,
            _ => Side::Local,
        }
    }
}

/// Whether the gateway owns the target path between a `front` client and an `upstream`
/// plugin, on this `side`.
pub fn owns_targets(side: Side, front: Dialect, upstream: Dialect) -> bool {
    match side {
        Side::Bridged => front == Dialect::V1,
        Side::Local | Side::Appliance { .. } => {
            csi_gateway_translate::gateway_owns_targets(front, upstream)
        }
    }
}

/// Whether the gateway acts around `method` itself on this `side` (so the call cannot pass to
/// the plugin untouched): target paths it owns, or paths the appliance mirrors.
pub fn acts_on(side: Side, front: Dialect, upstream: Dialect, method: Method) -> bool {
    match side {
        Side::Appliance { .. } => mirror::names_paths(method),
        _ => {
            matches!(
                method,
                Method::NodePublishVolume | Method::NodeUnpublishVolume
            ) && owns_targets(side, front, upstream)
        }
    }
}

impl Pipeline<'_> {
    /// The call on the `Local` or `Bridged` side: target paths where the gateway owns them.
    pub(super) async fn targeted(&self, side: Side<'_>, request: Req) -> Result<Resp, CallError> {
        let (front, plugin) = (self.front, self.session.dialect);
        let method = request.method();
        let owns = owns_targets(side, front, plugin);
        // Only the plugin's side can tell what is published there: across the bridge, the CO's
        // target never holds the plugin's mount.
        let sees_mounts = side != Side::Bridged;
        match request {
            Req::NodePublishVolume(r) if owns => {
                let target = PathBuf::from(&r.target_path);
                let block = is_block(&r);
                let made = target.clone();
                let created = off_runtime(WHAT, move || create(&made, block)).await??;
                let out = self.staged(Req::NodePublishVolume(r)).await;
                if out.is_err() && created {
                    off_runtime(WHAT, move || remove_leftover(&target)).await?;
                }
                out
            }
            // A request missing what v1 requires goes on, to be refused as everywhere else.
            Req::NodeUnpublishVolume(r)
                if owns && !r.volume_id.is_empty() && !r.target_path.is_empty() =>
            {
                let target = PathBuf::from(&r.target_path);
                let seen = target.clone();
                let nothing = match sees_mounts {
                    true => off_runtime(WHAT, move || nothing_published(&seen)).await?,
                    false => None,
                };
                if let Some(why) = nothing {
                    tracing::debug!(target_path = %target.display(), why, "NodeUnpublishVolume answered without the plugin: nothing is published there");
                    off_runtime(WHAT, move || remove_leftover(&target)).await?;
                    return Ok(Resp::NodeUnpublishVolume(Default::default()));
                }
                let out = match self.staged(Req::NodeUnpublishVolume(r)).await {
                    Ok(resp) => Ok(resp),
                    Err(s) if sees_mounts => remap_off_runtime(front, plugin, &target, s).await,
                    Err(s) => Err(s),
                };
                if out.is_ok() {
                    off_runtime(WHAT, move || remove_leftover(&target)).await?;
                }
                out
            }
            Req::NodeUnpublishVolume(r) => {
                let target = PathBuf::from(&r.target_path);
                match self.staged(Req::NodeUnpublishVolume(r)).await {
                    Ok(resp) => Ok(resp),
                    Err(s) => remap_off_runtime(front, plugin, &target, s).await,
                }
            }
            other => self
                .staged(other)
                .await
                .or_else(|e| errors::recode_call(method, plugin, front, e)),
        }
    }

    /// The call of a node gateway on the appliance listener: its paths given to the plugin under
    /// `root`, with what its CO would have made there made first (the staging directory, the
    /// target's parent) and, once the plugin is done with a path, what is left of it removed.
    pub(super) async fn mirrored(&self, root: &Path, request: Req) -> Result<Resp, CallError> {
        let request = mirror::request(root, request);
        // What to make first; what is left to remove once the plugin succeeded, or failed.
        let (made, done_with, failed_clean_up) = match &request {
            Req::NodeStageVolume(r) => {
                let staging = Some(r.staging_target_path.clone());
                (staging.clone(), None, staging)
            }
            Req::NodeUnstageVolume(r) => (None, Some(r.staging_target_path.clone()), None),
            Req::NodePublishVolume(r) => {
                let parent = Path::new(&r.target_path).parent();
                let parent = parent.map(|p| p.display().to_string());
                (parent, None, Some(r.target_path.clone()))
            }
            Req::NodeUnpublishVolume(r) => (None, Some(r.target_path.clone()), None),
            _ => (None, None, None),
        };
        if let Some(dir) = made.filter(|d| !d.is_empty()) {
            off_runtime(WHAT, move || mirror::make_dir(Path::new(&dir))).await??;
        }
        let out = self.targeted(Side::Local, request).await;
        let leftover = match out.is_ok() {
            true => done_with,
            false => failed_clean_up,
        };
        if let Some(path) = leftover.filter(|p| !p.is_empty()) {
            let root = root.to_path_buf();
            off_runtime(WHAT, move || mirror::prune(&root, Path::new(&path))).await?;
        }
        out
    }
}

/// What [`off_runtime`] says of a task of this module that failed.
const WHAT: &str = "target path";

/// Why nothing can be published at `target`, if so: it does not exist, or it is an empty
/// directory or empty file and no mount point. Anything else (a mount, a link, content, a
/// path that cannot be read) is the plugin's to judge.
fn nothing_published(target: &Path) -> Option<&'static str> {
    let meta = match fs::symlink_metadata(target) {
        Err(e) if e.kind() == ErrorKind::NotFound => return Some("the target path does not exist"),
        Err(_) => return None,
        Ok(meta) => meta,
    };
    // A mountinfo that cannot be read tells nothing: the plugin judges.
    if is_mount_point(target).unwrap_or(true) {
        return None;
    }
    if meta.is_dir() {
        let empty = fs::read_dir(target).is_ok_and(|mut d| d.next().is_none());
        return empty.then_some("the target path is an empty directory, not a mount point");
    }
    let empty_file = meta.is_file() && meta.len() == 0;
    empty_file.then_some("the target path is an empty file, not a mount point")
}

fn is_block(r: &v1::NodePublishVolumeRequest) -> bool {
    use v1::volume_capability::AccessType;
    matches!(
        r.volume_capability
            .as_ref()
            .and_then(|c| c.access_type.as_ref()),
        Some(AccessType::Block(_))
    )
}

/// Creates a missing target; true when this call created it.
fn create(target: &Path, block: bool) -> Result<bool, Status> {
    if fs::symlink_metadata(target).is_ok() {
        return Ok(false);
    }
    let made = if block {
        fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(target)
            .map(drop)
    } else {
        fs::create_dir(target)
    };
    match made {
        Ok(()) => {
            tracing::debug!(target_path = %target.display(), block, "created the target path, as the plugin side of a v1 client");
            Ok(true)
        }
        // A concurrent retry of the same publish made it first.
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(Status::internal(format!(
            "creating target_path {} for the plugin (a CSI v0.x plugin expects it to exist; the \
             CO must create its parent directory): {e}",
            target.display()
        ))),
    }
}

/// Removes the target if it is an empty directory or empty file and not a mount point.
fn remove_leftover(target: &Path) {
    match is_mount_point(target) {
        Ok(false) => {}
        Ok(true) => {
            tracing::warn!(target_path = %target.display(), "target path is still a mount point: left in place");
            return;
        }
        Err(e) => {
            tracing::warn!(target_path = %target.display(), error = %e, "cannot tell whether the target path is a mount point: left in place");
            return;
        }
    }
    let removed = match fs::symlink_metadata(target) {
        Ok(m) if m.is_dir() => fs::remove_dir(target),
        Ok(m) if m.is_file() && m.len() == 0 => fs::remove_file(target),
        // Gone already, a link, or a file with data: not the gateway's to remove.
        _ => return,
    };
    match removed {
        Ok(()) => {
            tracing::debug!(target_path = %target.display(), "removed the target path after unpublish")
        }
        // A directory with something in it is not an empty target: left alone.
        Err(e) => {
            tracing::debug!(target_path = %target.display(), error = %e, "target path left in place")
        }
    }
}

/// [`remap`], its mount check off the runtime.
async fn remap_off_runtime(
    front: Dialect,
    upstream: Dialect,
    target: &Path,
    e: CallError,
) -> Result<Resp, CallError> {
    let target = target.display().to_string();
    off_runtime(WHAT, move || remap(front, upstream, &target, e)).await?
}

/// A NodeUnpublishVolume failure through [`errors::CODES`]; a row never applies while the
/// target is still mounted (the CO must not forget a mount that exists).
fn remap(front: Dialect, upstream: Dialect, target: &str, e: CallError) -> Result<Resp, CallError> {
    let method = crate::hub::Method::NodeUnpublishVolume;
    if errors::code_row(method, upstream, front, e.code()).is_none()
        // Unknown (mountinfo unreadable) counts as mounted: the plugin's answer stands.
        || is_mount_point(Path::new(target)).unwrap_or(true)
    {
        return Err(e);
    }
    errors::recode_call(method, upstream, front, e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Origin;

    #[test]
    fn creates_a_dir_or_file_and_removes_only_empty_unmounted_ones() {
        let dir = tempfile::tempdir().unwrap();
        let mount = dir.path().join("mount");
        assert!(create(&mount, false).unwrap());
        assert!(mount.is_dir());
        assert!(!create(&mount, false).unwrap(), "exists: not created again");
        let block = dir.path().join("block");
        assert!(create(&block, true).unwrap());
        assert!(block.is_file());
        remove_leftover(&mount);
        remove_leftover(&block);
        assert!(!mount.exists() && !block.exists());
        // A target with content is not the gateway's to remove.
        fs::create_dir(&mount).unwrap();
        fs::write(mount.join("data"), b"x").unwrap();
        remove_leftover(&mount);
        assert!(mount.join("data").exists());
        fs::write(&block, b"data").unwrap();
        remove_leftover(&block);
        assert!(block.exists());
        // No parent: the CO's job; refused, nothing created.
        let orphan = dir.path().join("no-parent").join("t");
        assert_eq!(
            create(&orphan, false).unwrap_err().code(),
            tonic::Code::Internal
        );
        assert!(!orphan.exists());
    }

    #[test]
    fn nothing_is_published_at_a_missing_or_empty_unmounted_target() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("t");
        assert!(nothing_published(&t).is_some(), "missing");
        fs::create_dir(&t).unwrap();
        assert!(nothing_published(&t).is_some(), "empty directory");
        fs::write(t.join("data"), b"x").unwrap();
        assert!(nothing_published(&t).is_none(), "a directory with content");
        let f = dir.path().join("f");
        fs::write(&f, b"").unwrap();
        assert!(nothing_published(&f).is_some(), "empty file");
        fs::write(&f, b"data").unwrap();
        assert!(nothing_published(&f).is_none(), "a file with data");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&t, &link).unwrap();
        assert!(
            nothing_published(&link).is_none(),
            "a link (a symlink-mode publish)"
        );
        assert!(
            nothing_published(Path::new("/proc")).is_none(),
            "a mount point"
        );
    }

    #[test]
    fn the_hop_sharing_the_cos_filesystem_owns_its_targets() {
        let root = Path::new("/srv/node-paths");
        let appliance = Side::Appliance { root };
        for up in Dialect::ALL {
            // Across the bridge, whatever the plugin speaks: its host has no CO paths.
            assert!(owns_targets(Side::Bridged, Dialect::V1, up), "{up}");
            assert!(acts_on(
                Side::Bridged,
                Dialect::V1,
                up,
                Method::NodePublishVolume
            ));
            assert!(!acts_on(
                Side::Bridged,
                Dialect::V1,
                up,
                Method::NodeStageVolume
            ));
            // The appliance mirrors every node path, for any client.
            for front in Dialect::ALL {
                assert!(acts_on(appliance, front, up, Method::NodeStageVolume));
                assert!(!acts_on(appliance, front, up, Method::CreateVolume));
            }
        }
        // A v0.x client creates its own targets, on any side.
        assert!(!owns_targets(Side::Bridged, Dialect::V0_3, Dialect::V1));
        assert!(!acts_on(
            Side::Local,
            Dialect::V1,
            Dialect::V1,
            Method::NodePublishVolume
        ));
        assert_eq!(Side::of(true, false, Some(root)), appliance);
        assert_eq!(Side::of(false, true, Some(root)), Side::Bridged);
        assert_eq!(Side::of(false, false, None), Side::Local);
    }

    #[test]
    fn not_found_on_unpublish_is_ok_only_for_v1_clients_of_older_plugins() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("t").display().to_string();
        let nf = || CallError::upstream(Status::not_found("volume gone"));
        for up in [Dialect::V0_3, Dialect::V0_1, Dialect::V0_1Oneof] {
            assert!(remap(Dialect::V1, up, &t, nf()).is_ok(), "{up}");
            assert!(owns_targets(Side::Local, Dialect::V1, up));
        }
        assert!(!owns_targets(Side::Local, Dialect::V1, Dialect::V1));
        assert!(!owns_targets(Side::Local, Dialect::V0_3, Dialect::V0_1));
        let e = remap(Dialect::V0_3, Dialect::V0_1, &t, nf()).unwrap_err();
        assert_eq!(e.code(), tonic::Code::NotFound);
        assert_eq!(e.origin, Origin::Upstream, "passed on, still the plugin's");
        // A target that is still a mount point keeps NOT_FOUND: the CO must not forget it.
        assert!(
            is_mount_point(Path::new("/proc")).unwrap(),
            "/proc is a mount point"
        );
        let e = remap(Dialect::V1, Dialect::V0_3, "/proc", nf()).unwrap_err();
        assert_eq!(e.code(), tonic::Code::NotFound);
        let e = remap(Dialect::V1, Dialect::V0_3, &t, Status::internal("x").into()).unwrap_err();
        assert_eq!(
            (e.code(), e.origin),
            (tonic::Code::Internal, Origin::Gateway)
        );
    }
}
