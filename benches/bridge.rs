//! The remote appliance bridge under load, measured from outside like a user would, in one run:
//! a fixed-reply v1 upstream called directly (the baseline), through one gateway on UNIX
//! sockets, through two gateways chained on UNIX sockets, through two gateways bridged by
//! mutual TLS over loopback TCP (UDS → gateway → mTLS TCP → gateway → UDS), and through the
//! same shape built from generic relays that know nothing of CSI or HTTP/2: socat (UDS → TCP)
//! → stunnel (TLS client, with a client certificate) → stunnel (TLS server requiring one) →
//! the plugin's UDS. The two-gateway runs differ only in the hop between the gateways, so
//! their ratio is the price of mTLS TCP; the bridge and the stunnel chain do the same work.
//!
//! Every target's row shows the CPU each of its processes spent per call in the measured
//! window (`csi-gateway-load run --cpu`, from /proc/PID/stat; socat counts with the children
//! it forks per connection), the load tool's own last (`client`).
//!
//! `cargo build --release --workspace && cargo bench --bench bridge` (the load tool is another
//! workspace member's binary, taken from `target/release/`; env: E2E_DURATION=3s, E2E_ROUNDS=3,
//! E2E_CONCURRENCY=1,16,64, E2E_SCHEDULING=batch, the gateways' `[runtime] scheduling`; socat
//! and stunnel4 must be installed).

use std::io::Write as _;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use csi_gateway_test_support::workspace_binary;

struct Proc(Child);

impl Proc {
    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `cmd` and waits until its stderr shows `ready` (or, for `None`, just starts it).
fn spawn(cmd: &mut Command, ready: Option<&str>) -> Proc {
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    if let Some(ready) = ready {
        let until = Instant::now() + Duration::from_secs(20);
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) if line.contains(ready) => break,
                Ok(_) => {}
                Err(_) => panic!("no {ready:?} within 20s"),
            }
        }
    }
    Proc(child)
}

fn wait_for_socket(path: &Path) {
    let until = Instant::now() + Duration::from_secs(10);
    while std::os::unix::net::UnixStream::connect(path).is_err() {
        assert!(Instant::now() < until, "{} did not come up", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_for_tcp(port: u16) {
    let until = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < until,
            "nothing listens on 127.0.0.1:{port}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` passes nothing: only measure when asked.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let sock = |name: &str| -> PathBuf { d.join(name) };
    let gateway = env!("CARGO_BIN_EXE_csi-gateway");
    let load = workspace_binary("csi-gateway-load");
    let certs = d.join("certs");
    assert!(Command::new(gateway)
        .arg("gen-certs")
        .arg(&certs)
        .stdout(Stdio::null())
        .status()
        .unwrap()
        .success());
    let port = free_port();
    let config = |name: &str, text: String| -> PathBuf {
        let p = d.join(format!("{name}.toml"));
        std::fs::write(
            &p,
            format!(
                "{text}\n[log]\nlevel = \"info\"\nformat = \"json\"\n[state]\ndir = {:?}\n[metrics]\nlisten = \"\"\n[runtime]\nscheduling = {:?}\n",
                d.join(format!("{name}-state")),
                std::env::var("E2E_SCHEDULING").unwrap_or_else(|_| "batch".into())
            ),
        )
        .unwrap();
        p
    };
    let front = |listen: &str, upstream: String| {
        format!(
            "[listen]\nendpoint = \"unix://{}\"\n[upstream]\nendpoint = \"{upstream}\"\ndialect = \"v1\"\n",
            sock(listen).display()
        )
    };
    let c = |f: &str| certs.join(f).display().to_string();

    let upstream = spawn(
        Command::new(load)
            .args(["fixed-upstream", "--listen"])
            .arg(sock("up.sock")),
        None,
    );
    wait_for_socket(&sock("up.sock"));
    let up = format!("unix://{}", sock("up.sock").display());
    let run = |name: &str, text: String, ready: &str| {
        spawn(
            Command::new(gateway)
                .arg("run")
                .arg("--config")
                .arg(config(name, text)),
            Some(ready),
        )
    };
    // One gateway; two chained on UNIX sockets; two bridged by mTLS over TCP.
    let one = run("one", front("one.sock", up.clone()), "upstream connected");
    let b = run(
        "appliance",
        front("b.sock", up.clone())
            + &format!(
                "[appliance]\nlisten = \"tcp://127.0.0.1:{port}\"\ncert = \"{}\"\nkey = \"{}\"\nclient_ca = \"{}\"\n",
                c("server.pem"),
                c("server.key"),
                c("ca.pem")
            ),
        "upstream connected",
    );
    let chain = run(
        "chain",
        front("chain.sock", format!("unix://{}", sock("b.sock").display())),
        "upstream connected",
    );
    let a = run(
        "node",
        front("a.sock", format!("tcp://127.0.0.1:{port}"))
            + &format!(
                "[upstream.tls]\ncert = \"{}\"\nkey = \"{}\"\nca = \"{}\"\nserver_name = \"localhost\"\n",
                c("client.pem"),
                c("client.key"),
                c("ca.pem")
            ),
        "upstream connected",
    );

    // The same shape from generic relays, with the gateways' certificates: socat → stunnel
    // (client certificate) → stunnel (client certificate required, verified) → the plugin.
    let (tls_port, plain_port) = (free_port(), free_port());
    let stunnel_conf = |name: &str, text: String| -> PathBuf {
        let p = d.join(format!("{name}.conf"));
        let mut f = std::fs::File::create(&p).unwrap();
        write!(f, "foreground = yes\npid =\ndebug = 3\n{text}").unwrap();
        p
    };
    let stunnel_server = spawn(
        Command::new(which("stunnel4").or_else(|| which("stunnel")).expect("stunnel4 installed")).arg(stunnel_conf(
            "stunnel-server",
            format!(
                "[appliance]\naccept = 127.0.0.1:{tls_port}\nconnect = {}\ncert = {}\nkey = {}\nCAfile = {}\nverifyChain = yes\nrequireCert = yes\nsocket = l:TCP_NODELAY=1\n",
                sock("up.sock").display(),
                c("server.pem"),
                c("server.key"),
                c("ca.pem")
            ),
        )),
        None,
    );
    wait_for_tcp(tls_port);
    let stunnel_client = spawn(
        Command::new(which("stunnel4").or_else(|| which("stunnel")).expect("stunnel4 installed")).arg(stunnel_conf(
            "stunnel-client",
            format!(
                "[node]\nclient = yes\naccept = 127.0.0.1:{plain_port}\nconnect = 127.0.0.1:{tls_port}\ncert = {}\nkey = {}\nCAfile = {}\nverifyChain = yes\ncheckHost = localhost\nsocket = l:TCP_NODELAY=1\nsocket = r:TCP_NODELAY=1\n",
                c("client.pem"),
                c("client.key"),
                c("ca.pem")
            ),
        )),
        None,
    );
    wait_for_tcp(plain_port);
    let socat = spawn(
        Command::new(which("socat").expect("socat installed"))
            .arg(format!("UNIX-LISTEN:{},fork", sock("socat.sock").display()))
            .arg(format!("TCP:127.0.0.1:{plain_port},nodelay")),
        None,
    );
    wait_for_socket(&sock("socat.sock"));

    let env = |k: &str, d: &str| std::env::var(k).unwrap_or_else(|_| d.to_string());
    let target = |name: &str, s: &str| format!("{name}=unix://{}", sock(s).display());
    let cpu = |name: &str, procs: &[(&str, &Proc)]| {
        // The load tool's own share last: how the relays hand it the replies changes its cost.
        let list: Vec<String> = procs
            .iter()
            .map(|(label, p)| format!("{label}:{}", p.pid()))
            .chain(["client:self".to_string()])
            .collect();
        format!("{name}={}", list.join(","))
    };
    println!(
        "# v1 Probe: direct vs 1 gateway vs 2 gateways on UDS vs 2 gateways bridged by mTLS TCP \
         vs socat -> stunnel -> mTLS TCP -> stunnel; CPU µs per call for each process"
    );
    let status = Command::new(load)
        .arg("run")
        .args(["--duration", &env("E2E_DURATION", "3s")])
        .args(["--rounds", &env("E2E_ROUNDS", "3")])
        .args(["--concurrency", &env("E2E_CONCURRENCY", "1,16,64")])
        .args(["--warmup", "500ms"])
        .arg("--target")
        .arg(target("direct", "up.sock"))
        .arg("--target")
        .arg(target("gateway", "one.sock"))
        .arg("--target")
        .arg(target("2gw-uds", "chain.sock"))
        .arg("--target")
        .arg(target("2gw-mtls", "a.sock"))
        .arg("--target")
        .arg(target("stunnel", "socat.sock"))
        .arg("--compare=2gw-mtls=stunnel")
        .arg("--cpu")
        .arg(cpu("direct", &[("plugin", &upstream)]))
        .arg("--cpu")
        .arg(cpu("gateway", &[("gateway", &one), ("plugin", &upstream)]))
        .arg("--cpu")
        .arg(cpu(
            "2gw-uds",
            &[("node", &chain), ("appliance", &b), ("plugin", &upstream)],
        ))
        .arg("--cpu")
        .arg(cpu(
            "2gw-mtls",
            &[("node", &a), ("appliance", &b), ("plugin", &upstream)],
        ))
        .arg("--cpu")
        .arg(cpu(
            "stunnel",
            &[
                ("socat", &socat),
                ("stunnel-c", &stunnel_client),
                ("stunnel-s", &stunnel_server),
                ("plugin", &upstream),
            ],
        ))
        .status()
        .unwrap();
    assert!(status.success());
}
