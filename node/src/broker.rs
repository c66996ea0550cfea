//! `Broker`, `Subscription` and `PendingApproval`: the facade's approval broker for clients.
//! Requests, outcomes and notifications cross as plain objects in their protocol shape; waiting
//! (`wait`, `next`) returns a Promise and never blocks the event loop.

use std::sync::Arc;

use napi::Env;
use napi::bindgen_prelude::PromiseRaw;
use napi_derive::napi;
use serde_json::Value;
use turngate_ffi::{BrokerHandle, PendingHandle, SubscriptionHandle};

use crate::convert::{record, same};
use crate::error::OrThrow;
use crate::policy::{Action, Policy};
use crate::settle::promise;

/// The approval broker: opens requests, takes responses from any client, publishes
/// `turn/permission/request/requested` and `.../resolved` notifications. A resolution is
/// re-checked against the policy; the first one wins.
#[napi]
#[derive(Debug)]
pub struct Broker {
    pub(crate) handle: Arc<BrokerHandle>,
}

#[napi]
impl Broker {
    /// A broker that re-checks allows against `policy` (a gate sets its turn's own policy).
    #[napi(constructor)]
    pub fn new(policy: &Policy) -> Self {
        Broker {
            handle: BrokerHandle::new(&policy.handle),
        }
    }

    /// Subscribe to notifications from now on (an async iterator of `{method, params}`).
    #[napi]
    pub fn subscribe(&self) -> Subscription {
        Subscription {
            handle: Arc::new(self.handle.subscribe()),
        }
    }

    /// Open a `TurnPermissionApprovalRequest` for `action`; it expires after `timeoutMs`.
    #[napi(ts_args_type = "request: ApprovalRequest, action: Action, timeoutMs?: number | null")]
    pub fn open(
        &self,
        env: Env,
        request: Value,
        action: Action,
        timeout_ms: Option<u32>,
    ) -> napi::Result<PendingApproval> {
        let pending = self
            .handle
            .open(request, &action.into(), timeout_ms.map(u64::from))
            .or_throw(&env)?;
        Ok(PendingApproval {
            handle: Arc::new(pending),
        })
    }

    /// Resolve request `id` (`allow_once`, `allow_for_turn`, `deny`, `cancelled`, `expired`).
    /// Idempotent: the first resolution wins and later ones return it.
    #[napi(
        ts_args_type = "id: string, resolution: Resolution",
        ts_return_type = "RespondResult"
    )]
    pub fn respond(&self, env: Env, id: String, resolution: String) -> napi::Result<Value> {
        let r = self.handle.respond(&id, &resolution).or_throw(&env)?;
        record(&env, &r)
    }

    /// The open requests, oldest first.
    #[napi(ts_return_type = "ApprovalRequest[]")]
    pub fn pending_requests(&self, env: Env) -> napi::Result<Value> {
        self.handle.pending_requests().or_throw(&env)
    }

    /// The recorded outcome of request `id`, when resolved.
    #[napi(ts_return_type = "ApprovalOutcome | null")]
    pub fn outcome(&self, env: Env, id: String) -> napi::Result<Option<Value>> {
        self.handle.outcome(&id).or_throw(&env)
    }

    /// True when `scopeHash` was granted `allow_for_turn` in `turnId`.
    #[napi]
    pub fn has_grant(&self, turn_id: String, scope_hash: String) -> bool {
        self.handle.has_grant(&turn_id, &scope_hash)
    }

    /// Cancel the open requests of `turnId`; returns their outcomes.
    #[napi(ts_return_type = "ApprovalOutcome[]")]
    pub fn cancel_turn(&self, env: Env, turn_id: String) -> napi::Result<Value> {
        self.handle.cancel_turn(&turn_id).or_throw(&env)
    }

    /// End `turnId`: cancel its requests and forget its grants.
    #[napi(ts_return_type = "ApprovalOutcome[]")]
    pub fn end_turn(&self, env: Env, turn_id: String) -> napi::Result<Value> {
        self.handle.end_turn(&turn_id).or_throw(&env)
    }

    /// Close the broker: pending requests are cancelled, subscriptions end.
    #[napi]
    pub fn close(&self) {
        self.handle.close();
    }
}

/// A notification subscription: `for await (const n of subscription)`, or `next()`.
#[napi]
#[derive(Debug)]
pub struct Subscription {
    handle: Arc<SubscriptionHandle>,
}

#[napi]
impl Subscription {
    /// The next notification (`{method, params}`), or null once the broker is closed or the
    /// subscription cancelled.
    #[napi(
        js_name = "nextNotification",
        ts_return_type = "Promise<Notification | null>"
    )]
    pub fn next_notification<'env>(
        &self,
        env: &'env Env,
    ) -> napi::Result<PromiseRaw<'env, Option<Value>>> {
        let h = Arc::clone(&self.handle);
        promise(env, async move { h.next().await }, same)
    }

    /// The next notification if one is queued, without waiting.
    #[napi(ts_return_type = "Notification | null")]
    pub fn try_next(&self, env: Env) -> napi::Result<Option<Value>> {
        self.handle.try_next().or_throw(&env)
    }

    /// End the subscription now.
    #[napi]
    pub fn cancel(&self) {
        self.handle.cancel();
    }
}

/// A request opened on the broker; `wait()` resolves to its outcome.
#[napi]
#[derive(Debug)]
pub struct PendingApproval {
    handle: Arc<PendingHandle>,
}

#[napi]
impl PendingApproval {
    /// The request as opened.
    #[napi(getter, ts_return_type = "ApprovalRequest")]
    pub fn request(&self) -> Value {
        self.handle.request()
    }

    /// The outcome (an `ApprovalOutcome`), once resolved. A second wait rejects.
    #[napi(ts_return_type = "Promise<ApprovalOutcome>")]
    pub fn wait<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, Value>> {
        let h = Arc::clone(&self.handle);
        promise(env, async move { h.wait().await }, same)
    }
}
