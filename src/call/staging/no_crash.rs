//! The build without the cargo feature `test-hooks` (every build but the test suite's): no
//! crash hook, so nothing a production gateway is given can make it kill itself. The
//! configuration refuses `--test-crash-at` before this is reached; see `crash.rs`.

/// No step to crash at.
#[derive(Clone, Debug, Default)]
pub struct CrashPoint;

impl CrashPoint {
    /// Does nothing.
    #[inline(always)]
    pub fn at(&self, _step: &str) {}
}
