//! Enforcement tests: every test runs a real child that tries to escape and asserts that the
//! kernel refused (EACCES from Landlock, EPERM from the seccomp socket filter), not just that
//! "something failed". If Landlock is unavailable these tests fail loudly: they never pass
//! without a sandbox.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic
#![cfg(target_os = "linux")]

use std::io::{Read, Write};
use std::net::{TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use turngate::protocol::{
    BackendRequirement, FsAccess, NetworkMode, SandboxBackendKind, SandboxMode,
    TurnNetworkPolicySnapshot,
};
use turngate::sandbox::{
    EnforcementLevel, FsGrant, LinuxNonoBackend, ProcessOutcome, ProcessRequest, ProcessRunner,
    RestrictedTokenBackend, RunError, SandboxBackend, SandboxError, SandboxSpec, TmpSpec,
};

const PY: &str = r#"
import sys, os, socket, errno
op = sys.argv[1]
try:
    if op == "write":
        open(sys.argv[2], "w").write("x")
    elif op == "read":
        open(sys.argv[2]).read()
    elif op == "list":
        os.listdir(sys.argv[2])
    elif op == "tcp":
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(5)
        s.connect(("127.0.0.1", int(sys.argv[2])))
        s.sendall(b"hi")
        s.close()
    elif op == "udp":
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.sendto(b"hi", ("127.0.0.1", int(sys.argv[2])))
    print("OK")
except OSError as e:
    print("ERRNO", errno.errorcode.get(e.errno, e.errno))
"#;

/// Fail loudly when the kernel cannot sandbox: these tests must never pass unconfined.
fn require_landlock() {
    let probe = LinuxNonoBackend::new().probe();
    assert!(
        probe.available,
        "Landlock is unavailable, so enforcement cannot be tested: {}",
        probe.detail
    );
}

fn network(mode: NetworkMode, ports: Vec<u16>) -> TurnNetworkPolicySnapshot {
    TurnNetworkPolicySnapshot {
        mode,
        allowed_domains: vec![],
        denied_domains: vec![],
        allow_localhost: false,
        allow_unix_sockets: false,
        allowed_tcp_ports: ports,
    }
}

fn spec(workspace: &Path, net: TurnNetworkPolicySnapshot) -> SandboxSpec {
    SandboxSpec {
        mode: SandboxMode::WorkspaceWrite,
        roots: vec![FsGrant {
            path: workspace.to_path_buf(),
            access: FsAccess::Write,
        }],
        system_roots: true,
        tmp: TmpSpec::Isolated(None),
        network: net,
        requirement: BackendRequirement::Required,
        preference: SandboxBackendKind::Nono,
        home: None,
        masks: Vec::new(),
        masks_truncated: false,
        review: None,
    }
}

fn runner() -> ProcessRunner {
    ProcessRunner::new(Arc::new(LinuxNonoBackend::new()))
}

fn run(spec: &SandboxSpec, cwd: &Path, argv: &[&str]) -> ProcessOutcome {
    let request = ProcessRequest::new(argv.iter().copied(), cwd)
        .env([("PATH", "/usr/bin:/bin"), ("LANG", "C")])
        .timeout(Duration::from_secs(30))
        .sandbox(spec.clone());
    runner().run_blocking(request).unwrap()
}

fn py(spec: &SandboxSpec, cwd: &Path, args: &[&str]) -> String {
    let mut argv = vec!["/usr/bin/python3", "-c", PY];
    argv.extend_from_slice(args);
    let out = run(spec, cwd, &argv);
    assert_eq!(
        out.exit_code,
        Some(0),
        "python failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn sh(spec: &SandboxSpec, cwd: &Path, script: &str) -> ProcessOutcome {
    run(spec, cwd, &["/bin/sh", "-c", script])
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

struct Dirs {
    _root: tempfile::TempDir,
    workspace: PathBuf,
    outside: PathBuf,
}

fn dirs() -> Dirs {
    let root = tempfile::tempdir().unwrap();
    let base = root.path().canonicalize().unwrap();
    let workspace = base.join("workspace");
    let outside = base.join("outside");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "secret").unwrap();
    Dirs {
        _root: root,
        workspace,
        outside,
    }
}

/// What a refused write outside the writable roots fails with: the namespace layer's
/// read-only mount view (EROFS) where this machine has it, else Landlock (EACCES).
fn write_refused() -> &'static str {
    if turngate::sandbox::namespace::probe().mount {
        "ERRNO EROFS"
    } else {
        "ERRNO EACCES"
    }
}

/// The same refusal as a shell prints it.
fn write_refused_text() -> &'static str {
    if turngate::sandbox::namespace::probe().mount {
        "Read-only file system"
    } else {
        "Permission denied"
    }
}

#[test]
fn report_is_computed_from_the_probe() {
    require_landlock();
    let d = dirs();
    let s = spec(&d.workspace, network(NetworkMode::Disabled, vec![]));
    let out = sh(&s, &d.workspace, "true");
    let report = out.sandbox.unwrap();
    assert_eq!(report.backend, SandboxBackendKind::Nono);
    assert!(report.detail.contains("landlock V"), "{}", report.detail);
    assert_ne!(report.status, EnforcementLevel::Unavailable);
}

#[test]
fn write_outside_roots_fails_and_leaves_no_file() {
    require_landlock();
    let d = dirs();
    let s = spec(&d.workspace, network(NetworkMode::Disabled, vec![]));
    let target = d.outside.join("escaped.txt");
    assert_eq!(
        py(&s, &d.workspace, &["write", path_str(&target)]),
        write_refused()
    );
    let out = sh(&s, &d.workspace, &format!("echo x > {}", path_str(&target)));
    assert_ne!(out.exit_code, Some(0));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(write_refused_text()),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !target.exists(),
        "the sandboxed child created a file outside its roots"
    );
}

#[test]
fn write_inside_succeeds() {
    require_landlock();
    let d = dirs();
    let s = spec(&d.workspace, network(NetworkMode::Disabled, vec![]));
    let out = sh(
        &s,
        &d.workspace,
        "echo hello > inside.txt && mkdir sub && echo y > sub/f",
    );
    assert_eq!(
        out.exit_code,
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(d.workspace.join("inside.txt")).unwrap(),
        "hello\n"
    );
    assert!(d.workspace.join("sub/f").exists());
}

#[test]
fn isolated_tmp_is_private_and_writable() {
    require_landlock();
    let d = dirs();
    let s = spec(&d.workspace, network(NetworkMode::Disabled, vec![]));
    let out = sh(
        &s,
        &d.workspace,
        "echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\" && echo $TMPDIR",
    );
    assert_eq!(
        out.exit_code,
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let tmpdir = stdout.lines().nth(1).unwrap();
    // A tmpfs of the run's own, mounted on the preparation's empty placeholder (ADR 0027):
    // what the command wrote never reached the host.
    assert!(tmpdir.contains("turngate-slot-"), "{tmpdir}");
    assert!(
        !Path::new(tmpdir).join("t").exists(),
        "the run's tmp file is on the host"
    );
    // The host's shared /tmp is not granted under isolated tmp.
    assert_eq!(
        py(&s, &d.workspace, &["write", "/tmp/turngate-escape-probe"]),
        write_refused()
    );
}

#[test]
fn read_of_a_root_not_granted_fails() {
    require_landlock();
    let d = dirs();
    let s = spec(&d.workspace, network(NetworkMode::Disabled, vec![]));
    let secret = d.outside.join("secret.txt");
    assert_eq!(
        py(&s, &d.workspace, &["read", path_str(&secret)]),
        "ERRNO EACCES"
    );
    assert_eq!(
        py(&s, &d.workspace, &["list", path_str(&d.outside)]),
        "ERRNO EACCES"
    );
    // The rest of /etc is not granted either.
    assert_eq!(
        py(&s, &d.workspace, &["read", "/etc/shadow"]),
        "ERRNO EACCES"
    );
}

#[test]
fn read_only_mode_refuses_writes_to_the_workspace() {
    require_landlock();
    let d = dirs();
    let mut s = spec(&d.workspace, network(NetworkMode::Disabled, vec![]));
    s.mode = SandboxMode::ReadOnly;
    std::fs::write(d.workspace.join("a.txt"), "a").unwrap();
    assert_eq!(py(&s, &d.workspace, &["read", "a.txt"]), "OK");
    assert_eq!(py(&s, &d.workspace, &["write", "b.txt"]), write_refused());
    assert!(!d.workspace.join("b.txt").exists());
}

#[test]
fn symlink_escape_fails() {
    require_landlock();
    let d = dirs();
    let s = spec(&d.workspace, network(NetworkMode::Disabled, vec![]));
    std::os::unix::fs::symlink(d.outside.join("secret.txt"), d.workspace.join("link")).unwrap();
    std::os::unix::fs::symlink(&d.outside, d.workspace.join("linkdir")).unwrap();
    assert_eq!(py(&s, &d.workspace, &["read", "link"]), "ERRNO EACCES");
    assert_eq!(py(&s, &d.workspace, &["write", "link"]), write_refused());
    assert_eq!(
        py(&s, &d.workspace, &["write", "linkdir/new.txt"]),
        write_refused()
    );
    assert!(!d.outside.join("new.txt").exists());
    assert_eq!(
        std::fs::read_to_string(d.outside.join("secret.txt")).unwrap(),
        "secret"
    );
}

#[test]
fn tcp_and_udp_egress_fail_when_network_is_disabled() {
    require_landlock();
    let d = dirs();
    let s = spec(&d.workspace, network(NetworkMode::Disabled, vec![]));
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let tcp_port = listener.local_addr().unwrap().port().to_string();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let udp_port = udp.local_addr().unwrap().port().to_string();

    // The seccomp baseline refuses to create the socket at all.
    assert_eq!(py(&s, &d.workspace, &["tcp", &tcp_port]), "ERRNO EPERM");
    assert_eq!(py(&s, &d.workspace, &["udp", &udp_port]), "ERRNO EPERM");
    let mut buf = [0u8; 8];
    assert!(
        udp.recv(&mut buf).is_err(),
        "a UDP datagram left the sandbox"
    );

    // The same probes work unconfined, so the refusal above is the sandbox's.
    let mut open = s.clone();
    open.network = network(NetworkMode::Enabled, vec![]);
    open.network.allow_localhost = true;
    assert_eq!(py(&open, &d.workspace, &["udp", &udp_port]), "OK");
    assert!(udp.recv(&mut buf).is_ok());
    assert_eq!(py(&open, &d.workspace, &["tcp", &tcp_port]), "OK");
}

#[test]
fn only_the_allowed_tcp_port_connects() {
    require_landlock();
    let d = dirs();
    let allowed = TcpListener::bind("127.0.0.1:0").unwrap();
    let denied = TcpListener::bind("127.0.0.1:0").unwrap();
    let allowed_port = allowed.local_addr().unwrap().port();
    let denied_port = denied.local_addr().unwrap().port();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let udp_port = udp.local_addr().unwrap().port().to_string();
    let s = spec(
        &d.workspace,
        network(NetworkMode::Disabled, vec![allowed_port]),
    );

    let accept = std::thread::spawn(move || {
        let (mut conn, _) = allowed.accept().unwrap();
        let mut got = Vec::new();
        conn.read_to_end(&mut got).unwrap();
        got
    });
    assert_eq!(
        py(&s, &d.workspace, &["tcp", &allowed_port.to_string()]),
        "OK"
    );
    assert_eq!(accept.join().unwrap(), b"hi");

    // Landlock refuses connect(2) to the other port with EACCES.
    assert_eq!(
        py(&s, &d.workspace, &["tcp", &denied_port.to_string()]),
        "ERRNO EACCES"
    );
    denied.set_nonblocking(true).unwrap();
    assert!(
        denied.accept().is_err(),
        "the denied port received a connection"
    );
    // UDP stays closed when only TCP ports are allowed.
    assert_eq!(py(&s, &d.workspace, &["udp", &udp_port]), "ERRNO EPERM");
}

#[test]
fn a_grandchild_is_confined() {
    require_landlock();
    let d = dirs();
    let s = spec(&d.workspace, network(NetworkMode::Disabled, vec![]));
    let target = d.outside.join("grandchild.txt");
    let script = format!(
        "sh -c 'sh -c \"echo x > {t}\"; echo inner=$?'; echo outer-ok",
        t = path_str(&target)
    );
    let out = sh(&s, &d.workspace, &script);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("inner=2") || stdout.contains("inner=1"),
        "{stdout}"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(write_refused_text()),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!target.exists());
    // And a python grandchild gets the kernel's EACCES.
    std::fs::write(d.workspace.join("probe.py"), PY).unwrap();
    let out = sh(
        &s,
        &d.workspace,
        &format!(
            "sh -c 'sh -c \"python3 probe.py write {}\"'",
            path_str(&target)
        ),
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), write_refused());
    assert!(!target.exists());
}

#[test]
fn the_parent_is_unaffected() {
    require_landlock();
    let d = dirs();
    let s = spec(&d.workspace, network(NetworkMode::Disabled, vec![]));
    let out = sh(
        &s,
        &d.workspace,
        &format!("echo x > {}/p", path_str(&d.outside)),
    );
    assert_ne!(out.exit_code, Some(0));
    // This process can still write anywhere and open sockets.
    std::fs::write(d.outside.join("parent.txt"), "ok").unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut c = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    c.write_all(b"x").unwrap();
    UdpSocket::bind("127.0.0.1:0").unwrap();
    // /proc/self/status shows no seccomp filter on the parent.
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let seccomp = status.lines().find(|l| l.starts_with("Seccomp:")).unwrap();
    assert!(seccomp.ends_with('0'), "{seccomp}");
    let nnp = status
        .lines()
        .find(|l| l.starts_with("NoNewPrivs:"))
        .unwrap();
    assert!(nnp.ends_with('0'), "{nnp}");
}

#[test]
fn spawning_from_eight_threads_at_once_changes_nothing() {
    require_landlock();
    let d = Arc::new(dirs());
    let barrier = Arc::new(std::sync::Barrier::new(8));
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let d = Arc::clone(&d);
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                let s = spec(&d.workspace, network(NetworkMode::Disabled, vec![]));
                barrier.wait();
                let denied = d.outside.join(format!("t{i}.txt"));
                let allowed = d.workspace.join(format!("t{i}.txt"));
                let a = py(&s, &d.workspace, &["write", path_str(&denied)]);
                let b = py(&s, &d.workspace, &["write", path_str(&allowed)]);
                (a, b)
            })
        })
        .collect();
    for h in handles {
        let (denied, allowed) = h.join().unwrap();
        assert_eq!(denied, write_refused());
        assert_eq!(allowed, "OK");
    }
    for i in 0..8 {
        assert!(!d.outside.join(format!("t{i}.txt")).exists());
        assert!(d.workspace.join(format!("t{i}.txt")).exists());
    }
    std::fs::write(d.outside.join("parent-after-threads.txt"), "ok").unwrap();
}

fn pid_is_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // A zombie waiting for a reaper is dead.
        Ok(stat) => stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.trim_start().starts_with('Z'))
            .unwrap_or(false),
    }
}

/// Host pids of live `sleep TOKEN` processes.
fn sleeping(token: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        if args.len() >= 2
            && args[0].ends_with(b"sleep")
            && args[1] == token.as_bytes()
            && !pid_is_gone(pid)
        {
            found.push(pid);
        }
    }
    found
}

fn wait_gone(pid: i32) -> bool {
    for _ in 0..50 {
        if pid_is_gone(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn timeout_kills_a_grandchild() {
    require_landlock();
    let d = dirs();
    let s = spec(&d.workspace, network(NetworkMode::Disabled, vec![]));
    // The grandchild's pid is one of its PID namespace, so it is found on the host by a
    // duration no other process uses.
    let token = format!("60.{}", std::process::id());
    let script = format!("sh -c 'sleep {token} & wait'; wait");
    let request = ProcessRequest::new(["/bin/sh", "-c", script.as_str()], &d.workspace)
        .env([("PATH", "/usr/bin:/bin")])
        .timeout(Duration::from_millis(700))
        .sandbox(s);
    assert!(sleeping(&token).is_empty());
    let out = runner().run_blocking(request).unwrap();
    assert!(out.timed_out);
    assert_eq!(out.signal, Some(libc::SIGKILL));
    let mut left = sleeping(&token);
    for _ in 0..50 {
        if left.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        left = sleeping(&token);
    }
    assert!(left.is_empty(), "grandchild {left:?} survived the timeout");
    assert!(out.duration < Duration::from_secs(10));
}

#[test]
fn timeout_kills_a_grandchild_that_left_the_process_group() {
    let d = dirs();
    // Unsandboxed: this tests the runner's tree kill, not the sandbox.
    let request = ProcessRequest::new(
        ["/bin/sh", "-c", "setsid sleep 60 & echo $!; wait"],
        &d.workspace,
    )
    .env([("PATH", "/usr/bin:/bin")])
    .timeout(Duration::from_millis(700));
    let out = runner().run_blocking(request).unwrap();
    assert!(out.timed_out);
    let pid: i32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    assert!(
        wait_gone(pid),
        "escaped grandchild {pid} survived the timeout"
    );
}

#[test]
fn leftovers_in_the_group_are_killed_when_the_command_exits() {
    let d = dirs();
    let request = ProcessRequest::new(
        ["/bin/sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!"],
        &d.workspace,
    )
    .env([("PATH", "/usr/bin:/bin")])
    .timeout(Duration::from_secs(10));
    let out = runner().run_blocking(request).unwrap();
    assert_eq!(out.exit_code, Some(0));
    assert!(!out.timed_out);
    let pid: i32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    assert!(
        wait_gone(pid),
        "background process {pid} outlived the command"
    );
}

#[test]
fn output_is_capped_and_truncation_reported() {
    let d = dirs();
    let request = ProcessRequest::new(
        [
            "/bin/sh",
            "-c",
            "head -c 100000 /dev/zero; echo err >&2; exit 3",
        ],
        &d.workspace,
    )
    .env([("PATH", "/usr/bin:/bin")])
    .output_cap(1000);
    let out = runner().run_blocking(request).unwrap();
    assert_eq!(out.exit_code, Some(3));
    assert_eq!(out.signal, None);
    assert_eq!(out.stdout.len(), 1000);
    assert!(out.stdout_truncated);
    assert_eq!(out.stderr, b"err\n");
    assert!(!out.stderr_truncated);
}

#[test]
fn environment_is_only_what_the_request_sets() {
    let d = dirs();
    let request = ProcessRequest::new(["/usr/bin/env"], &d.workspace).env([("ONLY", "this")]);
    let out = runner().run_blocking(request).unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ONLY=this\n");
}

#[test]
fn a_required_but_unavailable_backend_refuses_to_run() {
    let d = dirs();
    let marker = d.workspace.join("ran.txt");
    let mut s = spec(&d.workspace, network(NetworkMode::Disabled, vec![]));
    let runner = ProcessRunner::new(Arc::new(RestrictedTokenBackend::new()));
    let request = ProcessRequest::new(
        ["/bin/sh", "-c", &format!("touch {}", path_str(&marker))],
        &d.workspace,
    )
    .env([("PATH", "/usr/bin:/bin")]);
    let err = runner
        .run_blocking(request.clone().sandbox(s.clone()))
        .unwrap_err();
    assert!(
        matches!(
            err,
            RunError::Sandbox(SandboxError::BackendUnavailable { .. })
        ),
        "{err}"
    );
    assert!(err.to_string().contains("was not run"), "{err}");
    assert!(
        !marker.exists(),
        "the command ran without its required sandbox"
    );

    // Optional: it runs, and the report says nothing was enforced.
    s.requirement = BackendRequirement::Optional;
    let out = runner.run_blocking(request.sandbox(s)).unwrap();
    assert_eq!(out.exit_code, Some(0));
    assert!(marker.exists());
    assert_eq!(out.sandbox.unwrap().status, EnforcementLevel::Unavailable);
}

#[test]
fn a_provider_native_snapshot_is_refused_on_the_native_path() {
    let d = dirs();
    let mut s = spec(&d.workspace, network(NetworkMode::Disabled, vec![]));
    s.preference = SandboxBackendKind::ProviderNative;
    let err = runner()
        .run_blocking(ProcessRequest::new(["/bin/true"], &d.workspace).sandbox(s))
        .unwrap_err();
    assert!(
        matches!(err, RunError::Sandbox(SandboxError::ProviderNative)),
        "{err}"
    );
}

#[test]
fn run_blocking_inside_a_runtime_is_an_error_not_a_panic() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let d = dirs();
    let err = rt.block_on(async {
        runner().run_blocking(ProcessRequest::new(["/bin/true"], &d.workspace))
    });
    assert!(matches!(err, Err(RunError::InvalidRequest(_))));
    // The async API works there.
    let out = rt
        .block_on(runner().run(ProcessRequest::new(["/bin/true"], &d.workspace)))
        .unwrap();
    assert_eq!(out.exit_code, Some(0));
}

#[test]
fn a_missing_program_is_a_spawn_error() {
    require_landlock();
    let d = dirs();
    let s = spec(&d.workspace, network(NetworkMode::Disabled, vec![]));
    let err = runner()
        .run_blocking(ProcessRequest::new(["/nonexistent/prog"], &d.workspace).sandbox(s))
        .unwrap_err();
    assert!(matches!(err, RunError::Spawn { .. }), "{err}");
}

fn run_with(
    support: turngate::sandbox::NamespaceSupport,
    spec: &SandboxSpec,
    cwd: &Path,
    args: &[&str],
) -> ProcessOutcome {
    let mut argv = vec!["/usr/bin/python3", "-c", PY];
    argv.extend_from_slice(args);
    let request = ProcessRequest::new(argv, cwd)
        .env([("PATH", "/usr/bin:/bin"), ("LANG", "C")])
        .timeout(Duration::from_secs(30))
        .sandbox(spec.clone());
    ProcessRunner::new(Arc::new(LinuxNonoBackend::with_namespace_support(support)))
        .run_blocking(request)
        .unwrap()
}

#[test]
fn each_missing_namespace_layer_is_named_and_landlock_still_confines() {
    use turngate::sandbox::NamespaceSupport;
    require_landlock();
    let d = dirs();
    let s = spec(&d.workspace, network(NetworkMode::Disabled, vec![]));
    let target = d.outside.join("escape.txt");
    let named = |out: &ProcessOutcome, needle: &str| {
        out.sandbox
            .as_ref()
            .unwrap()
            .degradations
            .iter()
            .any(|g| g.reason.starts_with(needle))
    };

    // Only the PID namespace is missing: the mount view still refuses, the report says which.
    let no_pid = NamespaceSupport {
        pid: false,
        ..NamespaceSupport::ALL
    };
    let out = run_with(no_pid, &s, &d.workspace, &["write", path_str(&target)]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ERRNO EROFS");
    let report = out.sandbox.clone().unwrap();
    assert_eq!(
        report.namespaces,
        ["user", "mount", "network", "uts", "ipc"]
    );
    assert!(named(&out, "no PID namespace"), "{report:?}");
    assert!(!named(&out, "no mount namespace"), "{report:?}");
    assert_eq!(report.status, EnforcementLevel::PartiallyActive);

    // No user namespace at all: every layer is named, and Landlock alone refuses the write.
    let none = NamespaceSupport::none(libc::ENOSPC);
    let out = run_with(none, &s, &d.workspace, &["write", path_str(&target)]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ERRNO EACCES");
    let report = out.sandbox.clone().unwrap();
    assert!(report.namespaces.is_empty(), "{report:?}");
    for layer in [
        "no user namespace",
        "no mount namespace",
        "no PID namespace",
        "no network namespace",
        "no UTS namespace",
        "no IPC namespace",
    ] {
        assert!(named(&out, layer), "{layer}: {report:?}");
    }
    assert!(!target.exists());

    // Everything available: nothing about namespaces is reported as missing.
    let out = run_with(
        NamespaceSupport::ALL,
        &s,
        &d.workspace,
        &["read", "/etc/hostname"],
    );
    let report = out.sandbox.unwrap();
    assert!(
        !report
            .degradations
            .iter()
            .any(|g| g.reason.contains("namespace")),
        "{report:?}"
    );
}
