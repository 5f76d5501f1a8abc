//! `csi-gateway check --conformance`: a lifecycle scenario of the gateway's own, run against any
//! CSI endpoint in its detected dialect, for operators vetting an unknown driver. Each row is
//! one call (or a pair, for idempotency) with the answer the endpoint's revision of the spec
//! prescribes; the calls go through the hub, translated to the endpoint's dialect as the
//! gateway would send them. Steps the plugin does not advertise (controller publish, staging)
//! are skipped, not failed. The scenario creates one volume (named after the process and the
//! time) and deletes it again.
//!
//! As a CO splits its calls, controller calls may go to an endpoint of their own (a controller
//! gateway) while identity and node calls go to the node's. With [`Options::check_mounts`] the
//! caller stands where kubelet does — sharing the node's mounts — and the rows also check what
//! a node plugin's publish leaves there: a mount at the target, data written through it kept in
//! the volume, and no mount (nor, for a v1 endpoint, target) after the unpublish.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use crate::dialect::Dialect;
use crate::endpoint::Endpoint;
use crate::grpc::{Code, Status};
use crate::hub::{v1, Request, Response};
use crate::translate::{self, HandleStore, StoreFuture, UpstreamSession};
use crate::upstream::{detect, Connection};
use csi_gateway_mountinfo::is_mount_point;

/// How one row went.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Pass(String),
    Fail(String),
    Skip(String),
}

#[derive(Debug)]
pub struct Row {
    pub name: String,
    pub verdict: Verdict,
}

/// The scenario's rows, in order.
#[derive(Debug)]
pub struct Outcome {
    pub dialect: Dialect,
    /// The controller endpoint and its dialect, when controller calls went to one of their own.
    pub controller: Option<(Endpoint, Dialect)>,
    pub rows: Vec<Row>,
}

/// Where and how the scenario runs.
pub struct Options<'a> {
    /// Identity and node calls; controller calls too unless `controller` is set.
    pub endpoint: &'a Endpoint,
    pub controller: Option<&'a Endpoint>,
    /// Skip detection and assume this dialect (of both endpoints).
    pub dialect: Option<Dialect>,
    pub timeout: Duration,
    /// Staging and target paths are made under it.
    pub work: &'a Path,
    /// Check the node plugin's mounts from this process's mount namespace.
    pub check_mounts: bool,
}

impl Outcome {
    pub fn failed(&self) -> usize {
        self.rows
            .iter()
            .filter(|r| matches!(r.verdict, Verdict::Fail(_)))
            .count()
    }

    /// One line per row, then the totals.
    pub fn render(&self, endpoint: &Endpoint) -> String {
        let mut out = String::new();
        let _ = write!(out, "conformance of {endpoint} (dialect {})", self.dialect);
        if let Some((controller, dialect)) = &self.controller {
            let _ = write!(
                out,
                ", controller calls on {controller} (dialect {dialect})"
            );
        }
        let _ = writeln!(out);
        let (mut pass, mut skip) = (0, 0);
        for r in &self.rows {
            let (tag, text) = match &r.verdict {
                Verdict::Pass(t) => {
                    pass += 1;
                    ("PASS", t)
                }
                Verdict::Fail(t) => ("FAIL", t),
                Verdict::Skip(t) => {
                    skip += 1;
                    ("SKIP", t)
                }
            };
            let _ = writeln!(out, "{tag}  {:<52} {text}", r.name);
        }
        let _ = writeln!(
            out,
            "{pass} passed, {} failed, {skip} skipped",
            self.failed()
        );
        out
    }
}

/// VolumeHandle metadata of the scenario's volume, for a draft endpoint's id-only calls.
#[derive(Default)]
struct Memory(Mutex<HashMap<String, HashMap<String, String>>>);

impl HandleStore for Memory {
    fn put<'a>(&'a self, id: &'a str, md: &'a HashMap<String, String>) -> StoreFuture<'a, ()> {
        self.0
            .lock()
            .expect("handles")
            .insert(id.into(), md.clone());
        Box::pin(std::future::ready(Ok(())))
    }
    fn get<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<HashMap<String, String>>> {
        let found = self.0.lock().expect("handles").get(id).cloned();
        Box::pin(std::future::ready(Ok(found)))
    }
    fn remove<'a>(&'a self, id: &'a str) -> StoreFuture<'a, ()> {
        self.0.lock().expect("handles").remove(id);
        Box::pin(std::future::ready(Ok(())))
    }
}

/// One endpoint the scenario calls, detected.
struct Side {
    conn: Connection,
    session: UpstreamSession,
    dialect: Dialect,
}

impl Side {
    async fn open(
        endpoint: &Endpoint,
        dialect: Option<Dialect>,
        timeout: Duration,
    ) -> Result<Side, Status> {
        let conn = Connection::connect(endpoint, timeout)
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        let detected = tokio::time::timeout(timeout, detect::detect(&conn, dialect))
            .await
            .map_err(|_| {
                Status::deadline_exceeded(format!("detection on {endpoint} timed out"))
            })??;
        Ok(Side {
            conn,
            session: detected.session(),
            dialect: detected.dialect,
        })
    }
}

struct Scenario {
    node: Side,
    /// Controller calls' endpoint when it is not the node's.
    controller: Option<Side>,
    store: Memory,
    timeout: Duration,
    rows: Vec<Row>,
}

impl Scenario {
    /// The endpoint a CO sends `request` to.
    fn side(&self, request: &Request) -> &Side {
        match &self.controller {
            Some(c) if request.method().service() == "Controller" => c,
            _ => &self.node,
        }
    }

    fn controller(&self) -> &Side {
        self.controller.as_ref().unwrap_or(&self.node)
    }

    async fn call(&self, request: Request) -> Result<Response, Status> {
        let side = self.side(&request);
        let call = translate::call_upstream(&side.session, &side.conn, Some(&self.store), request);
        tokio::time::timeout(self.timeout, call)
            .await
            .map(|r| r.map_err(Status::from))
            .unwrap_or_else(|_| {
                Err(Status::deadline_exceeded(format!(
                    "no answer within {:?}",
                    self.timeout
                )))
            })
    }

    fn row(&mut self, name: &str, verdict: Verdict) {
        self.rows.push(Row {
            name: name.to_string(),
            verdict,
        });
    }

    /// A row that must succeed; `check` looks at the answer.
    async fn ok<T>(
        &mut self,
        name: &str,
        request: Request,
        check: impl FnOnce(Response) -> Result<(String, T), String>,
    ) -> Option<T> {
        let verdict = match self.call(request).await {
            Ok(r) => check(r),
            Err(s) => Err(status_text(&s)),
        };
        match verdict {
            Ok((text, value)) => {
                self.row(name, Verdict::Pass(text));
                Some(value)
            }
            Err(text) => {
                self.row(name, Verdict::Fail(text));
                None
            }
        }
    }

    /// A row that must fail with `code`.
    async fn refused(&mut self, name: &str, request: Request, code: Code) {
        let verdict = match self.call(request).await {
            Ok(_) => Verdict::Fail(format!("answered OK, expected {code:?}")),
            Err(s) if s.code() == code => Verdict::Pass(status_text(&s)),
            Err(s) => Verdict::Fail(format!("expected {code:?}, got {}", status_text(&s))),
        };
        self.row(name, verdict);
    }
}

fn status_text(s: &Status) -> String {
    format!("{:?}: {}", s.code(), s.message())
}

fn capability() -> v1::VolumeCapability {
    use v1::volume_capability::{access_mode::Mode, AccessMode, AccessType, MountVolume};
    v1::VolumeCapability {
        access_type: Some(AccessType::Mount(MountVolume::default())),
        access_mode: Some(AccessMode {
            mode: Mode::SingleNodeWriter as i32,
        }),
    }
}

fn wrong(r: &Response) -> String {
    format!("unexpected reply {:?}", r.method())
}

/// Runs the scenario as `options` say.
pub async fn run(options: &Options<'_>) -> Result<Outcome, Status> {
    let node = Side::open(options.endpoint, options.dialect, options.timeout).await?;
    let controller = match options.controller {
        Some(e) => Some(Side::open(e, options.dialect, options.timeout).await?),
        None => None,
    };
    let mut s = Scenario {
        node,
        controller,
        store: Memory::default(),
        timeout: options.timeout,
        rows: Vec::new(),
    };
    lifecycle(&mut s, options.work, options.check_mounts).await;
    let controller = options
        .controller
        .zip(s.controller.as_ref())
        .map(|(e, side)| (e.clone(), side.dialect));
    Ok(Outcome {
        dialect: s.node.dialect,
        controller,
        rows: s.rows,
    })
}

async fn lifecycle(s: &mut Scenario, work: &Path, check_mounts: bool) {
    // Controller rows answer in the controller's dialect.
    let dialect = s.controller().dialect;
    let plugin = s
        .ok(
            "GetPluginInfo names the plugin",
            Request::GetPluginInfo(Default::default()),
            |r| match r {
                Response::GetPluginInfo(i)
                    if !i.name.is_empty() && !i.vendor_version.is_empty() =>
                {
                    Ok((format!("{} {}", i.name, i.vendor_version), i.name))
                }
                Response::GetPluginInfo(i) => Err(format!(
                    "name {:?}, vendor_version {:?}: both are REQUIRED",
                    i.name, i.vendor_version
                )),
                r => Err(wrong(&r)),
            },
        )
        .await;
    if s.controller.is_some() {
        let verdict = same_plugin(s, plugin.as_deref()).await;
        s.row("GetPluginInfo on the controller: the same plugin", verdict);
    }
    s.ok(
        "Probe answers ready",
        Request::Probe(Default::default()),
        |r| match r {
            Response::Probe(p) if p.ready != Some(false) => Ok(("ready".into(), ())),
            Response::Probe(_) => Err("not ready".into()),
            r => Err(wrong(&r)),
        },
    )
    .await;
    let controller = s
        .ok(
            "ControllerGetCapabilities",
            Request::ControllerGetCapabilities(Default::default()),
            |r| match r {
                Response::ControllerGetCapabilities(c) => {
                    let rpcs = controller_rpcs(&c);
                    Ok((format!("{rpcs:?}"), rpcs))
                }
                r => Err(wrong(&r)),
            },
        )
        .await
        .unwrap_or_default();
    let node_caps = s
        .ok(
            "NodeGetCapabilities",
            Request::NodeGetCapabilities(Default::default()),
            |r| match r {
                Response::NodeGetCapabilities(c) => {
                    let rpcs = node_rpcs(&c);
                    Ok((format!("{rpcs:?}"), rpcs))
                }
                r => Err(wrong(&r)),
            },
        )
        .await
        .unwrap_or_default();
    let node = s
        .ok(
            "NodeGetInfo names the node",
            Request::NodeGetInfo(Default::default()),
            |r| match r {
                Response::NodeGetInfo(n) if !n.node_id.is_empty() => {
                    Ok((n.node_id.clone(), n.node_id))
                }
                Response::NodeGetInfo(_) => Err("empty node_id".into()),
                r => Err(wrong(&r)),
            },
        )
        .await;

    use v1::controller_service_capability::rpc::Type as C;
    use v1::node_service_capability::rpc::Type as N;
    if !controller.contains(&C::CreateDeleteVolume) {
        s.row(
            "CreateVolume / DeleteVolume",
            Verdict::Skip("CREATE_DELETE_VOLUME not advertised".into()),
        );
        return;
    }
    let name = format!(
        "csi-gateway-conformance-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or_default()
    );
    let create = || {
        Request::CreateVolume(v1::CreateVolumeRequest {
            name: name.clone(),
            capacity_range: Some(v1::CapacityRange {
                required_bytes: 1 << 20,
                limit_bytes: 0,
            }),
            volume_capabilities: vec![capability()],
            ..Default::default()
        })
    };
    let volume = s
        .ok("CreateVolume creates a volume", create(), |r| match r {
            Response::CreateVolume(v1::CreateVolumeResponse { volume: Some(v) })
                if !v.volume_id.is_empty() =>
            {
                Ok((format!("volume_id {:?}", v.volume_id), v))
            }
            r => Err(format!("no volume id in {r:?}")),
        })
        .await;
    let Some(volume) = volume else { return };
    let id = volume.volume_id.clone();
    s.ok(
        "CreateVolume again, same name: the same volume",
        create(),
        |r| match r {
            Response::CreateVolume(v1::CreateVolumeResponse { volume: Some(v) })
                if v.volume_id == id =>
            {
                Ok(("same volume_id".into(), ()))
            }
            r => Err(format!("expected volume_id {id:?}, got {r:?}")),
        },
    )
    .await;

    let published = match (&node, controller.contains(&C::PublishUnpublishVolume)) {
        (Some(node), true) => {
            s.ok(
                "ControllerPublishVolume to this node",
                Request::ControllerPublishVolume(v1::ControllerPublishVolumeRequest {
                    volume_id: id.clone(),
                    node_id: node.clone(),
                    volume_capability: Some(capability()),
                    volume_context: volume.volume_context.clone(),
                    ..Default::default()
                }),
                |r| match r {
                    Response::ControllerPublishVolume(p) => {
                        Ok(("published".into(), p.publish_context))
                    }
                    r => Err(wrong(&r)),
                },
            )
            .await
        }
        _ => {
            s.row(
                "ControllerPublishVolume",
                Verdict::Skip("PUBLISH_UNPUBLISH_VOLUME not advertised".into()),
            );
            None
        }
    };
    let publish_context = published.clone().unwrap_or_default();

    let staging = work.join("staging");
    let target = work.join("target").join("mount");
    let _ = std::fs::create_dir_all(&staging);
    let _ = std::fs::create_dir_all(target.parent().unwrap_or(work));
    let stages = node_caps.contains(&N::StageUnstageVolume);
    if stages {
        s.ok(
            "NodeStageVolume",
            Request::NodeStageVolume(v1::NodeStageVolumeRequest {
                volume_id: id.clone(),
                publish_context: publish_context.clone(),
                staging_target_path: path(&staging),
                volume_capability: Some(capability()),
                volume_context: volume.volume_context.clone(),
                ..Default::default()
            }),
            ok_reply,
        )
        .await;
    } else {
        s.row(
            "NodeStageVolume",
            Verdict::Skip("STAGE_UNSTAGE_VOLUME not advertised".into()),
        );
    }
    let publish = || {
        Request::NodePublishVolume(v1::NodePublishVolumeRequest {
            volume_id: id.clone(),
            publish_context: publish_context.clone(),
            staging_target_path: if stages {
                path(&staging)
            } else {
                String::new()
            },
            target_path: path(&target),
            volume_capability: Some(capability()),
            volume_context: volume.volume_context.clone(),
            ..Default::default()
        })
    };
    s.ok("NodePublishVolume", publish(), ok_reply).await;
    if check_mounts {
        s.row(
            "NodePublishVolume: the target is a mount here",
            mounted(&target),
        );
        s.row(
            "a file written through the target",
            write_marker(&target, &name),
        );
    }
    s.ok(
        "NodePublishVolume again: OK (idempotent)",
        publish(),
        ok_reply,
    )
    .await;
    let unpublish = || {
        Request::NodeUnpublishVolume(v1::NodeUnpublishVolumeRequest {
            volume_id: id.clone(),
            target_path: path(&target),
        })
    };
    s.ok("NodeUnpublishVolume", unpublish(), ok_reply).await;
    if check_mounts {
        let owned = s.node.dialect == Dialect::V1;
        s.row(
            "NodeUnpublishVolume: the mount is gone",
            unmounted(&target, owned),
        );
        // Published anew at a fresh target, the file is there only if it went to the volume.
        let verdict = match s.call(publish()).await {
            Err(e) => Verdict::Fail(format!("publishing again: {}", status_text(&e))),
            Ok(_) => {
                let found = read_marker(&target, &name);
                match s.call(unpublish()).await {
                    Err(e) => Verdict::Fail(format!("unpublishing again: {}", status_text(&e))),
                    Ok(_) => found,
                }
            }
        };
        s.row("published again: the file is in the volume", verdict);
    }
    s.ok(
        "NodeUnpublishVolume again: OK (idempotent)",
        unpublish(),
        ok_reply,
    )
    .await;
    if stages {
        s.ok(
            "NodeUnstageVolume",
            Request::NodeUnstageVolume(v1::NodeUnstageVolumeRequest {
                volume_id: id.clone(),
                staging_target_path: path(&staging),
            }),
            ok_reply,
        )
        .await;
    }
    if let (Some(_), Some(node)) = (&published, &node) {
        s.ok(
            "ControllerUnpublishVolume",
            Request::ControllerUnpublishVolume(v1::ControllerUnpublishVolumeRequest {
                volume_id: id.clone(),
                node_id: node.clone(),
                ..Default::default()
            }),
            ok_reply,
        )
        .await;
    }
    let delete = || {
        Request::DeleteVolume(v1::DeleteVolumeRequest {
            volume_id: id.clone(),
            ..Default::default()
        })
    };
    s.ok("DeleteVolume", delete(), ok_reply).await;
    // v0.1.0 made a second delete OK; the draft answered VOLUME_DOES_NOT_EXIST.
    if dialect == Dialect::V0_1Oneof {
        // The draft plugin's own answer: the gateway's translation would make it v1's OK.
        let verdict = draft_second_delete(s, &id, &volume.volume_context).await;
        s.row("DeleteVolume again: VOLUME_DOES_NOT_EXIST (draft)", verdict);
    } else {
        s.ok("DeleteVolume again: OK (idempotent)", delete(), ok_reply)
            .await;
    }

    // Error rows: what the spec says a plugin answers to a bad call.
    let mut nameless = match create() {
        Request::CreateVolume(r) => r,
        _ => unreachable!(),
    };
    nameless.name.clear();
    s.refused(
        "CreateVolume without a name: INVALID_ARGUMENT",
        Request::CreateVolume(nameless),
        Code::InvalidArgument,
    )
    .await;
    if dialect != Dialect::V0_1Oneof {
        s.refused(
            "DeleteVolume without a volume id: INVALID_ARGUMENT",
            Request::DeleteVolume(Default::default()),
            Code::InvalidArgument,
        )
        .await;
    }
    s.refused(
        "NodeUnpublishVolume without a target path: INVALID_ARGUMENT",
        Request::NodeUnpublishVolume(v1::NodeUnpublishVolumeRequest {
            volume_id: id.clone(),
            target_path: String::new(),
        }),
        Code::InvalidArgument,
    )
    .await;
    if let (Some(node), true) = (&node, controller.contains(&C::PublishUnpublishVolume)) {
        s.refused(
            "ControllerPublishVolume of an unknown volume: NOT_FOUND",
            Request::ControllerPublishVolume(v1::ControllerPublishVolumeRequest {
                volume_id: format!("{id}-missing"),
                node_id: node.clone(),
                volume_capability: Some(capability()),
                ..Default::default()
            }),
            Code::NotFound,
        )
        .await;
    }
}

/// Whether the controller endpoint names the plugin the node endpoint named.
async fn same_plugin(s: &Scenario, node_plugin: Option<&str>) -> Verdict {
    let side = s.controller();
    let call = translate::call_upstream(
        &side.session,
        &side.conn,
        Some(&s.store),
        Request::GetPluginInfo(Default::default()),
    );
    match tokio::time::timeout(s.timeout, call).await {
        Err(_) => Verdict::Fail(format!("no answer within {:?}", s.timeout)),
        Ok(Err(e)) => Verdict::Fail(status_text(&Status::from(e))),
        Ok(Ok(Response::GetPluginInfo(i))) if Some(i.name.as_str()) == node_plugin => {
            Verdict::Pass(i.name)
        }
        Ok(Ok(Response::GetPluginInfo(i))) => Verdict::Fail(format!(
            "{:?}, the node endpoint's is {node_plugin:?}: a CO takes them for two drivers",
            i.name
        )),
        Ok(Ok(r)) => Verdict::Fail(wrong(&r)),
    }
}

/// The file the mount rows write through the target.
const MARKER: &str = "csi-gateway-conformance";

/// Whether `target` is a mount point in this process's mount namespace.
fn mounted(target: &Path) -> Verdict {
    match is_mount_point(target) {
        Ok(true) => Verdict::Pass("in /proc/self/mountinfo".into()),
        Ok(false) => Verdict::Fail(format!(
            "{} is not a mount point in /proc/self/mountinfo (a symlink publish, or a mount \
             in another mount namespace that did not propagate here)",
            target.display()
        )),
        Err(e) => Verdict::Fail(e.to_string()),
    }
}

/// Writes the volume's name into a file at the target.
fn write_marker(target: &Path, name: &str) -> Verdict {
    let file = target.join(MARKER);
    let written = std::fs::write(&file, name).and_then(|()| std::fs::read_to_string(&file));
    match written {
        Ok(back) if back == name => Verdict::Pass(format!("{} written", file.display())),
        Ok(back) => Verdict::Fail(format!("read back {back:?}, wrote {name:?}")),
        Err(e) => Verdict::Fail(format!("{}: {e}", file.display())),
    }
}

/// Whether the file [`write_marker`] wrote is at the target again.
fn read_marker(target: &Path, name: &str) -> Verdict {
    let file = target.join(MARKER);
    match std::fs::read_to_string(&file) {
        Ok(text) if text == name => Verdict::Pass(format!("{} read back", file.display())),
        Ok(text) => Verdict::Fail(format!("{} holds {text:?}", file.display())),
        Err(e) => Verdict::Fail(format!("{}: {e}", file.display())),
    }
}

/// No mount at `target`; and no target either where the endpoint `owns` it (v1: "the SP MUST
/// delete the file or directory it created"; in v0.x it is the CO's).
fn unmounted(target: &Path, owns: bool) -> Verdict {
    match is_mount_point(target) {
        Ok(false) => {}
        Ok(true) => return Verdict::Fail(format!("{} is still a mount point", target.display())),
        Err(e) => return Verdict::Fail(e.to_string()),
    }
    let exists = std::fs::symlink_metadata(target).is_ok();
    match (owns, exists) {
        (true, true) => Verdict::Fail(format!(
            "no mount, but {} is still there: a v1 plugin removes the target",
            target.display()
        )),
        (true, false) => Verdict::Pass("no mount, target removed".into()),
        (false, _) => Verdict::Pass("no mount (the target is the CO's in v0.x)".into()),
    }
}

/// DeleteVolume of a deleted volume sent to a draft plugin as it is, not through the hub.
async fn draft_second_delete(
    s: &Scenario,
    id: &str,
    metadata: &HashMap<String, String>,
) -> Verdict {
    use crate::dialect::proto::v0_1_oneof as draft;
    use draft::delete_volume_response::Reply;
    use draft::error::delete_volume_error::DeleteVolumeErrorCode;
    use prost::Message;
    let request = draft::DeleteVolumeRequest {
        version: s.controller().session.version.map(|v| draft::Version {
            major: v.major,
            minor: v.minor,
            patch: v.patch,
        }),
        volume_handle: Some(draft::VolumeHandle {
            id: id.to_string(),
            metadata: metadata.clone(),
        }),
        user_credentials: None,
    };
    let body = request.encode_to_vec();
    let call = s
        .controller()
        .conn
        .unary("/csi.Controller/DeleteVolume", &body);
    let reply = match tokio::time::timeout(s.timeout, call).await {
        Err(_) => return Verdict::Fail(format!("no answer within {:?}", s.timeout)),
        Ok(Err(e)) => return Verdict::Fail(status_text(&e.status)),
        Ok(Ok(bytes)) => match draft::DeleteVolumeResponse::decode(bytes.as_ref()) {
            Ok(r) => r,
            Err(e) => return Verdict::Fail(format!("undecodable reply: {e}")),
        },
    };
    let expected = DeleteVolumeErrorCode::VolumeDoesNotExist as i32;
    match reply.reply {
        Some(Reply::Error(draft::Error {
            value: Some(draft::error::Value::DeleteVolumeError(e)),
        })) if e.error_code == expected => {
            Verdict::Pass(format!("VOLUME_DOES_NOT_EXIST: {}", e.error_description))
        }
        other => Verdict::Fail(format!("expected VOLUME_DOES_NOT_EXIST, got {other:?}")),
    }
}

fn ok_reply(_: Response) -> Result<(String, ()), String> {
    Ok(("OK".into(), ()))
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

fn controller_rpcs(
    c: &v1::ControllerGetCapabilitiesResponse,
) -> Vec<v1::controller_service_capability::rpc::Type> {
    use v1::controller_service_capability::Type;
    c.capabilities
        .iter()
        .filter_map(|c| match &c.r#type {
            Some(Type::Rpc(r)) => r.r#type.try_into().ok(),
            _ => None,
        })
        .collect()
}

fn node_rpcs(c: &v1::NodeGetCapabilitiesResponse) -> Vec<v1::node_service_capability::rpc::Type> {
    use v1::node_service_capability::Type;
    c.capabilities
        .iter()
        .filter_map(|c| match &c.r#type {
            Some(Type::Rpc(r)) => r.r#type.try_into().ok(),
            _ => None,
        })
        .collect()
}
