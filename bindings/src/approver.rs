//! The approver bridge: one foreign-approver trait every binding implements with its language's
//! callback, adapted to the core's [`Approver`]. A foreign approver sees the request as JSON
//! (`{"request", "action", "verdict"}`: the `TurnPermissionApprovalRequest` exactly as shown,
//! the action that runs, the ask verdict) and answers a [`DecisionRecord`]; a failure (a thrown
//! exception) is a denial carrying its text. Whatever it answers, the core re-checks it
//! against the policy; this module decides nothing.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turngate::Rule;
use turngate::approval::{
    ApprovalContext, ApproveAll, Approver, BrokerApprover, Decision, DecisionFuture, DeferAll,
    DenyAll,
};

use crate::broker::BrokerHandle;
use crate::{ActionRecord, RuleRecord, TurnGateError, parse_effect, parse_kind};

/// An approver's answer as it crosses the FFI boundary (`Decision` in every language). As
/// JSON: `{"decision": "approve", "modified"?, "remember"?}`, `{"decision": "deny", "reason"}`
/// or `{"decision": "defer"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "decision", rename_all = "snake_case", deny_unknown_fields)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum), uniffi(name = "Decision"))]
pub enum DecisionRecord {
    /// Run the action, or `modified` instead; remember `remember` for the run. Both are
    /// re-checked against the policy.
    Approve {
        /// A rewritten action to run instead.
        #[serde(default)]
        modified: Option<ActionRecord>,
        /// Rules to remember for the rest of the run.
        #[serde(default)]
        remember: Vec<RuleRecord>,
    },
    /// Refuse, with a reason the model can adapt to.
    Deny {
        /// Why.
        reason: String,
    },
    /// Persist the request and pause; resume it later (possibly in another process).
    Defer,
}

impl DecisionRecord {
    /// Approve the action as shown.
    pub fn approve() -> Self {
        DecisionRecord::Approve {
            modified: None,
            remember: Vec::new(),
        }
    }

    /// The core decision. A malformed modified action or remembered rule fails, naming it.
    pub fn to_core(&self) -> Result<Decision, TurnGateError> {
        Ok(match self {
            DecisionRecord::Approve { modified, remember } => Decision::Approve {
                modified: modified
                    .as_ref()
                    .map(|a| a.to_core("modified"))
                    .transpose()?,
                remember: remember
                    .iter()
                    .enumerate()
                    .map(|(i, r)| {
                        let what = format!("remember[{i}]");
                        Ok(Rule {
                            kind: parse_kind(&r.kind)
                                .map_err(|e| TurnGateError::invalid(&what, e.message()))?,
                            effect: r.effect,
                            pattern: r.pattern.clone(),
                            tool: r.tool.clone(),
                            after: None,
                            limit: None,
                        })
                    })
                    .collect::<Result<_, TurnGateError>>()?,
            },
            DecisionRecord::Deny { reason } => Decision::deny(reason.clone()),
            DecisionRecord::Defer => Decision::Defer,
        })
    }
}

/// A decision as a caller writes it by hand (a Node approver's answer and `Gate.resume`
/// argument, C's decision JSON): `{"decision": "approve" | "allow" | "deny" | "defer",
/// "reason"?, "modified"?, "remember"?}`. Unlike [`DecisionRecord`]'s own form, a denial may
/// leave out its reason. Unknown fields fail.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DecisionInput {
    decision: String,
    reason: Option<String>,
    modified: Option<ActionRecord>,
    #[serde(default)]
    remember: Vec<serde_json::Value>,
}

/// Parse a hand-written decision (see [`DecisionInput`]); a malformed one fails, naming the
/// bad field under `what`. `modified` and `remember` count only for an approval.
pub fn decision_from_value(
    what: &str,
    value: serde_json::Value,
) -> Result<DecisionRecord, TurnGateError> {
    let d: DecisionInput = crate::convert::from_value(what, value)?;
    Ok(match parse_decision(&d.decision, d.reason.as_deref())? {
        DecisionRecord::Approve { .. } => DecisionRecord::Approve {
            modified: d.modified,
            remember: d
                .remember
                .into_iter()
                .enumerate()
                .map(|(i, r)| {
                    let at = format!("{what}.remember[{i}]");
                    let rule: RuleRecord = crate::convert::from_value(&at, r)?;
                    parse_kind(&rule.kind).map_err(|e| TurnGateError::invalid(&at, e.message()))?;
                    Ok(rule)
                })
                .collect::<Result<_, TurnGateError>>()?,
        },
        other => other,
    })
}

/// Parse a decision name: `approve` (also `allow`), `deny` (with `reason`) or `defer`.
pub fn parse_decision(name: &str, reason: Option<&str>) -> Result<DecisionRecord, TurnGateError> {
    match name {
        "approve" | "allow" => Ok(DecisionRecord::approve()),
        "deny" => Ok(DecisionRecord::Deny {
            reason: reason.unwrap_or("denied by the approver").to_owned(),
        }),
        "defer" => Ok(DecisionRecord::Defer),
        other => Err(TurnGateError::invalid(
            "decision",
            format!("unknown decision `{other}` (expected approve, deny or defer)"),
        )),
    }
}

/// Parse a remembered rule's effect name (a binding's convenience).
pub fn rule_record(
    kind: &str,
    effect: &str,
    pattern: &str,
    tool: Option<&str>,
) -> Result<RuleRecord, TurnGateError> {
    parse_kind(kind)?;
    Ok(RuleRecord {
        kind: kind.to_owned(),
        effect: parse_effect(effect)?,
        pattern: pattern.to_owned(),
        tool: tool.map(str::to_owned),
    })
}

/// The future a foreign approver returns: the decision, or the text of the failure (a thrown
/// exception, a rejected promise). It may stay pending indefinitely.
pub type ForeignDecisionFuture =
    Pin<Box<dyn Future<Output = Result<DecisionRecord, String>> + Send + 'static>>;

/// A binding's approver callback.
pub trait ForeignApprover: Send + Sync {
    /// Decide one ask. `request` is the JSON of `{"request", "action", "verdict"}`.
    fn decide(&self, request: serde_json::Value) -> ForeignDecisionFuture;
}

/// An ask, as an approver sees it (`ApprovalAsk` in every language).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(
    feature = "uniffi",
    derive(uniffi::Record),
    uniffi(name = "ApprovalAsk")
)]
pub struct ApprovalAskRecord {
    /// The `TurnPermissionApprovalRequest`, exactly as shown.
    #[schemars(with = "serde_json::Map<String, serde_json::Value>")]
    pub request: serde_json::Value,
    /// The action that runs when approved.
    pub action: ActionRecord,
    /// The ask verdict.
    pub verdict: crate::VerdictRecord,
}

impl ApprovalAskRecord {
    /// The ask of an approval context.
    pub fn from_context(ctx: &ApprovalContext) -> Self {
        ApprovalAskRecord {
            request: serde_json::to_value(&ctx.request).unwrap_or(serde_json::Value::Null),
            action: ctx.action.clone().into(),
            verdict: ctx.verdict.clone().into(),
        }
    }
}

/// The ask as JSON ([`ApprovalAskRecord`]): the request, the action and the verdict.
pub fn context_json(ctx: &ApprovalContext) -> serde_json::Value {
    serde_json::to_value(ApprovalAskRecord::from_context(ctx)).unwrap_or(serde_json::Value::Null)
}

struct ForeignAdapter(Arc<dyn ForeignApprover>);

impl Approver for ForeignAdapter {
    fn decide<'a>(&'a self, ctx: &'a ApprovalContext) -> DecisionFuture<'a> {
        let fut = self.0.decide(context_json(ctx));
        Box::pin(async move {
            match fut.await {
                Ok(record) => record.to_core().unwrap_or_else(|e| {
                    Decision::deny(format!("the approver's answer was malformed: {e}"))
                }),
                Err(text) => Decision::deny(format!("the approver failed: {text}")),
            }
        })
    }
}

/// An approver a gate can use: a foreign callback, a built-in, or a broker.
#[derive(Clone)]
pub struct ApproverHandle {
    inner: Arc<dyn Approver>,
    name: String,
}

impl std::fmt::Debug for ApproverHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApproverHandle")
            .field("name", &self.name)
            .finish()
    }
}

impl ApproverHandle {
    /// A binding's callback, adapted.
    pub fn foreign(approver: Arc<dyn ForeignApprover>) -> Self {
        ApproverHandle {
            inner: Arc::new(ForeignAdapter(approver)),
            name: "foreign".to_owned(),
        }
    }

    /// A built-in approver: `approve_all`, `deny_all` or `defer_all`.
    pub fn builtin(name: &str) -> Result<Self, TurnGateError> {
        let inner: Arc<dyn Approver> = match name {
            "approve_all" => Arc::new(ApproveAll),
            "deny_all" => Arc::new(DenyAll),
            "defer_all" => Arc::new(DeferAll),
            other => {
                return Err(TurnGateError::invalid(
                    "approver",
                    format!(
                        "unknown built-in approver `{other}` (expected approve_all, deny_all or defer_all)"
                    ),
                ));
            }
        };
        Ok(ApproverHandle {
            inner,
            name: name.to_owned(),
        })
    }

    /// Route asks to `broker`; each request expires after `timeout_ms` when given.
    pub fn broker(broker: &BrokerHandle, timeout_ms: Option<u64>) -> Self {
        ApproverHandle {
            inner: Arc::new(BrokerApprover::new(
                broker.core().clone(),
                timeout_ms.map(Duration::from_millis),
            )),
            name: "broker".to_owned(),
        }
    }

    /// The core approver.
    pub fn as_approver(&self) -> Arc<dyn Approver> {
        Arc::clone(&self.inner)
    }
}
