//! Runs the `store` conformance vectors (`tests/conformance/store.json`): a store (in memory
//! or a file, with a durability name), a gate on it, and steps that authorize, resolve a
//! deferred request through the store (this handle or a second connection on the file), wait
//! for it and resume it with the recorded decision -> each step's result or error kind, and
//! the audit rows. The Python, Node and Swift suites run the same vectors.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use turngate_ffi::{
    ApproverHandle, GateHandle, InvocationRecord, StoreHandle, TurnGateError, snapshot,
};

fn vectors() -> Vec<(String, Value)> {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/conformance/store.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(doc["suite"], "store");
    doc["vectors"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, v)| (format!("store.json#{i}"), v.clone()))
        .collect()
}

fn workspace(v: &Value) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, content) in v["files"].as_object().into_iter().flatten() {
        std::fs::write(dir.path().join(path), content.as_str().unwrap()).unwrap();
    }
    dir
}

/// The vector's store path: `:memory:` as is, a file name inside `dir`.
fn store_path(v: &Value, dir: &Path) -> String {
    match v["store"]["path"].as_str().unwrap() {
        ":memory:" => ":memory:".to_owned(),
        name => dir.join(name).to_string_lossy().into_owned(),
    }
}

/// An error against `{"kind", "includes"?}`.
fn error_mismatch(want: &Value, got: &TurnGateError) -> Option<String> {
    if want["kind"] != got.kind() {
        return Some(format!(
            "error kind: expected {}, got {got:?}",
            want["kind"]
        ));
    }
    for part in want["includes"].as_array().into_iter().flatten() {
        if !got.message().contains(part.as_str().unwrap()) {
            return Some(format!("error does not say {part}: {got:?}"));
        }
    }
    None
}

/// A result against the step's `expect`: each key equal, `target_rel` a path in the workspace.
fn result_mismatches(want: &Value, got: &Value, root: &Path) -> Vec<String> {
    let mut bad = Vec::new();
    for (key, w) in want.as_object().into_iter().flatten() {
        let (key, w) = match key.as_str() {
            "target_rel" => ("target", json!(root.join(w.as_str().unwrap()))),
            "rows" => {
                let n = got.as_array().map(Vec::len);
                if Some(w.as_u64().unwrap() as usize) != n {
                    bad.push(format!("rows: expected {w}, got {got}"));
                }
                continue;
            }
            other => (other, w.clone()),
        };
        if got[key] != w {
            bad.push(format!("{key}: expected {w}, got {}", got[key]));
        }
    }
    bad
}

/// The request id a step names: its own `request_id`, or the deferral of step `request_of`.
fn request_id(step: &Value, results: &[Value]) -> String {
    match step.get("request_of") {
        Some(i) => results[i.as_u64().unwrap() as usize]["request"]["id"]
            .as_str()
            .unwrap_or("no-such-request")
            .to_owned(),
        None => step["request_id"].as_str().unwrap().to_owned(),
    }
}

/// A wait's result as the vectors compare it: `resolution` is the recorded resolution's name
/// (or null while pending).
fn waited(approval: Value) -> Value {
    json!({"resolution": approval["resolution"]["resolution"]})
}

async fn step(
    v: &Value,
    s: &Value,
    results: &[Value],
    gates: &[Arc<GateHandle>],
    store: &StoreHandle,
    path: &str,
) -> Result<Value, TurnGateError> {
    let gate = if s["turn"] == "turn-2" {
        &gates[1]
    } else {
        &gates[0]
    };
    match s["op"].as_str().unwrap() {
        "authorize" => {
            let inv = InvocationRecord {
                kind: s["kind"].as_str().unwrap().to_owned(),
                target: s["target"].as_str().unwrap().to_owned(),
                tool: None,
                item_id: None,
                tool_id: None,
                cwd: None,
                review: false,
            };
            Ok(serde_json::to_value(gate.authorize(&inv).await?).unwrap())
        }
        "resolve" => {
            let second;
            let via = if s["via"] == "second_connection" {
                second = StoreHandle::open(path)?;
                &second
            } else {
                store
            };
            let r = via.resolve(
                &request_id(s, results),
                s["resolution"].as_str().unwrap(),
                s["reason"].as_str().unwrap(),
            )?;
            Ok(serde_json::to_value(r).unwrap())
        }
        "wait" => {
            let id = request_id(s, results);
            let timeout = s["timeout_ms"].as_u64().or(Some(5_000));
            Ok(waited(gate.wait_resolved(&id, timeout).await?))
        }
        "resume" => {
            let auth = gate.resume_recorded(&request_id(s, results))?;
            Ok(serde_json::to_value(auth).unwrap())
        }
        "replay_fresh_memory" => StoreHandle::memory()?.replay("turn-1"),
        other => panic!("{}: unknown op {other}", v["why"]),
    }
}

async fn run_vector(name: &str, v: &Value) -> Vec<String> {
    let mut failures = Vec::new();
    let ws = workspace(v);
    let root = ws.path().canonicalize().unwrap();
    let state = tempfile::tempdir().unwrap();
    let path = store_path(v, state.path());
    let durability = v["store"]["durability"].as_str();
    let store = match (
        StoreHandle::open_durable(&path, durability),
        v.get("expect_open_error"),
    ) {
        (Ok(_), Some(want)) => return vec![format!("{name}: opened, expected {want}")],
        (Err(e), Some(want)) => {
            failures.extend(error_mismatch(want, &e).map(|b| format!("{name}: {b}")));
            if let Some(file) = v["expect_no_file"].as_str()
                && state.path().join(file).exists()
            {
                failures.push(format!("{name}: {file} was created"));
            }
            return failures;
        }
        (Err(e), None) => return vec![format!("{name}: open failed: {e:?}")],
        (Ok(store), None) => store,
    };
    let platform = serde_json::to_value(turngate::probe::probe_platform()).unwrap();
    let ctx = json!({"workspace_root": root, "execution_backend": "native", "platform": platform});
    let snap = snapshot::resolve(Some(v["selection"].clone()), ctx, None).unwrap();
    let approver = ApproverHandle::builtin(v["approver"].as_str().unwrap()).unwrap();
    let gates: Vec<Arc<GateHandle>> = ["turn-1", "turn-2"]
        .iter()
        .map(|t| GateHandle::new(t, snap.clone(), &store, &approver, None).unwrap())
        .collect();
    let mut results = Vec::new();
    for (i, s) in v["steps"].as_array().unwrap().iter().enumerate() {
        let got = step(v, s, &results, &gates, &store, &path).await;
        let why = &v["why"];
        match (got, s.get("expect_error")) {
            (Ok(got), None) => {
                for b in result_mismatches(&s["expect"], &got, &root) {
                    failures.push(format!("{name} step {i} ({why}): {b}\n  got {got}"));
                }
                results.push(got);
            }
            (Err(e), Some(want)) => {
                failures.extend(
                    error_mismatch(want, &e).map(|b| format!("{name} step {i} ({why}): {b}")),
                );
                results.push(Value::Null);
            }
            (Ok(got), Some(want)) => {
                failures.push(format!(
                    "{name} step {i} ({why}): expected {want}, got {got}"
                ));
                results.push(got);
            }
            (Err(e), None) => {
                failures.push(format!("{name} step {i} ({why}): {e:?}"));
                return failures;
            }
        }
    }
    if let Some(want) = v.get("expect_audit") {
        let rows = store.replay("turn-1").unwrap();
        let kinds: Vec<Value> = rows
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["kind"].clone())
            .collect();
        if &Value::Array(kinds.clone()) != want {
            failures.push(format!("{name}: audit: expected {want}, got {kinds:?}"));
        }
    }
    failures
}

#[tokio::test]
async fn store_vectors() {
    let mut failures = Vec::new();
    let vs = vectors();
    assert!(vs.len() >= 10, "the store suite lost vectors");
    for (name, v) in &vs {
        failures.extend(run_vector(name, v).await);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
