//! Checker benches. Each figure is read against a baseline taken in the same run:
//! the file check against the bare `realpath` and `openat2` syscalls it needs, the URL check
//! against a bare `url::Url::parse`, and the shell check against the plain fast path.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{Criterion, criterion_group, criterion_main};
use turngate::check::{FilePolicyChecker, NetworkPolicyChecker, ProcessSpawnPlan, SpawnRequest};
use turngate::protocol::{
    BackendRequirement, EnvInheritance, FilesystemEntry, FsAccess, FsProvenance, NetworkMode,
    SandboxBackendKind, SandboxMode, TmpPolicy, TurnFilesystemSnapshot, TurnNetworkPolicySnapshot,
    TurnProcessPolicySnapshot, TurnSandboxSnapshot,
};
use turngate::{ActionKind, CompiledPolicy, Policy};

fn net() -> TurnNetworkPolicySnapshot {
    TurnNetworkPolicySnapshot {
        mode: NetworkMode::Restricted,
        allowed_domains: vec!["github.com".into(), "pypi.org".into(), "crates.io".into()],
        denied_domains: vec!["evil.com".into()],
        allow_localhost: false,
        allow_unix_sockets: false,
        allowed_tcp_ports: vec![],
    }
}

fn policy() -> CompiledPolicy {
    CompiledPolicy::new(Policy::default()).unwrap()
}

fn bench_file(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(tmp.path()).unwrap();
    std::fs::create_dir_all(ws.join("src/check")).unwrap();
    let file: PathBuf = ws.join("src/check/file.rs");
    std::fs::write(&file, "x").unwrap();
    let sandbox = TurnSandboxSnapshot {
        mode: SandboxMode::WorkspaceWrite,
        cwd: ws.clone(),
        filesystem: TurnFilesystemSnapshot {
            entries: vec![FilesystemEntry {
                path: ws.clone(),
                access: FsAccess::Write,
                provenance: FsProvenance::Workspace,
            }],
        },
        tmp: TmpPolicy::Isolated,
        network: net(),
        backend_requirement: BackendRequirement::Optional,
        backend_preference: SandboxBackendKind::None,
    };
    let policy = policy();
    let checker = FilePolicyChecker::new(&sandbox, &policy);
    let mut g = c.benchmark_group("file");
    g.bench_function("baseline_realpath", |b| {
        b.iter(|| std::fs::canonicalize(black_box(&file)).unwrap())
    });
    g.bench_function("baseline_openat2", |b| {
        b.iter(|| {
            turngate::check::file::open_beneath(&ws, black_box("src/check/file.rs".as_ref()), false)
                .unwrap()
        })
    });
    g.bench_function("policy_explain_only", |b| {
        b.iter(|| policy.explain_parts(ActionKind::FileRead, black_box("src/check/file.rs"), None))
    });
    g.bench_function("check_read", |b| {
        b.iter(|| checker.check(ActionKind::FileRead, black_box("src/check/file.rs"), None))
    });
    g.bench_function("check_write_new", |b| {
        b.iter(|| checker.check(ActionKind::FileWrite, black_box("src/check/new.rs"), None))
    });
    g.bench_function("open_read", |b| {
        b.iter(|| {
            checker
                .open_read(black_box("src/check/file.rs"), None)
                .unwrap()
        })
    });
    g.finish();
}

fn bench_net(c: &mut Criterion) {
    let net = net();
    let policy = policy();
    let checker = NetworkPolicyChecker::new(&net, &policy);
    let url = "https://api.github.com/repos/turngate/turngate/pulls?state=open";
    let mut g = c.benchmark_group("network");
    g.bench_function("baseline_url_parse", |b| {
        b.iter(|| url::Url::parse(black_box(url)).unwrap())
    });
    g.bench_function("check_url", |b| {
        b.iter(|| checker.check(black_box(url), None))
    });
    g.bench_function("check_ip_spelling", |b| {
        b.iter(|| checker.check(black_box("http://0x7f.1:8080/"), None))
    });
    g.finish();
}

fn bench_shell(c: &mut Criterion) {
    let policy = policy();
    let plain = "cargo test -p turngate --lib";
    let compound = "cd core && cargo build --release 2>&1 | grep -v warning && sudo -u ci timeout 60 bash -lc 'cargo test -q' || echo failed";
    let mut g = c.benchmark_group("shell");
    g.bench_function("parse_plain_fast_path", |b| {
        b.iter(|| turngate::shell::parse_command_line(black_box(plain)))
    });
    g.bench_function("parse_compound", |b| {
        b.iter(|| turngate::shell::parse_command_line(black_box(compound)))
    });
    g.bench_function("explain_compound", |b| {
        b.iter(|| policy.explain_parts(ActionKind::ShellCommand, black_box(compound), None))
    });
    let tmp = tempfile::tempdir().unwrap();
    let sandbox = TurnSandboxSnapshot {
        mode: SandboxMode::Unrestricted,
        cwd: tmp.path().to_path_buf(),
        filesystem: TurnFilesystemSnapshot::default(),
        tmp: TmpPolicy::Host,
        network: net(),
        backend_requirement: BackendRequirement::Optional,
        backend_preference: SandboxBackendKind::None,
    };
    let process = TurnProcessPolicySnapshot {
        shell_enabled: true,
        inherit_stdin: false,
        inherit_session: false,
        env: EnvInheritance::Filtered,
        max_duration_ms: Some(120_000),
        denied_commands: vec!["curl".into()],
        allowed_command_families: vec![],
    };
    let env: Vec<_> = std::env::vars_os().collect();
    g.bench_function("spawn_plan_compound", |b| {
        b.iter(|| {
            ProcessSpawnPlan::build(
                &sandbox,
                &process,
                &policy,
                SpawnRequest {
                    command_line: black_box(compound),
                    env: env.clone(),
                    ..Default::default()
                },
            )
        })
    });
    g.finish();
}

criterion_group!(benches, bench_file, bench_net, bench_shell);
criterion_main!(benches);
