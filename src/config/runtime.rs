//! `[runtime]`: the async runtime the gateway runs on.

use serde::Deserialize;

use super::choice::Choice;
use super::problems::Problems;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeFile {
    /// 1 (the default) runs everything on one thread: a client connection's calls and its
    /// upstream connection share one task anyway, and it measured fastest that way
    /// (`cargo bench --bench e2e`). 0 means one thread per core.
    #[serde(default = "default_worker_threads")]
    pub worker_threads: usize,
    #[serde(default)]
    pub scheduling: Choice<Scheduling>,
}

impl Default for RuntimeFile {
    fn default() -> Self {
        RuntimeFile {
            worker_threads: default_worker_threads(),
            scheduling: Choice::default(),
        }
    }
}

fn default_worker_threads() -> usize {
    1
}

/// The Linux scheduling policy of the gateway's threads.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Scheduling {
    /// `SCHED_BATCH`: the same share of CPU as any other process, but a gateway thread that
    /// wakes up does not preempt the one running. The orchestrator and the plugin then finish
    /// writing their batch of calls before the gateway relays it, instead of being cut off
    /// after the first one. In A/B runs of `csi-gateway-load` it was level with `Normal` or a
    /// few percent ahead at 16 and 64 calls in flight.
    #[default]
    Batch,
    /// The policy the gateway was started with (`SCHED_OTHER` unless its parent chose another).
    Normal,
}

/// `[runtime]`, validated.
#[derive(Clone, Debug)]
pub struct Runtime {
    /// 1: a single-threaded runtime; 0: one worker per core; n: n workers.
    pub worker_threads: usize,
    pub scheduling: Scheduling,
}

impl RuntimeFile {
    pub fn check(self, p: &mut Problems) -> Option<Runtime> {
        Some(Runtime {
            worker_threads: self.worker_threads,
            scheduling: p.choice("runtime.scheduling", self.scheduling)?,
        })
    }
}
