//! `Store`: the facade's durable SQLite audit and approval store. Every call blocks on SQLite,
//! so every method returns a Promise and runs on the runtime's blocking pool.

use std::sync::Arc;

use napi::Env;
use napi::bindgen_prelude::{Either, PromiseRaw, ToNapiValue, Unknown};
use napi_derive::napi;
use serde_json::Value;
use turngate_ffi::{ApplyOptionsRecord, StoreHandle, TurnGateError};

use crate::convert::{object_arg, options_or_default, owned_record, same};
use crate::error::OrThrow;
use crate::settle::{blocking, promise};

/// How `Store.open` opens its file.
#[napi(object)]
#[derive(Debug, Default)]
pub struct StoreOptions {
    /// `'process'` (the default) or `'power'`.
    #[napi(ts_type = "'process' | 'power'")]
    pub durability: Option<String>,
}

/// An open audit store (SQLite, WAL), shared by gates and clients, in this process or another.
#[napi]
#[derive(Debug)]
pub struct Store {
    pub(crate) handle: Arc<StoreHandle>,
}

impl Store {
    /// `work` on the store on the blocking pool, behind a Promise of its converted result.
    fn run<'env, T: Send + 'static, V: ToNapiValue>(
        &self,
        env: &'env Env,
        work: impl FnOnce(&StoreHandle) -> Result<T, TurnGateError> + Send + 'static,
        convert: impl FnOnce(&Env, T) -> napi::Result<V> + 'static,
    ) -> napi::Result<PromiseRaw<'env, V>> {
        let h = Arc::clone(&self.handle);
        blocking(env, move || work(&h), convert)
    }
}

#[napi]
impl Store {
    /// Open (creating if needed) the SQLite store at `path`. `options.durability` is
    /// `'process'` (the default: every recorded event survives a kill of the process) or
    /// `'power'` (an fsync per group commit: it also survives a power loss).
    #[napi(
        ts_args_type = "path: string, options?: StoreOptions | null",
        ts_return_type = "Promise<Store>"
    )]
    pub fn open<'env>(
        env: &'env Env,
        path: String,
        options: Option<Unknown<'_>>,
    ) -> napi::Result<PromiseRaw<'env, Store>> {
        let options: StoreOptions = object_arg(env, "options", options)?.unwrap_or_default();
        blocking(
            env,
            move || StoreHandle::open_durable(&path, options.durability.as_deref()),
            |_, handle| Ok(Store { handle }),
        )
    }

    /// A store in memory, for tests: the file store's semantics, nothing kept.
    #[napi(factory)]
    pub fn memory(env: Env) -> napi::Result<Store> {
        Ok(Store {
            handle: StoreHandle::memory().or_throw(&env)?,
        })
    }

    /// Wait until the stored approval `requestId` is resolved, by anyone (this process at
    /// once, another within 100 ms), or `timeoutMs` passes; resolves to the approval
    /// (`{request, action, resolution?}`): resolved, or still pending after the timeout.
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
        let (h, timeout) = (Arc::clone(&self.handle), timeout_ms.map(u64::from));
        let fut = async move { h.wait_resolved(&request_id, timeout).await };
        promise(env, fut, same)
    }

    /// The store's file path.
    #[napi(getter)]
    pub fn path(&self) -> String {
        self.handle.path()
    }

    /// Append a `TurnPermissionAuditEvent`; resolves to its assigned seq.
    #[napi(ts_args_type = "event: JsonObject", ts_return_type = "Promise<number>")]
    pub fn append<'env>(
        &self,
        env: &'env Env,
        event: Value,
    ) -> napi::Result<PromiseRaw<'env, f64>> {
        self.run(env, move |h| h.append(event), |_, seq| Ok(seq as f64))
    }

    /// `replay(turnId)`: the events of `turnId` in seq order (`TurnPermissionAuditEvent[]`).
    /// `replay(policy, options?)`: re-decide every recorded decision under `policy` as a
    /// candidate (`turngate replay`): the report `{decisions, flips}` of the decisions that
    /// flip. `options` is `{turn?, since?, workspace?}`.
    #[napi(
        ts_args_type = "what: string | Policy, options?: ReplayOptions | null",
        ts_return_type = "Promise<JsonObject[] | ReplayReport>"
    )]
    pub fn replay<'env>(
        &self,
        env: &'env Env,
        what: Either<String, &crate::policy::Policy>,
        options: Option<Value>,
    ) -> napi::Result<PromiseRaw<'env, Value>> {
        match what {
            Either::A(turn_id) => self.run(env, move |h| h.replay(&turn_id), same),
            Either::B(policy) => {
                let policy = Arc::clone(&policy.handle);
                let options = options.unwrap_or(Value::Null);
                self.run(env, move |h| h.replay_policy(&policy, options), same)
            }
        }
    }

    /// Every turn id with events, oldest first.
    #[napi(ts_return_type = "Promise<string[]>")]
    pub fn turns<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, Vec<String>>> {
        self.run(env, |h| h.turns(), same)
    }

    /// Every stored approval without a resolution (`{request, action}`), oldest first.
    #[napi(ts_return_type = "Promise<StoredApproval[]>")]
    pub fn pending_approvals<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, Value>> {
        self.run(env, |h| h.pending_approvals(), same)
    }

    /// The stored approval `requestId` (`{request, action, resolution?}`), or null.
    #[napi(ts_return_type = "Promise<StoredApproval | null>")]
    pub fn approval<'env>(
        &self,
        env: &'env Env,
        request_id: String,
    ) -> napi::Result<PromiseRaw<'env, Option<Value>>> {
        self.run(env, move |h| h.approval(&request_id), same)
    }

    /// Every change set a reviewed spawn (`gate.spawn({..., review: true})`) recorded beside
    /// this store, oldest first (`ChangeSet[]`, in their schema's snake_case shape).
    #[napi(ts_return_type = "Promise<ChangeSet[]>")]
    pub fn change_sets<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, Value>> {
        self.run(env, |h| h.change_sets(), same)
    }

    /// The change set `id` (a unified diff per text file). Rejects with `ChangesError`
    /// (`changesCode` `bad_id` for a path such as `../x`, `not_found`).
    #[napi(ts_return_type = "Promise<ChangeSet>")]
    pub fn change_set<'env>(
        &self,
        env: &'env Env,
        id: String,
    ) -> napi::Result<PromiseRaw<'env, Value>> {
        self.run(env, move |h| h.change_set(&id), same)
    }

    /// Apply change set `id` to the workspace, all or nothing; resolves to the applied
    /// `ChangeSet`. `options` is `{confirmAsks?, by?}` (unknown fields throw). A refusal
    /// rejects with `ChangesError` (`changesCode` `conflicts`, `policy_refused`, `tampered`,
    /// `not_pending`, ..., and `paths`); nothing in the workspace changed.
    #[napi(
        ts_args_type = "id: string, options?: ApplyOptions | null",
        ts_return_type = "Promise<ChangeSet>"
    )]
    pub fn apply_change_set<'env>(
        &self,
        env: &'env Env,
        id: String,
        options_value: Option<Value>,
    ) -> napi::Result<PromiseRaw<'env, Value>> {
        let opts: ApplyOptionsRecord = options_or_default(env, "options", options_value)?;
        self.run(env, move |h| h.apply_change_set(&id, &opts), same)
    }

    /// Discard change set `id` (its writes are dropped; the workspace was never touched);
    /// resolves to the discarded `ChangeSet`. `options` is `{by?}`.
    #[napi(
        ts_args_type = "id: string, options?: DiscardOptions | null",
        ts_return_type = "Promise<ChangeSet>"
    )]
    pub fn discard_change_set<'env>(
        &self,
        env: &'env Env,
        id: String,
        options_value: Option<Value>,
    ) -> napi::Result<PromiseRaw<'env, Value>> {
        let by = options_or_default::<DiscardOptions>(env, "options", options_value)?.by;
        self.run(env, move |h| h.discard_change_set(&id, by.as_deref()), same)
    }

    /// Record `resolution` for a stored approval, first one wins. This records only; a gate's
    /// `resume` re-checks the action against the policy.
    #[napi(
        ts_args_type = "requestId: string, resolution: Resolution, reason: string",
        ts_return_type = "Promise<StoreResolution>"
    )]
    pub fn resolve<'env>(
        &self,
        env: &'env Env,
        request_id: String,
        resolution: String,
        reason: String,
    ) -> napi::Result<PromiseRaw<'env, Value>> {
        let work = move |h: &StoreHandle| h.resolve(&request_id, &resolution, &reason);
        self.run(env, work, owned_record)
    }
}

/// The options of `Store.discardChangeSet` (unknown fields throw).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct DiscardOptions {
    #[serde(default)]
    by: Option<String>,
}

/// A `ChangeSet` (a manifest, or one another process handed over, in its schema's snake_case
/// shape) checked against the type and returned as turngate writes it: an unknown field, kind
/// or status throws `InvalidInputError`, naming it.
#[napi(ts_args_type = "changeSet: JsonObject", ts_return_type = "ChangeSet")]
pub fn parse_change_set(env: Env, change_set: Value) -> napi::Result<Value> {
    turngate_ffi::changes::parse(change_set).or_throw(&env)
}
