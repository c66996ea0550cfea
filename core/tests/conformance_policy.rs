//! Runs the language-neutral policy vectors in `tests/conformance/` (suites `policy` and
//! `policy_serde`). Every binding runs the same files.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use serde_json::{Value, json};
use turngate::{Action, PermissionMode, Policy};

fn conformance_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/conformance")
}

/// Every vector of every file whose `suite` is `suite`.
fn vectors(suite: &str) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(conformance_dir())
        .expect("conformance dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    for file in files {
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).expect("read"))
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        if doc["suite"] != suite {
            continue;
        }
        for (i, v) in doc["vectors"]
            .as_array()
            .expect("vectors")
            .iter()
            .enumerate()
        {
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
        mode => mode
            .parse::<PermissionMode>()
            .unwrap_or_else(|e| panic!("{e}"))
            .policy(),
    }
}

fn policy_of(v: &Value) -> Policy {
    match v {
        Value::String(name) => builtin(name),
        other => Policy::from_json_value(other.clone()).unwrap_or_else(|e| panic!("{e}")),
    }
}

/// The base policy of a vector: `builtin`, then `policy` merged over it, then `merge`s, then
/// `contain`s.
fn build(v: &Value) -> Policy {
    let mut policy = match (&v["builtin"], &v["policy"]) {
        (Value::String(b), Value::Null) => builtin(b),
        (Value::String(b), p) => builtin(b).merge(policy_of(p)),
        (Value::Null, p) => policy_of(p),
        (other, _) => panic!("bad builtin {other}"),
    };
    for m in v["merge"].as_array().into_iter().flatten() {
        policy = policy.merge(policy_of(m));
    }
    for c in v["contain"].as_array().into_iter().flatten() {
        policy = policy.contain(policy_of(c));
    }
    policy
}

#[test]
fn policy_vectors() {
    let mut failures = Vec::new();
    let all = vectors("policy");
    for (name, v) in &all {
        let why = v["why"].as_str().unwrap_or_default();
        let policy = build(v).compile().unwrap_or_else(|e| panic!("{name}: {e}"));
        let action: Action = serde_json::from_value(v["action"].clone()).expect("action");
        let verdict = policy.explain(&action);
        let got = json!({
            "effect": verdict.effect,
            "layer": &*verdict.layer,
            "rule": verdict.rule.as_ref().map(|r| r.pattern.clone()),
            "reason": verdict.reason,
        });
        // `check` is `explain(..).effect`: they must never disagree.
        assert_eq!(policy.check(&action), verdict.effect, "{name}");
        if got != v["expect"] {
            failures.push(format!(
                "{name} ({why}):\n  expected {}\n  got      {got}",
                v["expect"]
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} failed:\n{}",
        failures.len(),
        all.len(),
        failures.join("\n")
    );
}

#[test]
fn policy_serde_vectors() {
    let mut failures = Vec::new();
    let all = vectors("policy_serde");
    for (name, v) in &all {
        let why = v["why"].as_str().unwrap_or_default();
        let text = v["text"].as_str().expect("text");
        let parsed = match v["format"].as_str() {
            Some("json") => Policy::from_json_str(text, None),
            Some("toml") => Policy::from_toml_str(text, None),
            other => panic!("{name}: bad format {other:?}"),
        };
        match (parsed, &v["expect_policy"], &v["expect_error"]) {
            (Ok(p), want, Value::Null) => {
                let got = serde_json::to_value(&p).expect("serialize");
                if &got != want {
                    failures.push(format!("{name} ({why}): expected {want}, got {got}"));
                }
                // Round trip through both formats.
                let again =
                    Policy::from_json_str(&p.to_json_string(), None).expect("json round trip");
                assert_eq!(again, p, "{name}: json round trip");
                let toml = p.to_toml_string().expect("to toml");
                let again = Policy::from_toml_str(&toml, None)
                    .unwrap_or_else(|e| panic!("{name}: toml round trip: {e}\n{toml}"));
                assert_eq!(again, p, "{name}: toml round trip");
            }
            (Err(e), Value::Null, want) => {
                let turngate::PolicyError::Parse {
                    path,
                    line,
                    column,
                    message,
                    ..
                } = &e
                else {
                    panic!("{name}: not a parse error: {e}");
                };
                let got = json!({"path": path, "line": line, "column": column});
                let expected =
                    json!({"path": want["path"], "line": want["line"], "column": want["column"]});
                if got != expected {
                    failures.push(format!(
                        "{name} ({why}): expected {expected}, got {got} ({e})"
                    ));
                }
                for needle in want["contains"].as_array().into_iter().flatten() {
                    let needle = needle.as_str().expect("str");
                    if !message.contains(needle) || !e.to_string().contains(needle) {
                        failures.push(format!(
                            "{name} ({why}): message {message:?} lacks {needle:?}"
                        ));
                    }
                }
            }
            (got, _, _) => failures.push(format!("{name} ({why}): unexpected outcome {got:?}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} failed:\n{}",
        failures.len(),
        all.len(),
        failures.join("\n")
    );
}

#[test]
fn every_vector_file_names_its_suite_and_every_vector_says_why() {
    for entry in std::fs::read_dir(conformance_dir()).expect("dir") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("read"))
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(doc["suite"].is_string(), "{}: no suite", path.display());
        let vectors = doc["vectors"]
            .as_array()
            .unwrap_or_else(|| panic!("{}: no vectors", path.display()));
        for (i, v) in vectors.iter().enumerate() {
            let why = v["why"].as_str().unwrap_or_default();
            assert!(
                !why.trim().is_empty(),
                "{}#{i}: vector without a why",
                path.display()
            );
        }
    }
}
