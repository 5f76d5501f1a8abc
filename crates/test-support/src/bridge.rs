//! Shared by the `bridge_*` tests: processes of the built binaries with their logs captured,
//! a development PKI written to a temporary directory, free loopback ports, and a v1 client.
//! Readiness is always a log line or a socket, never a fixed sleep.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use csi_gateway::endpoint::Endpoint;
use csi_gateway::grpc::frame;
use csi_gateway::grpc::Status;
use csi_gateway::tls::gencerts::{write_atomic, DevCa, Leaf};
use csi_gateway::upstream::Connection;
use rustls::ClientConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncRead, AsyncWrite};

/// The built gateway (the test suite's build, with the `test-hooks` feature).
pub fn gateway_binary() -> &'static str {
    crate::workspace_binary("csi-gateway")
}

/// The built load tool.
pub fn load_binary() -> &'static str {
    crate::workspace_binary("csi-gateway-load")
}

pub const WAIT: Duration = Duration::from_secs(20);

/// A child process whose stderr is collected (and echoed, so a failing test shows it).
pub struct Proc {
    pub name: String,
    child: Child,
    log: Arc<Mutex<String>>,
}

impl Proc {
    pub fn spawn(name: &str, cmd: &mut Command) -> Proc {
        let mut child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {name}: {e}"));
        let log = Arc::new(Mutex::new(String::new()));
        let (sink, stderr, tag) = (log.clone(), child.stderr.take().unwrap(), name.to_string());
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[{tag}] {line}");
                let mut l = sink.lock().unwrap();
                l.push_str(&line);
                l.push('\n');
            }
        });
        Proc {
            name: name.into(),
            child,
            log,
        }
    }

    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    pub fn count(&self, needle: &str) -> usize {
        self.log().matches(needle).count()
    }

    /// Waits until the log holds `needle` at least `n` times.
    pub fn wait_log_n(&self, needle: &str, n: usize) {
        let until = Instant::now() + WAIT;
        while self.count(needle) < n {
            assert!(
                Instant::now() < until,
                "{}: no {n}× {needle:?} in the log within {WAIT:?}",
                self.name
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn wait_log(&self, needle: &str) {
        self.wait_log_n(needle, 1)
    }

    /// Waits for the process to exit on its own.
    pub fn wait_exit(&mut self) -> std::process::ExitStatus {
        let until = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < until, "{} did not exit", self.name);
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn hangup(&self) {
        self.signal("HUP")
    }

    /// Sends `SIG<name>` (HUP, STOP, CONT) to the process.
    pub fn signal(&self, name: &str) {
        let ok = Command::new(super::deps::KILL.path())
            .args([&format!("-{name}"), &self.pid().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{name} {}", self.name);
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback port nobody listens on right now, given to no other caller in this test binary
/// (`crate::free_port`).
pub fn free_port() -> u16 {
    crate::free_port()
}

/// A loopback port that refuses every connection while this lives: bound, never listening, so
/// neither another test nor the kernel's choice of an outgoing port can take it meanwhile.
pub struct RefusedPort(tokio::net::TcpSocket);

impl RefusedPort {
    pub fn new() -> Self {
        let socket = tokio::net::TcpSocket::new_v4().expect("a TCP socket");
        socket
            .bind(([127, 0, 0, 1], 0).into())
            .expect("bind a loopback port");
        Self(socket)
    }

    pub fn port(&self) -> u16 {
        self.0
            .local_addr()
            .expect("a bound socket has an address")
            .port()
    }
}

impl Default for RefusedPort {
    fn default() -> Self {
        Self::new()
    }
}

pub fn wait_socket(path: &Path) {
    let until = Instant::now() + WAIT;
    while std::os::unix::net::UnixStream::connect(path).is_err() {
        assert!(Instant::now() < until, "{} did not come up", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The fixed-reply v1 upstream (every unary call: empty OK) on `sock`.
pub fn fixed_upstream(sock: &Path) -> Proc {
    let p = Proc::spawn(
        "plugin",
        Command::new(load_binary())
            .args(["fixed-upstream", "--listen"])
            .arg(sock),
    );
    wait_socket(sock);
    p
}

/// A gateway running `config` (JSON logs, so fields read as `"key":"value"`).
pub fn gateway(name: &str, dir: &Path, config: &str) -> Proc {
    gateway_with_metrics(name, dir, config, "")
}

/// [`gateway`] with its metrics endpoint on `metrics` (`host:port`; empty: none).
pub fn gateway_with_metrics(name: &str, dir: &Path, config: &str, metrics: &str) -> Proc {
    let file = dir.join(format!("{name}.toml"));
    std::fs::write(
        &file,
        format!(
            "{config}\n[log]\nformat = \"json\"\nlevel = \"info\"\n[state]\ndir = {:?}\n[metrics]\nlisten = \"{metrics}\"\n",
            dir.join(format!("{name}-state"))
        ),
    )
    .unwrap();
    Proc::spawn(
        name,
        Command::new(gateway_binary())
            .arg("run")
            .arg("--config")
            .arg(&file),
    )
}

/// One v1 unary call on a fresh connection to the gateway's UNIX socket.
pub async fn call(sock: &Path, path: &str) -> Result<Bytes, Status> {
    let attempt = async {
        let conn = Connection::connect(&Endpoint::Unix(sock.into()), Duration::from_secs(5))
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        conn.unary(path, &[]).await.map_err(Status::from)
    };
    tokio::time::timeout(Duration::from_secs(10), attempt)
        .await
        .unwrap_or_else(|_| Err(Status::deadline_exceeded("test call timed out")))
}

/// A development CA whose certificates the tests write into `dir`.
pub struct Pki {
    pub dir: PathBuf,
    pub ca: DevCa,
    /// `<name>-ca.pem`: this CA's certificate alone.
    pub ca_path: PathBuf,
}

impl Pki {
    pub fn new(dir: &Path, name: &str) -> Pki {
        let ca = DevCa::new(name).unwrap();
        let ca_path = dir.join(format!("{name}-ca.pem"));
        write_atomic(&ca_path, ca.cert_pem.as_bytes(), 0o644).unwrap();
        Pki {
            dir: dir.into(),
            ca,
            ca_path,
        }
    }

    /// Issues `leaf` into `<name>.pem` / `<name>.key` and returns the two paths.
    pub fn issue(&self, name: &str, leaf: &Leaf) -> (PathBuf, PathBuf) {
        let issued = self.ca.issue(leaf).unwrap();
        let (cert, key) = (
            self.dir.join(format!("{name}.pem")),
            self.dir.join(format!("{name}.key")),
        );
        write_atomic(&cert, issued.cert_pem.as_bytes(), 0o644).unwrap();
        write_atomic(&key, issued.key_pem.as_bytes(), 0o600).unwrap();
        (cert, key)
    }

    pub fn put(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.join(name);
        write_atomic(&p, text.as_bytes(), 0o644).unwrap();
        p
    }
}

/// The fixed-reply plugin on `<dir>/up.sock` behind a gateway named "appliance" (front socket
/// `<dir>/<front>`) that serves it over mutual TLS on a free loopback port: server certificate
/// `localhost` from a new CA `ca_name`, peer rules `rules` appended to `[appliance]`. Returned
/// once the appliance listens and has reached the plugin.
pub struct Appliance {
    pub gateway: Proc,
    pub plugin: Proc,
    pub pki: Pki,
    pub port: u16,
}

pub fn appliance(dir: &Path, ca_name: &str, front: &str, rules: &str) -> Appliance {
    let pki = Pki::new(dir, ca_name);
    let (cert, key) = pki.issue("server", &Leaf::server(&["localhost"]));
    let plugin = fixed_upstream(&dir.join("up.sock"));
    let port = free_port();
    let gateway = gateway(
        "appliance",
        dir,
        &(front_section(
            &dir.join(front),
            &format!("unix://{}", dir.join("up.sock").display()),
        ) + &appliance_section(port, &cert, &key, &pki.ca_path, rules)),
    );
    gateway.wait_log("appliance listening");
    gateway.wait_log("upstream connected");
    Appliance {
        gateway,
        plugin,
        pki,
        port,
    }
}

/// An [`appliance`] (front socket `<dir>/b.sock`, no peer rules) and a gateway named "node" on
/// `<dir>/a.sock` dialing it as `client_dns`, with keepalive PINGs every 200 ms that drop a
/// peer silent for 300 ms; returned once the node gateway is connected.
pub struct KeepaliveBridge {
    pub node: Proc,
    pub appliance: Appliance,
}

pub fn keepalive_bridge(dir: &Path, ca_name: &str, client_dns: &str) -> KeepaliveBridge {
    let appliance = appliance(dir, ca_name, "b.sock", "");
    let (cert, key) = appliance
        .pki
        .issue("client", &Leaf::client(&[client_dns], &[]));
    let node = gateway(
        "node",
        dir,
        &(front_section(
            &dir.join("a.sock"),
            &format!("tcp://127.0.0.1:{}", appliance.port),
        ) + &upstream_tls_section(
            &cert,
            &key,
            &appliance.pki.ca_path,
            "keepalive_interval = \"200ms\"\nkeepalive_timeout = \"300ms\"",
        )),
    );
    node.wait_log("upstream connected");
    KeepaliveBridge { node, appliance }
}

/// A node gateway on `<dir>/a.sock` → mutual TLS → an appliance gateway (front socket
/// `<dir>/b.sock`) → `backend`, both detecting the dialect; the appliance mirrors node paths
/// under `<dir>/mirror`. Returned once the node gateway is connected, with a v1 client of it.
pub struct MirrorBridge {
    pub node: Proc,
    pub appliance: Proc,
    pub front: crate::front::Front,
    pub mirror: PathBuf,
}

pub async fn mirror_bridge(dir: &Path, backend: &crate::Backend) -> MirrorBridge {
    let pki = Pki::new(dir, "bridge");
    let (scert, skey) = pki.issue("server", &Leaf::server(&["localhost"]));
    let (ccert, ckey) = pki.issue("client", &Leaf::client(&["node-1.test"], &[]));
    let port = free_port();
    let mirror = dir.join("mirror");
    let extra = format!("node_paths = {mirror:?}");
    let auto = |s: String| s.replace("dialect = \"v1\"", "dialect = \"auto\"");
    let b_config = auto(front_section(&dir.join("b.sock"), &backend.endpoint()))
        + &appliance_section(port, &scert, &skey, &pki.ca_path, &extra);
    let appliance = gateway("appliance", dir, &b_config);
    appliance.wait_log("appliance listening");
    appliance.wait_log("upstream connected");
    let a_config = auto(front_section(
        &dir.join("a.sock"),
        &format!("tcp://127.0.0.1:{port}"),
    )) + &upstream_tls_section(&ccert, &ckey, &pki.ca_path, "");
    let node = gateway("node", dir, &a_config);
    node.wait_log("upstream connected");
    let front = crate::front::Front::new(
        csi_gateway::dialect::Dialect::V1,
        crate::connect(&dir.join("a.sock")).await,
    );
    MirrorBridge {
        node,
        appliance,
        front,
        mirror,
    }
}

/// `[appliance]` on `port` with the given peer rules (TOML text appended).
pub fn appliance_section(port: u16, cert: &Path, key: &Path, ca: &Path, extra: &str) -> String {
    format!(
        "[appliance]\nlisten = \"tcp://127.0.0.1:{port}\"\ncert = {cert:?}\nkey = {key:?}\nclient_ca = {ca:?}\nhandshake_timeout = \"5s\"\n{extra}\n"
    )
}

/// `[listen]` + `[upstream]` for a gateway on `listen` in front of `upstream`.
pub fn front_section(listen: &Path, upstream: &str) -> String {
    format!(
        "[listen]\nendpoint = \"unix://{}\"\ngrace_period = \"1s\"\n[upstream]\nendpoint = \"{upstream}\"\ndialect = \"v1\"\nconnect_timeout = \"3s\"\nbackoff_initial = \"50ms\"\nbackoff_max = \"500ms\"\n",
        listen.display()
    )
}

/// `[upstream.tls]`.
pub fn upstream_tls_section(cert: &Path, key: &Path, ca: &Path, extra: &str) -> String {
    format!(
        "[upstream.tls]\ncert = {cert:?}\nkey = {key:?}\nca = {ca:?}\nserver_name = \"localhost\"\n{extra}\n"
    )
}

/// A client configuration trusting the PEM bundle `roots`, presenting `identity` if any.
pub fn client_config(
    roots: &str,
    identity: Option<&csi_gateway::tls::gencerts::Issued>,
) -> ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut store = rustls::RootCertStore::empty();
    store
        .add(CertificateDer::from_pem_slice(roots.as_bytes()).unwrap())
        .unwrap();
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(store);
    let mut config = match identity {
        None => builder.with_no_client_auth(),
        Some(i) => builder
            .with_client_auth_cert(
                vec![CertificateDer::from_pem_slice(i.cert_pem.as_bytes()).unwrap()],
                PrivateKeyDer::from_pem_slice(i.key_pem.as_bytes()).unwrap(),
            )
            .unwrap(),
    };
    config.alpn_protocols = vec![b"h2".to_vec()];
    config
}

/// TLS to the appliance, then one v1 Probe; any failure on the way is the error.
pub async fn tls_probe(port: u16, config: ClientConfig) -> Result<(), String> {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| e.to_string())?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    h2_probe(tls).await
}

/// `/csi.v1.Identity/Probe` over HTTP/2 on `io`, bounded in time; Ok only on grpc-status 0.
pub async fn h2_probe<T>(io: T) -> Result<(), String>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let probe = async {
        let (send, conn) = h2::client::handshake(io).await.map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        let mut request = csi_gateway::upstream::conn::grpc_request("/csi.v1.Identity/Probe")
            .map_err(|s| s.to_string())?;
        *request.uri_mut() = "http://localhost/csi.v1.Identity/Probe".parse().unwrap();
        let mut send = send.ready().await.map_err(|e| e.to_string())?;
        let (response, mut stream) = send
            .send_request(request, false)
            .map_err(|e| e.to_string())?;
        stream
            .send_data(frame::encode(&[]), true)
            .map_err(|e| e.to_string())?;
        let mut body = response.await.map_err(|e| e.to_string())?.into_body();
        while let Some(chunk) = body.data().await {
            let chunk: Bytes = chunk.map_err(|e| e.to_string())?;
            let _ = body.flow_control().release_capacity(chunk.len());
        }
        let trailers = body.trailers().await.map_err(|e| e.to_string())?;
        match trailers.as_ref().and_then(|t| t.get("grpc-status")) {
            Some(v) if v == "0" => Ok(()),
            other => Err(format!("grpc-status {other:?}")),
        }
    };
    tokio::time::timeout(Duration::from_secs(10), probe)
        .await
        .unwrap_or_else(|_| Err("timed out".into()))
}
