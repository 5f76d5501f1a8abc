//! Test support for the gateway: start the built `csi-gateway` on a temp socket in front of an
//! upstream socket, wait until it has detected the upstream, and talk to it with tonic.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tonic::transport::Channel;

use super::PROCESS_TIMEOUT;

/// The built gateway: the test suite's build, with the `test-hooks` feature.
pub fn binary() -> &'static str {
    super::workspace_binary("csi-gateway")
}

/// A running gateway with its own temp directory: `sock/csi.sock`, `state/`, `gateway.log`.
pub struct Gateway {
    pub socket: PathBuf,
    pub state_dir: PathBuf,
    args: Vec<String>,
    /// A command the gateway is started through (`sh -c '…; exec "$0" "$@"'`), if any.
    wrapper: Vec<String>,
    child: Option<Child>,
    /// The link to the plugin's socket an unattached gateway starts on, until it is removed.
    link: Option<PathBuf>,
    log: PathBuf,
    root: tempfile::TempDir,
}

impl Gateway {
    /// Starts a gateway in front of `upstream`, serving v1, v0.3 and `legacy` (v0.1 or
    /// v0.1-oneof), with `extra` flags (`--name=value`) appended; returns once the upstream is
    /// detected.
    pub async fn start(upstream: &Path, legacy: &str, extra: &[&str]) -> Gateway {
        Gateway::start_through(&[], upstream, legacy, extra).await
    }

    /// [`FrontPath::start`], its metrics served on a free local port, returned with it.
    pub async fn start_with_metrics(
        upstream: &Path,
        legacy: &str,
        path: FrontPath,
    ) -> (Gateway, u16) {
        let port = crate::free_port();
        let flag = format!("--metrics-listen=127.0.0.1:{port}");
        (path.start(upstream, legacy, &[&flag]).await, port)
    }

    /// A gateway whose client connections are all unattached while its plugin runs: it is
    /// started on a symbolic link to `upstream`'s socket, removed once the plugin is detected.
    /// Its shared upstream connection, made through the link, stays; the connection of its own
    /// that each client connection dials fails (no such file), as when the plugin is away.
    /// The link is `upstream` with `.link` appended, so that messages naming the gateway's
    /// upstream name the plugin's socket path too.
    pub async fn start_unattached(upstream: &Path, legacy: &str, extra: &[&str]) -> Gateway {
        let link = link_to(upstream);
        let flag = format!("--upstream=unix://{}", link.display());
        let mut flags = vec![flag.as_str()];
        flags.extend(extra.iter().filter(|f| !f.starts_with("--upstream=")));
        Gateway::start_linked(&[], upstream, legacy, &flags, Some(link)).await
    }

    /// [`Gateway::start`] through `wrapper`, which must end by exec'ing its arguments (so the
    /// child's pid is the gateway's).
    pub async fn start_through(
        wrapper: &[&str],
        upstream: &Path,
        legacy: &str,
        extra: &[&str],
    ) -> Gateway {
        Gateway::start_linked(wrapper, upstream, legacy, extra, None).await
    }

    /// [`Gateway::start_through`]; `link`, if any, is removed once the plugin is detected and
    /// before the readiness check connects (`wait_ready`), so that no client connection of
    /// the test's gets an upstream connection of its own through it.
    async fn start_linked(
        wrapper: &[&str],
        upstream: &Path,
        legacy: &str,
        extra: &[&str],
        link: Option<PathBuf>,
    ) -> Gateway {
        let root = tempfile::tempdir().expect("tempdir");
        let socket = root.path().join("sock").join("csi.sock");
        let state_dir = root.path().join("state");
        let mut args: Vec<String> = vec![
            "run".into(),
            format!("--listen=unix://{}", socket.display()),
            format!("--upstream=unix://{}", upstream.display()),
            format!("--legacy-dialect={legacy}"),
            format!("--state-dir={}", state_dir.display()),
            "--metrics-listen=".into(),
            "--log-level=csi_gateway=debug".into(),
        ];
        // A flag in `extra` replaces the default of the same name.
        let flag = |a: &str| a.split('=').next().unwrap_or_default().to_string();
        args.retain(|a| !extra.iter().any(|e| flag(e) == flag(a)));
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut g = Gateway {
            socket,
            state_dir,
            args,
            wrapper: wrapper.iter().map(|s| s.to_string()).collect(),
            child: None,
            link,
            log: root.path().join("gateway.log"),
            root,
        };
        g.spawn().await;
        g
    }

    async fn spawn(&mut self) {
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let mut command = match self.wrapper.split_first() {
            Some((program, rest)) => {
                let mut c = Command::new(program);
                c.args(rest).arg(binary());
                c
            }
            None => Command::new(binary()),
        };
        let child = command
            .args(&self.args)
            .env_remove("CSI_ENDPOINT")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("spawning csi-gateway");
        self.child = Some(child);
        self.wait_ready().await;
    }

    /// Ready: the front socket accepts and the upstream was detected since the last start.
    async fn wait_ready(&mut self) {
        let before = self.log_text().matches("upstream connected").count();
        let deadline = Instant::now() + PROCESS_TIMEOUT;
        loop {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!(
                    "gateway exited during start-up ({status}):\n{}",
                    self.log_text()
                );
            }
            let detected = self.log_text().matches("upstream connected").count() > before;
            if let Some(link) = self.link.take_if(|_| detected) {
                fs::remove_file(&link).expect("removing the link");
            }
            if detected && std::os::unix::net::UnixStream::connect(&self.socket).is_ok() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "gateway not ready within {PROCESS_TIMEOUT:?}:\n{}",
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    pub fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    pub async fn channel(&self) -> Channel {
        super::connect(&self.socket).await
    }

    /// SIGKILL, then start again on the same socket and state.
    pub async fn kill_and_restart(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.spawn().await;
    }

    /// Waits (bounded) for the gateway to exit on its own, e.g. at a `--test-crash-at` step.
    pub fn wait_exit(&mut self) -> std::process::ExitStatus {
        let child = self.child.as_mut().expect("running");
        let deadline = Instant::now() + PROCESS_TIMEOUT;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                self.child = None;
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "gateway did not exit:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Drops the flag `name` (e.g. `--test-crash-at`) from the next start.
    pub fn drop_flag(&mut self, name: &str) {
        self.args.retain(|a| a.split('=').next() != Some(name));
    }

    /// Adds or replaces a flag (`--name=value`) for the next start.
    pub fn set_flag(&mut self, flag: &str) {
        self.drop_flag(flag.split('=').next().unwrap_or_default());
        self.args.push(flag.to_string());
    }

    /// Starts again on the same socket and state after the process exited (see `wait_exit`).
    pub async fn start_again(&mut self) {
        assert!(self.child.is_none(), "still running");
        self.spawn().await;
    }

    /// SIGTERM and wait (bounded) for the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("running");
        let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
        let deadline = Instant::now() + PROCESS_TIMEOUT;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "gateway did not exit:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn root(&self) -> &Path {
        self.root.path()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A gateway started with `args` (and nothing else), its stderr in `<dir>/<name>.log`, waited
/// for by nothing: for tests of what happens before it is ready, or instead of it.
pub struct Run {
    pub child: Child,
    log: PathBuf,
}

impl Run {
    pub fn start(dir: &Path, name: &str, args: &[String]) -> Run {
        let log = dir.join(format!("{name}.log"));
        let file = std::fs::File::create(&log).unwrap();
        let child = Command::new(binary())
            .args(args)
            .env_remove("CSI_ENDPOINT")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap();
        Run { child, log }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the log holds `needle`; panics if the gateway exits first.
    pub fn wait_log(&mut self, needle: &str) {
        let until = Instant::now() + PROCESS_TIMEOUT;
        while !self.log().contains(needle) {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "gateway exited ({status}) before {needle:?}:\n{}",
                    self.log()
                );
            }
            assert!(Instant::now() < until, "no {needle:?} in:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The state a client connection of the gateway's starts in: the one HTTP/2 front (the splice)
/// in each upstream state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrontPath {
    /// Spliced onto an upstream connection of its own (the default).
    Spliced,
    /// Unattached: no upstream connection of its own could be had at accept, so the gateway
    /// answers the connection's calls itself on its shared upstream connection.
    Unattached,
}

impl FrontPath {
    pub const BOTH: [FrontPath; 2] = [FrontPath::Spliced, FrontPath::Unattached];

    /// A gateway whose client connections start in this state ([`Gateway::start`] or
    /// [`Gateway::start_unattached`]).
    pub async fn start(self, upstream: &Path, legacy: &str, extra: &[&str]) -> Gateway {
        match self {
            FrontPath::Spliced => Gateway::start(upstream, legacy, extra).await,
            FrontPath::Unattached => Gateway::start_unattached(upstream, legacy, extra).await,
        }
    }

    /// Lets the gateway reach `upstream`'s plugin once it is started again: an unattached
    /// gateway's link to it is made again (its connections accepted before stay unattached,
    /// as a plugin that was away at their accept leaves them).
    pub fn plugin_back(self, upstream: &Path) {
        if self == FrontPath::Unattached {
            link_to(upstream);
        }
    }

    /// The name tests print.
    pub fn name(self) -> &'static str {
        match self {
            FrontPath::Spliced => "spliced",
            FrontPath::Unattached => "unattached",
        }
    }
}

/// A symbolic link to the plugin's socket `upstream`, made afresh: `upstream` with `.link`
/// appended, so that messages naming the gateway's upstream name the plugin's socket too.
fn link_to(upstream: &Path) -> PathBuf {
    let link = PathBuf::from(format!("{}.link", upstream.display()));
    let _ = fs::remove_file(&link);
    std::os::unix::fs::symlink(upstream, &link).expect("symlink to the plugin's socket");
    link
}
