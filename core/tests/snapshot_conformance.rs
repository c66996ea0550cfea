//! Runs every `tests/conformance/snapshot_*.json` vector file (suites `snapshot_resolve`,
//! `snapshot_cap`, `snapshot_prompt`, `snapshot_runtime`) and fails on any difference.
//! The formats are described in `tests/conformance/README.md`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use serde_json::Value;
use turngate::PermissionMode;
use turngate::protocol::{
    CapOrigin, CliRuntime, TaskAgentSecurityCap, TurnPermissionProfileSelection,
};
use turngate::snapshot::{
    ResolveContext, SnapshotError, cap_from_parent, ensure_native_shell_allowed, map_cli_runtime,
    render_permissions_section, resolve,
};

fn conformance_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/conformance")
}

/// `expect` matches `actual` when every key of an expected object matches, arrays have the same
/// length and match element-wise, and scalars are equal.
fn subset(expect: &Value, actual: &Value, path: &str) -> Result<(), String> {
    match (expect, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (k, ev) in e {
                let av = a.get(k).unwrap_or(&Value::Null);
                subset(ev, av, &format!("{path}.{k}"))?;
            }
            Ok(())
        }
        (Value::Array(e), Value::Array(a)) => {
            if e.len() != a.len() {
                return Err(format!(
                    "{path}: expected {} elements, got {}: {}",
                    e.len(),
                    a.len(),
                    actual
                ));
            }
            for (i, (ev, av)) in e.iter().zip(a).enumerate() {
                subset(ev, av, &format!("{path}[{i}]"))?;
            }
            Ok(())
        }
        _ if expect == actual => Ok(()),
        _ => Err(format!("{path}: expected {expect}, got {actual}")),
    }
}

/// The vector with `{tmp}` replaced by a fresh temporary directory in every string, and every
/// path of its `dirs` created there (snapshot roots must exist). The directory lives as long as
/// the returned guard.
fn materialize(v: &Value) -> (Value, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let base = serde_json::to_string(base.to_str().unwrap()).unwrap();
    let text = serde_json::to_string(v)
        .unwrap()
        .replace("{tmp}", &base[1..base.len() - 1]);
    let v: Value = serde_json::from_str(&text).unwrap();
    for dir in v
        .get("dirs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        std::fs::create_dir_all(dir.as_str().expect("dirs are strings")).unwrap();
    }
    (v, tmp)
}

fn selection(v: &Value) -> Option<TurnPermissionProfileSelection> {
    match v.get("selection") {
        None | Some(Value::Null) => None,
        Some(s) => Some(serde_json::from_value(s.clone()).expect("selection")),
    }
}

fn context(v: &Value) -> ResolveContext {
    serde_json::from_value(v["context"].clone()).expect("context")
}

fn shell_outcome(r: Result<(), SnapshotError>) -> &'static str {
    match r {
        Ok(()) => "allowed",
        Err(SnapshotError::ProviderNativeOnNativeShell { .. }) => "provider_native_on_native_shell",
        Err(SnapshotError::SandboxUnavailable { .. }) => "sandbox_unavailable",
        Err(_) => "other_error",
    }
}

/// The cap of a vector: `cap` given literally, or `cap_from_parent` resolved from a parent.
fn cap_of(v: &Value) -> Option<TaskAgentSecurityCap> {
    if let Some(cap) = v.get("cap") {
        return Some(serde_json::from_value(cap.clone()).expect("cap"));
    }
    let parent = v.get("cap_from_parent")?;
    let parent_snapshot =
        resolve(selection(parent).as_ref(), &context(parent), None).expect("parent resolves");
    let origin: CapOrigin = serde_json::from_value(parent["origin"].clone()).expect("origin");
    Some(cap_from_parent(&parent_snapshot, origin))
}

fn run_vector(suite: &str, v: &Value) -> Result<(), String> {
    match suite {
        "snapshot_resolve" | "snapshot_cap" => {
            let cap = cap_of(v);
            let result = resolve(selection(v).as_ref(), &context(v), cap.as_ref());
            match (result, v.get("expect_error")) {
                (Err(e), Some(needle)) => {
                    let needle = needle.as_str().unwrap_or_default();
                    if e.to_string().contains(needle) {
                        Ok(())
                    } else {
                        Err(format!("error `{e}` does not name `{needle}`"))
                    }
                }
                (Err(e), None) => Err(format!("unexpected error: {e}")),
                (Ok(s), Some(needle)) => Err(format!(
                    "expected an error naming `{needle}`, got a snapshot: {}",
                    serde_json::to_string(&s).unwrap()
                )),
                (Ok(s), None) => {
                    let actual = serde_json::to_value(&s).unwrap();
                    subset(&v["expect"], &actual, "snapshot")?;
                    let back: turngate::protocol::TurnExecutionSecuritySnapshot =
                        serde_json::from_value(actual).map_err(|e| e.to_string())?;
                    if back != s {
                        return Err("snapshot does not round-trip through JSON".into());
                    }
                    if let Some(expected) = v.get("native_shell") {
                        let got = shell_outcome(ensure_native_shell_allowed(&s));
                        if expected != got {
                            return Err(format!("native_shell: expected {expected}, got {got}"));
                        }
                    }
                    Ok(())
                }
            }
        }
        "snapshot_prompt" => {
            let cap = cap_of(v);
            let s = resolve(selection(v).as_ref(), &context(v), cap.as_ref())
                .map_err(|e| e.to_string())?;
            let got =
                serde_json::to_value(render_permissions_section(&s.permission_profile)).unwrap();
            if let Some(expected) = v.get("expect") {
                if *expected != got {
                    return Err(format!("expected {expected}\n got {got}"));
                }
            }
            if let Some(needles) = v.get("expect_contains").and_then(Value::as_array) {
                let text = got.as_str().ok_or("expected a section, got none")?;
                for n in needles {
                    let n = n.as_str().unwrap_or_default();
                    if !text.contains(n) {
                        return Err(format!("section does not contain `{n}`:\n{text}"));
                    }
                }
            }
            Ok(())
        }
        "snapshot_runtime" => {
            let runtime: CliRuntime = serde_json::from_value(v["runtime"].clone()).unwrap();
            let mode: PermissionMode = serde_json::from_value(v["mode"].clone()).unwrap();
            let got = serde_json::to_value(map_cli_runtime(runtime, mode)).unwrap();
            subset(&v["expect"], &got, "mapping")
        }
        other => Err(format!("unknown suite `{other}`")),
    }
}

#[test]
fn snapshot_conformance_vectors() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(conformance_dir())
        .expect("tests/conformance exists")
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "json")
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("snapshot_"))
        })
        .collect();
    files.sort();
    let mut suites = Vec::new();
    let mut failures = Vec::new();
    let mut count = 0;
    for file in &files {
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let suite = doc["suite"].as_str().expect("suite").to_owned();
        let vectors = doc["vectors"].as_array().expect("vectors");
        assert!(!vectors.is_empty(), "{}: no vectors", file.display());
        for (i, v) in vectors.iter().enumerate() {
            let why = v["why"]
                .as_str()
                .unwrap_or_else(|| panic!("{}: vector {i} has no `why`", file.display()));
            count += 1;
            let (v, _tmp) = materialize(v);
            if let Err(e) = run_vector(&suite, &v) {
                failures.push(format!("{} [{i}] {why}:\n  {e}", file.display()));
            }
        }
        suites.push(suite);
    }
    for required in [
        "snapshot_resolve",
        "snapshot_cap",
        "snapshot_prompt",
        "snapshot_runtime",
    ] {
        assert!(
            suites.iter().any(|s| s == required),
            "no vector file for suite {required}"
        );
    }
    assert!(
        failures.is_empty(),
        "{} of {count} vectors failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!("{count} snapshot vectors passed");
}
