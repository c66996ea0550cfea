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
    /// For a shell command that is denied or asks: the part of the line that decided.
    pub decided_by: Option<String>,
}

impl Outcome {
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "effect": self.verdict.effect,
            "rule": self.verdict.rule,
            "layer": &*self.verdict.layer,
            "reason": self.verdict.reason,
            "target": {"input": self.input, "normalized": self.normalized},
        });
        if let Some(map) = v.as_object_mut() {
            if let Some(part) = &self.decided_by {
                map.insert("decided_by".to_owned(), json!(part));
            }
            if let Some(condition) = &self.verdict.condition {
                map.insert("condition".to_owned(), json!(condition));
            }
            if let Some(would) = &self.verdict.would {
                map.insert("would".to_owned(), json!(would));
            }
        }
        v
    }

    pub fn to_line(&self) -> String {
        let rule = self.verdict.rule.as_ref().map_or("(none)".to_owned(), |r| {
            format!("{} {} {}", r.kind, r.effect, r.pattern)
        });
        let line = format!(
            "{}  layer={} rule={} reason={} target={}",
            self.verdict.effect,
            self.verdict.layer,
            rule,
            self.verdict.reason.as_str(),
            turngate::display::for_terminal(&self.normalized)
        );
        let line = match &self.decided_by {
            Some(part) => format!("{line}  decided_by={part}"),
            None => line,
        };
        match &self.verdict.would {
            Some(would) => format!("{line}  would={would}"),
            None => line,
        }
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
        decided_by: evaluation.decided_by,
    })
}
