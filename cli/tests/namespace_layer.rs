//! End to end through `turngate run`: the namespace layer (DESIGN §12) refuses what Landlock
//! alone let a sandboxed command do, and ordinary work still works.
//!
//! Every escape is a real child that tries it; the assertion is the kernel's refusal (its
//! errno) and the host-side witness (the file's mode, the host process's nice value, the host
//! name). Each test runs twice: as root, and as an unprivileged user the test creates
//! (`tgsbx`, through `setpriv`), because root and a normal user hit different kernel checks.

#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(target_os = "linux")]

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::test_user;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_turngate")
}

/// One line of output per `OP:ARG:...` argument: `OK`, `ERRNO <name>`, or what it printed.
const PROBE: &str = r#"
import sys, os, errno, socket, resource
def run(op, args):
    if op == "chmod": os.chmod(args[0], 0o777)
    elif op == "chown": os.chown(args[0], os.getuid(), os.getgid())
    elif op == "utime": os.utime(args[0], (0, 0))
    elif op == "setxattr": os.setxattr(args[0], "user.turngate", b"x")
    elif op == "mknod": os.mknod(args[0], 0o600 | 0o020000, os.makedev(1, 3))
    elif op == "kill0": os.kill(int(args[0]), 0)
    elif op == "killparent": os.kill(os.getppid(), 9)
    elif op == "prlimit": resource.prlimit(int(args[0]), resource.RLIMIT_CPU, (1, 1))
    elif op == "renice": os.setpriority(os.PRIO_PROCESS, int(args[0]), 19)
    elif op == "readfd": os.read(int(args[0]), 100)
    elif op == "sethostname": socket.sethostname("turngate-escaped")
    elif op == "unix":
        s = socket.socket(socket.AF_UNIX)
        s.connect(args[0])
    elif op == "socketpair": socket.socketpair()
    elif op == "syscall":
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        buf = ctypes.create_string_buffer(256)
        nums = [int(a) for a in args]
        extra = [buf if a == -1 else ctypes.c_long(a) for a in nums[1:]]
        if libc.syscall(ctypes.c_long(nums[0]), *extra) < 0:
            raise OSError(ctypes.get_errno(), "syscall")
    elif op == "abstract":
        s = socket.socket(socket.AF_UNIX)
        s.connect("\0" + args[0])
    elif op == "read": sys.stdout.write(open(args[0]).read().strip() + " ")
    elif op == "write": open(args[0], "w").write("x")
    elif op == "rename": os.rename(args[0], args[1])
    elif op == "rmtree":
        import shutil
        shutil.rmtree(args[0])
    elif op == "ppid": sys.stdout.write(str(os.getppid()) + " ")
    else: raise SystemExit("unknown op " + op)
for spec in sys.argv[1:]:
    op, *args = spec.split(":")
    try:
        run(op, args)
        print("OK")
    except OSError as e:
        print("ERRNO", errno.errorcode.get(e.errno, e.errno))
"#;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Who {
    Root,
    User,
}

const BOTH: [Who; 2] = [Who::Root, Who::User];

struct Env {
    _base: tempfile::TempDir,
    who: Who,
    ids: Option<(u32, u32)>,
    workspace: PathBuf,
    outside: PathBuf,
    home: PathBuf,
    state: PathBuf,
}

impl Env {
    fn new(who: Who) -> Env {
        let base = tempfile::tempdir().unwrap();
        let root = base.path().canonicalize().unwrap();
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
        let [workspace, outside, home, state] =
            ["workspace", "outside", "home", "state"].map(|d| root.join(d));
        for dir in [&workspace, &outside, &home, &state] {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(workspace.join("probe.py"), PROBE).unwrap();
        std::fs::write(workspace.join(".env"), "TOKEN=hunter2-in-dotenv\n").unwrap();
        std::fs::write(workspace.join("a.txt"), "a\n").unwrap();
        std::fs::create_dir_all(workspace.join(".git/hooks")).unwrap();
        std::fs::write(outside.join("file.txt"), "outside\n").unwrap();
        std::fs::set_permissions(
            outside.join("file.txt"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        std::fs::write(
            home.join(".gitconfig"),
            "[user]\n\tname = Sandboxed Tester\n\temail = tester@example.invalid\n",
        )
        .unwrap();
        std::fs::write(
            home.join(".git-credentials"),
            "https://u:ghp_credential_in_home@example.invalid\n",
        )
        .unwrap();
        // Inside a configuration directory the sandbox may read: masked on its own.
        std::fs::create_dir_all(home.join(".config/git")).unwrap();
        std::fs::write(home.join(".config/git/ignore"), "*.swp\n").unwrap();
        std::fs::write(
            home.join(".config/git/credentials"),
            "https://u:ghp_credential_in_config@example.invalid\n",
        )
        .unwrap();
        let ids = (who == Who::User).then(test_user);
        if let Some((uid, gid)) = ids {
            chown_tree(&root, uid, gid);
        }
        Env {
            _base: base,
            who,
            ids,
            workspace,
            outside,
            home,
            state,
        }
    }

    fn report_path(&self) -> PathBuf {
        self.state.join("report.json")
    }

    /// `turngate run --mode MODE ... -- ARGV`, as this environment's user.
    fn command(&self, mode: &str, argv: &[&str]) -> Command {
        let mut args: Vec<String> = [
            "run",
            "--mode",
            mode,
            "--approver",
            "allow",
            "--workspace",
            self.workspace.to_str().unwrap(),
            "--store",
            self.state.join("audit.db").to_str().unwrap(),
            "--sandbox-report",
            self.report_path().to_str().unwrap(),
            "--",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(argv.iter().map(|s| s.to_string()));
        let mut cmd = match self.ids {
            Some((uid, gid)) => {
                let mut cmd = Command::new("setpriv");
                cmd.arg(format!("--reuid={uid}"))
                    .arg(format!("--regid={gid}"))
                    .arg("--clear-groups")
                    .arg("--")
                    .arg(bin());
                cmd
            }
            None => Command::new(bin()),
        };
        cmd.args(args)
            .current_dir(&self.workspace)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", &self.home)
            .env("LANG", "C")
            .stdin(Stdio::null());
        cmd
    }

    fn run(&self, mode: &str, argv: &[&str]) -> Output {
        self.command(mode, argv).output().unwrap()
    }

    /// Run the probe with `ops`; its output lines.
    fn probe(&self, mode: &str, ops: &[String]) -> Vec<String> {
        let mut argv = vec!["python3", "probe.py"];
        argv.extend(ops.iter().map(String::as_str));
        let out = self.run(mode, &argv);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{:?}: probe failed: {}",
            self.who,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn report(&self) -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(self.report_path()).unwrap()).unwrap()
    }
}

fn chown_tree(path: &Path, uid: u32, gid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), Some(gid)).unwrap();
    if path.is_dir() && !path.is_symlink() {
        for entry in std::fs::read_dir(path).unwrap() {
            chown_tree(&entry.unwrap().path(), uid, gid);
        }
    }
}

fn op(name: &str, arg: impl AsRef<Path>) -> String {
    format!("{name}:{}", arg.as_ref().display())
}

fn namespaces_available() -> bool {
    let out = Command::new("unshare")
        .args(["--user", "--mount", "--pid", "--fork", "true"])
        .status();
    assert!(
        out.is_ok_and(|s| s.success()),
        "this machine has no unprivileged user namespaces; the namespace layer cannot be tested \
         here (the degraded path is tested by degraded_without_user_namespaces)"
    );
    true
}

#[test]
fn metadata_changes_outside_the_roots_fail() {
    assert!(namespaces_available());
    for who in BOTH {
        let env = Env::new(who);
        let file = env.outside.join("file.txt");
        let before = std::fs::metadata(&file).unwrap();
        let ops = ["chmod", "chown", "utime", "setxattr"].map(|o| op(o, &file));
        let lines = env.probe("auto_accept_edits", &ops);
        assert_eq!(lines, vec!["ERRNO EROFS"; 4], "{who:?}");
        let after = std::fs::metadata(&file).unwrap();
        assert_eq!(before.mode(), after.mode(), "{who:?}");
        assert_eq!(before.mtime(), after.mtime(), "{who:?}");
        assert!(xattr_absent(&file), "{who:?}");
    }
}

fn xattr_absent(path: &Path) -> bool {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    let mut buf = [0u8; 8];
    // SAFETY: NUL-terminated strings and a live buffer.
    let n = unsafe {
        libc::getxattr(
            c.as_ptr(),
            c"user.turngate".as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    n < 0
}

#[test]
fn the_read_only_mode_refuses_metadata_changes_in_the_workspace() {
    assert!(namespaces_available());
    for who in BOTH {
        let env = Env::new(who);
        let file = env.workspace.join("a.txt");
        let before = std::fs::metadata(&file).unwrap().mode();
        let ops = [op("chmod", &file), op("utime", &file), op("write", &file)];
        let lines = env.probe("supervised", &ops);
        assert_eq!(lines, vec!["ERRNO EROFS"; 3], "{who:?}");
        assert_eq!(std::fs::metadata(&file).unwrap().mode(), before);
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "a\n");
    }
}

#[test]
fn mknod_fails() {
    assert!(namespaces_available());
    for who in BOTH {
        let env = Env::new(who);
        let node = env.workspace.join("kmsg");
        let lines = env.probe("auto_accept_edits", &[op("mknod", &node)]);
        assert_eq!(lines, vec!["ERRNO EPERM"], "{who:?}");
        assert!(!node.exists());
    }
}

fn nice_of(pid: u32) -> i64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = stat.rsplit_once(')').unwrap().1;
    // Fields after ")": state(3) ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
    // utime stime cutime cstime priority nice(19).
    rest.split_whitespace().nth(16).unwrap().parse().unwrap()
}

#[test]
fn host_processes_are_out_of_reach() {
    assert!(namespaces_available());
    for who in BOTH {
        let env = Env::new(who);
        // A host process of the same user, and this test process (an ancestor of turngate).
        let mut host = Command::new("sleep");
        host.arg("30");
        if let Some((uid, gid)) = env.ids {
            host.uid(uid).gid(gid);
        }
        let mut host = host.spawn().unwrap();
        let pid = host.id();
        let nice = nice_of(pid);
        let me = std::process::id();
        let ops = [
            op("kill0", pid.to_string()),
            op("prlimit", pid.to_string()),
            op("renice", pid.to_string()),
            op("kill0", me.to_string()),
            op("prlimit", me.to_string()),
            "ppid".to_string(),
            "killparent".to_string(),
        ];
        let lines = env.probe("auto_accept_edits", &ops);
        assert_eq!(
            lines,
            vec![
                "ERRNO ESRCH",
                "ERRNO ESRCH",
                "ERRNO ESRCH",
                "ERRNO ESRCH",
                "ERRNO ESRCH",
                // The command's parent is the namespace's init, which it cannot signal.
                "1 OK",
                "ERRNO EPERM",
            ],
            "{who:?}"
        );
        assert_eq!(nice_of(pid), nice, "{who:?}: the host process was reniced");
        assert!(host.try_wait().unwrap().is_none(), "the host process died");
        let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
        let cpu = limits
            .lines()
            .find(|l| l.starts_with("Max cpu time"))
            .unwrap();
        assert!(cpu.contains("unlimited"), "{who:?}: {cpu}");
        host.kill().unwrap();
        let _ = host.wait();
    }
}

/// Host pids of live processes whose argv is exactly `sleep TOKEN`.
fn sleeping(token: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let zombie = std::fs::read_to_string(entry.path().join("stat"))
            .map(|s| {
                s.rsplit_once(')')
                    .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
            })
            .unwrap_or(true);
        if args.len() >= 2 && args[0].ends_with(b"sleep") && args[1] == token.as_bytes() && !zombie
        {
            found.push(pid);
        }
    }
    found
}

#[test]
fn nothing_outlives_a_killed_turngate() {
    assert!(namespaces_available());
    for who in BOTH {
        let env = Env::new(who);
        let token = format!("91.{}{}", std::process::id(), who as u8);
        let script = format!("sleep {token} & setsid sleep {token} & sleep {token}; wait");
        let mut child = env
            .command("auto_accept_edits", &["sh", "-c", &script])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let start = Instant::now();
        while sleeping(&token).len() < 3 {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "{who:?}: the sleeps never started"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // turngate itself (setpriv execs it, so the child's pid is turngate's).
        child.kill().unwrap();
        let _ = child.wait();
        let killed = Instant::now();
        while !sleeping(&token).is_empty() {
            assert!(
                killed.elapsed() < Duration::from_secs(1),
                "{who:?}: {:?} outlived turngate",
                sleeping(&token)
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

#[test]
fn inherited_descriptors_do_not_reach_the_command() {
    assert!(namespaces_available());
    for who in BOTH {
        let env = Env::new(who);
        let secret = env.outside.join("file.txt");
        let file = std::fs::File::open(&secret).unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
        let mut cmd = env.command("auto_accept_edits", &["python3", "probe.py", "readfd:9"]);
        // SAFETY: dup2 is async-signal-safe; it gives turngate an fd 9 without close-on-exec.
        unsafe {
            cmd.pre_exec(move || {
                if libc::dup2(fd, 9) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let out = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(stdout.trim(), "ERRNO EBADF", "{who:?}");
        drop(file);
    }
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: a live buffer of the given size.
    unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

#[test]
fn sethostname_fails_and_the_host_keeps_its_name() {
    assert!(namespaces_available());
    for who in BOTH {
        let env = Env::new(who);
        let before = hostname();
        let lines = env.probe("auto_accept_edits", &["sethostname".to_string()]);
        assert_eq!(lines, vec!["ERRNO EPERM"], "{who:?}");
        assert_eq!(hostname(), before);
    }
}

#[test]
fn a_host_unix_socket_cannot_be_reached() {
    assert!(namespaces_available());
    for who in BOTH {
        let env = Env::new(who);
        let path = env.outside.join("host.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        listener.set_nonblocking(true).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
        let abstract_name = format!("turngate-test-{}", std::process::id());
        let abstract_listener = {
            use std::os::linux::net::SocketAddrExt;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes())
                .unwrap();
            std::os::unix::net::UnixListener::bind_addr(&addr).unwrap()
        };
        abstract_listener.set_nonblocking(true).unwrap();
        let lines = env.probe(
            "auto_accept_edits",
            &[
                op("unix", &path),
                format!("abstract:{abstract_name}"),
                // A pair reaches nothing outside the process: still allowed.
                "socketpair".to_string(),
            ],
        );
        assert_eq!(lines, vec!["ERRNO EACCES", "ERRNO EACCES", "OK"], "{who:?}");
        assert!(abstract_listener.accept().is_err());
        assert!(
            listener.accept().is_err(),
            "{who:?}: the host socket got a connection"
        );
        let report = env.report();
        let masks = report["masks"].as_array().unwrap();
        assert!(
            masks
                .iter()
                .any(|m| m["path"] == "/run" && m["kind"] == "emptied"),
            "{report}"
        );
    }
}

#[test]
fn policy_denied_paths_are_masked_in_the_view() {
    assert!(namespaces_available());
    for who in BOTH {
        let env = Env::new(who);
        let hook = env.workspace.join(".git/hooks/pre-commit");
        let lines = env.probe(
            "auto_accept_edits",
            &[
                op("read", env.workspace.join(".env")),
                op("write", &hook),
                op("write", env.workspace.join("ok.txt")),
                // Moving the protected directory aside to recreate it unprotected.
                format!(
                    "rename:{}:{}",
                    env.workspace.join(".git").display(),
                    env.workspace.join(".git-old").display()
                ),
                op("rmtree", env.workspace.join(".git")),
                format!(
                    "rename:{}:{}",
                    env.workspace.join(".env").display(),
                    env.workspace.join("plain.txt").display()
                ),
            ],
        );
        assert_eq!(
            lines,
            vec![
                "ERRNO EACCES",
                "ERRNO EROFS",
                "OK",
                "ERRNO EBUSY",
                "ERRNO EBUSY",
                "ERRNO EBUSY"
            ],
            "{who:?}"
        );
        assert!(!hook.exists());
        assert!(env.workspace.join(".git/hooks").is_dir());
        assert!(!env.workspace.join("plain.txt").exists());
        let report = env.report();
        let masks = report["masks"].as_array().unwrap();
        let has = |path: &Path, kind: &str| {
            masks
                .iter()
                .any(|m| m["path"] == path.to_str().unwrap() && m["kind"] == kind)
        };
        assert!(has(&env.workspace.join(".env"), "hidden"), "{report}");
        assert!(
            has(&env.workspace.join(".git/hooks"), "read_only"),
            "{report}"
        );
        assert_eq!(
            report["namespaces"],
            serde_json::json!(["user", "mount", "pid", "network", "uts", "ipc"]),
            "{report}"
        );
        // The shell path too: nothing of the file reaches stdout.
        let out = env.run("auto_accept_edits", &["sh", "-c", "cat .env; cat ./.env"]);
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!all.contains("hunter2"), "{who:?}: {all}");
        assert!(all.contains("Permission denied"), "{who:?}: {all}");
    }
}

/// A wheel with one module, written by hand (a zip with the three dist-info files).
fn tiny_wheel(dir: &Path) -> PathBuf {
    let path = dir.join("tgdemo-1.0-py3-none-any.whl");
    let script = format!(
        r#"
import zipfile, hashlib, base64
files = {{
    "tgdemo.py": b"ANSWER = 42\n",
    "tgdemo-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: tgdemo\nVersion: 1.0\n",
    "tgdemo-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}}
record = []
with zipfile.ZipFile({path:?}, "w") as z:
    for name, data in files.items():
        z.writestr(name, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{{name}},sha256={{digest}},{{len(data)}}")
    record.append("tgdemo-1.0.dist-info/RECORD,,")
    z.writestr("tgdemo-1.0.dist-info/RECORD", "\n".join(record) + "\n")
"#,
        path = path.to_str().unwrap()
    );
    let status = Command::new("/usr/bin/python3")
        .args(["-c", &script])
        .status()
        .unwrap();
    assert!(status.success());
    path
}

#[test]
fn ordinary_work_works() {
    assert!(namespaces_available());
    for who in BOTH {
        let env = Env::new(who);
        let wheel = tiny_wheel(&env.workspace);
        if let Some((uid, gid)) = env.ids {
            chown_tree(&env.workspace, uid, gid);
        }
        let script = format!(
            "set -e
echo written > out.txt && cat out.txt
echo tmp > \"$TMPDIR/t\" && cat \"$TMPDIR/t\"
head -c 5 /etc/passwd; echo
python3 -c 'print(6*7)'
if [ -x /usr/bin/node ]; then node -e 'console.log(\"node\", 1+1)'; else echo node 2; fi
python3 -m pip install -q --no-index --no-cache-dir --target ./lib {wheel} 2>/dev/null
PYTHONPATH=./lib python3 -c 'import tgdemo; print(\"wheel\", tgdemo.ANSWER)'
git init -q repo && cd repo && echo x > f && git add f && git commit -qm first && git status --short && git log --format=%an
cat ~/.gitconfig >/dev/null && echo gitconfig-readable
cat ~/.git-credentials 2>/dev/null || echo credentials-unreadable
cat ~/.config/git/ignore
cat ~/.config/git/credentials 2>/dev/null || echo config-credentials-masked
",
            wheel = wheel.file_name().unwrap().to_str().unwrap()
        );
        let out = env.run("auto_accept_edits", &["sh", "-c", &script]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{who:?}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let expected = [
            "written",
            "tmp",
            "root:",
            "42",
            "node 2",
            "wheel 42",
            "Sandboxed Tester",
            "gitconfig-readable",
            "credentials-unreadable",
            "*.swp",
            "config-credentials-masked",
        ];
        let lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(lines, expected, "{who:?}");
        assert!(!stdout.contains("ghp_credential"), "{stdout}");
        assert_eq!(
            std::fs::read_to_string(env.workspace.join("out.txt")).unwrap(),
            "written\n"
        );
        let report = env.report();
        let masks = report["masks"].as_array().unwrap();
        assert!(
            masks.iter().any(|m| m["path"]
                == env.home.join(".config/git/credentials").to_str().unwrap()
                && m["kind"] == "hidden"),
            "{report}"
        );
    }
}

/// The private tmp is a tmpfs of the run's own with a size cap (ADR 0027): filling it past the
/// cap gives the command ENOSPC and nothing else (turngate finishes the run and reports it, the
/// bytes never reach the host's disk), the command can free it and go on, and a cap that is not
/// a size is refused before anything runs.
#[test]
fn filling_the_private_tmp_past_its_cap_gives_enospc_and_harms_nothing() {
    assert!(namespaces_available());
    const FILL: &str = r#"
import os, errno
tmp = os.environ["TMPDIR"]
print(tmp)
written = 0
try:
    with open(os.path.join(tmp, "fill"), "wb") as f:
        while written < 64 << 20:
            f.write(b"\0" * (1 << 20))
            f.flush()
            written += 1 << 20
    print("no cap", written >> 20)
except OSError as e:
    print(errno.errorcode[e.errno], written >> 20)
os.remove(os.path.join(tmp, "fill"))
open(os.path.join(tmp, "after"), "w").write("room again")
print(open(os.path.join(tmp, "after")).read())
"#;
    for who in BOTH {
        let env = Env::new(who);
        let out = env
            .command("auto_accept_edits", &["python3", "-c", FILL])
            .env("TURNGATE_SANDBOX_TMP_SIZE", "4m")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{who:?}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(lines.len(), 3, "{who:?}: {stdout}");
        let tmp = PathBuf::from(lines[0]);
        // 4 MiB of data, less what the tmpfs keeps for itself: refused before 5 MiB.
        let filled: Vec<&str> = lines[1].split(' ').collect();
        assert_eq!(filled[0], "ENOSPC", "{who:?}: {stdout}");
        assert!(filled[1].parse::<u32>().unwrap() <= 4, "{who:?}: {stdout}");
        assert_eq!(lines[2], "room again", "{who:?}");
        // The run was reported as any other, and nothing of it is on the host.
        assert!(env.report()["namespaces"].as_array().unwrap().len() >= 3);
        assert!(!tmp.join("fill").exists() && !tmp.join("after").exists());

        let marker = env.workspace.join("ran");
        let out = env
            .command(
                "auto_accept_edits",
                &["sh", "-c", &format!("echo ran > {}", marker.display())],
            )
            .env("TURNGATE_SANDBOX_TMP_SIZE", "lots")
            .output()
            .unwrap();
        assert_ne!(out.status.code(), Some(0), "{who:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("TURNGATE_SANDBOX_TMP_SIZE"),
            "{who:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            !marker.exists(),
            "{who:?}: the command ran with an unusable tmp cap"
        );
    }
}

#[test]
fn cargo_builds_in_the_sandbox_with_the_real_home() {
    assert!(namespaces_available());
    let home = PathBuf::from(std::env::var_os("HOME").expect("HOME"));
    let cargo = home.join(".cargo/bin/cargo");
    assert!(
        cargo.exists(),
        "{} is missing: the test needs the rustup toolchain it runs with",
        cargo.display()
    );
    let ws = tempfile::tempdir().unwrap();
    let ws = ws.path().canonicalize().unwrap();
    // The store in a subdirectory of the workspace, hidden from the command.
    std::fs::create_dir_all(ws.join(".turngate")).unwrap();
    let path = format!("{}:/usr/bin:/bin", home.join(".cargo/bin").display());
    let out = Command::new(bin())
        .args(["run", "--mode", "auto_accept_edits", "--approver", "allow"])
        .arg("--workspace")
        .arg(&ws)
        .arg("--store")
        .arg(ws.join(".turngate/audit.db"))
        .args([
            "--",
            "sh",
            "-c",
            "cargo new -q --vcs none hello && cd hello && cargo run -q --offline",
        ])
        .current_dir(&ws)
        .env_clear()
        .env("PATH", path)
        .env("HOME", &home)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "Hello, world!",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn degraded_without_user_namespaces() {
    // A user namespace whose own limit is 0: turngate inside it cannot create one, as on a
    // machine that forbids them. Nothing global changes.
    let env = Env::new(Who::Root);
    let target = env.outside.join("escape.txt");
    let inner = env.command(
        "auto_accept_edits",
        &["python3", "probe.py", &op("write", &target)],
    );
    let mut cmd = Command::new("unshare");
    cmd.args(["--user", "--map-root-user", "--", "sh", "-c"])
        .arg("echo 0 > /proc/sys/user/max_user_namespaces && exec \"$@\"")
        .arg("sh")
        .arg(inner.get_program())
        .args(inner.get_args())
        .current_dir(&env.workspace)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &env.home);
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    // Landlock still confines.
    assert_eq!(
        stdout.trim(),
        "ERRNO EACCES",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!target.exists());
    let report = env.report();
    assert_eq!(report["status"], "partially_active", "{report}");
    assert!(report.get("namespaces").is_none(), "{report}");
    let reasons: Vec<String> = report["degradations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["reason"].as_str().unwrap().to_string())
        .collect();
    for layer in [
        "no user namespace",
        "no mount namespace",
        "no PID namespace",
        "no network namespace",
        "no UTS namespace",
        "no IPC namespace",
    ] {
        assert!(
            reasons.iter().any(|r| r.starts_with(layer)),
            "{layer} missing from {reasons:#?}"
        );
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("sandbox degraded"), "{stderr}");
}

#[test]
fn the_kernel_keyrings_and_io_uring_are_refused() {
    assert!(namespaces_available());
    for who in BOTH {
        let env = Env::new(who);
        // keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0): the host's session
        // keyring is shared with the command otherwise. io_uring_setup(1, params): its
        // socket and file operations are invisible to seccomp. (-1 passes a scratch buffer.)
        let ops = [
            format!("syscall:{}:0:-3:0", libc::SYS_keyctl),
            format!("syscall:{}:1:-1", libc::SYS_io_uring_setup),
        ];
        let lines = env.probe("auto_accept_edits", &ops);
        assert_eq!(lines, vec!["ERRNO EPERM", "ERRNO EPERM"], "{who:?}");
    }
}

#[test]
fn a_directory_the_walk_cannot_list_is_hidden() {
    assert!(namespaces_available());
    // As the owner without the read bit (root reads every directory, so only the user case
    // can hit it): an unlistable directory could hold anything, so it is hidden whole.
    let env = Env::new(Who::User);
    let dir = env.workspace.join("sub");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join(".env"), "TOKEN=hunter2-in-sub\n").unwrap();
    let (uid, gid) = env.ids.unwrap();
    chown_tree(&dir, uid, gid);
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o311)).unwrap();
    let lines = env.probe("auto_accept_edits", &[op("read", dir.join(".env"))]);
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(lines, vec!["ERRNO EACCES"]);
    let report = env.report();
    let masks = report["masks"].as_array().unwrap();
    assert!(
        masks
            .iter()
            .any(|m| m["path"] == dir.to_str().unwrap() && m["kind"] == "hidden"),
        "{report}"
    );
}

#[test]
fn aliases_of_a_denied_name_are_hidden_too() {
    assert!(namespaces_available());
    for who in BOTH {
        let env = Env::new(who);
        let ws = &env.workspace;
        // Planted before the secret existed: `.envrc` is a symlink to an innocent name, and
        // `.env.local` a hard link to another; the user then writes secrets through them.
        std::fs::write(ws.join("notes.txt"), "TOKEN=hunter2-via-symlink\n").unwrap();
        std::os::unix::fs::symlink("notes.txt", ws.join(".envrc")).unwrap();
        std::fs::write(ws.join("plain.txt"), "TOKEN=hunter2-via-hardlink\n").unwrap();
        std::fs::hard_link(ws.join("plain.txt"), ws.join(".env.local")).unwrap();
        if let Some((uid, gid)) = env.ids {
            chown_tree(ws, uid, gid);
        }
        let lines = env.probe(
            "auto_accept_edits",
            &[
                op("read", ws.join("notes.txt")),
                op("read", ws.join("plain.txt")),
                op("read", ws.join("a.txt")),
            ],
        );
        assert_eq!(
            lines,
            vec!["ERRNO EACCES", "ERRNO EACCES", "a OK"],
            "{who:?}"
        );
    }
}

#[test]
fn a_submodule_hooks_directory_is_read_only() {
    assert!(namespaces_available());
    for who in BOTH {
        let env = Env::new(who);
        let hooks = env.workspace.join(".git/modules/lib/hooks");
        std::fs::create_dir_all(&hooks).unwrap();
        if let Some((uid, gid)) = env.ids {
            chown_tree(&env.workspace, uid, gid);
        }
        let lines = env.probe(
            "auto_accept_edits",
            &[op("write", hooks.join("pre-commit"))],
        );
        assert_eq!(lines, vec!["ERRNO EROFS"], "{who:?}");
        assert!(!hooks.join("pre-commit").exists());
    }
}

/// Red-team F8 (ADR 0020): protected files that did not exist at spawn, created by the
/// command, are moved into quarantine once it has ended, and the report lists each one.
#[test]
fn protected_files_created_during_a_run_are_quarantined() {
    assert!(namespaces_available());
    for who in BOTH {
        let env = Env::new(who);
        let w = &env.workspace;
        // Absent at spawn: `.git/config`, `.git/hooks`, `.envrc`, `.env`, `sub/.env`.
        std::fs::remove_dir_all(w.join(".git/hooks")).unwrap();
        std::fs::remove_file(w.join(".env")).unwrap();
        let script = "set -e
printf '[core]\\n\\tfsmonitor = touch /tmp/f8-pwned\\n' > .git/config
echo 'touch /tmp/f8-pwned' > .envrc
echo 'NODE_OPTIONS=--require=/tmp/f8.js' > .env
mkdir .git/hooks
printf '#!/bin/sh\\ntouch /tmp/f8-pwned\\n' > .git/hooks/pre-commit
chmod +x .git/hooks/pre-commit
mkdir -p sub && echo A=1 > sub/.env
ln -s ../a.txt sub/.envrc
echo ordinary > ordinary.txt
echo created";
        // In a file: the gate judges a command line's own redirections, not a script's.
        std::fs::write(w.join("f8.sh"), script).unwrap();
        if let Some((uid, gid)) = env.ids {
            chown_tree(w, uid, gid);
        }
        let out = env.run("auto_accept_edits", &["sh", "f8.sh"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{who:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "created");
        // Said on stderr too.
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("quarantined"), "{who:?}: {stderr}");
        for gone in [
            ".git/config",
            ".git/hooks",
            ".envrc",
            ".env",
            "sub/.env",
            "sub/.envrc",
        ] {
            assert!(
                std::fs::symlink_metadata(w.join(gone)).is_err(),
                "{who:?}: {gone} is still in the workspace"
            );
        }
        // Ordinary work stays.
        assert_eq!(
            std::fs::read_to_string(w.join("ordinary.txt")).unwrap(),
            "ordinary\n"
        );
        assert!(w.join("sub").is_dir() && w.join(".git").is_dir());
        let report = env.report();
        let quarantined = report["quarantined"].as_array().expect("quarantined");
        let mut paths: Vec<String> = quarantined
            .iter()
            .map(|q| q["path"].as_str().unwrap().to_string())
            .collect();
        paths.sort();
        let mut want: Vec<String> = [
            ".env",
            ".envrc",
            ".git/config",
            ".git/hooks",
            "sub/.env",
            "sub/.envrc",
        ]
        .iter()
        .map(|p| w.join(p).display().to_string())
        .collect();
        want.sort();
        assert_eq!(paths, want, "{who:?}: {report}");
        // Each one is kept, with what the command wrote, under the state dir, private.
        for q in quarantined {
            let to = PathBuf::from(q["moved_to"].as_str().expect("moved"));
            assert!(to.starts_with(env.state.join("quarantine")), "{to:?}");
            assert!(std::fs::symlink_metadata(&to).is_ok(), "{to:?}");
            if q["path"].as_str().unwrap().ends_with(".git/config") {
                assert!(std::fs::read_to_string(&to).unwrap().contains("fsmonitor"));
            }
            if q["path"].as_str().unwrap().ends_with(".git/hooks") {
                assert!(to.join("pre-commit").is_file());
            }
        }
        let mode = std::fs::metadata(env.state.join("quarantine"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "the quarantine is not private: {mode:o}");
        assert!(
            report["degradations"]
                .as_array()
                .unwrap()
                .iter()
                .all(|d| !d["reason"].as_str().unwrap().contains("did not complete")),
            "{report}"
        );
        assert!(!Path::new("/tmp/f8-pwned").exists());
    }
}

/// Ordinary git work in an existing repository quarantines nothing, and existing protected
/// files stay where they are.
#[test]
fn git_commit_in_the_workspace_quarantines_nothing() {
    assert!(namespaces_available());
    for who in BOTH {
        let env = Env::new(who);
        let w = &env.workspace;
        std::fs::remove_dir_all(w.join(".git")).unwrap();
        let git = |args: &[&str]| {
            let status = Command::new("git")
                .args(["-c", "safe.directory=*"])
                .args(args)
                .current_dir(w)
                .env("HOME", &env.home)
                .status()
                .unwrap();
            assert!(status.success(), "git {args:?}");
        };
        git(&["init", "-q"]);
        git(&["add", "a.txt"]);
        git(&["commit", "-qm", "first"]);
        if let Some((uid, gid)) = env.ids {
            chown_tree(w, uid, gid);
        }
        let config = std::fs::read_to_string(w.join(".git/config")).unwrap();
        let script = "set -e
echo more >> a.txt && echo new > b.txt
git add a.txt b.txt && git commit -qm second && git log --format=%s | head -1";
        let out = env.run("auto_accept_edits", &["sh", "-c", script]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{who:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "second");
        let report = env.report();
        assert!(report.get("quarantined").is_none(), "{who:?}: {report}");
        assert_eq!(
            std::fs::read_to_string(w.join(".git/config")).unwrap(),
            config
        );
        assert!(w.join(".git/hooks").is_dir() && w.join(".env").is_file());
        assert!(!env.state.join("quarantine").exists());
    }
}
