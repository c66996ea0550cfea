//! `Gate`: the facade's gate of one turn. `authorize`, `spawn`, `resume`, `runApproved` and the
//! race-free opens return Promises and run on the addon's runtime (the approver is awaited
//! there, never on the JavaScript thread). `close()` abandons the calls still waiting: their
//! Promises reject with an `ApprovalError`. Every rule is the core gate's.

use std::future::Future;
use std::sync::Arc;

use napi::Env;
use napi::bindgen_prelude::{
    Buffer, FromNapiValue, JsObjectValue, Object, PromiseRaw, ToNapiValue,
};
use napi::sys;
use napi_derive::napi;
use serde_json::Value;
use tokio::sync::watch;
use turngate_ffi::approver::decision_from_value;
use turngate_ffi::gate::{OpenRecord, SpawnRecord};
use turngate_ffi::wire::to_camel_value;
use turngate_ffi::{GateHandle, InvocationRecord, TurnGateError};

use crate::approver::Approver;
use crate::broker::Broker;
use crate::convert::{options, owned_record, record, same};
use crate::error::OrThrow;
use crate::settle::{blocking, promise};
use crate::snapshot::opt;
use crate::store::Store;

/// What `spawn`, `resumeSpawn` and `runApproved` did: the facade's `SpawnResult` record, flat
/// as in every language (`outcome` says which fields it has), converted when its Promise
/// settles (its camelCase JSON form, as every record); the captured
/// output is Buffers, Node's bytes.
#[derive(Debug)]
pub struct SpawnResult(SpawnRecord);

impl ToNapiValue for SpawnResult {
    unsafe fn to_napi_value(raw: sys::napi_env, val: Self) -> napi::Result<sys::napi_value> {
        let json =
            to_camel_value("result", &val.0).map_err(|e| napi::Error::from_reason(e.message()))?;
        // SAFETY: `raw` is the live environment the value is returned to.
        let value = unsafe { Value::to_napi_value(raw, json) }?;
        if let SpawnRecord::Ran(o) = val.0 {
            // SAFETY: as above; a `Ran` record is an object.
            let mut obj = unsafe { Object::from_napi_value(raw, value) }?;
            obj.set_named_property("stdout", Buffer::from(o.stdout))?;
            obj.set_named_property("stderr", Buffer::from(o.stderr))?;
        }
        Ok(value)
    }
}

fn spawn_result(_: &Env, r: SpawnRecord) -> napi::Result<SpawnResult> {
    Ok(SpawnResult(r))
}

/// What `openRead`/`openWrite` did: a file descriptor to use with `node:fs` (close it), or a
/// denial.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct OpenResult {
    /// `opened` or `denied`.
    #[napi(ts_type = "'opened' | 'denied'")]
    pub outcome: String,
    /// Opened: the file descriptor (the caller owns it: `fs.closeSync(fd)`).
    pub fd: Option<i32>,
    /// Denied: the refusal.
    #[napi(ts_type = "Denial")]
    pub denial: Option<Value>,
}

#[cfg(unix)]
fn fd_of(file: std::fs::File) -> Option<i32> {
    use std::os::fd::IntoRawFd;
    Some(file.into_raw_fd())
}

#[cfg(not(unix))]
fn fd_of(_file: std::fs::File) -> Option<i32> {
    None
}

fn open_result(env: &Env, r: OpenRecord) -> napi::Result<OpenResult> {
    Ok(match r {
        OpenRecord::Opened(f) => OpenResult {
            outcome: "opened".to_owned(),
            fd: fd_of(f),
            denial: None,
        },
        OpenRecord::Denied(d) => OpenResult {
            outcome: "denied".to_owned(),
            fd: None,
            denial: Some(record(env, &*d)?),
        },
    })
}

/// Options of `new Gate`.
#[napi(object)]
pub struct GateOptions {
    /// The audit store every decision is recorded to.
    pub store: napi::bindgen_prelude::ClassInstance<'static, Store>,
    /// Who answers asks (default: `Approver.denyAll()`).
    pub approver: Option<napi::bindgen_prelude::ClassInstance<'static, Approver>>,
    /// A broker whose `allow_for_turn` grants the gate honours (and that re-checks this turn's
    /// resolutions against its policy).
    pub broker: Option<napi::bindgen_prelude::ClassInstance<'static, Broker>>,
}

/// The gate of one turn: every side-effecting tool call goes through it before it runs.
#[napi]
#[derive(Debug)]
pub struct Gate {
    gate: Arc<GateHandle>,
    /// Bumped by `close()`: a call aborts when the generation differs from the one it started
    /// under (a flag set and reset could be missed by a waiter that polls late).
    closed: watch::Sender<u64>,
}

impl Gate {
    /// The facade's gate (the guarded tools' module, `tools.rs`).
    pub(crate) fn handle(&self) -> Arc<GateHandle> {
        Arc::clone(&self.gate)
    }

    /// `fut`, unless the gate is closed first.
    pub(crate) fn guarded<T: Send + 'static>(
        &self,
        fut: impl Future<Output = Result<T, TurnGateError>> + Send + 'static,
    ) -> impl Future<Output = Result<T, TurnGateError>> + Send + 'static {
        let mut closed = self.closed.subscribe();
        let started = *closed.borrow_and_update();
        async move {
            tokio::select! {
                r = fut => r,
                _ = closed.wait_for(move |g| *g != started) => Err(TurnGateError::Approval {
                    message: "the gate was closed while this call was waiting".to_owned(),
                }),
            }
        }
    }

    /// `work` on the gate, unless it is closed first, behind a Promise of its converted result.
    fn run<'env, T: Send + 'static, V: ToNapiValue, F>(
        &self,
        env: &'env Env,
        work: impl FnOnce(Arc<GateHandle>) -> F,
        convert: impl FnOnce(&Env, T) -> napi::Result<V> + 'static,
    ) -> napi::Result<PromiseRaw<'env, V>>
    where
        F: Future<Output = Result<T, TurnGateError>> + Send + 'static,
    {
        promise(env, self.guarded(work(self.handle())), convert)
    }
}

#[napi]
impl Gate {
    /// A gate for `turnId` under a `TurnExecutionSecuritySnapshot`, recording to
    /// `options.store`, asking `options.approver`, honouring grants of `options.broker`.
    #[napi(
        constructor,
        ts_args_type = "turnId: string, snapshot: TurnExecutionSecuritySnapshot, options: GateOptions"
    )]
    pub fn new(
        env: Env,
        turn_id: String,
        snapshot: Value,
        options: GateOptions,
    ) -> napi::Result<Self> {
        let approver = match &options.approver {
            Some(a) => a.handle.clone(),
            None => turngate_ffi::ApproverHandle::builtin("deny_all").or_throw(&env)?,
        };
        let broker = options.broker.as_ref().map(|b| Arc::clone(&b.handle));
        // The profile row is queued to the store's committer thread, not written here: the
        // constructor runs on the event loop. The first decision waits for it.
        let gate = GateHandle::new_started(
            &turn_id,
            snapshot,
            &options.store.handle,
            &approver,
            broker.as_deref(),
        )
        .or_throw(&env)?;
        Ok(Gate {
            gate,
            closed: watch::channel(0).0,
        })
    }

    /// The turn id.
    #[napi(getter)]
    pub fn turn_id(&self) -> String {
        self.gate.turn_id()
    }

    /// The turn's snapshot.
    #[napi(ts_return_type = "TurnExecutionSecuritySnapshot")]
    pub fn snapshot(&self, env: Env) -> napi::Result<Value> {
        self.gate.snapshot().or_throw(&env)
    }

    /// Evaluate one call with the checker of its kind, without recording or asking.
    #[napi(ts_args_type = "invocation: Invocation", ts_return_type = "Evaluation")]
    pub fn evaluate(&self, env: Env, invocation: Value) -> napi::Result<Value> {
        let inv: InvocationRecord = options(&env, "invocation", invocation)?;
        record(&env, &self.gate.evaluate(&inv).or_throw(&env)?)
    }

    /// Decide one call: evaluate, consult grants, ask the approver on ask, re-check, record.
    #[napi(
        ts_args_type = "invocation: Invocation",
        ts_return_type = "Promise<Authorization>"
    )]
    pub fn authorize<'env>(
        &self,
        env: &'env Env,
        invocation: Value,
    ) -> napi::Result<PromiseRaw<'env, Value>> {
        let inv: InvocationRecord = options(env, "invocation", invocation)?;
        let work = |g: Arc<GateHandle>| async move { g.authorize(&inv).await };
        self.run(env, work, owned_record)
    }

    /// Decide a deferred request (possibly persisted by another process): the stored action,
    /// exactly as shown, is re-checked against this gate's policy. With no `decision`, the one
    /// already recorded in the store (see `waitResolved`): an allow is re-checked and spent
    /// once, a recorded deny is the denial, a pending request rejects.
    #[napi(
        ts_args_type = "requestId: string, decision?: Decision | null",
        ts_return_type = "Promise<Authorization>"
    )]
    pub fn resume<'env>(
        &self,
        env: &'env Env,
        request_id: String,
        decision: Option<Value>,
    ) -> napi::Result<PromiseRaw<'env, Value>> {
        let decision = opt(decision)
            .map(|d| decision_from_value("decision", d))
            .transpose()
            .or_throw(env)?;
        let gate = self.handle();
        let work = move || gate.resume_or_recorded(&request_id, decision.as_ref());
        blocking(env, work, owned_record)
    }

    /// Wait until the deferred request `requestId` is resolved, by anyone (a person through
    /// `turngate approvals`, `turngate serve` or a link; this process at once, another within
    /// 100 ms), or `timeoutMs` passes; resolves to its stored approval. Then
    /// `resume(requestId)` (or `runApproved`) acts on the recorded decision. Closing the gate
    /// rejects a wait in progress.
    #[napi(
        ts_args_type = "requestId: string, timeoutMs?: number | null",
        ts_return_type = "Promise<StoredApproval>"
    )]
    pub fn wait_resolved<'env>(
        &self,
        env: &'env Env,
        request_id: String,
        timeout_ms: Option<u32>,
    ) -> napi::Result<PromiseRaw<'env, Value>> {
        let timeout = timeout_ms.map(u64::from);
        let work = |g: Arc<GateHandle>| async move { g.wait_resolved(&request_id, timeout).await };
        self.run(env, work, same)
    }

    /// Authorize a shell command and, when allowed, run it under the snapshot's sandbox. With
    /// `review: true` its writes become a change set beside the store
    /// (`result.process.changeSet`), the workspace untouched until `Store.applyChangeSet`;
    /// where that cannot be done it rejects (`ChangesError`, `RunError`), never runs
    /// unreviewed.
    #[napi(
        ts_args_type = "invocation: Invocation",
        ts_return_type = "Promise<SpawnResult>"
    )]
    pub fn spawn<'env>(
        &self,
        env: &'env Env,
        invocation: Value,
    ) -> napi::Result<PromiseRaw<'env, SpawnResult>> {
        let inv: InvocationRecord = options(env, "invocation", invocation)?;
        let work = |g: Arc<GateHandle>| async move { g.spawn(&inv).await };
        self.run(env, work, spawn_result)
    }

    /// Decide a deferred shell command and, when allowed, run exactly its stored action under
    /// the snapshot it was requested under (narrowed by this gate's). An `allow_once` approval
    /// runs once; a second call rejects with `already_used`.
    #[napi(
        ts_args_type = "requestId: string, decision: Decision",
        ts_return_type = "Promise<SpawnResult>"
    )]
    pub fn resume_spawn<'env>(
        &self,
        env: &'env Env,
        request_id: String,
        decision: Value,
    ) -> napi::Result<PromiseRaw<'env, SpawnResult>> {
        let decision = decision_from_value("decision", decision).or_throw(env)?;
        let work = |g: Arc<GateHandle>| async move { g.resume_spawn(&request_id, &decision).await };
        self.run(env, work, spawn_result)
    }

    /// Run the stored shell command of an already approved request (by id) under the snapshot
    /// and sandbox it was requested under. An unresolved, denied or spent request rejects: no
    /// command line runs without a decision.
    #[napi(ts_return_type = "Promise<SpawnResult>")]
    pub fn run_approved<'env>(
        &self,
        env: &'env Env,
        request_id: String,
    ) -> napi::Result<PromiseRaw<'env, SpawnResult>> {
        let work = |g: Arc<GateHandle>| async move { g.run_approved(&request_id).await };
        self.run(env, work, spawn_result)
    }

    /// Authorize a read of `invocation.target` and open it race-free beneath its root.
    #[napi(
        ts_args_type = "invocation: Invocation",
        ts_return_type = "Promise<OpenResult>"
    )]
    pub fn open_read<'env>(
        &self,
        env: &'env Env,
        invocation: Value,
    ) -> napi::Result<PromiseRaw<'env, OpenResult>> {
        let inv: InvocationRecord = options(env, "invocation", invocation)?;
        let work = |g: Arc<GateHandle>| async move { g.open_read(&inv).await };
        self.run(env, work, open_result)
    }

    /// Authorize a write of `invocation.target` and open (create or truncate) it race-free.
    #[napi(
        ts_args_type = "invocation: Invocation",
        ts_return_type = "Promise<OpenResult>"
    )]
    pub fn open_write<'env>(
        &self,
        env: &'env Env,
        invocation: Value,
    ) -> napi::Result<PromiseRaw<'env, OpenResult>> {
        let inv: InvocationRecord = options(env, "invocation", invocation)?;
        let work = |g: Arc<GateHandle>| async move { g.open_write(&inv).await };
        self.run(env, work, open_result)
    }

    /// Check a URL and resolve it (DNS, off the event loop): connect only to the vetted
    /// addresses.
    #[napi(ts_return_type = "Promise<NetworkResolution>")]
    pub fn resolve_and_check<'env>(
        &self,
        env: &'env Env,
        url: String,
        tool: Option<String>,
    ) -> napi::Result<PromiseRaw<'env, Value>> {
        let gate = self.handle();
        let work = move || Ok(gate.resolve_and_check(&url, tool.as_deref()));
        blocking(env, work, owned_record)
    }

    /// Grant `scopeHash` for the rest of the turn.
    #[napi]
    pub fn grant_for_turn(&self, scope_hash: String) {
        self.gate.grant_for_turn(&scope_hash);
    }

    /// Abandon the calls still waiting (on an approver that never answers): their Promises
    /// reject with an `ApprovalError`. Later calls are unaffected.
    #[napi]
    pub fn close(&self) {
        self.closed.send_modify(|g| *g = g.wrapping_add(1));
    }
}

opaque_debug!(GateOptions);
