//! The gateway as an operator who runs the Kubernetes CSI sidecars meets it (issue 39): the
//! sidecars' flags with their meaning, Kubernetes' JSON log shape, and the messages at the
//! moments that matter — a locked state file, a busy metrics port, a mistyped keyword, a
//! configuration that leaves sections to the command line, an upstream that is no HTTP/2 server.
//! Every case runs the built binary.

use csi_gateway_test_support as support;

use std::io::{Read as _, Write as _};
use std::process::{Command, Output};

use support::gateway::{self, Run};
use support::{Backend, Options};

/// The gateway run to its end with `args`.
fn run(args: &[&str]) -> Output {
    Command::new(gateway::binary())
        .args(args)
        .env_remove("CSI_ENDPOINT")
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `GET path` on 127.0.0.1:`port`: the status code and the body.
fn get(port: u16, path: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let code = text.split(' ').nth(1).unwrap_or("0").parse().unwrap_or(0);
    (code, text)
}

/// A manifest written for a sidecar runs the gateway: `--csi-address` (a plain path),
/// `--v`, `--http-endpoint` in Go's `:port` form, `--metrics-path`, and
/// `--logging-format=json`, whose lines are Kubernetes' flat `{"ts","caller","msg","v",…}`.
#[tokio::test]
async fn the_sidecar_flags_run_the_gateway_with_their_meaning() {
    let backend = Backend::start(Options::new("v1")).await;
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("sock").join("csi.sock");
    let port = support::free_port();
    let mut g = Run::start(
        dir.path(),
        "gateway",
        &[
            format!("--csi-address={}", socket.display()),
            format!("--upstream=unix://{}", backend.socket.display()),
            format!("--state-dir={}", dir.path().join("state").display()),
            format!("--http-endpoint=:{port}"),
            "--metrics-path=/custom-metrics".into(),
            "--logging-format=json".into(),
            "-v".into(),
            "4".into(),
        ],
    );
    g.wait_log("upstream connected");
    assert!(socket.exists(), "no front socket at the --csi-address");
    let (code, body) = get(port, "/custom-metrics");
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("csi_gateway_"), "{body}");
    assert_eq!(
        get(port, "/metrics").0,
        404,
        "the metrics moved to --metrics-path"
    );
    assert_eq!(get(port, "/healthz").0, 200);

    let log = g.log();
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: not JSON: {l}")))
        .collect();
    let serving = lines
        .iter()
        .find(|l| l["msg"] == "serving")
        .unwrap_or_else(|| panic!("no \"msg\":\"serving\" line:\n{log}"));
    assert!(
        serving["ts"].as_f64().unwrap() > 1.6e12,
        "ts is milliseconds: {serving}"
    );
    assert_eq!(serving["v"], 0, "{serving}");
    assert!(
        serving["caller"]
            .as_str()
            .unwrap()
            .starts_with("src/gateway.rs:"),
        "{serving}"
    );
    assert_eq!(
        serving["listen"],
        format!("unix://{}", socket.display()),
        "fields are flat at the top level: {serving}"
    );
    assert!(
        lines.iter().any(|l| l["v"] == 4),
        "--v=4 logs the gateway's debug lines at v 4:\n{log}"
    );
    let first = log.lines().next().unwrap();
    assert!(first.starts_with("{\"ts\":"), "{first}");
}

/// `--help` lists the sidecars' flags under a heading of their own; each conflicts with the
/// gateway's name for the same setting (exit 2 naming both); `unix:/abs` is an address.
#[test]
fn the_sidecar_flags_are_documented_and_exclusive() {
    let help = run(&["run", "--help"]);
    let text = String::from_utf8_lossy(&help.stdout);
    let heading = text
        .find("Kubernetes CSI sidecar compatibility:")
        .unwrap_or_else(|| panic!("{text}"));
    for flag in [
        "--csi-address",
        "-v, --v <N>",
        "--http-endpoint",
        "--metrics-path",
        "--logging-format",
    ] {
        let at = text.find(flag).unwrap_or_else(|| panic!("{flag}:\n{text}"));
        assert!(at > heading, "{flag} under the heading:\n{text}");
    }
    for (sidecar, own) in [
        ("--v=5", "--log-level=info"),
        ("--csi-address=/a.sock", "--listen=/b.sock"),
        ("--http-endpoint=:9808", "--metrics-listen=:9809"),
        ("--logging-format=json", "--log-format=text"),
    ] {
        let out = run(&["run", sidecar, own]);
        assert_eq!(out.status.code(), Some(2), "{sidecar} {own}");
        assert!(
            stderr(&out).contains("cannot be used with"),
            "{}",
            stderr(&out)
        );
    }
    let out = run(&["run", "--v=x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("invalid value 'x' for '--v <N>'"),
        "{}",
        stderr(&out)
    );
}

/// `unix:/abs/path` (one slash) is accepted where `unix:///abs/path` is.
#[tokio::test]
async fn a_unix_address_with_one_slash_is_accepted() {
    let backend = Backend::start(Options::new("v1")).await;
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("csi.sock");
    let mut g = Run::start(
        dir.path(),
        "gateway",
        &[
            format!("--csi-address=unix:{}", socket.display()),
            format!("--upstream=unix:{}", backend.socket.display()),
            format!("--state-dir={}", dir.path().join("state").display()),
            "--http-endpoint=".into(),
        ],
    );
    g.wait_log("upstream connected");
    assert!(socket.exists());
}

/// `[listen]`, `[upstream]` and `[state]` may be left to the command line; what nobody gives
/// is reported under its field, with where to give it, and exit 64.
#[test]
fn sections_the_command_line_fills_may_be_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gateway.toml");
    std::fs::write(&file, "[log]\nlevel = \"info\"\n").unwrap();
    let config = format!("--config={}", file.display());
    let out = run(&["run", &config]);
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    let text = stderr(&out);
    for line in [
        "\n  listen.endpoint: not set: give it in [listen] endpoint, with --listen (or --csi-address), or in CSI_ENDPOINT",
        "\n  state.dir: not set: give it in [state] dir or with --state-dir",
        "\n  upstream.endpoint: not set: give it in [upstream] endpoint or with --upstream",
    ] {
        assert!(text.contains(line), "{line:?} in:\n{text}");
    }
    assert!(!text.contains("line 1"), "{text}");

    // The same file runs once the flags give them (a bad upstream keeps it from starting, so
    // the outcome is read from the exit code and message: the configuration was accepted).
    let socket = dir.path().join("s").join("csi.sock");
    let out = run(&[
        "run",
        &config,
        &format!("--csi-address={}", socket.display()),
        &format!("--state-dir={}", dir.path().join("state").display()),
        "--upstream=embeded",
    ]);
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert_eq!(
        stderr(&out).trim(),
        "csi-gateway: configuration error: upstream.endpoint: \"embeded\" is not an endpoint: did you mean embedded (the built-in reference backend)?"
    );
    // A bad value inside a section is still placed on its line.
    std::fs::write(
        &file,
        "[log]\nlevel = \"info\"\n\n[metrics]\nprobe_timeout = 5\n",
    )
    .unwrap();
    let out = run(&["run", &config]);
    assert_eq!(out.status.code(), Some(64));
    assert!(stderr(&out).contains("line 5"), "{}", stderr(&out));
}

/// A busy metrics port stops the start-up before the front socket is bound: no socket file is
/// left behind.
#[test]
fn a_busy_metrics_port_leaves_no_front_socket() {
    let dir = tempfile::tempdir().unwrap();
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port();
    let socket = dir.path().join("sock").join("csi.sock");
    let out = run(&[
        "run",
        &format!("--csi-address={}", socket.display()),
        &format!("--state-dir={}", dir.path().join("state").display()),
        "--upstream=unix:///nonexistent/plugin.sock",
        &format!("--http-endpoint=127.0.0.1:{port}"),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!(
            "metrics endpoint 127.0.0.1:{port}: Address already in use"
        )),
        "{}",
        stderr(&out)
    );
    assert!(!socket.exists(), "the front socket was left behind");
}

/// A second gateway on the state directory of a running one is told the file is in use, by
/// which pid, and never to move the file away (that would lose the first one's handles).
#[test]
fn a_state_file_in_use_is_not_called_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let state = format!("--state-dir={}", dir.path().join("state").display());
    let args = |n: &str| {
        vec![
            format!(
                "--csi-address={}",
                dir.path().join(n).join("csi.sock").display()
            ),
            state.clone(),
            "--upstream=unix:///nonexistent/plugin.sock".to_string(),
            "--http-endpoint=".to_string(),
        ]
    };
    let mut first = Run::start(dir.path(), "first", &args("a"));
    first.wait_log("serving");
    let second: Vec<String> = args("b");
    let second: Vec<&str> = second.iter().map(String::as_str).collect();
    let out = run(&second);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let expected = format!(
        "csi-gateway: state store {}: the file is in use by another gateway (pid {}); stop that \
         gateway, or give this one a state directory of its own (state.dir, --state-dir)",
        dir.path().join("state").join("state.redb").display(),
        first.child.id()
    );
    assert_eq!(stderr(&out).trim(), expected);
    assert!(!stderr(&out).contains("move it away"));
}

/// An upstream that answers HTTP/1 is named as no HTTP/2 (gRPC) server, not as a frame size.
#[tokio::test]
async fn an_http1_upstream_is_named_as_one() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("h1.sock");
    let listener = tokio::net::UnixListener::bind(&socket).unwrap();
    // An HTTP/1 server as most answer a request they cannot parse (hyper's hangs up without a
    // word instead): "400 Bad Request", then a lingering close that reads what the client
    // still sends, so the reply is what the gateway reads, not a broken pipe.
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        loop {
            let Ok((mut io, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = io.read(&mut buf).await;
                let reply =
                    b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
                let _ = io.write_all(reply).await;
                while matches!(io.read(&mut buf).await, Ok(n) if n > 0) {}
            });
        }
    });
    let endpoint = format!("unix://{}", socket.display());
    let out = tokio::task::spawn_blocking(move || run(&["check", "--endpoint", &endpoint]))
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains(&format!(
            "upstream unix://{}: not an HTTP/2 (gRPC) server",
            socket.display()
        )),
        "{}",
        stderr(&out)
    );
    assert!(
        !stderr(&out).contains("frame with invalid size"),
        "{}",
        stderr(&out)
    );
}

/// The subject of the first certificate in `pem`, as text.
fn subject(pem: &str) -> String {
    let (_, der) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
    let cert = der.parse_x509().unwrap();
    cert.subject().to_string()
}

/// Two `gen-certs` runs make CAs of distinct subjects, so a gateway dialing a peer whose
/// certificate another CA signed is told so in those words; a TLS dial at a plaintext port is
/// told the peer does not speak TLS. Both read from the dialing gateway's JSON log, where the
/// error is Kubernetes' `err` field.
#[test]
fn tls_failures_are_told_in_operator_words() {
    use support::bridge::*;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for name in ["a", "b"] {
        let out = run(&["gen-certs", d.join(name).to_str().unwrap()]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let ca = |n: &str| std::fs::read_to_string(d.join(n).join("ca.pem")).unwrap();
    let (a, b) = (subject(&ca("a")), subject(&ca("b")));
    assert_ne!(a, b, "two development CAs share a subject");
    assert!(a.starts_with("CN=csi-gateway development CA "), "{a}");

    // The appliance serves with b's certificate; its metrics port is a plaintext HTTP server.
    let plugin = fixed_upstream(&d.join("up.sock"));
    let port = free_port();
    let metrics = free_port();
    let pki_b = d.join("b");
    let appliance = gateway_with_metrics(
        "appliance",
        d,
        &(front_section(
            &d.join("b.sock"),
            &format!("unix://{}", d.join("up.sock").display()),
        ) + &appliance_section(
            port,
            &pki_b.join("server.pem"),
            &pki_b.join("server.key"),
            &pki_b.join("ca.pem"),
            "",
        )),
        &format!("127.0.0.1:{metrics}"),
    );
    appliance.wait_log("appliance listening");
    let pki_a = d.join("a");
    let tls = upstream_tls_section(
        &pki_a.join("client.pem"),
        &pki_a.join("client.key"),
        &pki_a.join("ca.pem"),
        "",
    );
    for (name, target, words) in [
        (
            "wrong-ca",
            port,
            "peer certificate is not signed by the configured CA (UnknownIssuer)",
        ),
        ("plaintext", metrics, "the peer does not speak TLS"),
    ] {
        let node = gateway(
            name,
            d,
            &(front_section(
                &d.join(format!("{name}.sock")),
                &format!("tcp://127.0.0.1:{target}"),
            ) + &tls),
        );
        node.wait_log("upstream not reachable");
        let log = node.log();
        let line: serde_json::Value = log
            .lines()
            .find(|l| l.contains("upstream not reachable"))
            .map(|l| serde_json::from_str(l).unwrap())
            .unwrap();
        let err = line["err"].as_str().unwrap_or_else(|| panic!("{line}"));
        assert!(err.contains(words), "{name}: {err}");
        assert!(line.get("v").is_none(), "a warning has no v: {line}");
    }
    drop(plugin);
}
