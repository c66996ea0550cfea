//! `Approver`: who answers an ask. A JavaScript approver is a function called with the ask
//! (`{request, action, verdict}`) through a threadsafe function; it returns a decision or a
//! Promise of one (`index.js` normalizes `true`/`false`/`'approve'`/... and turns a rejection
//! into a denial carrying its reason). A Promise that never settles leaves the request pending
//! and blocks nothing: the gate awaits it on the runtime, never on the JavaScript thread.
//! Whatever the approver answers, the core re-checks it against the policy.

use std::ffi::c_void;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr;
use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::{FromNapiValue, Function, JsValue, Promise, ToNapiValue, Unknown};
use napi::sys::ThreadsafeFunctionReleaseMode as Mode;
use napi::{Env, Status, sys};
use napi_derive::napi;
use serde_json::Value;
use tokio::sync::oneshot;
use turngate_ffi::ApproverHandle;
use turngate_ffi::approver::{ForeignApprover, ForeignDecisionFuture, decision_from_value};

use crate::broker::Broker;
use crate::error::OrThrow;
use crate::settle::{Tsfn, failed, lock, threadsafe_function};

/// The JavaScript approver: the wrapped function behind a weak threadsafe function of its own
/// (it does not keep the process alive by itself). napi-rs's `ThreadsafeFunction` is not used:
/// when a worker is terminated during an approver call, its callback asserts on a status that
/// termination makes fail, and the process aborts. Here a failed call is an error for this ask
/// only, and the environment's cleanup hook abandons the function before Node frees it.
struct JsApprover {
    shared: Arc<Mutex<ApproverSlot>>,
}

struct ApproverSlot {
    /// The way to the JavaScript thread, until the approver is dropped or its environment ends.
    tsfn: Option<Tsfn>,
}

/// One ask on its way to the JavaScript thread, and where its answer goes.
struct ApproverCall {
    ask: Value,
    reply: oneshot::Sender<Result<Promise<Value>, String>>,
}

const GONE: &str = "the approver's JavaScript environment is gone";

impl JsApprover {
    /// On the JavaScript thread of `env`: a threadsafe function over `wrapped`.
    fn new(env: &Env, wrapped: &Function<'static, Value, Promise<Value>>) -> napi::Result<Self> {
        let raw_env = env.raw();
        let what = "create the approver's threadsafe function";
        let func = (wrapped.raw(), c"turngate approver", what);
        // SAFETY: `raw_env` is the live environment of this call, on its JavaScript thread;
        // `wrapped` is a function value of it, and `call_approver` needs no context.
        let tsfn = unsafe {
            threadsafe_function(raw_env, func, ptr::null_mut(), None, Some(call_approver))
        }?;
        let shared = Arc::new(Mutex::new(ApproverSlot {
            tsfn: Some(Tsfn(tsfn)),
        }));
        let hook_arg = Arc::into_raw(Arc::clone(&shared));
        // SAFETY: as above. Weak: the function does not hold the event loop open. The hook is
        // registered after the function, so Node runs it before the function's own teardown;
        // it keeps one strong reference to the slot until it runs.
        let status = unsafe {
            sys::napi_unref_threadsafe_function(raw_env, tsfn);
            sys::napi_add_env_cleanup_hook(
                raw_env,
                Some(approver_teardown),
                hook_arg.cast_mut().cast(),
            )
        };
        if let Err(e) = failed(status, "watch the environment's teardown") {
            // SAFETY: the hook was not registered: its reference is ours to drop. Dropping the
            // approver releases the function.
            unsafe { drop(Arc::from_raw(hook_arg)) };
            return Err(e);
        }
        Ok(JsApprover { shared })
    }
}

impl Drop for JsApprover {
    fn drop(&mut self) {
        if let Some(tsfn) = lock(&self.shared).tsfn.take() {
            // SAFETY: still valid (the cleanup hook did not take it); released from any thread.
            unsafe { tsfn.release(Mode::release) };
        }
    }
}

impl ForeignApprover for JsApprover {
    fn decide(&self, ask: Value) -> ForeignDecisionFuture {
        let (reply, answer) = oneshot::channel();
        let queued = match &lock(&self.shared).tsfn {
            // SAFETY: the function is valid while the lock is held (the cleanup hook takes it
            // under the same lock).
            Some(tsfn) => unsafe { tsfn.call(ApproverCall { ask, reply }) },
            None => false,
        };
        Box::pin(async move {
            if !queued {
                return Err(GONE.to_owned());
            }
            let promise = answer.await.map_err(|_| GONE.to_owned())??;
            let decision = promise.await.map_err(|e| e.reason.clone())?;
            decision_from_value("decision", decision).map_err(|e| e.message().to_owned())
        })
    }
}

/// On the JavaScript thread: call the approver with the ask and hand back the Promise it
/// returns. A null `env` (the environment is being torn down) or a failed call (a terminated
/// worker) drops the ask, which fails it; no panic crosses into Node.
unsafe extern "C" fn call_approver(
    env: sys::napi_env,
    js_callback: sys::napi_value,
    _context: *mut c_void,
    data: *mut c_void,
) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if data.is_null() {
            return;
        }
        // SAFETY: `data` is the `Box` that `decide` queued, handed over exactly once.
        let call = unsafe { *Box::from_raw(data.cast::<ApproverCall>()) };
        if env.is_null() || js_callback.is_null() {
            return;
        }
        // SAFETY: `env` is live on this thread and `js_callback` is the approver function.
        let answer = unsafe { invoke(env, js_callback, call.ask) };
        let _ = call.reply.send(answer);
    }));
}

/// # Safety
/// On the JavaScript thread of the live `env`, with `js_callback` a function of it.
unsafe fn invoke(
    env: sys::napi_env,
    js_callback: sys::napi_value,
    ask: Value,
) -> Result<Promise<Value>, String> {
    // SAFETY: per this function's contract.
    unsafe {
        let arg = Value::to_napi_value(env, ask).map_err(|e| e.reason.clone())?;
        let mut this = ptr::null_mut();
        sys::napi_get_undefined(env, &mut this);
        let mut returned = ptr::null_mut();
        let status = sys::napi_call_function(env, this, js_callback, 1, &arg, &mut returned);
        if status != sys::Status::napi_ok {
            // A terminated worker: clear what can be cleared and fail this ask.
            let mut exception = ptr::null_mut();
            sys::napi_get_and_clear_last_exception(env, &mut exception);
            return Err(format!(
                "the approver could not be called ({})",
                Status::from(status)
            ));
        }
        Promise::<Value>::from_napi_value(env, returned).map_err(|e| e.reason.clone())
    }
}

/// The environment is being torn down: abandon the approver's function while it is valid.
unsafe extern "C" fn approver_teardown(arg: *mut c_void) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: `arg` is the hook's own strong reference, and Node runs a hook once.
        let shared = unsafe { Arc::from_raw(arg.cast_const().cast::<Mutex<ApproverSlot>>()) };
        if let Some(tsfn) = lock(&shared).tsfn.take() {
            // SAFETY: still valid: its own teardown runs after this hook.
            unsafe { tsfn.release(Mode::abort) };
        }
    }));
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
        let Some(hooks) = crate::hooks::hooks(&env) else {
            return Err(napi::Error::new(
                Status::GenericFailure,
                "turngate: load the package through its entry point (index.js), not native.js",
            ));
        };
        let wrapped = hooks.wrap_approver.borrow_back(&env)?.call(callback)?;
        let approver = JsApprover::new(&env, &wrapped)?;
        Ok(Approver {
            handle: ApproverHandle::foreign(Arc::new(approver)),
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
