//! Closed-loop load: `concurrency` callers each issue one unary call after another on shared
//! HTTP/2 connections for a fixed time; latencies go into an HDR histogram. The callers join
//! one at a time ([`turns`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use tokio::sync::oneshot;

use csi_gateway::endpoint::Endpoint;
use csi_gateway::upstream::Connection;

/// One measurement's parameters.
#[derive(Clone, Debug)]
pub struct Load {
    pub target: Endpoint,
    pub path: String,
    /// Protobuf request body.
    pub request: Vec<u8>,
    pub concurrency: usize,
    pub connections: usize,
    pub warmup: Duration,
    pub duration: Duration,
    /// Processes whose CPU time in the measured window is reported (`cpu`).
    pub cpu: Vec<super::cpu::Process>,
}

/// What one measurement found.
#[derive(Clone, Debug)]
pub struct Figures {
    pub calls: u64,
    pub errors: u64,
    pub calls_per_sec: f64,
    pub mean: Duration,
    /// Percentiles, where the generator reports them (h2load does not).
    pub p50: Option<Duration>,
    pub p99: Option<Duration>,
    /// CPU time each of `Load::cpu` used in the measured window.
    pub cpu: Vec<Duration>,
}

/// Runs `load` and returns its figures. Errors are counted, not fatal.
pub async fn measure(load: &Load) -> Result<Figures, String> {
    let mut conns = Vec::new();
    for _ in 0..load.connections.max(1) {
        conns.push(
            Connection::connect(&load.target, Duration::from_secs(5))
                .await
                .map_err(|e| e.to_string())?,
        );
    }
    let start = Instant::now();
    let measure_from = start + load.warmup;
    let stop_at = measure_from + load.duration;
    let request: Arc<[u8]> = load.request.clone().into();
    let cpu = tokio::spawn(super::cpu::window(load.cpu.clone(), measure_from, stop_at));
    let mut tasks = Vec::new();
    for (i, mut turn) in turns(load.concurrency).into_iter().enumerate() {
        let conn = conns[i % conns.len()].clone();
        let (path, request) = (load.path.clone(), request.clone());
        tasks.push(tokio::spawn(async move {
            let mut hist =
                Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("histogram bounds");
            let mut errors = 0u64;
            turn.wait().await;
            loop {
                let t0 = Instant::now();
                if t0 >= stop_at {
                    break;
                }
                let ok = conn.unary(&path, &request).await.is_ok();
                turn.pass();
                let t1 = Instant::now();
                if t0 >= measure_from {
                    if ok {
                        let _ = hist.record(t1.duration_since(t0).as_micros().max(1) as u64);
                    } else {
                        errors += 1;
                    }
                }
            }
            (hist, errors)
        }));
    }
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("histogram bounds");
    let mut errors = 0;
    for t in tasks {
        let (h, e) = t.await.map_err(|e| e.to_string())?;
        hist.add(h).map_err(|e| e.to_string())?;
        errors += e;
    }
    let calls = hist.len();
    let cpu = cpu.await.map_err(|e| e.to_string())??;
    Ok(Figures {
        calls,
        errors,
        calls_per_sec: calls as f64 / load.duration.as_secs_f64(),
        mean: Duration::from_micros(hist.mean() as u64),
        p50: Some(Duration::from_micros(hist.value_at_quantile(0.50))),
        p99: Some(Duration::from_micros(hist.value_at_quantile(0.99))),
        cpu,
    })
}

/// A caller's place in the ramp: it starts once the caller before it has had its first reply
/// (or error), and passes the turn on after its own first one.
///
/// Started all at once on a new connection, the calls travel as one burst that every hop reads,
/// handles and writes whole, and whether a round stays in that lockstep or spreads out decided
/// its figure more than the target did: one gateway, 12 rounds of 1 s at 16 in flight, read
/// 91k–150k calls/s, and two targets that were the same gateway differed by a standard deviation
/// of 10–14% round by round; joined one at a time, 126k–152k and 8%.
pub struct Turn {
    wait: Option<oneshot::Receiver<()>>,
    pass: Option<oneshot::Sender<()>>,
}

impl Turn {
    /// Until the caller before has had its first reply (at once for the first caller).
    pub async fn wait(&mut self) {
        if let Some(wait) = self.wait.take() {
            // A caller that ended without a call (its time was up) drops its turn: go on.
            let _ = wait.await;
        }
    }

    /// Lets the next caller start (once; later calls do nothing).
    pub fn pass(&mut self) {
        if let Some(pass) = self.pass.take() {
            let _ = pass.send(());
        }
    }
}

/// The turns of `n` callers, in the order they start.
pub fn turns(n: usize) -> Vec<Turn> {
    let mut out = Vec::with_capacity(n);
    let mut wait = None;
    for _ in 0..n {
        let (pass, next) = oneshot::channel();
        out.push(Turn {
            wait: wait.replace(next),
            pass: Some(pass),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::turns;
    use std::time::Duration;

    #[tokio::test]
    async fn each_caller_starts_after_the_one_before_it_had_its_first_reply() {
        let mut t = turns(3);
        // The first starts at once.
        tokio::time::timeout(Duration::from_secs(1), t[0].wait())
            .await
            .expect("the first caller waits for no one");
        // The third does not start before the second passes, even once the first has.
        t[0].pass();
        assert!(
            tokio::time::timeout(Duration::from_millis(50), t[2].wait())
                .await
                .is_err(),
            "the third caller started before the second had a reply"
        );
        tokio::time::timeout(Duration::from_secs(1), t[1].wait())
            .await
            .expect("the second caller starts once the first passed");
        t[1].pass();
        t[1].pass(); // a second pass does nothing
        tokio::time::timeout(Duration::from_secs(1), t[2].wait())
            .await
            .expect("the third caller starts once the second passed");
    }

    #[tokio::test]
    async fn a_caller_that_never_called_does_not_hold_the_rest() {
        let mut t = turns(2);
        drop(t.remove(0));
        tokio::time::timeout(Duration::from_secs(1), t[0].wait())
            .await
            .expect("the turn of a caller dropped without a call passes");
    }
}
