//! The UniFFI gate effects as Rust sees them before Swift does: an opened file crosses as a
//! descriptor the caller owns (still open after the call returns), an escape is a denial with
//! no descriptor, a denied spawn never runs, and a forbidden URL resolves to no address; a
//! reviewed spawn carries its `ChangeSetSummary` and the store applies it once (what Swift's
//! `ReviewTests` runs, here outside the chroot where Swift's tests cannot review).
#![cfg(all(feature = "uniffi", unix))]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;

use turngate_ffi::uniffi_api::{
    ApplyOptions, Effect, Gate, GateApprover, Invocation, OpenResult, SpawnResult, Store,
    TurnGateError, probe_platform, resolve_snapshot,
};

fn gate(dir: &Path, mode: &str, approver: &str) -> Arc<Gate> {
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let context = serde_json::json!({
        "workspace_root": ws,
        "execution_backend": "native",
        "platform": serde_json::from_str::<serde_json::Value>(&probe_platform().unwrap()).unwrap(),
    });
    let snapshot = resolve_snapshot(
        Some(format!("{{\"mode\": \"{mode}\"}}")),
        context.to_string(),
        None,
    )
    .unwrap();
    let store = Store::open(dir.join("audit.db").to_string_lossy().into_owned(), None).unwrap();
    let approver = GateApprover::builtin(approver.to_owned()).unwrap();
    Gate::new("t".to_owned(), snapshot, store, approver, None).unwrap()
}

fn invocation(kind: &str, target: &Path) -> Invocation {
    Invocation {
        kind: kind.to_owned(),
        target: target.to_string_lossy().into_owned(),
        tool: None,
        item_id: None,
        tool_id: None,
        cwd: None,
        review: false,
    }
}

/// Take ownership of an opened descriptor, or fail with the denial.
fn file(r: OpenResult) -> std::fs::File {
    match r {
        // SAFETY: `Opened` hands the descriptor's ownership to the caller; nothing else closes it.
        OpenResult::Opened { fd } => std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) }),
        OpenResult::Denied { denial } => panic!("denied: {}", denial.reason),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_opened_file_crosses_as_a_descriptor_the_caller_owns() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().canonicalize().unwrap();
    let gate = gate(&dir, "auto_accept_edits", "approve_all");
    let out = dir.join("ws/out.txt");

    let mut w = file(
        gate.open_write(invocation("file_write", &out))
            .await
            .unwrap(),
    );
    w.write_all(b"hello").unwrap();
    drop(w);
    assert_eq!(std::fs::read(&out).unwrap(), b"hello");

    let mut text = String::new();
    file(gate.open_read(invocation("file_read", &out)).await.unwrap())
        .read_to_string(&mut text)
        .unwrap();
    assert_eq!(text, "hello");

    // A symlink inside the workspace that leads outside it: refused, no descriptor.
    let outside = dir.join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("ws/link")).unwrap();
    let escape = gate
        .open_write(invocation("file_write", &dir.join("ws/link/escaped.txt")))
        .await
        .unwrap();
    assert!(
        matches!(&escape, OpenResult::Denied { denial } if !denial.reason.is_empty()),
        "{escape:?}"
    );
    assert!(!outside.join("escaped.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_spawn_never_runs_and_a_metadata_url_resolves_to_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().canonicalize().unwrap();
    let gate = gate(&dir, "auto_accept_edits", "deny_all");
    let never = dir.join("ws/never");
    let line = format!("touch {}", never.display());
    let r = gate
        .spawn(Invocation {
            target: line,
            ..invocation("shell_command", &never)
        })
        .await
        .unwrap();
    assert!(
        matches!(&r, SpawnResult::Denied(denial) if !denial.tool_result.is_empty()),
        "{r:?}"
    );
    assert!(!never.exists());

    let r = gate.resolve_and_check("http://169.254.169.254/".to_owned(), None);
    assert_eq!(r.check.verdict.effect, Effect::Deny, "{r:?}");
    assert!(r.addrs.is_empty(), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reviewed_spawn_carries_its_change_set_and_the_store_applies_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().canonicalize().unwrap();
    let gate = gate(&dir, "auto_accept_edits", "approve_all");
    let ws = dir.join("ws");
    std::fs::write(ws.join("b.txt"), "b\n").unwrap();
    let r = gate
        .spawn(Invocation {
            target: "sh -c 'echo new > a.txt; rm b.txt'".to_owned(),
            cwd: Some(ws.to_string_lossy().into_owned()),
            review: true,
            ..invocation("shell_command", &ws)
        })
        .await
        .unwrap();
    let SpawnResult::Ran(process) = r else {
        panic!("expected ran, got {r:?}");
    };
    let set = process.change_set.expect("the change set");
    assert_eq!(
        set.added,
        vec![ws.join("a.txt").to_string_lossy().into_owned()]
    );
    assert_eq!(
        set.deleted,
        vec![ws.join("b.txt").to_string_lossy().into_owned()]
    );
    assert!(!ws.join("a.txt").exists() && ws.join("b.txt").exists());

    let store = Store::open(dir.join("audit.db").to_string_lossy().into_owned(), None).unwrap();
    let shown: serde_json::Value =
        serde_json::from_str(&store.change_set(set.id.clone()).unwrap()).unwrap();
    assert_eq!(shown["changes"].as_array().unwrap().len(), 2);
    let options = ApplyOptions {
        confirm_asks: false,
        by: Some("person:ana".to_owned()),
    };
    let applied: serde_json::Value = serde_json::from_str(
        &store
            .apply_change_set(set.id.clone(), options.clone())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(applied["status"], "applied");
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "new\n");
    let again = store.apply_change_set(set.id.clone(), options).unwrap_err();
    assert!(
        matches!(&again, TurnGateError::Changes { code, .. } if code == "not_pending"),
        "{again:?}"
    );
    let bad = store.change_set("../x".to_owned()).unwrap_err();
    assert!(
        matches!(&bad, TurnGateError::Changes { code, .. } if code == "bad_id"),
        "{bad:?}"
    );
}
