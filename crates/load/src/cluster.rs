//! Lifecycles across gateways that share one etcd (`csi-gateway-load lifecycles`): a steady
//! stream of volume lifecycles through a controller gateway and several node gateways, every
//! call journaled with its time and outcome, while a driver (tests/cluster.sh) injects faults
//! and marks each phase in a file. At the end, figures per phase and the verdict.
//!
//! Each lifecycle, v1 clients in front of a draft (`v0.1-oneof`) plugin, so every call after
//! the create needs the VolumeHandle metadata the controller gateway wrote to etcd:
//! CreateVolume and ControllerPublishVolume on the controller gateway, NodePublishVolume and
//! NodeUnpublishVolume on a node gateway (another process, reading what the controller wrote),
//! ControllerUnpublishVolume and DeleteVolume on the controller gateway. Each step is retried
//! as a CO would (same request, idempotent) until it is answered OK.
//!
//! A retryable failure (UNAVAILABLE, DEADLINE_EXCEEDED, a reset) costs availability. Any other
//! answer about a volume whose create was answered OK means the gateway lost what it promised:
//! it is counted *lost* and fails the run. So does, at the end,
//! - a *standing* volume (created before the first fault and kept through all of them) that
//!   ListVolumes does not show exactly once, or whose metadata does not work through every node
//!   gateway and then for DeleteVolume;
//! - any volume left at the plugin once every lifecycle finished (a duplicate, or a volume from
//!   a refused create that no retry accounted for);
//! - two different ids answered for one volume name.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tonic::transport::Channel;
use tonic::Code;

use crate::crashloop::channel;
use csi_gateway_proto::dialect::proto::v1;

/// What to run.
#[derive(Clone, Debug)]
pub struct Settings {
    pub controller: PathBuf,
    /// name → socket of each node gateway.
    pub nodes: Vec<(String, PathBuf)>,
    pub clients: usize,
    pub standing: usize,
    /// Where the plugin makes publish targets (a path in the plugin's file system).
    pub target_dir: String,
    /// The run stops (after finishing its lifecycles) once this file exists.
    pub stop_file: PathBuf,
    /// Phase marks, one `UNIX_SECONDS NAME` line each, written by the driver.
    pub phases: PathBuf,
    pub journal: Option<PathBuf>,
    /// A step still failing after this long is a violation.
    pub step_timeout: Duration,
}

/// One call's outcome.
#[derive(Clone, Debug)]
struct Call {
    /// Seconds since the UNIX epoch, at the start and at the answer.
    start: f64,
    end: f64,
    gateway: String,
    method: &'static str,
    volume: String,
    code: Code,
    message: String,
}

impl Call {
    fn outcome(&self) -> Outcome {
        match self.code {
            Code::Ok => Outcome::Ok,
            c if retryable(c) => Outcome::Failed,
            _ => Outcome::Wrong,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Ok,
    /// Retryable: the call may succeed later (availability, not state).
    Failed,
    /// An answer no retry changes: for a volume created OK, state the gateways lost.
    Wrong,
}

/// Codes a CO retries: the store or plugin unreachable, a deadline, a connection reset.
fn retryable(code: Code) -> bool {
    matches!(
        code,
        Code::Unavailable
            | Code::DeadlineExceeded
            | Code::Unknown
            | Code::Cancelled
            | Code::Aborted
    )
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Shared by the clients.
struct Run {
    stop: AtomicBool,
    calls: Mutex<Vec<Call>>,
    /// Volume name → the ids CreateVolume answered OK with.
    ids: Mutex<HashMap<String, Vec<String>>>,
    violations: Mutex<Vec<String>>,
    step_timeout: Duration,
}

impl Run {
    fn violation(&self, v: String) {
        self.violations.lock().expect("violations").push(v);
    }

    /// Runs `call` until it is answered OK, journaling every attempt; `None` if it gave up (a
    /// violation: a wrong answer, or still failing after the step timeout).
    async fn step<T, F, Fut>(
        &self,
        gateway: &str,
        method: &'static str,
        volume: &str,
        mut call: F,
    ) -> Option<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, tonic::Status>>,
    {
        let began = Instant::now();
        loop {
            let start = now();
            let answer = call().await;
            let (code, message) = match &answer {
                Ok(_) => (Code::Ok, String::new()),
                Err(s) => (s.code(), s.message().to_string()),
            };
            let c = Call {
                start,
                end: now(),
                gateway: gateway.to_string(),
                method,
                volume: volume.to_string(),
                code,
                message,
            };
            let outcome = c.outcome();
            self.calls.lock().expect("calls").push(c.clone());
            match (answer, outcome) {
                (Ok(v), _) => return Some(v),
                (Err(_), Outcome::Wrong) => {
                    self.violation(format!(
                        "{method} {volume} on {gateway}: {:?}: {}",
                        c.code, c.message
                    ));
                    return None;
                }
                (Err(_), _) if began.elapsed() > self.step_timeout => {
                    self.violation(format!(
                        "{method} {volume} on {gateway}: still failing after {:?}: {:?}: {}",
                        self.step_timeout, c.code, c.message
                    ));
                    return None;
                }
                (Err(_), _) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }
}

/// The gateways, as the clients reach them.
#[derive(Clone)]
struct Gateways {
    controller: Channel,
    nodes: Vec<(String, Channel)>,
    /// The plugin's node id (every node gateway fronts the one plugin).
    node_id: String,
    target_dir: String,
}

const CONTROLLER: &str = "controller";

/// CreateVolume through the controller gateway; records the id answered.
async fn create(run: &Run, g: &Gateways, name: &str) -> Option<String> {
    let controller = v1::controller_client::ControllerClient::new(g.controller.clone());
    let id = run
        .step(CONTROLLER, "CreateVolume", name, || {
            let mut c = controller.clone();
            async move {
                c.create_volume(crate::requests::create_volume(name))
                    .await
                    .map(|r| r.into_inner().volume.unwrap_or_default().volume_id)
            }
        })
        .await?;
    run.ids
        .lock()
        .expect("ids")
        .entry(name.to_string())
        .or_default()
        .push(id.clone());
    Some(id)
}

/// ControllerPublish, NodePublish and NodeUnpublish on `node`, ControllerUnpublish: every one
/// reads the metadata the controller gateway stored.
async fn publish_round(run: &Run, g: &Gateways, node: usize, name: &str, id: &str) -> bool {
    let controller = v1::controller_client::ControllerClient::new(g.controller.clone());
    let (node_name, node_ch) = &g.nodes[node];
    let node_client = v1::node_client::NodeClient::new(node_ch.clone());
    let target = format!("{}/{name}", g.target_dir);
    let Some(publish) = run
        .step(CONTROLLER, "ControllerPublishVolume", name, || {
            let mut c = controller.clone();
            let req = v1::ControllerPublishVolumeRequest {
                volume_id: id.into(),
                node_id: g.node_id.clone(),
                volume_capability: Some(crate::requests::mount_capability()),
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
    let published = run
        .step(node_name, "NodePublishVolume", name, || {
            let mut n = node_client.clone();
            let req = v1::NodePublishVolumeRequest {
                volume_id: id.into(),
                publish_context: publish.clone(),
                target_path: target.clone(),
                volume_capability: Some(crate::requests::mount_capability()),
                ..Default::default()
            };
            async move { n.node_publish_volume(req).await.map(drop) }
        })
        .await;
    let unpublished = run
        .step(node_name, "NodeUnpublishVolume", name, || {
            let mut n = node_client.clone();
            let req = v1::NodeUnpublishVolumeRequest {
                volume_id: id.into(),
                target_path: target.clone(),
            };
            async move { n.node_unpublish_volume(req).await.map(drop) }
        })
        .await;
    let detached = run
        .step(CONTROLLER, "ControllerUnpublishVolume", name, || {
            let mut c = controller.clone();
            let req = v1::ControllerUnpublishVolumeRequest {
                volume_id: id.into(),
                node_id: g.node_id.clone(),
                ..Default::default()
            };
            async move { c.controller_unpublish_volume(req).await.map(drop) }
        })
        .await;
    published.and(unpublished).and(detached).is_some()
}

async fn delete(run: &Run, g: &Gateways, name: &str, id: &str) -> bool {
    let controller = v1::controller_client::ControllerClient::new(g.controller.clone());
    run.step(CONTROLLER, "DeleteVolume", name, || {
        let mut c = controller.clone();
        let req = v1::DeleteVolumeRequest {
            volume_id: id.into(),
            ..Default::default()
        };
        async move { c.delete_volume(req).await.map(drop) }
    })
    .await
    .is_some()
}

/// The volume ids the plugin holds, through the controller gateway (all pages).
async fn list(run: &Run, g: &Gateways) -> Option<Vec<String>> {
    let controller = v1::controller_client::ControllerClient::new(g.controller.clone());
    let mut ids = Vec::new();
    let mut token = String::new();
    loop {
        let t = token.clone();
        let page = run
            .step(CONTROLLER, "ListVolumes", "-", || {
                let mut c = controller.clone();
                let req = v1::ListVolumesRequest {
                    starting_token: t.clone(),
                    ..Default::default()
                };
                async move { c.list_volumes(req).await.map(|r| r.into_inner()) }
            })
            .await?;
        ids.extend(
            page.entries
                .into_iter()
                .map(|e| e.volume.unwrap_or_default().volume_id),
        );
        if page.next_token.is_empty() {
            return Some(ids);
        }
        token = page.next_token;
    }
}

/// The plugin's node id, through the first node gateway.
async fn node_id(run: &Run, nodes: &[(String, Channel)]) -> Option<String> {
    let (name, ch) = nodes.first()?;
    run.step(name, "NodeGetInfo", "-", || {
        let mut n = v1::node_client::NodeClient::new(ch.clone());
        async move {
            n.node_get_info(v1::NodeGetInfoRequest {})
                .await
                .map(|r| r.into_inner().node_id)
        }
    })
    .await
}

/// Client `c`'s lifecycles until the stop file appears, on node gateway `c` (modulo).
async fn client(run: Arc<Run>, g: Gateways, c: usize) -> u64 {
    let mut done = 0;
    let mut k = 0;
    while !run.stop.load(Ordering::Relaxed) {
        let name = format!("lc-{c}-{k}");
        // Each client keeps to one node gateway, so a fault on one node stalls its clients
        // only and the figures show what the others kept doing.
        let node = c % g.nodes.len();
        k += 1;
        let Some(id) = create(&run, &g, &name).await else {
            continue;
        };
        let ok = publish_round(&run, &g, node, &name, &id).await;
        if delete(&run, &g, &name, &id).await && ok {
            done += 1;
        }
    }
    done
}

/// The standing volumes at the end: listed exactly once, their metadata working through every
/// node gateway, then deleted.
async fn check_standing(run: &Run, g: &Gateways, standing: &[(String, String)]) {
    let Some(listed) = list(run, g).await else {
        return;
    };
    for (name, id) in standing {
        let n = listed.iter().filter(|l| *l == id).count();
        if n != 1 {
            run.violation(format!(
                "standing volume {name} ({id}) listed {n} times, not once"
            ));
        }
        for node in 0..g.nodes.len() {
            if !publish_round(run, g, node, name, id).await {
                run.violation(format!(
                    "standing volume {name}: its metadata did not work through {}",
                    g.nodes[node].0
                ));
            }
        }
        delete(run, g, name, id).await;
    }
}

/// Runs the lifecycles until the stop file appears, then checks and reports.
pub async fn run(s: &Settings) -> Result<Report, String> {
    let run = Arc::new(Run {
        stop: AtomicBool::new(false),
        calls: Mutex::new(Vec::new()),
        ids: Mutex::new(HashMap::new()),
        violations: Mutex::new(Vec::new()),
        step_timeout: s.step_timeout,
    });
    let nodes: Vec<(String, Channel)> = s
        .nodes
        .iter()
        .map(|(n, p)| (n.clone(), channel(p)))
        .collect();
    let node_id = node_id(&run, &nodes)
        .await
        .ok_or_else(|| format!("{:?}", run.violations.lock().expect("violations")))?;
    let g = Gateways {
        controller: channel(&s.controller),
        nodes,
        node_id,
        target_dir: s.target_dir.clone(),
    };
    let mut standing = Vec::new();
    for i in 0..s.standing {
        let name = format!("standing-{i}");
        if let Some(id) = create(&run, &g, &name).await {
            standing.push((name, id));
        }
    }
    let started = now();
    println!(
        "lifecycles: {} clients, {} standing volumes; running until {} exists",
        s.clients,
        standing.len(),
        s.stop_file.display()
    );
    let clients: Vec<_> = (0..s.clients)
        .map(|c| tokio::spawn(client(run.clone(), g.clone(), c)))
        .collect();
    let mut seen = 0;
    let mut second = 0u64;
    while !s.stop_file.exists() {
        tokio::time::sleep(Duration::from_secs(1)).await;
        second += 1;
        let calls = run.calls.lock().expect("calls");
        let window = &calls[seen..];
        let ok = window.iter().filter(|c| c.code == Code::Ok).count();
        // The last failure of the second, to see what a fault did.
        let last = window
            .iter()
            .rev()
            .find(|c| c.code != Code::Ok)
            .map_or_else(String::new, |c| {
                format!(
                    "  last: {} {} on {}: {:?}: {}",
                    c.method, c.volume, c.gateway, c.code, c.message
                )
            });
        println!(
            "t+{second:>3}s {ok:>4} ok {:>4} failed{last}",
            window.len() - ok
        );
        seen = calls.len();
    }
    run.stop.store(true, Ordering::Relaxed);
    let mut lifecycles = 0;
    for c in clients {
        lifecycles += c.await.map_err(|e| e.to_string())?;
    }
    let stopped = now();
    check_standing(&run, &g, &standing).await;
    let left = list(&run, &g).await.unwrap_or_default();
    if !left.is_empty() {
        run.violation(format!(
            "{} volume(s) left at the plugin after every lifecycle ended: {left:?}",
            left.len()
        ));
    }
    for (name, ids) in run.ids.lock().expect("ids").iter() {
        if ids.iter().any(|i| *i != ids[0]) {
            run.violation(format!(
                "{name}: CreateVolume answered different ids: {ids:?}"
            ));
        }
    }
    let calls = std::mem::take(&mut *run.calls.lock().expect("calls"));
    if let Some(j) = &s.journal {
        write_journal(j, &calls)?;
    }
    let marks = read_phases(&s.phases, started)?;
    let violations = std::mem::take(&mut *run.violations.lock().expect("violations"));
    let names: Vec<String> = s.nodes.iter().map(|(n, _)| n.clone()).collect();
    Ok(Report {
        phases: figures(&marks, stopped, &calls, &names),
        nodes: names,
        lifecycles,
        violations,
    })
}

fn write_journal(path: &Path, calls: &[Call]) -> Result<(), String> {
    let mut out = String::from("start\tseconds\tgateway\tmethod\tvolume\tcode\tmessage\n");
    for c in calls {
        let _ = writeln!(
            out,
            "{:.3}\t{:.3}\t{}\t{}\t{}\t{:?}\t{}",
            c.start,
            c.end - c.start,
            c.gateway,
            c.method,
            c.volume,
            c.code,
            c.message.replace(['\t', '\n'], " ")
        );
    }
    std::fs::write(path, out).map_err(|e| format!("{}: {e}", path.display()))
}

/// The phase marks, in order; the run's start is the first phase ("baseline") unless the file
/// marks one before it.
fn read_phases(path: &Path, started: f64) -> Result<Vec<(f64, String)>, String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut marks = vec![(started, "baseline".to_string())];
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let (t, name) = line
            .split_once(' ')
            .ok_or_else(|| format!("{}: a mark is `SECONDS NAME`: {line:?}", path.display()))?;
        let t: f64 = t
            .parse()
            .map_err(|e| format!("{}: {line:?}: {e}", path.display()))?;
        marks.push((t.max(started), name.trim().to_string()));
    }
    marks.sort_by(|a, b| a.0.total_cmp(&b.0));
    Ok(marks)
}

/// One phase's figures.
#[derive(Clone, Debug, PartialEq)]
pub struct Phase {
    pub name: String,
    pub seconds: f64,
    /// Calls answered OK per second.
    pub ok_per_sec: f64,
    pub ok: usize,
    pub failed: usize,
    /// Failed calls whose message names etcd (the store, not the plugin).
    pub failed_naming_etcd: usize,
    /// The slowest failed call (how long a caller waited for its refusal).
    pub slowest_failure: f64,
    pub lost: usize,
    /// The longest time without any call answered OK, from the phase's start: how long the
    /// fault stopped the stream.
    pub stall: f64,
    /// When, after the phase's start, the last failed call was answered (0: none failed).
    pub last_failure: f64,
    /// Calls answered OK per second by each node gateway (its clients' node calls), in the
    /// order of `--node`: a fault on one node shows there while the total hides it.
    pub node_ok_per_sec: Vec<f64>,
}

/// Figures per phase: a call belongs to the phase it was answered in.
fn figures(marks: &[(f64, String)], stopped: f64, calls: &[Call], nodes: &[String]) -> Vec<Phase> {
    let mut out = Vec::new();
    for (i, (begin, name)) in marks.iter().enumerate() {
        let end = marks.get(i + 1).map_or(stopped, |m| m.0).max(*begin);
        let inside: Vec<&Call> = calls
            .iter()
            .filter(|c| c.end >= *begin && c.end < end)
            .collect();
        let count = |o: Outcome| inside.iter().filter(|c| c.outcome() == o).count();
        let failed: Vec<&&Call> = inside
            .iter()
            .filter(|c| c.outcome() == Outcome::Failed)
            .collect();
        let mut oks: Vec<f64> = inside
            .iter()
            .filter(|c| c.code == Code::Ok)
            .map(|c| c.end)
            .collect();
        oks.sort_by(f64::total_cmp);
        let mut stall: f64 = 0.0;
        let mut last = *begin;
        for t in oks.iter().chain(std::iter::once(&end)) {
            stall = stall.max(t - last);
            last = *t;
        }
        let seconds = end - begin;
        let per_sec = |n: usize| {
            if seconds > 0.0 {
                n as f64 / seconds
            } else {
                0.0
            }
        };
        let node_ok_per_sec = nodes
            .iter()
            .map(|g| {
                per_sec(
                    inside
                        .iter()
                        .filter(|c| c.code == Code::Ok && c.gateway == *g)
                        .count(),
                )
            })
            .collect();
        out.push(Phase {
            name: name.clone(),
            seconds,
            ok_per_sec: per_sec(count(Outcome::Ok)),
            ok: count(Outcome::Ok),
            failed: failed.len(),
            failed_naming_etcd: failed.iter().filter(|c| c.message.contains("etcd")).count(),
            slowest_failure: failed.iter().map(|c| c.end - c.start).fold(0.0, f64::max),
            lost: count(Outcome::Wrong),
            stall,
            last_failure: failed.iter().map(|c| c.end - begin).fold(0.0, f64::max),
            node_ok_per_sec,
        });
    }
    out
}

/// What happened.
#[derive(Debug, Default)]
pub struct Report {
    pub phases: Vec<Phase>,
    /// The node gateways' names, in the order of each phase's `node_ok_per_sec`.
    pub nodes: Vec<String>,
    pub lifecycles: u64,
    pub violations: Vec<String>,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let base = self.phases.first().map_or(0.0, |p| p.ok_per_sec);
        write!(
            f,
            "{:<22} {:>6} {:>8} {:>6} {:>6} {:>7} {:>6} {:>6} {:>8} {:>8} {:>9}",
            "phase",
            "secs",
            "calls/s",
            "ratio",
            "ok",
            "failed",
            "etcd",
            "lost",
            "stall",
            "last-fail",
            "slowest-f"
        )?;
        for n in &self.nodes {
            write!(f, " {:>8}", format!("{n}/s"))?;
        }
        writeln!(f)?;
        for p in &self.phases {
            write!(
                f,
                "{:<22} {:>6.1} {:>8.1} {:>6.2} {:>6} {:>7} {:>6} {:>6} {:>7.2}s {:>7.2}s {:>8.2}s",
                p.name,
                p.seconds,
                p.ok_per_sec,
                if base > 0.0 { p.ok_per_sec / base } else { 0.0 },
                p.ok,
                p.failed,
                p.failed_naming_etcd,
                p.lost,
                p.stall,
                p.last_failure,
                p.slowest_failure,
            )?;
            for r in &p.node_ok_per_sec {
                write!(f, " {r:>8.1}")?;
            }
            writeln!(f)?;
        }
        writeln!(f, "lifecycles completed: {}", self.lifecycles)?;
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

/// `name=path` pairs (`--node n1=/run/n1/csi.sock`).
pub fn named_paths(list: &[String]) -> Result<Vec<(String, PathBuf)>, String> {
    list.iter()
        .map(|n| {
            n.split_once('=')
                .map(|(a, b)| (a.to_string(), PathBuf::from(b)))
                .ok_or_else(|| format!("--node wants NAME=SOCKET, got {n:?}"))
        })
        .collect()
}

/// For the driver during a full partition: calls that need the store answer UNAVAILABLE
/// naming etcd within `bound`, calls that do not (Probe, GetPluginInfo) answer OK. Returns the
/// lines it printed, or the first expectation that failed. The call that needs the store is a
/// NodePublishVolume at `target` (the draft plugin needs the volume's metadata for it).
pub async fn probe(socket: &Path, target: &str, bound: Duration) -> Result<String, String> {
    let ch = channel(socket);
    let mut out = String::new();
    let mut identity = v1::identity_client::IdentityClient::new(ch.clone());
    let began = Instant::now();
    identity
        .probe(v1::ProbeRequest {})
        .await
        .map_err(|s| format!("Probe: {:?}: {}", s.code(), s.message()))?;
    let info = identity
        .get_plugin_info(v1::GetPluginInfoRequest {})
        .await
        .map_err(|s| format!("GetPluginInfo: {:?}: {}", s.code(), s.message()))?;
    let _ = writeln!(
        out,
        "Probe, GetPluginInfo: OK ({}) in {:?}",
        info.into_inner().name,
        began.elapsed()
    );
    let mut node = v1::node_client::NodeClient::new(ch);
    let began = Instant::now();
    let answer = node
        .node_publish_volume(v1::NodePublishVolumeRequest {
            volume_id: "probe-volume".into(),
            target_path: target.into(),
            volume_capability: Some(crate::requests::mount_capability()),
            ..Default::default()
        })
        .await;
    let took = began.elapsed();
    match answer {
        Err(s) if s.code() == Code::Unavailable && s.message().contains("etcd") => {
            let _ = writeln!(
                out,
                "NodePublishVolume: UNAVAILABLE in {took:?}: {}",
                s.message()
            );
        }
        Err(s) => {
            return Err(format!(
                "NodeUnpublishVolume: {:?}: {}",
                s.code(),
                s.message()
            ))
        }
        Ok(_) => return Err("NodePublishVolume answered OK without the store".into()),
    }
    if took > bound {
        return Err(format!(
            "NodeUnpublishVolume took {took:?}, over the bound {bound:?}"
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(start: f64, end: f64, code: Code, message: &str) -> Call {
        Call {
            start,
            end,
            gateway: "n1".into(),
            method: "NodePublishVolume",
            volume: "v".into(),
            code,
            message: message.into(),
        }
    }

    #[test]
    fn a_call_counts_in_the_phase_it_was_answered_in() {
        let marks = vec![(100.0, "baseline".into()), (110.0, "fault".into())];
        let calls = vec![
            call(100.0, 101.0, Code::Ok, ""),
            call(102.0, 104.0, Code::Ok, ""),
            call(
                109.0,
                112.0,
                Code::Unavailable,
                "state store etcd https://etcd1:2379: …",
            ),
            call(112.0, 113.0, Code::Unavailable, "plugin"),
            call(113.0, 118.0, Code::Ok, ""),
            call(118.0, 119.0, Code::NotFound, "no such volume"),
        ];
        let p = figures(&marks, 120.0, &calls, &["n1".to_string(), "n2".to_string()]);
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].ok, p[0].failed, p[0].lost), (2, 0, 0));
        assert!((p[0].ok_per_sec - 0.2).abs() < 1e-9);
        // 104 → 110: the longest time without an OK answer in the baseline.
        assert!((p[0].stall - 6.0).abs() < 1e-9, "{p:?}");
        assert_eq!((p[1].ok, p[1].failed, p[1].lost), (1, 2, 1));
        assert_eq!(p[1].failed_naming_etcd, 1);
        assert!((p[1].slowest_failure - 3.0).abs() < 1e-9);
        assert!((p[1].last_failure - 3.0).abs() < 1e-9);
        assert!((p[1].stall - 8.0).abs() < 1e-9, "110 → 118");
        // n1's one OK call in the 10 s after the fault; none by n2.
        assert_eq!(p[1].node_ok_per_sec, vec![0.1, 0.0]);
    }

    #[test]
    fn retryable_codes_cost_availability_and_others_are_lost_state() {
        for c in [Code::Unavailable, Code::DeadlineExceeded, Code::Unknown] {
            assert_eq!(call(0.0, 1.0, c, "").outcome(), Outcome::Failed);
        }
        for c in [
            Code::NotFound,
            Code::DataLoss,
            Code::FailedPrecondition,
            Code::Internal,
        ] {
            assert_eq!(call(0.0, 1.0, c, "").outcome(), Outcome::Wrong);
        }
    }
}
