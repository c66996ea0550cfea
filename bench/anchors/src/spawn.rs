//! Spawning `/bin/true`: turngate's sandboxed spawn against a plain spawn, bubblewrap and
//! Anthropic's sandbox-runtime (`srt`), interleaved round by round. An anchor whose tool is
//! missing or does not run here is skipped with the reason.
//!
//! turngate's sandboxed spawn is the real path: a snapshot resolved for an
//! `auto_accept_edits` turn on a fresh workspace, turned into the runner's spec exactly as the
//! gate does, so whatever layers the sandbox applies are in the figure.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use turngate::PermissionMode;
use turngate::protocol::{TurnExecutionSecuritySnapshot, TurnPermissionProfileSelection};
use turngate::sandbox::{ProcessRequest, ProcessRunner, SandboxReport, SandboxSpec};
use turngate::snapshot::{ResolveContext, resolve};

use crate::timing::{Contestant, Series, interleave};

/// Where the tools under comparison are; an `Err` skips that row with the reason it holds.
#[derive(Debug)]
pub struct Tools {
    /// bubblewrap, or why it is missing.
    pub bwrap: Result<PathBuf, String>,
    /// sandbox-runtime's `srt`, or why it is missing.
    pub srt: Result<PathBuf, String>,
    /// turngate's CLI, or why it is missing.
    pub turngate: Result<PathBuf, String>,
}

pub(crate) fn snapshot(workspace: &Path) -> TurnExecutionSecuritySnapshot {
    let context = ResolveContext::new(workspace, turngate::probe::probe_platform());
    let selection = TurnPermissionProfileSelection {
        mode: Some(PermissionMode::AutoAcceptEdits),
        source: None,
        policy: None,
    };
    resolve(Some(&selection), &context, None).expect("resolve the turn's snapshot")
}

/// Run `cmd` once; `Err` says why it cannot be measured.
fn works(cmd: &mut Command) -> Result<(), String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot start: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "exited {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn command(argv: &[OsString], cwd: &Path) -> Command {
    let mut c = Command::new(&argv[0]);
    c.args(&argv[1..]).current_dir(cwd);
    c
}

/// Keep `argv` as a whole-process contestant if it runs here, or skip it with the reason.
fn usable(
    name: &'static str,
    argv: Vec<OsString>,
    cwd: &Path,
    wholes: &mut Vec<(&'static str, Vec<OsString>)>,
    skipped: &mut Vec<(&'static str, String)>,
) {
    match works(&mut command(&argv, cwd)) {
        Ok(()) => wholes.push((name, argv)),
        Err(why) => skipped.push((name, format!("{name} does not run here: {why}"))),
    }
}

fn whole<'a>(name: &str, argv: &'a [OsString], cwd: &'a Path) -> Contestant<'a> {
    Contestant::new(name, move || status(&mut quiet(command(argv, cwd))))
}

fn quiet(mut cmd: Command) -> Command {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd
}

fn status(cmd: &mut Command) -> bool {
    cmd.status().expect("spawn").success()
}

/// Measure; returns the JSON rows.
pub fn run(rounds: usize, srt_rounds: usize, tools: &Tools) -> serde_json::Value {
    let dir = tempfile::tempdir().expect("tempdir");
    let workspace = dir.path().join("ws");
    std::fs::create_dir_all(&workspace).expect("workspace");
    let workspace = workspace.canonicalize().expect("canonical workspace");
    let snap = snapshot(&workspace);
    let runner = ProcessRunner::native();
    // The turn-long tmp dir's row has a runner of its own: a runner caches the preparation of
    // the last spec it spawned (a gate's turn spawns under one spec), so two specs interleaved
    // on one runner would re-prepare on every spawn, a cost no gated turn pays.
    let turn_tmp_runner = ProcessRunner::native();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let plain = ProcessRequest::new(["/bin/true"], &workspace);
    let sandboxed = plain
        .clone()
        .sandbox(SandboxSpec::from_snapshot(&snap.sandbox));
    // The same spec naming a turn-long tmp dir instead of one per run: the runner then reuses
    // its parent-side preparation across spawns (a spec with a per-run tmp dir is never
    // cached), which is what the spawn bench's hand-built spec measures.
    let turn_tmp = dir.path().join("turn-tmp");
    std::fs::create_dir_all(&turn_tmp).expect("turn tmp");
    let sandboxed_turn_tmp = plain
        .clone()
        .sandbox(SandboxSpec::from_snapshot(&snap.sandbox).with_tmp_dir(&turn_tmp));
    // Fail loudly rather than measure an unconfined run.
    let probe = rt
        .block_on(runner.run(sandboxed.clone()))
        .expect("sandboxed run");
    assert_eq!(probe.exit_code, Some(0), "sandboxed /bin/true failed");
    let report: SandboxReport = probe.sandbox.expect("a sandbox report");
    assert_ne!(
        report.status,
        turngate::sandbox::EnforcementLevel::Unavailable,
        "no sandbox: {}",
        report.detail
    );

    let mut skipped = Vec::new();
    let in_process = || -> Vec<Contestant<'_>> {
        vec![
            Contestant::new("plain_command", || {
                status(&mut quiet(Command::new("/bin/true")))
            }),
            Contestant::new("runner_plain", || {
                rt.block_on(runner.run(plain.clone()))
                    .expect("run")
                    .exit_code
            }),
            Contestant::new("runner_sandboxed", || {
                rt.block_on(runner.run(sandboxed.clone()))
                    .expect("run")
                    .exit_code
            }),
            Contestant::new("runner_sandboxed_turn_tmp", || {
                rt.block_on(turn_tmp_runner.run(sandboxed_turn_tmp.clone()))
                    .expect("run")
                    .exit_code
            }),
        ]
    };
    let mut wholes: Vec<(&'static str, Vec<OsString>)> = Vec::new();

    let bwrap_args = ["--unshare-all", "--ro-bind", "/", "/", "true"];
    match &tools.bwrap {
        Ok(bwrap) => {
            let argv = std::iter::once(bwrap.as_os_str().to_owned())
                .chain(bwrap_args.iter().map(OsString::from))
                .collect();
            usable("bwrap", argv, &workspace, &mut wholes, &mut skipped);
        }
        Err(why) => skipped.push(("bwrap", why.clone())),
    }

    // sandbox-runtime with the turn's shape: writes to the workspace only, no network.
    let srt_settings = dir.path().join("srt-settings.json");
    std::fs::write(
        &srt_settings,
        serde_json::json!({
            "filesystem": { "denyRead": [], "allowWrite": [workspace], "denyWrite": [] },
            "network": { "allowedDomains": [], "deniedDomains": [] },
        })
        .to_string(),
    )
    .expect("srt settings");
    match &tools.srt {
        Ok(srt) => {
            let argv = vec![
                srt.as_os_str().to_owned(),
                "--settings".into(),
                srt_settings.as_os_str().to_owned(),
                "/bin/true".into(),
            ];
            usable("srt", argv, &workspace, &mut wholes, &mut skipped);
        }
        Err(why) => skipped.push(("srt", why.clone())),
    }

    // The whole CLI: resolve, check the command line (the approver answers the ask), audit
    // it in a store, spawn sandboxed, record the exit.
    let store = dir.path().join("audit.db");
    match &tools.turngate {
        Ok(tg) => {
            let mut argv: Vec<OsString> = vec![tg.as_os_str().to_owned()];
            argv.extend(
                [
                    "run",
                    "--mode",
                    "auto_accept_edits",
                    "--approver",
                    "allow",
                    "--workspace",
                ]
                .map(OsString::from),
            );
            argv.push(workspace.as_os_str().to_owned());
            argv.push("--store".into());
            argv.push(store.as_os_str().to_owned());
            argv.extend(["--", "/bin/true"].map(OsString::from));
            usable("turngate_run", argv, &workspace, &mut wholes, &mut skipped);
        }
        Err(why) => skipped.push(("turngate_run", why.clone())),
    }

    // One iteration of each per round, so each pair is measured moments apart. The runner's
    // own pair gets a pass of its own first: bwrap's namespaces and `turngate run`'s store
    // writes between spawns slow every spawn after them. srt (Node's start-up) is slow enough
    // to get a last pass with fewer rounds, beside fresh copies of what it is compared with.
    let mut own = in_process();
    let mut passes = vec![interleave(&mut own, rounds, Duration::ZERO)];
    drop(own);
    let mut first = in_process();
    first.retain(|c| c.name == "plain_command" || c.name == "runner_sandboxed");
    first.extend(
        wholes
            .iter()
            .filter(|(name, _)| *name != "srt")
            .map(|(name, argv)| whole(name, argv, &workspace)),
    );
    if wholes.iter().any(|(name, _)| *name != "srt") {
        passes.push(interleave(&mut first, rounds, Duration::ZERO));
    }
    drop(first);
    if wholes.iter().any(|(name, _)| *name == "srt") {
        let mut second = in_process();
        second.retain(|c| c.name == "plain_command" || c.name == "runner_sandboxed");
        second.extend(
            wholes
                .iter()
                .map(|(name, argv)| whole(name, argv, &workspace)),
        );
        passes.push(interleave(&mut second, srt_rounds, Duration::ZERO));
    }
    let get = |name: &str| passes.iter().flatten().find(|s| s.name == name);
    let series: Vec<&Series> = passes
        .iter()
        .flatten()
        .filter(|s| get(&s.name).is_some_and(|first| std::ptr::eq(first, *s)))
        .collect();
    let figures: serde_json::Map<String, serde_json::Value> = series
        .iter()
        .map(|s| {
            (
                s.name.clone(),
                serde_json::json!({ "rounds": s.ns.len(), "ns": s.spread().json() }),
            )
        })
        .collect();
    // A ratio is taken within one pass, round by round.
    let ratio = |a: &str, b: &str| -> Option<serde_json::Value> {
        let pass = passes
            .iter()
            .find(|p| p.iter().any(|s| s.name == a) && p.iter().any(|s| s.name == b))?;
        let find = |n: &str| pass.iter().find(|s| s.name == n);
        let (a_s, b_s): (&Series, &Series) = (find(a)?, find(b)?);
        let rounds = a_s.ns.len();
        Some(
            serde_json::json!({ "a": a, "b": b, "rounds": rounds, "ratio": a_s.ratio_to(b_s).json() }),
        )
    };
    let pairs = [
        ("runner_sandboxed", "runner_plain"),
        ("runner_sandboxed_turn_tmp", "runner_plain"),
        ("runner_sandboxed", "plain_command"),
        ("runner_sandboxed", "bwrap"),
        ("runner_sandboxed", "srt"),
        ("turngate_run", "plain_command"),
        ("turngate_run", "bwrap"),
        ("turngate_run", "srt"),
        ("bwrap", "plain_command"),
        ("srt", "plain_command"),
    ];
    let ratios: Vec<serde_json::Value> = pairs.iter().filter_map(|(a, b)| ratio(a, b)).collect();
    serde_json::json!({
        "rounds": rounds,
        "srt_rounds": srt_rounds,
        "sandbox": {
            "backend": format!("{:?}", report.backend),
            "status": format!("{:?}", report.status),
            "detail": report.detail,
            "degradations": report.degradations.iter().map(|d| format!("{d:?}")).collect::<Vec<_>>(),
            "namespaces": report.namespaces,
        },
        "bwrap_args": bwrap_args,
        "figures": figures,
        "ratios": ratios,
        "skipped": skipped.iter().map(|(n, why)| serde_json::json!({"name": n, "reason": why})).collect::<Vec<_>>(),
    })
}
