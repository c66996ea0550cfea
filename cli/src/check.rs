//! `turngate check`: one action against the turn's snapshot, through exactly the evaluation
//! the gate enforces with (`turngate::gate::evaluate`).

use serde_json::{Value, json};
use turngate::gate::{ToolInvocation, evaluate};
use turngate::protocol::TurnExecutionSecuritySnapshot;
use turngate::{ActionKind, CompiledPolicy, Verdict};

/// A verdict plus the normalized target that was judged.
pub struct Outcome {
    pub verdict: Verdict,
    pub input: String,
    pub normalized: String,
}

impl Outcome {
    pub fn to_json(&self) -> Value {
        json!({
            "effect": self.verdict.effect,
            "rule": self.verdict.rule,
            "layer": &*self.verdict.layer,
            "reason": self.verdict.reason,
            "target": {"input": self.input, "normalized": self.normalized},
        })
    }

    pub fn to_line(&self) -> String {
        let rule = self.verdict.rule.as_ref().map_or("(none)".to_owned(), |r| {
            format!("{} {} {}", r.kind, r.effect, r.pattern)
        });
        format!(
            "{}  layer={} rule={} reason={} target={}",
            self.verdict.effect,
            self.verdict.layer,
            rule,
            self.verdict.reason.as_str(),
            self.normalized
        )
    }
}

pub fn check(
    snapshot: &TurnExecutionSecuritySnapshot,
    kind: ActionKind,
    target: &str,
    tool: Option<&str>,
) -> Result<Outcome, turngate::PolicyError> {
    let policy = CompiledPolicy::new(snapshot.permission_profile.effective_policy.clone())?;
    let mut inv = ToolInvocation::new(kind, target);
    inv.tool_name = tool.map(str::to_owned);
    let evaluation = evaluate(snapshot, &policy, &inv);
    Ok(Outcome {
        verdict: evaluation.verdict,
        input: target.to_owned(),
        normalized: evaluation.target,
    })
}
