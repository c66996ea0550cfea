//! Turn-aware rules through the gate (DESIGN §17): `after` applies once the turn had a
//! matching allowed action, `limit` turns an allow into ask past its count, and both survive a
//! gate rebuilt on the same store (a turn resumed elsewhere). A cap's turn-aware rule binds a
//! child turn.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use turngate::approval::{ApproveAll, DenyAll};
use turngate::audit::{AuditEventKind, AuditStore, SqliteAuditStore};
use turngate::gate::{Gate, ToolInvocation};
use turngate::protocol::{
    CapOrigin, TurnExecutionSecuritySnapshot, TurnPermissionProfileSelection,
};
use turngate::snapshot::{ResolveContext, cap_from_parent, resolve};
use turngate::{ActionKind, Effect, PermissionMode, Policy, Reason};

const EXFIL: &str = r#"
[defaults]
network = "allow"

[[layers]]
name = "exfil"
[[layers.rules]]
kind = "network"
effect = "ask"
pattern = "*"
after = {kind = "file_read", pattern = ".env"}
"#;

const LIMITED: &str = r#"
[[layers]]
name = "rate"
[[layers.rules]]
kind = "shell_command"
effect = "allow"
pattern = "rm"
limit = {count = 3, per = "10m"}
"#;

fn snapshot(ws: &Path, mode: PermissionMode, policy: &str) -> TurnExecutionSecuritySnapshot {
    let context = ResolveContext::new(ws, turngate::probe::probe_platform());
    let selection = TurnPermissionProfileSelection {
        mode: Some(mode),
        source: None,
        policy: Some(Policy::from_toml_str(policy, None).unwrap()),
    };
    resolve(Some(&selection), &context, None).unwrap()
}

fn net(url: &str) -> ToolInvocation {
    ToolInvocation::new(ActionKind::Network, url).with_tool("fetch")
}

#[tokio::test]
async fn a_connection_asks_after_the_turn_read_dot_env_and_not_before() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    std::fs::write(ws.join(".env"), "K=v").unwrap();
    std::fs::write(ws.join("README"), "hi").unwrap();
    let store = Arc::new(SqliteAuditStore::open(ws.join("audit.db")).unwrap());
    let snap = snapshot(&ws, PermissionMode::FullAccess, EXFIL);

    // A turn that never read `.env`: the connection is allowed.
    let clean = Gate::new("clean", snap.clone(), store.clone(), Arc::new(DenyAll)).unwrap();
    let read = ToolInvocation::new(ActionKind::FileRead, "README");
    assert!(clean.authorize(&read).await.unwrap().is_allowed());
    assert!(
        clean
            .authorize(&net("https://example.com/"))
            .await
            .unwrap()
            .is_allowed()
    );

    // A turn that read it: the same connection asks (and the deny approver refuses it).
    let gate = Gate::new("tainted", snap, store.clone(), Arc::new(DenyAll)).unwrap();
    let before = gate.evaluate(&net("https://example.com/")).verdict;
    assert_eq!(before.effect, Effect::Allow, "{before:?}");
    let env = ToolInvocation::new(ActionKind::FileRead, ".env");
    assert!(gate.authorize(&env).await.unwrap().is_allowed());
    let after = gate.evaluate(&net("https://example.com/")).verdict;
    assert_eq!((after.effect, after.reason), (Effect::Ask, Reason::AskRule));
    let condition = serde_json::to_value(&after.condition).unwrap();
    assert_eq!(condition["type"], "after");
    assert_eq!(condition["pattern"], ".env");
    assert!(condition["matched"].as_str().unwrap().ends_with("/.env"));
    assert!(
        !gate
            .authorize(&net("https://example.com/"))
            .await
            .unwrap()
            .is_allowed()
    );
    let rows = store.replay("tainted").unwrap();
    assert_eq!(rows.last().unwrap().kind, AuditEventKind::DecisionDenied);
}

#[tokio::test]
async fn a_limit_allows_three_and_asks_the_fourth_also_in_a_gate_rebuilt_on_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    let db = ws.join("audit.db");
    let snap = snapshot(&ws, PermissionMode::FullAccess, LIMITED);
    let rm = |f: &str| ToolInvocation::new(ActionKind::ShellCommand, format!("rm -f {f}"));
    {
        let store = Arc::new(SqliteAuditStore::open(&db).unwrap());
        let gate = Gate::new("t", snap.clone(), store, Arc::new(DenyAll)).unwrap();
        for f in ["a", "b"] {
            let v = gate.evaluate(&rm(f)).verdict;
            assert_eq!((v.effect, v.reason), (Effect::Allow, Reason::AllowRule));
            assert!(gate.authorize(&rm(f)).await.unwrap().is_allowed());
        }
    }
    // Another store handle and another gate for the same turn: the history comes from disk.
    let store = Arc::new(SqliteAuditStore::open(&db).unwrap());
    let gate = Gate::new("t", snap.clone(), store.clone(), Arc::new(DenyAll)).unwrap();
    assert!(gate.authorize(&rm("c")).await.unwrap().is_allowed());
    let fourth = gate.evaluate(&rm("d")).verdict;
    assert_eq!(
        (fourth.effect, fourth.reason),
        (Effect::Ask, Reason::LimitExceeded)
    );
    let condition = serde_json::to_value(&fourth.condition).unwrap();
    assert_eq!(
        condition,
        serde_json::json!({"type": "limit", "count": 3, "per": "10m", "seen": 3})
    );
    assert!(!gate.authorize(&rm("d")).await.unwrap().is_allowed());
    // Another turn has its own count.
    let other = Gate::new("u", snap, store, Arc::new(ApproveAll)).unwrap();
    assert_eq!(other.evaluate(&rm("d")).verdict.effect, Effect::Allow);
}

#[tokio::test]
async fn a_caps_turn_aware_rule_still_binds_a_child_turn() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    std::fs::write(ws.join(".env"), "K=v").unwrap();
    let store = Arc::new(SqliteAuditStore::open(ws.join("audit.db")).unwrap());
    let parent = snapshot(&ws, PermissionMode::FullAccess, EXFIL);
    let cap = cap_from_parent(&parent, CapOrigin::ParentTurn);
    let context = ResolveContext::new(&ws, turngate::probe::probe_platform());
    let selection = TurnPermissionProfileSelection {
        mode: Some(PermissionMode::FullAccess),
        source: None,
        policy: None,
    };
    let child = resolve(Some(&selection), &context, Some(&cap)).unwrap();
    let gate = Gate::new("child", child, store, Arc::new(DenyAll)).unwrap();
    assert_eq!(
        gate.evaluate(&net("https://example.com/")).verdict.effect,
        Effect::Allow
    );
    let env = ToolInvocation::new(ActionKind::FileRead, ".env");
    assert!(gate.authorize(&env).await.unwrap().is_allowed());
    let v = gate.evaluate(&net("https://example.com/")).verdict;
    assert_eq!(v.effect, Effect::Ask, "{v:?}");
}

#[test]
fn a_log_only_layer_reports_what_it_would_decide_without_deciding() {
    let policy = Policy::from_toml_str(
        r#"
[defaults]
shell_command = "allow"
[[layers]]
name = "trial"
enforce = false
[[layers.rules]]
kind = "shell_command"
effect = "deny"
pattern = "curl"
"#,
        None,
    )
    .unwrap()
    .compile()
    .unwrap();
    let v = policy.explain_parts(ActionKind::ShellCommand, "curl x", None);
    assert_eq!(v.effect, Effect::Allow);
    let would = v.would.expect("would");
    assert_eq!(
        (would.effect, would.layer.as_str()),
        (Effect::Deny, "trial")
    );
    assert_eq!(would.rule.as_deref(), Some("curl"));
    assert_eq!(
        policy
            .explain_parts(ActionKind::ShellCommand, "ls", None)
            .would,
        None
    );
}

#[tokio::test]
async fn the_audit_row_records_what_a_log_only_layer_would_have_decided() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    let store = Arc::new(SqliteAuditStore::open(ws.join("audit.db")).unwrap());
    let trial = "[[layers]]\nname = \"trial\"\nenforce = false\n[[layers.rules]]\nkind = \"shell_command\"\neffect = \"deny\"\npattern = \"curl\"\n";
    let snap = snapshot(&ws, PermissionMode::FullAccess, trial);
    let gate = Gate::new("t", snap, store.clone(), Arc::new(DenyAll)).unwrap();
    let curl = ToolInvocation::new(ActionKind::ShellCommand, "curl https://example.com");
    assert!(gate.authorize(&curl).await.unwrap().is_allowed());
    let ls = ToolInvocation::new(ActionKind::ShellCommand, "ls");
    assert!(gate.authorize(&ls).await.unwrap().is_allowed());
    let rows = store.replay("t").unwrap();
    let woulds: Vec<Option<&str>> = rows.iter().skip(1).map(|r| r.would.as_deref()).collect();
    assert_eq!(
        woulds,
        vec![
            Some("deny by rule `curl` (deny_rule) in layer `trial`"),
            None
        ]
    );
}
