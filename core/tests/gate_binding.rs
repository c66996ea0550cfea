//! What runs is what was decided (DESIGN §11): each test is an attack on the gate's binding of
//! a decision to what runs: the wrong kind, the second use, the other snapshot, the other turn,
//! the modified action, the missing record.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use turngate::{Action, ActionKind};

use turngate::approval::{
    ApprovalContext, ApprovalResolution, ApproveAll, Approver, Decision, DecisionFuture, DeferAll,
    DenyAll,
};
use turngate::audit::{
    AuditEventKind, AuditStore, Consumed, Redactor, SqliteAuditStore, StoredResolution,
};
use turngate::gate::{Authorization, Gate, GateError, SpawnResult, ToolInvocation};
use turngate::protocol::{TurnExecutionSecuritySnapshot, TurnPermissionProfileSelection};
use turngate::snapshot::{ResolveContext, resolve};
use turngate::{PermissionMode, Policy};

struct Turn {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
    store: Arc<SqliteAuditStore>,
    db: PathBuf,
}

fn turn() -> Turn {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let db = dir.path().join("audit.db");
    Turn {
        ws: ws.canonicalize().unwrap(),
        outside: outside.canonicalize().unwrap(),
        store: Arc::new(SqliteAuditStore::open(&db).unwrap()),
        db,
        _dir: dir,
    }
}

fn snapshot(ws: &Path, mode: Option<PermissionMode>) -> TurnExecutionSecuritySnapshot {
    snapshot_with(ws, mode, None)
}

fn snapshot_with(
    ws: &Path,
    mode: Option<PermissionMode>,
    policy: Option<Policy>,
) -> TurnExecutionSecuritySnapshot {
    let context = ResolveContext::new(ws, turngate::probe::probe_platform());
    let selection = TurnPermissionProfileSelection {
        mode,
        source: None,
        policy,
    };
    resolve(Some(&selection), &context, None).unwrap()
}

fn gate(t: &Turn, turn_id: &str, mode: PermissionMode, approver: Arc<dyn Approver>) -> Gate {
    Gate::new(
        turn_id,
        snapshot(&t.ws, Some(mode)),
        t.store.clone(),
        approver,
    )
    .unwrap()
}

fn shell(line: &str) -> ToolInvocation {
    ToolInvocation::new(ActionKind::ShellCommand, line).with_tool("bash")
}

/// Defer `line` in an `auto_accept_edits` turn (shell commands ask there) and return the id.
async fn deferred(t: &Turn, turn_id: &str, line: &str) -> String {
    let g = gate(
        t,
        turn_id,
        PermissionMode::AutoAcceptEdits,
        Arc::new(DeferAll),
    );
    match g.spawn(&shell(line)).await.unwrap() {
        SpawnResult::Deferred(r) => r.id,
        other => panic!("expected a deferral, got {other:?}"),
    }
}

fn ran(result: SpawnResult) -> Box<turngate::sandbox::ProcessOutcome> {
    match result {
        SpawnResult::Ran(o) => o,
        other => panic!("expected the command to run, got {other:?}"),
    }
}

fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |s| s.lines().count())
}

#[tokio::test]
async fn spawn_refuses_every_kind_but_shell_command_before_anything_runs() {
    let t = turn();
    let script = t.ws.join("run.sh");
    let marker = t.ws.join("ran.txt");
    std::fs::write(
        &script,
        format!("#!/bin/sh\necho x > {}\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let g = gate(&t, "t", PermissionMode::FullAccess, Arc::new(ApproveAll));
    for kind in [
        ActionKind::FileRead,
        ActionKind::FileWrite,
        ActionKind::Network,
        ActionKind::McpRead,
    ] {
        for target in ["./run.sh", script.to_str().unwrap()] {
            let err = g
                .spawn(&ToolInvocation::new(kind, target))
                .await
                .unwrap_err();
            assert!(
                matches!(err, GateError::WrongKind { expected: ActionKind::ShellCommand, got } if got == kind),
                "{kind}: {err}"
            );
        }
    }
    assert!(
        !marker.exists(),
        "a non-shell authorization executed the script"
    );
    // Nothing was decided either: only the profile row is in the audit log.
    let rows = t.store.replay("t").unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
}

/// Approves with a modified action of its own choosing.
struct Modifies(Action);

impl Approver for Modifies {
    fn decide<'a>(&'a self, _ctx: &'a ApprovalContext) -> DecisionFuture<'a> {
        let action = self.0.clone();
        Box::pin(async move {
            Decision::Approve {
                modified: Some(action),
                remember: Vec::new(),
            }
        })
    }
}

#[tokio::test]
async fn a_modified_action_of_another_kind_never_starts_a_process() {
    let t = turn();
    let marker = t.ws.join("ran.txt");
    let line = format!("touch {}", marker.display());
    let approver = Modifies(Action::new(ActionKind::FileRead, line.clone()));
    let g = gate(&t, "t", PermissionMode::AutoAcceptEdits, Arc::new(approver));
    match g.spawn(&shell(&line)).await.unwrap() {
        SpawnResult::Denied(d) => assert!(d.reason.contains("not a shell command"), "{}", d.reason),
        other => panic!("expected a denial, got {other:?}"),
    }
    assert!(!marker.exists());
}

#[tokio::test]
async fn a_modified_shell_action_runs_instead_of_the_original() {
    let t = turn();
    let asked = t.ws.join("asked.txt");
    let instead = t.ws.join("instead.txt");
    let approver = Modifies(Action::new(
        ActionKind::ShellCommand,
        format!("touch {}", instead.display()),
    ));
    let g = gate(&t, "t", PermissionMode::AutoAcceptEdits, Arc::new(approver));
    let outcome = ran(g
        .spawn(&shell(&format!("touch {}", asked.display())))
        .await
        .unwrap());
    assert_eq!(outcome.exit_code, Some(0));
    assert!(instead.exists() && !asked.exists());
}

#[tokio::test]
async fn an_allow_once_approval_runs_its_command_once() {
    let t = turn();
    let log = t.ws.join("log.txt");
    let id = deferred(&t, "t", &format!("sh -c 'echo once >> {}'", log.display())).await;
    let g = gate(&t, "t", PermissionMode::AutoAcceptEdits, Arc::new(DenyAll));
    // Not approved yet: run_approved refuses, and nothing runs.
    assert!(matches!(
        g.run_approved(&id).await,
        Err(GateError::NotApproved { .. })
    ));
    ran(g.resume_spawn(&id, Decision::approve()).await.unwrap());
    assert_eq!(lines(&log), 1);
    for _ in 0..3 {
        assert!(matches!(
            g.resume_spawn(&id, Decision::approve()).await,
            Err(GateError::AlreadyUsed(ref r)) if *r == id
        ));
        assert!(matches!(
            g.run_approved(&id).await,
            Err(GateError::AlreadyUsed(_))
        ));
        assert!(matches!(
            g.resume(&id, Decision::approve()),
            Err(GateError::AlreadyUsed(_))
        ));
    }
    assert_eq!(lines(&log), 1, "an allow_once approval ran more than once");
    let err = g.run_approved(&id).await.unwrap_err().to_string();
    assert!(err.starts_with("already_used"), "{err}");
}

#[tokio::test]
async fn a_request_resolved_elsewhere_runs_once_through_run_approved() {
    let t = turn();
    let log = t.ws.join("log.txt");
    let id = deferred(&t, "t", &format!("sh -c 'echo once >> {}'", log.display())).await;
    t.store
        .resolve(
            &id,
            StoredResolution::new(ApprovalResolution::AllowOnce, "responder"),
        )
        .unwrap();
    let g = gate(&t, "t", PermissionMode::AutoAcceptEdits, Arc::new(DenyAll));
    ran(g.run_approved(&id).await.unwrap());
    assert!(matches!(
        g.run_approved(&id).await,
        Err(GateError::AlreadyUsed(_))
    ));
    assert_eq!(lines(&log), 1);
}

#[tokio::test]
async fn a_denied_request_never_runs() {
    let t = turn();
    let log = t.ws.join("log.txt");
    let id = deferred(&t, "t", &format!("sh -c 'echo x >> {}'", log.display())).await;
    let g = gate(&t, "t", PermissionMode::AutoAcceptEdits, Arc::new(DenyAll));
    match g.resume_spawn(&id, Decision::deny("no")).await.unwrap() {
        SpawnResult::Denied(_) => {}
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        g.run_approved(&id).await,
        Err(GateError::NotApproved { .. })
    ));
    assert!(matches!(
        g.resume_spawn(&id, Decision::approve()).await.unwrap(),
        SpawnResult::Denied(_)
    ));
    assert_eq!(lines(&log), 0);
}

#[tokio::test]
async fn a_resumed_command_runs_under_the_sandbox_it_was_requested_under() {
    let t = turn();
    let inside = t.ws.join("in.txt");
    let escaped = t.outside.join("escaped.txt");
    // A script hides its targets from the policy: only the kernel stops the second write.
    std::fs::write(
        t.ws.join("write.sh"),
        format!(
            "echo in > {}\necho out > {}\n",
            inside.display(),
            escaped.display()
        ),
    )
    .unwrap();
    let line = "sh ./write.sh";
    let id = deferred(&t, "t", line).await;
    // Resumed from a full-access gate (as `turngate approvals resume` without --mode is):
    // the stored auto_accept_edits sandbox still applies.
    let g = gate(&t, "t", PermissionMode::FullAccess, Arc::new(DenyAll));
    let outcome = ran(g.resume_spawn(&id, Decision::approve()).await.unwrap());
    let report = outcome
        .sandbox
        .as_ref()
        .expect("the stored snapshot requires a sandbox");
    assert_ne!(
        report.status,
        turngate::sandbox::EnforcementLevel::Unavailable,
        "{report:?}"
    );
    assert!(
        inside.exists(),
        "{}",
        String::from_utf8_lossy(&outcome.stderr)
    );
    assert!(
        !escaped.exists(),
        "the resumed command ran without its sandbox"
    );
}

#[tokio::test]
async fn a_stricter_resuming_snapshot_narrows_the_stored_one() {
    let t = turn();
    let inside = t.ws.join("in.txt");
    let id = deferred(&t, "t", &format!("sh -c 'echo in > {}'", inside.display())).await;
    // A supervised (read-only) resumer: the workspace write is refused by the kernel.
    let g = gate(&t, "t", PermissionMode::Supervised, Arc::new(DenyAll));
    let outcome = ran(g.resume_spawn(&id, Decision::approve()).await.unwrap());
    assert_ne!(outcome.exit_code, Some(0));
    assert!(!inside.exists(), "the resume widened a read-only resumer");
}

#[tokio::test]
async fn an_allow_once_approval_is_neither_spent_nor_run_by_another_turn() {
    let t = turn();
    let log = t.ws.join("log.txt");
    let id = deferred(&t, "t-a", &format!("sh -c 'echo x >> {}'", log.display())).await;
    t.store
        .resolve(
            &id,
            StoredResolution::new(ApprovalResolution::AllowOnce, "person"),
        )
        .unwrap();
    let other = gate(
        &t,
        "t-b",
        PermissionMode::AutoAcceptEdits,
        Arc::new(DenyAll),
    );
    // Every way in: running it, resuming with the recorded decision, resuming with a new one.
    assert!(matches!(
        other.run_approved(&id).await,
        Err(GateError::OtherTurn { .. })
    ));
    assert!(matches!(
        other.resume_recorded(&id),
        Err(GateError::OtherTurn { .. })
    ));
    assert!(matches!(
        other.resume(&id, Decision::approve()),
        Err(GateError::OtherTurn { .. })
    ));
    assert_eq!(lines(&log), 0);
    // Nothing was spent: the turn that asked still runs it, once.
    let own = gate(
        &t,
        "t-a",
        PermissionMode::AutoAcceptEdits,
        Arc::new(DenyAll),
    );
    ran(own.run_approved(&id).await.unwrap());
    assert_eq!(lines(&log), 1);
    assert!(own.run_approved(&id).await.is_err());
    assert_eq!(lines(&log), 1);
}

#[tokio::test]
async fn an_allow_for_turn_approval_is_valid_only_in_its_turn() {
    let t = turn();
    let log = t.ws.join("log.txt");
    let id = deferred(&t, "t-a", &format!("sh -c 'echo x >> {}'", log.display())).await;
    t.store
        .resolve(
            &id,
            StoredResolution::new(ApprovalResolution::AllowForTurn, "responder"),
        )
        .unwrap();
    let other = gate(
        &t,
        "t-b",
        PermissionMode::AutoAcceptEdits,
        Arc::new(DenyAll),
    );
    assert!(matches!(
        other.run_approved(&id).await,
        Err(GateError::OtherTurn { .. })
    ));
    assert_eq!(lines(&log), 0);
    let own = gate(
        &t,
        "t-a",
        PermissionMode::AutoAcceptEdits,
        Arc::new(DenyAll),
    );
    ran(own.run_approved(&id).await.unwrap());
    assert_eq!(lines(&log), 1);
    // The stored request's own action runs once, however often it is resumed (red team 4
    // F8: three more `approvals resume` ran it three more times, after its turn ended).
    assert!(matches!(
        own.run_approved(&id).await,
        Err(GateError::AlreadyUsed(_))
    ));
    assert_eq!(lines(&log), 1, "a second resume ran the action again");
    // The grant itself holds in its turn: the same command, asked again, runs from it
    // without a prompt (the approver here denies everything).
    let line = format!("sh -c 'echo x >> {}'", log.display());
    ran(own.spawn(&shell(&line)).await.unwrap());
    assert_eq!(lines(&log), 2, "allow_for_turn stays valid in its turn");
}

#[tokio::test]
async fn a_request_of_another_kind_never_runs_as_a_command() {
    let t = turn();
    let g = gate(&t, "t", PermissionMode::Supervised, Arc::new(DeferAll));
    let target = t.ws.join("notes.txt");
    let inv = ToolInvocation::new(ActionKind::FileWrite, target.to_str().unwrap());
    let Authorization::Deferred { request } = g.authorize(&inv).await.unwrap() else {
        panic!("expected a deferral");
    };
    assert!(matches!(
        g.resume_spawn(&request.id, Decision::approve()).await,
        Err(GateError::WrongKind { .. })
    ));
    // Refused before anything was resolved: the request is still pending.
    assert!(
        t.store
            .approval(&request.id)
            .unwrap()
            .unwrap()
            .resolution
            .is_none()
    );
}

#[tokio::test]
async fn a_request_stored_without_a_snapshot_cannot_run() {
    let t = turn();
    let log = t.ws.join("log.txt");
    let action = Action::new(
        ActionKind::ShellCommand,
        format!("sh -c 'echo x >> {}'", log.display()),
    );
    let request = turngate::approval::TurnPermissionApprovalRequest::for_action(
        "t",
        &action,
        turngate::Reason::AskRule,
        None,
    )
    .unwrap();
    t.store
        .save_pending(&request, &action, None, false)
        .unwrap();
    let g = gate(&t, "t", PermissionMode::FullAccess, Arc::new(DenyAll));
    assert!(matches!(
        g.resume_spawn(&request.id, Decision::approve()).await,
        Err(GateError::NoSnapshot(_))
    ));
    assert_eq!(lines(&log), 0);
}

#[test]
fn racing_resumes_in_threads_run_an_allow_once_exactly_once() {
    let t = turn();
    let rt = tokio::runtime::Runtime::new().unwrap();
    for round in 0..20 {
        let log = t.ws.join(format!("log{round}.txt"));
        let id = rt.block_on(deferred(
            &t,
            "t",
            &format!("sh -c 'echo x >> {}'", log.display()),
        ));
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let (db, id, ws) = (t.db.clone(), id.clone(), t.ws.clone());
                std::thread::spawn(move || {
                    // Each racer has its own store connection and writer, as two processes do.
                    let store = Arc::new(SqliteAuditStore::open(&db).unwrap());
                    let g = Gate::new(
                        "t",
                        snapshot(&ws, Some(PermissionMode::AutoAcceptEdits)),
                        store,
                        Arc::new(DenyAll),
                    )
                    .unwrap();
                    let rt = tokio::runtime::Runtime::new().unwrap();
                    match rt.block_on(g.resume_spawn(&id, Decision::approve())) {
                        Ok(SpawnResult::Ran(_)) => "ran".to_owned(),
                        Err(GateError::AlreadyUsed(_)) => "already_used".to_owned(),
                        other => format!("{other:?}"),
                    }
                })
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let ran = results.iter().filter(|r| *r == "ran").count();
        let used = results.iter().filter(|r| *r == "already_used").count();
        assert_eq!((ran, used), (1, 1), "round {round}: {results:?}");
        assert_eq!(lines(&log), 1, "round {round}");
    }
}

fn wait_for(path: &Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !path.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::yield_now();
    }
}

/// Two processes race to spend one `allow_once`, 1000 times: exactly one wins every time. The
/// racers are this test binary re-executed (`TURNGATE_CONSUME_RACER`), each with its own
/// connection and writer. For every request both are released by the same file appearing
/// (`go.N`), so each request is contested at the same moment.
#[test]
fn racing_processes_spend_an_allow_once_exactly_once_1000_times() {
    const ROUNDS: usize = 1000;
    if let Some(spec) = std::env::var_os("TURNGATE_CONSUME_RACER") {
        let spec = spec.to_string_lossy().into_owned();
        let (db, rest) = spec.split_once('|').unwrap();
        let (dir, ids) = rest.split_once('|').unwrap();
        let dir = Path::new(dir);
        let store = SqliteAuditStore::open(db).unwrap();
        let me = std::process::id();
        std::fs::write(dir.join(format!("ready.{me}")), "").unwrap();
        let mut spent = String::new();
        for (i, id) in ids.split(',').enumerate() {
            wait_for(&dir.join(format!("go.{i}")));
            let c = store.consume(id).unwrap();
            spent.push(if c == Consumed::Spent { '1' } else { '0' });
            std::fs::write(dir.join(format!("done.{i}.{me}")), "").unwrap();
        }
        println!("RESULT {spent}");
        return;
    }
    let t = turn();
    let action = Action::new(ActionKind::ShellCommand, "true");
    let mut ids = Vec::new();
    for _ in 0..ROUNDS {
        let request = turngate::approval::TurnPermissionApprovalRequest::for_action(
            "t",
            &action,
            turngate::Reason::AskRule,
            None,
        )
        .unwrap();
        t.store
            .save_pending(&request, &action, None, false)
            .unwrap();
        t.store
            .resolve(
                &request.id,
                StoredResolution::new(ApprovalResolution::AllowOnce, "responder"),
            )
            .unwrap();
        ids.push(request.id);
    }
    let sync = t.ws.join("sync");
    std::fs::create_dir_all(&sync).unwrap();
    let exe = std::env::current_exe().unwrap();
    let spec = format!("{}|{}|{}", t.db.display(), sync.display(), ids.join(","));
    let racers: Vec<_> = (0..2)
        .map(|_| {
            std::process::Command::new(&exe)
                .args([
                    "--exact",
                    "racing_processes_spend_an_allow_once_exactly_once_1000_times",
                    "--nocapture",
                ])
                .env("TURNGATE_CONSUME_RACER", &spec)
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let pids: Vec<u32> = racers.iter().map(std::process::Child::id).collect();
    for pid in &pids {
        wait_for(&sync.join(format!("ready.{pid}")));
    }
    for i in 0..ROUNDS {
        std::fs::write(sync.join(format!("go.{i}")), "").unwrap();
        for pid in &pids {
            wait_for(&sync.join(format!("done.{i}.{pid}")));
        }
    }
    let outputs: Vec<String> = racers
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            assert!(out.status.success());
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            text.lines()
                .find_map(|l| l.strip_prefix("RESULT "))
                .map(str::to_owned)
                .unwrap_or_else(|| panic!("no result from a racer: {text}"))
        })
        .collect();
    let (a, b) = (outputs[0].as_bytes(), outputs[1].as_bytes());
    assert_eq!((a.len(), b.len()), (ROUNDS, ROUNDS));
    for i in 0..ROUNDS {
        let spent = u8::from(a[i] == b'1') + u8::from(b[i] == b'1');
        assert_eq!(spent, 1, "request {i} was spent {spent} times");
    }
    // Each racer won some rounds: the race was real.
    let wins_a = a.iter().filter(|&&c| c == b'1').count();
    assert!(
        wins_a > 0 && wins_a < ROUNDS,
        "racer A won {wins_a} of {ROUNDS}"
    );
}

#[tokio::test]
async fn audit_rows_say_which_command_when_and_in_whose_words() {
    let t = turn();
    let lines_run = ["echo one", "echo two", "echo three"];
    let mut ids = Vec::new();
    for line in lines_run {
        ids.push(deferred(&t, "t", line).await);
    }
    for (i, id) in ids.iter().enumerate() {
        let mut r = StoredResolution::new(ApprovalResolution::AllowOnce, "responder");
        r.message = Some(format!("fine, number {i}"));
        r.decider = Some("person:alice".to_owned());
        t.store.resolve(id, r).unwrap();
    }
    let g = gate(&t, "t", PermissionMode::AutoAcceptEdits, Arc::new(DenyAll));
    for id in &ids {
        ran(g.run_approved(id).await.unwrap());
    }
    // An inline denial keeps the approver's words too.
    let denier = gate(&t, "t", PermissionMode::AutoAcceptEdits, Arc::new(DenyAll));
    denier.spawn(&shell("echo four")).await.unwrap();

    let rows = t.store.replay("t").unwrap();
    let allowed: Vec<_> = rows
        .iter()
        .filter(|e| e.kind == AuditEventKind::DecisionAllowed)
        .collect();
    let targets: Vec<_> = allowed.iter().map(|e| e.target.clone().unwrap()).collect();
    assert_eq!(targets, lines_run);
    for (i, e) in allowed.iter().enumerate() {
        assert_eq!(e.decider.as_deref(), Some("person:alice"));
        assert_eq!(
            e.message.as_deref(),
            Some(format!("fine, number {i}").as_str())
        );
        assert_eq!(e.request_key.as_deref(), Some(ids[i].as_str()));
        assert_eq!(e.tool_name.as_deref(), Some("bash"));
        assert!(e.timestamp.as_deref().is_some_and(|ts| ts.ends_with('Z')));
    }
    // Every requested row and its resolution share the request id.
    for id in &ids {
        let kinds: Vec<_> = rows
            .iter()
            .filter(|e| e.request_key.as_deref() == Some(id))
            .map(|e| e.kind)
            .collect();
        assert_eq!(
            kinds,
            [
                AuditEventKind::ApprovalRequested,
                AuditEventKind::ApprovalResolved,
                AuditEventKind::DecisionAllowed
            ]
        );
    }
    let denied = rows
        .iter()
        .find(|e| e.kind == AuditEventKind::DecisionDenied)
        .unwrap();
    assert_eq!(denied.target.as_deref(), Some("echo four"));
    assert_eq!(
        denied.message.as_deref(),
        Some("denied by DenyAll (unattended run)")
    );
    assert_eq!(denied.decider.as_deref(), Some("approver"));
    // Timestamps never go backwards within a turn.
    let stamps: Vec<_> = rows.iter().map(|e| e.timestamp.clone().unwrap()).collect();
    assert!(stamps.windows(2).all(|w| w[0] <= w[1]), "{stamps:?}");
}

#[tokio::test]
async fn audited_targets_are_redacted_and_rules_are_named() {
    let t = turn();
    let policy = Policy::new().layer("project").deny_exec("curl");
    let g = Gate::new(
        "t",
        snapshot_with(&t.ws, Some(PermissionMode::AutoAcceptEdits), Some(policy)),
        t.store.clone(),
        Arc::new(DenyAll),
    )
    .unwrap();
    g.authorize(&shell(
        "curl -H 'Authorization: Bearer abcdefgh12345678' https://x",
    ))
    .await
    .unwrap();
    let rows = t.store.replay("t").unwrap();
    let denied = rows.last().unwrap();
    assert_eq!(denied.kind, AuditEventKind::DecisionDenied);
    let target = denied.target.clone().unwrap();
    assert!(!target.contains("abcdefgh12345678"), "{target}");
    assert!(target.contains("[REDACTED]"), "{target}");
    assert_eq!(denied.rule.as_deref(), Some("curl"));
    assert_eq!(denied.layer.as_deref(), Some("project"));
    assert_eq!(denied.decider.as_deref(), Some("policy"));

    // A host may swap the redactor.
    let plain = Gate::new(
        "t2",
        snapshot(&t.ws, Some(PermissionMode::AutoAcceptEdits)),
        t.store.clone(),
        Arc::new(DenyAll),
    )
    .unwrap()
    .with_redactor(Redactor::new(|s| s.replace("secret", "***")));
    plain.authorize(&shell("echo secret")).await.unwrap();
    let last = t.store.replay("t2").unwrap().pop().unwrap();
    assert_eq!(last.target.as_deref(), Some("echo ***"));
}

#[tokio::test]
async fn an_open_writes_the_path_that_was_checked_and_the_modified_one_instead() {
    let t = turn();
    // Relative paths resolve against the snapshot's cwd, never this process's.
    let g = gate(&t, "t", PermissionMode::FullAccess, Arc::new(ApproveAll));
    let inv = ToolInvocation::new(ActionKind::FileWrite, "notes.txt");
    let Authorization::Allowed { action, .. } = g.authorize(&inv).await.unwrap() else {
        panic!("expected allowed");
    };
    assert_eq!(PathBuf::from(&action.target), t.ws.join("notes.txt"));

    // A reviewer's modified target replaces the original in open_write.
    let original = t.ws.join("original.txt");
    let modified = t.ws.join("modified.txt");
    let approver = Modifies(Action::new(
        ActionKind::FileWrite,
        modified.to_str().unwrap(),
    ));
    let g = gate(&t, "t", PermissionMode::Supervised, Arc::new(approver));
    let file = g
        .open_write(&ToolInvocation::new(
            ActionKind::FileWrite,
            original.to_str().unwrap(),
        ))
        .await
        .unwrap()
        .unwrap();
    drop(file);
    assert!(modified.exists() && !original.exists());

    // A modified target the policy denies opens nothing.
    let approver = Modifies(Action::new(ActionKind::FileWrite, "/etc/turngate-nope"));
    let g = gate(&t, "t", PermissionMode::Supervised, Arc::new(approver));
    let denied = g
        .open_write(&ToolInvocation::new(
            ActionKind::FileWrite,
            original.to_str().unwrap(),
        ))
        .await
        .unwrap();
    assert!(denied.is_err());
    assert!(!original.exists() && !Path::new("/etc/turngate-nope").exists());
}

/// Swaps the asked path for a symlink while "deciding", then approves.
struct SwapsThenApproves {
    target: PathBuf,
    other: PathBuf,
}

impl Approver for SwapsThenApproves {
    fn decide<'a>(&'a self, _ctx: &'a ApprovalContext) -> DecisionFuture<'a> {
        let _ = std::os::unix::fs::symlink(&self.other, &self.target);
        Box::pin(async { Decision::approve() })
    }
}

#[tokio::test]
async fn a_target_swapped_for_a_symlink_while_the_approval_is_pending_runs_nothing() {
    let t = turn();
    let target = t.ws.join("a.txt");
    let other = t.ws.join("other.txt");
    std::fs::write(&other, "other").unwrap();
    let approver = SwapsThenApproves {
        target: target.clone(),
        other: other.clone(),
    };
    let g = gate(&t, "t", PermissionMode::Supervised, Arc::new(approver));
    let inv = ToolInvocation::new(ActionKind::FileWrite, target.to_str().unwrap());
    let denial = g.open_write(&inv).await.unwrap().unwrap_err();
    assert!(
        denial.reason.contains("now resolves to"),
        "{}",
        denial.reason
    );
    assert_eq!(std::fs::read_to_string(&other).unwrap(), "other");
}

#[test]
fn an_allow_rule_does_not_reach_a_file_of_that_name_in_the_workspace() {
    use turngate::Effect;
    // Red team 4 F5: an allow for `ls` ran `./tools/ls`, a workspace file the agent wrote.
    // A project allow for `rustc`; a workspace file named rustc is not it.
    let t = turn();
    let policy = Policy::new()
        .with_default(ActionKind::ShellCommand, turngate::Effect::Ask)
        .layer("project")
        .allow_exec("rustc");
    let g = Gate::new(
        "t",
        snapshot_with(&t.ws, Some(PermissionMode::AutoAcceptEdits), Some(policy)),
        t.store.clone(),
        Arc::new(DenyAll),
    )
    .unwrap();
    std::fs::create_dir_all(t.ws.join("tools")).unwrap();
    let effect = |line: &str| g.evaluate(&shell(line)).verdict.effect;
    assert_eq!(effect("rustc main.rs"), Effect::Allow);
    assert_eq!(effect("/usr/local/bin/rustc main.rs"), Effect::Allow);
    for line in [
        "./tools/rustc main.rs".to_owned(),
        "tools/rustc main.rs".to_owned(),
        format!("{}/tools/rustc main.rs", t.ws.display()),
        "/tmp/rustc main.rs".to_owned(),
    ] {
        assert_eq!(effect(&line), Effect::Ask, "{line}");
    }
}
