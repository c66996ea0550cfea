//! The facade converts and never decides: its answers equal the core's, and its errors keep
//! the core's message and the fields a caller acts on.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;
use turngate_ffi::{ActionRecord, Effect, PolicyHandle, TurnGateError, snapshot};

#[test]
fn check_and_explain_agree_with_the_core() {
    let handle = PolicyHandle::tiered(None, None).unwrap();
    let core = turngate::Policy::default().compile().unwrap();
    for (kind, target) in [
        ("file_read", "src/lib.rs"),
        ("file_read", "config/.env"),
        ("file_write", "src/lib.rs"),
        ("shell_command", "rustc --version"),
        ("network", "example.com:443"),
    ] {
        let k: turngate::ActionKind = kind.parse().unwrap();
        let want = core.explain_parts(k, target, None);
        let got = handle.explain(kind, target, None).unwrap();
        assert_eq!(got.effect, want.effect, "{kind} {target}");
        assert_eq!(got.layer, &*want.layer, "{kind} {target}");
        assert_eq!(got.reason, want.reason.as_str(), "{kind} {target}");
        assert_eq!(handle.check(kind, target, None).unwrap(), want.effect);
    }
    let v = handle.explain("file_read", "config/.env", None).unwrap();
    assert_eq!(v.rule.unwrap().pattern, ".env");
}

#[test]
fn an_unknown_kind_is_a_policy_error_naming_it() {
    let handle = PolicyHandle::permissive().unwrap();
    let err = handle.check("file_raed", "x", None).unwrap_err();
    assert!(matches!(err, TurnGateError::Policy { .. }));
    assert!(err.message().contains("file_raed"), "{err}");
    let err = handle
        .check_batch(&[
            ActionRecord {
                kind: "file_read".into(),
                target: "a".into(),
                tool: None,
            },
            ActionRecord {
                kind: "nope".into(),
                target: "b".into(),
                tool: None,
            },
        ])
        .unwrap_err();
    assert!(err.message().contains("actions[1].kind"), "{err}");
}

#[test]
fn a_parse_error_keeps_path_line_and_column() {
    let err = PolicyHandle::from_json("{\"defaults\": {\"file_read\": \"maybe\"}}", Some("p.json"))
        .unwrap_err();
    let TurnGateError::Policy {
        path, line, column, ..
    } = &err
    else {
        panic!("{err:?}");
    };
    assert_eq!(path.as_deref(), Some("defaults.file_read"));
    assert_eq!(*line, Some(1));
    assert!(column.is_some());
    assert!(err.message().contains("p.json"), "{err}");
}

#[test]
fn merge_and_contain_never_loosen() {
    let supervised = PolicyHandle::from_mode("supervised").unwrap();
    let loose = PolicyHandle::permissive().unwrap();
    let merged = supervised.merge(&loose).unwrap();
    assert_eq!(
        merged.check("file_write", "a.txt", None).unwrap(),
        Effect::Ask
    );
    let capped = loose.contain(&supervised).unwrap();
    assert_eq!(
        capped.check("file_write", "a.txt", None).unwrap(),
        Effect::Ask
    );
    let denied = loose
        .with_rule("file_write", "deny", "secrets/*", None, Some("project"))
        .unwrap();
    let v = denied.explain("file_write", "secrets/key", None).unwrap();
    assert_eq!((v.effect, v.layer.as_str()), (Effect::Deny, "project"));
    assert!(PolicyHandle::from_mode("yolo").is_err());
}

#[test]
fn snapshot_functions_take_and_return_protocol_json() {
    let platform = snapshot::probe_platform().unwrap();
    let context = json!({
        "workspace_root": "/tmp",
        "execution_backend": "native",
        "platform": platform,
    });
    let s = snapshot::resolve(None, context.clone(), None).unwrap();
    assert_eq!(s["permission_profile"]["mode"], "full_access");
    let err = snapshot::resolve(Some(json!({"mode": "nope"})), context, None).unwrap_err();
    assert!(matches!(err, TurnGateError::InvalidInput { .. }), "{err:?}");
    assert!(err.message().starts_with("selection:"), "{err}");
    let mapping = snapshot::map_cli_runtime("codex", "supervised").unwrap();
    assert!(mapping.is_object());
    assert!(snapshot::schema("Policy").is_ok());
    assert!(
        snapshot::schema("Nope")
            .unwrap_err()
            .message()
            .contains("Nope")
    );
}

#[test]
fn a_bad_policy_in_a_selection_is_a_policy_error_naming_the_field() {
    let context = json!({
        "workspace_root": "/tmp",
        "execution_backend": "native",
        "platform": snapshot::probe_platform().unwrap(),
    });
    let selection = json!({"mode": "supervised", "policy": {"layers": [{"name": "p", "rules": [
        {"kind": "file_read", "effect": "deny", "pattern": "a[b"}]}]}});
    let err = snapshot::resolve(Some(selection), context, None).unwrap_err();
    assert!(matches!(err, TurnGateError::Policy { .. }), "{err:?}");
    assert!(err.message().contains("selection.policy"), "{err}");
}

#[test]
fn evaluate_reuses_a_snapshot_only_while_it_is_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = json!({"workspace_root": dir.path(), "execution_backend": "native",
        "platform": {"os": "linux", "landlock_abi": 7, "seccomp": true, "user_namespaces": true,
                     "seatbelt": false, "restricted_token": false}});
    let snap = snapshot::resolve(Some(json!({"mode": "supervised"})), ctx, None).unwrap();
    let inv = turngate_ffi::InvocationRecord {
        kind: "file_write".into(),
        target: "a.txt".into(),
        ..Default::default()
    };
    let first = turngate_ffi::check::evaluate(snap.clone(), &inv).unwrap();
    assert_eq!(first.verdict.effect, Effect::Ask);
    assert_eq!(
        turngate_ffi::check::evaluate(snap.clone(), &inv).unwrap(),
        first
    );
    // The same snapshot with one more deny rule: the cached policy must not answer for it.
    let mut denying = snap;
    let policy =
        PolicyHandle::from_json_value(denying["permission_profile"]["effective_policy"].clone())
            .unwrap()
            .with_rule("file_write", "deny", "**/a.txt", None, Some("extra"))
            .unwrap();
    denying["permission_profile"]["effective_policy"] = policy.to_json_value().unwrap();
    let denied = turngate_ffi::check::evaluate(denying, &inv).unwrap();
    assert_eq!(denied.verdict.effect, Effect::Deny, "{denied:?}");
}
