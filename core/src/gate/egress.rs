//! The gate as the egress proxy's decider (DESIGN §13): every connection a `network =
//! restricted` command makes through the proxy is one action of kind `network`, tool
//! `sandbox-proxy`, decided, asked and audited like any other; then its name is resolved once
//! and every address vetted, and the proxy connects to those addresses only.

use std::io;
use std::net::IpAddr;
use std::time::Duration;

use super::{Authorization, Gate, ToolInvocation, Under, describe};
use crate::action::{ActionKind, Effect};
use crate::approval::{Decision, TurnPermissionApprovalRequest};
use crate::check::net::{NetworkPolicyChecker, Resolver, SystemResolver};
use crate::sandbox::egress::{BoxFuture, EgressDecider, EgressDecision};

/// The tool name the proxy's actions carry.
pub const PROXY_TOOL: &str = "sandbox-proxy";

/// How often a deferred connection looks for its resolution in the store.
const POLL: Duration = Duration::from_millis(100);

/// The gate, deciding the proxy's connections.
pub(super) struct GateEgress<'a> {
    pub(super) gate: &'a Gate,
    /// The snapshot the command runs under (a resumed request's is its stored one).
    pub(super) under: &'a Under,
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
        Box::pin(self.gate.decide_egress(self.under, authority))
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
    async fn decide_egress(&self, under: &Under, authority: &str) -> EgressDecision {
        let inv = ToolInvocation::new(ActionKind::Network, authority).with_tool(PROXY_TOOL);
        let auth = match self.authorize_under(under, &inv).await {
            Ok(Authorization::Deferred { request }) => self.await_resolution(&request).await,
            other => other,
        };
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
