//! Property tests: a capped snapshot is never broader than the uncapped snapshot nor the cap,
//! on any field.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use proptest::prelude::*;
use turngate::protocol::{
    ApprovalScope, CapOrigin, EnvInheritance, ExecutionBackend, FilesystemEntry, FsAccess,
    FsProvenance, NetworkMode, OsFamily, PlatformCapabilities, SandboxMode, TaskAgentSecurityCap,
    TmpPolicy, TurnExecutionSecuritySnapshot, TurnFilesystemSnapshot, TurnNetworkPolicySnapshot,
    TurnPermissionProfileCap, TurnPermissionProfileSelection, TurnPermissionProfileSource,
    TurnProcessPolicySnapshot,
};
use turngate::snapshot::{ResolveContext, cap_from_parent, intersect, is_within, resolve};
use turngate::{Action, ActionKind, Effect, PermissionMode, Policy};

const PATHS: [&str; 8] = ["/", "/w", "/w/a", "/w/a/b", "/w_evil", "/p", "/opt", "/x"];

/// Snapshot roots must exist: every path of the tests lives under one temporary directory,
/// created once (and left for the OS to clean, since statics are never dropped).
static BASE: LazyLock<PathBuf> = LazyLock::new(|| {
    let dir = tempfile::tempdir().unwrap().keep();
    let base = std::fs::canonicalize(dir).unwrap();
    for p in ["w/a/b", "w_evil", "p", "opt", "x"] {
        std::fs::create_dir_all(base.join(p)).unwrap();
    }
    base
});

/// `p` (written as if the temporary base were `/`) under the temporary base.
fn at(p: &str) -> String {
    let base = BASE.display().to_string();
    match p.strip_prefix('/') {
        Some("") => base,
        Some(rest) => format!("{base}/{rest}"),
        None => p.to_owned(),
    }
}
const HOSTS: [&str; 5] = [
    "example.com",
    "a.example.com",
    "b.org",
    "x.b.org",
    "evil.com",
];
const PROGRAMS: [&str; 4] = ["cargo", "git", "rm", "zzz"];

fn platforms() -> Vec<PlatformCapabilities> {
    let mut linux7 = PlatformCapabilities::none(OsFamily::Linux);
    linux7.landlock_abi = Some(7);
    linux7.seccomp = true;
    let mut linux3 = linux7.clone();
    linux3.landlock_abi = Some(3);
    let mut mac = PlatformCapabilities::none(OsFamily::Macos);
    mac.seatbelt = true;
    vec![
        linux7,
        linux3,
        PlatformCapabilities::none(OsFamily::Linux),
        mac,
        PlatformCapabilities::none(OsFamily::Windows),
    ]
}

fn mode() -> impl Strategy<Value = PermissionMode> {
    prop::sample::select(PermissionMode::ALL.to_vec())
}

fn path() -> impl Strategy<Value = String> {
    prop::sample::select(PATHS.to_vec()).prop_map(at)
}

fn access() -> impl Strategy<Value = FsAccess> {
    prop::sample::select(vec![FsAccess::Read, FsAccess::Write])
}

fn effect() -> impl Strategy<Value = Effect> {
    prop::sample::select(vec![Effect::Allow, Effect::Ask, Effect::Deny])
}

fn context() -> impl Strategy<Value = ResolveContext> {
    (
        prop::sample::select(vec!["/w", "/w/a", "/x"]),
        prop::sample::subsequence(vec!["/w/a/b", "/p", "/w_evil"], 0..3),
        prop::sample::subsequence(vec!["/opt", "/w/a"], 0..2),
        prop::sample::select(vec![
            ExecutionBackend::Native,
            ExecutionBackend::CodexCli,
            ExecutionBackend::ClaudeCli,
        ]),
        prop::sample::select(platforms()),
    )
        .prop_map(|(ws, projects, apps, exec, platform)| {
            let mut c = ResolveContext::new(at(ws), platform);
            c.project_roots = projects.into_iter().map(|p| at(p).into()).collect();
            c.app_read_roots = apps.into_iter().map(|p| at(p).into()).collect();
            c.home = Some(at("/home/me").into());
            c.execution_backend = exec;
            c
        })
}

fn cap_policy() -> impl Strategy<Value = Policy> {
    (
        effect(),
        effect(),
        effect(),
        prop::option::of((
            prop::sample::select(vec![
                ActionKind::FileRead,
                ActionKind::FileWrite,
                ActionKind::ShellCommand,
                ActionKind::Network,
            ]),
            effect(),
            prop::sample::select(vec!["secrets/*", "rm", "example.com", "*"]),
        )),
    )
        .prop_map(|(read, write, shell, rule)| {
            let mut p = Policy::new()
                .with_default(ActionKind::FileRead, read)
                .with_default(ActionKind::FileWrite, write)
                .with_default(ActionKind::ShellCommand, shell);
            if let Some((kind, effect, pattern)) = rule {
                p = p
                    .layer("cap")
                    .rule(turngate::Rule::new(kind, effect, pattern));
            }
            p
        })
}

fn network() -> impl Strategy<Value = TurnNetworkPolicySnapshot> {
    (
        prop::sample::select(vec![
            NetworkMode::Enabled,
            NetworkMode::Restricted,
            NetworkMode::Disabled,
        ]),
        prop::sample::subsequence(HOSTS.to_vec(), 0..3),
        prop::sample::subsequence(HOSTS.to_vec(), 0..2),
        any::<bool>(),
        any::<bool>(),
        prop::sample::subsequence(vec![80u16, 443, 8080], 0..3),
    )
        .prop_map(
            |(mode, allowed, denied, lh, us, ports)| TurnNetworkPolicySnapshot {
                mode,
                allowed_domains: allowed.into_iter().map(str::to_owned).collect(),
                denied_domains: denied.into_iter().map(str::to_owned).collect(),
                allow_localhost: lh,
                allow_unix_sockets: us,
                allowed_tcp_ports: ports,
            },
        )
}

fn process() -> impl Strategy<Value = TurnProcessPolicySnapshot> {
    (
        any::<(bool, bool, bool)>(),
        prop::sample::select(vec![
            EnvInheritance::All,
            EnvInheritance::Filtered,
            EnvInheritance::None,
        ]),
        prop::option::of(1u64..1_000_000),
        prop::sample::subsequence(PROGRAMS.to_vec(), 0..2),
        prop::sample::subsequence(vec!["cargo", "git", "*"], 0..3),
    )
        .prop_map(|((shell, stdin, session), env, max, denied, families)| {
            TurnProcessPolicySnapshot {
                shell_enabled: shell,
                inherit_stdin: stdin,
                inherit_session: session,
                env,
                max_duration_ms: max,
                denied_commands: denied.into_iter().map(str::to_owned).collect(),
                allowed_command_families: families.into_iter().map(str::to_owned).collect(),
            }
        })
}

fn literal_cap() -> impl Strategy<Value = TaskAgentSecurityCap> {
    (
        prop::sample::select(vec![CapOrigin::ParentTurn, CapOrigin::TaskPolicy]),
        prop::option::of((mode(), prop::option::of(cap_policy()))),
        prop::option::of(prop::sample::select(vec![
            SandboxMode::Unrestricted,
            SandboxMode::WorkspaceWrite,
            SandboxMode::ReadOnly,
        ])),
        prop::option::of(prop::collection::vec((path(), access()), 0..4)),
        prop::option::of(network()),
        prop::option::of(process()),
        prop::option::of(prop::sample::subsequence(ApprovalScope::ALL.to_vec(), 0..4)),
    )
        .prop_map(
            |(origin, profile, sandbox_mode, fs, network, process, scopes)| TaskAgentSecurityCap {
                origin,
                profile: profile.map(|(mode, policy)| TurnPermissionProfileCap { mode, policy }),
                sandbox_mode,
                filesystem: fs.map(|entries| TurnFilesystemSnapshot {
                    entries: entries
                        .into_iter()
                        .map(|(p, access)| FilesystemEntry {
                            path: p.into(),
                            access,
                            provenance: FsProvenance::TaskCap,
                        })
                        .collect(),
                }),
                network,
                process,
                approval_scopes: scopes,
            },
        )
}

fn cap() -> impl Strategy<Value = TaskAgentSecurityCap> {
    prop_oneof![
        literal_cap(),
        (
            mode(),
            context(),
            prop::sample::select(vec![CapOrigin::ParentTurn, CapOrigin::TaskPolicy])
        )
            .prop_map(|(m, ctx, origin)| {
                let parent =
                    resolve(Some(&TurnPermissionProfileSelection::mode(m)), &ctx, None).unwrap();
                cap_from_parent(&parent, origin)
            }),
    ]
}

fn grants(s: &TurnExecutionSecuritySnapshot, p: &Path, a: FsAccess) -> bool {
    s.sandbox.mode == SandboxMode::Unrestricted
        || s.sandbox
            .filesystem
            .entries
            .iter()
            .any(|e| is_within(p, &e.path) && e.access >= a)
}

fn cap_grants(cap: &TaskAgentSecurityCap, p: &Path, a: FsAccess) -> bool {
    match &cap.filesystem {
        None => true,
        Some(fs) => fs
            .entries
            .iter()
            .any(|e| is_within(p, &e.path) && e.access >= a),
    }
}

fn covers(rule: &str, host: &str) -> bool {
    host == rule || host.ends_with(&format!(".{rule}"))
}

fn host_allowed(n: &TurnNetworkPolicySnapshot, h: &str) -> bool {
    let denied = n.denied_domains.iter().any(|d| covers(d, h));
    match n.mode {
        NetworkMode::Enabled => !denied,
        NetworkMode::Restricted => !denied && n.allowed_domains.iter().any(|d| covers(d, h)),
        NetworkMode::Disabled => false,
    }
}

fn port_allowed(n: &TurnNetworkPolicySnapshot, p: u16) -> bool {
    n.mode != NetworkMode::Disabled
        && (n.allowed_tcp_ports.is_empty() || n.allowed_tcp_ports.contains(&p))
}

fn env_rank(e: EnvInheritance) -> u8 {
    match e {
        EnvInheritance::All => 0,
        EnvInheritance::Filtered => 1,
        EnvInheritance::None => 2,
    }
}

fn family_allows(p: &TurnProcessPolicySnapshot, prog: &str) -> bool {
    p.allowed_command_families.is_empty()
        || p.allowed_command_families
            .iter()
            .any(|f| f == prog || f == "*")
}

fn actions() -> Vec<Action> {
    let mut out = Vec::new();
    for t in ["src/main.rs", "secrets/k", "/etc/passwd"] {
        out.push(Action::new(ActionKind::FileRead, t));
        out.push(Action::new(ActionKind::FileWrite, t));
    }
    for t in PROGRAMS {
        out.push(Action::new(ActionKind::ShellCommand, t));
    }
    for t in ["example.com:443", "evil.com:80"] {
        out.push(Action::new(ActionKind::Network, t));
    }
    for k in [
        ActionKind::McpRead,
        ActionKind::McpWriteOrUnknown,
        ActionKind::TaskSubagent,
        ActionKind::Unknown,
    ] {
        out.push(Action::new(k, "x/y"));
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn a_capped_snapshot_is_never_broader(
        child_mode in mode(),
        ctx in context(),
        pre in prop::option::of(literal_cap()),
        cap in cap(),
    ) {
        let sel = TurnPermissionProfileSelection::mode(child_mode);
        let fresh = resolve(Some(&sel), &ctx, None).unwrap();
        // A child that was already capped once (so restricted networks, port lists and command
        // families meet on both sides), or a fresh one; resolve's parent_cap argument agrees.
        let child = match &pre {
            Some(pre) => {
                let c = intersect(&fresh, pre);
                prop_assert_eq!(&resolve(Some(&sel), &ctx, Some(pre)).unwrap(), &c);
                c
            }
            None => {
                prop_assert_eq!(&resolve(Some(&sel), &ctx, Some(&cap)).unwrap(), &intersect(&fresh, &cap));
                fresh
            }
        };
        let r = intersect(&child, &cap);

        // Profile.
        prop_assert!(r.permission_profile.mode >= child.permission_profile.mode);
        if let Some(p) = &cap.profile {
            prop_assert!(r.permission_profile.mode >= p.mode);
        }
        let expected_source = match cap.origin {
            CapOrigin::ParentTurn => TurnPermissionProfileSource::InheritedFromParentTurn,
            CapOrigin::TaskPolicy => TurnPermissionProfileSource::TaskPermissionCap,
        };
        prop_assert_eq!(r.permission_profile.source, expected_source);
        let rp = r.permission_profile.effective_policy.compile().unwrap();
        let cp = child.permission_profile.effective_policy.compile().unwrap();
        let mut bounds = vec![cp];
        if let Some(p) = &cap.profile {
            bounds.push(p.mode.policy().compile().unwrap());
            if let Some(pol) = &p.policy {
                bounds.push(pol.compile().unwrap());
            }
        }
        bounds.push(r.permission_profile.mode.policy().compile().unwrap());
        for a in actions() {
            let got = rp.check(&a);
            for b in &bounds {
                prop_assert!(got >= b.check(&a), "{:?}: {:?} looser than a bound's {:?}", a, got, b.check(&a));
            }
        }

        // Sandbox and filesystem.
        prop_assert!(r.sandbox.mode >= child.sandbox.mode);
        if let Some(m) = cap.sandbox_mode {
            prop_assert!(r.sandbox.mode >= m);
        }
        if cap.filesystem.is_some() {
            prop_assert!(r.sandbox.mode != SandboxMode::Unrestricted);
        }
        for p in PATHS.iter().chain(["/w/a/b/c", "/opt/z"].iter()).map(|p| at(p)) {
            let p = p.as_str();
            for a in [FsAccess::Read, FsAccess::Write] {
                if grants(&r, Path::new(p), a) {
                    prop_assert!(grants(&child, Path::new(p), a), "{} {:?} broader than child", p, a);
                    prop_assert!(cap_grants(&cap, Path::new(p), a), "{} {:?} broader than cap", p, a);
                }
            }
        }
        if r.sandbox.mode == SandboxMode::ReadOnly {
            prop_assert!(r.sandbox.filesystem.entries.iter().all(|e| e.access == FsAccess::Read));
        }
        if child.sandbox.tmp == TmpPolicy::Isolated {
            prop_assert_eq!(r.sandbox.tmp, TmpPolicy::Isolated);
        }
        prop_assert!(r.sandbox.backend_requirement >= child.sandbox.backend_requirement);
        prop_assert_eq!(&r.sandbox.network, &r.network);

        // Network.
        let mut net_bounds = vec![&child.network];
        if let Some(n) = &cap.network {
            net_bounds.push(n);
        }
        for b in &net_bounds {
            prop_assert!(r.network.mode >= b.mode);
            prop_assert!(b.denied_domains.iter().all(|d| r.network.denied_domains.contains(d)));
            prop_assert!(!r.network.allow_localhost || b.allow_localhost);
            prop_assert!(!r.network.allow_unix_sockets || b.allow_unix_sockets);
            for h in HOSTS {
                prop_assert!(!host_allowed(&r.network, h) || host_allowed(b, h), "host {} broader", h);
            }
            for port in [22u16, 80, 443, 8080] {
                prop_assert!(!port_allowed(&r.network, port) || port_allowed(b, port), "port {} broader", port);
            }
        }

        // Process.
        let mut proc_bounds = vec![&child.process];
        if let Some(p) = &cap.process {
            proc_bounds.push(p);
        }
        let shell_asks = rp.check(&Action::new(ActionKind::ShellCommand, "zzz")) >= Effect::Ask;
        for b in &proc_bounds {
            prop_assert!(!r.process.shell_enabled || b.shell_enabled);
            prop_assert!(!r.process.inherit_stdin || b.inherit_stdin);
            prop_assert!(!r.process.inherit_session || b.inherit_session);
            prop_assert!(env_rank(r.process.env) >= env_rank(b.env));
            if let Some(max) = b.max_duration_ms {
                prop_assert!(r.process.max_duration_ms.is_some_and(|m| m <= max));
            }
            prop_assert!(b.denied_commands.iter().all(|d| r.process.denied_commands.contains(d)));
            for prog in PROGRAMS {
                prop_assert!(!family_allows(&r.process, prog) || family_allows(b, prog) || shell_asks,
                    "program {} runs without asking more broadly", prog);
            }
        }

        // Approval scopes.
        for s in &r.approval.allowed_scopes {
            prop_assert!(child.approval.allowed_scopes.contains(s));
            if let Some(scopes) = &cap.approval_scopes {
                prop_assert!(scopes.contains(s));
            }
        }
        prop_assert_eq!(r.parent_cap.as_ref(), Some(&cap));
    }

    #[test]
    fn network_and_process_bounds_meet(
        ctx in context(),
        child_net in network(),
        child_proc in process(),
        cap_net in network(),
        cap_proc in process(),
    ) {
        // Snapshots are plain data: give the child arbitrary network and process bounds so both
        // sides of every list and flag are exercised.
        let mut child = resolve(None, &ctx, None).unwrap();
        child.network = child_net;
        child.sandbox.network = child.network.clone();
        child.process = child_proc;
        let mut cap = TaskAgentSecurityCap::unconstrained(CapOrigin::TaskPolicy);
        cap.network = Some(cap_net.clone());
        cap.process = Some(cap_proc.clone());
        let r = intersect(&child, &cap);
        let rp = r.permission_profile.effective_policy.compile().unwrap();
        for b in [&child.network, &cap_net] {
            prop_assert!(r.network.mode >= b.mode);
            for h in HOSTS {
                prop_assert!(!host_allowed(&r.network, h) || host_allowed(b, h), "host {} broader", h);
            }
            for port in [22u16, 80, 443, 8080] {
                prop_assert!(!port_allowed(&r.network, port) || port_allowed(b, port), "port {} broader", port);
            }
            prop_assert!(!r.network.allow_localhost || b.allow_localhost);
        }
        for b in [&child.process, &cap_proc] {
            for prog in PROGRAMS {
                let asks = rp.check(&Action::new(ActionKind::ShellCommand, prog)) >= Effect::Ask;
                prop_assert!(!family_allows(&r.process, prog) || family_allows(b, prog) || asks,
                    "program {} runs without asking more broadly", prog);
            }
            prop_assert!(env_rank(r.process.env) >= env_rank(b.env));
            if let Some(max) = b.max_duration_ms {
                prop_assert!(r.process.max_duration_ms.is_some_and(|m| m <= max));
            }
        }
    }

    #[test]
    fn resolve_is_pure(m in mode(), ctx in context()) {
        let sel = TurnPermissionProfileSelection::mode(m);
        let a = resolve(Some(&sel), &ctx, None);
        let b = resolve(Some(&sel), &ctx, None);
        match (a, b) {
            (Ok(a), Ok(b)) => prop_assert_eq!(a, b),
            (Err(a), Err(b)) => prop_assert_eq!(a.to_string(), b.to_string()),
            _ => prop_assert!(false, "resolve gave different outcomes for the same input"),
        }
    }
}
