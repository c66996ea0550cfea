//! Adversarial cases that need a real file system (symlinks, races), a fake resolver, or a
//! whole spawn plan. Pure input→verdict cases live in `tests/conformance/checkers-*.json`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsString;
use std::io::{self, Read};
use std::net::IpAddr;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::Duration;

use turngate::check::{
    FilePolicyChecker, NetworkPolicyChecker, OpenError, ProcessSpawnPlan, Resolver, SpawnRequest,
};
use turngate::protocol::{
    BackendRequirement, EnvInheritance, FilesystemEntry, FsAccess, FsProvenance, NetworkMode,
    SandboxBackendKind, SandboxMode, TmpPolicy, TurnFilesystemSnapshot, TurnNetworkPolicySnapshot,
    TurnProcessPolicySnapshot, TurnSandboxSnapshot,
};
use turngate::{ActionKind, CompiledPolicy, Effect, Policy, Reason};

struct Tree {
    _tmp: tempfile::TempDir,
    base: PathBuf,
    ws: PathBuf,
    outside: PathBuf,
}

/// `base/ws` (the workspace, with `src/main.rs`, `.env`, `ro/`) and `base/outside/secret`.
fn tree() -> Tree {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let ws = base.join("ws");
    let outside = base.join("outside");
    for d in [
        ws.join("src"),
        ws.join("ro"),
        outside.clone(),
        base.join("ws_evil"),
    ] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(ws.join("src/main.rs"), "fn main() {}").unwrap();
    std::fs::write(ws.join(".env"), "TOKEN=x").unwrap();
    std::fs::write(ws.join("ro/file"), "ro").unwrap();
    std::fs::write(outside.join("secret"), "secret").unwrap();
    std::fs::write(base.join("ws_evil/x"), "x").unwrap();
    Tree {
        _tmp: tmp,
        base,
        ws,
        outside,
    }
}

fn net_snapshot() -> TurnNetworkPolicySnapshot {
    TurnNetworkPolicySnapshot {
        mode: NetworkMode::Enabled,
        allowed_domains: vec![],
        denied_domains: vec![],
        allow_localhost: false,
        allow_unix_sockets: false,
        allowed_tcp_ports: vec![],
    }
}

fn sandbox(t: &Tree, mode: SandboxMode, ws_access: FsAccess) -> TurnSandboxSnapshot {
    TurnSandboxSnapshot {
        mode,
        cwd: t.ws.clone(),
        filesystem: TurnFilesystemSnapshot {
            entries: vec![
                FilesystemEntry {
                    path: t.ws.clone(),
                    access: ws_access,
                    provenance: FsProvenance::Workspace,
                },
                FilesystemEntry {
                    path: t.ws.join("ro"),
                    access: FsAccess::Read,
                    provenance: FsProvenance::System,
                },
            ],
        },
        tmp: TmpPolicy::Isolated,
        network: net_snapshot(),
        backend_requirement: BackendRequirement::Optional,
        backend_preference: SandboxBackendKind::None,
    }
}

/// Reads and writes allowed, `.env` denied (the built-in secrets rule shape).
fn policy() -> CompiledPolicy {
    let p = Policy::from_json_str(
        r#"{"defaults": {"file_read": "allow", "file_write": "allow", "shell_command": "allow", "network": "allow"},
            "layers": [{"name": "secrets", "rules": [
              {"kind": "file_read", "effect": "deny", "pattern": ".env"},
              {"kind": "file_write", "effect": "deny", "pattern": ".env"},
              {"kind": "shell_command", "effect": "deny", "pattern": "rm"}]}]}"#,
        None,
    )
    .unwrap();
    CompiledPolicy::new(p).unwrap()
}

fn check(sb: &TurnSandboxSnapshot, kind: ActionKind, path: impl AsRef<Path>) -> (Effect, Reason) {
    let p = policy();
    let v = FilePolicyChecker::new(sb, &p)
        .check(kind, path, None)
        .verdict;
    (v.effect, v.reason)
}

const R: ActionKind = ActionKind::FileRead;
const W: ActionKind = ActionKind::FileWrite;

#[test]
fn containment_is_component_wise() {
    let t = tree();
    let sb = sandbox(&t, SandboxMode::WorkspaceWrite, FsAccess::Write);
    assert_eq!(
        check(&sb, R, "src/main.rs"),
        (Effect::Allow, Reason::Default)
    );
    // `/base/ws_evil` shares a string prefix with `/base/ws` but is not inside it.
    assert_eq!(
        check(&sb, R, t.base.join("ws_evil/x")),
        (Effect::Deny, Reason::OutsideRoots)
    );
    assert_eq!(
        check(&sb, R, "../ws_evil/x"),
        (Effect::Deny, Reason::OutsideRoots)
    );
    assert_eq!(
        check(&sb, R, "src/../../outside/secret"),
        (Effect::Deny, Reason::OutsideRoots)
    );
    assert_eq!(
        check(&sb, R, "/etc/passwd"),
        (Effect::Deny, Reason::OutsideRoots)
    );
    assert_eq!(
        check(&sb, W, "new/dir/file.txt"),
        (Effect::Allow, Reason::Default)
    );
}

#[test]
fn symlinks_that_escape_are_denied() {
    let t = tree();
    symlink(&t.outside, t.ws.join("link_dir")).unwrap();
    symlink(t.outside.join("secret"), t.ws.join("link_file")).unwrap();
    symlink("../outside/secret", t.ws.join("rel_link")).unwrap();
    symlink(t.outside.join("missing"), t.ws.join("dangling")).unwrap();
    let sb = sandbox(&t, SandboxMode::WorkspaceWrite, FsAccess::Write);
    assert_eq!(
        check(&sb, R, "link_dir/secret"),
        (Effect::Deny, Reason::SymlinkEscape)
    );
    assert_eq!(
        check(&sb, R, "link_file"),
        (Effect::Deny, Reason::SymlinkEscape)
    );
    assert_eq!(
        check(&sb, R, "rel_link"),
        (Effect::Deny, Reason::SymlinkEscape)
    );
    // A write through a dangling symlink would create the file outside.
    assert_eq!(
        check(&sb, W, "dangling"),
        (Effect::Deny, Reason::SymlinkEscape)
    );
    assert_eq!(
        check(&sb, W, "link_dir/new"),
        (Effect::Deny, Reason::SymlinkEscape)
    );
}

#[test]
fn innocuous_link_to_a_denied_file_is_denied() {
    let t = tree();
    symlink(t.ws.join(".env"), t.ws.join("innocuous")).unwrap();
    symlink(".env", t.ws.join("src/config")).unwrap();
    let sb = sandbox(&t, SandboxMode::WorkspaceWrite, FsAccess::Write);
    assert_eq!(check(&sb, R, "innocuous"), (Effect::Deny, Reason::DenyRule));
    assert_eq!(check(&sb, W, "innocuous"), (Effect::Deny, Reason::DenyRule));
    assert_eq!(check(&sb, R, "./.env"), (Effect::Deny, Reason::DenyRule));
    assert_eq!(
        check(&sb, R, "src/../.ENV"),
        (Effect::Deny, Reason::DenyRule)
    );
    // A dangling-within-workspace link resolves to `src/.env`, whose basename is denied.
    assert_eq!(
        check(&sb, W, "src/config"),
        (Effect::Deny, Reason::DenyRule)
    );
}

#[test]
fn read_only_roots_and_the_supervised_exception() {
    let t = tree();
    let sb = sandbox(&t, SandboxMode::WorkspaceWrite, FsAccess::Write);
    assert_eq!(
        check(&sb, W, "ro/file"),
        (Effect::Deny, Reason::ReadOnlyRoot)
    );
    assert_eq!(
        check(&sb, W, "ro/new"),
        (Effect::Deny, Reason::ReadOnlyRoot)
    );
    assert_eq!(check(&sb, R, "ro/file"), (Effect::Allow, Reason::Default));
    // Supervised: the mode made the workspace read-only, so a write asks.
    let sup = sandbox(&t, SandboxMode::ReadOnly, FsAccess::Read);
    assert_eq!(
        check(&sup, W, "src/main.rs"),
        (Effect::Ask, Reason::ReadOnlyRoot)
    );
    // ... but a system read-only root inside it still denies, and a deny rule still wins.
    assert_eq!(
        check(&sup, W, "ro/file"),
        (Effect::Deny, Reason::ReadOnlyRoot)
    );
    assert_eq!(check(&sup, W, ".env").0, Effect::Deny);
    // A workspace made read-only by something other than the mode denies.
    let ro = sandbox(&t, SandboxMode::WorkspaceWrite, FsAccess::Read);
    assert_eq!(
        check(&ro, W, "src/main.rs"),
        (Effect::Deny, Reason::ReadOnlyRoot)
    );
}

#[test]
fn io_errors_fail_closed() {
    let t = tree();
    let sb = sandbox(&t, SandboxMode::WorkspaceWrite, FsAccess::Write);
    // ENOTDIR: a file used as a directory.
    assert_eq!(
        check(&sb, R, "src/main.rs/x"),
        (Effect::Deny, Reason::IoError)
    );
    assert_eq!(
        check(&sb, W, "src/main.rs/x"),
        (Effect::Deny, Reason::IoError)
    );
    // ENAMETOOLONG: a 64 KiB path and a 300-byte component.
    let long = "a/".repeat(32 * 1024);
    assert_eq!(check(&sb, R, &long).0, Effect::Deny);
    assert_eq!(
        check(&sb, W, "x".repeat(300)),
        (Effect::Deny, Reason::IoError)
    );
    // ELOOP: a symlink cycle.
    symlink(t.ws.join("loop_b"), t.ws.join("loop_a")).unwrap();
    symlink(t.ws.join("loop_a"), t.ws.join("loop_b")).unwrap();
    assert_eq!(check(&sb, R, "loop_a"), (Effect::Deny, Reason::IoError));
    assert_eq!(check(&sb, W, "loop_a"), (Effect::Deny, Reason::IoError));
    // NUL and empty paths.
    assert_eq!(
        check(&sb, R, "src/\0main.rs"),
        (Effect::Deny, Reason::InvalidTarget)
    );
    assert_eq!(check(&sb, R, ""), (Effect::Deny, Reason::InvalidTarget));
    // Not a file kind.
    assert_eq!(
        check(&sb, ActionKind::Network, "src"),
        (Effect::Deny, Reason::InvalidTarget)
    );
    // Invalid UTF-8 path.
    use std::os::unix::ffi::OsStringExt;
    let bad = PathBuf::from(OsString::from_vec(b"src/\xff".to_vec()));
    assert_eq!(check(&sb, R, bad), (Effect::Deny, Reason::InvalidTarget));
}

#[test]
fn eacces_fails_closed() {
    // Root ignores permission bits, so only run the EACCES case as a normal user.
    if unsafe_is_root() {
        return;
    }
    let t = tree();
    let locked = t.ws.join("locked");
    std::fs::create_dir(&locked).unwrap();
    std::fs::write(locked.join("f"), "x").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    let sb = sandbox(&t, SandboxMode::WorkspaceWrite, FsAccess::Write);
    assert_eq!(check(&sb, R, "locked/f"), (Effect::Deny, Reason::IoError));
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn unsafe_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

#[test]
fn race_free_open_cannot_escape_after_a_swap() {
    let t = tree();
    let sb = sandbox(&t, SandboxMode::WorkspaceWrite, FsAccess::Write);
    let p = policy();
    let files = FilePolicyChecker::new(&sb, &p);
    let mut s = String::new();
    files
        .open_read("src/main.rs", None)
        .unwrap()
        .read_to_string(&mut s)
        .unwrap();
    assert_eq!(s, "fn main() {}");

    // Check `src/main.rs`, then swap `src` for a symlink to the outside before opening.
    std::fs::write(t.outside.join("main.rs"), "stolen").unwrap();
    let checked = files.check(ActionKind::FileRead, "src/main.rs", None);
    let checked_w = files.check(ActionKind::FileWrite, "src/new.txt", None);
    assert_eq!(checked.effect(), Effect::Allow);
    assert_eq!(checked_w.effect(), Effect::Allow);
    std::fs::rename(t.ws.join("src"), t.ws.join("src_old")).unwrap();
    symlink(&t.outside, t.ws.join("src")).unwrap();
    // A plain open would now read the outside file...
    assert_eq!(
        std::fs::read_to_string(t.ws.join("src/main.rs")).unwrap(),
        "stolen"
    );
    // ... the checked open refuses.
    match files.open_checked(&checked, false, false) {
        Err(OpenError::Io(e)) => assert_eq!(e.raw_os_error(), Some(libc_eloop()), "{e}"),
        other => panic!("escaped: {other:?}"),
    }
    // Same for a write, and for a swap to a denied file inside the workspace.
    assert!(matches!(
        files.open_checked(&checked_w, true, false),
        Err(OpenError::Io(_))
    ));
    assert!(!t.outside.join("new.txt").exists());
    std::fs::remove_file(t.ws.join("src")).unwrap();
    std::fs::rename(t.ws.join("src_old"), t.ws.join("src")).unwrap();
    let checked = files.check(ActionKind::FileRead, "src/main.rs", None);
    std::fs::remove_file(t.ws.join("src/main.rs")).unwrap();
    symlink(t.ws.join(".env"), t.ws.join("src/main.rs")).unwrap();
    assert!(matches!(
        files.open_checked(&checked, false, false),
        Err(OpenError::Io(_))
    ));
    // A denied check never opens; an ask opens only when approved.
    let denied = files.check(ActionKind::FileRead, ".env", None);
    assert!(matches!(
        files.open_checked(&denied, false, true),
        Err(OpenError::NotAllowed(_))
    ));
    let sup = sandbox(&t, SandboxMode::ReadOnly, FsAccess::Read);
    let files = FilePolicyChecker::new(&sup, &p);
    let ask = files.check(ActionKind::FileWrite, "approved.txt", None);
    assert_eq!(ask.effect(), Effect::Ask);
    assert!(matches!(
        files.open_checked(&ask, true, false),
        Err(OpenError::NotAllowed(_))
    ));
    assert!(files.open_checked(&ask, true, true).is_ok());
    assert!(t.ws.join("approved.txt").exists());
}

fn libc_eloop() -> i32 {
    40
}

#[derive(Clone)]
struct FakeResolver(Vec<IpAddr>);

impl Resolver for FakeResolver {
    fn resolve(&self, _host: &str, _port: u16) -> io::Result<Vec<IpAddr>> {
        if self.0.is_empty() {
            Err(io::Error::new(io::ErrorKind::NotFound, "NXDOMAIN"))
        } else {
            Ok(self.0.clone())
        }
    }
}

fn ips(list: &[&str]) -> FakeResolver {
    FakeResolver(list.iter().map(|s| s.parse().unwrap()).collect())
}

#[test]
fn dns_answers_are_vetted() {
    let net = net_snapshot();
    let p = policy();
    let base = NetworkPolicyChecker::new(&net, &p);
    let c = base.with_resolver(ips(&["93.184.216.34"]));
    let r = c.resolve_and_check("https://example.com/", None);
    assert_eq!(r.check.verdict.effect, Effect::Allow);
    assert_eq!(r.addrs, vec!["93.184.216.34:443".parse().unwrap()]);
    for (answers, why) in [
        (vec!["127.0.0.1"], "a rebinding name (127.0.0.1.nip.io)"),
        (
            vec!["93.184.216.34", "10.0.0.1"],
            "one private answer among public ones",
        ),
        (vec!["169.254.169.254"], "a name pointing at cloud metadata"),
        (
            vec!["::ffff:127.0.0.1"],
            "an IPv4-mapped loopback AAAA record",
        ),
        (vec!["fd00:ec2::254"], "the IPv6 metadata endpoint"),
        (vec!["0.0.0.0"], "the unspecified address"),
        (vec![], "NXDOMAIN"),
    ] {
        let c = NetworkPolicyChecker::new(&net, &p).with_resolver(ips(&answers));
        let r = c.resolve_and_check("http://rebind.example/", None);
        assert_eq!(r.check.verdict.effect, Effect::Deny, "{why}");
        assert_eq!(r.check.verdict.reason, Reason::DnsRefused, "{why}");
        assert!(r.addrs.is_empty(), "{why}");
    }
    // A literal is not resolved again, and a denied check never resolves.
    let c = NetworkPolicyChecker::new(&net, &p).with_resolver(ips(&[]));
    let r = c.resolve_and_check("http://1.1.1.1:8080/", None);
    assert_eq!(r.addrs, vec!["1.1.1.1:8080".parse().unwrap()]);
    let r = c.resolve_and_check("http://127.0.0.1/", None);
    assert_eq!(r.check.verdict.reason, Reason::LocalhostBlocked);
    // Localhost answers are fine when localhost is allowed.
    let mut local = net_snapshot();
    local.allow_localhost = true;
    let c = NetworkPolicyChecker::new(&local, &p).with_resolver(ips(&["127.0.0.1"]));
    assert_eq!(
        c.resolve_and_check("http://dev.test:3000/", None)
            .addrs
            .len(),
        1
    );
}

#[test]
fn download_checks_the_destination_first() {
    let t = tree();
    let sb = sandbox(&t, SandboxMode::WorkspaceWrite, FsAccess::Write);
    let p = policy();
    let files = FilePolicyChecker::new(&sb, &p);
    let net = net_snapshot();
    let c = NetworkPolicyChecker::new(&net, &p);
    let d = c.download_url("https://example.com/x", Path::new(".env"), &files, None);
    assert_eq!(d.verdict.effect, Effect::Deny);
    assert!(d.network.is_none(), "the URL is not even looked at");
    let d = c.download_url("https://example.com/x", &t.outside.join("x"), &files, None);
    assert_eq!(d.verdict.reason, Reason::OutsideRoots);
    let d = c.download_url(
        "http://169.254.169.254/",
        Path::new("out.bin"),
        &files,
        None,
    );
    assert_eq!(d.verdict.reason, Reason::MetadataAddress);
    let d = c.download_url("https://example.com/x", Path::new("out.bin"), &files, None);
    assert_eq!(d.verdict.effect, Effect::Allow);
}

fn process() -> TurnProcessPolicySnapshot {
    TurnProcessPolicySnapshot {
        shell_enabled: true,
        inherit_stdin: false,
        inherit_session: false,
        env: EnvInheritance::Filtered,
        max_duration_ms: Some(60_000),
        denied_commands: vec!["curl".into(), "wget".into()],
        allowed_command_families: vec![],
    }
}

fn plan(
    sb: &TurnSandboxSnapshot,
    proc_: &TurnProcessPolicySnapshot,
    line: &str,
) -> ProcessSpawnPlan {
    let p = policy();
    ProcessSpawnPlan::build(
        sb,
        proc_,
        &p,
        SpawnRequest {
            command_line: line,
            env: vec![
                (
                    "PATH".into(),
                    format!("/usr/bin:.:relative:{}", sb.cwd.display()).into(),
                ),
                ("GITHUB_TOKEN".into(), "ghp_x".into()),
                ("LD_PRELOAD".into(), "/tmp/x.so".into()),
                ("LANG".into(), "C.UTF-8".into()),
                ("PWD".into(), "/somewhere/else".into()),
            ],
            timeout_ms: Some(3_600_000),
            ..Default::default()
        },
    )
}

#[test]
fn spawn_plan_enforces_every_step() {
    let t = tree();
    let sb = sandbox(&t, SandboxMode::WorkspaceWrite, FsAccess::Write);
    let pr = process();
    let ok = plan(&sb, &pr, "ls -la src");
    assert_eq!(ok.verdict.effect, Effect::Allow);
    assert_eq!(ok.argv, vec!["ls", "-la", "src"]);
    assert_eq!(ok.cwd, t.ws);
    assert_eq!(
        ok.timeout,
        Some(Duration::from_millis(60_000)),
        "clamped to the maximum"
    );
    assert!(ok.new_session && !ok.inherit_stdin && ok.sandbox_required);
    let env: Vec<(String, String)> = ok
        .env
        .iter()
        .map(|(k, v)| {
            (
                k.to_str().unwrap().to_owned(),
                v.to_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(env.contains(&("LANG".into(), "C.UTF-8".into())));
    assert!(env.contains(&("PWD".into(), t.ws.display().to_string())));
    assert!(
        env.contains(&("PATH".into(), "/usr/bin".into())),
        "relative and workspace entries dropped: {env:?}"
    );
    assert!(
        !env.iter()
            .any(|(k, _)| k == "GITHUB_TOKEN" || k == "LD_PRELOAD")
    );
    assert_eq!(ok.dropped_env.len(), 2);

    let compound = plan(&sb, &pr, "cd src && ls | grep main");
    assert_eq!(compound.argv[1], "-c");
    assert_eq!(compound.commands.len(), 3);

    assert_eq!(
        plan(&sb, &pr, "sudo /bin/rm -rf /").verdict.reason,
        Reason::DenyRule
    );
    assert_eq!(
        plan(&sb, &pr, "bash -c 'CURL -s x'").verdict.reason,
        Reason::DeniedCommand
    );
    assert_eq!(plan(&sb, &pr, "echo $(ls)").verdict.effect, Effect::Ask);

    let mut families = process();
    families.allowed_command_families = vec!["git".into(), "cargo*".into()];
    assert_eq!(
        plan(&sb, &families, "cargo-clippy x && git status")
            .verdict
            .effect,
        Effect::Allow
    );
    let v = plan(&sb, &families, "git status; python3 x.py").verdict;
    assert_eq!(
        (v.effect, v.reason),
        (Effect::Ask, Reason::NotInCommandFamily)
    );

    let mut disabled = process();
    disabled.shell_enabled = false;
    let v = plan(&sb, &disabled, "ls").verdict;
    assert_eq!((v.effect, v.reason), (Effect::Deny, Reason::ShellDisabled));

    let mut outside = sandbox(&t, SandboxMode::WorkspaceWrite, FsAccess::Write);
    outside.cwd = t.outside.clone();
    assert_eq!(
        plan(&outside, &pr, "ls").verdict.reason,
        Reason::OutsideRoots
    );
    let mut missing = sandbox(&t, SandboxMode::WorkspaceWrite, FsAccess::Write);
    missing.cwd = t.ws.join("src/main.rs");
    assert_eq!(
        plan(&missing, &pr, "ls").verdict.effect,
        Effect::Deny,
        "cwd must be a directory"
    );
    assert_eq!(plan(&sb, &pr, "   ").verdict.reason, Reason::InvalidTarget);
    assert!(plan(&sb, &pr, "A=1 ls").argv[0].ends_with("sh"));
}

#[test]
fn garbage_never_panics() {
    let t = tree();
    let sb = sandbox(&t, SandboxMode::WorkspaceWrite, FsAccess::Write);
    let p = policy();
    let files = FilePolicyChecker::new(&sb, &p);
    let net = net_snapshot();
    let nc = NetworkPolicyChecker::new(&net, &p);
    let pr = process();
    let big = "x".repeat(64 * 1024);
    let deep = "$(".repeat(5000) + &")".repeat(5000);
    let nested = "bash -c '".repeat(100);
    for input in [
        big.as_str(),
        deep.as_str(),
        nested.as_str(),
        "\0",
        "\u{feff}",
        "((((",
        "'\"'\"",
        "\\",
        "http://[",
        "http://[::1",
        "http://x:0/",
        "🦀://🦀",
        "%00",
        "${!#}",
        "<<<",
        "&&&",
        "|",
    ] {
        let _ = files.check(ActionKind::FileWrite, input, None);
        let short: String = input.chars().take(40).collect();
        assert_eq!(
            nc.check(input, None).verdict.effect,
            Effect::Deny,
            "{short:?}"
        );
        // The policy allows every well-formed command; only broken syntax must not pass.
        let v = plan(&sb, &pr, input).verdict.effect;
        let broken = [
            deep.as_str(),
            nested.as_str(),
            "\0",
            "((((",
            "'\"'\"",
            "<<<",
            "&&&",
            "|",
        ];
        if broken.contains(&input) {
            assert_ne!(v, Effect::Allow, "{short:?}");
        }
    }
}

/// The fuzz target's invariants over its seeds (`fuzz/seeds/shell_parse`), through the
/// policy and the spawn plan both, under a permissive policy: nothing unresolved and no
/// command that runs code given in an argument is ever allowed, and the two never disagree.
#[test]
fn fuzz_seeds_keep_the_shell_invariants() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds/shell_parse");
    let permissive = CompiledPolicy::new(Policy::permissive()).unwrap();
    let t = tree();
    let sb = sandbox(&t, SandboxMode::Unrestricted, FsAccess::Write);
    let mut process = process();
    process.denied_commands.clear();
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let line = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        let parsed = turngate::shell::parse_command_line(&line);
        let explained = permissive.explain_parts(ActionKind::ShellCommand, &line, None);
        let plan = ProcessSpawnPlan::build(
            &sb,
            &process,
            &permissive,
            SpawnRequest {
                command_line: &line,
                ..Default::default()
            },
        );
        assert_eq!(explained.effect, plan.verdict.effect, "{line:?}");
        let code = parsed.commands.iter().any(|c| c.code_arg.is_some());
        if !parsed.unresolved.is_empty() || code {
            assert_ne!(explained.effect, Effect::Allow, "{line:?}: {parsed:?}");
        }
        seen += 1;
    }
    assert!(seen >= 60, "{seen} seeds");
}

/// Lines that run `touch P` when bash runs them (the marker `P` appears), each hiding it
/// another way. Under a deny-list that denies `touch` (everything else allowed) none may be
/// allowed. A line that does not create the marker on this machine (a missing program) is
/// skipped; most must.
const HIDDEN_TOUCH: &[&str] = &[
    r#"x='a[$(touch P)]'; echo $((x))"#,
    r#"x='a[$(touch P)]'; : $((x))"#,
    r#"x='a[$(touch P)]'; echo $(( x + 1 ))"#,
    r#"x='a[$(touch P)]'; y=$((x))"#,
    r#"x='a[$(touch P)]'; [[ $x -gt 0 ]]"#,
    r#"x='a[$(touch P)]'; [[ x -gt 0 ]]"#,
    r#"x='a[$(touch P)]'; (( x ))"#,
    r#"x='a[$(touch P)]'; let x"#,
    r#"x='a[$(touch P)]'; let y=x"#,
    r#"x='a[$(touch P)]'; declare -i y=x"#,
    r#"x='a[$(touch P)]'; declare -i y; y=x"#,
    r#"x='a[$(touch P)]'; a=(1 2); echo ${a[x]}"#,
    r#"x='a[$(touch P)]'; echo ${x:x}"#,
    r#"x='a[$(touch P)]'; echo ${!x}"#,
    r#"x='a[$(touch P)]'; echo "${!x}""#,
    r#"x='a[$(touch P)]'; test -v "$x""#,
    r#"x='a[$(touch P)]'; [ -v "$x" ]"#,
    r#"x='a[$(touch P)]'; [[ -v $x ]]"#,
    r#"x='a[$(touch P)]'; printf -v "$x" %s 1"#,
    r#"x='a[$(touch P)]'; read "$x" <<< 1"#,
    r#"x='a[$(touch P)]'; declare "$x=1""#,
    r#"x='a[$(touch P)]'; local -n r=x 2>/dev/null; declare -n r=$x; echo $r"#,
    r#"x='a[$(touch P)]'; echo ${a[$x]}"#,
    r#"x='a[$(touch P)]'; for ((;x;)); do break; done"#,
    r#"x='a[$(touch P)]'; case 1 in $((x))) ;; esac"#,
    r#"x='a[$(touch P)]'; echo "$((x))""#,
    r#"x='a[$(touch P)]'; echo ${x:0:x}"#,
    r#"x='a[$(touch P)]'; shift $((x))"#,
    r#"x='a[$(touch P)]'; a[x]=1"#,
    r#"x='a[$(touch P)]'; export x; bash -c 'echo $((x))'"#,
    r#"f() { echo $(($1)); }; f 'a[$(touch P)]'"#,
    r#"set -- 'a[$(touch P)]'; echo $(($1))"#,
    r#"echo 'a[$(touch P)]' > f; read x < f; echo $((x))"#,
    r#"echo 'a[$(touch P)]' > f; mapfile -t a < f; echo $((a))"#,
    r#"echo 'a[$(touch P)]' > f; while read -r x; do echo $((x)); done < f"#,
    r#"printf -v x '%s' 'a[$(touch P)]'; echo $((x))"#,
    r#"x='$(touch P)'; echo ${x@P}"#,
    r#"x='$(touch P)'; echo "${x@P}""#,
    r#"PS1='$(touch P)'; echo ${PS1@P}"#,
    r#"x='`touch P`'; echo ${x@P}"#,
    r#"test -v 'a[$(touch P)]'"#,
    r#"[ -v 'a[$(touch P)]' ]"#,
    r#"[[ -v 'a[$(touch P)]' ]]"#,
    r#"printf -v 'a[$(touch P)]' x"#,
    r#"printf -v'a[$(touch P)]' x"#,
    r#"read 'a[$(touch P)]' <<< 1"#,
    r#"let 'a[$(touch P)]=1'"#,
    r#"let a\[\$\(touch\ P\)\]=1"#,
    r#"declare 'a[$(touch P)]=1'"#,
    r#"typeset 'a[$(touch P)]=1'"#,
    r#"local 'a[$(touch P)]=1' 2>/dev/null; f() { local 'a[$(touch P)]=1'; }; f"#,
    r#"compgen -W '$(touch P)' x"#,
    r#"compgen -C 'touch P' x"#,
    r#"echo x | mapfile -C 'touch P' -c 1 a"#,
    r#"echo x | readarray -C 'touch P' -c 1 a"#,
    r#"trap 'touch P' EXIT"#,
    r#"trap -- 'touch P' EXIT"#,
    r#"builtin trap 'touch P' EXIT"#,
    r#"a['$(touch P)']=1"#,
    r#"echo ${a['$(touch P)']}"#,
    r#"echo $(( '$(touch P)' ))"#,
    r#"a=(['$(touch P)']=1)"#,
    r#"x=abc; echo ${x:'$(touch P)'}"#,
    r#"echo touch P | bash /dev/stdin"#,
    r#"echo touch P | sh /dev/stdin"#,
    r#"echo touch P | bash /dev/fd/0"#,
    r#"echo touch P | bash /proc/self/fd/0"#,
    r#"echo touch P | bash -"#,
    r#"echo touch P | bash -s"#,
    r#"bash <(echo touch P)"#,
    r#"source <(echo touch P)"#,
    r#". <(echo touch P)"#,
    r#"echo touch P | source /dev/stdin"#,
    r#"bash //dev//stdin <<< 'touch P'"#,
    r#"/lib64/ld-linux-x86-64.so.2 /usr/bin/touch P"#,
    r#"/lib64/ld-linux-x86-64.so.2 --argv0 x /usr/bin/touch P"#,
    r#"/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 /usr/bin/touch P"#,
    r#"setpriv touch P"#,
    r#"setpriv --reuid=0 touch P"#,
    r#"prlimit touch P"#,
    r#"prlimit --nofile=1024 touch P"#,
    r#"prlimit -n1024 touch P"#,
    r#"chrt -o 0 touch P"#,
    r#"taskset -c 0 touch P"#,
    r#"taskset 1 touch P"#,
    r#"ionice -c 3 touch P"#,
    r#"ionice touch P"#,
    r#"nice touch P"#,
    r#"nice -n 1 touch P"#,
    r#"stdbuf -oL touch P"#,
    r#"stdbuf -o L touch P"#,
    r#"nohup touch P"#,
    r#"setsid touch P"#,
    r#"setsid -w touch P"#,
    r#"timeout 5 touch P"#,
    r#"timeout -k 1 5 touch P"#,
    r#"flock lk touch P"#,
    r#"flock -x lk touch P"#,
    r#"flock lk -c 'touch P'"#,
    r#"env touch P"#,
    r#"env -i touch P"#,
    r#"env -S 'touch P'"#,
    r#"env -u X touch P"#,
    r#"env --chdir=. touch P"#,
    r#"time touch P"#,
    r#"command touch P"#,
    r#"builtin command touch P"#,
    r#"exec touch P"#,
    r#"script -qc 'touch P' /dev/null"#,
    r#"script -q -c 'touch P' /dev/null"#,
    r#"xargs touch <<< P"#,
    r#"xargs -I{} touch {} <<< P"#,
    r#"echo P | xargs touch"#,
    r#"find . -maxdepth 0 -exec touch P \;"#,
    r#"find . -maxdepth 0 -execdir touch P \;"#,
    r#"find . -maxdepth 0 -exec sh -c 'touch P' \;"#,
    r#"echo x | sed 's/x/touch P/e'"#,
    r#"echo x | sed -e 's/x/touch P/e'"#,
    r#"echo x | sed --expression='s/x/touch P/e'"#,
    r#"echo x | sed --exp='s/x/touch P/e'"#,
    r#"echo x | sed -n '1e touch P'"#,
    r#"echo x | sed 'e touch P'"#,
    r#"awk 'BEGIN{system("touch P")}'"#,
    r#"awk 'BEGIN{print | "sh"}' <<< x; echo 'touch P' | awk '{print | "sh"}'"#,
    r#"awk 'BEGIN { "touch P" | getline }'"#,
    r#"git -c alias.x='!touch P' x"#,
    r#"tar -cf a.tar f; tar -xf a.tar --to-command='touch P'"#,
    r#"tar -cf a.tar f; tar -xf a.tar --to-c='touch P'"#,
    r#"tar -cf a.tar f; tar --checkpoint=1 --checkpoint-action=exec='touch P' -xf a.tar"#,
    r#"tar -cf a.tar -I 'touch P; gzip' f"#,
    r#"tar -cf a.tar --use-compress-program='touch P; cat' f"#,
    r#"bash -c 'touch P'"#,
    r#"sh -c 'touch P'"#,
    r#"bash -lc 'touch P'"#,
    r#"bash --norc -c 'touch P'"#,
    r#"bash -o posix -c 'touch P'"#,
    r#"eval 'touch P'"#,
    r#"eval touch P"#,
    r#"$'\x74ouch' P"#,
    r#"t\ouch P"#,
    r#""touch" P"#,
    r#"'to'uch P"#,
    r#"touch${IFS}P"#,
    r#"{touch,P}"#,
    r#"x=touch; $x P"#,
    r#"x=(touch P); "${x[@]}""#,
    r#"f() { touch P; }; f"#,
    r#"command_not_found_handle() { touch P; }; nosuchcmd"#,
    r#"coproc touch P"#,
    r#"touch P &"#,
    r#"(touch P)"#,
    r#"{ touch P; }"#,
    r#"! touch P"#,
    r#"if touch P; then :; fi"#,
    r#"while touch P; do break; done"#,
    r#"case x in x) touch P;; esac"#,
    r#"echo $(touch P)"#,
    r#"echo `touch P`"#,
    r#"echo "$(touch P)""#,
    r#"cat <(touch P)"#,
    r#"$(touch P)"#,
];

#[test]
fn no_line_that_runs_a_denied_program_is_allowed() {
    let policy = Policy::from_json_value(serde_json::json!({
        "defaults": {"shell_command": "allow", "file_read": "allow", "file_write": "allow"},
        "layers": [{"name": "deny-list", "rules": [
            {"kind": "shell_command", "effect": "deny", "pattern": "touch"}]}]
    }))
    .unwrap()
    .compile()
    .unwrap();
    let mut ran = 0;
    for line in HIDDEN_TOUCH {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), "x\n").unwrap();
        let status = std::process::Command::new("bash")
            .args(["-c", line])
            .current_dir(dir.path())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
        if status.is_err() || !dir.path().join("P").exists() {
            continue;
        }
        ran += 1;
        let v = policy.explain_parts(ActionKind::ShellCommand, line, None);
        assert_ne!(
            v.effect,
            Effect::Allow,
            "{line:?} runs touch and was allowed"
        );
    }
    assert!(
        ran * 10 >= HIDDEN_TOUCH.len() * 8,
        "only {ran} of {} lines ran",
        HIDDEN_TOUCH.len()
    );
}
