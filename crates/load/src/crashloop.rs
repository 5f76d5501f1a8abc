//! The crash loop (`csi-gateway-load crashloop`): the built gateway is SIGKILLed at random
//! moments, over and over, while concurrent clients drive volume lifecycles through it, then
//! the invariants of its durable state are checked.
//!
//! Two gateways run side by side, each in front of its own reference plugin:
//! - *handles*: v1 clients, a draft (`v0.1-oneof`) plugin. Each lifecycle creates a volume,
//!   publishes it to the controller and the node with a Kubernetes-like context (pod name,
//!   token) added, unpublishes by id and deletes by id — every id-only call needs the plugin's
//!   metadata from the store;
//! - *staging*: v0.1 clients, a v1 plugin that requires staging. Each lifecycle publishes a
//!   volume to two targets through staging emulation and unpublishes both.
//!
//! Every step is retried until it succeeds (CSI makes each one idempotent); a step that does
//! not succeed within the step timeout is a violation. After the last kill the clients finish
//! their lifecycles, and the run checks that no volume is left at either plugin (every volume
//! created could be deleted: no handle metadata was lost), that no staging directory is left,
//! and that the stores hold no entry (bounded: nothing accumulates). The store is the embedded
//! database or a real etcd (`--store etcd`, both gateways on one etcd, one prefix each).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};

use csi_gateway_proto::dialect::proto::{v0_1, v1};

/// What to run.
#[derive(Clone, Debug)]
pub struct Settings {
    pub gateway: PathBuf,
    pub backend: PathBuf,
    /// `Some(etcd binary)`: the store is etcd; `None`: the embedded database.
    pub etcd: Option<PathBuf>,
    pub iterations: usize,
    /// Concurrent clients per gateway.
    pub clients: usize,
    pub seed: u64,
    pub step_timeout: Duration,
    /// Longest pause between two kills (each pause is random, up to this).
    pub max_pause: Duration,
}

/// What happened.
#[derive(Debug, Default)]
pub struct Report {
    pub kills: usize,
    /// Lifecycles completed: (handles, staging).
    pub lifecycles: (u64, u64),
    /// Calls that failed (mostly under a kill) and were retried.
    pub retries: u64,
    pub slowest_step: Duration,
    /// Volumes the plugins still hold, staging directories and store entries left at the end.
    pub volumes_left: usize,
    pub staging_left: usize,
    pub store_entries_left: usize,
    pub violations: Vec<String>,
    pub elapsed: Duration,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "kills: {}, lifecycles: {} through the draft plugin (handles), {} through staging emulation",
            self.kills, self.lifecycles.0, self.lifecycles.1
        )?;
        writeln!(
            f,
            "calls retried: {}, slowest step (retries included): {:?}, elapsed: {:?}",
            self.retries, self.slowest_step, self.elapsed
        )?;
        writeln!(
            f,
            "left at the end: {} volumes at the plugins, {} staging directories, {} store entries",
            self.volumes_left, self.staging_left, self.store_entries_left
        )?;
        if self.violations.is_empty() {
            write!(f, "violations: none")
        } else {
            write!(f, "violations ({}):", self.violations.len())?;
            for v in &self.violations {
                write!(f, "\n  - {v}")?;
            }
            Ok(())
        }
    }
}

/// One child process, killed on drop.
struct Process {
    child: Option<Child>,
    program: PathBuf,
    args: Vec<String>,
    log: PathBuf,
}

impl Process {
    fn spawn(program: &Path, args: Vec<String>, log: PathBuf) -> Result<Process, String> {
        let mut p = Process {
            child: None,
            program: program.to_path_buf(),
            args,
            log,
        };
        p.start()?;
        Ok(p)
    }

    fn start(&mut self) -> Result<(), String> {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| format!("{}: {e}", self.log.display()))?;
        let child = Command::new(&self.program)
            .args(&self.args)
            .env_remove("CSI_ENDPOINT")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(out.try_clone().map_err(|e| e.to_string())?)
            .stderr(out)
            .spawn()
            .map_err(|e| format!("{}: {e}", self.program.display()))?;
        self.child = Some(child);
        Ok(())
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM, then (bounded) wait.
    fn stop(&mut self) {
        if let Some(c) = &self.child {
            if let Some(pid) = rustix::process::Pid::from_raw(c.id() as i32) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while let Some(c) = self.child.as_mut() {
            if c.try_wait().ok().flatten().is_some() || Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill();
    }

    fn exited(&mut self) -> bool {
        self.child
            .as_mut()
            .is_none_or(|c| c.try_wait().ok().flatten().is_some())
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(5)..].join("\n")
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| e.to_string())
}

/// A tonic channel to a UNIX socket (reconnecting on its own after a kill).
pub(crate) fn channel(path: &Path) -> Channel {
    let path = path.to_path_buf();
    Endpoint::from_static("http://localhost")
        .connect_timeout(Duration::from_secs(2))
        .timeout(Duration::from_secs(10))
        .connect_with_connector_lazy(tower::service_fn(move |_: Uri| {
            let path = path.clone();
            async move { Ok::<_, std::io::Error>(TokioIo::new(UnixStream::connect(path).await?)) }
        }))
}

async fn wait_for_socket(path: &Path, process: &mut Process) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if UnixStream::connect(path).await.is_ok() {
            return Ok(());
        }
        if process.exited() {
            return Err(format!(
                "{} exited during start-up:\n{}",
                process.program.display(),
                process.log_tail()
            ));
        }
        if Instant::now() > deadline {
            return Err(format!("{} not listening within 30s", path.display()));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// One gateway in front of one plugin, with everything it needs to be restarted.
struct Side {
    name: &'static str,
    dir: PathBuf,
    plugin: Process,
    gateway: Process,
}

impl Side {
    fn socket(&self) -> PathBuf {
        self.dir.join("csi.sock")
    }

    fn staging(&self) -> PathBuf {
        self.dir.join("staging")
    }

    async fn start(
        s: &Settings,
        name: &'static str,
        root: &Path,
        plugin_args: &[&str],
        legacy: &str,
        store: &[String],
    ) -> Result<Side, String> {
        let dir = root.join(name);
        std::fs::create_dir_all(dir.join("targets")).map_err(|e| e.to_string())?;
        let plugin_socket = dir.join("plugin.sock");
        let mut args = vec![
            format!("--endpoint=unix://{}", plugin_socket.display()),
            format!("--data-dir={}", dir.join("data").display()),
            "--publish-mode=symlink".into(),
        ];
        args.extend(plugin_args.iter().map(|a| a.to_string()));
        let mut plugin = Process::spawn(&s.backend, args, dir.join("plugin.log"))?;
        wait_for_socket(&plugin_socket, &mut plugin).await?;
        let mut args = vec![
            "run".to_string(),
            format!("--listen=unix://{}", dir.join("csi.sock").display()),
            format!("--upstream=unix://{}", plugin_socket.display()),
            format!("--legacy-dialect={legacy}"),
            format!("--state-dir={}", dir.join("state").display()),
            format!("--staging-dir={}", dir.join("staging").display()),
            "--metrics-listen=".into(),
            format!("--node-id=crashloop-{name}"),
        ];
        args.extend(store.iter().cloned());
        let mut gateway = Process::spawn(&s.gateway, args, dir.join("gateway.log"))?;
        wait_for_socket(&dir.join("csi.sock"), &mut gateway).await?;
        Ok(Side {
            name,
            dir,
            plugin,
            gateway,
        })
    }

    async fn kill_and_restart(&mut self) -> Result<(), String> {
        self.gateway.kill();
        self.gateway.start()?;
        let socket = self.socket();
        wait_for_socket(&socket, &mut self.gateway)
            .await
            .map_err(|e| format!("{} gateway after a SIGKILL: {e}", self.name))
    }
}

/// Shared by the clients.
struct Run {
    stop: AtomicBool,
    retries: AtomicU64,
    lifecycles: [AtomicU64; 2],
    slowest: Mutex<Duration>,
    violations: Mutex<Vec<String>>,
    step_timeout: Duration,
}

impl Run {
    /// Runs `call` until it succeeds; a step that keeps failing past the timeout is a violation.
    async fn step<T, F, Fut>(&self, what: &str, mut call: F) -> Option<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, tonic::Status>>,
    {
        let began = Instant::now();
        loop {
            match call().await {
                Ok(v) => {
                    let took = began.elapsed();
                    let mut slowest = self.slowest.lock().expect("slowest");
                    *slowest = (*slowest).max(took);
                    return Some(v);
                }
                Err(e) if began.elapsed() > self.step_timeout => {
                    self.violations.lock().expect("violations").push(format!(
                        "{what}: still failing after {:?}: {:?}: {}",
                        self.step_timeout,
                        e.code(),
                        e.message()
                    ));
                    return None;
                }
                Err(_) => {
                    self.retries.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    }
}

fn cap_v01() -> v0_1::VolumeCapability {
    use v0_1::volume_capability::{access_mode::Mode, AccessMode, AccessType, MountVolume};
    v0_1::VolumeCapability {
        access_type: Some(AccessType::Mount(MountVolume::default())),
        access_mode: Some(AccessMode {
            mode: Mode::SingleNodeWriter as i32,
        }),
    }
}

fn v01() -> Option<v0_1::Version> {
    Some(v0_1::Version {
        major: 0,
        minor: 1,
        patch: 0,
    })
}

/// One handles lifecycle (v1 client, draft plugin); false if a step gave up.
async fn handles_lifecycle(run: &Run, ch: &Channel, node: &str, name: &str, target: &Path) -> bool {
    let controller = v1::controller_client::ControllerClient::new(ch.clone());
    let node_client = v1::node_client::NodeClient::new(ch.clone());
    let Some(volume) = run
        .step(&format!("CreateVolume {name}"), || {
            let mut c = controller.clone();
            async move {
                c.create_volume(crate::requests::create_volume(name))
                    .await
                    .map(|r| r.into_inner().volume.unwrap_or_default())
            }
        })
        .await
    else {
        return false;
    };
    let id = volume.volume_id.clone();
    // What Kubernetes adds on publish: never to be stored or sent to the draft plugin.
    let mut context = volume.volume_context.clone();
    context.insert("csi.storage.k8s.io/pod.name".into(), name.into());
    context.insert(
        "csi.storage.k8s.io/serviceAccount.tokens".into(),
        "crashloop-token".into(),
    );
    let what = |step: &str| format!("{step} {id} ({name})");
    let Some(publish) = run
        .step(&what("ControllerPublishVolume"), || {
            let mut c = controller.clone();
            let req = v1::ControllerPublishVolumeRequest {
                volume_id: id.clone(),
                node_id: node.into(),
                volume_capability: Some(crate::requests::mount_capability()),
                volume_context: context.clone(),
                ..Default::default()
            };
            async move {
                c.controller_publish_volume(req)
                    .await
                    .map(|r| r.into_inner().publish_context)
            }
        })
        .await
    else {
        return false;
    };
    let target = target.display().to_string();
    let published = run
        .step(&what("NodePublishVolume"), || {
            let mut n = node_client.clone();
            let req = v1::NodePublishVolumeRequest {
                volume_id: id.clone(),
                publish_context: publish.clone(),
                target_path: target.clone(),
                volume_capability: Some(crate::requests::mount_capability()),
                volume_context: context.clone(),
                ..Default::default()
            };
            async move { n.node_publish_volume(req).await.map(drop) }
        })
        .await;
    let unpublished = run
        .step(&what("NodeUnpublishVolume"), || {
            let req = v1::NodeUnpublishVolumeRequest {
                volume_id: id.clone(),
                target_path: target.clone(),
            };
            let mut n = node_client.clone();
            async move { n.node_unpublish_volume(req).await.map(drop) }
        })
        .await;
    let detached = run
        .step(&what("ControllerUnpublishVolume"), || {
            let req = v1::ControllerUnpublishVolumeRequest {
                volume_id: id.clone(),
                node_id: node.into(),
                ..Default::default()
            };
            let mut c = controller.clone();
            async move { c.controller_unpublish_volume(req).await.map(drop) }
        })
        .await;
    let deleted = run
        .step(&what("DeleteVolume"), || {
            let req = v1::DeleteVolumeRequest {
                volume_id: id.clone(),
                ..Default::default()
            };
            let mut c = controller.clone();
            async move { c.delete_volume(req).await.map(drop) }
        })
        .await;
    published
        .and(unpublished)
        .and(detached)
        .and(deleted)
        .is_some()
}

/// One staging lifecycle (v0.1 client, v1 plugin requiring staging); false if a step gave up.
async fn staging_lifecycle(
    run: &Run,
    ch: &Channel,
    node: &str,
    name: &str,
    targets: [PathBuf; 2],
) -> bool {
    let controller = v0_1::controller_client::ControllerClient::new(ch.clone());
    let node_client = v0_1::node_client::NodeClient::new(ch.clone());
    let Some(id) = run
        .step(&format!("CreateVolume {name}"), || {
            let mut c = controller.clone();
            async move {
                c.create_volume(v0_1::CreateVolumeRequest {
                    version: v01(),
                    name: name.into(),
                    capacity_range: Some(v0_1::CapacityRange {
                        required_bytes: 1 << 20,
                        limit_bytes: 0,
                    }),
                    volume_capabilities: vec![cap_v01()],
                    ..Default::default()
                })
                .await
                .map(|r| r.into_inner().volume_info.unwrap_or_default().id)
            }
        })
        .await
    else {
        return false;
    };
    let what = |step: &str| format!("{step} {id} ({name})");
    let Some(publish) = run
        .step(&what("ControllerPublishVolume"), || {
            let mut c = controller.clone();
            let req = v0_1::ControllerPublishVolumeRequest {
                version: v01(),
                volume_id: id.clone(),
                node_id: node.into(),
                volume_capability: Some(cap_v01()),
                ..Default::default()
            };
            async move {
                c.controller_publish_volume(req)
                    .await
                    .map(|r| r.into_inner().publish_volume_info)
            }
        })
        .await
    else {
        return false;
    };
    let mut ok = true;
    for t in &targets {
        let target = t.display().to_string();
        ok &= run
            .step(&what("NodePublishVolume"), || {
                let mut n = node_client.clone();
                let req = v0_1::NodePublishVolumeRequest {
                    version: v01(),
                    volume_id: id.clone(),
                    publish_volume_info: publish.clone(),
                    target_path: target.clone(),
                    volume_capability: Some(cap_v01()),
                    ..Default::default()
                };
                async move { n.node_publish_volume(req).await.map(drop) }
            })
            .await
            .is_some();
    }
    for t in &targets {
        let target = t.display().to_string();
        ok &= run
            .step(&what("NodeUnpublishVolume"), || {
                let mut n = node_client.clone();
                let req = v0_1::NodeUnpublishVolumeRequest {
                    version: v01(),
                    volume_id: id.clone(),
                    target_path: target.clone(),
                    ..Default::default()
                };
                async move { n.node_unpublish_volume(req).await.map(drop) }
            })
            .await
            .is_some();
    }
    for step in ["ControllerUnpublishVolume", "DeleteVolume"] {
        ok &= run
            .step(&what(step), || {
                let mut c = controller.clone();
                let id = id.clone();
                let node = node.to_string();
                async move {
                    if step == "DeleteVolume" {
                        c.delete_volume(v0_1::DeleteVolumeRequest {
                            version: v01(),
                            volume_id: id,
                            ..Default::default()
                        })
                        .await
                        .map(drop)
                    } else {
                        c.controller_unpublish_volume(v0_1::ControllerUnpublishVolumeRequest {
                            version: v01(),
                            volume_id: id,
                            node_id: node,
                            ..Default::default()
                        })
                        .await
                        .map(drop)
                    }
                }
            })
            .await
            .is_some();
    }
    ok
}

/// The node id each side's clients publish to, as its front dialect spells it.
async fn node_ids(run: &Run, handles: &Channel, staging: &Channel) -> Option<(String, String)> {
    let h = run
        .step("NodeGetInfo (handles)", || {
            let mut n = v1::node_client::NodeClient::new(handles.clone());
            async move {
                n.node_get_info(v1::NodeGetInfoRequest {})
                    .await
                    .map(|r| r.into_inner().node_id)
            }
        })
        .await?;
    let s = run
        .step("GetNodeID (staging)", || {
            let mut n = v0_1::node_client::NodeClient::new(staging.clone());
            async move {
                n.get_node_id(v0_1::GetNodeIdRequest { version: v01() })
                    .await
                    .map(|r| r.into_inner().node_id)
            }
        })
        .await?;
    Some((h, s))
}

/// Runs the crash loop and checks its invariants.
pub async fn run(s: &Settings) -> Result<Report, String> {
    let began = Instant::now();
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut etcd = None;
    let store_flags = |prefix: &str, endpoint: &Option<String>| match endpoint {
        Some(e) => vec![
            "--state-backend=etcd".to_string(),
            format!("--etcd-endpoints={e}"),
            format!("--etcd-prefix={prefix}"),
        ],
        None => Vec::new(),
    };
    let endpoint = match &s.etcd {
        Some(bin) => {
            let (client, peer) = (free_port()?, free_port()?);
            let (url, peer_url) = (
                format!("http://127.0.0.1:{client}"),
                format!("http://127.0.0.1:{peer}"),
            );
            let args = vec![
                format!("--data-dir={}", root.path().join("etcd").display()),
                format!("--listen-client-urls={url}"),
                format!("--advertise-client-urls={url}"),
                format!("--listen-peer-urls={peer_url}"),
                format!("--initial-advertise-peer-urls={peer_url}"),
                format!("--initial-cluster=default={peer_url}"),
            ];
            etcd = Some(Process::spawn(bin, args, root.path().join("etcd.log"))?);
            Some(url)
        }
        None => None,
    };
    // etcd takes a moment to elect itself: the gateway's start-up check waits for it.
    let mut sides = Vec::new();
    for (name, plugin, legacy, prefix) in [
        (
            "handles",
            &["--dialect=v0.1-oneof"][..],
            "v0.1",
            "/crashloop/handles/",
        ),
        (
            "staging",
            &["--dialect=v1", "--require-staging=true"][..],
            "v0.1",
            "/crashloop/staging/",
        ),
    ] {
        let flags = store_flags(prefix, &endpoint);
        let mut attempt = 0;
        let side = loop {
            match Side::start(s, name, root.path(), plugin, legacy, &flags).await {
                Ok(side) => break side,
                // Only while etcd may still be starting.
                Err(_) if endpoint.is_some() && attempt < 20 => {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Err(e) => return Err(e),
            }
        };
        sides.push(side);
    }
    let run = Arc::new(Run {
        stop: AtomicBool::new(false),
        retries: AtomicU64::new(0),
        lifecycles: [AtomicU64::new(0), AtomicU64::new(0)],
        slowest: Mutex::new(Duration::ZERO),
        violations: Mutex::new(Vec::new()),
        step_timeout: s.step_timeout,
    });
    let (h_ch, s_ch) = (channel(&sides[0].socket()), channel(&sides[1].socket()));
    let (h_node, s_node) = node_ids(&run, &h_ch, &s_ch)
        .await
        .ok_or_else(|| format!("{:?}", run.violations.lock().expect("violations")))?;
    let mut clients = Vec::new();
    for c in 0..s.clients {
        let (r, ch, node) = (run.clone(), h_ch.clone(), h_node.clone());
        let targets = sides[0].dir.join("targets");
        clients.push(tokio::spawn(async move {
            let mut n = 0;
            while !r.stop.load(Ordering::Relaxed) {
                let name = format!("h-{c}-{n}");
                if handles_lifecycle(&r, &ch, &node, &name, &targets.join(&name)).await {
                    r.lifecycles[0].fetch_add(1, Ordering::Relaxed);
                }
                n += 1;
            }
        }));
        let (r, ch, node) = (run.clone(), s_ch.clone(), s_node.clone());
        let targets = sides[1].dir.join("targets");
        clients.push(tokio::spawn(async move {
            let mut n = 0;
            while !r.stop.load(Ordering::Relaxed) {
                let name = format!("s-{c}-{n}");
                let t = [
                    targets.join(format!("{name}-a")),
                    targets.join(format!("{name}-b")),
                ];
                if staging_lifecycle(&r, &ch, &node, &name, t).await {
                    r.lifecycles[1].fetch_add(1, Ordering::Relaxed);
                }
                n += 1;
            }
        }));
    }
    let mut rng = fastrand::Rng::with_seed(s.seed);
    let mut report = Report::default();
    let max_pause = s.max_pause.as_millis().max(1) as u64;
    for _ in 0..s.iterations {
        tokio::time::sleep(Duration::from_millis(rng.u64(0..=max_pause))).await;
        let side = &mut sides[rng.usize(0..2)];
        if let Err(e) = side.kill_and_restart().await {
            run.violations.lock().expect("violations").push(e);
            break;
        }
        report.kills += 1;
    }
    run.stop.store(true, Ordering::Relaxed);
    for c in clients {
        let _ = c.await;
    }
    // What is left: volumes at the plugins (through the gateways), staging directories, and
    // store entries once the gateways stopped.
    report.volumes_left = volumes_left(&run, &h_ch, &s_ch).await;
    report.staging_left = std::fs::read_dir(sides[1].staging())
        .map(|d| d.count())
        .unwrap_or(0);
    for side in &mut sides {
        side.gateway.stop();
    }
    report.store_entries_left = store_entries(&sides, &endpoint).await?;
    for side in &mut sides {
        side.plugin.stop();
    }
    if let Some(mut e) = etcd {
        e.stop();
    }
    report.lifecycles = (
        run.lifecycles[0].load(Ordering::Relaxed),
        run.lifecycles[1].load(Ordering::Relaxed),
    );
    report.retries = run.retries.load(Ordering::Relaxed);
    report.slowest_step = *run.slowest.lock().expect("slowest");
    report.violations = std::mem::take(&mut *run.violations.lock().expect("violations"));
    for (what, left) in [
        ("volumes left at the plugins", report.volumes_left),
        ("staging directories left", report.staging_left),
        ("store entries left", report.store_entries_left),
    ] {
        if left > 0 {
            report.violations.push(format!("{what}: {left}"));
        }
    }
    report.elapsed = began.elapsed();
    Ok(report)
}

async fn volumes_left(run: &Run, handles: &Channel, staging: &Channel) -> usize {
    let h = run
        .step("ListVolumes (handles)", || {
            let mut c = v1::controller_client::ControllerClient::new(handles.clone());
            async move {
                c.list_volumes(v1::ListVolumesRequest::default())
                    .await
                    .map(|r| r.into_inner().entries.len())
            }
        })
        .await
        .unwrap_or(usize::MAX / 2);
    let s = run
        .step("ListVolumes (staging)", || {
            let mut c = v0_1::controller_client::ControllerClient::new(staging.clone());
            async move {
                c.list_volumes(v0_1::ListVolumesRequest {
                    version: v01(),
                    ..Default::default()
                })
                .await
                .map(|r| r.into_inner().entries.len())
            }
        })
        .await
        .unwrap_or(usize::MAX / 2);
    h + s
}

/// Entries in both gateways' stores (the health probe's key aside).
async fn store_entries(sides: &[Side], etcd: &Option<String>) -> Result<usize, String> {
    let mut total = 0;
    for side in sides {
        let kv: Arc<dyn csi_gateway::store::KeyValue> = match etcd {
            None => Arc::new(
                csi_gateway::store::embedded::Embedded::open(
                    &side.dir.join("state").join("state.redb"),
                )
                .map_err(|e| e.to_string())?,
            ),
            Some(e) => {
                let settings = csi_gateway::store::etcd::Settings {
                    endpoints: vec![e.clone()],
                    prefix: format!("/crashloop/{}/", side.name),
                    tls: None,
                    username: None,
                    password_file: None,
                    connect_timeout: Duration::from_secs(5),
                };
                Arc::new(
                    csi_gateway::store::etcd::Etcd::open(&settings, Duration::from_secs(5))
                        .await
                        .map_err(|e| e.to_string())?,
                )
            }
        };
        let entries = kv.scan("").await.map_err(|e| e.to_string())?;
        total += entries.iter().filter(|(k, _)| k != "health").count();
    }
    Ok(total)
}
