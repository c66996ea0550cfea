//! Runs the language-neutral tooling vectors in `tests/conformance/`: suites `policy_turn`
//! (turn-aware rules and log-only layers), `policy_lint` and `replay`. Every binding that
//! exposes the tooling runs the same files.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Value, json};
use turngate::audit::TurnPermissionAuditEvent;
use turngate::policy::{TurnAction, TurnHistory};
use turngate::tooling::{ReplayOptions, lint, replay_events};
use turngate::{Action, PermissionMode, Policy};

fn vectors(suite: &str) -> Vec<(String, Value)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/conformance");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        if doc["suite"] != suite {
            continue;
        }
        for (i, v) in doc["vectors"].as_array().unwrap().iter().enumerate() {
            out.push((format!("{}#{i}", file.display()), v.clone()));
        }
    }
    assert!(!out.is_empty(), "no vectors for suite {suite}");
    out
}

fn builtin(name: &str) -> Policy {
    match name {
        "default" => Policy::default(),
        "permissive" => Policy::permissive(),
        mode => mode.parse::<PermissionMode>().unwrap().policy(),
    }
}

fn policy_of(v: &Value) -> Policy {
    match v {
        Value::String(name) => builtin(name),
        other => Policy::from_json_value(other.clone()).unwrap_or_else(|e| panic!("{e}")),
    }
}

/// `builtin`, then `policy` (or `policy_toml`) merged over it, then `contain`s.
fn build(v: &Value) -> Policy {
    let own = match (&v["policy"], &v["policy_toml"]) {
        (Value::Null, Value::String(t)) => Some(Policy::from_toml_str(t, None).unwrap()),
        (Value::Null, _) => None,
        (p, _) => Some(policy_of(p)),
    };
    let mut policy = match (&v["builtin"], own) {
        (Value::String(b), Some(p)) => builtin(b).merge(p),
        (Value::String(b), None) => builtin(b),
        (Value::Null, Some(p)) => p,
        (other, _) => panic!("bad builtin {other}"),
    };
    for c in v["contain"].as_array().into_iter().flatten() {
        policy = policy.contain(policy_of(c));
    }
    policy
}

/// The decision's time in every `policy_turn` vector: history is given in seconds before it.
const NOW_US: i64 = 1_796_115_600_000_000;

fn report(failures: &[String], total: usize) {
    assert!(
        failures.is_empty(),
        "{} of {total} failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn policy_turn_vectors() {
    let all = vectors("policy_turn");
    let mut failures = Vec::new();
    for (name, v) in &all {
        let policy = build(v).compile().unwrap_or_else(|e| panic!("{name}: {e}"));
        let turn = TurnHistory {
            actions: v["history"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| TurnAction {
                    kind: serde_json::from_value(h["kind"].clone()).unwrap(),
                    target: h["target"].as_str().unwrap().to_owned(),
                    tool: h["tool"].as_str().map(str::to_owned),
                    at_us: NOW_US - h["seconds_ago"].as_i64().unwrap_or(0) * 1_000_000,
                })
                .collect(),
            now_us: NOW_US,
            workspace: None,
        };
        let action: Action = serde_json::from_value(v["action"].clone()).unwrap();
        let verdict = policy.with_turn(Arc::new(turn.clone())).explain(&action);
        assert_eq!(verdict, policy.explain_in_turn(&action, &turn), "{name}");
        let mut got = json!({
            "effect": verdict.effect,
            "layer": &*verdict.layer,
            "rule": verdict.rule.as_ref().map(|r| r.pattern.clone()),
            "reason": verdict.reason,
        });
        if let Some(c) = &verdict.condition {
            got["condition"] = serde_json::to_value(c).unwrap();
        }
        if let Some(w) = &verdict.would {
            got["would"] = serde_json::to_value(w).unwrap();
        }
        if got != v["expect"] {
            failures.push(format!(
                "{name} ({}):\n  expected {}\n  got      {got}",
                v["why"], v["expect"]
            ));
        }
    }
    report(&failures, all.len());
}

#[test]
fn policy_lint_vectors() {
    let all = vectors("policy_lint");
    let mut failures = Vec::new();
    for (name, v) in &all {
        let policy = build(v);
        policy.compile().unwrap_or_else(|e| panic!("{name}: {e}"));
        let got: Vec<Value> = lint(&policy)
            .iter()
            .map(|f| json!({"code": f.code, "path": f.path}))
            .collect();
        if Value::Array(got.clone()) != v["expect"] {
            failures.push(format!(
                "{name} ({}):\n  expected {}\n  got      {}",
                v["why"],
                v["expect"],
                Value::Array(got)
            ));
        }
    }
    report(&failures, all.len());
}

#[test]
fn replay_vectors() {
    let all = vectors("replay");
    let mut failures = Vec::new();
    for (name, v) in &all {
        let policy = build(v).compile().unwrap_or_else(|e| panic!("{name}: {e}"));
        let events: Vec<TurnPermissionAuditEvent> =
            serde_json::from_value(v["events"].clone()).unwrap();
        let options: ReplayOptions = match &v["options"] {
            Value::Null => ReplayOptions::default(),
            o => serde_json::from_value(o.clone()).unwrap(),
        };
        let got = serde_json::to_value(replay_events(&events, &policy, &options)).unwrap();
        if got != v["expect"] {
            failures.push(format!(
                "{name} ({}):\n  expected {}\n  got      {got}",
                v["why"], v["expect"]
            ));
        }
    }
    report(&failures, all.len());
}
