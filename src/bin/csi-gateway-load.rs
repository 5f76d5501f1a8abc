//! `csi-gateway-load`: a minimal fixed-reply upstream, and a closed-loop load generator that
//! measures several targets in the same run and prints each one's ratio to the first.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};
use csi_gateway::endpoint::Endpoint;
use csi_gateway::load::{self, Load};

#[derive(Parser)]
#[command(about = "Load tool for csi-gateway: fixed-reply upstream and load generator")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve a minimal upstream that answers every unary call with an empty OK reply.
    FixedUpstream {
        #[arg(long)]
        listen: PathBuf,
    },
    /// Measure each target (the first is the baseline) at each concurrency, interleaved.
    Run {
        /// name=endpoint, e.g. direct=unix:///tmp/up.sock (repeat; the first is the baseline).
        #[arg(long = "target", required = true)]
        targets: Vec<String>,
        #[arg(long, default_value = "/csi.v1.Identity/Probe")]
        path: String,
        /// Comma-separated calls in flight.
        #[arg(long, default_value = "1,16,64", value_delimiter = ',')]
        concurrency: Vec<usize>,
        #[arg(long, default_value = "1")]
        connections: usize,
        #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
        warmup: Duration,
        #[arg(long, default_value = "3s", value_parser = humantime::parse_duration)]
        duration: Duration,
        /// Rounds per (target, concurrency); the median round is reported.
        #[arg(long, default_value = "3")]
        rounds: usize,
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Runtime::new()?;
    match cli.command {
        Command::FixedUpstream { listen } => runtime.block_on(load::fixed::serve(&listen))?,
        Command::Run {
            targets,
            path,
            concurrency,
            connections,
            warmup,
            duration,
            rounds,
        } => {
            let targets = targets
                .iter()
                .map(|t| {
                    let (name, ep) = t.split_once('=').ok_or_else(|| {
                        anyhow::anyhow!("--target wants name=endpoint, got {t:?}")
                    })?;
                    Ok((name.to_string(), ep.parse::<Endpoint>()?))
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            runtime.block_on(run(
                targets,
                path,
                concurrency,
                connections,
                warmup,
                duration,
                rounds,
            ))?;
        }
    }
    Ok(())
}

async fn run(
    targets: Vec<(String, Endpoint)>,
    path: String,
    concurrency: Vec<usize>,
    connections: usize,
    warmup: Duration,
    duration: Duration,
    rounds: usize,
) -> anyhow::Result<()> {
    println!(
        "{:<10} {:>8} {:>12} {:>10} {:>10} {:>8} {:>7}",
        "target", "inflight", "calls/s", "p50", "p99", "errors", "ratio"
    );
    for &c in &concurrency {
        // Rounds interleave the targets so drift on the machine hits them alike, and each
        // round starts one target later so none always runs right after the same one.
        let mut results: Vec<Vec<load::Figures>> = vec![Vec::new(); targets.len()];
        for round in 0..rounds.max(1) {
            for i in (0..targets.len()).map(|k| (k + round) % targets.len()) {
                let l = Load {
                    target: targets[i].1.clone(),
                    path: path.clone(),
                    request: Vec::new(),
                    concurrency: c,
                    connections,
                    warmup,
                    duration,
                };
                results[i].push(load::measure(&l).await.map_err(anyhow::Error::msg)?);
            }
        }
        let medians: Vec<load::Figures> = results
            .into_iter()
            .map(|mut r| {
                r.sort_by(|a, b| a.calls_per_sec.total_cmp(&b.calls_per_sec));
                r[r.len() / 2].clone()
            })
            .collect();
        let base = medians[0].calls_per_sec;
        for ((name, _), f) in targets.iter().zip(&medians) {
            println!(
                "{:<10} {:>8} {:>12.0} {:>10?} {:>10?} {:>8} {:>7.2}",
                name,
                c,
                f.calls_per_sec,
                f.p50,
                f.p99,
                f.errors,
                f.calls_per_sec / base
            );
        }
    }
    Ok(())
}
