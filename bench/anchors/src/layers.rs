//! Where a sandboxed spawn's time goes: the gate's spec spawning `/bin/true`, with the
//! namespace layer's namespaces added one by one (the backend told which ones this machine
//! has, the probe skipped), against a plain spawn by the same runner, interleaved round by
//! round. Each row's ratio is the median of the per-round ratios to `runner_plain`.

use std::sync::Arc;
use std::time::Duration;

use turngate::sandbox::{
    LinuxNonoBackend, NamespaceSupport, ProcessRequest, ProcessRunner, SandboxSpec,
};

use crate::spawn::snapshot;
use crate::timing::{Contestant, interleave};

/// The layers, cumulatively.
fn steps() -> Vec<(&'static str, NamespaceSupport)> {
    let none = NamespaceSupport::none(0);
    let user = NamespaceSupport { user: true, ..none };
    let mount = NamespaceSupport {
        mount: true,
        ..user
    };
    let pid = NamespaceSupport { pid: true, ..mount };
    let uts_ipc = NamespaceSupport {
        uts: true,
        ipc: true,
        ..pid
    };
    vec![
        ("landlock_seccomp", none),
        ("user", user),
        ("mount", mount),
        ("pid", pid),
        ("uts_ipc", uts_ipc),
        ("network_all", NamespaceSupport::ALL),
    ]
}

/// Measure; returns the JSON rows.
pub fn run(rounds: usize, only: Option<&str>) -> serde_json::Value {
    let dir = tempfile::tempdir().expect("tempdir");
    let workspace = dir.path().join("ws");
    std::fs::create_dir_all(&workspace).expect("workspace");
    let workspace = workspace.canonicalize().expect("canonical workspace");
    let snap = snapshot(&workspace);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let plain_runner = ProcessRunner::native();
    let plain = ProcessRequest::new(["/bin/true"], &workspace);
    let sandboxed = plain
        .clone()
        .sandbox(SandboxSpec::from_snapshot(&snap.sandbox));
    let runners: Vec<(&'static str, ProcessRunner)> = steps()
        .into_iter()
        .map(|(name, support)| {
            let backend = LinuxNonoBackend::with_namespace_support(support);
            (name, ProcessRunner::new(Arc::new(backend)))
        })
        .chain(std::iter::once(("native", ProcessRunner::native())))
        .collect();
    for (name, runner) in &runners {
        let out = rt
            .block_on(runner.run(sandboxed.clone()))
            .expect("sandboxed run");
        assert_eq!(out.exit_code, Some(0), "{name}: /bin/true failed");
    }
    let mut contestants = vec![Contestant::new("runner_plain", || {
        rt.block_on(plain_runner.run(plain.clone()))
            .expect("run")
            .exit_code
    })];
    for (name, runner) in &runners {
        let request = &sandboxed;
        let rt = &rt;
        contestants.push(Contestant::new(*name, move || {
            rt.block_on(runner.run(request.clone()))
                .expect("run")
                .exit_code
        }));
    }
    // `--only NAME`: just that contestant, `rounds` times, no timing (to profile it from
    // outside: `perf stat`, `strace -c`).
    if let Some(only) = only {
        let c = contestants
            .iter_mut()
            .find(|c| c.name == only)
            .expect("--only: no such row");
        for _ in 0..rounds {
            (c.run)();
        }
        return serde_json::json!({ "only": only, "runs": rounds });
    }
    let series = interleave(&mut contestants, rounds, Duration::ZERO);
    let base = &series[0];
    let rows: Vec<serde_json::Value> = series
        .iter()
        .map(|s| {
            serde_json::json!({
                "name": s.name,
                "ns": s.spread().json(),
                "ratio_to_plain": s.ratio_to(base).json(),
            })
        })
        .collect();
    serde_json::json!({ "rounds": rounds, "layers": rows })
}
