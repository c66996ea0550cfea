//! Sandboxed spawn of `/bin/true` against a plain spawn of it, in the same run (budget: the
//! sandboxed one at most 1.5x the plain one; docs/performance.md). Both go through the same runner, so the
//! ratio is the sandbox's cost; a bare `std::process::Command` is measured as the floor.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use turngate::protocol::{
    BackendRequirement, FsAccess, NetworkMode, SandboxBackendKind, SandboxMode,
    TurnNetworkPolicySnapshot,
};
use turngate::sandbox::{FsGrant, ProcessRequest, ProcessRunner, SandboxSpec, TmpSpec};

fn spec(workspace: &std::path::Path, tmp: &std::path::Path) -> SandboxSpec {
    SandboxSpec {
        mode: SandboxMode::WorkspaceWrite,
        roots: vec![FsGrant {
            path: workspace.to_path_buf(),
            access: FsAccess::Write,
        }],
        system_roots: true,
        tmp: TmpSpec::Isolated(Some(tmp.to_path_buf())),
        network: TurnNetworkPolicySnapshot {
            mode: NetworkMode::Disabled,
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

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let workspace = dir.path().join("w");
    let tmp = dir.path().join("t");
    std::fs::create_dir_all(&workspace).expect("workspace");
    std::fs::create_dir_all(&tmp).expect("tmp");
    let runner = ProcessRunner::native();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let plain = ProcessRequest::new(["/bin/true"], &workspace);
    let sandboxed = plain.clone().sandbox(spec(&workspace, &tmp));
    // Fail loudly rather than measure an unconfined run.
    let probe = rt
        .block_on(runner.run(sandboxed.clone()))
        .expect("sandboxed run");
    let report = probe.sandbox.expect("report");
    assert_ne!(
        report.status,
        turngate::sandbox::EnforcementLevel::Unavailable,
        "no sandbox: {}",
        report.detail
    );

    let mut g = c.benchmark_group("spawn_true");
    g.sample_size(60);
    g.measurement_time(Duration::from_secs(6));
    g.bench_function("std_command", |b| {
        b.iter(|| {
            std::process::Command::new("/bin/true")
                .status()
                .expect("status")
        })
    });
    g.bench_function("runner_plain", |b| {
        b.iter(|| rt.block_on(runner.run(plain.clone())).expect("run"))
    });
    g.bench_function("runner_sandboxed", |b| {
        b.iter(|| rt.block_on(runner.run(sandboxed.clone())).expect("run"))
    });
    g.finish();

    // The ratio, measured interleaved so machine noise hits both sides alike.
    let rounds = 200;
    let (mut plain_total, mut sandboxed_total) = (Duration::ZERO, Duration::ZERO);
    for _ in 0..rounds {
        let t = Instant::now();
        rt.block_on(runner.run(plain.clone())).expect("run");
        plain_total += t.elapsed();
        let t = Instant::now();
        rt.block_on(runner.run(sandboxed.clone())).expect("run");
        sandboxed_total += t.elapsed();
    }
    let ratio = sandboxed_total.as_secs_f64() / plain_total.as_secs_f64();
    println!(
        "spawn /bin/true: plain {:.3} ms, sandboxed {:.3} ms, ratio {ratio:.2}x (budget 1.50x)",
        plain_total.as_secs_f64() * 1e3 / f64::from(rounds),
        sandboxed_total.as_secs_f64() * 1e3 / f64::from(rounds),
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
