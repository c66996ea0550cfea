//! A shell command deferred from a reviewed spawn never resumes unreviewed (DESIGN §11, §18):
//! what runs is what was decided, and the person asked for its writes to be held for review.
//! Each test attacks one way of getting the stored command to run directly on the workspace.

#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use turngate::ActionKind;
use turngate::PermissionMode;
use turngate::approval::{ApprovalResolution, Approver, DeferAll, DenyAll};
use turngate::audit::{AuditStore, SqliteAuditStore, StoredResolution};
use turngate::changes::{ChangeKind, ChangeStore};
use turngate::gate::{Gate, GateError, SpawnResult, ToolInvocation};
use turngate::protocol::TurnPermissionProfileSelection;
use turngate::snapshot::{ResolveContext, resolve};

/// A workspace with `b.txt`, the store (and the change sets beside it) outside it.
struct Turn {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    store: Arc<SqliteAuditStore>,
    changes: ChangeStore,
}

fn turn() -> Turn {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("b.txt"), "b\n").unwrap();
    let db = dir.path().join("state/audit.db");
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    Turn {
        ws: ws.canonicalize().unwrap(),
        store: Arc::new(SqliteAuditStore::open(&db).unwrap()),
        changes: ChangeStore::beside(&db),
        _dir: dir,
    }
}

/// An `auto_accept_edits` gate (shell commands ask there) answering with `approver`.
fn gate(t: &Turn, approver: Arc<dyn Approver>) -> Gate {
    let context = ResolveContext::new(&t.ws, turngate::probe::probe_platform());
    let selection = TurnPermissionProfileSelection {
        mode: Some(PermissionMode::AutoAcceptEdits),
        source: None,
        policy: None,
    };
    let snapshot = resolve(Some(&selection), &context, None).unwrap();
    Gate::new("t", snapshot, t.store.clone(), approver).unwrap()
}

const LINE: &str = "sh -c 'echo new > a.txt; rm b.txt'";

fn shell(ws: &Path) -> ToolInvocation {
    let mut inv = ToolInvocation::new(ActionKind::ShellCommand, LINE).with_tool("bash");
    inv.cwd = Some(ws.to_path_buf());
    inv
}

/// The workspace as it was before any run: no `a.txt`, `b.txt` intact.
fn untouched(ws: &Path) -> bool {
    !ws.join("a.txt").exists()
        && std::fs::read_to_string(ws.join("b.txt")).is_ok_and(|b| b == "b\n")
}

/// Defer `LINE` from a reviewed spawn; the request's id.
async fn deferred_reviewed(t: &Turn) -> String {
    let g = gate(t, Arc::new(DeferAll));
    let reviewed = g.spawn_reviewed(&shell(&t.ws), &t.changes).await.unwrap();
    assert!(
        reviewed.change_set.is_none(),
        "a deferral recorded a change set"
    );
    match reviewed.result {
        SpawnResult::Deferred(r) => r.id,
        other => panic!("expected a deferral, got {other:?}"),
    }
}

fn allow_once(t: &Turn, id: &str) {
    t.store
        .resolve(
            id,
            StoredResolution::new(ApprovalResolution::AllowOnce, "responder"),
        )
        .unwrap();
}

fn review_required(result: Result<impl std::fmt::Debug, GateError>, id: &str) {
    match result {
        Err(GateError::ReviewRequired(ref r)) if r == id => {}
        other => panic!("expected ReviewRequired({id}), got {other:?}"),
    }
}

#[tokio::test]
async fn a_deferred_reviewed_spawn_runs_only_reviewed_and_once() {
    let t = turn();
    let id = deferred_reviewed(&t).await;
    let stored = t.store.approval(&id).unwrap().unwrap();
    assert!(
        stored.review,
        "the request forgot it was to run with review"
    );
    allow_once(&t, &id);

    // The attacks: every unreviewed way to run it is refused, and none spends the approval.
    let g = gate(&t, Arc::new(DenyAll));
    assert!(g.requires_review(&id).unwrap());
    review_required(g.run_approved(&id).await, &id);
    review_required(
        g.resume_spawn(&id, turngate::approval::Decision::approve())
            .await,
        &id,
    );
    review_required(g.resume(&id, turngate::approval::Decision::approve()), &id);
    let err = g.run_approved(&id).await.unwrap_err().to_string();
    assert!(err.contains("must be resumed with review"), "{err}");
    assert!(
        untouched(&t.ws),
        "an unreviewed resume wrote to the workspace"
    );
    let stored = t.store.approval(&id).unwrap().unwrap();
    assert!(!stored.used, "a refused resume spent the allow_once");
    assert_eq!(
        stored.resolution.map(|r| r.resolution),
        Some(ApprovalResolution::AllowOnce)
    );
    assert!(t.changes.list().unwrap().is_empty());

    // The reviewed resume: the writes land in a change set, not in the workspace.
    let reviewed = g.run_approved_reviewed(&id, &t.changes).await.unwrap();
    match &reviewed.result {
        SpawnResult::Ran(o) => assert_eq!(o.exit_code, Some(0), "{o:?}"),
        other => panic!("expected the command to run, got {other:?}"),
    }
    assert!(
        untouched(&t.ws),
        "the reviewed resume wrote to the workspace"
    );
    let set = reviewed.change_set.expect("a reviewed run's change set");
    let mut changes: Vec<(String, ChangeKind)> = set
        .changes
        .iter()
        .map(|c| (c.path.clone(), c.kind))
        .collect();
    changes.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        changes,
        [
            ("a.txt".to_owned(), ChangeKind::Added),
            ("b.txt".to_owned(), ChangeKind::Deleted)
        ]
    );
    assert_eq!(t.changes.get(&set.id).unwrap().id, set.id);
    assert!(t.store.approval(&id).unwrap().unwrap().used);

    // Once: every second resume is AlreadyUsed, or still refused unreviewed.
    assert!(matches!(
        g.run_approved_reviewed(&id, &t.changes).await,
        Err(GateError::AlreadyUsed(ref r)) if *r == id
    ));
    assert!(matches!(
        g.resume_spawn_reviewed(&id, turngate::approval::Decision::approve(), &t.changes)
            .await,
        Err(GateError::AlreadyUsed(_))
    ));
    review_required(g.run_approved(&id).await, &id);
    assert!(untouched(&t.ws));
    assert_eq!(
        t.changes.list().unwrap().len(),
        1,
        "a second run was recorded"
    );
}

#[tokio::test]
async fn a_pending_reviewed_request_approved_by_its_resume_runs_reviewed() {
    let t = turn();
    let id = deferred_reviewed(&t).await;
    let g = gate(&t, Arc::new(DenyAll));
    // A decision given with the plain resume is not recorded either: the request stays pending.
    review_required(
        g.resume_spawn(&id, turngate::approval::Decision::approve())
            .await,
        &id,
    );
    let stored = t.store.approval(&id).unwrap().unwrap();
    assert!(stored.resolution.is_none(), "{:?}", stored.resolution);
    let reviewed = g
        .resume_spawn_reviewed(&id, turngate::approval::Decision::approve(), &t.changes)
        .await
        .unwrap();
    assert!(matches!(reviewed.result, SpawnResult::Ran(_)));
    assert!(reviewed.change_set.is_some());
    assert!(untouched(&t.ws));
}

#[tokio::test]
async fn a_deferred_plain_spawn_still_resumes_directly() {
    let t = turn();
    let g = gate(&t, Arc::new(DeferAll));
    let id = match g.spawn(&shell(&t.ws)).await.unwrap() {
        SpawnResult::Deferred(r) => r.id,
        other => panic!("expected a deferral, got {other:?}"),
    };
    assert!(!t.store.approval(&id).unwrap().unwrap().review);
    allow_once(&t, &id);
    let g = gate(&t, Arc::new(DenyAll));
    assert!(!g.requires_review(&id).unwrap());
    match g.run_approved(&id).await.unwrap() {
        SpawnResult::Ran(o) => assert_eq!(o.exit_code, Some(0), "{o:?}"),
        other => panic!("expected the command to run, got {other:?}"),
    }
    assert_eq!(
        std::fs::read_to_string(t.ws.join("a.txt")).unwrap(),
        "new\n"
    );
    assert!(!t.ws.join("b.txt").exists());
    assert!(t.changes.list().unwrap().is_empty());
    assert!(matches!(
        g.run_approved(&id).await,
        Err(GateError::AlreadyUsed(_))
    ));
}

#[tokio::test]
async fn an_unknown_request_is_not_reported_as_unreviewed() {
    let t = turn();
    let g = gate(&t, Arc::new(DenyAll));
    assert!(matches!(
        g.requires_review("no-such-request"),
        Err(GateError::UnknownRequest(_))
    ));
}
