//! Runs the `tools` conformance vectors (`tests/conformance/tools.json`): a turn's selection,
//! an approver, a workspace, and guarded tool calls (some continuing an earlier call's
//! deferral with `approval`) -> each call's `ToolOutcome` and the files left behind. The
//! Python and Node suites run the same vectors through their `Gate` methods.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use turngate_ffi::tools::{
    ApprovalRecord, ShellOptionsRecord, ToolCallRecord, ToolOutcomeRecord, ToolStep,
};
use turngate_ffi::{ApproverHandle, GateHandle, StoreHandle, snapshot};

fn vectors() -> Vec<(String, Value)> {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/conformance/tools.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(doc["suite"], "tools");
    doc["vectors"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, v)| (format!("tools.json#{i}"), v.clone()))
        .collect()
}

fn workspace(v: &Value) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, content) in v["files"].as_object().into_iter().flatten() {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content.as_str().unwrap()).unwrap();
    }
    for (link, target) in v["symlinks"].as_object().into_iter().flatten() {
        let p = dir.path().join(link);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target.as_str().unwrap(), p).unwrap();
    }
    dir
}

/// The step's `approval`: `request_of` names an earlier step whose deferral it continues.
fn approval(step: &Value, outcomes: &[ToolOutcomeRecord]) -> Option<ApprovalRecord> {
    let a = step.get("approval")?;
    let id = match a.get("request_of") {
        Some(i) => outcomes[i.as_u64().unwrap() as usize]
            .request_id
            .clone()
            .unwrap_or_else(|| "no-such-request".to_owned()),
        None => a["request_id"].as_str().unwrap().to_owned(),
    };
    Some(ApprovalRecord::named(&id, a["decision"].as_str().unwrap()).unwrap())
}

async fn call(
    gate: &GateHandle,
    step: &Value,
    outcomes: &[ToolOutcomeRecord],
) -> Result<ToolOutcomeRecord, Failure> {
    let c = ToolCallRecord {
        item_id: step["item_id"].as_str().map(str::to_owned),
        tool: None,
        approval: approval(step, outcomes),
    };
    let s = |k: &str| step[k].as_str().unwrap_or_default().to_owned();
    let r = match step["tool"].as_str().unwrap() {
        "read_file" => {
            gate.read_file(&s("path"), &c, step["max_bytes"].as_u64())
                .await
        }
        "write_file" => {
            gate.write_file(&s("path"), s("content").as_bytes(), &c)
                .await
        }
        "edit_file" => gate.edit_file(&s("path"), &s("old"), &s("new"), &c).await,
        "run_shell" => {
            let opts = ShellOptionsRecord {
                env: step["env"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
                    .collect(),
                timeout_ms: step["timeout_ms"].as_u64(),
                stdin: step["stdin"].as_str().map(|t| t.as_bytes().to_vec()),
                cwd: step["cwd"].as_str().map(str::to_owned),
            };
            gate.run_shell(&s("command"), &opts, &c, None).await
        }
        // Through `call_tool`, as the bindings call it: the request's method and headers are
        // checked from its JSON arguments.
        "fetch_url" => {
            let approval = c.approval.as_ref().map(
                |a| json!({"request_id": a.request_id, "decision": step["approval"]["decision"]}),
            );
            let args = json!({
                "url": s("url"),
                "method": step.get("method"),
                "headers": step.get("headers"),
                "item_id": c.item_id,
                "approval": approval,
            });
            match gate.call_tool("fetch_url", args, None, None).await {
                Ok(ToolStep::Done(o)) => Ok(o),
                Ok(ToolStep::Connect(plan)) => {
                    return Err(Failure::Call(format!(
                        "vectors hold no live fetch, got {plan:?}"
                    )));
                }
                Err(e) => Err(e),
            }
        }
        other => panic!("unknown tool {other}"),
    };
    r.map_err(Failure::Error)
}

/// Why a step gave no outcome: the facade's error (which a step's `expect_error` may
/// expect), or a runner failure.
enum Failure {
    Error(turngate_ffi::TurnGateError),
    Call(String),
}

fn check(want: &Value, got: &ToolOutcomeRecord, root: &Path) -> Vec<String> {
    let mut bad = Vec::new();
    let got_v = serde_json::to_value(got).unwrap();
    for (key, w) in want.as_object().into_iter().flatten() {
        match key.as_str() {
            "tool_result_includes" | "stderr_includes" | "stdout_includes" => {
                let field = key.trim_end_matches("_includes");
                for part in w.as_array().cloned().unwrap_or_else(|| vec![w.clone()]) {
                    let part = part.as_str().unwrap();
                    if !got_v[field].as_str().is_some_and(|t| t.contains(part)) {
                        bad.push(format!("{field} does not say {part:?}"));
                    }
                }
            }
            "target_rel" => {
                let path = root.join(w.as_str().unwrap());
                if got.target != path.to_string_lossy() {
                    bad.push(format!(
                        "target: expected {}, got {}",
                        path.display(),
                        got.target
                    ));
                }
            }
            "has_request" => {
                if got.request.is_some() != w.as_bool().unwrap()
                    || got.request_id.is_some() != w.as_bool().unwrap()
                {
                    bad.push(format!("request present: expected {w}"));
                }
            }
            _ => {
                if &got_v[key.as_str()] != w {
                    bad.push(format!("{key}: expected {w}, got {}", got_v[key.as_str()]));
                }
            }
        }
    }
    bad
}

async fn run_vector(name: &str, v: &Value) -> Vec<String> {
    let mut failures = Vec::new();
    let ws = workspace(v);
    let root = ws.path().canonicalize().unwrap();
    let platform = serde_json::to_value(turngate::probe::probe_platform()).unwrap();
    let ctx = json!({"workspace_root": root, "execution_backend": "native", "platform": platform});
    let snap = snapshot::resolve(Some(v["selection"].clone()), ctx, None).unwrap();
    let state = tempfile::tempdir().unwrap();
    let store = StoreHandle::open(&state.path().join("audit.db").to_string_lossy()).unwrap();
    let approver = ApproverHandle::builtin(v["approver"].as_str().unwrap()).unwrap();
    let gates: Vec<Arc<GateHandle>> = ["turn-1", "turn-2"]
        .iter()
        .map(|t| GateHandle::new(t, snap.clone(), &store, &approver, None).unwrap())
        .collect();
    let mut outcomes = Vec::new();
    for (i, step) in v["steps"].as_array().unwrap().iter().enumerate() {
        let gate = if step["turn"] == "turn-2" {
            &gates[1]
        } else {
            &gates[0]
        };
        let result = call(gate, step, &outcomes).await;
        if let Some(want) = step.get("expect_error") {
            match result {
                Err(Failure::Error(e)) => {
                    if e.kind() != want["kind"] {
                        failures.push(format!(
                            "{name} step {i}: expected a {want} error, got {e:?}"
                        ));
                    }
                    let text = e.to_string();
                    for part in want["includes"].as_array().into_iter().flatten() {
                        if !text.contains(part.as_str().unwrap()) {
                            failures.push(format!(
                                "{name} step {i}: the error does not say {part}: {text}"
                            ));
                        }
                    }
                }
                Ok(got) => failures.push(format!("{name} step {i}: expected {want}, got {got:?}")),
                Err(Failure::Call(e)) => failures.push(format!("{name} step {i}: {e}")),
            }
            // A refused call has no outcome for later steps to name; keep the indices.
            outcomes.push(ToolOutcomeRecord {
                outcome: "error".to_owned(),
                tool_result: String::new(),
                kind: String::new(),
                target: String::new(),
                request_id: None,
                request: None,
                content: None,
                exit_code: None,
                stdout: None,
                stderr: None,
                status: None,
            });
            continue;
        }
        match result {
            Ok(got) => {
                for b in check(&step["expect"], &got, &root) {
                    failures.push(format!(
                        "{name} step {i} ({}): {b}\n  got {got:?}",
                        v["why"]
                    ));
                }
                outcomes.push(got);
            }
            Err(Failure::Error(e)) => {
                failures.push(format!("{name} step {i} ({}): error: {e}", v["why"]));
                return failures;
            }
            Err(Failure::Call(e)) => {
                failures.push(format!("{name} step {i} ({}): {e}", v["why"]));
                return failures;
            }
        }
    }
    for (path, want) in v["expect_files"].as_object().into_iter().flatten() {
        let got = std::fs::read_to_string(root.join(path)).ok();
        if got.as_deref() != want.as_str() {
            failures.push(format!(
                "{name} ({}): file {path}: expected {want}, got {got:?}",
                v["why"]
            ));
        }
    }
    if let Some(want) = v.get("expect_item_ids") {
        let rows = store.replay("turn-1").unwrap();
        let ids: Vec<Value> = rows
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] != "profile_selected")
            .map(|e| e["item_id"].clone())
            .collect();
        if &Value::Array(ids.clone()) != want {
            failures.push(format!(
                "{name}: audit item ids: expected {want}, got {ids:?}"
            ));
        }
    }
    failures
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_vectors() {
    let all = vectors();
    let mut failures = Vec::new();
    for (name, v) in &all {
        failures.extend(run_vector(name, v).await);
    }
    assert!(
        failures.is_empty(),
        "{} failures over {} vectors:\n{}",
        failures.len(),
        all.len(),
        failures.join("\n")
    );
}
