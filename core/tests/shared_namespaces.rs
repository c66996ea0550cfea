//! The sandboxes of one process share a user namespace and, when their network is blocked, a
//! network namespace (ADR 0017); a per-run private tmp dir is handed to a sandbox prepared
//! once. These tests attack both from inside real children run by one runner in this process:
//! one sandboxed command must not see or signal another's processes, reach another's sockets
//! (or the egress proxy's listener), read or write another's tmp dir, or inherit a descriptor
//! of the shared namespaces. The namespace's init shares P's address space (a copy of this
//! process's, ADR 0017 §4): the command must not read it. The command execs itself (ADR 0017
//! §4): it must find, refuse and run programs as `std`'s `execvp` does unsandboxed. Each test runs as root and again as the unprivileged `tgsbx`
//! (this test binary re-executed through `setpriv`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic
#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use turngate::protocol::{
    BackendRequirement, FsAccess, NetworkMode, SandboxBackendKind, SandboxMode,
    TurnNetworkPolicySnapshot,
};
use turngate::sandbox::{
    FsGrant, LinuxNonoBackend, NamespaceSupport, ProcessOutcome, ProcessRequest, ProcessRunner,
    RunError, SandboxBackend, SandboxSpec, TmpSpec,
};

/// One line per `OP:ARG` argument.
const PY: &str = r#"
import sys, os, socket, errno, time
def run(op, args):
    if op == "netns": return os.readlink("/proc/self/ns/net")
    if op == "pidns": return os.readlink("/proc/self/ns/pid")
    if op == "userns": return os.readlink("/proc/self/ns/user")
    if op == "tmpdir": return os.environ["TMPDIR"]
    if op == "ls": return "ls " + " ".join(sorted(os.listdir(args[0])))
    if op == "tmpstat":
        import ctypes, struct
        st = os.stat(args[0])
        libc = ctypes.CDLL(None, use_errno=True)
        buf = ctypes.create_string_buffer(256)
        if libc.statfs(args[0].encode(), buf) != 0:
            raise OSError(ctypes.get_errno(), "statfs")
        # f_type, the first field; TMPFS_MAGIC.
        fstype = "tmpfs" if struct.unpack_from("l", buf)[0] == 0x01021994 else "other"
        return "tmpstat %o %d %s" % (st.st_mode & 0o7777, st.st_uid, fstype)
    if op == "caps":
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        # PR_CAPBSET_READ: 1 while the capability is in the bounding set, -1 past the last.
        bounding = [c for c in range(64) if libc.prctl(23, c, 0, 0, 0) == 1]
        last = max(c for c in range(64) if libc.prctl(23, c, 0, 0, 0) >= 0)
        header = (ctypes.c_uint32 * 2)(0x20080522, 0)
        data = (ctypes.c_uint32 * 6)()
        if libc.capget(header, data) != 0:
            raise OSError(ctypes.get_errno(), "capget")
        # PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET
        ambient = [c for c in range(last + 1) if libc.prctl(47, 1, c, 0, 0) == 1]
        return "caps bounding=%s sets=%s ambient=%s last=%d" % (
            bounding, list(data), ambient, last)
    if op == "tmpsize":
        v = os.statvfs(args[0])
        return "tmpsize %d %d" % (v.f_blocks * v.f_frsize, v.f_files)
    if op == "fds":
        open_fds = []
        for fd in range(3, 1024):
            try:
                os.fstat(fd)
                open_fds.append(str(fd))
            except OSError:
                pass
        return "fds " + ",".join(open_fds)
    if op == "inet": socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    elif op == "inet6": socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    elif op == "unix": socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    elif op == "netlink": socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
    elif op == "kill0": os.kill(int(args[0]), 0)
    elif op == "ppid": return "ppid %d" % os.getppid()
    elif op == "env": return "env " + ",".join(sorted(os.environ))
    elif op == "ptrace":
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        # PTRACE_ATTACH
        if libc.ptrace(ctypes.c_long(16), ctypes.c_long(int(args[0])), None, None) != 0:
            raise OSError(ctypes.get_errno(), "ptrace")
    elif op == "vmread":
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        class iovec(ctypes.Structure):
            _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
        buf = ctypes.create_string_buffer(8)
        local = iovec(ctypes.cast(buf, ctypes.c_void_p), 8)
        # The init's stack region is unknown here; any address does: the access check comes first.
        remote = iovec(0x10000, 8)
        n = libc.process_vm_readv(int(args[0]), ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
        if n < 0:
            raise OSError(ctypes.get_errno(), "process_vm_readv")
    elif op == "write": open(args[0], "w").write("x")
    elif op == "read": return "read " + open(args[0]).read()
    elif op == "send":
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        a.sendto(b"x", "\0" + args[0])
    elif op == "serve":
        # Bind one end of a datagram pair to an abstract name, say so through a file, wait
        # until told to stop, then report whether any datagram arrived.
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        a.bind("\0" + args[0])
        open(args[1], "w").write("bound")
        deadline = time.time() + 30
        while not os.path.exists(args[2]) and time.time() < deadline:
            time.sleep(0.02)
        a.setblocking(False)
        try:
            return "got " + a.recv(16).decode()
        except BlockingIOError:
            return "nothing"
    elif op == "wait":
        # The marker names the command's tmp dir.
        open(args[0], "w").write(os.environ.get("TMPDIR", ""))
        deadline = time.time() + 30
        while not os.path.exists(args[1]) and time.time() < deadline:
            time.sleep(0.02)
    else: raise SystemExit("unknown op " + op)
    return "OK"
for spec in sys.argv[1:]:
    op, *args = spec.replace("$TMPDIR", os.environ.get("TMPDIR", "$TMPDIR")).split(":")
    try:
        print(run(op, args), flush=True)
    except OSError as e:
        print("ERRNO", errno.errorcode.get(e.errno, e.errno), flush=True)
"#;

const USER: &str = "tgsbx";
const AS_USER: &str = "TURNGATE_SHARED_NS_TEST_AS_USER";

/// Run `body` as root, then this test again as the unprivileged test user.
fn as_root_and_user(test: &str, body: fn()) {
    if std::env::var_os(AS_USER).is_some() {
        body();
        return;
    }
    // SAFETY: geteuid cannot fail.
    assert_eq!(unsafe { libc::geteuid() }, 0, "these tests need root");
    require_namespaces();
    body();
    let (uid, gid) = test_user();
    let out = Command::new("setpriv")
        .arg(format!("--reuid={uid}"))
        .arg(format!("--regid={gid}"))
        .arg("--clear-groups")
        .arg("--")
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(AS_USER, "1")
        .env("TMPDIR", "/tmp")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "as {USER}: {text}");
    assert!(
        text.contains("1 passed"),
        "as {USER}: the test did not run: {text}"
    );
}

fn test_user() -> (u32, u32) {
    let id = |flag: &str| {
        Command::new("id")
            .args([flag, USER])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
    };
    if id("-u").is_none() {
        let status = Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                USER,
            ])
            .status()
            .unwrap();
        assert!(status.success() || status.code() == Some(9), "useradd");
    }
    (id("-u").unwrap(), id("-g").unwrap())
}

fn require_namespaces() {
    let backend = LinuxNonoBackend::new();
    assert!(backend.probe().available, "Landlock is unavailable");
    let support = backend.namespace_support();
    assert!(
        support.user && support.mount && support.pid && support.network,
        "this machine has no unprivileged user, mount, PID and network namespaces: {support:?}"
    );
}

fn network(mode: NetworkMode, unix: bool) -> TurnNetworkPolicySnapshot {
    TurnNetworkPolicySnapshot {
        mode,
        allowed_domains: vec![],
        denied_domains: vec![],
        allow_localhost: false,
        allow_unix_sockets: unix,
        allowed_tcp_ports: vec![],
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

struct Dirs {
    _root: tempfile::TempDir,
    base: PathBuf,
}

impl Dirs {
    fn new() -> Dirs {
        let root = tempfile::tempdir().unwrap();
        let base = root.path().canonicalize().unwrap();
        Dirs { _root: root, base }
    }

    fn workspace(&self, name: &str) -> PathBuf {
        let dir = self.base.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("probe.py"), PY).unwrap();
        dir
    }
}

fn request(spec: &SandboxSpec, cwd: &Path, ops: &[String]) -> ProcessRequest {
    let mut argv: Vec<String> = vec!["/usr/bin/python3".into(), "probe.py".into()];
    argv.extend(ops.iter().cloned());
    ProcessRequest::new(argv, cwd)
        .env([("PATH", "/usr/bin:/bin"), ("LANG", "C")])
        .timeout(Duration::from_secs(60))
        .sandbox(spec.clone())
}

fn lines(out: &ProcessOutcome) -> Vec<String> {
    assert_eq!(
        out.exit_code,
        Some(0),
        "probe failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

fn probe(runner: &ProcessRunner, spec: &SandboxSpec, cwd: &Path, ops: &[&str]) -> Vec<String> {
    let ops: Vec<String> = ops.iter().map(|s| s.to_string()).collect();
    lines(&runner.run_blocking(request(spec, cwd, &ops)).unwrap())
}

/// Run `ops` in a sandbox on another thread of this process; returns once `marker` exists
/// (the command writes it when it is up), with the handle to its outcome.
fn start(
    runner: &ProcessRunner,
    spec: &SandboxSpec,
    cwd: &Path,
    ops: Vec<String>,
    marker: &Path,
) -> std::thread::JoinHandle<ProcessOutcome> {
    let runner = runner.clone();
    let request = request(spec, cwd, &ops);
    let handle = std::thread::spawn(move || runner.run_blocking(request).unwrap());
    let started = Instant::now();
    // Written with content (not only created) once the command is up.
    while std::fs::metadata(marker).map_or(true, |m| m.len() == 0) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the first command never came up"
        );
        if handle.is_finished() {
            let out = handle.join().unwrap();
            panic!(
                "the first command ended early: {} {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    handle
}

fn host_netns() -> String {
    std::fs::read_link("/proc/self/ns/net")
        .unwrap()
        .display()
        .to_string()
}

/// Host pids of live processes whose command line holds `token`.
fn pids_with(token: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(token) {
            found.push(pid);
        }
    }
    found
}

#[test]
fn blocked_sandboxes_share_a_network_namespace_and_still_reach_nothing_of_each_other() {
    as_root_and_user(
        "blocked_sandboxes_share_a_network_namespace_and_still_reach_nothing_of_each_other",
        || {
            let d = Dirs::new();
            let (wa, wb) = (d.workspace("a"), d.workspace("b"));
            let runner = ProcessRunner::native();
            let blocked = network(NetworkMode::Disabled, false);
            let (sa, sb) = (spec(&wa, blocked.clone()), spec(&wb, blocked));
            let name = format!("turngate-shared-{}-{}", std::process::id(), unsafe {
                libc::geteuid()
            });
            let (bound, stop) = (wa.join("bound"), wa.join("stop"));
            let a = start(
                &runner,
                &sa,
                &wa,
                vec![
                    "netns".into(),
                    "pidns".into(),
                    format!("serve:{name}:{}:{}", bound.display(), stop.display()),
                ],
                &bound,
            );
            let a_pids = pids_with(&format!("serve:{name}"));
            assert!(!a_pids.is_empty(), "the first command's pid was not found");
            let mut ops = vec![
                "netns".to_string(),
                "pidns".to_string(),
                format!("send:{name}"),
                "inet".to_string(),
                "inet6".to_string(),
                "unix".to_string(),
                "netlink".to_string(),
            ];
            ops.extend(a_pids.iter().map(|p| format!("kill0:{p}")));
            ops.push("fds".to_string());
            let b = lines(&runner.run_blocking(request(&sb, &wb, &ops)).unwrap());
            std::fs::write(&stop, "stop").unwrap();
            let a = lines(&a.join().unwrap());

            // The network namespace is shared (and not the host's); the PID namespaces are not.
            assert_eq!(
                a[0], b[0],
                "the blocked sandboxes do not share a network namespace"
            );
            assert_ne!(a[0], host_netns());
            assert_ne!(a[1], b[1], "two sandboxes share a PID namespace");
            // Nothing of A is reachable from B: every socket family but a socketpair's is
            // refused, so the only name in the namespace is one A bound on its end of a pair,
            // and a datagram to it is refused (EPERM: that end is connected to its own pair;
            // Landlock also scopes abstract names to their domain) and never arrives; A's
            // processes are not there to signal; B holds no descriptor but stdio.
            assert_eq!(b[2], "ERRNO EPERM", "{b:?}");
            assert_eq!(
                &b[3..7],
                ["ERRNO EPERM", "ERRNO EPERM", "ERRNO EACCES", "ERRNO EPERM"]
            );
            for line in &b[7..7 + a_pids.len()] {
                assert_eq!(line, "ERRNO ESRCH", "{b:?}");
            }
            assert_eq!(b.last().unwrap(), "fds ", "{b:?}");
            assert_eq!(a[2], "nothing", "a datagram reached the first command");
        },
    );
}

#[test]
fn sandboxes_that_may_open_sockets_get_their_own_network_namespace() {
    as_root_and_user(
        "sandboxes_that_may_open_sockets_get_their_own_network_namespace",
        || {
            let d = Dirs::new();
            let (wa, wb, wc) = (d.workspace("a"), d.workspace("b"), d.workspace("c"));
            let runner = ProcessRunner::native();
            // Unix sockets allowed: no AF_UNIX filter and no abstract scoping, so only a
            // network namespace of its own keeps the abstract names apart.
            let unix = network(NetworkMode::Disabled, true);
            let (sa, sb) = (spec(&wa, unix.clone()), spec(&wb, unix));
            let name = format!("turngate-own-{}-{}", std::process::id(), unsafe {
                libc::geteuid()
            });
            let (bound, stop) = (wa.join("bound"), wa.join("stop"));
            let a = start(
                &runner,
                &sa,
                &wa,
                vec![
                    "netns".into(),
                    format!("serve:{name}:{}:{}", bound.display(), stop.display()),
                ],
                &bound,
            );
            let b = probe(&runner, &sb, &wb, &["netns", &format!("send:{name}")]);
            // A restricted command (the egress proxy's listener on 127.0.0.1:3128 lives in
            // its network namespace) and a blocked one.
            let restricted = spec(&wc, network(NetworkMode::Restricted, false));
            let r1 = probe(&runner, &restricted, &wc, &["netns"]);
            let r2 = probe(&runner, &restricted, &wc, &["netns"]);
            let blocked = probe(
                &runner,
                &spec(&wc, network(NetworkMode::Disabled, false)),
                &wc,
                &["netns"],
            );
            std::fs::write(&stop, "stop").unwrap();
            let a = lines(&a.join().unwrap());

            assert_ne!(
                a[0], b[0],
                "sandboxes allowed Unix sockets share a network namespace"
            );
            // The name is not there in B's namespace at all.
            assert_eq!(b[1], "ERRNO ECONNREFUSED", "{b:?}");
            assert_eq!(a[1], "nothing");
            assert_ne!(
                r1[0], r2[0],
                "two restricted commands share a network namespace"
            );
            assert_ne!(
                r1[0], blocked[0],
                "a restricted command shares the blocked namespace"
            );
            for ns in [&a[0], &b[0], &r1[0], &blocked[0]] {
                assert_ne!(*ns, host_netns());
            }
        },
    );
}

#[test]
fn each_run_of_a_prepared_sandbox_gets_its_own_private_tmp() {
    as_root_and_user(
        "each_run_of_a_prepared_sandbox_gets_its_own_private_tmp",
        || {
            let d = Dirs::new();
            let w = d.workspace("w");
            // One runner, one spec: the second and third runs reuse the first's preparation.
            let runner = ProcessRunner::native();
            let s = spec(&w, network(NetworkMode::Disabled, false));
            let first = probe(
                &runner,
                &s,
                &w,
                &["tmpdir", "write:$TMPDIR/first", "ls:$TMPDIR"],
            );
            assert_eq!(first[1], "OK", "{first:?}");
            assert_eq!(first[2], "ls first", "{first:?}");
            // On the host, the run's tmp dir is the placeholder its tmpfs was mounted on:
            // still there, empty, the runner's own with mode 0700; the write went to memory.
            let tmp = PathBuf::from(&first[0]);
            assert!(tmp.starts_with(std::env::temp_dir()), "{tmp:?}");
            assert_eq!(
                host_listing(&tmp),
                Vec::<String>::new(),
                "the host saw the run's tmp"
            );
            let meta = std::fs::symlink_metadata(&tmp).unwrap();
            use std::os::unix::fs::MetadataExt;
            assert!(meta.is_dir());
            assert_eq!(meta.mode() & 0o7777, 0o700);
            // SAFETY: geteuid cannot fail.
            assert_eq!(meta.uid(), unsafe { libc::geteuid() });

            let (up, stop) = (w.join("up"), w.join("stop"));
            let a = start(
                &runner,
                &s,
                &w,
                vec![
                    "write:$TMPDIR/secret".into(),
                    // Written through the variable the command gets, below.
                    format!("wait:{}:{}", up.display(), stop.display()),
                    "ls:$TMPDIR".into(),
                    "read:$TMPDIR/secret".into(),
                ],
                &up,
            );
            let a_tmp = PathBuf::from(std::fs::read_to_string(&up).unwrap());
            assert_eq!(a_tmp, tmp, "one preparation, one mount point");
            // While A runs, its tmp is neither on the host nor in B's view.
            assert_eq!(host_listing(&tmp), Vec::<String>::new());
            let b = probe(
                &runner,
                &s,
                &w,
                &[
                    "tmpdir",
                    "ls:$TMPDIR",
                    "read:$TMPDIR/secret",
                    "read:$TMPDIR/first",
                    "write:$TMPDIR/planted",
                    "fds",
                    "tmpstat:$TMPDIR",
                ],
            );
            std::fs::write(&stop, "stop").unwrap();
            let a = lines(&a.join().unwrap());

            assert_eq!(b[0], a_tmp.display().to_string());
            assert_eq!(b[1], "ls ", "B saw another run's tmp: {b:?}");
            assert_eq!(b[2], "ERRNO ENOENT", "B read A's tmp file: {b:?}");
            assert_eq!(
                b[3], "ERRNO ENOENT",
                "B read the first run's tmp file: {b:?}"
            );
            assert_eq!(b[4], "OK", "B cannot write its own tmp: {b:?}");
            assert_eq!(b[5], "fds ", "{b:?}");
            // SAFETY: geteuid cannot fail.
            let uid = unsafe { libc::geteuid() };
            assert_eq!(b[6], format!("tmpstat 700 {uid} tmpfs"), "{b:?}");
            // A's tmp kept only A's file, B's write did not land there.
            assert_eq!(a[0], "OK", "{a:?}");
            assert_eq!(a[2], "ls secret", "{a:?}");
            assert_eq!(a[3], "read x", "{a:?}");
            assert_eq!(host_listing(&tmp), Vec::<String>::new());
            drop(runner);
            assert!(
                !tmp.exists(),
                "the placeholder outlived the runner's preparation"
            );
        },
    );
}

fn host_listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn the_private_tmp_is_capped_and_filling_it_harms_nothing_else() {
    as_root_and_user(
        "the_private_tmp_is_capped_and_filling_it_harms_nothing_else",
        || {
            let d = Dirs::new();
            let w = d.workspace("w");
            let runner = ProcessRunner::native();
            let s = spec(&w, network(NetworkMode::Disabled, false));
            // The default cap (1 GiB, `TURNGATE_SANDBOX_TMP_SIZE`; the CLI tests a small one):
            // the tmpfs reports it, and so many files are refused (nr_inodes).
            let out = probe(&runner, &s, &w, &["tmpsize:$TMPDIR"]);
            assert_eq!(
                out[0],
                format!("tmpsize {} {}", 1u64 << 30, 262_144),
                "{out:?}"
            );
            // The command cannot write outside its tmp and roots, tmp or not.
            let outside = d.base.join("outside");
            std::fs::create_dir_all(&outside).unwrap();
            let out = probe(
                &runner,
                &s,
                &w,
                &[
                    &format!("write:{}", outside.join("x").display()),
                    "write:/tmp/turngate-escape-probe",
                    "write:$TMPDIR/../turngate-escape-probe",
                ],
            );
            for line in &out {
                assert!(
                    line == "ERRNO EACCES" || line == "ERRNO EROFS",
                    "a write outside the roots and the tmp: {out:?}"
                );
            }
            assert!(!outside.join("x").exists());
            assert!(!Path::new("/tmp/turngate-escape-probe").exists());
        },
    );
}

#[test]
fn a_symlink_planted_on_the_tmp_mount_point_fails_the_spawn() {
    as_root_and_user(
        "a_symlink_planted_on_the_tmp_mount_point_fails_the_spawn",
        || {
            let d = Dirs::new();
            let w = d.workspace("w");
            let target = d.base.join("target");
            std::fs::create_dir_all(&target).unwrap();
            std::fs::write(target.join("kept"), "host file").unwrap();
            let runner = ProcessRunner::native();
            let s = spec(&w, network(NetworkMode::Disabled, false));
            let tmp = PathBuf::from(&probe(&runner, &s, &w, &["tmpdir"])[0]);
            // Swap the placeholder for a symlink to another directory (what a command with
            // the host's /tmp writable, or another process of this user, could do).
            std::fs::remove_dir(&tmp).unwrap();
            std::os::unix::fs::symlink(&target, &tmp).unwrap();
            let refused_at_tmp = |what: &str| {
                let refused = runner.run_blocking(request(&s, &w, &["ls:$TMPDIR".into()]));
                match &refused {
                    Err(RunError::NamespaceSetup { step, errno }) => {
                        assert!(step.contains("private tmp dir"), "{what}: {refused:?}");
                        assert!(
                            *errno == libc::ELOOP || *errno == libc::ESTALE,
                            "{refused:?}"
                        );
                    }
                    other => panic!("{what}: the run was not refused at its tmp: {other:?}"),
                }
            };
            refused_at_tmp("a symlink planted on the mount point");
            // A directory of the same name is not the placeholder either.
            std::fs::remove_file(&tmp).unwrap();
            std::fs::create_dir(&tmp).unwrap();
            refused_at_tmp("a directory made in the placeholder's place");
            assert_eq!(host_listing(&target), ["kept"]);
            std::fs::remove_dir(&tmp).unwrap();
        },
    );
}

/// The command holds no capability of the (shared) user namespace: the bounding set is empty
/// up to the kernel's last capability (the drop loop stops at the first number the kernel
/// does not know), and the effective, permitted, inheritable and ambient sets are empty.
#[test]
fn the_command_holds_no_capability_at_all() {
    as_root_and_user("the_command_holds_no_capability_at_all", || {
        let d = Dirs::new();
        let w = d.workspace("w");
        let runner = ProcessRunner::native();
        let s = spec(&w, network(NetworkMode::Disabled, false));
        let out = probe(&runner, &s, &w, &["caps"]);
        let last: u32 = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(
            out[0],
            format!("caps bounding=[] sets=[0, 0, 0, 0, 0, 0] ambient=[] last={last}"),
            "{out:?}"
        );
    });
}

#[test]
fn the_placeholder_lives_as_long_as_the_preparation() {
    as_root_and_user("the_placeholder_lives_as_long_as_the_preparation", || {
        let d = Dirs::new();
        let w = d.workspace("w");
        let backend = LinuxNonoBackend::new();
        let prepared = backend
            .prepare(&spec(&w, network(NetworkMode::Disabled, false)))
            .unwrap();
        assert!(!prepared.is_unconfined());
        let tmp = prepared.mounted_tmp().unwrap().to_path_buf();
        assert!(tmp.is_dir());
        assert_eq!(host_listing(&tmp), Vec::<String>::new());
        drop(prepared);
        assert!(!tmp.exists(), "the placeholder outlived its preparation");

        // Without a mount namespace there is no tmpfs: the placeholder goes at once and
        // each run gets a host directory (the runner's).
        let degraded = LinuxNonoBackend::with_namespace_support(NamespaceSupport {
            user: false,
            mount: false,
            pid: false,
            network: false,
            uts: false,
            ipc: false,
            errno: libc::EPERM,
        });
        let before = slots();
        let prepared = degraded
            .prepare(&spec(&w, network(NetworkMode::Disabled, false)))
            .unwrap();
        assert!(prepared.mounted_tmp().is_none());
        // Other tests of this binary prepare at the same time: a placeholder of theirs
        // may be there for a moment, never for seconds.
        let new = || -> Vec<PathBuf> {
            slots()
                .into_iter()
                .filter(|p| !before.contains(p))
                .filter(|p| !p.exists() || host_listing(p).is_empty())
                .collect()
        };
        let started = Instant::now();
        let left = loop {
            let now = new();
            if now.is_empty() || started.elapsed() >= Duration::from_secs(3) {
                break now;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(left.is_empty(), "placeholders left behind: {left:?}");
    });
}

fn slots() -> Vec<PathBuf> {
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("turngate-slot-")
        })
        .map(|e| e.path())
        .collect()
}

#[test]
fn a_runner_on_another_backend_instance_shares_the_process_namespaces_too() {
    as_root_and_user(
        "a_runner_on_another_backend_instance_shares_the_process_namespaces_too",
        || {
            let d = Dirs::new();
            let w = d.workspace("w");
            let s = spec(&w, network(NetworkMode::Disabled, false));
            let one = ProcessRunner::native();
            let other = ProcessRunner::new(Arc::new(LinuxNonoBackend::new()));
            let a = probe(&one, &s, &w, &["netns", "userns"]);
            let b = probe(&other, &s, &w, &["netns", "userns"]);
            assert_eq!(a, b, "one process, one shared user and network namespace");
            let host_user = std::fs::read_link("/proc/self/ns/user").unwrap();
            assert_ne!(a[1], host_user.display().to_string());
        },
    );
}

/// Host-side children of this process still present (zombies included).
fn children() -> Vec<String> {
    let mut found = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let list = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        found.extend(list.split_whitespace().map(str::to_owned));
    }
    found
}

#[test]
fn the_init_shares_no_memory_the_command_can_read() {
    as_root_and_user("the_init_shares_no_memory_the_command_can_read", || {
        let d = Dirs::new();
        let w = d.workspace("w");
        for net in [
            network(NetworkMode::Disabled, false),
            network(NetworkMode::Disabled, true),
        ] {
            let s = spec(&w, net);
            let runner = ProcessRunner::native();
            let got = probe(
                &runner,
                &s,
                &w,
                &[
                    "ppid",
                    "read:/proc/1/mem",
                    "read:/proc/1/environ",
                    "read:/proc/1/maps",
                    "ptrace:1",
                    "vmread:1",
                    "kill0:1",
                ],
            );
            assert_eq!(
                got,
                [
                    // The command's parent is the namespace's init (PID 1).
                    "ppid 1",
                    "ERRNO EACCES",
                    "ERRNO EACCES",
                    "ERRNO EACCES",
                    "ERRNO EPERM",
                    "ERRNO EPERM",
                    "ERRNO EPERM",
                ]
            );
        }
    });
}

/// The same request run unsandboxed and sandboxed: how it ended, or the error's kind.
fn both(runner: &ProcessRunner, spec: &SandboxSpec, plain: ProcessRequest) -> [String; 2] {
    let show = |r: Result<ProcessOutcome, turngate::sandbox::RunError>| match r {
        Ok(out) => format!(
            "exit {:?} {}",
            out.exit_code,
            String::from_utf8_lossy(&out.stdout).trim()
        ),
        Err(turngate::sandbox::RunError::Spawn { source, .. }) => {
            format!("spawn error {:?}", source.kind())
        }
        Err(other) => format!("other error {other}"),
    };
    let sandboxed = plain.clone().sandbox(spec.clone());
    [
        show(runner.run_blocking(plain)),
        show(runner.run_blocking(sandboxed)),
    ]
}

#[test]
fn the_command_is_found_and_started_as_execvp_does() {
    as_root_and_user("the_command_is_found_and_started_as_execvp_does", || {
        use std::os::unix::fs::PermissionsExt;
        let d = Dirs::new();
        let w = d.workspace("w");
        let s = spec(&w, network(NetworkMode::Disabled, false));
        let runner = ProcessRunner::native();
        let bin = w.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        // A script without `#!`: execve refuses it (ENOEXEC), execvp hands it to /bin/sh.
        std::fs::write(bin.join("bare-script"), "echo bare-ran \"$1\"\n").unwrap();
        std::fs::set_permissions(bin.join("bare-script"), PermissionsExt::from_mode(0o755))
            .unwrap();
        // Not executable: EACCES, remembered while the search goes on.
        std::fs::write(bin.join("true"), "").unwrap();
        std::fs::set_permissions(bin.join("true"), PermissionsExt::from_mode(0o644)).unwrap();
        std::fs::write(bin.join("noexec"), "").unwrap();
        std::fs::set_permissions(bin.join("noexec"), PermissionsExt::from_mode(0o644)).unwrap();
        let path = format!("/nonexistent:{}:/usr/bin:/bin", bin.display());
        let req = |argv: &[&str]| {
            ProcessRequest::new(argv.iter().copied(), &w)
                .env([("PATH", path.as_str()), ("LANG", "C"), ("LANG", "C.UTF-8")])
                .timeout(Duration::from_secs(60))
        };
        let cases: [(&[&str], &str); 8] = [
            (&["true"], "exit Some(0) "),
            (&["sh", "-c", "echo $LANG"], "exit Some(0) C.UTF-8"),
            (&["bare-script", "x y"], "exit Some(0) bare-ran x y"),
            (&["./bin/bare-script"], "exit Some(0) bare-ran"),
            (&["noexec"], "spawn error PermissionDenied"),
            (&["./bin/noexec"], "spawn error PermissionDenied"),
            (&["no-such-program-anywhere"], "spawn error NotFound"),
            (&["/no/such/dir/prog"], "spawn error NotFound"),
        ];
        for (argv, want) in cases {
            let [plain, sandboxed] = both(&runner, &s, req(argv));
            assert_eq!(plain.trim_end(), want.trim_end(), "{argv:?} unsandboxed");
            assert_eq!(sandboxed, plain, "{argv:?}: sandboxed differs");
        }
        // The environment is exactly the request's (later entries win) and the tmp vars.
        let mut env_req = request(&s, &w, &["env".to_string()]);
        env_req.env.push(("EXTRA".into(), "1".into()));
        let got = lines(&runner.run_blocking(env_req.clone()).unwrap());
        // (python3 adds LC_CTYPE itself under LANG=C.)
        assert_eq!(got, ["env EXTRA,LANG,LC_CTYPE,PATH,TEMP,TMP,TMPDIR"]);
        env_req.sandbox = None;
        let unsandboxed = lines(&runner.run_blocking(env_req).unwrap());
        assert_eq!(unsandboxed, ["env EXTRA,LANG,LC_CTYPE,PATH"]);
        // A command that does not start leaves no process behind: P, I and C are reaped.
        let start = Instant::now();
        while !children().is_empty() {
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "children left: {:?}",
                children()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    });
}
