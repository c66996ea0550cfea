//! The gate as the egress proxy's decider (DESIGN §13): every connection a `network =
//! restricted` command makes through the proxy is one action of kind `network`, tool
//! `sandbox-proxy`, decided, asked and audited like any other; then its name is resolved once
//! and every address vetted, and the proxy connects to those addresses only.

use std::collections::{HashMap, HashSet};
use std::io;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::watch;

use super::{Authorization, Gate, ToolInvocation, Under, describe};
use crate::action::{Action, ActionKind, Effect};
use crate::approval::{ApprovalResolution, Decision, TurnPermissionApprovalRequest};
use crate::audit::StoredResolution;
use crate::check::net::{NetworkPolicyChecker, Resolver, SystemResolver};
use crate::sandbox::egress::{BoxFuture, EgressDecider, EgressDecision};

/// The tool name the proxy's actions carry.
pub const PROXY_TOOL: &str = "sandbox-proxy";

/// How often a deferred connection looks for its resolution in the store.
const POLL: Duration = Duration::from_millis(100);

/// Most distinct approval requests one command's proxy keeps outstanding at once; a
/// connection that would open one more is refused (403) instead (E2 of the red-team pass).
pub const MAX_PENDING_ASKS: usize = 8;

/// The reason stored on a proxy ask refused because too many were outstanding.
const TOO_MANY: &str = "too_many_pending_asks";

/// The reason stored on a proxy ask still pending when its connection or command ended.
const ABANDONED: &str = "connection_or_command_ended";

/// What the decision in flight for one `host:port` came to, for the connections waiting on
/// it: `None` while it is undecided.
type Outcome = Option<Shared>;

#[derive(Debug, Clone)]
enum Shared {
    /// The decision did not ask: every waiting connection decides (and is audited) itself.
    Redo,
    /// The decision asked and the ask was settled: the waiting connections share it.
    Settled(Result<Authorization, String>),
}

/// The asks of one command's connections.
#[derive(Debug, Default)]
struct Asks {
    /// The decision in flight per `host:port` (as asked, lowercased).
    in_flight: HashMap<String, watch::Receiver<Outcome>>,
    /// The ids of this command's approval requests still pending.
    pending: HashSet<String>,
    /// Whether a refusal for too many pending asks was audited already.
    refusal_audited: bool,
}

/// The gate, deciding the proxy's connections.
pub(super) struct GateEgress<'a> {
    pub(super) gate: &'a Gate,
    /// The snapshot the command runs under (a resumed request's is its stored one).
    pub(super) under: &'a Under,
    asks: Mutex<Asks>,
}

impl<'a> GateEgress<'a> {
    pub(super) fn new(gate: &'a Gate, under: &'a Under) -> Self {
        GateEgress {
            gate,
            under,
            asks: Mutex::default(),
        }
    }

    fn asks(&self) -> std::sync::MutexGuard<'_, Asks> {
        self.asks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Decide `authority`, coalescing concurrent decisions of the same `host:port`: one
    /// decision (and at most one ask) at a time; connections that come meanwhile wait on its
    /// outcome and share it when it was an ask.
    async fn decide_coalesced(&self, authority: &str) -> EgressDecision {
        let key = authority.to_ascii_lowercase();
        loop {
            let joined = {
                let mut asks = self.asks();
                match asks.in_flight.get(&key) {
                    Some(rx) => Err(rx.clone()),
                    None => {
                        let (tx, rx) = watch::channel(None);
                        asks.in_flight.insert(key.clone(), rx);
                        Ok(tx)
                    }
                }
            };
            match joined {
                Ok(tx) => {
                    // Whatever happens to this future, the slot is freed and waiters woken.
                    let guard = Slot {
                        egress: self,
                        key: &key,
                        tx,
                    };
                    let (auth, asked) = self.authorize(authority).await;
                    guard.publish(if asked {
                        Shared::Settled(match &auth {
                            Ok(a) => Ok(a.clone()),
                            Err(e) => Err(e.to_string()),
                        })
                    } else {
                        Shared::Redo
                    });
                    return self.gate.finish_egress(self.under, authority, auth).await;
                }
                Err(mut rx) => {
                    let outcome = match rx.wait_for(Option::is_some).await {
                        Ok(v) => v.clone(),
                        // The deciding connection went away undecided: decide anew.
                        Err(_) => None,
                    };
                    match outcome {
                        Some(Shared::Settled(Ok(auth))) => {
                            return self
                                .gate
                                .finish_egress(self.under, authority, Ok(auth))
                                .await;
                        }
                        Some(Shared::Settled(Err(e))) => {
                            return EgressDecision::Refuse(format!(
                                "the gate could not decide: {e}"
                            ));
                        }
                        Some(Shared::Redo) | None => continue,
                    }
                }
            }
        }
    }

    /// Authorize one connection; a deferred one waits for its resolution (unless too many
    /// are pending already). The flag says whether it asked.
    async fn authorize(&self, authority: &str) -> (Result<Authorization, super::GateError>, bool) {
        let inv = ToolInvocation::new(ActionKind::Network, authority).with_tool(PROXY_TOOL);
        let request = match self
            .gate
            .authorize_under(self.under, &inv, &[], false)
            .await
        {
            Ok(Authorization::Deferred { request }) => request,
            other => return (other, false),
        };
        let admitted = {
            let mut asks = self.asks();
            if asks.pending.len() < MAX_PENDING_ASKS {
                asks.pending.insert(request.id.clone());
                Ok(())
            } else {
                Err(!std::mem::replace(&mut asks.refusal_audited, true))
            }
        };
        if let Err(first) = admitted {
            // The request was opened by the check itself: settle it at once, so nobody is
            // asked about it and it does not stay pending.
            let _ = self.gate.store.resolve(
                &request.id,
                StoredResolution::new(ApprovalResolution::Cancelled, TOO_MANY),
            );
            let reason = format!(
                "too many pending approvals: {MAX_PENDING_ASKS} of this command's connections \
                 are waiting on an approval already"
            );
            if first {
                let _ = self.gate.denial(
                    &inv,
                    Action::new(ActionKind::Network, authority),
                    reason.clone(),
                    None,
                    None,
                    "egress_proxy",
                    None,
                );
            }
            return (
                Ok(Authorization::Denied(super::Denial {
                    action: Action::new(ActionKind::Network, authority),
                    reason,
                    verdict: None,
                })),
                false,
            );
        }
        let mut waiting = Waiting {
            egress: self,
            id: &request.id,
            settled: false,
        };
        let auth = self.gate.await_resolution(&request).await;
        waiting.settled = auth.is_ok();
        drop(waiting);
        (auth, true)
    }
}

/// One ask being waited on: when the wait ends, it leaves the pending set; when the wait is
/// abandoned (the connection or the command went away), the request is cancelled in the
/// store as well (the first resolution wins, so a real answer recorded meanwhile stands).
struct Waiting<'e, 'a> {
    egress: &'e GateEgress<'a>,
    id: &'e str,
    /// The wait ended with the request resolved.
    settled: bool,
}

impl Drop for Waiting<'_, '_> {
    fn drop(&mut self) {
        if self.egress.asks().pending.remove(self.id) && !self.settled {
            let _ = self.egress.gate.store.resolve(
                self.id,
                StoredResolution::new(ApprovalResolution::Cancelled, ABANDONED),
            );
        }
    }
}

/// The in-flight slot of one `host:port`: removed, and its waiters woken, when dropped.
struct Slot<'e, 'a> {
    egress: &'e GateEgress<'a>,
    key: &'e str,
    tx: watch::Sender<Outcome>,
}

impl Slot<'_, '_> {
    fn publish(self, shared: Shared) {
        let _ = self.tx.send(Some(shared));
    }
}

impl Drop for Slot<'_, '_> {
    fn drop(&mut self) {
        self.egress.asks().in_flight.remove(self.key);
    }
}

impl Drop for GateEgress<'_> {
    /// The command is over: its proxy asks still pending are cancelled in the store, so they
    /// do not outlive the run (nothing would ever use their answer).
    fn drop(&mut self) {
        let pending: Vec<String> = self.asks().pending.drain().collect();
        for id in pending {
            let _ = self.gate.store.resolve(
                &id,
                StoredResolution::new(ApprovalResolution::Cancelled, ABANDONED),
            );
        }
    }
}

impl std::fmt::Debug for GateEgress<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GateEgress")
            .field("turn_id", &self.gate.turn_id)
            .finish()
    }
}

impl EgressDecider for GateEgress<'_> {
    fn decide<'a>(&'a self, authority: &'a str) -> BoxFuture<'a, EgressDecision> {
        Box::pin(self.decide_coalesced(authority))
    }
}

/// The answers of the one resolution already made.
struct Answered(Vec<IpAddr>);

impl Resolver for Answered {
    fn resolve(&self, _host: &str, _port: u16) -> io::Result<Vec<IpAddr>> {
        Ok(self.0.clone())
    }
}

impl Gate {
    /// Turn one connection's authorization into the proxy's answer: resolve the approved
    /// target once, vet every address.
    async fn finish_egress(
        &self,
        under: &Under,
        authority: &str,
        auth: Result<Authorization, super::GateError>,
    ) -> EgressDecision {
        let inv = ToolInvocation::new(ActionKind::Network, authority).with_tool(PROXY_TOOL);
        let action = match auth {
            Ok(Authorization::Allowed { action, .. }) => action,
            Ok(Authorization::Denied(denial)) => return EgressDecision::Refuse(denial.reason),
            Ok(Authorization::Deferred { request }) => {
                return EgressDecision::Refuse(format!(
                    "approval request {} is still pending",
                    request.id
                ));
            }
            Err(e) => return EgressDecision::Refuse(format!("the gate could not decide: {e}")),
        };
        if action.kind != ActionKind::Network {
            return EgressDecision::Refuse(format!(
                "the approved action is a {}, not a network connection",
                action.kind
            ));
        }
        // Resolve the approved target once (never before it was allowed: a name nobody
        // approved is not even looked up), vet every answer, connect to those only.
        let checker = NetworkPolicyChecker::new(&under.snapshot.network, &under.policy);
        let check = checker.check(&action.target, Some(PROXY_TOOL));
        let ips = match check.target.as_ref() {
            Some(t) => match (t.ip, t.port) {
                (Some(ip), _) => vec![ip],
                (None, Some(port)) => {
                    let host = t.host.clone();
                    tokio::task::spawn_blocking(move || SystemResolver.resolve(&host, port))
                        .await
                        .ok()
                        .and_then(Result::ok)
                        .unwrap_or_default()
                }
                (None, None) => Vec::new(),
            },
            None => Vec::new(),
        };
        let resolution = checker
            .with_resolver(Answered(ips))
            .resolve_and_check(&action.target, Some(PROXY_TOOL));
        if resolution.check.verdict.effect == Effect::Deny || resolution.addrs.is_empty() {
            let reason = describe(&resolution.check.verdict);
            let recorded = self.denial(
                &inv,
                action,
                reason.clone(),
                Some(resolution.check.verdict),
                None,
                "policy",
                None,
            );
            return match recorded {
                Ok(_) => EgressDecision::Refuse(reason),
                Err(e) => EgressDecision::Refuse(format!("{reason}; the audit failed: {e}")),
            };
        }
        EgressDecision::Connect(resolution.addrs)
    }

    /// Wait until a deferred connection's request is resolved in the store (by another
    /// process: `turngate approvals resolve`), then settle it as `resume` does. The command
    /// waits meanwhile; its own timeout still ends it.
    async fn await_resolution(
        &self,
        request: &TurnPermissionApprovalRequest,
    ) -> Result<Authorization, super::GateError> {
        loop {
            let stored = self.store.approval(&request.id)?;
            match stored {
                Some(s) if s.resolution.is_some() => break,
                Some(_) => tokio::time::sleep(POLL).await,
                None => return Err(super::GateError::UnknownRequest(request.id.clone())),
            }
        }
        self.resume(&request.id, Decision::approve())
    }
}
