//! The foreign-approver bridge: a failing callback is a denial carrying its text, and a
//! callback that never answers leaves its turn pending without blocking another turn.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use turngate_ffi::approver::{DecisionRecord, ForeignApprover, ForeignDecisionFuture};
use turngate_ffi::{
    ApproverHandle, AuthorizationRecord, GateHandle, InvocationRecord, StoreHandle,
};

struct Fails;
impl ForeignApprover for Fails {
    fn decide(&self, _request: Value) -> ForeignDecisionFuture {
        Box::pin(async { Err("ValueError: the reviewer is out".to_owned()) })
    }
}

struct Never;
impl ForeignApprover for Never {
    fn decide(&self, _request: Value) -> ForeignDecisionFuture {
        Box::pin(std::future::pending())
    }
}

struct Approves(std::sync::Mutex<Vec<Value>>);
impl ForeignApprover for Approves {
    fn decide(&self, request: Value) -> ForeignDecisionFuture {
        self.0.lock().unwrap().push(request);
        Box::pin(async { Ok(DecisionRecord::approve()) })
    }
}

fn snapshot(dir: &std::path::Path) -> Value {
    turngate_ffi::snapshot::resolve(
        Some(json!({"mode": "supervised"})),
        json!({
            "workspace_root": dir,
            "execution_backend": "native",
            "platform": turngate_ffi::snapshot::probe_platform().unwrap(),
        }),
        None,
    )
    .unwrap()
}

fn write(dir: &std::path::Path) -> InvocationRecord {
    InvocationRecord {
        kind: "file_write".into(),
        target: dir.join("notes.txt").to_string_lossy().into_owned(),
        tool: Some("write_file".into()),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_callback_is_a_denial_with_its_text() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreHandle::open(dir.path().join("a.db").to_str().unwrap()).unwrap();
    let approver = ApproverHandle::foreign(Arc::new(Fails));
    let gate = GateHandle::new("t1", snapshot(dir.path()), &store, &approver, None).unwrap();
    match gate.authorize(&write(dir.path())).await.unwrap() {
        AuthorizationRecord::Denied(d) => {
            assert!(
                d.reason.contains("ValueError: the reviewer is out"),
                "{}",
                d.reason
            );
            assert!(
                d.tool_result.contains("Permission denied"),
                "{}",
                d.tool_result
            );
        }
        other => panic!("expected a denial, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_callback_blocks_only_its_own_turn() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreHandle::open(dir.path().join("a.db").to_str().unwrap()).unwrap();
    let never = ApproverHandle::foreign(Arc::new(Never));
    let seen = Arc::new(Approves(Default::default()));
    let approves = ApproverHandle::foreign(seen.clone());
    let snap = snapshot(dir.path());
    let stuck = GateHandle::new("stuck", snap.clone(), &store, &never, None).unwrap();
    let other = GateHandle::new("other", snap, &store, &approves, None).unwrap();
    let inv = write(dir.path());
    let pending = {
        let (gate, inv) = (stuck.clone(), inv.clone());
        tokio::spawn(async move { gate.authorize(&inv).await })
    };
    let done = tokio::time::timeout(Duration::from_secs(5), other.authorize(&inv))
        .await
        .expect("the other turn was blocked")
        .unwrap();
    assert!(
        matches!(done, AuthorizationRecord::Allowed { .. }),
        "{done:?}"
    );
    let shown = seen.0.lock().unwrap()[0].clone();
    assert_eq!(shown["request"]["turn_id"], "other");
    assert_eq!(shown["action"]["kind"], "file_write");
    assert_eq!(shown["verdict"]["effect"], "ask");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        !pending.is_finished(),
        "the silent approver's turn should still wait"
    );
    pending.abort();
}
