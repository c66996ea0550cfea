//! The client core: reducers that project audit events and approval notifications into what a
//! client shows, the same way in every language.
//!
//! `reduce(state, input) -> state` is a pure function. It decides which events are visible and
//! how their rows read, and which prompts are actionable; it never talks to the broker or the
//! store. The conformance vectors in `tests/conformance/reducer*.json` pin it.
//!
//! # Timeline rows (which audit events are visible)
//!
//! | event | visible | why |
//! |---|---|---|
//! | `profile_selected` | unless the mode is `full_access` *and* the source is `defaulted` | the default profile is not news (the prompt section skips it too) |
//! | `decision_allowed` | only when `cached_approval_used` | plain policy allows are every read and would drown the timeline; a cached approval is a person's earlier choice at work |
//! | `decision_denied` | always | the person should see what the agent was refused |
//! | `approval_requested` | always | |
//! | `approval_resolved` | always | |
//! | `changes_recorded`, `changes_applied`, `changes_discarded`, `changes_refused` | always | a reviewed command's change set and what a person did with it: one row each, `request_key` is the change set id |
//!
//! Notifications never add timeline rows (the audit log is the history; notifications are
//! live UI state), so feeding both streams shows each event once.
//!
//! # Actionable prompts
//!
//! A `turn/permission/request/requested` notification adds its request (once per id, in
//! arrival order). A `turn/permission/request/resolved` notification, or an
//! `approval_resolved` audit event whose `request_key` is the request id, removes it.
//!
//! # Replays
//!
//! The state remembers the last `seq` applied per turn; an audit event whose `seq` is not
//! greater (a replay overlapping the live stream, or an unassigned `seq` 0) changes nothing.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::action::ActionKind;
use crate::approval::{ApprovalNotification, TurnPermissionApprovalRequest};
use crate::audit::{AuditDecision, AuditEventKind, ProfileSource, TurnPermissionAuditEvent};
use crate::policy::PermissionMode;

/// One input to the reducer: an audit event or an approval notification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ReducerInput {
    /// A durable audit event (live or replayed).
    AuditEvent(TurnPermissionAuditEvent),
    /// A live approval notification.
    Notification(ApprovalNotification),
}

/// One visible timeline row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TimelineRow {
    /// The turn.
    pub turn_id: String,
    /// The event's seq in the turn.
    pub seq: u64,
    /// The event kind.
    pub kind: AuditEventKind,
    /// The text a client shows.
    pub title: String,
    /// The action kind, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_kind: Option<ActionKind>,
    /// The approval request id, for approval rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_key: Option<String>,
    /// The decision, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<AuditDecision>,
    /// The machine-readable reason, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// True when a cached approval let the action through.
    #[serde(default)]
    pub cached_approval_used: bool,
    /// When it happened (UTC, RFC 3339), when the event says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    /// The target as decided (redacted), when the event says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The tool's name, when the event says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// Who decided (`policy`, `cached_grant`, `approver`, `person:<name>`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decider: Option<String>,
    /// The approver's or reviewer's own words, when they gave any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// What a client shows: the timeline and the prompts waiting for an answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClientState {
    /// Visible rows, in the order their events arrived.
    #[serde(default)]
    pub timeline: Vec<TimelineRow>,
    /// Actionable approval prompts, in arrival order.
    #[serde(default)]
    pub prompts: Vec<TurnPermissionApprovalRequest>,
    /// The last audit `seq` applied per turn (replays at or below it are ignored).
    #[serde(default)]
    pub last_seq: BTreeMap<String, u64>,
}

/// Apply one input to `state`.
pub fn reduce(mut state: ClientState, input: &ReducerInput) -> ClientState {
    match input {
        ReducerInput::AuditEvent(event) => {
            let last = state.last_seq.get(&event.turn_id).copied().unwrap_or(0);
            if event.seq <= last {
                return state;
            }
            state.last_seq.insert(event.turn_id.clone(), event.seq);
            if event.kind == AuditEventKind::ApprovalResolved {
                if let Some(key) = &event.request_key {
                    state.prompts.retain(|p| &p.id != key);
                }
            }
            if let Some(row) = timeline_row(event) {
                state.timeline.push(row);
            }
        }
        ReducerInput::Notification(ApprovalNotification::Requested(request)) => {
            if !state.prompts.iter().any(|p| p.id == request.id) {
                state.prompts.push(request.clone());
            }
        }
        ReducerInput::Notification(ApprovalNotification::Resolved(outcome)) => {
            state.prompts.retain(|p| p.id != outcome.request_id);
        }
    }
    state
}

/// Apply every input in order, starting from `state`.
pub fn reduce_all<'a>(
    state: ClientState,
    inputs: impl IntoIterator<Item = &'a ReducerInput>,
) -> ClientState {
    inputs.into_iter().fold(state, reduce)
}

/// True when `event` gets a timeline row (see the module documentation).
pub fn is_visible(event: &TurnPermissionAuditEvent) -> bool {
    match event.kind {
        AuditEventKind::ProfileSelected => {
            !(event.profile_mode == PermissionMode::FullAccess
                && event.profile_source == ProfileSource::Defaulted)
        }
        AuditEventKind::DecisionAllowed => event.cached_approval_used,
        AuditEventKind::DecisionDenied
        | AuditEventKind::ApprovalRequested
        | AuditEventKind::ApprovalResolved
        | AuditEventKind::ChangesRecorded
        | AuditEventKind::ChangesApplied
        | AuditEventKind::ChangesDiscarded
        | AuditEventKind::ChangesRefused => true,
    }
}

/// A change set row's subject: its id and what it holds (the event's target).
fn changes(event: &TurnPermissionAuditEvent) -> String {
    let id = event.request_key.as_deref().unwrap_or("change set");
    match &event.target {
        Some(target) => format!("{id} `{target}`"),
        None => id.to_owned(),
    }
}

fn timeline_row(event: &TurnPermissionAuditEvent) -> Option<TimelineRow> {
    if !is_visible(event) {
        return None;
    }
    let kind = event
        .action_kind
        .map(ActionKind::as_str)
        .unwrap_or("action");
    // Name the target, so that three approved commands are three distinguishable rows.
    let kind = match &event.target {
        Some(target) => format!("{kind} `{target}`"),
        None => kind.to_owned(),
    };
    let mut title = match event.kind {
        AuditEventKind::ProfileSelected => format!(
            "Permissions: {} ({})",
            event.profile_mode.ui_label(),
            event.profile_source.as_str()
        ),
        AuditEventKind::DecisionAllowed => {
            format!("Allowed {kind} (approved earlier this turn)")
        }
        AuditEventKind::DecisionDenied => match &event.reason {
            Some(reason) => format!("Denied {kind} ({reason})"),
            None => format!("Denied {kind}"),
        },
        AuditEventKind::ApprovalRequested => format!("Approval requested: {kind}"),
        AuditEventKind::ApprovalResolved => {
            let outcome = match event.decision {
                Some(AuditDecision::AllowOnce) => "allowed once",
                Some(AuditDecision::AllowForTurn) => "allowed for this turn",
                Some(AuditDecision::Allow) => "allowed",
                Some(AuditDecision::Deny) => "denied",
                Some(AuditDecision::Cancelled) => "cancelled",
                Some(AuditDecision::Expired) => "expired",
                Some(AuditDecision::Ask) | None => "resolved",
            };
            format!("Approval {outcome}: {kind}")
        }
        AuditEventKind::ChangesRecorded => format!("Changes to review: {}", changes(event)),
        AuditEventKind::ChangesApplied => format!("Changes applied: {}", changes(event)),
        AuditEventKind::ChangesDiscarded => format!("Changes discarded: {}", changes(event)),
        AuditEventKind::ChangesRefused => match &event.reason {
            Some(reason) => format!("Changes not applied ({reason}): {}", changes(event)),
            None => format!("Changes not applied: {}", changes(event)),
        },
    };
    if let Some(message) = &event.message {
        title = format!("{title}: \"{message}\"");
    }
    Some(TimelineRow {
        turn_id: event.turn_id.clone(),
        seq: event.seq,
        kind: event.kind,
        title,
        action_kind: event.action_kind,
        request_key: event.request_key.clone(),
        decision: event.decision,
        reason: event.reason.clone(),
        cached_approval_used: event.cached_approval_used,
        timestamp: event.timestamp.clone(),
        target: event.target.clone(),
        tool_name: event.tool_name.clone(),
        decider: event.decider.clone(),
        message: event.message.clone(),
    })
}
