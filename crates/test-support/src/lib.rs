//! csi-gateway-test-support: what the whole-binary tests in the workspace root's `tests/` (and
//! its benches) share, as a dev-dependency. At the crate root: start the built
//! `csi-reference-backend` in any dialect on a temp socket and talk to it with the generated
//! tonic clients. [`gateway`]: the built `csi-gateway` in front of one; [`front`]: a client of
//! every dialect; [`etcd`]: a real etcd; [`h2raw`]: raw HTTP/2 frames; [`bridge`]: the TLS
//! bridge's processes and PKI. [`workspace_binary`] finds the binaries they start; [`deps`],
//! the programs and Python modules the suite needs from the machine and what installs each.
//!
//! ```text
//! use csi_gateway_test_support as support;
//! let backend = support::Backend::start(support::Options::new("v1")).await;
//! let mut identity = IdentityClient::new(backend.channel().await);
//! ```
//!
//! Everything is bounded: start-up, connects, each RPC ([`RPC_TIMEOUT`]) and process exit.
//! [`DIALECTS`] lists every `--dialect`; see `docs/reference-backend.md` for what each serves.
#![forbid(unsafe_code)]

pub mod bridge;
pub mod deps;
pub mod etcd;
pub mod front;
pub mod gateway;
pub mod h2raw;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};

/// Every `--dialect` the plugin serves, newest first (`v0.2` is also accepted, as `v0.3`).
pub const DIALECTS: [&str; 4] = ["v1", "v0.3", "v0.1", "v0.1-oneof"];

/// Upper bound for one RPC; generous because CI machines are shared.
pub const RPC_TIMEOUT: Duration = Duration::from_secs(30);
/// Upper bound for the plugin to start listening or to exit.
pub const PROCESS_TIMEOUT: Duration = Duration::from_secs(30);

/// The built plugin binary.
pub fn binary() -> &'static str {
    workspace_binary("csi-reference-backend")
}

/// The binary `name` of a workspace member, built into the same target directory and profile
/// as the running test or bench: `target/<profile>/<name>`, where the test itself runs from
/// `target/<profile>/deps/`.
///
/// Why not `env!("CARGO_BIN_EXE_<name>")`: Cargo sets it only for the binaries of the package
/// whose tests are compiled, and this crate is a library (the backend's and the load tool's
/// binaries belong to other members besides). `cargo test --workspace` — the README's and
/// `.ci/run`'s command — builds every member's binaries before it runs any test: a package's
/// binaries are built whenever one of its integration tests is selected, and each member with
/// a binary has one (`crates/*/tests/cli.rs`); the gateway's own are built for `tests/`, with the
/// `test-hooks` feature. Running only the root package's tests (`cargo test --test NAME`)
/// uses whatever `cargo build --workspace` or the last `cargo test --workspace` left there;
/// a missing binary fails here with that advice rather than as an obscure spawn error.
pub fn workspace_binary(name: &'static str) -> &'static str {
    static FOUND: std::sync::Mutex<Vec<(&str, &str)>> = std::sync::Mutex::new(Vec::new());
    let mut found = FOUND.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, path)) = found.iter().find(|(n, _)| *n == name) {
        return path;
    }
    let exe = std::env::current_exe().expect("the running test's path");
    // target/<profile>/deps/<test>-<hash> → target/<profile>
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test runs from target/<profile>/deps");
    let path = profile_dir.join(name);
    assert!(
        path.is_file(),
        "{name} is not built in {dir}: run the tests with `cargo test --workspace` (which builds \
         every member's binaries first), or `cargo build --workspace` (`--release` for the \
         benches) before testing or benchmarking one package",
        dir = profile_dir.display()
    );
    let path: &'static str = Box::leak(
        path.to_str()
            .expect("a UTF-8 target directory")
            .to_owned()
            .into_boxed_str(),
    );
    found.push((name, path));
    path
}

/// Whether bind mounts work here (root with CAP_SYS_ADMIN). Tests pick `--publish-mode`
/// explicitly from this; the plugin itself never falls back.
pub fn bind_mounts_work() -> bool {
    static WORKS: OnceLock<bool> = OnceLock::new();
    *WORKS.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let (src, dst) = (dir.path().join("src"), dir.path().join("dst"));
        fs::create_dir(&src).unwrap();
        fs::create_dir(&dst).unwrap();
        let ok = rustix::mount::mount_bind(&src, &dst).is_ok();
        if ok {
            let _ = rustix::mount::unmount(&dst, rustix::mount::UnmountFlags::DETACH);
        }
        ok
    })
}

/// `bind` where the machine allows it, else `symlink`.
pub fn best_publish_mode() -> &'static str {
    if bind_mounts_work() {
        "bind"
    } else {
        "symlink"
    }
}

/// Command-line options of one backend run. `extra` is appended verbatim.
#[derive(Clone, Debug)]
pub struct Options {
    pub dialect: String,
    pub publish_mode: String,
    pub node_id: String,
    pub pool_size: String,
    pub extra: Vec<String>,
}

impl Options {
    /// Defaults: the given dialect, [`best_publish_mode`], node `node-1`, a 10Gi pool.
    pub fn new(dialect: &str) -> Self {
        Options {
            dialect: dialect.to_string(),
            publish_mode: best_publish_mode().to_string(),
            node_id: "node-1".into(),
            pool_size: "10Gi".into(),
            extra: Vec::new(),
        }
    }

    /// Appends raw flags, e.g. `.arg("--topology").arg("zone=a")`.
    pub fn arg(mut self, a: impl Into<String>) -> Self {
        self.extra.push(a.into());
        self
    }

    fn args(&self, socket: &Path, data: &Path) -> Vec<String> {
        let mut args = vec![
            format!("--endpoint=unix://{}", socket.display()),
            format!("--data-dir={}", data.display()),
            format!("--dialect={}", self.dialect),
            format!("--publish-mode={}", self.publish_mode),
            format!("--node-id={}", self.node_id),
            format!("--pool-size={}", self.pool_size),
        ];
        args.extend(self.extra.iter().cloned());
        args
    }
}

/// A running plugin with its own temp directory: `sock/csi.sock`, `data/` (the plugin's
/// state) and `work/` (for staging and target paths). Killed and unmounted on drop.
pub struct Backend {
    pub opts: Options,
    pub socket: PathBuf,
    pub data_dir: PathBuf,
    pub work_dir: PathBuf,
    child: Option<Child>,
    log: PathBuf,
    // Last, so it is removed after the child is gone.
    root: tempfile::TempDir,
}

impl Backend {
    /// Spawns the binary and waits until its socket accepts connections.
    pub async fn start(opts: Options) -> Backend {
        let root = tempfile::tempdir().expect("tempdir");
        let (sock_dir, data_dir, work_dir) = (
            root.path().join("sock"),
            root.path().join("data"),
            root.path().join("work"),
        );
        for d in [&sock_dir, &work_dir] {
            fs::create_dir_all(d).unwrap();
        }
        let mut b = Backend {
            opts,
            socket: sock_dir.join("csi.sock"),
            data_dir,
            work_dir,
            child: None,
            log: root.path().join("backend.log"),
            root,
        };
        b.spawn().await;
        b
    }

    /// Spawns the binary with these exact arguments and returns it without waiting (for
    /// start-up failure tests).
    pub fn command(&self, opts: &Options) -> Command {
        let mut cmd = Command::new(binary());
        cmd.args(opts.args(&self.socket, &self.data_dir))
            .env_remove("CSI_ENDPOINT")
            .stdin(Stdio::null());
        cmd
    }

    async fn spawn(&mut self) {
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let child = self
            .command(&self.opts)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("spawning csi-reference-backend");
        self.child = Some(child);
        self.wait_ready().await;
    }

    /// Readiness: the socket accepts a connection (polled; fails fast if the process died).
    async fn wait_ready(&mut self) {
        let deadline = Instant::now() + PROCESS_TIMEOUT;
        loop {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!(
                    "backend exited during start-up ({status}):\n{}",
                    self.log_text()
                );
            }
            if UnixStream::connect(&self.socket).await.is_ok() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "backend did not listen within {PROCESS_TIMEOUT:?}:\n{}",
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Everything the plugin logged so far.
    pub fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The plugin's endpoint as a CO would be configured with it (`unix:///…/csi.sock`).
    pub fn endpoint(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// A fresh path under the work directory (not created).
    pub fn path(&self, name: &str) -> PathBuf {
        self.work_dir.join(name)
    }

    /// A tonic channel to the plugin's socket.
    pub async fn channel(&self) -> Channel {
        connect(&self.socket).await
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// SIGTERM, then wait (bounded) for a clean exit; returns the exit status.
    pub fn terminate(&mut self) -> ExitStatus {
        let pid = rustix::process::Pid::from_raw(self.pid() as i32).unwrap();
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
        self.wait_exit()
    }

    /// SIGSTOP: the plugin stops where it is, its sockets open: the kernel still accepts
    /// connections to it, and nothing answers them until [`Backend::resume`].
    /// Returns once every thread of it has stopped: a signal is only queued by `kill`, and a
    /// thread already running on another core may still answer a call meanwhile.
    pub fn pause(&self) {
        self.signal(rustix::process::Signal::STOP);
        let deadline = std::time::Instant::now() + PROCESS_TIMEOUT;
        while !all_threads_stopped(self.pid()) {
            assert!(
                std::time::Instant::now() < deadline,
                "the plugin did not stop"
            );
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }

    /// SIGCONT after [`Backend::pause`].
    pub fn resume(&self) {
        self.signal(rustix::process::Signal::CONT);
    }

    fn signal(&self, signal: rustix::process::Signal) {
        let pid = rustix::process::Pid::from_raw(self.pid() as i32).unwrap();
        rustix::process::kill_process(pid, signal).unwrap();
    }

    /// SIGKILL: a crash at whatever point the plugin is.
    pub fn kill(&mut self) {
        let child = self.child.as_mut().expect("running");
        let _ = child.kill();
        let _ = child.wait();
        self.child = None;
    }

    fn wait_exit(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("running");
        let deadline = Instant::now() + PROCESS_TIMEOUT;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!(
                    "backend did not exit within {PROCESS_TIMEOUT:?}:\n{}",
                    self.log_text()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Starts the plugin again on the same socket and data directory (after terminate/kill),
    /// optionally with different options.
    pub async fn restart(&mut self, opts: Option<Options>) {
        if self.child.is_some() {
            self.terminate();
        }
        if let Some(o) = opts {
            self.opts = o;
        }
        self.spawn().await;
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        unmount_under(self.root.path());
    }
}

/// Detaches every mount under `dir` (bind mounts a failed test left behind), deepest first.
pub fn unmount_under(dir: &Path) {
    let Ok(info) = fs::read_to_string("/proc/self/mountinfo") else {
        return;
    };
    let mut points: Vec<&str> = info
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|p| Path::new(p).starts_with(dir))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for p in points {
        let _ = rustix::mount::unmount(p, rustix::mount::UnmountFlags::DETACH);
    }
}

/// Whether `path` is a mount point right now (from /proc/self/mountinfo; unreadable: no).
pub fn is_mount_point(path: &Path) -> bool {
    csi_gateway_mountinfo::is_mount_point(path).unwrap_or(false)
}

/// A tonic channel over the UNIX socket at `path`, with [`RPC_TIMEOUT`] per call.
pub async fn connect(path: &Path) -> Channel {
    let path = path.to_path_buf();
    let endpoint = Endpoint::from_static("http://localhost")
        .timeout(RPC_TIMEOUT)
        .connect_timeout(PROCESS_TIMEOUT);
    tokio::time::timeout(
        PROCESS_TIMEOUT,
        endpoint.connect_with_connector(tower::service_fn(move |_: Uri| {
            let path = path.clone();
            async move { Ok::<_, std::io::Error>(TokioIo::new(UnixStream::connect(path).await?)) }
        })),
    )
    .await
    .expect("connect timed out")
    .expect("connect to the backend socket")
}

/// A loopback TCP port that was free a moment ago (the OS picks it).
pub fn free_port() -> u16 {
    // The kernel may hand the same free port to two binds in a row once the first is closed:
    // a port is given to one caller of this test binary only (two gateways of one test were
    // once given the same appliance port, and the second failed to listen).
    static GIVEN: std::sync::Mutex<std::collections::BTreeSet<u16>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if GIVEN.lock().unwrap().insert(port) {
            return port;
        }
    }
}

/// Polls `cond` until true or panics after `limit` (for file-system effects of another process).
pub async fn eventually(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The /metrics text of a gateway whose metrics listen on 127.0.0.1:`port`.
pub fn scrape(port: u16) -> String {
    ureq::get(&format!("http://127.0.0.1:{port}/metrics"))
        .call()
        .unwrap()
        .into_body()
        .read_to_string()
        .unwrap()
}

/// The value of the series whose line starts with `series`.
pub fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(series))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// `csi_gateway_staging_references` from the /metrics of a gateway listening on `metrics`.
pub fn staging_references(metrics: &str) -> f64 {
    let body = ureq::get(&format!("http://{metrics}/metrics"))
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    body.lines()
        .find_map(|l| l.strip_prefix("csi_gateway_staging_references "))
        .unwrap_or_else(|| panic!("no staging gauge in:\n{body}"))
        .trim()
        .parse()
        .unwrap()
}

/// Asserts a gRPC failure's code and that its message mentions `needle` (e.g. the field name).
#[track_caller]
pub fn assert_code<T: std::fmt::Debug>(
    r: Result<T, tonic::Status>,
    code: tonic::Code,
    needle: &str,
) {
    match r {
        Ok(v) => panic!("expected {code:?} mentioning {needle:?}, got OK: {v:?}"),
        Err(s) => {
            assert_eq!(s.code(), code, "unexpected status: {s:?}");
            assert!(
                s.message().contains(needle),
                "message {:?} should mention {needle:?}",
                s.message()
            );
        }
    }
}

/// A process's resident memory (VmRSS), in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .expect("VmRSS");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Whether every thread of process `pid` is stopped (state `T` in /proc/PID/task/*/stat).
fn all_threads_stopped(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().all(|task| {
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        // The state follows the command, which is in parentheses and may hold spaces.
        stat.rsplit_once(") ")
            .and_then(|(_, rest)| rest.chars().next())
            .is_some_and(|state| state == 'T' || state == 't')
    })
}
