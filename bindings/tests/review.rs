//! Reviewable writes through the facade: a reviewed spawn leaves the workspace untouched and
//! returns its change set; `changes::apply` lands it once; the errors carry the core's code.

#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(target_os = "linux")]

use serde_json::json;
use turngate_ffi::{
    ApproverHandle, GateHandle, InvocationRecord, SpawnRecord, StoreHandle, TurnGateError, changes,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reviewed_spawn_returns_its_change_set_and_applies_once() {
    let base = tempfile::tempdir().unwrap();
    let ws = base.path().canonicalize().unwrap().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("b.txt"), "b\n").unwrap();
    let store_path = base.path().join("state/audit.db");
    std::fs::create_dir_all(store_path.parent().unwrap()).unwrap();
    let store = StoreHandle::open(store_path.to_str().unwrap()).unwrap();
    let snapshot = turngate_ffi::snapshot::resolve(
        Some(json!({"mode": "auto_accept_edits"})),
        json!({
            "workspace_root": ws,
            "execution_backend": "native",
            "platform": turngate_ffi::snapshot::probe_platform().unwrap(),
        }),
        None,
    )
    .unwrap();
    let approver = ApproverHandle::builtin("approve_all").unwrap();
    let gate = GateHandle::new("t-review", snapshot, &store, &approver, None).unwrap();
    let inv = InvocationRecord {
        kind: "shell_command".into(),
        target: "sh -c 'echo new > a.txt; rm b.txt'".into(),
        cwd: Some(ws.to_string_lossy().into_owned()),
        ..Default::default()
    };
    let (record, set) = gate
        .spawn_reviewed(&inv, store_path.to_str().unwrap())
        .await
        .unwrap();
    assert!(
        matches!(record, SpawnRecord::Ran(ref o) if o.exit_code == Some(0)),
        "{record:?}"
    );
    assert!(
        !ws.join("a.txt").exists() && ws.join("b.txt").exists(),
        "the workspace changed"
    );
    let set = set.unwrap();
    let id = set["id"].as_str().unwrap().to_owned();
    assert_eq!(set["status"], "pending");
    let listed = changes::list(store_path.to_str().unwrap()).unwrap();
    assert_eq!(listed[0]["id"], id.as_str());
    assert_eq!(
        changes::show(store_path.to_str().unwrap(), &id).unwrap(),
        set
    );

    let applied = changes::apply(
        store_path.to_str().unwrap(),
        &id,
        json!({"by": "person:ana"}),
    )
    .unwrap();
    assert_eq!(applied["status"], "applied");
    assert_eq!(applied["resolved_by"], "person:ana");
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "new\n");
    assert!(!ws.join("b.txt").exists());
    let err = changes::apply(store_path.to_str().unwrap(), &id, json!(null)).unwrap_err();
    assert!(
        matches!(err, TurnGateError::Changes { ref code, .. } if code == "not_pending"),
        "{err:?}"
    );
    let err = changes::discard(store_path.to_str().unwrap(), &id, None).unwrap_err();
    assert!(
        matches!(err, TurnGateError::Changes { ref code, .. } if code == "not_pending"),
        "{err:?}"
    );
}

/// A workspace with `b.txt`, a store outside it, and an `auto_accept_edits` gate over it.
struct Fixture {
    _base: tempfile::TempDir,
    ws: std::path::PathBuf,
    base: std::path::PathBuf,
    store: std::sync::Arc<StoreHandle>,
    gate: std::sync::Arc<GateHandle>,
}

fn fixture(store_in: Option<&str>) -> Fixture {
    let base_dir = tempfile::tempdir().unwrap();
    let base = base_dir.path().canonicalize().unwrap();
    let ws = base.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("b.txt"), "b\n").unwrap();
    let store_path = match store_in {
        Some(p) => base.join(p),
        None => base.join("state/audit.db"),
    };
    std::fs::create_dir_all(store_path.parent().unwrap()).unwrap();
    let store = StoreHandle::open(store_path.to_str().unwrap()).unwrap();
    let gate = gate_over(&ws, &store);
    Fixture {
        _base: base_dir,
        ws,
        base,
        store,
        gate,
    }
}

fn gate_over(ws: &std::path::Path, store: &StoreHandle) -> std::sync::Arc<GateHandle> {
    gate_with(ws, store, "approve_all")
}

fn gate_with(
    ws: &std::path::Path,
    store: &StoreHandle,
    approver: &str,
) -> std::sync::Arc<GateHandle> {
    let snapshot = turngate_ffi::snapshot::resolve(
        Some(json!({"mode": "auto_accept_edits"})),
        json!({
            "workspace_root": ws,
            "execution_backend": "native",
            "platform": turngate_ffi::snapshot::probe_platform().unwrap(),
        }),
        None,
    )
    .unwrap();
    let approver = ApproverHandle::builtin(approver).unwrap();
    GateHandle::new("t-review", snapshot, store, &approver, None).unwrap()
}

fn reviewed(ws: &std::path::Path, line: &str) -> InvocationRecord {
    InvocationRecord {
        kind: "shell_command".into(),
        target: line.into(),
        cwd: Some(ws.to_string_lossy().into_owned()),
        review: true,
        ..Default::default()
    }
}

const LINE: &str = "sh -c 'echo new > a.txt; rm b.txt'";

fn code_of(err: &TurnGateError) -> (&str, Vec<String>) {
    match err {
        TurnGateError::Changes { code, paths, .. } => (code.as_str(), paths.clone()),
        other => panic!("not a Changes error: {other:?}"),
    }
}

fn path_str(p: std::path::PathBuf) -> String {
    p.to_string_lossy().into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_on_spawn_holds_the_writes_until_the_gates_store_applies_them() {
    let fx = fixture(None);
    let record = fx.gate.spawn(&reviewed(&fx.ws, LINE)).await.unwrap();
    let SpawnRecord::Ran(outcome) = record else {
        panic!("expected ran, got {record:?}");
    };
    assert_eq!(outcome.exit_code, Some(0), "{outcome:?}");
    assert!(
        !fx.ws.join("a.txt").exists() && fx.ws.join("b.txt").exists(),
        "the workspace changed before apply"
    );
    let summary = outcome
        .change_set
        .expect("a reviewed spawn carries its change set");
    assert_eq!(summary.status, "pending");
    assert_eq!(summary.added, vec![path_str(fx.ws.join("a.txt"))]);
    assert_eq!(summary.deleted, vec![path_str(fx.ws.join("b.txt"))]);
    assert!(summary.modified.is_empty() && summary.mode_changed.is_empty());
    assert!(summary.unsupported.is_empty());
    assert_eq!(summary.summary, "1 added, 1 deleted");

    let listed = fx.store.change_sets().unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1);
    let shown = fx.store.change_set(&summary.id).unwrap();
    assert_eq!(shown["changes"].as_array().unwrap().len(), 2, "{shown}");
    assert_eq!(
        shown["changes"][0]["diff"],
        "--- a/a.txt\n+++ b/a.txt\n@@ -0,0 +1 @@\n+new\n"
    );

    let applied = fx
        .store
        .apply_change_set(&summary.id, &Default::default())
        .unwrap();
    assert_eq!(applied["status"], "applied");
    assert_eq!(
        std::fs::read_to_string(fx.ws.join("a.txt")).unwrap(),
        "new\n"
    );
    assert!(!fx.ws.join("b.txt").exists());
    // Applied is applied: a second apply and a discard are refused.
    let err = fx
        .store
        .apply_change_set(&summary.id, &Default::default())
        .unwrap_err();
    assert_eq!(code_of(&err).0, "not_pending");
    let err = fx.store.discard_change_set(&summary.id, None).unwrap_err();
    assert_eq!(code_of(&err).0, "not_pending");

    // A spawn without review carries no change set and writes through.
    let plain = InvocationRecord {
        review: false,
        ..reviewed(&fx.ws, "touch direct.txt")
    };
    let SpawnRecord::Ran(o) = fx.gate.spawn(&plain).await.unwrap() else {
        panic!("expected ran");
    };
    assert!(o.change_set.is_none() && fx.ws.join("direct.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_discarded_run_leaves_the_workspace_untouched_and_cannot_be_applied() {
    let fx = fixture(None);
    let SpawnRecord::Ran(o) = fx.gate.spawn(&reviewed(&fx.ws, LINE)).await.unwrap() else {
        panic!("expected ran");
    };
    let id = o.change_set.unwrap().id;
    let discarded = fx
        .store
        .discard_change_set(&id, Some("person:ana"))
        .unwrap();
    assert_eq!(discarded["status"], "discarded");
    assert_eq!(discarded["resolved_by"], "person:ana");
    assert!(!fx.ws.join("a.txt").exists());
    assert_eq!(std::fs::read_to_string(fx.ws.join("b.txt")).unwrap(), "b\n");
    let err = fx
        .store
        .apply_change_set(&id, &Default::default())
        .unwrap_err();
    assert_eq!(code_of(&err).0, "not_pending");
    assert!(!fx.ws.join("a.txt").exists(), "apply after discard wrote");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_refuses_a_conflict_and_names_the_path() {
    let fx = fixture(None);
    let SpawnRecord::Ran(o) = fx.gate.spawn(&reviewed(&fx.ws, LINE)).await.unwrap() else {
        panic!("expected ran");
    };
    let id = o.change_set.unwrap().id;
    // Someone edits b.txt after the run: the set's deletion of it would lose that edit.
    std::fs::write(fx.ws.join("b.txt"), "edited meanwhile\n").unwrap();
    let err = fx
        .store
        .apply_change_set(&id, &Default::default())
        .unwrap_err();
    let (code, paths) = code_of(&err);
    assert_eq!(code, "conflicts", "{err:?}");
    assert_eq!(paths, vec![path_str(fx.ws.join("b.txt"))]);
    assert!(err.message().contains("b.txt"), "{err}");
    assert!(!fx.ws.join("a.txt").exists(), "a refused apply wrote a.txt");
    assert_eq!(
        std::fs::read_to_string(fx.ws.join("b.txt")).unwrap(),
        "edited meanwhile\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_from_elsewhere_are_refused() {
    let fx = fixture(None);
    let SpawnRecord::Ran(o) = fx.gate.spawn(&reviewed(&fx.ws, LINE)).await.unwrap() else {
        panic!("expected ran");
    };
    let id = o.change_set.unwrap().id;
    // Another store does not know the set (it lives, and is sealed, beside the first).
    let other_path = fx.base.join("other/audit.db");
    std::fs::create_dir_all(other_path.parent().unwrap()).unwrap();
    let other = StoreHandle::open(other_path.to_str().unwrap()).unwrap();
    let err = other
        .apply_change_set(&id, &Default::default())
        .unwrap_err();
    assert_eq!(code_of(&err).0, "not_found");
    // A path for an id never leaves the changes directory.
    for bad in ["../state/changes", "../../etc/passwd", "cs-1/../../x", ""] {
        let err = fx
            .store
            .apply_change_set(bad, &Default::default())
            .unwrap_err();
        assert_eq!(code_of(&err).0, "bad_id", "{bad}: {err:?}");
        assert_eq!(code_of(&fx.store.change_set(bad).unwrap_err()).0, "bad_id");
    }
    assert!(!fx.ws.join("a.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_is_refused_where_the_store_is_the_workspace() {
    // The store's directory is the writable root: it cannot be hidden from the command.
    let fx = fixture(Some("ws/audit.db"));
    let err = fx
        .gate
        .spawn(&reviewed(&fx.ws, "touch ran.txt"))
        .await
        .unwrap_err();
    assert!(matches!(err, TurnGateError::Run { .. }), "{err:?}");
    assert!(!fx.ws.join("ran.txt").exists(), "the command ran");
    assert!(
        fx.store
            .change_sets()
            .unwrap()
            .as_array()
            .unwrap()
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_on_a_call_that_is_not_a_spawn_is_refused() {
    let fx = fixture(None);
    let inv = InvocationRecord {
        kind: "file_write".into(),
        target: path_str(fx.ws.join("x.txt")),
        review: true,
        ..Default::default()
    };
    assert!(matches!(
        fx.gate.authorize(&inv).await.unwrap_err(),
        TurnGateError::InvalidInput { .. }
    ));
    assert!(matches!(
        fx.gate.open_write(&inv).await.unwrap_err(),
        TurnGateError::InvalidInput { .. }
    ));
    assert!(matches!(
        fx.gate.evaluate(&inv).unwrap_err(),
        TurnGateError::InvalidInput { .. }
    ));
    assert!(!fx.ws.join("x.txt").exists());
}

/// A `spawn` with `review` that the approver defers: the request id.
async fn deferred_reviewed(fx: &Fixture) -> String {
    let deferring = gate_with(&fx.ws, &fx.store, "defer_all");
    match deferring.spawn(&reviewed(&fx.ws, LINE)).await.unwrap() {
        SpawnRecord::Deferred { request, .. } => request["id"].as_str().unwrap().to_owned(),
        other => panic!("expected a deferral, got {other:?}"),
    }
}

fn untouched(ws: &std::path::Path) -> bool {
    !ws.join("a.txt").exists()
        && std::fs::read_to_string(ws.join("b.txt")).is_ok_and(|b| b == "b\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deferred_reviewed_spawn_resumes_reviewed_through_the_handle() {
    let fx = fixture(None);
    let id = deferred_reviewed(&fx).await;
    let stored = fx.store.approval(&id).unwrap().unwrap();
    assert_eq!(stored["review"], true, "{stored}");
    fx.store.resolve(&id, "allow_once", "responder").unwrap();

    // The plain `resume` hands the caller an authorization to run it directly: refused,
    // nothing spent.
    let gate = gate_with(&fx.ws, &fx.store, "deny_all");
    let err = gate
        .resume(&id, &turngate_ffi::DecisionRecord::approve())
        .unwrap_err();
    assert!(
        matches!(err, TurnGateError::Approval { ref message } if message.contains("must be resumed with review")),
        "{err:?}"
    );
    assert_eq!(fx.store.approval(&id).unwrap().unwrap()["used"], false);

    // run_approved routes it to review: the workspace is untouched, the change set has it.
    let record = gate.run_approved(&id).await.unwrap();
    let SpawnRecord::Ran(outcome) = record else {
        panic!("expected ran, got {record:?}");
    };
    assert_eq!(outcome.exit_code, Some(0), "{outcome:?}");
    assert!(
        untouched(&fx.ws),
        "a resumed reviewed spawn wrote to the workspace"
    );
    let summary = outcome
        .change_set
        .expect("a resumed reviewed spawn carries its change set");
    assert_eq!(summary.added, vec![path_str(fx.ws.join("a.txt"))]);
    assert_eq!(summary.deleted, vec![path_str(fx.ws.join("b.txt"))]);
    let listed = fx.store.change_sets().unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1);

    // Once.
    for _ in 0..2 {
        let err = gate.run_approved(&id).await.unwrap_err();
        assert!(
            matches!(err, TurnGateError::Approval { ref message } if message.starts_with("already_used")),
            "{err:?}"
        );
        let err = gate
            .resume_spawn(&id, &turngate_ffi::DecisionRecord::approve())
            .await
            .unwrap_err();
        assert!(
            matches!(err, TurnGateError::Approval { ref message } if message.starts_with("already_used")),
            "{err:?}"
        );
    }
    assert!(untouched(&fx.ws));
    assert_eq!(fx.store.change_sets().unwrap().as_array().unwrap().len(), 1);

    // Applied, it lands as a direct run would have.
    fx.store
        .apply_change_set(&summary.id, &Default::default())
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(fx.ws.join("a.txt")).unwrap(),
        "new\n"
    );
    assert!(!fx.ws.join("b.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_spawn_of_a_pending_reviewed_request_runs_it_reviewed() {
    let fx = fixture(None);
    let id = deferred_reviewed(&fx).await;
    let gate = gate_with(&fx.ws, &fx.store, "deny_all");
    let record = gate
        .resume_spawn(&id, &turngate_ffi::DecisionRecord::approve())
        .await
        .unwrap();
    let SpawnRecord::Ran(outcome) = record else {
        panic!("expected ran, got {record:?}");
    };
    assert!(outcome.change_set.is_some(), "{outcome:?}");
    assert!(untouched(&fx.ws));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deferred_plain_spawn_still_resumes_directly_through_the_handle() {
    let fx = fixture(None);
    let deferring = gate_with(&fx.ws, &fx.store, "defer_all");
    let plain = InvocationRecord {
        review: false,
        ..reviewed(&fx.ws, LINE)
    };
    let id = match deferring.spawn(&plain).await.unwrap() {
        SpawnRecord::Deferred { request, .. } => request["id"].as_str().unwrap().to_owned(),
        other => panic!("expected a deferral, got {other:?}"),
    };
    assert!(
        fx.store
            .approval(&id)
            .unwrap()
            .unwrap()
            .get("review")
            .is_none()
    );
    fx.store.resolve(&id, "allow_once", "responder").unwrap();
    let gate = gate_with(&fx.ws, &fx.store, "deny_all");
    let SpawnRecord::Ran(outcome) = gate.run_approved(&id).await.unwrap() else {
        panic!("expected ran");
    };
    assert!(outcome.change_set.is_none());
    assert_eq!(
        std::fs::read_to_string(fx.ws.join("a.txt")).unwrap(),
        "new\n"
    );
    assert!(!fx.ws.join("b.txt").exists());
}
