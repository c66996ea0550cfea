//! `Approver`: who answers an ask. A JavaScript approver is a function called with the ask
//! (`{request, action, verdict}`) through a threadsafe function; it returns a decision or a
//! Promise of one (`index.js` normalizes `true`/`false`/`'approve'`/... and turns a rejection
//! into a denial carrying its reason). A Promise that never settles leaves the request pending
//! and blocks nothing: the gate awaits it on the runtime, never on the JavaScript thread.
//! Whatever the approver answers, the core re-checks it against the policy.

use std::sync::Arc;

use napi::bindgen_prelude::{Function, Promise, Unknown};
use napi::threadsafe_function::ThreadsafeFunction;
use napi::{Env, Status};
use napi_derive::napi;
use serde_json::Value;
use turngate_ffi::approver::{DecisionRecord, ForeignApprover, ForeignDecisionFuture, rule_record};
use turngate_ffi::{ActionRecord, ApproverHandle, TurnGateError};

use crate::broker::Broker;
use crate::error::OrThrow;
use crate::policy::{Action, Rule};

/// An approver's answer: `approve` (optionally a `modified` action and rules to `remember`,
/// both re-checked), `deny` with a `reason`, or `defer` (persist the request and pause).
#[napi(object)]
#[derive(Debug, Clone)]
pub struct Decision {
    /// `approve` (or `allow`), `deny` or `defer`.
    #[napi(ts_type = "'approve' | 'allow' | 'deny' | 'defer'")]
    pub decision: String,
    /// For a denial: why (the model sees it).
    pub reason: Option<String>,
    /// For an approval: a rewritten action to run instead (re-checked).
    pub modified: Option<Action>,
    /// For an approval: rules to remember for the rest of the run (re-checked).
    pub remember: Option<Vec<Rule>>,
}

impl Decision {
    /// The facade's decision record; a malformed field fails, naming it.
    pub fn to_record(&self) -> Result<DecisionRecord, TurnGateError> {
        let base = turngate_ffi::approver::parse_decision(&self.decision, self.reason.as_deref())?;
        Ok(match base {
            DecisionRecord::Approve { .. } => DecisionRecord::Approve {
                modified: self.modified.clone().map(ActionRecord::from),
                remember: self
                    .remember
                    .iter()
                    .flatten()
                    .map(|r| rule_record(&r.kind, &r.effect, &r.pattern, r.tool.as_deref()))
                    .collect::<Result<_, _>>()?,
            },
            other => other,
        })
    }
}

/// The JavaScript approver: called with the ask, answers a Promise of a [`Decision`]. Weak: it
/// does not keep the process alive by itself.
type JsApproverFn = ThreadsafeFunction<Value, Promise<Decision>, Value, Status, false, true>;

struct JsApprover(Arc<JsApproverFn>);

impl ForeignApprover for JsApprover {
    fn decide(&self, request: Value) -> ForeignDecisionFuture {
        let f = Arc::clone(&self.0);
        Box::pin(async move {
            let answer = f.call_async(request).await.map_err(|e| e.reason.clone())?;
            let decision = answer.await.map_err(|e| e.reason.clone())?;
            decision.to_record().map_err(|e| e.message().to_owned())
        })
    }
}

/// Who answers a gate's asks: a JavaScript function, a built-in, or a broker that waits for
/// `respond` from any client.
#[napi]
#[derive(Debug)]
pub struct Approver {
    pub(crate) handle: ApproverHandle,
}

#[napi]
impl Approver {
    /// A JavaScript approver: `fn(ask)` is called on the main thread with `{request, action,
    /// verdict}` and returns an answer or a Promise of one. A thrown error or a rejection is a
    /// denial carrying its message; a Promise that never settles leaves the request pending
    /// without blocking anything. (`index.js` normalizes the answers before they reach here.)
    #[napi(factory, ts_args_type = "fn: ApproverFunction")]
    pub fn from_function(
        env: Env,
        callback: Function<'static, Unknown<'static>, Unknown<'static>>,
    ) -> napi::Result<Self> {
        let Some(hooks) = crate::error::hooks(&env) else {
            return Err(napi::Error::new(
                Status::GenericFailure,
                "turngate: load the package through its entry point (index.js), not native.js",
            ));
        };
        let wrapped = hooks.wrap_approver.borrow_back(&env)?.call(callback)?;
        let tsfn: JsApproverFn = wrapped
            .build_threadsafe_function()
            .callee_handled::<false>()
            .weak::<true>()
            .build()?;
        Ok(Approver {
            handle: ApproverHandle::foreign(Arc::new(JsApprover(Arc::new(tsfn)))),
        })
    }

    /// Approves every ask (re-checked against the policy).
    #[napi(factory)]
    pub fn approve_all(env: Env) -> napi::Result<Self> {
        Self::builtin(&env, "approve_all")
    }

    /// Denies every ask: the safe default for unattended runs.
    #[napi(factory)]
    pub fn deny_all(env: Env) -> napi::Result<Self> {
        Self::builtin(&env, "deny_all")
    }

    /// Defers every ask: the request is persisted for a later `resume`.
    #[napi(factory)]
    pub fn defer_all(env: Env) -> napi::Result<Self> {
        Self::builtin(&env, "defer_all")
    }

    /// Routes asks to `broker`, where any client answers with `respond`; each request expires
    /// after `timeoutMs` when given.
    #[napi(factory)]
    pub fn broker(broker: &Broker, timeout_ms: Option<u32>) -> Self {
        Approver {
            handle: ApproverHandle::broker(&broker.handle, timeout_ms.map(u64::from)),
        }
    }

    fn builtin(env: &Env, name: &str) -> napi::Result<Self> {
        ApproverHandle::builtin(name)
            .map(|handle| Approver { handle })
            .or_throw(env)
    }
}
