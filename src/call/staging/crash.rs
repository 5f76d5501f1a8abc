//! TEST HOOK: the gateway kills itself with SIGKILL at a named step of staging emulation
//! (hidden flag `--test-crash-at=<step>`), so the crash-recovery tests can stop it between two
//! steps exactly. Unset, [`CrashPoint::at`] does nothing.
//!
//! Compiled in only with the cargo feature `test-hooks`, which only the test suite turns on
//! (the gateway's dev-dependency on itself, Cargo.toml). Any other build — `cargo build`, the
//! release binary — has `no_crash.rs` in its place, and its configuration refuses the flag.
//!
//! Steps: `publish:recorded`, `publish:staged`, `publish:published`,
//! `unpublish:unpublished`, `unpublish:unrecorded`, `unpublish:unstaged`.

/// The step to crash at, if any.
#[derive(Clone, Debug, Default)]
pub struct CrashPoint(Option<String>);

/// Every step name [`CrashPoint::at`] is called with.
pub const STEPS: &[&str] = &[
    "publish:recorded",
    "publish:staged",
    "publish:published",
    "unpublish:unpublished",
    "unpublish:unrecorded",
    "unpublish:unstaged",
];

impl CrashPoint {
    /// `None`, or one of [`STEPS`] (anything else is refused so a typo cannot pass a test).
    pub fn new(step: Option<String>) -> Result<CrashPoint, String> {
        match step {
            Some(s) if !STEPS.contains(&s.as_str()) => {
                Err(format!("--test-crash-at={s:?}: not one of {STEPS:?}"))
            }
            s => Ok(CrashPoint(s)),
        }
    }

    /// SIGKILL this process if `step` is the configured one: no destructor, no flush, exactly
    /// what a crash or an OOM kill leaves behind.
    pub fn at(&self, step: &str) {
        if self.0.as_deref() == Some(step) {
            eprintln!("TEST HOOK: csi-gateway killing itself at {step}");
            let _ = rustix::process::kill_process(
                rustix::process::getpid(),
                rustix::process::Signal::KILL,
            );
        }
    }
}
