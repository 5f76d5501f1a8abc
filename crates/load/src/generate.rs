//! Closed-loop load: `concurrency` callers each issue one unary call after another on shared
//! HTTP/2 connections for a fixed time; latencies go into an HDR histogram.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

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
    for i in 0..load.concurrency {
        let conn = conns[i % conns.len()].clone();
        let (path, request) = (load.path.clone(), request.clone());
        tasks.push(tokio::spawn(async move {
            let mut hist =
                Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("histogram bounds");
            let mut errors = 0u64;
            loop {
                let t0 = Instant::now();
                if t0 >= stop_at {
                    break;
                }
                let ok = conn.unary(&path, &request).await.is_ok();
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
