//! Test support: the programs and Python modules the suite needs from the machine, each with
//! the command that installs it. A test that needs one asks here first, and a missing one fails
//! the test (never skips it) with a message naming that command; `.ci/setup` installs them all.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

/// What installs everything the suite needs on a Debian 12 machine.
pub const SETUP: &str = ".ci/setup";

/// A program the suite runs, and the command that installs it.
pub struct Tool {
    /// An absolute path, or a name looked up on the `PATH`.
    pub program: &'static str,
    /// Overrides `program` when set (`ETCD_BIN`, `H2LOAD`).
    pub env: Option<&'static str>,
    pub install: &'static str,
}

/// etcd, which the state tests start on loopback ports.
pub const ETCD: Tool = Tool::new("/usr/bin/etcd", "apt-get install -y etcd-server").env("ETCD_BIN");
/// etcdctl, which sets up users and auth on the TLS etcd.
pub const ETCDCTL: Tool = Tool::new("etcdctl", "apt-get install -y etcd-client");
/// nghttp2's load generator, for the load tool and the interop tests.
pub const H2LOAD: Tool = Tool::new("h2load", "apt-get install -y nghttp2-client").env("H2LOAD");
/// nghttp2's client, for the interop tests.
pub const NGHTTP: Tool = Tool::new("nghttp", "apt-get install -y nghttp2-client");
/// procps' kill, which stops and continues the tests' processes (SIGSTOP, SIGCONT, SIGHUP):
/// not in a minimal Debian system.
pub const KILL: Tool = Tool::new("kill", "apt-get install -y procps");
/// A real Prometheus server, which scrapes the gateway in the metrics test.
pub const PROMETHEUS: Tool = Tool::new("prometheus", "apt-get install -y prometheus");

impl Tool {
    const fn new(program: &'static str, install: &'static str) -> Tool {
        Tool {
            program,
            env: None,
            install,
        }
    }

    /// The environment variable that, when set, names the program instead.
    const fn env(self, var: &'static str) -> Tool {
        Tool {
            env: Some(var),
            ..self
        }
    }

    /// The program's path (the `env` override, else `program`), or a panic naming what
    /// installs it.
    pub fn path(&self) -> PathBuf {
        let program = self
            .env
            .and_then(std::env::var_os)
            .map(PathBuf::from)
            .unwrap_or_else(|| self.program.into());
        find(&program).unwrap_or_else(|| {
            let name = Path::new(self.program).file_name().unwrap_or_default();
            let place = if program.is_absolute() {
                "at"
            } else {
                "on the PATH as"
            };
            missing(
                &format!("{} not found {place} {}", name.display(), program.display()),
                self.install,
            )
        })
    }
}

/// Python modules the suite imports, the interpreter that runs them, and what installs them.
pub struct PythonModules {
    pub python: &'static str,
    pub modules: &'static [&'static str],
    pub install: &'static str,
}

/// gRPC C-core's Python binding with its reflection and health packages, at the versions
/// `tests/interop/requirements.txt` pins: the interop and reflection tests' clients.
pub const GRPCIO: PythonModules = PythonModules {
    python: "python3",
    modules: &["grpc", "grpc_reflection", "grpc_health"],
    install: "python3 -m pip install --break-system-packages -r tests/interop/requirements.txt",
};
/// fusepy (and fuse3's fusermount), for the slow FUSE disk of `tests/gateway_disk.rs`, run by
/// Debian's own Python.
pub const FUSEPY: PythonModules = PythonModules {
    python: "/usr/bin/python3",
    modules: &["fusepy"],
    install: "apt-get install -y python3-fusepy fuse3",
};

impl PythonModules {
    /// Panics naming what installs them unless `python` imports every module (checked once
    /// per test binary).
    pub fn check(&self) {
        static FOUND: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
        let key = format!("{} {}", self.python, self.modules.join(","));
        if FOUND.lock().unwrap().contains(&key) {
            return;
        }
        let imports = format!("import {}", self.modules.join(", "));
        let ok = Command::new(self.python)
            .args(["-c", &imports])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            missing(&format!("{} cannot `{imports}`", self.python), self.install);
        }
        FOUND.lock().unwrap().insert(key);
    }
}

/// `program` itself if it has a `/`, else the first match on the `PATH`; executable either way.
fn find(program: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |p: &Path| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.components().count() > 1 {
        return runnable(program).then(|| program.to_path_buf());
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|p| runnable(p))
}

fn missing(what: &str, install: &str) -> ! {
    panic!(
        "{what}: install it with `{install}` (as root), or run `{SETUP}`, which installs \
         everything the suite needs"
    )
}
