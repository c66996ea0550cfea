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
