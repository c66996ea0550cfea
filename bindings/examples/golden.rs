//! The golden calls through the Rust facade: one JSON line per call (tests/golden/README.md).
//! `cargo run -p turngate-ffi --example golden -- tests/golden/calls.json`, with `GOLDEN_WS`
//! and `GOLDEN_TMP` set.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use turngate_ffi::approver::parse_decision;
use turngate_ffi::{
    ActionRecord, ApproverHandle, DecisionRecord, ForeignApprover, ForeignDecisionFuture,
    GateHandle, InvocationRecord, PolicyHandle, StoreHandle, TurnGateError, reduce, snapshot,
};

type Result<T> = std::result::Result<T, TurnGateError>;

fn subst(v: Value, ws: &str) -> Value {
    match v {
        Value::String(s) => Value::String(s.replace("$WS", ws)),
        Value::Array(a) => a.into_iter().map(|x| subst(x, ws)).collect(),
        Value::Object(o) => o.into_iter().map(|(k, x)| (k, subst(x, ws))).collect(),
        other => other,
    }
}

fn text<'a>(a: &'a Value, key: &str) -> &'a str {
    a[key].as_str().unwrap_or_default()
}

fn opt<'a>(a: &'a Value, key: &str) -> Option<&'a str> {
    a[key].as_str()
}

fn policy(spec: &Value) -> Result<Arc<PolicyHandle>> {
    if spec.get("tiered").is_some() {
        PolicyHandle::tiered(None, None)
    } else if let Some(m) = spec["mode"].as_str() {
        PolicyHandle::from_mode(m)
    } else {
        PolicyHandle::from_json_value(spec["json"].clone())
    }
}

/// Answers every ask with one scripted decision and keeps the asks it saw.
struct Scripted {
    answer: DecisionRecord,
    asks: Arc<Mutex<Vec<Value>>>,
}

impl ForeignApprover for Scripted {
    fn decide(&self, request: Value) -> ForeignDecisionFuture {
        if let Ok(mut asks) = self.asks.lock() {
            asks.push(request);
        }
        let answer = self.answer.clone();
        Box::pin(async move { Ok(answer) })
    }
}

fn gate(a: &Value, tmp: &str, i: usize, asks: Arc<Mutex<Vec<Value>>>) -> Result<Arc<GateHandle>> {
    let answer = match text(a, "approver") {
        "deny" => parse_decision("deny", Some("the golden approver said no"))?,
        other => parse_decision(other, None)?,
    };
    let snap = snapshot::resolve(Some(a["selection"].clone()), a["context"].clone(), None)?;
    let store = StoreHandle::open(&format!("{tmp}/{i}.db"))?;
    let approver = ApproverHandle::foreign(Arc::new(Scripted { answer, asks }));
    GateHandle::new("golden", snap, &store, &approver, None)
}

fn record<T: serde::Serialize>(v: &T) -> Result<Value> {
    serde_json::to_value(v).map_err(|e| TurnGateError::invalid("result", e))
}

fn run(call: &str, a: &Value, tmp: &str, i: usize, rt: &tokio::runtime::Runtime) -> Result<Value> {
    match call {
        "policy.check" => {
            let e =
                policy(&a["policy"])?.check(text(a, "kind"), text(a, "target"), opt(a, "tool"))?;
            record(&e)
        }
        "policy.explain" => record(&policy(&a["policy"])?.explain(
            text(a, "kind"),
            text(a, "target"),
            opt(a, "tool"),
        )?),
        "policy.check_batch" => {
            let actions: Vec<ActionRecord> = serde_json::from_value(a["actions"].clone())
                .map_err(|e| TurnGateError::invalid("actions", e))?;
            record(&policy(&a["policy"])?.check_batch(&actions)?)
        }
        "snapshot.resolve" => {
            snapshot::resolve(Some(a["selection"].clone()), a["context"].clone(), None)
        }
        "command.parse" => record(&turngate_ffi::check::parse_command_line(text(a, "line"))),
        "env.filter" => {
            let vars = a["vars"].as_array().map(Vec::as_slice).unwrap_or_default();
            let vars = vars
                .iter()
                .map(|v| (text(v, "name").into(), text(v, "value").into()));
            let roots: Vec<String> = serde_json::from_value(a["untrusted_path_roots"].clone())
                .map_err(|e| TurnGateError::invalid("untrusted_path_roots", e))?;
            record(&turngate_ffi::check::filter_env(
                vars.collect(),
                text(a, "mode"),
                text(a, "cwd"),
                &roots,
            )?)
        }
        "gate.evaluate" | "gate.authorize" => {
            let asks = Arc::new(Mutex::new(Vec::new()));
            let g = gate(a, tmp, i, Arc::clone(&asks))?;
            let inv: InvocationRecord = serde_json::from_value(a["invocation"].clone())
                .map_err(|e| TurnGateError::invalid("invocation", e))?;
            if call == "gate.evaluate" {
                return record(&g.evaluate(&inv)?);
            }
            let auth = rt.block_on(g.authorize(&inv))?;
            let asks = asks.lock().map(|a| a.clone()).unwrap_or_default();
            Ok(json!({"authorization": record(&auth)?, "asks": asks}))
        }
        "reduce_all" => reduce::reduce_all(None, a["inputs"].clone()),
        "scope.from_action" => reduce::scope_from_action(
            text(a, "kind"),
            text(a, "target"),
            opt(a, "tool"),
            opt(a, "cwd"),
        ),
        "scope.hash" => Ok(Value::String(reduce::scope_hash(a["scope"].clone())?)),
        "changes.parse" => turngate_ffi::changes::parse(a["change_set"].clone()),
        "changes.show" => StoreHandle::open(&format!("{tmp}/{i}.db"))?.change_set(text(a, "id")),
        other => Err(TurnGateError::invalid(
            "call",
            format!("unknown call {other}"),
        )),
    }
}

fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).ok_or("usage: golden CALLS.json")?;
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path)?)?;
    let ws = std::env::var("GOLDEN_WS")?;
    let tmp = std::env::var("GOLDEN_TMP")?;
    let rt = tokio::runtime::Runtime::new()?;
    for (i, c) in doc["calls"]
        .as_array()
        .ok_or("no calls")?
        .iter()
        .enumerate()
    {
        let args = subst(c["args"].clone(), &ws);
        let out = match run(text(c, "call"), &args, &tmp, i, &rt) {
            Ok(v) => json!({"name": c["name"], "result": v}),
            Err(e) => {
                json!({"name": c["name"], "error": {"type": e.kind(), "message": e.message()}})
            }
        };
        println!("{out}");
    }
    Ok(())
}
