//! The gate of one turn for bindings: authorize a tool call, spawn a shell command under the
//! snapshot's sandbox, resume a deferred request, open files race-free, resolve URLs. The
//! snapshot crosses as JSON; results cross as owned records. Every rule is the core gate's.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use turngate::gate::{
    Authorization, Denial, Gate, Reviewed, SpawnResult, deferral_reason, deferral_tool_result,
};
use turngate::protocol::TurnExecutionSecuritySnapshot;
use turngate::sandbox::ProcessOutcome;

use crate::approver::{ApproverHandle, DecisionRecord};
use crate::broker::BrokerHandle;
use crate::changes::ChangeSetSummaryRecord;
use crate::check::{
    EvaluationRecord, InvocationRecord, NetworkResolutionRecord, resolution_record,
};
use crate::convert::{from_value, to_value};
use crate::store::StoreHandle;
use crate::{RuleRecord, TurnGateError, VerdictRecord};

/// A refusal, shaped as a tool result the model can adapt to (`Denial` in every language).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record), uniffi(name = "Denial"))]
pub struct DenialRecord {
    /// The refused action's kind.
    pub kind: String,
    /// The refused action's target.
    pub target: String,
    /// The refused action's tool.
    pub tool: Option<String>,
    /// Why, in words.
    pub reason: String,
    /// The verdict behind it, when the policy denied.
    pub verdict: Option<VerdictRecord>,
    /// The text to hand the model as the tool's result.
    pub tool_result: String,
}

impl From<Denial> for DenialRecord {
    fn from(d: Denial) -> Self {
        DenialRecord {
            tool_result: d.tool_result(),
            kind: d.action.kind.as_str().to_owned(),
            target: d.action.target,
            tool: d.action.tool,
            reason: d.reason,
            verdict: d.verdict.map(VerdictRecord::from),
        }
    }
}

/// What the gate decided for one call (`Authorization` in every language): one flat object
/// whose `outcome` (`allowed`, `denied`, `deferred`) says which fields it has.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "outcome", rename_all = "snake_case")]
#[cfg_attr(
    feature = "uniffi",
    derive(uniffi::Enum),
    uniffi(name = "Authorization")
)]
pub enum AuthorizationRecord {
    /// Run the action (the one evaluated, or the approver's modified one, re-checked).
    Allowed {
        /// The action's kind.
        kind: String,
        /// The action's target (canonical).
        target: String,
        /// The action's tool.
        tool: Option<String>,
        /// The verdict that allowed it (for an approved ask: the ask verdict).
        verdict: VerdictRecord,
        /// True when an `allow_for_turn` grant answered without a prompt.
        cached_approval: bool,
        /// Remembered rules that passed the re-check (for the caller to persist).
        remember: Vec<RuleRecord>,
    },
    /// Refused.
    Denied(DenialRecord),
    /// Deferred: the request (a `TurnPermissionApprovalRequest`) is persisted in the store.
    Deferred {
        /// The request, exactly as shown.
        #[schemars(with = "serde_json::Map<String, Value>")]
        request: Value,
        /// Why the call did not run, in words.
        reason: String,
        /// The text to hand the model as the tool's result.
        tool_result: String,
    },
}

/// The record of an authorization (also what `turngate serve` answers `turn/action/authorize` with).
pub fn authorization(a: Authorization) -> Result<AuthorizationRecord, TurnGateError> {
    Ok(match a {
        Authorization::Allowed {
            action,
            verdict,
            cached_approval,
            remember,
        } => AuthorizationRecord::Allowed {
            kind: action.kind.as_str().to_owned(),
            target: action.target,
            tool: action.tool,
            verdict: verdict.into(),
            cached_approval,
            remember: remember.iter().map(RuleRecord::from).collect(),
        },
        Authorization::Denied(d) => AuthorizationRecord::Denied(d.into()),
        Authorization::Deferred { request } => AuthorizationRecord::Deferred {
            reason: deferral_reason(&request),
            tool_result: deferral_tool_result(&request),
            request: to_value("request", &*request)?,
        },
    })
}

/// A finished command.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[cfg_attr(
    feature = "uniffi",
    derive(uniffi::Record),
    uniffi(name = "ProcessOutcome")
)]
pub struct ProcessOutcomeRecord {
    /// The child's pid.
    pub pid: u32,
    /// The exit code, when it exited.
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    /// Whether the timeout fired.
    pub timed_out: bool,
    /// Wall-clock milliseconds from spawn to exit.
    pub duration_ms: u64,
    /// Captured stdout (capped). Its JSON form is the text, invalid UTF-8 replaced.
    #[serde(serialize_with = "lossy_text")]
    #[schemars(with = "String")]
    pub stdout: Vec<u8>,
    /// Captured stderr (capped). Its JSON form is the text, invalid UTF-8 replaced.
    #[serde(serialize_with = "lossy_text")]
    #[schemars(with = "String")]
    pub stderr: Vec<u8>,
    /// Whether stdout was truncated.
    pub stdout_truncated: bool,
    /// Whether stderr was truncated.
    pub stderr_truncated: bool,
    /// What the sandbox enforced (a `SandboxReport`), when one was requested.
    #[schemars(with = "Option<serde_json::Map<String, Value>>")]
    pub sandbox: Option<Value>,
    /// With `review`: the change set the command's writes became (pending; the workspace is
    /// untouched until it is applied). None for a spawn without review.
    pub change_set: Option<ChangeSetSummaryRecord>,
}

fn lossy_text<S: serde::Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&String::from_utf8_lossy(bytes))
}

fn outcome_record(o: ProcessOutcome) -> Result<ProcessOutcomeRecord, TurnGateError> {
    Ok(ProcessOutcomeRecord {
        pid: o.pid,
        exit_code: o.exit_code,
        signal: o.signal,
        timed_out: o.timed_out,
        duration_ms: u64::try_from(o.duration.as_millis()).unwrap_or(u64::MAX),
        stdout: o.stdout,
        stderr: o.stderr,
        stdout_truncated: o.stdout_truncated,
        stderr_truncated: o.stderr_truncated,
        sandbox: o.sandbox.map(|s| to_value("sandbox", &s)).transpose()?,
        change_set: None,
    })
}

/// What `spawn` did (`SpawnResult` in every language), flat like [`AuthorizationRecord`]:
/// `outcome` is `ran`, `denied` or `deferred`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(tag = "outcome", rename_all = "snake_case")]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum), uniffi(name = "SpawnResult"))]
pub enum SpawnRecord {
    /// The command ran (under the sandbox when the snapshot requires one).
    Ran(ProcessOutcomeRecord),
    /// Refused before anything ran.
    Denied(DenialRecord),
    /// The approver deferred; the request is persisted.
    Deferred {
        /// The request, exactly as shown.
        #[schemars(with = "serde_json::Map<String, Value>")]
        request: Value,
        /// Why the command did not run, in words.
        reason: String,
        /// The text to hand the model as the tool's result.
        tool_result: String,
    },
}

/// What `open_read`/`open_write` did.
#[derive(Debug)]
pub enum OpenRecord {
    /// The file, opened race-free beneath its root.
    Opened(std::fs::File),
    /// Refused (by the policy, the approver, or the race-free open).
    Denied(Box<DenialRecord>),
}

/// The gate of one turn. Share it behind the returned `Arc`.
#[derive(Debug)]
pub struct GateHandle {
    pub(crate) gate: Gate,
    /// The store it records to (for `wait_resolved`).
    store: StoreHandle,
    /// Where a reviewed spawn's change sets go: beside the gate's audit store (or why there
    /// is nowhere).
    changes: Result<turngate::changes::ChangeStore, TurnGateError>,
}

impl GateHandle {
    /// A gate for `turn_id` under a `TurnExecutionSecuritySnapshot`, recording to `store`,
    /// asking `approver`, and honouring `allow_for_turn` grants recorded by `broker`.
    pub fn new(
        turn_id: &str,
        snapshot: Value,
        store: &StoreHandle,
        approver: &ApproverHandle,
        broker: Option<&BrokerHandle>,
    ) -> Result<Arc<Self>, TurnGateError> {
        Self::make(turn_id, snapshot, store, approver, broker, false)
    }

    /// [`GateHandle::new`] without waiting for the disk: the turn's `profile_selected` row is
    /// queued to the store's committer thread and the first decision waits for it (and fails
    /// if it was not recorded). For constructors that run on an event loop.
    pub fn new_started(
        turn_id: &str,
        snapshot: Value,
        store: &StoreHandle,
        approver: &ApproverHandle,
        broker: Option<&BrokerHandle>,
    ) -> Result<Arc<Self>, TurnGateError> {
        Self::make(turn_id, snapshot, store, approver, broker, true)
    }

    fn make(
        turn_id: &str,
        snapshot: Value,
        store: &StoreHandle,
        approver: &ApproverHandle,
        broker: Option<&BrokerHandle>,
        started: bool,
    ) -> Result<Arc<Self>, TurnGateError> {
        let snapshot: TurnExecutionSecuritySnapshot = from_value("snapshot", snapshot)?;
        let make = if started {
            Gate::new_started
        } else {
            Gate::new
        };
        let mut gate = make(
            turn_id,
            snapshot,
            store.as_audit_store(),
            approver.as_approver(),
        )?;
        if let Some(broker) = broker {
            broker.set_turn_policy(turn_id, Arc::clone(gate.policy()));
            gate = gate.with_broker(broker.core().clone());
        }
        Ok(Arc::new(GateHandle {
            gate,
            store: store.share(),
            changes: store.change_store(),
        }))
    }

    /// The turn id.
    pub fn turn_id(&self) -> String {
        self.gate.turn_id().to_owned()
    }

    /// The turn's snapshot.
    pub fn snapshot(&self) -> Result<Value, TurnGateError> {
        to_value("snapshot", self.gate.snapshot())
    }

    /// Evaluate one call with the checker of its kind, without recording or asking.
    pub fn evaluate(&self, inv: &InvocationRecord) -> Result<EvaluationRecord, TurnGateError> {
        Ok(self.gate.evaluate(&inv.to_core()?).into())
    }

    /// Decide one call: evaluate, consult grants, ask the approver on ask, re-check, record.
    pub async fn authorize(
        &self,
        inv: &InvocationRecord,
    ) -> Result<AuthorizationRecord, TurnGateError> {
        authorization(self.gate.authorize(&inv.to_core()?).await?)
    }

    /// Decide a deferred request (possibly persisted by another process): the stored action,
    /// exactly as shown, is re-checked against this gate's policy.
    pub fn resume(
        &self,
        request_id: &str,
        decision: &DecisionRecord,
    ) -> Result<AuthorizationRecord, TurnGateError> {
        authorization(self.gate.resume(request_id, decision.to_core()?)?)
    }

    /// [`GateHandle::resume`] with the decision already recorded in the store (a person
    /// answered through another process or an approval link; see
    /// [`GateHandle::wait_resolved`]): an allow is re-checked and spent once, a recorded deny
    /// is the denial, a request still pending is refused.
    pub fn resume_recorded(&self, request_id: &str) -> Result<AuthorizationRecord, TurnGateError> {
        authorization(self.gate.resume_recorded(request_id)?)
    }

    /// `resume` with `decision`, or [`GateHandle::resume_recorded`] without one.
    pub fn resume_or_recorded(
        &self,
        request_id: &str,
        decision: Option<&DecisionRecord>,
    ) -> Result<AuthorizationRecord, TurnGateError> {
        match decision {
            Some(d) => self.resume(request_id, d),
            None => self.resume_recorded(request_id),
        }
    }

    /// Wait until the deferred request `request_id` is resolved, by anyone (see
    /// [`StoreHandle::wait_resolved`]), and return its stored approval. Then `resume` it with
    /// no decision (or `run_approved` a shell command).
    pub async fn wait_resolved(
        &self,
        request_id: &str,
        timeout_ms: Option<u64>,
    ) -> Result<Value, TurnGateError> {
        self.store.wait_resolved(request_id, timeout_ms).await
    }

    /// Authorize a shell command and, when allowed, run it under the snapshot's sandbox. Only
    /// a `shell_command` invocation can start a process; any other kind is an error before
    /// anything runs.
    ///
    /// With `inv.review` (Linux): reviewable writes. The writable roots are overlays, the
    /// command's writes become a change set beside the gate's audit store, and the result's
    /// `change_set` names it; the workspace is untouched until the store applies it. Refused
    /// (nothing runs, [`TurnGateError::Changes`] or `Run`) where overlayfs in a user namespace
    /// is unavailable, the mode runs commands unsandboxed, the store has no directory, or the
    /// store's directory cannot be hidden from the command; never run unreviewed.
    pub async fn spawn(&self, inv: &InvocationRecord) -> Result<SpawnRecord, TurnGateError> {
        if !inv.review {
            return spawn_record(self.gate.spawn(&inv.to_core()?).await?);
        }
        let changes = self.changes.as_ref().map_err(Clone::clone)?;
        reviewed_record(
            self.gate
                .spawn_reviewed(&inv.to_core_unchecked()?, changes)
                .await?,
        )
    }

    /// [`GateHandle::spawn`] with reviewable writes (Linux): the writable roots are overlays and
    /// the command's writes become a change set beside the audit store at `store` (see
    /// [`crate::changes`]); the workspace is untouched until it is applied. Refused (nothing
    /// runs) where overlayfs in a user namespace is unavailable. Returns the spawn's record and,
    /// when the command ran, the `ChangeSet` as JSON.
    pub async fn spawn_reviewed(
        &self,
        inv: &InvocationRecord,
        store: &str,
    ) -> Result<(SpawnRecord, Option<Value>), TurnGateError> {
        let changes = crate::changes::store_for(store);
        let reviewed = self
            .gate
            .spawn_reviewed(&inv.to_core_unchecked()?, &changes)
            .await?;
        let mut record = spawn_record(reviewed.result)?;
        if let (SpawnRecord::Ran(outcome), Some(set)) = (&mut record, &reviewed.change_set) {
            outcome.change_set = Some(ChangeSetSummaryRecord::from(set));
        }
        let set = reviewed
            .change_set
            .map(|s| to_value("change set", &s))
            .transpose()?;
        Ok((record, set))
    }

    /// Decide a deferred shell command and, when allowed, run exactly its stored action under
    /// the snapshot it was requested under (narrowed by this gate's). An `allow_once` runs once.
    ///
    /// A request deferred from a spawn with `review` runs reviewed, as it was asked: its writes
    /// become a change set beside the gate's audit store (the one [`GateHandle::spawn`] uses)
    /// and the result's `change_set` names it. Where review is unavailable it is refused and
    /// nothing runs (the approval stays unspent); it never runs unreviewed.
    pub async fn resume_spawn(
        &self,
        request_id: &str,
        decision: &DecisionRecord,
    ) -> Result<SpawnRecord, TurnGateError> {
        let decision = decision.to_core()?;
        if !self.gate.requires_review(request_id)? {
            return spawn_record(self.gate.resume_spawn(request_id, decision).await?);
        }
        let changes = self.changes.as_ref().map_err(Clone::clone)?;
        reviewed_record(
            self.gate
                .resume_spawn_reviewed(request_id, decision, changes)
                .await?,
        )
    }

    /// Run the stored shell command of an already approved request (by its id), under its
    /// stored snapshot and sandbox. There is no way to run a command line no decision covered.
    /// A request deferred from a spawn with `review` runs reviewed, as in
    /// [`GateHandle::resume_spawn`].
    pub async fn run_approved(&self, request_id: &str) -> Result<SpawnRecord, TurnGateError> {
        if !self.gate.requires_review(request_id)? {
            return spawn_record(self.gate.run_approved(request_id).await?);
        }
        let changes = self.changes.as_ref().map_err(Clone::clone)?;
        reviewed_record(self.gate.run_approved_reviewed(request_id, changes).await?)
    }

    /// Authorize a read of `inv.target` and open it race-free beneath its root.
    pub async fn open_read(&self, inv: &InvocationRecord) -> Result<OpenRecord, TurnGateError> {
        Ok(match self.gate.open_read(&inv.to_core()?).await? {
            Ok(f) => OpenRecord::Opened(f),
            Err(d) => OpenRecord::Denied(Box::new(d.into())),
        })
    }

    /// Authorize a write of `inv.target` and open (create or truncate) it race-free.
    pub async fn open_write(&self, inv: &InvocationRecord) -> Result<OpenRecord, TurnGateError> {
        Ok(match self.gate.open_write(&inv.to_core()?).await? {
            Ok(f) => OpenRecord::Opened(f),
            Err(d) => OpenRecord::Denied(Box::new(d.into())),
        })
    }

    /// Check a URL and resolve it: connect only to the returned, vetted addresses.
    pub fn resolve_and_check(&self, url: &str, tool: Option<&str>) -> NetworkResolutionRecord {
        resolution_record(self.gate.resolve_and_check(url, tool))
    }

    /// Grant `scope_hash` for the rest of the turn.
    pub fn grant_for_turn(&self, scope_hash: &str) {
        self.gate.grant_for_turn(scope_hash);
    }
}

/// A reviewed spawn's record: the spawn's, with the change set's summary on a run.
fn reviewed_record(reviewed: Reviewed) -> Result<SpawnRecord, TurnGateError> {
    let summary = reviewed
        .change_set
        .as_ref()
        .map(ChangeSetSummaryRecord::from);
    let mut record = spawn_record(reviewed.result)?;
    if let SpawnRecord::Ran(outcome) = &mut record {
        outcome.change_set = summary;
    }
    Ok(record)
}

/// The record of a spawn result (also what `turngate serve` answers `turn/spawn` with).
pub fn spawn_record(result: SpawnResult) -> Result<SpawnRecord, TurnGateError> {
    Ok(match result {
        SpawnResult::Ran(o) => SpawnRecord::Ran(outcome_record(*o)?),
        SpawnResult::Denied(d) => SpawnRecord::Denied(d.into()),
        SpawnResult::Deferred(r) => SpawnRecord::Deferred {
            reason: deferral_reason(&r),
            tool_result: deferral_tool_result(&r),
            request: to_value("request", &*r)?,
        },
    })
}
