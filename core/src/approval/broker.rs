//! The approval broker: routes asks to whoever responds (a person through a client in any
//! language, or a program), and publishes what happened.
//!
//! It decides: the first resolution wins and later ones get the recorded outcome back; an
//! allow is re-checked against the current policy and becomes `deny` when the policy now denies
//! the action; an `allow_for_turn` caches the request's `scope_hash` for its turn, and only
//! that exact hash. It never evaluates rules itself (that is `policy`'s job) and never writes
//! the audit log (the gate does, with the outcome it gets back).
//!
//! Notifications go to every subscriber through its own unbounded queue, so none is lost or
//! duplicated however slowly a subscriber reads; each stream ends when the broker is closed or
//! dropped. A request's `requested` notification always precedes its `resolved` one.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use crate::action::{Action, Effect};
use crate::approval::request::{
    ApprovalNotification, ApprovalOutcome, ApprovalResolution, ResolutionSource,
    TurnPermissionApprovalRequest,
};
use crate::policy::CompiledPolicy;

/// A broker operation was refused. Each variant names the request at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BrokerError {
    /// No request with this id was ever opened (or its turn was ended and forgotten).
    #[error("unknown approval request `{0}`")]
    UnknownRequest(String),
    /// A request with this id is already open or resolved.
    #[error("approval request `{0}` already exists")]
    DuplicateRequest(String),
    /// The responder picked a resolution the request does not offer.
    #[error("approval request `{id}` does not allow `{resolution}` (allowed: {allowed})")]
    ResolutionNotAllowed {
        /// The request.
        id: String,
        /// What the responder picked.
        resolution: ApprovalResolution,
        /// What the request offers, comma-separated.
        allowed: String,
    },
    /// The broker was closed; no new request can open.
    #[error("the approval broker is closed")]
    Closed,
}

/// What `respond` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RespondOutcome {
    /// The recorded outcome (this response's, or the earlier one that won).
    pub outcome: ApprovalOutcome,
    /// True when this call's resolution is the one recorded (false when an earlier one won,
    /// when the policy turned an allow into `deny`, or when the request had expired).
    pub applied: bool,
}

/// The approval broker. Cheap to clone; all clones share one state.
#[derive(Debug, Clone)]
pub struct ApprovalBroker {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    state: Mutex<State>,
    timer: Arc<Timer>,
}

#[derive(Debug)]
struct State {
    policy: Arc<CompiledPolicy>,
    turn_policies: HashMap<String, Arc<CompiledPolicy>>,
    pending: HashMap<String, Pending>,
    resolved: HashMap<String, ApprovalOutcome>,
    grants: HashMap<String, HashSet<String>>,
    subscribers: Vec<mpsc::UnboundedSender<ApprovalNotification>>,
    timer_started: bool,
    closed: bool,
}

#[derive(Debug)]
struct Pending {
    request: TurnPermissionApprovalRequest,
    action: Action,
    deadline: Option<Instant>,
    waiters: Vec<oneshot::Sender<ApprovalOutcome>>,
}

impl State {
    fn policy_for(&self, turn_id: &str) -> &CompiledPolicy {
        self.turn_policies.get(turn_id).unwrap_or(&self.policy)
    }

    fn publish(&mut self, notification: ApprovalNotification) {
        self.subscribers
            .retain(|tx| tx.send(notification.clone()).is_ok());
    }

    /// Record `resolution` for a pending request and tell everyone. The caller has checked
    /// that `id` is pending.
    fn finish(
        &mut self,
        id: &str,
        resolution: ApprovalResolution,
        source: ResolutionSource,
    ) -> Option<ApprovalOutcome> {
        let pending = self.pending.remove(id)?;
        let outcome = ApprovalOutcome {
            request_id: pending.request.id.clone(),
            turn_id: pending.request.turn_id.clone(),
            scope_hash: pending.request.scope_hash.clone(),
            resolution,
            source,
        };
        if resolution == ApprovalResolution::AllowForTurn {
            self.grants
                .entry(outcome.turn_id.clone())
                .or_default()
                .insert(outcome.scope_hash.clone());
        }
        self.resolved
            .insert(outcome.request_id.clone(), outcome.clone());
        self.publish(ApprovalNotification::Resolved(outcome.clone()));
        for waiter in pending.waiters {
            let _ = waiter.send(outcome.clone());
        }
        Some(outcome)
    }

    fn expire_if_due(&mut self, id: &str, now: Instant) -> Option<ApprovalOutcome> {
        let due = self
            .pending
            .get(id)
            .and_then(|p| p.deadline)
            .is_some_and(|d| d <= now);
        if due {
            self.finish(id, ApprovalResolution::Expired, ResolutionSource::Timeout)
        } else {
            None
        }
    }
}

/// An open request: its protocol form, and a way to wait for its outcome.
#[derive(Debug)]
pub struct PendingApproval {
    request: TurnPermissionApprovalRequest,
    state: PendingState,
}

#[derive(Debug)]
enum PendingState {
    Done(ApprovalOutcome),
    Waiting(oneshot::Receiver<ApprovalOutcome>),
}

impl PendingApproval {
    /// The request as clients see it.
    pub fn request(&self) -> &TurnPermissionApprovalRequest {
        &self.request
    }

    /// True when the request was settled at open (a cached grant or a policy deny) without a
    /// prompt.
    pub fn is_settled(&self) -> bool {
        matches!(self.state, PendingState::Done(_))
    }

    /// Wait for the outcome. The future may stay pending until someone responds, the timeout
    /// elapses or the turn is cancelled. When the broker is dropped meanwhile, the outcome is
    /// `cancelled` (`broker_closed`).
    pub async fn wait(self) -> ApprovalOutcome {
        match self.state {
            PendingState::Done(outcome) => outcome,
            PendingState::Waiting(rx) => rx.await.unwrap_or_else(|_| ApprovalOutcome {
                request_id: self.request.id.clone(),
                turn_id: self.request.turn_id.clone(),
                scope_hash: self.request.scope_hash.clone(),
                resolution: ApprovalResolution::Cancelled,
                source: ResolutionSource::BrokerClosed,
            }),
        }
    }
}

/// A subscriber's view of the notification stream. Ends (`recv` returns `None`) when the
/// broker is closed or dropped, after every notification published before that.
#[derive(Debug)]
pub struct NotificationStream {
    rx: mpsc::UnboundedReceiver<ApprovalNotification>,
}

impl NotificationStream {
    /// The next notification, or `None` once the broker is closed and everything was read.
    pub async fn recv(&mut self) -> Option<ApprovalNotification> {
        self.rx.recv().await
    }

    /// The next notification if one is queued, without waiting.
    pub fn try_recv(&mut self) -> Option<ApprovalNotification> {
        self.rx.try_recv().ok()
    }

    /// Blocking receive for callers outside an async runtime (never call it inside one).
    pub fn blocking_recv(&mut self) -> Option<ApprovalNotification> {
        self.rx.blocking_recv()
    }
}

impl ApprovalBroker {
    /// A broker that re-checks resolutions against `policy` (see [`set_policy`](Self::set_policy)
    /// and [`set_turn_policy`](Self::set_turn_policy)).
    pub fn new(policy: Arc<CompiledPolicy>) -> Self {
        ApprovalBroker {
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    policy,
                    turn_policies: HashMap::new(),
                    pending: HashMap::new(),
                    resolved: HashMap::new(),
                    grants: HashMap::new(),
                    subscribers: Vec::new(),
                    timer_started: false,
                    closed: false,
                }),
                timer: Arc::new(Timer::default()),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Replace the policy every turn without its own policy is re-checked against. Requests
    /// still pending are re-checked against the new one when they resolve.
    pub fn set_policy(&self, policy: Arc<CompiledPolicy>) {
        self.lock().policy = policy;
    }

    /// Give `turn_id` its own policy (its snapshot's `effective_policy`).
    pub fn set_turn_policy(&self, turn_id: impl Into<String>, policy: Arc<CompiledPolicy>) {
        self.lock().turn_policies.insert(turn_id.into(), policy);
    }

    /// Follow the notifications published from now on.
    pub fn subscribe(&self) -> NotificationStream {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut state = self.lock();
        if !state.closed {
            state.subscribers.push(tx);
        }
        NotificationStream { rx }
    }

    /// Open `request` for `action`.
    ///
    /// - When the policy denies `action`, the request settles at once as `deny`
    ///   (`policy_denied`) and no prompt is published: a denied action never reaches a person.
    /// - When the turn already holds an `allow_for_turn` grant for the request's `scope_hash`,
    ///   it settles at once as `allow_for_turn` (`cached_grant`), without a prompt.
    /// - Otherwise it is pending: `turn/permission/request/requested` is published, and it
    ///   expires after `timeout` when one is given.
    ///
    /// The request's `scope_hash` must be the one of `action` (build requests with
    /// [`TurnPermissionApprovalRequest::for_action`]).
    pub fn open(
        &self,
        request: TurnPermissionApprovalRequest,
        action: Action,
        timeout: Option<Duration>,
    ) -> Result<PendingApproval, BrokerError> {
        let mut state = self.lock();
        if state.closed {
            return Err(BrokerError::Closed);
        }
        if state.pending.contains_key(&request.id) || state.resolved.contains_key(&request.id) {
            return Err(BrokerError::DuplicateRequest(request.id));
        }
        let settled = if state.policy_for(&request.turn_id).check(&action) == Effect::Deny {
            Some((ApprovalResolution::Deny, ResolutionSource::PolicyDenied))
        } else if state
            .grants
            .get(&request.turn_id)
            .is_some_and(|g| g.contains(&request.scope_hash))
        {
            Some((
                ApprovalResolution::AllowForTurn,
                ResolutionSource::CachedGrant,
            ))
        } else {
            None
        };
        if let Some((resolution, source)) = settled {
            let outcome = ApprovalOutcome {
                request_id: request.id.clone(),
                turn_id: request.turn_id.clone(),
                scope_hash: request.scope_hash.clone(),
                resolution,
                source,
            };
            state.resolved.insert(request.id.clone(), outcome.clone());
            return Ok(PendingApproval {
                request,
                state: PendingState::Done(outcome),
            });
        }
        let (tx, rx) = oneshot::channel();
        let deadline = timeout.map(|t| Instant::now() + t);
        state.publish(ApprovalNotification::Requested(request.clone()));
        state.pending.insert(
            request.id.clone(),
            Pending {
                request: request.clone(),
                action,
                deadline,
                waiters: vec![tx],
            },
        );
        if let Some(deadline) = deadline {
            if !state.timer_started {
                state.timer_started = true;
                Timer::start(&self.inner.timer, Arc::downgrade(&self.inner));
            }
            self.inner.timer.schedule(deadline, request.id.clone());
        }
        Ok(PendingApproval {
            request,
            state: PendingState::Waiting(rx),
        })
    }

    /// Open a request and wait for its outcome (see [`open`](Self::open)).
    pub async fn request(
        &self,
        request: TurnPermissionApprovalRequest,
        action: Action,
        timeout: Option<Duration>,
    ) -> Result<ApprovalOutcome, BrokerError> {
        Ok(self.open(request, action, timeout)?.wait().await)
    }

    /// Resolve request `id`. Idempotent: the first resolution wins, and a later call returns
    /// the recorded outcome with `applied == false`.
    ///
    /// An allow is re-checked against the turn's current policy: if the policy now denies the
    /// action, the request resolves as `deny` (`policy_denied`). A request past its deadline
    /// resolves as `expired` whatever the response.
    pub fn respond(
        &self,
        id: &str,
        resolution: ApprovalResolution,
    ) -> Result<RespondOutcome, BrokerError> {
        let mut state = self.lock();
        if let Some(outcome) = state.resolved.get(id) {
            return Ok(RespondOutcome {
                outcome: outcome.clone(),
                applied: false,
            });
        }
        let Some(pending) = state.pending.get(id) else {
            return Err(BrokerError::UnknownRequest(id.to_owned()));
        };
        if !pending.request.allows(resolution) {
            let allowed = pending
                .request
                .allowed_resolutions
                .iter()
                .map(|r| r.as_str())
                .collect::<Vec<_>>()
                .join(", ");
            return Err(BrokerError::ResolutionNotAllowed {
                id: id.to_owned(),
                resolution,
                allowed,
            });
        }
        if let Some(outcome) = state.expire_if_due(id, Instant::now()) {
            return Ok(RespondOutcome {
                outcome,
                applied: resolution == ApprovalResolution::Expired,
            });
        }
        let policy_denies = state
            .pending
            .get(id)
            .is_some_and(|p| state.policy_for(&p.request.turn_id).check(&p.action) == Effect::Deny);
        let (recorded, source) = if resolution.is_allow() && policy_denies {
            (ApprovalResolution::Deny, ResolutionSource::PolicyDenied)
        } else {
            (resolution, ResolutionSource::Responder)
        };
        let outcome = state
            .finish(id, recorded, source)
            .ok_or_else(|| BrokerError::UnknownRequest(id.to_owned()))?;
        Ok(RespondOutcome {
            outcome,
            applied: recorded == resolution,
        })
    }

    /// Cancel every pending request of `turn_id` (`cancelled`, `turn_cancelled`). Returns the
    /// outcomes, in no particular order.
    pub fn cancel_turn(&self, turn_id: &str) -> Vec<ApprovalOutcome> {
        let mut state = self.lock();
        let ids: Vec<String> = state
            .pending
            .values()
            .filter(|p| p.request.turn_id == turn_id)
            .map(|p| p.request.id.clone())
            .collect();
        ids.iter()
            .filter_map(|id| {
                state.finish(
                    id,
                    ApprovalResolution::Cancelled,
                    ResolutionSource::TurnCancelled,
                )
            })
            .collect()
    }

    /// End `turn_id`: cancel its pending requests, drop its grants and its policy, and forget
    /// its recorded outcomes (a later `respond` for them is `UnknownRequest`).
    pub fn end_turn(&self, turn_id: &str) -> Vec<ApprovalOutcome> {
        let cancelled = self.cancel_turn(turn_id);
        let mut state = self.lock();
        state.grants.remove(turn_id);
        state.turn_policies.remove(turn_id);
        state.resolved.retain(|_, o| o.turn_id != turn_id);
        cancelled
    }

    /// True when `turn_id` holds an `allow_for_turn` grant for exactly `scope_hash`. The gate
    /// asks this before opening a request, and audits a hit with `cached_approval_used`.
    pub fn has_grant(&self, turn_id: &str, scope_hash: &str) -> bool {
        self.lock()
            .grants
            .get(turn_id)
            .is_some_and(|g| g.contains(scope_hash))
    }

    /// The recorded outcome of request `id`, if it was resolved.
    pub fn outcome(&self, id: &str) -> Option<ApprovalOutcome> {
        self.lock().resolved.get(id).cloned()
    }

    /// The requests still waiting, in no particular order.
    pub fn pending_requests(&self) -> Vec<TurnPermissionApprovalRequest> {
        self.lock()
            .pending
            .values()
            .map(|p| p.request.clone())
            .collect()
    }

    /// Close the broker: cancel every pending request (`cancelled`, `broker_closed`), publish
    /// their resolutions, then end every notification stream. Later `open`s fail with
    /// [`BrokerError::Closed`]; `respond` still returns recorded outcomes.
    pub fn close(&self) {
        let mut state = self.lock();
        let ids: Vec<String> = state.pending.keys().cloned().collect();
        for id in ids {
            state.finish(
                &id,
                ApprovalResolution::Cancelled,
                ResolutionSource::BrokerClosed,
            );
        }
        state.closed = true;
        state.subscribers.clear();
        drop(state);
        self.inner.timer.shutdown();
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.timer.shutdown();
    }
}

/// Expiry timer: one thread per broker (started at the first timed request), so expiry works
/// without any particular async runtime. It holds the broker weakly and stops when the broker
/// is closed or dropped.
#[derive(Debug, Default)]
struct Timer {
    queue: Mutex<TimerQueue>,
    wake: Condvar,
}

#[derive(Debug, Default)]
struct TimerQueue {
    heap: BinaryHeap<Reverse<(Instant, String)>>,
    shutdown: bool,
}

impl Timer {
    fn lock(&self) -> MutexGuard<'_, TimerQueue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn schedule(&self, deadline: Instant, id: String) {
        self.lock().heap.push(Reverse((deadline, id)));
        self.wake.notify_one();
    }

    fn shutdown(&self) {
        self.lock().shutdown = true;
        self.wake.notify_one();
    }

    fn start(timer: &Arc<Timer>, broker: Weak<Inner>) {
        let timer = Arc::clone(timer);
        let spawned = std::thread::Builder::new()
            .name("turngate-approval-expiry".to_owned())
            .spawn(move || timer.run(&broker));
        // Without a thread, expiry still happens lazily on `respond`.
        drop(spawned);
    }

    fn run(&self, broker: &Weak<Inner>) {
        let mut queue = self.lock();
        loop {
            if queue.shutdown {
                return;
            }
            let now = Instant::now();
            let mut due = Vec::new();
            while let Some(Reverse((deadline, _))) = queue.heap.peek() {
                if *deadline > now {
                    break;
                }
                if let Some(Reverse((_, id))) = queue.heap.pop() {
                    due.push(id);
                }
            }
            if !due.is_empty() {
                drop(queue);
                let Some(inner) = broker.upgrade() else {
                    return;
                };
                {
                    let mut state = inner.state.lock().unwrap_or_else(|e| e.into_inner());
                    for id in &due {
                        state.expire_if_due(id, now);
                    }
                }
                drop(inner);
                queue = self.lock();
                continue;
            }
            queue = match queue.heap.peek() {
                Some(Reverse((deadline, _))) => {
                    let wait = deadline.saturating_duration_since(now);
                    self.wake
                        .wait_timeout(queue, wait)
                        .map(|(q, _)| q)
                        .unwrap_or_else(|e| e.into_inner().0)
                }
                None => self.wake.wait(queue).unwrap_or_else(|e| e.into_inner()),
            };
        }
    }
}
