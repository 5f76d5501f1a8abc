//! Target paths between a v1 client and an older plugin. v1 made the plugin responsible for
//! `target_path` ("the SP MUST delete the file or directory it created"; kubelet and csi-sanity
//! leave it to the plugin), while v0.x said the CO creates it and the plugin mounts onto it. A
//! v1 client of a v0.x plugin leaves that gap to the gateway, which acts as the plugin side:
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

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use crate::dialect::Dialect;
use crate::disk::off_runtime;
use crate::grpc::Status;
use crate::hub::{v1, Request as Req, Response as Resp};
use crate::staging::Emulation;
use crate::translate::{errors, CallError, HandleStore, RawUpstream, UpstreamSession};
use csi_gateway_backend::engine::mounter::is_mount_point;

/// Whether the gateway owns the target path between a `front` client and an `upstream` plugin.
pub fn owns_targets(front: Dialect, upstream: Dialect) -> bool {
    front == Dialect::V1 && upstream != Dialect::V1
}

/// [`crate::staging::call_upstream`], with target paths handled where [`owns_targets`] and the
/// plugin's failures passed through [`errors::CODES`] for the client's revision.
pub async fn call_upstream(
    emulation: Option<&Emulation>,
    front: Dialect,
    session: &UpstreamSession,
    upstream: &dyn RawUpstream,
    store: Option<&dyn HandleStore>,
    request: Req,
) -> Result<Resp, CallError> {
    let call = |req| crate::staging::call_upstream(emulation, front, session, upstream, store, req);
    let (method, plugin) = (request.method(), session.dialect);
    let owns = owns_targets(front, plugin);
    match request {
        Req::NodePublishVolume(r) if owns => {
            let target = PathBuf::from(&r.target_path);
            let block = is_block(&r);
            let made = target.clone();
            let created = off_runtime(WHAT, move || create(&made, block)).await??;
            let out = call(Req::NodePublishVolume(r)).await;
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
            if let Some(why) = off_runtime(WHAT, move || nothing_published(&seen)).await? {
                tracing::debug!(target_path = %target.display(), why, "NodeUnpublishVolume answered without the plugin: nothing is published there");
                off_runtime(WHAT, move || remove_leftover(&target)).await?;
                return Ok(Resp::NodeUnpublishVolume(Default::default()));
            }
            let out = match call(Req::NodeUnpublishVolume(r)).await {
                Ok(resp) => Ok(resp),
                Err(s) => remap_off_runtime(front, plugin, &target, s).await,
            };
            if out.is_ok() {
                off_runtime(WHAT, move || remove_leftover(&target)).await?;
            }
            out
        }
        Req::NodeUnpublishVolume(r) => {
            let target = PathBuf::from(&r.target_path);
            match call(Req::NodeUnpublishVolume(r)).await {
                Ok(resp) => Ok(resp),
                Err(s) => remap_off_runtime(front, plugin, &target, s).await,
            }
        }
        other => call(other)
            .await
            .or_else(|e| errors::recode_call(method, plugin, front, e)),
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
            tracing::debug!(target_path = %target.display(), block, "created the target path for a v0.x plugin");
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
    fn not_found_on_unpublish_is_ok_only_for_v1_clients_of_older_plugins() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("t").display().to_string();
        let nf = || CallError::upstream(Status::not_found("volume gone"));
        for up in [Dialect::V0_3, Dialect::V0_1, Dialect::V0_1Oneof] {
            assert!(remap(Dialect::V1, up, &t, nf()).is_ok(), "{up}");
            assert!(owns_targets(Dialect::V1, up));
        }
        assert!(!owns_targets(Dialect::V1, Dialect::V1));
        assert!(!owns_targets(Dialect::V0_3, Dialect::V0_1));
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
