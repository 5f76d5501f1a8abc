//! The CPU time the processes behind a target spend in a measured window, read from
//! `/proc/PID/stat` (user + system time) before and after it, so that a run reports CPU per
//! call for each process — the cost a figure of calls/s hides when a target has cores to spare.
//!
//! A process counts with its descendants, live or reaped: socat serves each connection in a
//! child it forks, and a child that ends inside the window has its time added to its parent's
//! (`cutime`/`cstime`) once reaped.

use std::collections::HashMap;
use std::time::Duration;

/// A process whose CPU time is watched, and how the report names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Process {
    pub label: String,
    pub pid: u32,
}

impl std::str::FromStr for Process {
    type Err = String;

    /// `label:pid`, or a bare pid (labelled by its program name, `/proc/PID/comm`). The pid
    /// `self` is the load tool itself: the client's share of a call's cost.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (label, pid) = match s.rsplit_once(':') {
            Some((label, pid)) => (Some(label.to_string()), pid),
            None => (None, s),
        };
        let pid: u32 = match pid.trim() {
            "self" => std::process::id(),
            pid => pid
                .parse()
                .map_err(|_| format!("{s:?}: a process is label:pid, label:self or pid"))?,
        };
        let label = label.unwrap_or_else(|| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .map(|c| c.trim().to_string())
                .unwrap_or_else(|_| pid.to_string())
        });
        Ok(Process { label, pid })
    }
}

/// Parses `a:1,b:2` (the load tool's `--cpu NAME=` value).
pub fn parse_list(s: &str) -> Result<Vec<Process>, String> {
    s.split(',')
        .filter(|p| !p.is_empty())
        .map(str::parse)
        .collect()
}

/// One `/proc/PID/stat` line's fields that matter here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stat {
    ppid: u32,
    /// utime + stime of the process itself (all its threads).
    own: u64,
    /// cutime + cstime: its reaped children's.
    reaped: u64,
}

/// Parses a `/proc/PID/stat` line. The command name (field 2) may hold spaces and
/// parentheses, so the fields are counted from its last `)`.
fn parse_stat(line: &str) -> Option<Stat> {
    let rest = &line[line.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // f[0] is field 3 (state): ppid is field 4, utime..cstime fields 14..17.
    let n = |i: usize| f.get(i)?.parse::<u64>().ok();
    Some(Stat {
        ppid: n(1)? as u32,
        own: n(11)? + n(12)?,
        reaped: n(13)? + n(14)?,
    })
}

fn read_stat(pid: u32) -> Option<Stat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Every process's stat now, by pid.
fn all_stats() -> HashMap<u32, Stat> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return HashMap::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| Some((pid, read_stat(pid)?)))
        .collect()
}

/// Clock ticks of CPU time `root` and its descendants have used so far.
fn tree_ticks(stats: &HashMap<u32, Stat>, root: u32) -> Option<u64> {
    let top = stats.get(&root)?;
    let mut total = top.own + top.reaped;
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for (&pid, s) in stats {
        children.entry(s.ppid).or_default().push(pid);
    }
    let mut stack = children.get(&root).cloned().unwrap_or_default();
    while let Some(pid) = stack.pop() {
        if let Some(s) = stats.get(&pid) {
            total += s.own + s.reaped;
        }
        if let Some(more) = children.get(&pid) {
            stack.extend(more);
        }
    }
    Some(total)
}

/// CPU time used so far by each process (with its descendants); an error names a process
/// that is gone.
pub fn sample(processes: &[Process]) -> Result<Vec<Duration>, String> {
    if processes.is_empty() {
        return Ok(Vec::new());
    }
    let stats = all_stats();
    let tick_ns = 1_000_000_000 / ticks_per_second() as u64;
    processes
        .iter()
        .map(|p| {
            tree_ticks(&stats, p.pid)
                .map(|t| Duration::from_nanos(t * tick_ns))
                .ok_or_else(|| format!("process {} (pid {}) is gone", p.label, p.pid))
        })
        .collect()
}

/// `/proc` counts CPU time in USER_HZ ticks, which Linux fixes at 100 on every architecture
/// this runs on (the kernel scales its own clock to it for user space; `getconf CLK_TCK`);
/// this crate forbids the `unsafe` a `sysconf` call would take.
fn ticks_per_second() -> u32 {
    100
}

/// The CPU time each process used between `from` and `to`: sampled at both instants.
pub async fn window(
    processes: Vec<Process>,
    from: std::time::Instant,
    to: std::time::Instant,
) -> Result<Vec<Duration>, String> {
    if processes.is_empty() {
        return Ok(Vec::new());
    }
    tokio::time::sleep_until(from.into()).await;
    let before = sample(&processes)?;
    tokio::time::sleep_until(to.into()).await;
    let after = sample(&processes)?;
    Ok(after
        .iter()
        .zip(&before)
        .map(|(a, b)| a.saturating_sub(*b))
        .collect())
}

/// CPU µs per call of each process, as the report prints them: `node 12.3 appliance 9.8`.
pub fn per_call(processes: &[Process], used: &[Duration], calls: u64) -> String {
    processes
        .iter()
        .zip(used)
        .map(|(p, d)| {
            let us = d.as_secs_f64() * 1e6 / calls.max(1) as f64;
            format!("{} {us:.1}", p.label)
        })
        .collect::<Vec<_>>()
        .join("  ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_from_the_last_parenthesis() {
        let line = "4242 (my (odd) prog) S 17 4242 17 0 -1 4194560 500 0 0 0 120 30 7 3 20 0 4 0 100 1000 200 18446744073709551615";
        let s = parse_stat(line).unwrap();
        assert_eq!(
            s,
            Stat {
                ppid: 17,
                own: 150,
                reaped: 10
            }
        );
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn a_tree_counts_its_descendants_and_not_its_siblings() {
        let st = |ppid, own, reaped| Stat { ppid, own, reaped };
        let stats: HashMap<u32, Stat> = [
            (10, st(1, 100, 5)),
            (11, st(10, 20, 0)),
            (12, st(11, 3, 0)),
            (13, st(1, 1000, 0)),
        ]
        .into_iter()
        .collect();
        assert_eq!(tree_ticks(&stats, 10), Some(128));
        assert_eq!(tree_ticks(&stats, 13), Some(1000));
        assert_eq!(tree_ticks(&stats, 99), None);
    }

    #[test]
    fn processes_parse_with_or_without_a_label() {
        let list = parse_list("node:12,appliance:34").unwrap();
        assert_eq!(
            list,
            [
                Process {
                    label: "node".into(),
                    pid: 12
                },
                Process {
                    label: "appliance".into(),
                    pid: 34
                }
            ]
        );
        let own = std::process::id();
        let me = parse_list(&own.to_string()).unwrap();
        assert_eq!(me[0].pid, own);
        assert!(!me[0].label.is_empty());
        let client = parse_list("client:self").unwrap();
        assert_eq!((client[0].label.as_str(), client[0].pid), ("client", own));
        assert!(parse_list("node:x").is_err());
    }

    #[test]
    fn this_process_uses_cpu_time_that_the_sample_sees() {
        let me = vec![Process {
            label: "me".into(),
            pid: std::process::id(),
        }];
        let before = sample(&me).unwrap()[0];
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed() < Duration::from_millis(60) {
            x = x.wrapping_mul(31).wrapping_add(7);
        }
        std::hint::black_box(x);
        let after = sample(&me).unwrap()[0];
        assert!(after > before, "{before:?} -> {after:?}");
        assert!(per_call(&me, &[Duration::from_millis(10)], 1000).starts_with("me 10.0"));
    }
}
