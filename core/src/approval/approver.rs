//! The programmatic side of approvals: the [`Approver`] trait, the built-in approvers, the
//! policy re-check of every decision, and deferral past the end of the process.
//!
//! Whatever an approver says, the policy has the last word: an approval never moves an action
//! across a deny, a modified action is checked again, a remembered allow that would cover a
//! denied target is rejected, and a deferred request resumed hours later is checked against
//! the policy of that moment.

use std::fmt;
use std::future::Future;
use std::io::{BufRead, Write};
use std::pin::Pin;
use std::sync::Mutex;
use std::time::Duration;

use crate::action::{Action, Effect};
use crate::approval::broker::ApprovalBroker;
use crate::approval::request::{ApprovalResolution, TurnPermissionApprovalRequest};
use crate::audit::{AuditError, AuditStore, StoredResolution};
use crate::policy::{CompiledPolicy, Policy, Rule};
use crate::protocol::TurnExecutionSecuritySnapshot;
use crate::verdict::Verdict;

/// What an approver is asked about: the request exactly as a person would be shown it, the
/// action that runs if it is approved, and the verdict that made it an ask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalContext {
    /// The protocol request (what the person sees).
    pub request: TurnPermissionApprovalRequest,
    /// The action that runs when approved.
    pub action: Action,
    /// The policy's verdict for the action (an ask).
    pub verdict: Verdict,
}

/// An approver's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Run the action, or `modified` instead of it. `remember` holds rules to keep for the rest
    /// of the run; both are re-checked against the policy.
    Approve {
        /// A rewritten action to run instead (re-checked).
        modified: Option<Action>,
        /// Rules to remember for the rest of the run (returned to the caller to persist).
        remember: Vec<Rule>,
    },
    /// Refuse, with a reason the model can adapt to.
    Deny(String),
    /// Persist the request and pause; decide later with [`resume_with_decision`].
    Defer,
}

impl Decision {
    /// Approve the action as shown, remembering nothing.
    pub fn approve() -> Self {
        Decision::Approve {
            modified: None,
            remember: Vec::new(),
        }
    }

    /// Deny with `reason`.
    pub fn deny(reason: impl Into<String>) -> Self {
        Decision::Deny(reason.into())
    }
}

/// The future an approver returns. It may stay pending indefinitely.
pub type DecisionFuture<'a> = Pin<Box<dyn Future<Output = Decision> + Send + 'a>>;

/// Decides asks. Object-safe (`Box<dyn Approver>`, `Arc<dyn Approver>`).
pub trait Approver: Send + Sync {
    /// Decide `ctx`. The future may stay pending indefinitely; the caller waits.
    fn decide<'a>(&'a self, ctx: &'a ApprovalContext) -> DecisionFuture<'a>;
}

impl fmt::Debug for dyn Approver + '_ {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("dyn Approver")
    }
}

/// Approves everything (still subject to the policy re-check).
#[derive(Debug, Clone, Copy, Default)]
pub struct ApproveAll;

impl Approver for ApproveAll {
    fn decide<'a>(&'a self, _ctx: &'a ApprovalContext) -> DecisionFuture<'a> {
        Box::pin(async { Decision::approve() })
    }
}

/// Denies everything: the safe default for unattended runs.
#[derive(Debug, Clone, Copy, Default)]
pub struct DenyAll;

impl Approver for DenyAll {
    fn decide<'a>(&'a self, _ctx: &'a ApprovalContext) -> DecisionFuture<'a> {
        Box::pin(async { Decision::deny("denied by DenyAll (unattended run)") })
    }
}

/// Defers every ask: the request is persisted and the run pauses until another process (or a
/// person, hours later) resolves it with `resume_with_decision`.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeferAll;

impl Approver for DeferAll {
    fn decide<'a>(&'a self, _ctx: &'a ApprovalContext) -> DecisionFuture<'a> {
        Box::pin(async { Decision::Defer })
    }
}

/// Prompts on a terminal (or any injected reader/writer): the answer `y` approves, anything
/// else (including end of input and `Y`) denies.
///
/// Reading blocks the calling thread; use it where a terminal prompt may block (a CLI, or a
/// multi-threaded runtime).
pub struct StdinApprover {
    io: Mutex<(Box<dyn BufRead + Send>, Box<dyn Write + Send>)>,
}

impl fmt::Debug for StdinApprover {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StdinApprover").finish_non_exhaustive()
    }
}

impl Default for StdinApprover {
    fn default() -> Self {
        Self::new()
    }
}

impl StdinApprover {
    /// Prompt on stderr, read from stdin.
    pub fn new() -> Self {
        Self::with_io(
            Box::new(std::io::BufReader::new(std::io::stdin())),
            Box::new(std::io::stderr()),
        )
    }

    /// Prompt on `writer`, read answers from `reader` (for tests and embedding).
    pub fn with_io(reader: Box<dyn BufRead + Send>, writer: Box<dyn Write + Send>) -> Self {
        StdinApprover {
            io: Mutex::new((reader, writer)),
        }
    }

    /// The prompt text shown for `ctx`.
    pub fn prompt(ctx: &ApprovalContext) -> String {
        use crate::display::for_terminal as shown;
        let r = &ctx.request;
        let mut text = format!(
            "turngate: {} wants {} on {}\n",
            shown(&r.tool_name),
            r.action_kind,
            shown(&r.details.target)
        );
        if let Some(summary) = &r.summary {
            text.push_str(&format!("  {}\n", shown(summary)));
        }
        for line in &r.details.lines {
            text.push_str(&format!(
                "  {}: {}\n",
                shown(&line.label),
                shown(&line.value)
            ));
        }
        text.push_str(&format!("  reason: {}\nAllow? [y/N] ", r.reason.as_str()));
        text
    }
}

impl Approver for StdinApprover {
    fn decide<'a>(&'a self, ctx: &'a ApprovalContext) -> DecisionFuture<'a> {
        Box::pin(async move {
            let mut io = self.io.lock().unwrap_or_else(|e| e.into_inner());
            let (reader, writer) = &mut *io;
            if writer
                .write_all(Self::prompt(ctx).as_bytes())
                .and_then(|()| writer.flush())
                .is_err()
            {
                return Decision::deny("could not show the approval prompt");
            }
            let mut answer = String::new();
            match reader.read_line(&mut answer) {
                Ok(_) if answer.trim() == "y" => Decision::approve(),
                Ok(0) => Decision::deny("no answer (end of input)"),
                Ok(_) => {
                    Decision::deny(format!("denied at the prompt (answer `{}`)", answer.trim()))
                }
                Err(e) => Decision::deny(format!("could not read the answer: {e}")),
            }
        })
    }
}

/// Turns each ask into a protocol request on an [`ApprovalBroker`] and waits for
/// `respond(request_id, resolution)` from a client in any language.
///
/// `allow_once` and `allow_for_turn` approve (the broker caches the latter's grant); `deny`,
/// `cancelled` and `expired` deny with the resolution as the reason.
#[derive(Debug, Clone)]
pub struct BrokerApprover {
    broker: ApprovalBroker,
    timeout: Option<Duration>,
}

impl BrokerApprover {
    /// Route asks to `broker`; each request expires after `timeout` when given.
    pub fn new(broker: ApprovalBroker, timeout: Option<Duration>) -> Self {
        BrokerApprover { broker, timeout }
    }

    /// The broker asks go to.
    pub fn broker(&self) -> &ApprovalBroker {
        &self.broker
    }
}

impl Approver for BrokerApprover {
    fn decide<'a>(&'a self, ctx: &'a ApprovalContext) -> DecisionFuture<'a> {
        Box::pin(async move {
            match self
                .broker
                .request(ctx.request.clone(), ctx.action.clone(), self.timeout)
                .await
            {
                Ok(outcome) if outcome.resolution.is_allow() => Decision::approve(),
                Ok(outcome) => Decision::deny(format!(
                    "approval request {} resolved as {} ({})",
                    outcome.request_id,
                    outcome.resolution,
                    outcome.source.as_str()
                )),
                Err(e) => Decision::deny(e.to_string()),
            }
        })
    }
}

/// A remembered rule the policy re-check refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectedRule {
    /// The rule as the approver gave it.
    pub rule: Rule,
    /// Why it was refused.
    pub reason: String,
}

/// Why a decision ended as a denial.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DenialSource {
    /// The policy denies the action (or the modified action): an approval cannot cross it.
    Policy,
    /// The approver (a person or a program) denied it.
    Approver,
}

/// The result of an approval after the policy re-check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalResult {
    /// Run `action` (the one shown, or the approver's modified one, re-checked).
    Approved {
        /// The action to run.
        action: Action,
        /// Remembered rules that passed the re-check, for the caller to persist.
        remember: Vec<Rule>,
        /// Remembered rules the re-check refused.
        rejected: Vec<RejectedRule>,
    },
    /// Do not run it; report `reason` to the model as a tool result.
    Denied {
        /// Why, for the model and the audit row.
        reason: String,
        /// Who denied.
        source: DenialSource,
    },
    /// Persisted and paused; resume with [`resume_with_decision`].
    Deferred {
        /// The persisted request.
        request_id: String,
    },
    /// The request had already been resolved (another process or responder won); nothing was
    /// changed.
    AlreadyResolved(StoredResolution),
}

/// An approval could not be carried out.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApprovalError {
    /// The durable store failed.
    #[error(transparent)]
    Audit(#[from] AuditError),
    /// The approver deferred but no store was given to persist the request.
    #[error("approval request `{0}` was deferred, but no store was given to persist it")]
    DeferWithoutStore(String),
    /// No stored approval has this id.
    #[error("no deferred approval request `{0}` in the store")]
    UnknownRequest(String),
}

/// Re-check `decision` for `action` against `policy` (no store involved; `Defer` passes
/// through as `Deferred`).
pub fn recheck(
    decision: Decision,
    request_id: &str,
    action: &Action,
    policy: &CompiledPolicy,
) -> ApprovalResult {
    match decision {
        Decision::Deny(reason) => ApprovalResult::Denied {
            reason,
            source: DenialSource::Approver,
        },
        Decision::Defer => ApprovalResult::Deferred {
            request_id: request_id.to_owned(),
        },
        Decision::Approve { modified, remember } => {
            let original = policy.explain(action);
            if original.effect == Effect::Deny {
                return policy_denial("the action", action, &original);
            }
            let action = match modified {
                Some(modified) => {
                    let verdict = policy.explain(&modified);
                    if verdict.effect == Effect::Deny {
                        return policy_denial("the modified action", &modified, &verdict);
                    }
                    modified
                }
                None => action.clone(),
            };
            let (remember, rejected) = recheck_rules(remember, policy);
            ApprovalResult::Approved {
                action,
                remember,
                rejected,
            }
        }
    }
}

fn policy_denial(what: &str, action: &Action, verdict: &Verdict) -> ApprovalResult {
    ApprovalResult::Denied {
        reason: format!(
            "{what} ({} `{}`) is denied by layer `{}` ({}); an approval cannot override a deny",
            action.kind,
            action.target,
            verdict.layer,
            verdict.reason.as_str()
        ),
        source: DenialSource::Policy,
    }
}

/// Split remembered rules into those that may be kept and those refused: a rule must compile,
/// and an allow rule whose own pattern names a target the policy denies is refused (it would
/// try to override a deny). Kept rules are still merged deny-first, so they can only add
/// capability where nothing denies.
fn recheck_rules(rules: Vec<Rule>, policy: &CompiledPolicy) -> (Vec<Rule>, Vec<RejectedRule>) {
    let mut kept = Vec::new();
    let mut rejected = Vec::new();
    for rule in rules {
        if let Err(e) = Policy::new()
            .layer("remembered")
            .rule(rule.clone())
            .compile()
        {
            rejected.push(RejectedRule {
                rule,
                reason: e.to_string(),
            });
            continue;
        }
        if rule.effect == Effect::Allow {
            let verdict = policy.explain_parts(rule.kind, &rule.pattern, rule.tool.as_deref());
            if verdict.effect == Effect::Deny {
                rejected.push(RejectedRule {
                    reason: format!(
                        "a remembered allow for {} `{}` cannot override the deny in layer `{}`",
                        rule.kind, rule.pattern, verdict.layer
                    ),
                    rule,
                });
                continue;
            }
        }
        kept.push(rule);
    }
    (kept, rejected)
}

/// Ask `approver` about `ctx` and re-check its decision against `policy`.
///
/// An action the policy denies never reaches the approver. `Defer` persists the request with
/// exactly the content shown (and the action) in `store`, and requires one.
///
/// `snapshot` is the turn's snapshot, persisted with a deferred request so that its resume
/// runs under the same sandbox (a request stored without one can be resolved but not run).
/// `review` is persisted with it too: the command was asked to run with reviewable writes,
/// and its resume must run it so.
pub async fn decide_and_check(
    approver: &dyn Approver,
    ctx: &ApprovalContext,
    policy: &CompiledPolicy,
    store: Option<&dyn AuditStore>,
    snapshot: Option<&TurnExecutionSecuritySnapshot>,
    review: bool,
) -> Result<ApprovalResult, ApprovalError> {
    let verdict = policy.explain(&ctx.action);
    if verdict.effect == Effect::Deny {
        return Ok(policy_denial("the action", &ctx.action, &verdict));
    }
    let decision = approver.decide(ctx).await;
    if decision == Decision::Defer {
        let store =
            store.ok_or_else(|| ApprovalError::DeferWithoutStore(ctx.request.id.clone()))?;
        store.save_pending(&ctx.request, &ctx.action, snapshot, review)?;
        return Ok(ApprovalResult::Deferred {
            request_id: ctx.request.id.clone(),
        });
    }
    Ok(recheck(decision, &ctx.request.id, &ctx.action, policy))
}

/// Decide a deferred request, possibly from another process hours later.
///
/// The stored action (exactly the one shown) is re-checked against `policy`: a deny that
/// landed meanwhile resolves the request as denied. `Defer` leaves it pending. A request that
/// was already resolved is not changed: its recorded resolution comes back as
/// [`ApprovalResult::AlreadyResolved`].
pub fn resume_with_decision(
    store: &dyn AuditStore,
    request_id: &str,
    decision: Decision,
    policy: &CompiledPolicy,
) -> Result<ApprovalResult, ApprovalError> {
    let stored = store
        .approval(request_id)?
        .ok_or_else(|| ApprovalError::UnknownRequest(request_id.to_owned()))?;
    if let Some(resolution) = stored.resolution {
        return Ok(ApprovalResult::AlreadyResolved(resolution));
    }
    let result = recheck(decision, request_id, &stored.action, policy);
    let record = match &result {
        ApprovalResult::Deferred { .. } | ApprovalResult::AlreadyResolved(_) => return Ok(result),
        ApprovalResult::Approved { .. } => {
            StoredResolution::new(ApprovalResolution::AllowOnce, "responder")
        }
        ApprovalResult::Denied { source, reason, .. } => {
            let mut record = StoredResolution::new(
                ApprovalResolution::Deny,
                match source {
                    DenialSource::Policy => "policy_denied",
                    DenialSource::Approver => "responder",
                },
            );
            if *source == DenialSource::Approver {
                record.message = Some(reason.clone());
            }
            record
        }
    };
    let (recorded, applied) = store.resolve(request_id, record)?;
    if applied {
        Ok(result)
    } else {
        Ok(ApprovalResult::AlreadyResolved(recorded))
    }
}
