//! Live reload of TLS material. Each side keeps its rustls configuration in an [`ArcSwap`]; a
//! new connection takes whatever is current, so a connection already up (and its in-flight
//! calls) keeps the material it was made with. A background task rebuilds the configuration
//! when one of the files changes (polled: works for atomic renames, Kubernetes secret volume
//! symlink swaps and editors alike) or on SIGHUP. A rebuild that fails — a half-written key, a
//! certificate that does not match it — keeps the old configuration and logs why.

use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use tokio::signal::unix::{signal, SignalKind};

use super::TlsError;

/// A value rebuilt from files whenever they change.
pub struct Reloading<T> {
    current: Arc<ArcSwap<T>>,
}

impl<T: Send + Sync + 'static> Reloading<T> {
    /// Builds the first value now (an error here is a startup error) and starts watching
    /// `files` every `interval`, and SIGHUP. The watcher ends when the value is dropped.
    pub fn start<F>(
        what: &'static str,
        files: Vec<PathBuf>,
        interval: Duration,
        build: F,
    ) -> Result<Reloading<T>, TlsError>
    where
        F: Fn() -> Result<T, TlsError> + Send + Sync + 'static,
    {
        let stamp = stamps(&files);
        let current = Arc::new(ArcSwap::from_pointee(build()?));
        let hangup = signal(SignalKind::hangup())
            .map_err(|e| tracing::warn!(error = %e, "no SIGHUP reload: cannot install the handler"))
            .ok();
        tokio::spawn(watch(
            what,
            files,
            interval,
            stamp,
            hangup,
            Arc::downgrade(&current),
            build,
        ));
        Ok(Reloading { current })
    }

    /// The value new connections use.
    pub fn current(&self) -> Arc<T> {
        self.current.load_full()
    }
}

/// What identifies a file's content without reading it: modification time, size and inode.
type Stamp = Vec<Option<(SystemTime, u64, u64)>>;

fn stamps(files: &[PathBuf]) -> Stamp {
    use std::os::unix::fs::MetadataExt;
    files
        .iter()
        .map(|f| {
            // metadata() follows symlinks, so a swapped ..data link in a secret volume counts.
            let m = std::fs::metadata(f).ok()?;
            Some((m.modified().ok()?, m.len(), m.ino()))
        })
        .collect()
}

async fn watch<T, F>(
    what: &'static str,
    files: Vec<PathBuf>,
    interval: Duration,
    mut seen: Stamp,
    mut hangup: Option<tokio::signal::unix::Signal>,
    current: Weak<ArcSwap<T>>,
    build: F,
) where
    F: Fn() -> Result<T, TlsError>,
{
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let why = tokio::select! {
            _ = tick.tick() => "file change",
            Some(()) = async { hangup.as_mut()?.recv().await } => "SIGHUP",
        };
        let Some(current) = current.upgrade() else {
            return; // the configuration is gone: nothing to reload
        };
        let now = stamps(&files);
        if why == "file change" && now == seen {
            continue;
        }
        // Remember the attempt even if it fails: a half-written set is retried when the next
        // file lands, not rebuilt and reported every tick.
        seen = now;
        match build() {
            Ok(value) => {
                current.store(Arc::new(value));
                tracing::info!(what, trigger = why, "reloaded TLS material");
            }
            Err(error) => tracing::warn!(
                what,
                trigger = why,
                %error,
                "TLS reload failed; keeping the previous certificates"
            ),
        }
    }
}
