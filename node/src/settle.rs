//! Promises that never outlive their environment. Every Promise the addon returns is settled
//! here: the work runs on the addon's runtime, and its result goes back to the JavaScript
//! thread through a threadsafe function of its own. When the environment is torn down first
//! (a terminated `worker_threads` Worker, process exit, an Electron reload), an environment
//! cleanup hook cancels the work and abandons the threadsafe function before Node frees it, so
//! nothing is ever settled into a dead environment. It decides nothing; it only delivers.
//!
//! One mutex per Promise holds the threadsafe function. Whoever takes it first owns it: the
//! runtime thread, to queue the result and release it, or the cleanup hook, to abandon it.
//! The loser finds it gone and does nothing. Node runs cleanup hooks in reverse order of
//! registration, and the hook is registered after the threadsafe function (whose own hook
//! frees it), so the hook always runs while the function is still valid.

use std::ffi::{CStr, c_void};
use std::future::Future;
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr;
use std::sync::{Arc, Mutex, MutexGuard};

use napi::bindgen_prelude::{FromNapiValue, PromiseRaw, ToNapiValue};
use napi::sys::ThreadsafeFunctionReleaseMode as Mode;
use napi::{Env, JsError, Status, sys};
use tokio::sync::oneshot;
use turngate_ffi::TurnGateError;

use crate::error::js_error;

/// A threadsafe function handle, to be called and released from the runtime's threads (which
/// Node-API allows from any thread).
pub(crate) struct Tsfn(pub(crate) sys::napi_threadsafe_function);

// SAFETY: Node-API's threadsafe functions exist to be called and released from any thread; the
// handle is only used under its owner's mutex, and never after a cleanup hook abandoned it.
unsafe impl Send for Tsfn {}

impl Tsfn {
    /// Queue `data` to the JavaScript thread; false (and `data` dropped here) when Node refuses.
    ///
    /// # Safety
    /// The function is still valid: not released, and not abandoned by a cleanup hook.
    pub(crate) unsafe fn call<D>(&self, data: D) -> bool {
        let data = Box::into_raw(Box::new(data));
        // SAFETY: per this function's contract; a refused call leaves `data` with us.
        unsafe {
            let status = sys::napi_call_threadsafe_function(
                self.0,
                data.cast(),
                sys::ThreadsafeFunctionCallMode::nonblocking,
            );
            if status != sys::Status::napi_ok {
                drop(Box::from_raw(data));
            }
            status == sys::Status::napi_ok
        }
    }

    /// Release the function (`Mode::abort`: abandon it, its queue dropped).
    ///
    /// # Safety
    /// As [`Tsfn::call`].
    pub(crate) unsafe fn release(self, mode: sys::napi_threadsafe_function_release_mode) {
        // SAFETY: per this function's contract.
        unsafe { sys::napi_release_threadsafe_function(self.0, mode) };
    }
}

/// What the runtime thread and the environment's cleanup hook share for one Promise.
struct Slot {
    /// The way back to the JavaScript thread, until one side takes it.
    tsfn: Option<Tsfn>,
    /// The cleanup hook is registered and holds its reference to this slot.
    hook_armed: bool,
    /// Dropping or firing this cancels the work (the future is dropped on the runtime).
    cancel: Option<oneshot::Sender<()>>,
}

type Shared = Arc<Mutex<Slot>>;

pub(crate) fn lock<S>(shared: &Mutex<S>) -> MutexGuard<'_, S> {
    // Nothing panics while the lock is held; a poisoned lock still guards a consistent slot.
    shared.lock().unwrap_or_else(|p| p.into_inner())
}

/// The Promise's JavaScript-thread half: the threadsafe function's context, freed by its
/// finalizer.
struct Pending<T, V, C> {
    deferred: sys::napi_deferred,
    convert: Option<C>,
    shared: Shared,
    /// The pointer the cleanup hook was registered with (one strong reference to `shared`).
    hook_arg: *const Mutex<Slot>,
    _types: PhantomData<fn(T) -> V>,
}

impl<T, V, C> Pending<T, V, C> {
    /// The Promise is being settled: the cleanup hook is no longer needed.
    fn disarm(&self, env: sys::napi_env) {
        let mut slot = lock(&self.shared);
        if !slot.hook_armed {
            return;
        }
        slot.hook_armed = false;
        drop(slot);
        // SAFETY: on the JavaScript thread of `env`, with the function and argument the hook
        // was registered with; the hook's reference is dropped exactly once (here, or by the
        // hook itself, whichever clears `hook_armed`).
        unsafe {
            sys::napi_remove_env_cleanup_hook(env, Some(teardown), self.hook_arg.cast_mut().cast());
            drop(Arc::from_raw(self.hook_arg));
        }
    }
}

pub(crate) fn failed(status: sys::napi_status, what: &str) -> napi::Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(napi::Error::new(
            Status::from(status),
            format!("turngate: could not {what}"),
        ))
    }
}

/// A threadsafe function over `func` (null: `call_js` alone does the work), its resource named
/// `name`, with an unlimited queue and one thread; `what` is what failed, in its error.
///
/// # Safety
/// On the JavaScript thread of the live `env`, `func` a function of it (or null), `context`
/// what `finalize` and `call_js` expect.
pub(crate) unsafe fn threadsafe_function(
    env: sys::napi_env,
    (func, name, what): (sys::napi_value, &CStr, &str),
    context: *mut c_void,
    finalize: sys::napi_finalize,
    call_js: sys::napi_threadsafe_function_call_js,
) -> napi::Result<sys::napi_threadsafe_function> {
    let (mut js_name, mut tsfn) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: per this function's contract; -1 is `NAPI_AUTO_LENGTH` (up to the NUL).
    unsafe {
        let named = sys::napi_create_string_utf8(env, name.as_ptr(), -1, &mut js_name);
        failed(named, "name a threadsafe function's resource")?;
        let created = sys::napi_create_threadsafe_function(
            env,
            func,
            ptr::null_mut(),
            js_name,
            0,
            1,
            ptr::null_mut(),
            finalize,
            context,
            call_js,
            &mut tsfn,
        );
        failed(created, what)?;
    }
    Ok(tsfn)
}

/// Run `fut` on the addon's runtime and settle a Promise with its converted result (a facade
/// error rejects it with the native error class). If the environment is torn down first, `fut`
/// is dropped (a spawned command is killed, an approval wait is abandoned) and the Promise is
/// never settled.
pub fn promise<'env, T, V, F, C>(
    env: &'env Env,
    fut: F,
    convert: C,
) -> napi::Result<PromiseRaw<'env, V>>
where
    T: Send + 'static,
    V: ToNapiValue,
    F: Future<Output = Result<T, TurnGateError>> + Send + 'static,
    C: FnOnce(&Env, T) -> napi::Result<V> + 'static,
{
    let raw_env = env.raw();
    let mut deferred = ptr::null_mut();
    let mut js_promise = ptr::null_mut();
    // SAFETY: `raw_env` is the live environment of this call, on its JavaScript thread.
    failed(
        unsafe { sys::napi_create_promise(raw_env, &mut deferred, &mut js_promise) },
        "create a Promise",
    )?;

    let (cancel_tx, cancel_rx) = oneshot::channel::<()>();
    let shared: Shared = Arc::new(Mutex::new(Slot {
        tsfn: None,
        hook_armed: false,
        cancel: Some(cancel_tx),
    }));
    let hook_arg = Arc::into_raw(Arc::clone(&shared));
    let pending = Box::into_raw(Box::new(Pending::<T, V, C> {
        deferred,
        convert: Some(convert),
        shared: Arc::clone(&shared),
        hook_arg,
        _types: PhantomData,
    }));
    // SAFETY: as above. On success the threadsafe function owns `pending` (its finalizer frees
    // it); `call_js` and `finalize` are instantiated for the same `Pending` type.
    let created = unsafe {
        threadsafe_function(
            raw_env,
            (
                ptr::null_mut(),
                c"turngate",
                "create the Promise's threadsafe function",
            ),
            pending.cast(),
            Some(finalize::<T, V, C>),
            Some(call_js::<T, V, C>),
        )
    };
    let tsfn = match created {
        Ok(tsfn) => tsfn,
        Err(e) => {
            // SAFETY: the function was not created, so both allocations are still ours alone.
            unsafe {
                drop(Box::from_raw(pending));
                drop(Arc::from_raw(hook_arg));
            }
            return Err(e);
        }
    };
    // SAFETY: as above; registered after the threadsafe function, so it runs before the
    // function's own teardown.
    let hooked = unsafe {
        sys::napi_add_env_cleanup_hook(raw_env, Some(teardown), hook_arg.cast_mut().cast())
    };
    {
        let mut slot = lock(&shared);
        slot.hook_armed = hooked == sys::Status::napi_ok;
        if slot.hook_armed {
            slot.tsfn = Some(Tsfn(tsfn));
        }
    }
    if let Err(e) = failed(hooked, "watch the environment's teardown") {
        // SAFETY: the function was never handed out; aborting it lets Node finalize it (and
        // free `pending`). The hook was not registered, so its reference is ours to drop.
        unsafe {
            Tsfn(tsfn).release(Mode::abort);
            drop(Arc::from_raw(hook_arg));
        }
        return Err(e);
    }

    let for_work = Arc::clone(&shared);
    let work = napi::bindgen_prelude::spawn(async move {
        let result = tokio::select! {
            r = fut => r,
            _ = cancel_rx => return,
        };
        settle(&for_work, result);
    });
    // A panic in the work rejects the Promise instead of leaving it pending forever.
    napi::bindgen_prelude::spawn(async move {
        if let Err(e) = work.await
            && e.is_panic()
        {
            settle::<T>(
                &shared,
                Err(TurnGateError::Run {
                    message: "turngate: the call failed inside the addon (a panic)".to_owned(),
                }),
            );
        }
    });
    // SAFETY: `js_promise` is the Promise just created in `raw_env`.
    unsafe { PromiseRaw::from_napi_value(raw_env, js_promise) }
}

/// On a runtime thread: hand `result` to the JavaScript thread, unless the environment was
/// torn down (then it is dropped here).
fn settle<T: Send + 'static>(shared: &Mutex<Slot>, result: Result<T, TurnGateError>) {
    let mut slot = lock(shared);
    let Some(tsfn) = slot.tsfn.take() else {
        return;
    };
    slot.cancel = None;
    // SAFETY: the function is valid: the cleanup hook (which runs before Node frees it) has not
    // taken it, and cannot while the lock is held.
    unsafe {
        tsfn.call(result);
        tsfn.release(Mode::release);
    }
}

/// On the JavaScript thread: settle the Promise. Node passes a null `env` for results still
/// queued when the environment is torn down: they are only dropped.
unsafe extern "C" fn call_js<T, V, C>(
    env: sys::napi_env,
    _js_callback: sys::napi_value,
    context: *mut c_void,
    data: *mut c_void,
) where
    T: Send + 'static,
    V: ToNapiValue,
    C: FnOnce(&Env, T) -> napi::Result<V> + 'static,
{
    // No panic crosses into Node.
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: `data` is the `Box` that `settle` queued, handed over exactly once.
        let result = (!data.is_null())
            .then(|| unsafe { *Box::from_raw(data.cast::<Result<T, TurnGateError>>()) });
        if env.is_null() || context.is_null() {
            return;
        }
        // SAFETY: `context` is the live `Pending` of this function (freed only by `finalize`,
        // which Node calls after the last `call_js`), used only on this thread.
        let pending = unsafe { &mut *context.cast::<Pending<T, V, C>>() };
        pending.disarm(env);
        let (Some(result), Some(convert)) = (result, pending.convert.take()) else {
            return;
        };
        let js_env = Env::from_raw(env);
        let value = match result {
            // SAFETY: `env` is live on this thread.
            Ok(t) => convert(&js_env, t).and_then(|v| unsafe { V::to_napi_value(env, v) }),
            Err(e) => Err(js_error(&js_env, e)),
        };
        // A failed settle (JavaScript can no longer run while the environment drains) is
        // ignored: nobody is left to see the Promise.
        // SAFETY: `deferred` is settled at most once (`convert` was still here).
        unsafe {
            match value {
                Ok(v) => sys::napi_resolve_deferred(env, pending.deferred, v),
                Err(e) => {
                    let error = JsError::from(e).into_value(env);
                    sys::napi_reject_deferred(env, pending.deferred, error)
                }
            };
        }
    }));
}

/// The threadsafe function is gone: free its `Pending`.
unsafe extern "C" fn finalize<T, V, C>(_env: sys::napi_env, _data: *mut c_void, hint: *mut c_void) {
    if !hint.is_null() {
        let _ = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: `hint` is the `Pending` boxed in `promise`; Node finalizes once.
            drop(unsafe { Box::from_raw(hint.cast::<Pending<T, V, C>>()) });
        }));
    }
}

/// The environment is being torn down: cancel the work and abandon the threadsafe function
/// while it is still valid.
unsafe extern "C" fn teardown(arg: *mut c_void) {
    let _ = catch_unwind(|| {
        // SAFETY: `arg` is the hook's own strong reference (see `Pending::hook_arg`); Node runs
        // a hook once and only if it was not removed, and `disarm` removes it before dropping
        // the reference.
        let shared = unsafe { Arc::from_raw(arg.cast_const().cast::<Mutex<Slot>>()) };
        let mut slot = lock(&shared);
        slot.hook_armed = false;
        if let Some(tsfn) = slot.tsfn.take() {
            // SAFETY: still valid: its own teardown runs after this hook.
            unsafe { tsfn.release(Mode::abort) };
        }
        if let Some(cancel) = slot.cancel.take() {
            let _ = cancel.send(());
        }
    });
}

/// Run the blocking `work` (SQLite, the file system) on the runtime's blocking pool and settle
/// a Promise with its converted result. A panic in `work` rejects with `StoreError`.
pub fn blocking<'env, T, V, W, C>(
    env: &'env Env,
    work: W,
    convert: C,
) -> napi::Result<PromiseRaw<'env, V>>
where
    T: Send + 'static,
    V: ToNapiValue,
    W: FnOnce() -> Result<T, TurnGateError> + Send + 'static,
    C: FnOnce(&Env, T) -> napi::Result<V> + 'static,
{
    let fut = async move {
        tokio::task::spawn_blocking(work).await.unwrap_or_else(|e| {
            Err(TurnGateError::Store {
                message: format!("the store task failed: {e}"),
            })
        })
    };
    promise(env, fut, convert)
}
