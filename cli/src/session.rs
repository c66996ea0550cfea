//! `run`, `audit` and `approvals`: the commands that use the durable store and the gate.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use turngate::ActionKind;
use turngate::approval::{
    ApprovalResolution, ApproveAll, Approver, Decision, DeferAll, DenyAll, StdinApprover,
};
use turngate::audit::{AuditStore, SqliteAuditStore, StoredResolution};
use turngate::gate::{Gate, SpawnResult, ToolInvocation};
use turngate::reduce::{ClientState, ReducerInput, reduce_all};
use turngate::sandbox::ProcessOutcome;

use crate::CliError;

/// Exit status when the command is denied (the shell's "cannot execute").
pub const EXIT_DENIED: u8 = 126;

/// The default per-user store: `$XDG_STATE_HOME/turngate/audit.db`, else
/// `~/.local/state/turngate/audit.db`.
pub fn default_store() -> Result<PathBuf, CliError> {
    let base = match std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => {
            let home = std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .ok_or_else(|| CliError("no HOME or XDG_STATE_HOME; pass --store".to_owned()))?;
            PathBuf::from(home).join(".local/state")
        }
    };
    Ok(base.join("turngate").join("audit.db"))
}

/// Open the store at `path` (or the default), creating its directory: for `run`, which
/// records a new turn.
pub fn open_store(path: Option<&PathBuf>) -> Result<Arc<SqliteAuditStore>, CliError> {
    let path = store_path(path)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| CliError(format!("store directory {}: {e}", dir.display())))?;
    }
    SqliteAuditStore::open(&path)
        .map(Arc::new)
        .map_err(|e| CliError(format!("store {}: {e}", path.display())))
}

/// Open an existing store at `path` (or the default) without creating anything: for the
/// commands that read or resolve recorded history (`audit`, `approvals ...`), where a mistyped
/// path must be an error naming it, not an empty history.
pub fn open_existing_store(path: Option<&PathBuf>) -> Result<Arc<SqliteAuditStore>, CliError> {
    let path = store_path(path)?;
    SqliteAuditStore::open_existing(&path)
        .map(Arc::new)
        .map_err(|e| CliError(e.to_string()))
}

pub fn store_path(path: Option<&PathBuf>) -> Result<PathBuf, CliError> {
    match path {
        Some(p) => Ok(p.clone()),
        None => default_store(),
    }
}

/// Which approver answers asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ApproverChoice {
    /// Prompt on the terminal; anything but `y` denies.
    Tty,
    /// Approve every ask (for scripts).
    Allow,
    /// Deny every ask (the default without a terminal).
    Deny,
    /// Persist the request and wait until another process resolves it.
    Defer,
}

pub fn approver(choice: Option<ApproverChoice>) -> Arc<dyn Approver> {
    let choice = choice.unwrap_or(if std::io::stdin().is_terminal() {
        ApproverChoice::Tty
    } else {
        ApproverChoice::Deny
    });
    match choice {
        ApproverChoice::Tty => Arc::new(StdinApprover::new()),
        ApproverChoice::Allow => Arc::new(ApproveAll),
        ApproverChoice::Deny => Arc::new(DenyAll),
        ApproverChoice::Defer => Arc::new(DeferAll),
    }
}

/// Quote argv into one command line the shell parser reads back word for word.
pub fn command_line(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            let plain = !a.is_empty()
                && a.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_./-=:,+@%^".contains(&b));
            if plain {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError(format!("async runtime: {e}")))
}

pub fn finish(outcome: &ProcessOutcome, report: Option<&Path>) -> Result<u8, CliError> {
    use std::io::Write;
    if let (Some(path), Some(sandbox)) = (report, &outcome.sandbox) {
        let json = serde_json::to_string_pretty(sandbox)
            .map_err(|e| CliError(format!("sandbox report: {e}")))?;
        std::fs::write(path, json + "\n").map_err(|e| {
            CliError(format!(
                "could not write the sandbox report to {}: {e}",
                path.display()
            ))
        })?;
    }
    let _ = std::io::stdout().write_all(&outcome.stdout);
    let _ = std::io::stderr().write_all(&outcome.stderr);
    if outcome.stdout_truncated || outcome.stderr_truncated {
        eprintln!("turngate: output was truncated at the capture limit");
    }
    if outcome.timed_out {
        eprintln!("turngate: the command timed out; its process tree was killed");
    }
    if let Some(report) = &outcome.sandbox {
        for q in &report.quarantined {
            match &q.moved_to {
                Some(to) => eprintln!(
                    "turngate: the command created the protected {} {}; quarantined to {}",
                    q.kind,
                    q.path.display(),
                    to.display()
                ),
                None => eprintln!(
                    "turngate: the command created the protected {} {}; removed (it could not \
                     be moved)",
                    q.kind,
                    q.path.display()
                ),
            }
        }
        for (area, reason) in report.degradation_pairs() {
            eprintln!("turngate: sandbox degraded ({area:?}): {reason}");
        }
        // A stricter network than asked for (no egress proxy here) is said too: the command's
        // connections fail for a reason it cannot see.
        for n in report
            .narrowings
            .iter()
            .filter(|n| n.area == turngate::sandbox::DegradationArea::Network)
        {
            eprintln!("turngate: sandbox network narrowed: {}", n.reason);
        }
    }
    Ok(match (outcome.exit_code, outcome.signal) {
        (Some(code), _) => u8::try_from(code).unwrap_or(1),
        (None, Some(signal)) => 128u8.saturating_add(u8::try_from(signal).unwrap_or(0)),
        (None, None) => 1,
    })
}

pub fn denied(reason: &str) -> u8 {
    eprintln!(
        "turngate: denied: {}",
        turngate::display::for_terminal(reason)
    );
    EXIT_DENIED
}

/// `turngate run`: authorize the command through the gate and run it under the sandbox;
/// `report` receives the sandbox report as JSON.
pub fn run(
    gate: &Gate,
    store: &dyn AuditStore,
    argv: &[String],
    report: Option<&Path>,
    review: Option<&turngate::changes::ChangeStore>,
) -> Result<u8, CliError> {
    let line = command_line(argv);
    let inv = ToolInvocation::new(ActionKind::ShellCommand, &line).with_tool("turngate run");
    let rt = runtime()?;
    if let Some(changes) = review {
        let reviewed = rt.block_on(gate.spawn_reviewed(&inv, changes))?;
        return finish_reviewed(reviewed, report);
    }
    match rt.block_on(gate.spawn(&inv))? {
        SpawnResult::Ran(outcome) => finish(&outcome, report),
        SpawnResult::Denied(denial) => Ok(denied(&denial.reason)),
        SpawnResult::Deferred(request) => {
            eprintln!(
                "turngate: approval request {} is pending: {}\nturngate: resolve it from another terminal with `turngate approvals resolve {} allow_once` (or deny); waiting...",
                request.id, line, request.id
            );
            loop {
                let stored = store
                    .approval(&request.id)
                    .map_err(CliError::from)?
                    .ok_or_else(|| CliError(format!("approval request {} vanished", request.id)))?;
                if stored.resolution.is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            resume_and_run(gate, &rt, &request.id, report)
        }
    }
}

/// The exit status of a reviewed run, telling the person where its change set is.
fn finish_reviewed(
    reviewed: turngate::gate::Reviewed,
    report: Option<&Path>,
) -> Result<u8, CliError> {
    match reviewed.result {
        SpawnResult::Ran(outcome) => {
            let code = finish(&outcome, report)?;
            if let Some(set) = &reviewed.change_set {
                eprintln!(
                    "turngate: change set {} ({}); the workspace is unchanged. Review it \
                     with `turngate changes show {}`, then `turngate changes apply {}` or \
                     `discard {}`",
                    set.id,
                    set.summary(),
                    set.id,
                    set.id,
                    set.id
                );
            }
            Ok(code)
        }
        SpawnResult::Denied(denial) => Ok(denied(&denial.reason)),
        SpawnResult::Deferred(request) => Err(CliError(format!(
            "approval request {} is pending; a reviewed run does not wait for it: resolve \
             it, then `turngate approvals resume {}` runs it with review",
            request.id, request.id
        ))),
    }
}

fn resume_and_run(
    gate: &Gate,
    rt: &tokio::runtime::Runtime,
    request_id: &str,
    report: Option<&Path>,
) -> Result<u8, CliError> {
    // The stored action runs under the stored snapshot (narrowed by this gate's), once.
    match rt.block_on(gate.resume_spawn(request_id, Decision::approve()))? {
        SpawnResult::Ran(outcome) => finish(&outcome, report),
        SpawnResult::Denied(denial) => Ok(denied(&denial.reason)),
        SpawnResult::Deferred(request) => Err(CliError(format!(
            "approval request {} is still pending",
            request.id
        ))),
    }
}

/// `turngate approvals resume ID`: run a deferred command whose waiting process is gone,
/// exactly as shown, re-checked, under the snapshot it was requested under. An unresolved
/// request is approved by this call; an `allow_once` approval runs once. A request deferred
/// from `run --review` runs with review, its change set beside the store at `store_path`.
pub fn resume(gate: &Gate, request_id: &str, store_path: &Path) -> Result<u8, CliError> {
    let rt = runtime()?;
    if gate.requires_review(request_id)? {
        let changes = turngate::changes::ChangeStore::beside(store_path);
        let reviewed =
            rt.block_on(gate.resume_spawn_reviewed(request_id, Decision::approve(), &changes))?;
        return finish_reviewed(reviewed, None);
    }
    resume_and_run(gate, &rt, request_id, None)
}

/// `turngate approvals list`.
pub fn list(store: &dyn AuditStore, json: bool) -> Result<u8, CliError> {
    let pending = store.pending_approvals()?;
    if json {
        println!("{}", serde_json::to_string(&pending)?);
    } else if pending.is_empty() {
        println!("no pending approvals");
    } else {
        for p in &pending {
            println!(
                "{}  turn={}  {} {}",
                turngate::display::for_terminal(&p.request.id),
                turngate::display::for_terminal(&p.request.turn_id),
                p.action.kind,
                turngate::display::for_terminal(&p.action.target)
            );
        }
    }
    Ok(0)
}

/// `turngate approvals resolve ID RESOLUTION`: idempotent, the first resolution wins. `note`
/// (the reviewer's words) and `by` (who) are recorded with it and appear in the audit rows.
pub fn resolve(
    store: &dyn AuditStore,
    request_id: &str,
    resolution: &str,
    note: Option<&str>,
    by: Option<&str>,
) -> Result<u8, CliError> {
    let resolution: ApprovalResolution = resolution.parse()?;
    if store.approval(request_id)?.is_none() {
        return Err(CliError(format!(
            "no approval request `{request_id}` in the store"
        )));
    }
    let (recorded, applied) = store.resolve(
        request_id,
        StoredResolution {
            resolution,
            reason: "responder".to_owned(),
            message: note.map(str::to_owned),
            decider: Some(by.map_or_else(|| "approver".to_owned(), |b| format!("person:{b}"))),
        },
    )?;
    if applied {
        println!("{request_id}: {}", recorded.resolution.as_str());
    } else {
        println!(
            "{request_id}: already resolved as {} (unchanged)",
            recorded.resolution.as_str()
        );
    }
    Ok(0)
}

/// `turngate audit`: the timeline rows of a turn (default: the latest), through the shared
/// reducer.
pub fn audit(store: &dyn AuditStore, turn: Option<&str>, json: bool) -> Result<u8, CliError> {
    let turn = match turn {
        Some(t) => t.to_owned(),
        None => match store.turns()?.pop() {
            Some(t) => t,
            None => {
                println!("no turns recorded");
                return Ok(0);
            }
        },
    };
    let inputs: Vec<ReducerInput> = store
        .replay(&turn)?
        .into_iter()
        .map(ReducerInput::AuditEvent)
        .collect();
    let state = reduce_all(ClientState::default(), &inputs);
    if json {
        println!("{}", serde_json::to_string(&state.timeline)?);
    } else {
        println!("turn {turn}");
        for row in &state.timeline {
            match &row.timestamp {
                Some(at) => println!("  #{:<3} {at}  {}", row.seq, row.title),
                None => println!("  #{:<3} {}", row.seq, row.title),
            }
        }
    }
    Ok(0)
}
