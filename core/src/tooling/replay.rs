//! `replay`: what a candidate policy would have decided for every decision a store recorded,
//! and which decisions flip.
//!
//! A recorded policy decision is an `approval_requested` row (ask), a `decision_denied` row the
//! policy made (deny), a `decision_allowed` row the policy made (allow) or one a cached grant
//! answered (ask). Each is re-evaluated on its recorded target (the normalized form the gate
//! judged, after redaction) by the candidate's one evaluation function; a decision a checker
//! made (outside the roots, a blocked address, ...) keeps that checker's answer as a floor,
//! because the candidate policy cannot loosen what the snapshot refuses. Turn-aware rules see
//! the turn's recorded allowed actions before the decision, at its recorded time. Replay
//! never writes to the store.

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::action::{ActionKind, Effect};
use crate::audit::{
    AuditDecision, AuditError, AuditEventKind, AuditStore, TurnPermissionAuditEvent,
};
use crate::policy::compiled::relative_to;
use crate::policy::{CompiledPolicy, TurnAction, TurnHistory, parse_timestamp_us};
use crate::verdict::{Reason, Verdict};

/// Which recorded decisions to replay.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplayOptions {
    /// Only this turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<String>,
    /// Only decisions at or after this time (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// The workspace root the decisions were made in, so that workspace-relative file
    /// patterns (`src/*`) match the recorded absolute paths.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
}

/// One recorded decision the candidate policy decides differently.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Flip {
    /// The turn.
    pub turn_id: String,
    /// The recorded row's sequence number in its turn.
    pub seq: u64,
    /// When it was decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    /// The action's kind.
    pub kind: ActionKind,
    /// The recorded target.
    pub target: String,
    /// The recorded tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// What the recorded policy decided.
    pub before: Effect,
    /// What the candidate decides.
    pub after: Effect,
    /// The candidate's deciding rule pattern, when a rule decided.
    pub rule: Option<String>,
    /// The candidate's deciding layer.
    pub layer: String,
    /// The candidate's reason.
    pub reason: Reason,
}

/// What a replay found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ReplayReport {
    /// How many recorded decisions were re-evaluated.
    pub decisions: u64,
    /// The ones that flip, in turn order then sequence order.
    pub flips: Vec<Flip>,
}

/// The policy's effect a recorded row stands for, when the row is a policy decision.
fn recorded_effect(event: &TurnPermissionAuditEvent) -> Option<Effect> {
    event.action_kind?;
    let by_policy = event.decider.as_deref().is_none_or(|d| d == "policy");
    match event.kind {
        AuditEventKind::ApprovalRequested => Some(Effect::Ask),
        AuditEventKind::DecisionAllowed if event.cached_approval_used => Some(Effect::Ask),
        AuditEventKind::DecisionAllowed
            if by_policy
                && event.request_key.is_none()
                && event.decision == Some(AuditDecision::Allow) =>
        {
            Some(Effect::Allow)
        }
        AuditEventKind::DecisionDenied if by_policy && event.request_key.is_none() => {
            Some(Effect::Deny)
        }
        _ => None,
    }
}

/// The reason code of a recorded row: the code itself (`allow_rule`), or the code in the
/// parentheses of a denial in words (`deny by rule `x` (deny_rule) in layer `y``).
fn reason_code(reason: &str) -> &str {
    match reason.split_once(" (") {
        Some((_, rest)) => rest.split_once(')').map_or(reason, |(code, _)| code),
        None => reason,
    }
}

/// Whether a recorded reason is a policy's (so the candidate replaces it) rather than a
/// checker's (so it stays as a floor).
fn policy_reason(reason: Option<&str>) -> bool {
    reason.is_none_or(|r| {
        matches!(
            reason_code(r),
            "deny_rule"
                | "ask_rule"
                | "allow_rule"
                | "default"
                | "limit_exceeded"
                | "unresolved_shell_construct"
        )
    })
}

fn evaluate(
    policy: &CompiledPolicy,
    kind: ActionKind,
    target: &str,
    tool: Option<&str>,
    workspace: Option<&str>,
) -> Verdict {
    if kind.is_file() {
        match workspace.and_then(|w| relative_to(target, w)) {
            Some(rel) => policy.explain_path(kind, &[rel, target], tool),
            None => policy.explain_path(kind, &[target], tool),
        }
    } else {
        policy.explain_parts(kind, target, tool)
    }
}

/// Replay the events of one turn (in sequence order) under `policy`.
pub fn replay_turn(
    events: &[TurnPermissionAuditEvent],
    policy: &CompiledPolicy,
    options: &ReplayOptions,
    report: &mut ReplayReport,
) {
    let since = options.since.as_deref().and_then(parse_timestamp_us);
    let workspace = options.workspace.as_deref();
    let turn_aware = policy.is_turn_aware();
    let mut history: Vec<TurnAction> = Vec::new();
    for event in events {
        let at = event.timestamp.as_deref().and_then(parse_timestamp_us);
        if let (Some(before), Some(kind), Some(target)) = (
            recorded_effect(event),
            event.action_kind,
            event.target.as_deref(),
        ) {
            let in_window = match (since, at) {
                (Some(s), Some(a)) => a >= s,
                (Some(_), None) => false,
                (None, _) => true,
            };
            if in_window {
                report.decisions += 1;
                let tool = event.tool_name.as_deref();
                let verdict = if turn_aware {
                    let turn = TurnHistory {
                        actions: history.clone(),
                        now_us: at.unwrap_or_default(),
                        workspace: workspace.map(str::to_owned),
                    };
                    let bound = policy.with_turn(std::sync::Arc::new(turn));
                    evaluate(&bound, kind, target, tool, workspace)
                } else {
                    evaluate(policy, kind, target, tool, workspace)
                };
                let after = if policy_reason(event.reason.as_deref()) {
                    verdict.effect
                } else {
                    verdict.effect.stricter(before)
                };
                if after != before {
                    report.flips.push(Flip {
                        turn_id: event.turn_id.clone(),
                        seq: event.seq,
                        timestamp: event.timestamp.clone(),
                        kind,
                        target: target.to_owned(),
                        tool: tool.map(str::to_owned),
                        before,
                        after,
                        rule: verdict.rule.as_ref().map(|r| r.pattern.clone()),
                        layer: verdict.layer.to_string(),
                        reason: verdict.reason,
                    });
                }
            }
        }
        if turn_aware {
            if let Some(action) = TurnAction::from_event(event) {
                history.push(action);
            }
        }
    }
}

/// Replay every recorded decision of `store` (or of `options.turn`) under `policy`.
pub fn replay(
    store: &dyn AuditStore,
    policy: &CompiledPolicy,
    options: &ReplayOptions,
) -> Result<ReplayReport, AuditError> {
    let turns = match &options.turn {
        Some(t) => vec![t.clone()],
        None => store.turns()?,
    };
    let mut report = ReplayReport::default();
    for turn in turns {
        let events = store.replay(&turn)?;
        replay_turn(&events, policy, options, &mut report);
    }
    Ok(report)
}

/// Replay a list of events (any turns, each turn's rows in sequence order) under `policy`.
pub fn replay_events(
    events: &[TurnPermissionAuditEvent],
    policy: &CompiledPolicy,
    options: &ReplayOptions,
) -> ReplayReport {
    let mut order: Vec<&str> = Vec::new();
    let mut by_turn: HashMap<&str, Vec<TurnPermissionAuditEvent>> = HashMap::new();
    for e in events {
        if options.turn.as_deref().is_some_and(|t| t != e.turn_id) {
            continue;
        }
        by_turn
            .entry(&e.turn_id)
            .or_insert_with(|| {
                order.push(&e.turn_id);
                Vec::new()
            })
            .push(e.clone());
    }
    let mut report = ReplayReport::default();
    for turn in order {
        if let Some(mut rows) = by_turn.remove(turn) {
            rows.sort_by_key(|e| e.seq);
            replay_turn(&rows, policy, options, &mut report);
        }
    }
    report
}
