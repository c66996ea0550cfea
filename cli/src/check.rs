//! `turngate check`: one action against the turn's snapshot, through the same evaluation the
//! gate enforces with.

use serde_json::{Value, json};
use turngate::protocol::TurnExecutionSecuritySnapshot;
use turngate::{ActionKind, CompiledPolicy, Verdict};

/// A verdict plus the normalized target forms that were judged.
pub struct Outcome {
    pub verdict: Verdict,
    pub target: Value,
}

impl Outcome {
    pub fn to_json(&self) -> Value {
        json!({
            "effect": self.verdict.effect,
            "rule": self.verdict.rule,
            "layer": &*self.verdict.layer,
            "reason": self.verdict.reason,
            "target": self.target,
        })
    }

    pub fn to_line(&self) -> String {
        let rule = self.verdict.rule.as_ref().map_or("(none)".to_owned(), |r| {
            format!("{} {} {}", r.kind, r.effect, r.pattern)
        });
        format!(
            "{}  layer={} rule={} reason={}",
            self.verdict.effect,
            self.verdict.layer,
            rule,
            self.verdict.reason.as_str()
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
    let verdict = policy.explain_parts(kind, target, tool);
    Ok(Outcome {
        verdict,
        target: json!({ "input": target }),
    })
}
