//! The gate: the one entry point an agent runtime calls for every side-effecting tool call.
//!
//! It evaluates the call with the checker for its kind (file, network, process, or the policy
//! alone), consults the turn's `allow_for_turn` grants, asks the approver when the verdict is
//! ask, re-checks the outcome through the same checker, and records every decision as durable
//! audit events. A denied action never reaches the approver. The gate never decides a rule
//! itself: every verdict comes from the checkers and the compiled policy.

use std::collections::HashSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::action::{Action, ActionKind, Effect};
use crate::approval::{
    ApprovalBroker, ApprovalContext, ApprovalResolution, ApprovalResult, Approver, Decision,
    ScopeError, TurnPermissionApprovalRequest, decide_and_check, resume_with_decision,
};
use crate::audit::{
    AuditDecision, AuditError, AuditEventKind, AuditStore, StoredApproval, TurnPermissionAuditEvent,
};
use crate::check::file::{FileCheck, FilePolicyChecker, FileRoots, OpenError};
use crate::check::net::{NetworkPolicyChecker, NetworkResolution};
use crate::check::process::{ProcessSpawnPlan, SpawnRequest};
use crate::error::PolicyError;
use crate::policy::{CompiledPolicy, Rule};
use crate::protocol::TurnExecutionSecuritySnapshot;
use crate::sandbox::{ProcessOutcome, ProcessRequest, ProcessRunner, RunError, SandboxSpec};
use crate::snapshot::{SnapshotError, ensure_native_shell_allowed};
use crate::verdict::Verdict;

/// One tool call as the runtime sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolInvocation {
    /// The classified action kind.
    pub kind: ActionKind,
    /// The target (a path, a command line, a URL or `host:port`, `server/tool`, a name).
    pub target: String,
    /// The tool's name.
    pub tool_name: Option<String>,
    /// The turn item id, for the audit row.
    pub item_id: Option<String>,
    /// The tool call id, for the audit row.
    pub tool_id: Option<String>,
    /// For shell commands: the working directory (relative to the sandbox cwd).
    pub cwd: Option<PathBuf>,
}

impl ToolInvocation {
    /// A call of `kind` on `target`.
    pub fn new(kind: ActionKind, target: impl Into<String>) -> Self {
        ToolInvocation {
            kind,
            target: target.into(),
            tool_name: None,
            item_id: None,
            tool_id: None,
            cwd: None,
        }
    }

    /// The same call, made by `tool`.
    pub fn with_tool(mut self, tool: impl Into<String>) -> Self {
        self.tool_name = Some(tool.into());
        self
    }
}

/// A refusal, shaped as a tool result the model can adapt to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The action that was refused.
    pub action: Action,
    /// Why, in words.
    pub reason: String,
    /// The verdict behind it (the checker's or the policy's), when the policy denied.
    pub verdict: Option<Verdict>,
}

impl Denial {
    /// The text to hand the model as the tool's result.
    pub fn tool_result(&self) -> String {
        format!(
            "Permission denied by turngate: {} `{}`: {}. Continue with an allowed alternative.",
            self.action.kind, self.action.target, self.reason
        )
    }
}

/// What the gate decided for one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Authorization {
    /// Run `action` (the one evaluated, or the approver's modified one, re-checked).
    Allowed {
        /// The action to perform.
        action: Action,
        /// The verdict that allowed it (for an approved ask: the ask verdict).
        verdict: Verdict,
        /// True when an `allow_for_turn` grant answered without a prompt.
        cached_approval: bool,
        /// Rules the approver asked to remember that passed the re-check (to persist).
        remember: Vec<Rule>,
    },
    /// Do not run it; hand `Denial::tool_result` to the model.
    Denied(Denial),
    /// The approver deferred: the request is persisted; resume it with [`Gate::resume`].
    Deferred {
        /// The persisted request, exactly as shown.
        request: Box<TurnPermissionApprovalRequest>,
    },
}

impl Authorization {
    /// True for [`Authorization::Allowed`].
    pub fn is_allowed(&self) -> bool {
        matches!(self, Authorization::Allowed { .. })
    }

    /// Why the call did not run, in words: the denial's reason, or that the request was
    /// deferred. `None` when allowed.
    pub fn reason(&self) -> Option<String> {
        match self {
            Authorization::Allowed { .. } => None,
            Authorization::Denied(d) => Some(d.reason.clone()),
            Authorization::Deferred { request } => Some(deferral_reason(request)),
        }
    }

    /// The text to hand the model as the tool's result when the call did not run (a denial,
    /// or a deferral waiting for a person). `None` when allowed.
    pub fn tool_result(&self) -> Option<String> {
        match self {
            Authorization::Allowed { .. } => None,
            Authorization::Denied(d) => Some(d.tool_result()),
            Authorization::Deferred { request } => Some(deferral_tool_result(request)),
        }
    }
}

/// Why a deferred call did not run, in words.
pub fn deferral_reason(request: &TurnPermissionApprovalRequest) -> String {
    format!("approval request {} was deferred", request.id)
}

/// The text to hand the model for a deferred call (a denial has [`Denial::tool_result`]).
pub fn deferral_tool_result(request: &TurnPermissionApprovalRequest) -> String {
    format!(
        "Permission pending: {}. The action did not run; continue without it or wait for the \
         approval.",
        deferral_reason(request)
    )
}

/// The gate could not carry out a call (as opposed to refusing it).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GateError {
    /// The snapshot's policy did not compile.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The snapshot cannot run native shell commands.
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    /// The audit store failed; nothing was authorized.
    #[error(transparent)]
    Audit(#[from] AuditError),
    /// The approval scope could not be formed.
    #[error(transparent)]
    Scope(#[from] ScopeError),
    /// The approval flow failed.
    #[error(transparent)]
    Approval(#[from] crate::approval::ApprovalError),
    /// The sandboxed runner failed (a required sandbox is unavailable, spawn failed, ...).
    #[error(transparent)]
    Run(#[from] RunError),
    /// No deferred request has this id.
    #[error("no deferred approval request `{0}` in the store")]
    UnknownRequest(String),
}

/// The result of [`Gate::spawn`].
#[derive(Debug)]
pub enum SpawnResult {
    /// The command ran (under the sandbox when the snapshot requires one).
    Ran(Box<ProcessOutcome>),
    /// The command was refused before anything ran.
    Denied(Denial),
    /// The approver deferred.
    Deferred(Box<TurnPermissionApprovalRequest>),
}

/// One checker evaluation: the verdict and the canonical target it judged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evaluation {
    /// The checker's (or, for kinds without a checker, the policy's) verdict.
    pub verdict: Verdict,
    /// The canonical target judged: the resolved path, `host:port`, or the command line as
    /// given. Approval scopes and stored actions use it.
    pub target: String,
    /// For a shell command that is denied or asks: the part of the line that decided, in
    /// words (see [`ProcessSpawnPlan::decided_by`]).
    pub decided_by: Option<String>,
}

/// Evaluate one call with the checker of its kind against `snapshot` and its compiled
/// `policy`: files through the [`FilePolicyChecker`], network through the
/// [`NetworkPolicyChecker`], shell commands through the [`ProcessSpawnPlan`], every other kind
/// through the policy. This is what the gate enforces with, and what `turngate check` prints.
pub fn evaluate(
    snapshot: &TurnExecutionSecuritySnapshot,
    policy: &CompiledPolicy,
    inv: &ToolInvocation,
) -> Evaluation {
    evaluate_with_roots(snapshot, policy, &FileRoots::new(&snapshot.sandbox), inv)
}

/// [`evaluate`] over filesystem roots canonicalized once per turn.
fn evaluate_with_roots(
    snapshot: &TurnExecutionSecuritySnapshot,
    policy: &CompiledPolicy,
    roots: &FileRoots,
    inv: &ToolInvocation,
) -> Evaluation {
    let tool = inv.tool_name.as_deref();
    match inv.kind {
        ActionKind::FileRead | ActionKind::FileWrite => {
            let FileCheck {
                verdict,
                lexical,
                resolved,
                ..
            } = FilePolicyChecker::with_roots(&snapshot.sandbox, policy, roots).check(
                inv.kind,
                &inv.target,
                tool,
            );
            let target = resolved
                .or(lexical)
                .map_or_else(|| inv.target.clone(), |p| p.to_string_lossy().into_owned());
            Evaluation {
                verdict,
                target,
                decided_by: None,
            }
        }
        ActionKind::Network => {
            let check =
                NetworkPolicyChecker::new(&snapshot.network, policy).check(&inv.target, tool);
            let target = check
                .target
                .as_ref()
                .and_then(|t| t.host_port().or_else(|| Some(t.host.clone())))
                .unwrap_or_else(|| inv.target.clone());
            Evaluation {
                verdict: check.verdict,
                target,
                decided_by: None,
            }
        }
        ActionKind::ShellCommand => {
            // The verdict never depends on the environment, so evaluation skips collecting and
            // filtering it; `run_approved` builds the plan with the real one.
            let plan = plan(
                snapshot,
                policy,
                roots,
                &inv.target,
                inv.cwd.as_deref(),
                tool,
                Vec::new(),
            );
            Evaluation {
                decided_by: plan.decided_by(),
                verdict: plan.verdict,
                target: inv.target.clone(),
            }
        }
        _ => Evaluation {
            verdict: policy.explain_parts(inv.kind, &inv.target, tool),
            target: inv.target.clone(),
            decided_by: None,
        },
    }
}

fn plan(
    snapshot: &TurnExecutionSecuritySnapshot,
    policy: &CompiledPolicy,
    roots: &FileRoots,
    command_line: &str,
    cwd: Option<&Path>,
    tool: Option<&str>,
    env: Vec<(OsString, OsString)>,
) -> ProcessSpawnPlan {
    ProcessSpawnPlan::build_with_roots(
        &snapshot.sandbox,
        &snapshot.process,
        policy,
        roots,
        SpawnRequest {
            command_line,
            cwd,
            env,
            timeout_ms: None,
            tool,
        },
    )
}

/// The gate of one turn. Cheap to share behind an `Arc`; every method takes `&self`.
pub struct Gate {
    turn_id: String,
    snapshot: TurnExecutionSecuritySnapshot,
    policy: Arc<CompiledPolicy>,
    /// The snapshot's roots, canonicalized once for the turn.
    roots: FileRoots,
    store: Arc<dyn AuditStore>,
    approver: Arc<dyn Approver>,
    broker: Option<ApprovalBroker>,
    grants: Mutex<HashSet<String>>,
    runner: ProcessRunner,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("turn_id", &self.turn_id)
            .field("mode", &self.snapshot.permission_profile.mode)
            .finish_non_exhaustive()
    }
}

impl Gate {
    /// A gate for `turn_id` under `snapshot`; records `profile_selected`.
    pub fn new(
        turn_id: impl Into<String>,
        snapshot: TurnExecutionSecuritySnapshot,
        store: Arc<dyn AuditStore>,
        approver: Arc<dyn Approver>,
    ) -> Result<Gate, GateError> {
        let policy = Arc::new(snapshot.permission_profile.effective_policy.compile()?);
        let gate = Gate {
            turn_id: turn_id.into(),
            roots: FileRoots::new(&snapshot.sandbox),
            snapshot,
            policy,
            store,
            approver,
            broker: None,
            grants: Mutex::new(HashSet::new()),
            runner: ProcessRunner::native(),
        };
        let mut event = gate.event(AuditEventKind::ProfileSelected, None);
        event.reason = Some(format!(
            "mode {} from {}",
            gate.snapshot.permission_profile.mode,
            gate.snapshot.permission_profile.source.as_str()
        ));
        gate.store.append(event)?;
        Ok(gate)
    }

    /// Also honour `allow_for_turn` grants recorded by `broker` (a UI's responder).
    pub fn with_broker(mut self, broker: ApprovalBroker) -> Self {
        self.broker = Some(broker);
        self
    }

    /// The turn id.
    pub fn turn_id(&self) -> &str {
        &self.turn_id
    }

    /// The turn's snapshot.
    pub fn snapshot(&self) -> &TurnExecutionSecuritySnapshot {
        &self.snapshot
    }

    /// The compiled effective policy.
    pub fn policy(&self) -> &Arc<CompiledPolicy> {
        &self.policy
    }

    /// Grant `scope_hash` for the rest of the turn (an `allow_for_turn` resolution).
    pub fn grant_for_turn(&self, scope_hash: impl Into<String>) {
        if let Ok(mut grants) = self.grants.lock() {
            grants.insert(scope_hash.into());
        }
    }

    fn has_grant(&self, scope_hash: &str) -> bool {
        let own = self
            .grants
            .lock()
            .map(|g| g.contains(scope_hash))
            .unwrap_or(false);
        own || self
            .broker
            .as_ref()
            .is_some_and(|b| b.has_grant(&self.turn_id, scope_hash))
    }

    fn event(
        &self,
        kind: AuditEventKind,
        action_kind: Option<ActionKind>,
    ) -> TurnPermissionAuditEvent {
        let mut event = TurnPermissionAuditEvent::new(
            self.turn_id.clone(),
            kind,
            self.snapshot.permission_profile.mode,
            self.snapshot.permission_profile.source,
        );
        event.action_kind = action_kind;
        event
    }

    /// Append one audit row about `inv` (the call as the model made it).
    fn record(
        &self,
        kind: AuditEventKind,
        inv: &ToolInvocation,
        request_key: Option<&str>,
        decision: AuditDecision,
        reason: impl Into<String>,
        cached: bool,
    ) -> Result<u64, AuditError> {
        let mut event = self.event(kind, Some(inv.kind));
        event.item_id = inv.item_id.clone();
        event.tool_id = inv.tool_id.clone();
        event.request_key = request_key.map(str::to_owned);
        event.decision = Some(decision);
        event.reason = Some(reason.into());
        event.cached_approval_used = cached;
        self.store.append(event)
    }

    fn file_checker(&self) -> FilePolicyChecker<'_> {
        FilePolicyChecker::with_roots(&self.snapshot.sandbox, &self.policy, &self.roots)
    }

    fn net_checker(&self) -> NetworkPolicyChecker<'_> {
        NetworkPolicyChecker::new(&self.snapshot.network, &self.policy)
    }

    /// Evaluate one call with the checker of its kind, without recording or asking.
    pub fn evaluate(&self, inv: &ToolInvocation) -> Evaluation {
        evaluate_with_roots(&self.snapshot, &self.policy, &self.roots, inv)
    }

    fn deny(
        &self,
        inv: &ToolInvocation,
        action: Action,
        reason: String,
        verdict: Option<Verdict>,
    ) -> Result<Authorization, GateError> {
        self.record(
            AuditEventKind::DecisionDenied,
            inv,
            None,
            AuditDecision::Deny,
            reason.clone(),
            false,
        )?;
        Ok(Authorization::Denied(Denial {
            action,
            reason,
            verdict,
        }))
    }

    fn shell_cwd(&self, inv: &ToolInvocation) -> Option<String> {
        (inv.kind == ActionKind::ShellCommand).then(|| {
            let cwd = match &inv.cwd {
                Some(c) if c.is_absolute() => c.clone(),
                Some(c) => self.snapshot.sandbox.cwd.join(c),
                None => self.snapshot.sandbox.cwd.clone(),
            };
            cwd.to_string_lossy().into_owned()
        })
    }

    /// Decide one call: evaluate, consult grants, ask the approver on ask, re-check, record.
    pub async fn authorize(&self, inv: &ToolInvocation) -> Result<Authorization, GateError> {
        let eval = self.evaluate(inv);
        let action = Action {
            kind: inv.kind,
            target: eval.target.clone(),
            tool: inv.tool_name.clone(),
        };
        match eval.verdict.effect {
            Effect::Deny => {
                let reason = match &eval.decided_by {
                    Some(part) => format!("{}: {part}", describe(&eval.verdict)),
                    None => describe(&eval.verdict),
                };
                self.deny(inv, action, reason, Some(eval.verdict))
            }
            Effect::Allow => {
                self.record(
                    AuditEventKind::DecisionAllowed,
                    inv,
                    None,
                    AuditDecision::Allow,
                    eval.verdict.reason.as_str(),
                    false,
                )?;
                Ok(Authorization::Allowed {
                    action,
                    verdict: eval.verdict,
                    cached_approval: false,
                    remember: Vec::new(),
                })
            }
            Effect::Ask => self.ask(inv, action, eval.verdict).await,
        }
    }

    async fn ask(
        &self,
        inv: &ToolInvocation,
        action: Action,
        verdict: Verdict,
    ) -> Result<Authorization, GateError> {
        let cwd = self.shell_cwd(inv);
        let mut request = TurnPermissionApprovalRequest::for_action(
            &self.turn_id,
            &action,
            verdict.reason,
            cwd.as_deref(),
        )?;
        request.summary = Some(format!(
            "{} wants to {}: {}",
            request.tool_name, inv.kind, action.target
        ));
        if self.has_grant(&request.scope_hash) {
            self.record(
                AuditEventKind::DecisionAllowed,
                inv,
                Some(&request.scope_hash),
                AuditDecision::AllowForTurn,
                "cached approval used",
                true,
            )?;
            return Ok(Authorization::Allowed {
                action,
                verdict,
                cached_approval: true,
                remember: Vec::new(),
            });
        }
        self.record(
            AuditEventKind::ApprovalRequested,
            inv,
            Some(&request.id),
            AuditDecision::Ask,
            verdict.reason.as_str(),
            false,
        )?;
        let ctx = ApprovalContext {
            request,
            action,
            verdict,
        };
        let result = decide_and_check(
            self.approver.as_ref(),
            &ctx,
            &self.policy,
            Some(self.store.as_ref()),
        )
        .await?;
        self.settle(inv, ctx, result)
    }

    /// Turn an approval result into an authorization: re-check an approved action through the
    /// checker of its kind (an approval never crosses a deny), and record the resolution.
    fn settle(
        &self,
        inv: &ToolInvocation,
        ctx: ApprovalContext,
        result: ApprovalResult,
    ) -> Result<Authorization, GateError> {
        let request_id = ctx.request.id.clone();
        match result {
            ApprovalResult::Approved {
                action, remember, ..
            } => {
                let recheck_inv = ToolInvocation {
                    kind: action.kind,
                    target: action.target.clone(),
                    tool_name: action.tool.clone(),
                    ..inv.clone()
                };
                let recheck = self.evaluate(&recheck_inv);
                if recheck.verdict.effect == Effect::Deny {
                    self.record(
                        AuditEventKind::ApprovalResolved,
                        inv,
                        Some(&request_id),
                        AuditDecision::Deny,
                        "policy_denied",
                        false,
                    )?;
                    let reason = format!(
                        "{}; an approval cannot override a deny",
                        describe(&recheck.verdict)
                    );
                    return self.deny(inv, action, reason, Some(recheck.verdict));
                }
                let for_turn = self.has_grant(&ctx.request.scope_hash);
                let decision = if for_turn {
                    AuditDecision::AllowForTurn
                } else {
                    AuditDecision::AllowOnce
                };
                self.record(
                    AuditEventKind::ApprovalResolved,
                    inv,
                    Some(&request_id),
                    decision,
                    "approved",
                    false,
                )?;
                self.record(
                    AuditEventKind::DecisionAllowed,
                    inv,
                    Some(&request_id),
                    decision,
                    "approved",
                    false,
                )?;
                Ok(Authorization::Allowed {
                    action,
                    verdict: ctx.verdict,
                    cached_approval: false,
                    remember,
                })
            }
            ApprovalResult::Denied { reason, .. } => {
                self.record(
                    AuditEventKind::ApprovalResolved,
                    inv,
                    Some(&request_id),
                    AuditDecision::Deny,
                    reason.clone(),
                    false,
                )?;
                self.deny(inv, ctx.action, reason, Some(ctx.verdict))
            }
            ApprovalResult::Deferred { .. } => Ok(Authorization::Deferred {
                request: Box::new(ctx.request),
            }),
            ApprovalResult::AlreadyResolved(stored) => {
                let reason = format!(
                    "the request was already resolved as {}",
                    stored.resolution.as_str()
                );
                if matches!(
                    stored.resolution,
                    ApprovalResolution::AllowOnce | ApprovalResolution::AllowForTurn
                ) {
                    self.settle(
                        inv,
                        ctx.clone(),
                        ApprovalResult::Approved {
                            action: ctx.action,
                            remember: Vec::new(),
                            rejected: Vec::new(),
                        },
                    )
                } else {
                    self.deny(inv, ctx.action, reason, Some(ctx.verdict))
                }
            }
        }
    }

    /// Decide a deferred request (possibly persisted by another process): the stored action,
    /// exactly as shown, is re-checked against this gate's policy and checkers.
    pub fn resume(&self, request_id: &str, decision: Decision) -> Result<Authorization, GateError> {
        let stored: StoredApproval = self
            .store
            .approval(request_id)?
            .ok_or_else(|| GateError::UnknownRequest(request_id.to_owned()))?;
        let inv = ToolInvocation {
            kind: stored.action.kind,
            target: stored.action.target.clone(),
            tool_name: stored.action.tool.clone(),
            item_id: None,
            tool_id: None,
            cwd: None,
        };
        let verdict = self.evaluate(&inv).verdict;
        let decision = if verdict.effect == Effect::Deny {
            Decision::deny(describe(&verdict))
        } else {
            decision
        };
        let result = resume_with_decision(self.store.as_ref(), request_id, decision, &self.policy)?;
        let ctx = ApprovalContext {
            request: stored.request,
            action: stored.action,
            verdict,
        };
        self.settle(&inv, ctx, result)
    }

    /// Authorize a shell command and, when allowed, run it through the sandboxed runner built
    /// from the same snapshot. A snapshot that requires a sandbox the platform cannot provide
    /// refuses to run (an error), never runs unconfined.
    pub async fn spawn(&self, inv: &ToolInvocation) -> Result<SpawnResult, GateError> {
        ensure_native_shell_allowed(&self.snapshot)?;
        let action = match self.authorize(inv).await? {
            Authorization::Allowed { action, .. } => action,
            Authorization::Denied(denial) => return Ok(SpawnResult::Denied(denial)),
            Authorization::Deferred { request } => return Ok(SpawnResult::Deferred(request)),
        };
        self.run_approved(&action.target, inv.cwd.as_deref(), action.tool.as_deref())
            .await
            .map(|outcome| SpawnResult::Ran(Box::new(outcome)))
    }

    /// Run a command line that was already authorized (e.g. a resumed deferral): the plan is
    /// rebuilt from the snapshot, so the environment filter, timeout cap and sandbox apply.
    pub async fn run_approved(
        &self,
        command_line: &str,
        cwd: Option<&Path>,
        tool: Option<&str>,
    ) -> Result<ProcessOutcome, GateError> {
        ensure_native_shell_allowed(&self.snapshot)?;
        let plan = plan(
            &self.snapshot,
            &self.policy,
            &self.roots,
            command_line,
            cwd,
            tool,
            std::env::vars_os().collect(),
        );
        let mut request = ProcessRequest::new(plan.argv.clone(), &plan.cwd)
            .env(plan.env.clone())
            .new_session(plan.new_session)
            .stdin(if plan.inherit_stdin {
                crate::sandbox::StdinPolicy::Inherit
            } else {
                crate::sandbox::StdinPolicy::Null
            });
        if let Some(timeout) = plan.timeout {
            request = request.timeout(timeout);
        }
        if plan.sandbox_required {
            request = request.sandbox(SandboxSpec::from_snapshot(&self.snapshot.sandbox));
        }
        Ok(self.runner.run(request).await?)
    }

    /// Open a file for reading through the gate: authorize, then open race-free beneath its
    /// root (`openat2` with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS` on Linux).
    pub async fn open_read(
        &self,
        inv: &ToolInvocation,
    ) -> Result<Result<std::fs::File, Denial>, GateError> {
        self.open(inv, false).await
    }

    /// Open (create or truncate) a file for writing through the gate, race-free.
    pub async fn open_write(
        &self,
        inv: &ToolInvocation,
    ) -> Result<Result<std::fs::File, Denial>, GateError> {
        self.open(inv, true).await
    }

    async fn open(
        &self,
        inv: &ToolInvocation,
        write: bool,
    ) -> Result<Result<std::fs::File, Denial>, GateError> {
        let kind = if write {
            ActionKind::FileWrite
        } else {
            ActionKind::FileRead
        };
        let inv = ToolInvocation {
            kind,
            ..inv.clone()
        };
        match self.authorize(&inv).await? {
            Authorization::Allowed { .. } => {}
            Authorization::Denied(denial) => return Ok(Err(denial)),
            Authorization::Deferred { request } => {
                return Ok(Err(Denial {
                    action: Action::new(kind, inv.target.clone()),
                    reason: deferral_reason(&request),
                    verdict: None,
                }));
            }
        }
        let checker = self.file_checker();
        let opened = if write {
            checker.open_write(&inv.target, inv.tool_name.as_deref())
        } else {
            checker.open_read(&inv.target, inv.tool_name.as_deref())
        };
        Ok(opened.map_err(|e: OpenError| Denial {
            action: Action::new(kind, inv.target.clone()),
            reason: e.to_string(),
            verdict: None,
        }))
    }

    /// Check a URL and resolve it: connect only to the returned, vetted addresses.
    pub fn resolve_and_check(&self, url: &str, tool: Option<&str>) -> NetworkResolution {
        self.net_checker().resolve_and_check(url, tool)
    }
}

/// A verdict in words: effect, reason code, and the deciding rule and layer.
pub fn describe(verdict: &Verdict) -> String {
    match &verdict.rule {
        Some(rule) => format!(
            "{} by rule `{}` ({}) in layer `{}`",
            verdict.effect,
            rule.pattern,
            verdict.reason.as_str(),
            verdict.layer
        ),
        None => format!(
            "{} ({}) in layer `{}`",
            verdict.effect,
            verdict.reason.as_str(),
            verdict.layer
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Reason;

    #[test]
    fn a_refusal_is_worded_for_the_model_and_an_allow_is_not() -> Result<(), ScopeError> {
        let action = Action::new(ActionKind::FileWrite, "/w/a.txt");
        let request =
            TurnPermissionApprovalRequest::for_action("t", &action, Reason::AskRule, None)?;
        let id = request.id.clone();
        let deferred = Authorization::Deferred {
            request: Box::new(request),
        };
        assert_eq!(
            deferred.reason(),
            Some(format!("approval request {id} was deferred"))
        );
        let text = deferred.tool_result().unwrap_or_default();
        assert!(
            text.starts_with("Permission pending: approval request "),
            "{text}"
        );
        assert!(text.contains(&id), "{text}");

        let denial = Denial {
            action: action.clone(),
            reason: "deny (outside_roots) in layer `x`".to_owned(),
            verdict: None,
        };
        let denied = Authorization::Denied(denial.clone());
        assert_eq!(denied.reason(), Some(denial.reason.clone()));
        assert_eq!(denied.tool_result(), Some(denial.tool_result()));

        let allowed = Authorization::Allowed {
            verdict: Verdict::without_rule(Effect::Allow, Arc::from("defaults"), Reason::Default),
            action,
            cached_approval: false,
            remember: Vec::new(),
        };
        assert_eq!((allowed.reason(), allowed.tool_result()), (None, None));
        Ok(())
    }
}
