//! The runner's side of the egress proxy (DESIGN §13), without a gate: a `network =
//! restricted` command reaches the outside only through the decider it was run with, which
//! sees each connection's `host:port` and names the addresses to connect to; the plain `run`
//! refuses everything. Real children against a local server.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic
#![cfg(target_os = "linux")]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use turngate::protocol::{
    BackendRequirement, FsAccess, NetworkMode, SandboxBackendKind, SandboxMode,
    TurnNetworkPolicySnapshot,
};
use turngate::sandbox::egress::{BoxFuture, EgressDecider, EgressDecision};
use turngate::sandbox::{
    FsGrant, LinuxNonoBackend, ProcessRequest, ProcessRunner, SandboxSpec, TmpSpec,
};

fn spec(workspace: &std::path::Path) -> SandboxSpec {
    SandboxSpec {
        mode: SandboxMode::WorkspaceWrite,
        roots: vec![FsGrant {
            path: workspace.to_path_buf(),
            access: FsAccess::Write,
        }],
        system_roots: true,
        tmp: TmpSpec::Isolated(None),
        network: TurnNetworkPolicySnapshot {
            mode: NetworkMode::Restricted,
            allowed_domains: vec![],
            denied_domains: vec![],
            allow_localhost: false,
            allow_unix_sockets: false,
            allowed_tcp_ports: vec![],
        },
        requirement: BackendRequirement::Required,
        preference: SandboxBackendKind::Nono,
        home: None,
        masks: Vec::new(),
        masks_truncated: false,
        review: None,
    }
}

/// Serves `hello` once per connection; counts connections.
fn server() -> (SocketAddr, Arc<Mutex<usize>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let count = Arc::new(Mutex::new(0));
    let seen = count.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            *seen.lock().unwrap() += 1;
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nhello\n");
        }
    });
    (addr, count)
}

/// Connects every request to one address and records what it was asked.
struct To {
    addr: SocketAddr,
    asked: Mutex<Vec<String>>,
}

impl EgressDecider for To {
    fn decide<'a>(&'a self, authority: &'a str) -> BoxFuture<'a, EgressDecision> {
        self.asked.lock().unwrap().push(authority.to_owned());
        Box::pin(async move { EgressDecision::Connect(vec![self.addr]) })
    }
}

fn curl(url: &str, workspace: &std::path::Path) -> ProcessRequest {
    ProcessRequest::new(
        ["/usr/bin/curl", "-sS", "-w", " %{http_code}", url],
        workspace,
    )
    .env([("PATH", "/usr/bin:/bin"), ("LANG", "C")])
    .timeout(Duration::from_secs(30))
    .sandbox(spec(workspace))
}

#[test]
fn the_decider_sees_each_connection_and_names_where_it_goes() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().canonicalize().unwrap();
    let (addr, count) = server();
    let decider = To {
        addr,
        asked: Mutex::new(Vec::new()),
    };
    let runner = ProcessRunner::new(Arc::new(LinuxNonoBackend::new()));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // The name is never resolved by the proxy: the decider's address is where it goes.
    let out = rt
        .block_on(runner.run_with_egress(curl("http://pkg.invalid:8080/x", &workspace), &decider))
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "hello\n 200",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(*decider.asked.lock().unwrap(), vec!["pkg.invalid:8080"]);
    assert_eq!(*count.lock().unwrap(), 1);
    let report = out.sandbox.unwrap();
    assert!(report.detail.contains("egress proxy"), "{report:?}");
}

#[test]
fn without_a_decider_every_connection_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().canonicalize().unwrap();
    let (addr, count) = server();
    let runner = ProcessRunner::new(Arc::new(LinuxNonoBackend::new()));
    let out = runner
        .run_blocking(curl(&format!("http://{addr}/"), &workspace))
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("no gate decides this command's connections") && stdout.ends_with(" 403"),
        "{stdout}"
    );
    assert_eq!(*count.lock().unwrap(), 0);
}
