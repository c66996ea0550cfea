//! The approval protocol types clients see: the request, the resolutions, and the two
//! notifications. Plain data with the seed's names and snake_case JSON.

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::action::{Action, ActionKind};
use crate::approval::scope::{ApprovalScope, ScopeError, to_hex};
use crate::verdict::Reason;

/// The notification method published when a request opens.
pub const REQUESTED_METHOD: &str = "turn/permission/request/requested";
/// The notification method published when a request is resolved, cancelled or expires.
pub const RESOLVED_METHOD: &str = "turn/permission/request/resolved";

/// How a request was (or may be) resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalResolution {
    /// Allow this request only.
    AllowOnce,
    /// Allow this normalized scope for the rest of the turn.
    AllowForTurn,
    /// Reject the action.
    Deny,
    /// The prompt was cancelled by the user, the client or the turn ending.
    Cancelled,
    /// The prompt timed out or went stale.
    Expired,
}

impl ApprovalResolution {
    /// Every resolution, in wire order.
    pub const ALL: [ApprovalResolution; 5] = [
        ApprovalResolution::AllowOnce,
        ApprovalResolution::AllowForTurn,
        ApprovalResolution::Deny,
        ApprovalResolution::Cancelled,
        ApprovalResolution::Expired,
    ];

    /// The snake_case wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            ApprovalResolution::AllowOnce => "allow_once",
            ApprovalResolution::AllowForTurn => "allow_for_turn",
            ApprovalResolution::Deny => "deny",
            ApprovalResolution::Cancelled => "cancelled",
            ApprovalResolution::Expired => "expired",
        }
    }

    /// True for `allow_once` and `allow_for_turn`: the action may run.
    pub const fn is_allow(self) -> bool {
        matches!(
            self,
            ApprovalResolution::AllowOnce | ApprovalResolution::AllowForTurn
        )
    }

    /// True for `cancelled` and `expired`, which the system may always apply whatever the
    /// request's `allowed_resolutions` say.
    pub const fn is_system(self) -> bool {
        matches!(
            self,
            ApprovalResolution::Cancelled | ApprovalResolution::Expired
        )
    }
}

impl fmt::Display for ApprovalResolution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string was not a resolution's wire name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown approval resolution `{0}` (expected allow_once, allow_for_turn, deny, cancelled or expired)"
)]
pub struct UnknownResolution(pub String);

impl FromStr for ApprovalResolution {
    type Err = UnknownResolution;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ApprovalResolution::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| UnknownResolution(s.to_owned()))
    }
}

/// One labelled line of what the person is shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalDetailLine {
    /// The label (`command`, `cwd`, `path`, ...).
    pub label: String,
    /// The value, verbatim.
    pub value: String,
}

/// What the person is shown: the target verbatim plus labelled lines.
///
/// This is persisted with a deferred request, so the action resumed hours later is exactly
/// the one the person saw.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalDetails {
    /// The action's target as the tool passed it (a path, a command line, a URL, ...).
    pub target: String,
    /// Extra labelled lines (cwd, arguments, diff summary, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lines: Vec<ApprovalDetailLine>,
}

/// The client-visible request opened when a tool action needs a person's approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnPermissionApprovalRequest {
    /// The request id (unique across processes sharing a store).
    pub id: String,
    /// The turn the action belongs to.
    pub turn_id: String,
    /// The tool that wants to act.
    pub tool_name: String,
    /// The action kind.
    pub action_kind: ActionKind,
    /// Lowercase hex SHA-256 of the normalized scope (see [`ApprovalScope`]).
    pub scope_hash: String,
    /// Why the action needs approval, machine-readable (the verdict's reason).
    pub reason: Reason,
    /// A one-line summary for the prompt, when the tool gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// What the person is shown.
    pub details: ApprovalDetails,
    /// Threads whose UI should show this prompt (empty: the turn's own thread only).
    #[serde(default)]
    pub visible_thread_ids: Vec<String>,
    /// The resolutions a person may pick. `cancelled` and `expired` are always possible.
    pub allowed_resolutions: Vec<ApprovalResolution>,
}

impl TurnPermissionApprovalRequest {
    /// The resolutions built-in restricted modes offer: `allow_once`, `allow_for_turn`, `deny`.
    pub const DEFAULT_RESOLUTIONS: [ApprovalResolution; 3] = [
        ApprovalResolution::AllowOnce,
        ApprovalResolution::AllowForTurn,
        ApprovalResolution::Deny,
    ];

    /// A request for `action` in `turn_id`, with a fresh id, the normalized scope hash (see
    /// [`ApprovalScope::from_action`]; `cwd` is used for shell commands), the target as
    /// details and the default resolutions. The tool name is the action's tool, or the kind's
    /// wire name when the action has none.
    pub fn for_action(
        turn_id: impl Into<String>,
        action: &Action,
        reason: Reason,
        cwd: Option<&str>,
    ) -> Result<Self, ScopeError> {
        let scope = ApprovalScope::from_action(action, cwd)?;
        let mut details = ApprovalDetails {
            target: action.target.clone(),
            lines: Vec::new(),
        };
        if let (ActionKind::ShellCommand, Some(cwd)) = (action.kind, cwd) {
            details.lines.push(ApprovalDetailLine {
                label: "cwd".to_owned(),
                value: cwd.to_owned(),
            });
        }
        Ok(TurnPermissionApprovalRequest {
            id: new_request_id(),
            turn_id: turn_id.into(),
            tool_name: action
                .tool
                .clone()
                .unwrap_or_else(|| action.kind.as_str().to_owned()),
            action_kind: action.kind,
            scope_hash: scope.scope_hash(),
            reason,
            summary: None,
            details,
            visible_thread_ids: Vec::new(),
            allowed_resolutions: Self::DEFAULT_RESOLUTIONS.to_vec(),
        })
    }

    /// True when a responder may apply `resolution` to this request.
    pub fn allows(&self, resolution: ApprovalResolution) -> bool {
        resolution.is_system() || self.allowed_resolutions.contains(&resolution)
    }

    /// The JSON Schema of this type.
    pub fn json_schema() -> serde_json::Value {
        serde_json::to_value(schemars::schema_for!(TurnPermissionApprovalRequest))
            .unwrap_or_default()
    }
}

/// A fresh request id: `apr_` and 32 hex digits derived from the process id, the clock and a
/// counter, so ids stay unique across processes sharing a store.
pub fn new_request_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let mut h = Sha256::new();
    h.update(std::process::id().to_be_bytes());
    h.update(nanos.to_be_bytes());
    h.update(n.to_be_bytes());
    format!("apr_{}", to_hex(&h.finalize()[..16]))
}

/// Why a request ended the way it did (who or what resolved it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ResolutionSource {
    /// A responder (a person through a client, or a program) chose the resolution.
    Responder,
    /// The responder allowed it, but the policy now denies the action: resolved as `deny`.
    PolicyDenied,
    /// An earlier `allow_for_turn` grant for the same scope covered it; no prompt was shown.
    CachedGrant,
    /// The request's timeout elapsed.
    Timeout,
    /// The turn's requests were cancelled (turn ended or interrupted).
    TurnCancelled,
    /// The broker was closed while the request was pending.
    BrokerClosed,
}

impl ResolutionSource {
    /// The snake_case wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            ResolutionSource::Responder => "responder",
            ResolutionSource::PolicyDenied => "policy_denied",
            ResolutionSource::CachedGrant => "cached_grant",
            ResolutionSource::Timeout => "timeout",
            ResolutionSource::TurnCancelled => "turn_cancelled",
            ResolutionSource::BrokerClosed => "broker_closed",
        }
    }
}

/// The recorded outcome of a request. The first resolution wins; later responses get this
/// same value back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalOutcome {
    /// The request.
    pub request_id: String,
    /// Its turn.
    pub turn_id: String,
    /// The scope hash of the request.
    pub scope_hash: String,
    /// The resolution that was applied.
    pub resolution: ApprovalResolution,
    /// Who or what applied it.
    pub source: ResolutionSource,
}

/// The params of `turn/permission/request/resolved`.
pub type TurnPermissionApprovalResolved = ApprovalOutcome;

/// An approval notification, as JSON-RPC `{"method": ..., "params": ...}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "method", content = "params", deny_unknown_fields)]
pub enum ApprovalNotification {
    /// `turn/permission/request/requested`: a prompt is now actionable.
    #[serde(rename = "turn/permission/request/requested")]
    Requested(TurnPermissionApprovalRequest),
    /// `turn/permission/request/resolved`: the prompt is no longer actionable.
    #[serde(rename = "turn/permission/request/resolved")]
    Resolved(ApprovalOutcome),
}

impl ApprovalNotification {
    /// The JSON-RPC method name.
    pub fn method(&self) -> &'static str {
        match self {
            ApprovalNotification::Requested(_) => REQUESTED_METHOD,
            ApprovalNotification::Resolved(_) => RESOLVED_METHOD,
        }
    }

    /// The request id the notification is about.
    pub fn request_id(&self) -> &str {
        match self {
            ApprovalNotification::Requested(r) => &r.id,
            ApprovalNotification::Resolved(o) => &o.request_id,
        }
    }
}
