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
use crate::approval::DenialSource;
use crate::approval::{
    ApprovalBroker, ApprovalContext, ApprovalResolution, ApprovalResult, Approver, Decision,
    ScopeError, TurnPermissionApprovalRequest, decide_and_check, resume_with_decision,
};
use crate::audit::{
    AuditDecision, AuditError, AuditEventKind, AuditStore, Consumed, PendingAppend, Redactor,
    StoredApproval, StoredResolution, TurnPermissionAuditEvent,
};
use crate::check::file::{FileCheck, FilePolicyChecker, FileRoots, OpenError};
use crate::check::net::{NetworkPolicyChecker, NetworkResolution};
use crate::check::process::{ProcessSpawnPlan, SpawnRequest};
use crate::error::PolicyError;
use crate::policy::{CompiledPolicy, Rule, TurnAction, TurnHistory};
use crate::protocol::{CapOrigin, TurnExecutionSecuritySnapshot};
use crate::sandbox::{ProcessOutcome, ProcessRequest, ProcessRunner, RunError, SandboxSpec};
use crate::snapshot::{SnapshotError, cap_from_parent, ensure_native_shell_allowed, intersect};
use crate::verdict::Verdict;

mod egress;
mod tools;
pub use egress::PROXY_TOOL;
pub use tools::{Continuation, SpawnOptions};

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
    /// A reviewed run could not start or its change set could not be recorded.
    #[error(transparent)]
    Changes(#[from] crate::changes::ChangeError),
    /// The audit store lies in a root where the sandbox cannot hide it from the command
    /// (which could then read, or rewrite, its own audit log and approvals): nothing ran.
    #[error(
        "the audit store's directory {} lies in the root {} and cannot be hidden from the \
         command there; put the store (--store) outside the turn's roots or in a \
         subdirectory of one; nothing ran",
        store.display(),
        root.display()
    )]
    StoreExposed {
        /// The store's directory.
        store: std::path::PathBuf,
        /// The root it lies in.
        root: std::path::PathBuf,
    },
    /// No deferred request has this id.
    #[error("no deferred approval request `{0}` in the store")]
    UnknownRequest(String),
    /// Only a `shell_command` authorization can start a process (and a request of one kind
    /// never runs as another).
    #[error(
        "`{got}` is not `{expected}`: only a {expected} authorization can run this; nothing ran"
    )]
    WrongKind {
        /// The kind this call needs.
        expected: ActionKind,
        /// The kind it was given.
        got: ActionKind,
    },
    /// An `allow_once` approval was already spent: its action ran once.
    #[error(
        "already_used: approval request `{0}` was approved and its action already ran; ask again to run it again"
    )]
    AlreadyUsed(String),
    /// The request is not approved (pending, denied, cancelled, expired).
    #[error("approval request `{request}` is {state}; only an approved request runs")]
    NotApproved {
        /// The request id.
        request: String,
        /// Its state, in words.
        state: String,
    },
    /// An approval (any resolution) answers only the turn that asked for it.
    #[error(
        "approval request `{request}` belongs to turn `{turn}`, not to this turn (`{this}`): an approval answers only the turn that asked"
    )]
    OtherTurn {
        /// The request id.
        request: String,
        /// Its turn.
        turn: String,
        /// The resuming gate's turn.
        this: String,
    },
    /// An approval given for one target was offered for a call on another (a guarded tool's
    /// `approval=`): nothing was decided, spent or run.
    #[error(
        "approval request `{request}` approved `{approved}`, not this call's `{this}`; nothing was decided or run"
    )]
    OtherTarget {
        /// The request id.
        request: String,
        /// The target the request was made for.
        approved: String,
        /// This call's checked target.
        this: String,
    },
    /// A lock guarding the gate's in-memory state was poisoned by a panic elsewhere.
    #[error("the gate's {0} lock was poisoned by an earlier panic; nothing was authorized")]
    Poisoned(&'static str),
    /// The request was stored before requests kept their snapshot, so the sandbox it
    /// required is unknown: it can be resolved but never run.
    #[error(
        "approval request `{0}` was stored without its snapshot (an older turngate); the sandbox it required is unknown, so it cannot run: run the command again"
    )]
    NoSnapshot(String),
    /// The request was deferred from a spawn with reviewable writes: it runs only reviewed
    /// ([`Gate::resume_spawn_reviewed`], [`Gate::run_approved_reviewed`]), never directly on
    /// the workspace. Nothing was decided, spent or run.
    #[error(
        "approval request `{0}` was asked to run with review (reviewable writes): it must be resumed with review; nothing ran and its approval is unspent"
    )]
    ReviewRequired(String),
}

/// The result of [`Gate::spawn_reviewed`]: the spawn's result and, when the command ran, its
/// change set (pending: the workspace is untouched until it is applied).
#[derive(Debug)]
pub struct Reviewed {
    /// What happened to the command.
    pub result: SpawnResult,
    /// The command's writes, when it ran.
    pub change_set: Option<crate::changes::ChangeSet>,
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

/// A verdict a caller judged one call under besides the gate's own evaluation of it (an MCP
/// tool's changed definition, a path or URL among its arguments): the strictest of all
/// decides, and `because` says which part did in the denial and the approval summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlsoJudged {
    /// The verdict.
    pub verdict: Verdict,
    /// What it judged, in words.
    pub because: String,
    /// An ask from it needs a fresh answer: an `allow_for_turn` grant of the call's scope
    /// (given before the reason to ask arose) does not answer it.
    pub fresh: bool,
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

/// What a decision is judged and a command run under: a snapshot, its compiled policy and its
/// canonicalized roots. The gate's own turn, or a resumed request's stored snapshot
/// intersected with the gate's.
struct Under {
    snapshot: TurnExecutionSecuritySnapshot,
    policy: Arc<CompiledPolicy>,
    roots: FileRoots,
}

impl Under {
    fn new(snapshot: TurnExecutionSecuritySnapshot) -> Result<Under, GateError> {
        let policy = Arc::new(snapshot.permission_profile.effective_policy.compile()?);
        Ok(Under {
            roots: FileRoots::new(&snapshot.sandbox),
            snapshot,
            policy,
        })
    }

    fn evaluate(&self, inv: &ToolInvocation, turn: Option<TurnHistory>) -> Evaluation {
        match turn {
            Some(mut turn) if self.policy.is_turn_aware() => {
                turn.workspace = self
                    .roots
                    .workspace_root()
                    .map(|p| p.to_string_lossy().into_owned());
                let policy = self.policy.with_turn(Arc::new(turn));
                evaluate_with_roots(&self.snapshot, &policy, &self.roots, inv)
            }
            _ => evaluate_with_roots(&self.snapshot, &self.policy, &self.roots, inv),
        }
    }
}

/// What [`Gate::resume_checked`] holds a stored request to before it decides or spends
/// anything. The default checks nothing beyond the turn.
#[derive(Default, Clone, Copy)]
struct ResumeChecks<'a> {
    /// The kind the stored (and any modified) action must be.
    required: Option<ActionKind>,
    /// The caller runs the action with reviewable writes.
    reviewed: bool,
    /// The guarded tool's call resuming it: its item and tool call ids land in the audit rows.
    caller: Option<&'a ToolInvocation>,
}

/// What [`Gate::resume_checked`] decided, and what the action runs under.
struct Resumed {
    auth: Authorization,
    /// The stored snapshot intersected with the gate's; `None` for a request stored without one.
    under: Option<Under>,
    /// The stored call, with the cwd the request was shown with.
    inv: ToolInvocation,
}

/// One audit row about an action, before it is appended.
struct Row<'a> {
    kind: AuditEventKind,
    inv: &'a ToolInvocation,
    /// The action as decided (its target is the normalized one).
    action: &'a Action,
    request_key: Option<&'a str>,
    decision: AuditDecision,
    reason: String,
    cached: bool,
    verdict: Option<&'a Verdict>,
    decider: &'a str,
    message: Option<String>,
}

/// The gate of one turn. Cheap to share behind an `Arc`; every method takes `&self`.
pub struct Gate {
    turn_id: String,
    own: Under,
    store: Arc<dyn AuditStore>,
    approver: Arc<dyn Approver>,
    broker: Option<ApprovalBroker>,
    grants: Mutex<HashSet<String>>,
    /// The turn's allowed actions, for turn-aware rules: loaded from the store the first time
    /// a turn-aware policy needs them (so a turn resumed in another process keeps its
    /// history), then kept in memory as the gate records allows.
    history: Mutex<Option<Vec<(u64, TurnAction)>>>,
    runner: ProcessRunner,
    redactor: Redactor,
    /// The `profile_selected` row of a gate made by [`Gate::new_started`], until the first
    /// record waits for it (so no decision is recorded ahead of it, and a failure to record
    /// it fails that decision).
    profile: Mutex<Profile>,
}

/// Whether a gate's `profile_selected` row is in the store.
enum Profile {
    Recorded,
    Pending(PendingAppend),
    /// It could not be recorded: every later record fails too (no decision is recorded in a
    /// turn whose profile is missing).
    Failed(String),
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("turn_id", &self.turn_id)
            .field("mode", &self.own.snapshot.permission_profile.mode)
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
        let gate = Self::new_started(turn_id, snapshot, store, approver)?;
        gate.profile_recorded()?;
        Ok(gate)
    }

    /// [`Gate::new`] without waiting for the disk: `profile_selected` is queued in the store
    /// (ahead of every later row) and the gate's first record waits for it, failing if it was
    /// not recorded. For hosts whose constructor runs on an event loop (Node's `new Gate`).
    pub fn new_started(
        turn_id: impl Into<String>,
        snapshot: TurnExecutionSecuritySnapshot,
        store: Arc<dyn AuditStore>,
        approver: Arc<dyn Approver>,
    ) -> Result<Gate, GateError> {
        let gate = Gate {
            turn_id: turn_id.into(),
            own: Under::new(snapshot)?,
            store,
            approver,
            broker: None,
            grants: Mutex::new(HashSet::new()),
            history: Mutex::new(None),
            runner: ProcessRunner::native(),
            redactor: Redactor::default(),
            profile: Mutex::new(Profile::Recorded),
        };
        let mut event = gate.event(AuditEventKind::ProfileSelected, None);
        event.reason = Some(format!(
            "mode {} from {}",
            gate.own.snapshot.permission_profile.mode,
            gate.own.snapshot.permission_profile.source.as_str()
        ));
        event.decider = Some("policy".to_owned());
        let pending = gate.store.append_start(event);
        *gate.profile.lock().unwrap_or_else(|e| e.into_inner()) = Profile::Pending(pending);
        Ok(gate)
    }

    /// Wait for the `profile_selected` row, once: every record comes after it.
    fn profile_recorded(&self) -> Result<(), AuditError> {
        // Held while waiting, so a concurrent first record waits too.
        let mut profile = self.profile.lock().unwrap_or_else(|e| e.into_inner());
        match std::mem::replace(&mut *profile, Profile::Recorded) {
            Profile::Recorded => Ok(()),
            Profile::Pending(pending) => pending.wait().map(drop).inspect_err(|e| {
                *profile = Profile::Failed(e.to_string());
            }),
            Profile::Failed(message) => {
                *profile = Profile::Failed(message.clone());
                Err(AuditError::Corrupt {
                    path: String::new(),
                    what: "profile_selected".to_owned(),
                    message: format!("the turn's profile was not recorded: {message}"),
                })
            }
        }
    }

    /// Also honour `allow_for_turn` grants recorded by `broker` (a UI's responder).
    pub fn with_broker(mut self, broker: ApprovalBroker) -> Self {
        self.broker = Some(broker);
        self
    }

    /// Record targets through `redactor` instead of [`Redactor::default`].
    pub fn with_redactor(mut self, redactor: Redactor) -> Self {
        self.redactor = redactor;
        self
    }

    /// The turn id.
    pub fn turn_id(&self) -> &str {
        &self.turn_id
    }

    /// The turn's snapshot.
    pub fn snapshot(&self) -> &TurnExecutionSecuritySnapshot {
        &self.own.snapshot
    }

    /// The compiled effective policy.
    pub fn policy(&self) -> &Arc<CompiledPolicy> {
        &self.own.policy
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
            self.own.snapshot.permission_profile.mode,
            self.own.snapshot.permission_profile.source,
        );
        event.action_kind = action_kind;
        event.timestamp = Some(crate::audit::now_rfc3339());
        event
    }

    /// Append one audit row about an action.
    fn record(&self, row: Row<'_>) -> Result<u64, AuditError> {
        let mut event = self.event(row.kind, Some(row.action.kind));
        event.item_id = row.inv.item_id.clone();
        event.tool_id = row.inv.tool_id.clone();
        event.request_key = row.request_key.map(str::to_owned);
        event.decision = Some(row.decision);
        event.reason = Some(row.reason);
        event.cached_approval_used = row.cached;
        event.target = Some(self.redactor.redact(&row.action.target));
        event.tool_name = row
            .action
            .tool
            .clone()
            .or_else(|| row.inv.tool_name.clone());
        if let Some(v) = row.verdict {
            event.rule = v.rule.as_ref().map(|r| r.pattern.clone());
            event.layer = Some(v.layer.to_string());
        }
        event.would = row
            .verdict
            .and_then(|v| v.would.as_ref())
            .map(ToString::to_string);
        event.decider = Some(row.decider.to_owned());
        event.message = row.message;
        let at_us = event
            .timestamp
            .as_deref()
            .and_then(crate::policy::parse_timestamp_us);
        self.profile_recorded()?;
        let seq = self.store.append(event)?;
        if row.kind == AuditEventKind::DecisionAllowed {
            if let (Ok(mut history), Some(at_us)) = (self.history.lock(), at_us) {
                // A row appended while another call was loading the history from the store may
                // already be in it: each seq is kept once.
                if let Some(actions) = history.as_mut() {
                    if !actions.iter().rev().any(|(s, _)| *s == seq) {
                        actions.push((
                            seq,
                            TurnAction {
                                kind: row.action.kind,
                                target: row.action.target.clone(),
                                tool: event_tool(row.action, row.inv),
                                at_us,
                            },
                        ));
                    }
                }
            }
        }
        Ok(seq)
    }

    /// The turn's history now, loading it from the store the first time.
    fn turn_history(&self) -> Result<TurnHistory, GateError> {
        let mut guard = self
            .history
            .lock()
            .map_err(|_| GateError::Poisoned("turn history"))?;
        if guard.is_none() {
            let events = self.store.replay(&self.turn_id)?;
            *guard = Some(
                events
                    .iter()
                    .filter_map(|e| TurnAction::from_event(e).map(|a| (e.seq, a)))
                    .collect(),
            );
        }
        Ok(TurnHistory {
            actions: guard.iter().flatten().map(|(_, a)| a.clone()).collect(),
            now_us: crate::policy::now_us(),
            workspace: None,
        })
    }

    /// Evaluate under `under`, with the turn's history when its policy is turn-aware.
    fn evaluate_in_turn(
        &self,
        under: &Under,
        inv: &ToolInvocation,
    ) -> Result<Evaluation, GateError> {
        let turn = if under.policy.is_turn_aware() {
            Some(self.turn_history()?)
        } else {
            None
        };
        Ok(under.evaluate(inv, turn))
    }

    /// Evaluate one call with the checker of its kind, without recording or asking. A
    /// turn-aware rule is judged against the turn's history so far.
    pub fn evaluate(&self, inv: &ToolInvocation) -> Evaluation {
        match self.evaluate_in_turn(&self.own, inv) {
            Ok(e) => e,
            // Without the turn's history a turn-aware rule cannot be judged: fail closed.
            Err(_) => Evaluation {
                verdict: Verdict::without_rule(
                    Effect::Deny,
                    "turn",
                    crate::verdict::Reason::IoError,
                ),
                target: inv.target.clone(),
                decided_by: Some(
                    "the turn's history could not be read from the audit store".to_owned(),
                ),
            },
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn deny(
        &self,
        inv: &ToolInvocation,
        action: Action,
        reason: String,
        verdict: Option<Verdict>,
        request_key: Option<&str>,
        decider: &str,
        message: Option<String>,
    ) -> Result<Authorization, GateError> {
        self.denial(inv, action, reason, verdict, request_key, decider, message)
            .map(Authorization::Denied)
    }

    /// Record a denial and shape it for the model.
    #[allow(clippy::too_many_arguments)]
    fn denial(
        &self,
        inv: &ToolInvocation,
        action: Action,
        reason: String,
        verdict: Option<Verdict>,
        request_key: Option<&str>,
        decider: &str,
        message: Option<String>,
    ) -> Result<Denial, GateError> {
        self.record(Row {
            kind: AuditEventKind::DecisionDenied,
            inv,
            action: &action,
            request_key,
            decision: AuditDecision::Deny,
            reason: reason.clone(),
            cached: false,
            verdict: verdict.as_ref(),
            decider,
            message,
        })?;
        Ok(Denial {
            action,
            reason,
            verdict,
        })
    }

    fn shell_cwd(&self, inv: &ToolInvocation) -> Option<String> {
        (inv.kind == ActionKind::ShellCommand).then(|| {
            let cwd = match &inv.cwd {
                Some(c) if c.is_absolute() => c.clone(),
                Some(c) => self.own.snapshot.sandbox.cwd.join(c),
                None => self.own.snapshot.sandbox.cwd.clone(),
            };
            cwd.to_string_lossy().into_owned()
        })
    }

    /// Decide one call: evaluate, consult grants, ask the approver on ask, re-check, record.
    ///
    /// The allowed action's target is the *checked* one (for files, the resolved absolute
    /// path): a tool must act on it, never on the relative path it was called with.
    pub async fn authorize(&self, inv: &ToolInvocation) -> Result<Authorization, GateError> {
        self.authorize_under(&self.own, inv, &[], false).await
    }

    /// [`Gate::authorize`], where `also` are verdicts the caller judged the same call under
    /// (the checks of an MCP call's path arguments, its tool's changed definition): the
    /// strictest of the gate's evaluation and these decides, is recorded and, for an ask,
    /// goes to the approver. On a tie a `fresh` verdict decides, so its reason is the one
    /// shown, and a `fresh` ask is never answered by an earlier `allow_for_turn` grant.
    pub async fn authorize_also(
        &self,
        inv: &ToolInvocation,
        also: &[AlsoJudged],
    ) -> Result<Authorization, GateError> {
        self.authorize_under(&self.own, inv, also, false).await
    }

    /// [`Gate::authorize`] under `under` (the gate's own snapshot, or a resumed request's
    /// stored one, whose command's connections the egress proxy decides). `review`: the
    /// call is a shell command to run with reviewable writes, so a deferred request records
    /// it and its resume runs reviewed.
    async fn authorize_under(
        &self,
        under: &Under,
        inv: &ToolInvocation,
        also: &[AlsoJudged],
        review: bool,
    ) -> Result<Authorization, GateError> {
        let mut eval = self.evaluate_in_turn(under, inv)?;
        let mut use_grants = true;
        for a in also {
            let effect = a.verdict.effect;
            if effect > eval.verdict.effect || (a.fresh && effect == eval.verdict.effect) {
                eval.verdict = a.verdict.clone();
                eval.decided_by = Some(a.because.clone());
            }
            if a.fresh && effect == Effect::Ask {
                use_grants = false;
            }
        }
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
                self.deny(
                    inv,
                    action,
                    reason,
                    Some(eval.verdict),
                    None,
                    "policy",
                    None,
                )
            }
            Effect::Allow => {
                self.record(Row {
                    kind: AuditEventKind::DecisionAllowed,
                    inv,
                    action: &action,
                    request_key: None,
                    decision: AuditDecision::Allow,
                    reason: eval.verdict.reason.as_str().to_owned(),
                    cached: false,
                    verdict: Some(&eval.verdict),
                    decider: "policy",
                    message: None,
                })?;
                Ok(Authorization::Allowed {
                    action,
                    verdict: eval.verdict,
                    cached_approval: false,
                    remember: Vec::new(),
                })
            }
            Effect::Ask => {
                self.ask(
                    under,
                    inv,
                    action,
                    eval.verdict,
                    eval.decided_by.as_deref().filter(|_| !also.is_empty()),
                    use_grants,
                    review,
                )
                .await
            }
        }
    }

    /// Ask the approver (unless a grant answers it). `because` is added to the summary the
    /// person is shown; `use_grants: false` skips the turn's `allow_for_turn` grants;
    /// `review` is persisted with a deferred request (see [`Gate::resume_spawn_reviewed`]).
    #[allow(clippy::too_many_arguments)]
    async fn ask(
        &self,
        under: &Under,
        inv: &ToolInvocation,
        action: Action,
        verdict: Verdict,
        because: Option<&str>,
        use_grants: bool,
        review: bool,
    ) -> Result<Authorization, GateError> {
        let cwd = self.shell_cwd(inv);
        let mut request = TurnPermissionApprovalRequest::for_action(
            &self.turn_id,
            &action,
            verdict.reason,
            cwd.as_deref(),
        )?;
        request.summary = Some(match because {
            Some(because) => format!(
                "{} wants to {}: {} ({because})",
                request.tool_name, inv.kind, action.target
            ),
            None => format!(
                "{} wants to {}: {}",
                request.tool_name, inv.kind, action.target
            ),
        });
        if use_grants && self.has_grant(&request.scope_hash) {
            self.record(Row {
                kind: AuditEventKind::DecisionAllowed,
                inv,
                action: &action,
                request_key: Some(&request.scope_hash),
                decision: AuditDecision::AllowForTurn,
                reason: "cached approval used".to_owned(),
                cached: true,
                verdict: Some(&verdict),
                decider: "cached_grant",
                message: None,
            })?;
            return Ok(Authorization::Allowed {
                action,
                verdict,
                cached_approval: true,
                remember: Vec::new(),
            });
        }
        self.record(Row {
            kind: AuditEventKind::ApprovalRequested,
            inv,
            action: &action,
            request_key: Some(&request.id),
            decision: AuditDecision::Ask,
            reason: verdict.reason.as_str().to_owned(),
            cached: false,
            verdict: Some(&verdict),
            decider: "policy",
            message: None,
        })?;
        let ctx = ApprovalContext {
            request,
            action,
            verdict,
        };
        let result = decide_and_check(
            self.approver.as_ref(),
            &ctx,
            &under.policy,
            Some(self.store.as_ref()),
            Some(&under.snapshot),
            review,
        )
        .await?;
        self.settle(under, inv, ctx, result, None)
    }

    /// Turn an approval result into an authorization: re-check an approved action through the
    /// checker of its kind under `under` (an approval never crosses a deny), and record the
    /// resolution. `stored` is the recorded resolution of a resumed request (who decided and
    /// their words).
    fn settle(
        &self,
        under: &Under,
        inv: &ToolInvocation,
        ctx: ApprovalContext,
        result: ApprovalResult,
        stored: Option<&StoredResolution>,
    ) -> Result<Authorization, GateError> {
        let request_id = ctx.request.id.clone();
        let decider = stored
            .and_then(|s| s.decider.clone())
            .unwrap_or_else(|| "approver".to_owned());
        let message = stored.and_then(|s| s.message.clone());
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
                let recheck = self.evaluate_in_turn(under, &recheck_inv)?;
                if recheck.verdict.effect == Effect::Deny {
                    self.record(Row {
                        kind: AuditEventKind::ApprovalResolved,
                        inv,
                        action: &action,
                        request_key: Some(&request_id),
                        decision: AuditDecision::Deny,
                        reason: "policy_denied".to_owned(),
                        cached: false,
                        verdict: Some(&recheck.verdict),
                        decider: "policy",
                        message: None,
                    })?;
                    let reason = format!(
                        "{}; an approval cannot override a deny",
                        describe(&recheck.verdict)
                    );
                    return self.deny(
                        inv,
                        action,
                        reason,
                        Some(recheck.verdict),
                        Some(&request_id),
                        "policy",
                        None,
                    );
                }
                // The action as shown must still be the action that runs: when the approved
                // (unmodified) target now resolves elsewhere, a symlink or a rename changed it
                // while the approval was pending, and nothing runs.
                if action == ctx.action && recheck.target != action.target {
                    let reason = format!(
                        "the approved target `{}` now resolves to `{}` (it changed while the \
                         approval was pending); nothing ran",
                        action.target, recheck.target
                    );
                    return self.deny(
                        inv,
                        action,
                        reason,
                        Some(recheck.verdict),
                        Some(&request_id),
                        "policy",
                        None,
                    );
                }
                // The checked form of the approved action: a modified relative path is
                // resolved like any other target.
                let action = Action {
                    target: recheck.target,
                    ..action
                };
                let for_turn = self.has_grant(&ctx.request.scope_hash)
                    || stored.is_some_and(|s| s.resolution == ApprovalResolution::AllowForTurn);
                let decision = if for_turn {
                    AuditDecision::AllowForTurn
                } else {
                    AuditDecision::AllowOnce
                };
                for kind in [
                    AuditEventKind::ApprovalResolved,
                    AuditEventKind::DecisionAllowed,
                ] {
                    self.record(Row {
                        kind,
                        inv,
                        action: &action,
                        request_key: Some(&request_id),
                        decision,
                        reason: "approved".to_owned(),
                        cached: false,
                        verdict: Some(&ctx.verdict),
                        decider: &decider,
                        message: message.clone(),
                    })?;
                }
                Ok(Authorization::Allowed {
                    action,
                    verdict: ctx.verdict,
                    cached_approval: false,
                    remember,
                })
            }
            ApprovalResult::Denied { reason, source } => {
                let message = match source {
                    DenialSource::Approver => Some(reason.clone()),
                    DenialSource::Policy => message,
                };
                let decider = match source {
                    DenialSource::Approver => decider.as_str(),
                    DenialSource::Policy => "policy",
                };
                self.record(Row {
                    kind: AuditEventKind::ApprovalResolved,
                    inv,
                    action: &ctx.action,
                    request_key: Some(&request_id),
                    decision: AuditDecision::Deny,
                    reason: reason.clone(),
                    cached: false,
                    verdict: Some(&ctx.verdict),
                    decider,
                    message: message.clone(),
                })?;
                self.deny(
                    inv,
                    ctx.action,
                    reason,
                    Some(ctx.verdict),
                    Some(&request_id),
                    decider,
                    message,
                )
            }
            ApprovalResult::Deferred { .. } => Ok(Authorization::Deferred {
                request: Box::new(ctx.request),
            }),
            ApprovalResult::AlreadyResolved(recorded) => {
                if recorded.resolution.is_allow() {
                    let approved = ApprovalResult::Approved {
                        action: ctx.action.clone(),
                        remember: Vec::new(),
                        rejected: Vec::new(),
                    };
                    self.settle(under, inv, ctx, approved, Some(&recorded))
                } else {
                    let reason = format!(
                        "the request was already resolved as {}",
                        recorded.resolution.as_str()
                    );
                    let decider = recorded.decider.as_deref().unwrap_or("approver");
                    self.deny(
                        inv,
                        ctx.action,
                        reason,
                        Some(ctx.verdict),
                        Some(&request_id),
                        decider,
                        recorded.message.clone(),
                    )
                }
            }
        }
    }

    /// What a stored request is judged and run under: its stored snapshot intersected with
    /// this gate's (so a resuming caller can only narrow it), or, for a request stored before
    /// snapshots were kept, `None`.
    fn under_stored(&self, stored: &StoredApproval) -> Result<Option<Under>, GateError> {
        let Some(snapshot) = &stored.snapshot else {
            return Ok(None);
        };
        let cap = cap_from_parent(&self.own.snapshot, CapOrigin::TaskPolicy);
        Ok(Some(Under::new(intersect(snapshot, &cap))?))
    }

    /// Decide a deferred request (possibly persisted by another process): the stored action,
    /// exactly as shown, is re-checked under the request's stored snapshot intersected with
    /// this gate's (never wider than either).
    ///
    /// The approval of the request's own action is spent here, atomically in the store: the
    /// caller must perform the returned action now; a second `resume` of the same request
    /// is [`GateError::AlreadyUsed`], `allow_once` or `allow_for_turn` (whose grant still
    /// answers the turn's later matching actions). An `allow_for_turn` approval is valid
    /// only in its own turn.
    /// For a shell command use [`Gate::resume_spawn`], which also runs it under the stored
    /// snapshot's sandbox. A request whose command was to run with reviewable writes is
    /// [`GateError::ReviewRequired`] here (its caller would run it directly).
    pub fn resume(&self, request_id: &str, decision: Decision) -> Result<Authorization, GateError> {
        self.resume_checked(request_id, Some(decision), ResumeChecks::default())
            .map(|r| r.auth)
    }

    /// [`Gate::resume`] with the decision already recorded in the store: by a person through
    /// another process (`turngate approvals`, `turngate serve`, an approval link) or this one.
    /// An allow is re-checked under the stored snapshot and spent once, as `resume` does; a
    /// recorded deny (or `cancelled`, `expired`) is the denial. A request still pending is
    /// [`GateError::NotApproved`] (wait for it with the store's `wait_resolved`).
    pub fn resume_recorded(&self, request_id: &str) -> Result<Authorization, GateError> {
        let stored = self
            .store
            .approval(request_id)?
            .ok_or_else(|| GateError::UnknownRequest(request_id.to_owned()))?;
        match stored.resolution {
            Some(r) if !r.resolution.is_allow() => {
                let reason = if r.reason.is_empty() {
                    r.resolution.as_str().to_owned()
                } else {
                    r.reason
                };
                self.resume(request_id, Decision::deny(reason))
            }
            _ => self
                .resume_checked(request_id, None, ResumeChecks::default())
                .map(|r| r.auth),
        }
    }

    /// [`Gate::resume`] from one read of the stored request, refusing before anything is
    /// resolved or spent when the request is another turn's or fails `checks`: a stored (or
    /// modified) action not of the `required` kind, or a request stored with `review` resumed
    /// by a caller that does not run it reviewed. `decision: None` decides nothing: the
    /// request must already be approved (what [`Gate::run_approved`] runs).
    fn resume_checked(
        &self,
        request_id: &str,
        decision: Option<Decision>,
        checks: ResumeChecks<'_>,
    ) -> Result<Resumed, GateError> {
        let stored: StoredApproval = self
            .store
            .approval(request_id)?
            .ok_or_else(|| GateError::UnknownRequest(request_id.to_owned()))?;
        if stored.request.turn_id != self.turn_id {
            // An approval answers the turn that asked: another turn's gate (even on the same
            // store, under the same policy) neither resolves nor spends it.
            return Err(GateError::OtherTurn {
                request: request_id.to_owned(),
                turn: stored.request.turn_id.clone(),
                this: self.turn_id.clone(),
            });
        }
        if stored.review && !checks.reviewed {
            return Err(GateError::ReviewRequired(request_id.to_owned()));
        }
        let decision = match (decision, &stored.resolution) {
            (Some(d), _) => d,
            (None, Some(r)) if r.resolution.is_allow() => Decision::Defer,
            (None, state) => {
                return Err(GateError::NotApproved {
                    request: request_id.to_owned(),
                    state: state.as_ref().map_or_else(
                        || "still pending".to_owned(),
                        |r| format!("resolved as {}", r.resolution.as_str()),
                    ),
                });
            }
        };
        if let Some(kind) = checks.required {
            if stored.action.kind != kind {
                return Err(GateError::WrongKind {
                    expected: kind,
                    got: stored.action.kind,
                });
            }
            if let Decision::Approve {
                modified: Some(m), ..
            } = &decision
            {
                if m.kind != kind {
                    return Err(GateError::WrongKind {
                        expected: kind,
                        got: m.kind,
                    });
                }
            }
        }
        let stored_under = self.under_stored(&stored)?;
        if checks.required == Some(ActionKind::ShellCommand) && stored_under.is_none() {
            return Err(GateError::NoSnapshot(request_id.to_owned()));
        }
        let under = stored_under.as_ref().unwrap_or(&self.own);
        let inv = ToolInvocation {
            kind: stored.action.kind,
            target: stored.action.target.clone(),
            tool_name: stored.action.tool.clone(),
            item_id: checks.caller.and_then(|c| c.item_id.clone()),
            tool_id: checks.caller.and_then(|c| c.tool_id.clone()),
            cwd: stored_cwd(&stored.request).map(PathBuf::from),
        };
        let verdict = self.evaluate_in_turn(under, &inv)?.verdict;
        let decision = if verdict.effect == Effect::Deny {
            Decision::deny(describe(&verdict))
        } else {
            decision
        };
        let result =
            resume_with_decision(self.store.as_ref(), request_id, decision, &under.policy)?;
        let resolution = match &result {
            ApprovalResult::Approved { .. } => Some(ApprovalResolution::AllowOnce),
            ApprovalResult::AlreadyResolved(r) if r.resolution.is_allow() => Some(r.resolution),
            _ => None,
        };
        if resolution == Some(ApprovalResolution::AllowForTurn) {
            // The grant holds for the rest of the turn, live: the same action asks no more.
            self.grant_for_turn(stored.request.scope_hash.clone());
        }
        if resolution.is_some() {
            match self.store.consume(request_id)? {
                Consumed::Spent => {}
                Consumed::AlreadyUsed => {
                    let action = stored.action.clone();
                    self.record(Row {
                        kind: AuditEventKind::DecisionDenied,
                        inv: &inv,
                        action: &action,
                        request_key: Some(request_id),
                        decision: AuditDecision::Deny,
                        reason: "already_used".to_owned(),
                        cached: false,
                        verdict: None,
                        decider: "policy",
                        message: None,
                    })?;
                    return Err(GateError::AlreadyUsed(request_id.to_owned()));
                }
                // The row said approved a moment ago; anything else now means the store
                // changed underneath: refuse.
                Consumed::NotApproved => {
                    return Err(GateError::NotApproved {
                        request: request_id.to_owned(),
                        state: "no longer an unspent approval".to_owned(),
                    });
                }
            }
        }
        let recorded = match &result {
            ApprovalResult::AlreadyResolved(r) => Some(r.clone()),
            _ => None,
        };
        let ctx = ApprovalContext {
            request: stored.request,
            action: stored.action,
            verdict,
        };
        let auth = self.settle(under, &inv, ctx, result, recorded.as_ref())?;
        Ok(Resumed {
            auth,
            under: stored_under,
            inv,
        })
    }

    /// Decide a deferred shell command and, when it is allowed, run exactly its stored action
    /// under the request's stored snapshot (intersected with this gate's) and its sandbox.
    /// The stored action must be a `shell_command`; an `allow_once` approval runs once.
    ///
    /// A request deferred from [`Gate::spawn_reviewed`] (stored with `review`) is
    /// [`GateError::ReviewRequired`]: nothing is decided, spent or run. Resume it with
    /// [`Gate::resume_spawn_reviewed`].
    pub async fn resume_spawn(
        &self,
        request_id: &str,
        decision: Decision,
    ) -> Result<SpawnResult, GateError> {
        self.resume_and_run(request_id, Some(decision), None)
            .await
            .map(|r| r.result)
    }

    /// [`Gate::resume_spawn`] with reviewable writes: the stored command runs with the
    /// writable roots as overlays and its writes become a change set in `changes` (see
    /// [`Gate::spawn_reviewed`]), the workspace untouched until it is applied. The way to run
    /// a request deferred from a reviewed spawn; a request stored without review may run
    /// reviewed too (never less than asked). Refused, nothing run, where the overlay is
    /// unavailable.
    pub async fn resume_spawn_reviewed(
        &self,
        request_id: &str,
        decision: Decision,
        changes: &crate::changes::ChangeStore,
    ) -> Result<Reviewed, GateError> {
        self.resume_and_run(request_id, Some(decision), Some(changes))
            .await
    }

    /// Whether the stored request `request_id` must run with reviewable writes (it was
    /// deferred from a reviewed spawn): then only [`Gate::resume_spawn_reviewed`] and
    /// [`Gate::run_approved_reviewed`] run it.
    pub fn requires_review(&self, request_id: &str) -> Result<bool, GateError> {
        Ok(self
            .store
            .approval(request_id)?
            .ok_or_else(|| GateError::UnknownRequest(request_id.to_owned()))?
            .review)
    }

    async fn resume_and_run(
        &self,
        request_id: &str,
        decision: Option<Decision>,
        review: Option<&crate::changes::ChangeStore>,
    ) -> Result<Reviewed, GateError> {
        let plain = |result| Reviewed {
            result,
            change_set: None,
        };
        let checks = ResumeChecks {
            required: Some(ActionKind::ShellCommand),
            reviewed: review.is_some(),
            caller: None,
        };
        let resumed = self.resume_checked(request_id, decision, checks)?;
        let under = resumed
            .under
            .ok_or_else(|| GateError::NoSnapshot(request_id.to_owned()))?;
        match resumed.auth {
            Authorization::Allowed { action, .. } => {
                let cwd = resumed.inv.cwd.clone();
                self.run_action(
                    &under,
                    &resumed.inv,
                    &action,
                    cwd.as_deref(),
                    review,
                    None,
                    None,
                )
                .await
            }
            Authorization::Denied(denial) => Ok(plain(SpawnResult::Denied(denial))),
            Authorization::Deferred { request } => Ok(plain(SpawnResult::Deferred(request))),
        }
    }

    /// Run the shell command of a request that a person already approved (for example with
    /// `turngate approvals resolve ID allow_once` while the waiting process was gone): exactly
    /// its stored action, re-checked, under its stored snapshot and sandbox. An unresolved
    /// request is [`GateError::NotApproved`]; a spent `allow_once` is
    /// [`GateError::AlreadyUsed`]. There is no way to run a command line that no decision
    /// covered. A request stored with `review` is [`GateError::ReviewRequired`] (nothing
    /// spent, nothing run): use [`Gate::run_approved_reviewed`].
    pub async fn run_approved(&self, request_id: &str) -> Result<SpawnResult, GateError> {
        self.resume_and_run(request_id, None, None)
            .await
            .map(|r| r.result)
    }

    /// [`Gate::run_approved`] with reviewable writes into `changes` (see
    /// [`Gate::resume_spawn_reviewed`]).
    pub async fn run_approved_reviewed(
        &self,
        request_id: &str,
        changes: &crate::changes::ChangeStore,
    ) -> Result<Reviewed, GateError> {
        self.resume_and_run(request_id, None, Some(changes)).await
    }

    /// Authorize a shell command and, when allowed, run it through the sandboxed runner built
    /// from the same snapshot. Only a `shell_command` invocation can start a process: any
    /// other kind is [`GateError::WrongKind`] before anything is decided or run. A snapshot
    /// that requires a sandbox the platform cannot provide refuses to run (an error), never
    /// runs unconfined.
    pub async fn spawn(&self, inv: &ToolInvocation) -> Result<SpawnResult, GateError> {
        self.spawn_with(inv, None, None).await.map(|r| r.result)
    }

    /// [`Gate::spawn`] for a long-running server that speaks over its stdin and stdout (an
    /// MCP server under `turngate mcp wrap`): the command is authorized and sandboxed exactly
    /// like [`Gate::spawn`]'s, but its stdin and stdout are `stdio` (the caller keeps the
    /// other ends of those pipes), its stderr is copied to this process's stderr as it comes,
    /// and it has no time limit: it lives as long as its client keeps it (the snapshot's
    /// `max_duration_ms` bounds one command, not a session). Resolves when the server exits.
    pub async fn spawn_server(
        &self,
        inv: &ToolInvocation,
        stdio: crate::sandbox::StdioPipes,
    ) -> Result<SpawnResult, GateError> {
        self.spawn_with(inv, None, Some(stdio))
            .await
            .map(|r| r.result)
    }

    /// [`Gate::spawn`] with reviewable writes (DESIGN §18): the turn's writable roots are
    /// overlays whose writes land in a change set in `changes`; the workspace is untouched
    /// until the change set is applied. Refused (nothing runs) where overlayfs in a user
    /// namespace is unavailable or the snapshot runs commands without a sandbox; never
    /// unreviewed. A change set is recorded whatever the command's exit status.
    pub async fn spawn_reviewed(
        &self,
        inv: &ToolInvocation,
        changes: &crate::changes::ChangeStore,
    ) -> Result<Reviewed, GateError> {
        self.spawn_with(inv, Some(changes), None).await
    }

    async fn spawn_with(
        &self,
        inv: &ToolInvocation,
        review: Option<&crate::changes::ChangeStore>,
        stdio: Option<crate::sandbox::StdioPipes>,
    ) -> Result<Reviewed, GateError> {
        let plain = |result| Reviewed {
            result,
            change_set: None,
        };
        if inv.kind != ActionKind::ShellCommand {
            return Err(GateError::WrongKind {
                expected: ActionKind::ShellCommand,
                got: inv.kind,
            });
        }
        ensure_native_shell_allowed(&self.own.snapshot)?;
        let action = match self
            .authorize_under(&self.own, inv, &[], review.is_some())
            .await?
        {
            Authorization::Allowed { action, .. } => action,
            Authorization::Denied(denial) => return Ok(plain(SpawnResult::Denied(denial))),
            Authorization::Deferred { request } => {
                return Ok(plain(SpawnResult::Deferred(request)));
            }
        };
        if action.kind != ActionKind::ShellCommand {
            // A reviewer's modified action of another kind never starts a process.
            let reason = format!(
                "the approved action is a {}, not a shell command; nothing ran",
                action.kind
            );
            let denial = self.denial(inv, action, reason, None, None, "policy", None)?;
            return Ok(plain(SpawnResult::Denied(denial)));
        }
        self.run_action(
            &self.own,
            inv,
            &action,
            inv.cwd.as_deref(),
            review,
            stdio,
            None,
        )
        .await
    }

    /// Run an authorized shell action under `under`: the plan is rebuilt from that snapshot,
    /// so the environment filter, timeout cap and sandbox apply.
    #[allow(clippy::too_many_arguments)]
    async fn run_action(
        &self,
        under: &Under,
        inv: &ToolInvocation,
        action: &Action,
        cwd: Option<&Path>,
        review: Option<&crate::changes::ChangeStore>,
        stdio: Option<crate::sandbox::StdioPipes>,
        opts: Option<&SpawnOptions>,
    ) -> Result<Reviewed, GateError> {
        let plain = |result| Reviewed {
            result,
            change_set: None,
        };
        ensure_native_shell_allowed(&under.snapshot)?;
        let mut env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
        if let Some(opts) = opts {
            // The caller's variables replace inherited ones of the same name; all of them
            // then pass the snapshot's environment filter.
            env.retain(|(k, _)| !opts.env.iter().any(|(name, _)| name == k));
            env.extend(opts.env.iter().cloned());
        }
        let mut plan = plan(
            &under.snapshot,
            &under.policy,
            &under.roots,
            &action.target,
            cwd,
            action.tool.as_deref(),
            env,
        );
        if let Some(ms) = opts.and_then(|o| o.timeout_ms) {
            let ms = std::time::Duration::from_millis(ms);
            plan.timeout = Some(plan.timeout.map_or(ms, |cap| cap.min(ms)));
        }
        if plan.verdict.effect == Effect::Deny {
            // The plan is rebuilt with the real environment: should it disagree with the
            // decision, the stricter answer wins.
            let reason = describe(&plan.verdict);
            let denial = self.denial(
                inv,
                action.clone(),
                reason,
                Some(plan.verdict),
                None,
                "policy",
                None,
            )?;
            return Ok(plain(SpawnResult::Denied(denial)));
        }
        let mut request = ProcessRequest::new(plan.argv.clone(), &plan.cwd)
            .env(plan.env.clone())
            .new_session(plan.new_session)
            .stdin(if plan.inherit_stdin {
                crate::sandbox::StdinPolicy::Inherit
            } else {
                crate::sandbox::StdinPolicy::Null
            });
        if let Some(opts) = opts {
            if let Some(data) = &opts.stdin {
                request = request.stdin_bytes(Arc::clone(data));
            }
            if let Some(sink) = &opts.on_output {
                request = request.on_output(sink.clone());
            }
        }
        match stdio {
            // A server's lifetime is its client's session, not one command's.
            Some(pipes) => request = request.stdio(pipes),
            None => {
                if let Some(timeout) = plan.timeout {
                    request = request.timeout(timeout);
                }
            }
        }
        let Some(changes) = review else {
            let mut baseline = None;
            if plan.sandbox_required {
                let sandbox = &under.snapshot.sandbox;
                let spec = SandboxSpec::from_snapshot(sandbox).with_policy(sandbox, &under.policy);
                let spec = self.hide_store(spec)?;
                baseline = self.protected_baseline(under, &spec);
                request = request.sandbox(spec);
            }
            let egress = egress::GateEgress::new(self, under);
            let mut outcome = self.runner.run_with_egress(request, &egress).await?;
            // The command and everything it started are gone (its PID namespace with it):
            // a protected file it created is moved away before anyone can use it (ADR 0020).
            if let Some(baseline) = baseline {
                let quarantine = baseline.quarantine_new(&under.policy, &self.quarantine_dir());
                if let Some(report) = outcome.sandbox.as_mut() {
                    report.add_quarantine(quarantine);
                }
            }
            return Ok(plain(SpawnResult::Ran(Box::new(outcome))));
        };
        if !plan.sandbox_required {
            return Err(crate::changes::ChangeError::Unavailable(format!(
                "the {} mode runs commands without a sandbox, and only a sandboxed command's \
                 writes can be held for review",
                under.snapshot.permission_profile.mode
            ))
            .into());
        }
        let sandbox = &under.snapshot.sandbox;
        let mut spec = self
            .hide_store(SandboxSpec::from_snapshot(sandbox).with_policy(sandbox, &under.policy))?;
        let roots: Vec<std::path::PathBuf> = spec
            .roots
            .iter()
            .filter(|r| r.access == crate::protocol::FsAccess::Write && r.path.exists())
            .map(|r| r.path.clone())
            .collect();
        let session = changes.begin(&roots)?;
        // The change sets' directory too, when it is not the store's (a caller's own
        // ChangeStore): the command must not reach the upper dirs or the manifests.
        let changes_dir =
            std::fs::canonicalize(changes.dir()).unwrap_or_else(|_| changes.dir().to_path_buf());
        if let Err(root) = spec.hide_state_dir(&changes_dir) {
            session.abandon();
            return Err(GateError::StoreExposed {
                store: changes_dir,
                root,
            });
        }
        spec.review = Some(session.layers().to_vec());
        // A `network = restricted` command's connections come back here through the egress
        // proxy, one decision each, reviewed or not.
        let egress = egress::GateEgress::new(self, under);
        let outcome = match self
            .runner
            .run_with_egress(request.sandbox(spec), &egress)
            .await
        {
            Ok(outcome) => outcome,
            Err(err) => {
                session.abandon();
                return Err(err.into());
            }
        };
        let change_set = session.finish(
            &self.turn_id,
            &action.target,
            &under.snapshot,
            outcome.exit_code,
            Some(self.store.as_ref()),
        )?;
        Ok(Reviewed {
            result: SpawnResult::Ran(Box::new(outcome)),
            change_set: Some(change_set),
        })
    }

    /// The protected entries inside the writable roots before a command runs (ADR 0020);
    /// `None` where nothing is writable (read-only and unrestricted modes: the latter grants
    /// everything anyway).
    fn protected_baseline(
        &self,
        under: &Under,
        spec: &SandboxSpec,
    ) -> Option<crate::sandbox::protect::Baseline> {
        use crate::protocol::{FsAccess, FsProvenance, SandboxMode};
        let sandbox = &under.snapshot.sandbox;
        if matches!(
            sandbox.mode,
            SandboxMode::ReadOnly | SandboxMode::Unrestricted
        ) {
            return None;
        }
        let roots: Vec<std::path::PathBuf> = spec
            .roots
            .iter()
            .filter(|r| r.access == FsAccess::Write)
            .map(|r| r.path.clone())
            .collect();
        if roots.is_empty() {
            return None;
        }
        let workspace = sandbox
            .filesystem
            .entries
            .iter()
            .find(|e| e.provenance == FsProvenance::Workspace)
            .map(|e| e.path.clone());
        let skip: Vec<std::path::PathBuf> = self.store.local_dir().into_iter().collect();
        Some(crate::sandbox::protect::Baseline::take(
            &roots,
            &skip,
            workspace.as_deref(),
            &under.policy,
        ))
    }

    /// Where protected files a command created are moved: `quarantine/` beside the audit
    /// store, or a private directory under the system tmp dir for a store without one.
    fn quarantine_dir(&self) -> std::path::PathBuf {
        match self.store.local_dir() {
            Some(dir) => dir.join("quarantine"),
            None => std::env::temp_dir().join(format!(
                "turngate-quarantine-{}",
                crate::sandbox::protect::current_uid()
            )),
        }
    }

    /// Hide the audit store's directory (and the change sets beside it) from the command
    /// when it lies in one of the turn's roots; refuse the spawn where it cannot be hidden.
    fn hide_store(&self, mut spec: SandboxSpec) -> Result<SandboxSpec, GateError> {
        if let Some(dir) = self.store.local_dir() {
            spec.hide_state_dir(&dir)
                .map_err(|root| GateError::StoreExposed { store: dir, root })?;
        }
        Ok(spec)
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
        let action = match self.authorize(&inv).await? {
            Authorization::Allowed { action, .. } => action,
            Authorization::Denied(denial) => return Ok(Err(denial)),
            Authorization::Deferred { request } => {
                return Ok(Err(Denial {
                    action: Action::new(kind, inv.target.clone()),
                    reason: deferral_reason(&request),
                    verdict: None,
                }));
            }
        };
        if action.kind != kind {
            return Ok(Err(Denial {
                reason: format!(
                    "the approved action is a {}, not a {kind}; nothing was opened",
                    action.kind
                ),
                action,
                verdict: None,
            }));
        }
        // Open what was approved (a reviewer's modified target replaces the original).
        // The gate allowed it (by policy or by an approval of the ask), so an ask verdict on
        // the fresh check is approved; a deny that landed meanwhile still refuses.
        let checker = self.file_checker();
        let check = checker.check(kind, &action.target, action.tool.as_deref());
        let opened = checker.open_checked(&check, write, true);
        Ok(opened.map_err(|e: OpenError| Denial {
            action: Action::new(kind, action.target.clone()),
            reason: e.to_string(),
            verdict: None,
        }))
    }

    fn file_checker(&self) -> FilePolicyChecker<'_> {
        FilePolicyChecker::with_roots(
            &self.own.snapshot.sandbox,
            &self.own.policy,
            &self.own.roots,
        )
    }

    fn net_checker(&self) -> NetworkPolicyChecker<'_> {
        NetworkPolicyChecker::new(&self.own.snapshot.network, &self.own.policy)
    }

    /// Check a URL and resolve it: connect only to the returned, vetted addresses.
    pub fn resolve_and_check(&self, url: &str, tool: Option<&str>) -> NetworkResolution {
        self.net_checker().resolve_and_check(url, tool)
    }
}

/// The tool an audit row names for an action.
fn event_tool(action: &Action, inv: &ToolInvocation) -> Option<String> {
    action.tool.clone().or_else(|| inv.tool_name.clone())
}

/// The working directory a stored shell request was shown with.
fn stored_cwd(request: &TurnPermissionApprovalRequest) -> Option<&str> {
    (request.action_kind == ActionKind::ShellCommand)
        .then(|| {
            request
                .details
                .lines
                .iter()
                .find(|l| l.label == "cwd")
                .map(|l| l.value.as_str())
        })
        .flatten()
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
