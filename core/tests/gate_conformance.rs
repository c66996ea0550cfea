//! Runs the `gate` conformance vectors: a turn's selection, a workspace, and a sequence of tool
//! calls with scripted approval answers -> what the gate decided, whether it asked, whether a
//! cached `allow_for_turn` grant answered, and the durable audit rows it wrote.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use turngate::approval::{
    ApprovalBroker, ApprovalNotification, ApprovalResolution, BrokerApprover,
};
use turngate::audit::{AuditStore, SqliteAuditStore};
use turngate::gate::{Authorization, Gate, ToolInvocation};
use turngate::protocol::{PlatformCapabilities, TurnPermissionProfileSelection};
use turngate::snapshot::{ResolveContext, resolve};

fn vectors() -> Vec<(String, Value)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/conformance");
    let mut out = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    for file in files {
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        if doc["suite"] != "gate" {
            continue;
        }
        for (i, v) in doc["vectors"].as_array().unwrap().iter().enumerate() {
            out.push((format!("{}#{i}", file.display()), v.clone()));
        }
    }
    assert!(!out.is_empty(), "no gate vectors");
    out
}

/// Build the vector's workspace: `files` (path -> content) and `symlinks` (link -> target).
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

async fn run_vector(name: &str, v: &Value) -> Vec<String> {
    let mut failures = Vec::new();
    let ws = workspace(v);
    let root = ws.path().canonicalize().unwrap();
    let platform: PlatformCapabilities = serde_json::from_value(json!({
        "os": "linux", "landlock_abi": 7, "seccomp": true, "user_namespaces": true,
        "seatbelt": false, "restricted_token": false
    }))
    .unwrap();
    let context = ResolveContext::new(&root, platform);
    let selection: Option<TurnPermissionProfileSelection> =
        serde_json::from_value(v["selection"].clone()).unwrap();
    let snapshot = resolve(selection.as_ref(), &context, None).unwrap();
    let store = Arc::new(SqliteAuditStore::open(ws.path().join("audit.db")).unwrap());
    let broker = ApprovalBroker::new(Arc::new(
        snapshot
            .permission_profile
            .effective_policy
            .compile()
            .unwrap(),
    ));
    let approver = Arc::new(BrokerApprover::new(broker.clone(), None));
    let gate = Gate::new("turn-1", snapshot, store.clone(), approver)
        .unwrap()
        .with_broker(broker.clone());

    // The responder: answers each requested approval with the step's scripted answer.
    let answers: Arc<Mutex<VecDeque<ApprovalResolution>>> = Arc::default();
    let asked = Arc::new(Mutex::new(0usize));
    let mut stream = broker.subscribe();
    let responder = {
        let (answers, asked, broker) = (answers.clone(), asked.clone(), broker.clone());
        tokio::spawn(async move {
            while let Some(n) = stream.recv().await {
                if let ApprovalNotification::Requested(r) = n {
                    *asked.lock().unwrap() += 1;
                    let answer = answers
                        .lock()
                        .unwrap()
                        .pop_front()
                        .unwrap_or(ApprovalResolution::Deny);
                    let _ = broker.respond(&r.id, answer);
                }
            }
        })
    };

    for (i, step) in v["steps"].as_array().unwrap().iter().enumerate() {
        let mut inv = ToolInvocation::new(
            serde_json::from_value(step["kind"].clone()).unwrap(),
            step["target"].as_str().unwrap(),
        );
        inv.tool_name = step["tool"].as_str().map(str::to_owned);
        if let Some(answer) = step["answer"].as_str() {
            answers.lock().unwrap().push_back(answer.parse().unwrap());
        }
        let before = *asked.lock().unwrap();
        let got = match gate.authorize(&inv).await.unwrap() {
            Authorization::Allowed {
                cached_approval,
                verdict,
                ..
            } => json!({"outcome": "allowed", "cached": cached_approval, "reason": verdict.reason}),
            Authorization::Denied(d) => json!({
                "outcome": "denied",
                "cached": false,
                "reason": d.verdict.map(|v| v.reason),
                "denial": d.reason,
            }),
            Authorization::Deferred { .. } => json!({"outcome": "deferred", "cached": false}),
        };
        let mut got = got;
        got["asked"] = json!(*asked.lock().unwrap() > before);
        let want = &step["expect"];
        for key in ["outcome", "cached", "asked", "reason"] {
            if want.get(key).is_some() && want[key] != got[key] {
                failures.push(format!(
                    "{name} step {i} ({}): {key}: expected {}, got {} (full: {got})",
                    v["why"], want[key], got[key]
                ));
            }
        }
        if let Some(part) = want["denial_includes"].as_str() {
            if !got["denial"].as_str().is_some_and(|r| r.contains(part)) {
                failures.push(format!(
                    "{name} step {i} ({}): the denial does not say {part:?} (full: {got})",
                    v["why"]
                ));
            }
        }
    }
    broker.close();
    let _ = responder.await;

    let rows: Vec<Value> = store
        .replay("turn-1")
        .unwrap()
        .into_iter()
        .map(|e| json!([e.kind, e.decision, e.cached_approval_used]))
        .collect();
    if let Some(want) = v.get("expect_audit") {
        if want != &Value::Array(rows.clone()) {
            failures.push(format!(
                "{name} ({}): audit rows\n  expected {want}\n  got      {}",
                v["why"],
                Value::Array(rows)
            ));
        }
    }
    failures
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gate_vectors() {
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
