//! A whole client connection: the fuzzer's bytes, after the HTTP/2 preface, sent to a gateway
//! running in this process (spliced onto its embedded reference plugin). Whatever they are, the
//! gateway must not panic, and must go on serving: the target checks that it still accepts.
#![no_main]

use std::sync::OnceLock;
use std::time::Duration;

use csi_gateway::config::{self, Overrides};
use libfuzzer_sys::fuzz_target;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

struct Gateway {
    runtime: tokio::runtime::Runtime,
    socket: std::path::PathBuf,
    _dir: tempfile::TempDir,
    _running: csi_gateway::gateway::Running,
}

fn gateway() -> &'static Gateway {
    static GW: OnceLock<Gateway> = OnceLock::new();
    GW.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("csi.sock");
        let overrides = Overrides {
            metrics_listen: Some(String::new()),
            state_dir: Some(dir.path().join("state")),
            log_level: Some("off".into()),
            ..Overrides::default()
        };
        let config = config::File::load(None)
            .and_then(|f| f.resolve(Some(format!("unix://{}", socket.display())), overrides))
            .unwrap();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let running = runtime.block_on(csi_gateway::gateway::start(&config)).unwrap();
        // The embedded plugin is detected in the background: wait until a call can pass.
        std::thread::sleep(Duration::from_secs(1));
        Gateway { runtime, socket, _dir: dir, _running: running }
    })
}

fuzz_target!(|data: &[u8]| {
    let gw = gateway();
    gw.runtime.block_on(async {
        let mut s = UnixStream::connect(&gw.socket).await.expect("the gateway accepts");
        let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        out.extend_from_slice(data);
        let _ = s.write_all(&out).await;
        let mut sink = vec![0u8; 64 * 1024];
        // Read what comes back until the gateway closes or goes quiet.
        while let Ok(Ok(n)) = tokio::time::timeout(Duration::from_millis(20), s.read(&mut sink)).await {
            if n == 0 {
                break;
            }
        }
    });
});
