//! The approval broker for clients: open requests, respond to them, and subscribe to the
//! `requested`/`resolved` notifications. Requests, outcomes and notifications cross as JSON
//! values in their protocol shape. Dropping a [`SubscriptionHandle`] (or calling `cancel`)
//! ends the subscription; the broker then stops queueing for it.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::Mutex as AsyncMutex;
use turngate::approval::{
    ApprovalBroker, ApprovalResolution, NotificationStream, PendingApproval,
    TurnPermissionApprovalRequest,
};
use turngate::{Action, CompiledPolicy};

use crate::convert::{from_value, to_value};
use crate::{ActionRecord, PolicyHandle, TurnGateError, parse_kind};

/// A shared approval broker (all clones of the handle's broker share one state).
#[derive(Debug, Clone)]
pub struct BrokerHandle {
    broker: ApprovalBroker,
}

/// What `respond` did.
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
#[cfg_attr(
    feature = "uniffi",
    derive(uniffi::Record),
    uniffi(name = "RespondOutcome")
)]
pub struct RespondRecord {
    /// The recorded `ApprovalOutcome` (this response's, or the earlier one that won).
    pub outcome: Value,
    /// True when this response is the one recorded.
    pub applied: bool,
}

/// A request opened on the broker; `wait` gives its outcome.
#[derive(Debug)]
pub struct PendingHandle {
    request: Value,
    pending: AsyncMutex<Option<PendingApproval>>,
}

impl PendingHandle {
    /// The request as opened.
    pub fn request(&self) -> Value {
        self.request.clone()
    }

    /// Wait for the outcome (an `ApprovalOutcome`). A second wait fails.
    pub async fn wait(&self) -> Result<Value, TurnGateError> {
        let pending = self
            .pending
            .lock()
            .await
            .take()
            .ok_or_else(|| TurnGateError::Approval {
                message: "this pending approval was already waited for".to_owned(),
            })?;
        to_value("outcome", &pending.wait().await)
    }
}

/// A notification subscription. Dropping it cancels it.
#[derive(Debug)]
pub struct SubscriptionHandle {
    stream: AsyncMutex<Option<NotificationStream>>,
}

impl SubscriptionHandle {
    /// The next notification (`{"method", "params"}`), or none once the broker is closed or the
    /// subscription cancelled.
    pub async fn next(&self) -> Result<Option<Value>, TurnGateError> {
        let mut guard = self.stream.lock().await;
        let Some(stream) = guard.as_mut() else {
            return Ok(None);
        };
        stream
            .recv()
            .await
            .map(|n| to_value("notification", &n))
            .transpose()
    }

    /// The next notification if one is queued, without waiting.
    pub fn try_next(&self) -> Result<Option<Value>, TurnGateError> {
        let Ok(mut guard) = self.stream.try_lock() else {
            return Ok(None);
        };
        guard
            .as_mut()
            .and_then(NotificationStream::try_recv)
            .map(|n| to_value("notification", &n))
            .transpose()
    }

    /// End the subscription now (a pending `next` returns none once it wakes).
    pub fn cancel(&self) {
        if let Ok(mut guard) = self.stream.try_lock() {
            guard.take();
        }
    }
}

fn action_of(action: &ActionRecord) -> Result<Action, TurnGateError> {
    Ok(Action {
        kind: parse_kind(&action.kind)?,
        target: action.target.clone(),
        tool: action.tool.clone(),
    })
}

impl BrokerHandle {
    /// A broker that re-checks allows against `policy`.
    pub fn new(policy: &PolicyHandle) -> Arc<Self> {
        Arc::new(BrokerHandle {
            broker: ApprovalBroker::new(policy.compiled_arc()),
        })
    }

    /// The core broker.
    pub fn core(&self) -> &ApprovalBroker {
        &self.broker
    }

    /// Re-check allows of `turn_id` against `policy` (a compiled snapshot policy).
    pub fn set_turn_policy(&self, turn_id: &str, policy: Arc<CompiledPolicy>) {
        self.broker.set_turn_policy(turn_id, policy);
    }

    /// Subscribe to notifications from now on.
    pub fn subscribe(&self) -> SubscriptionHandle {
        SubscriptionHandle {
            stream: AsyncMutex::new(Some(self.broker.subscribe())),
        }
    }

    /// Open a `TurnPermissionApprovalRequest` for `action`; it expires after `timeout_ms`.
    pub fn open(
        &self,
        request: Value,
        action: &ActionRecord,
        timeout_ms: Option<u64>,
    ) -> Result<PendingHandle, TurnGateError> {
        let request: TurnPermissionApprovalRequest = from_value("request", request)?;
        let shown = to_value("request", &request)?;
        let pending = self.broker.open(
            request,
            action_of(action)?,
            timeout_ms.map(Duration::from_millis),
        )?;
        Ok(PendingHandle {
            request: shown,
            pending: AsyncMutex::new(Some(pending)),
        })
    }

    /// Resolve request `id` with `resolution` (`allow_once`, `allow_for_turn`, `deny`,
    /// `cancelled`, `expired`). The first resolution wins.
    pub fn respond(&self, id: &str, resolution: &str) -> Result<RespondRecord, TurnGateError> {
        let resolution: ApprovalResolution = resolution
            .parse()
            .map_err(|e| TurnGateError::invalid("resolution", e))?;
        let r = self.broker.respond(id, resolution)?;
        Ok(RespondRecord {
            outcome: to_value("outcome", &r.outcome)?,
            applied: r.applied,
        })
    }

    /// The open requests, oldest first.
    pub fn pending_requests(&self) -> Result<Value, TurnGateError> {
        to_value("requests", &self.broker.pending_requests())
    }

    /// The recorded outcome of request `id`, when resolved.
    pub fn outcome(&self, id: &str) -> Result<Option<Value>, TurnGateError> {
        self.broker
            .outcome(id)
            .map(|o| to_value("outcome", &o))
            .transpose()
    }

    /// True when `scope_hash` was granted `allow_for_turn` in `turn_id`.
    pub fn has_grant(&self, turn_id: &str, scope_hash: &str) -> bool {
        self.broker.has_grant(turn_id, scope_hash)
    }

    /// Cancel the open requests of `turn_id`; returns their outcomes.
    pub fn cancel_turn(&self, turn_id: &str) -> Result<Value, TurnGateError> {
        to_value("outcomes", &self.broker.cancel_turn(turn_id))
    }

    /// End `turn_id`: cancel its requests and forget its grants.
    pub fn end_turn(&self, turn_id: &str) -> Result<Value, TurnGateError> {
        to_value("outcomes", &self.broker.end_turn(turn_id))
    }

    /// Close the broker: pending requests are cancelled, subscriptions end.
    pub fn close(&self) {
        self.broker.close();
    }
}
