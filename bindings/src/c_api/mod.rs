//! The C ABI: `extern "C"` entry points over the facade, for C and everything that speaks C.
//! The header `bindings/include/turngate.h` is generated from this module by cbindgen and checked
//! in; `tests/c_header.rs` fails when it is stale.
//!
//! Conventions, for every function:
//! - A fallible function returns a [`TgStatus`]; `TG_STATUS_OK` (0) is success. On failure,
//!   `tg_last_error_message()` describes the failure on the calling thread, naming the bad
//!   argument, until the next `tg_` call on that thread.
//! - Results are written through `out_*` pointers, which must not be NULL. Each `out_*` is set
//!   (to NULL for a pointer) before any work, so a failed call never leaves a stale value.
//! - Input strings are NUL-terminated UTF-8, borrowed for the duration of the call only.
//!   Optional inputs may be NULL.
//! - A `char *` result is owned by the caller and released with `tg_string_free`; each opaque
//!   handle (`TgPolicy`, `TgStore`, `TgApprover`, `TgGate`) is released with its `_free`
//!   function, and a file descriptor from `tg_gate_open_*` with `close`. Nothing else is ever
//!   to be freed.
//! - Handles may be used from many threads at once. A handle given to another (a store and an
//!   approver to `tg_gate_new`) is shared, not taken: the caller may release its own at once.
//! - Protocol objects cross as JSON text, in the shapes of the Python binding's dicts and
//!   records (snake_case field names).
//! - Calls that run the gate (`tg_gate_authorize_json`, `_spawn_json`, `_run_approved_json`,
//!   `_open_read`, `_open_write`) block the calling thread until decided, running on an
//!   internal runtime; they refuse (`TG_STATUS_INVALID`) on a thread that already runs one (an
//!   approver callback, an async Rust host).
//! - No panic crosses the boundary: each entry point runs inside `catch_unwind` and reports a
//!   panic as `TG_STATUS_PANIC`.
//!
//! This module converts C types and calls the facade; it decides nothing. The `tg_json_*`
//! functions are plain JSON access (so a C program can read vector files without a JSON
//! library), not policy behaviour. Its modules: [`check`] (the checkers), [`store`] (the audit
//! store), [`approver`] (built-in and C-callback approvers), [`gate`] (the gate of one turn).

pub mod approver;
pub mod check;
pub mod gate;
pub mod policy;
pub mod snapshots;
pub mod store;
pub mod tooling;

use std::cell::RefCell;
use std::ffi::{CStr, CString, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr::null_mut;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::{Effect, PolicyHandle, TurnGateError};

/// The outcome of a fallible call. Non-zero values are failures; the message is in
/// `tg_last_error_message()`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TgStatus {
    /// Success.
    Ok = 0,
    /// A policy did not parse or compile, or named an unknown kind, effect or mode.
    Policy = 1,
    /// A snapshot could not be resolved, or refuses what was asked of it.
    Snapshot = 2,
    /// The durable store failed.
    Store = 3,
    /// A sandbox backend is required but unavailable on this platform.
    SandboxUnavailable = 4,
    /// An argument was malformed (not the expected JSON, an unknown name, an index out of range).
    Invalid = 5,
    /// A required pointer argument was NULL.
    NullArgument = 6,
    /// A string argument was not valid UTF-8, or a result held an interior NUL.
    Utf8 = 7,
    /// A panic was caught at the boundary (a bug in turngate; please report it).
    Panic = 8,
    /// An approval operation was refused: an unknown or already resolved request, a decision
    /// the request does not offer, a deferral with nowhere to persist it.
    Approval = 9,
    /// A command could not be run (spawn or I/O failed, or the sandbox could not be applied in
    /// the child). Nothing ran unconfined.
    Run = 10,
    /// A change set operation was refused or failed (reviewable writes): nothing in the
    /// workspace changed. `tg_last_error_code()` is the reason (`conflicts`,
    /// `policy_refused`, `tampered`, `not_pending`, `not_found`, `bad_id`, `unavailable`,
    /// ...) and `tg_last_error_paths_json()` the paths it names.
    Changes = 11,
}

/// The effect of an action. The order of strictness is deny > ask > allow.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TgEffect {
    /// The action may proceed.
    Allow = 0,
    /// The action needs a person's approval.
    Ask = 1,
    /// The action is refused.
    Deny = 2,
}

impl From<Effect> for TgEffect {
    fn from(e: Effect) -> Self {
        match e {
            Effect::Allow => TgEffect::Allow,
            Effect::Ask => TgEffect::Ask,
            Effect::Deny => TgEffect::Deny,
        }
    }
}

/// A compiled policy (opaque). Create with `tg_policy_from_*`, release with `tg_policy_free`.
#[derive(Debug)]
pub struct TgPolicy {
    handle: Arc<PolicyHandle>,
}

/// A failure on its way to C: a status, the message `tg_last_error_message` returns, and the
/// machine-readable code and paths of `tg_last_error_code` and `tg_last_error_paths_json`.
struct Failure {
    status: TgStatus,
    message: String,
    code: String,
    paths: Vec<String>,
}

impl From<TurnGateError> for Failure {
    fn from(e: TurnGateError) -> Self {
        let status = match &e {
            TurnGateError::Policy { .. } => TgStatus::Policy,
            TurnGateError::Snapshot { .. } => TgStatus::Snapshot,
            TurnGateError::Store { .. } => TgStatus::Store,
            TurnGateError::SandboxUnavailable { .. } => TgStatus::SandboxUnavailable,
            TurnGateError::Approval { .. } => TgStatus::Approval,
            TurnGateError::Run { .. } => TgStatus::Run,
            TurnGateError::Changes { .. } => TgStatus::Changes,
            _ => TgStatus::Invalid,
        };
        Failure {
            status,
            message: e.message().to_owned(),
            code: e.code().unwrap_or_default().to_owned(),
            paths: e.paths().to_vec(),
        }
    }
}

impl Failure {
    fn new(status: TgStatus, message: String) -> Self {
        Failure {
            status,
            message,
            code: String::new(),
            paths: Vec::new(),
        }
    }
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
    static LAST_CODE: RefCell<CString> = RefCell::new(CString::default());
    static LAST_PATHS: RefCell<CString> = RefCell::new(c"[]".to_owned());
}

/// `text` as a C string; a text with an interior NUL keeps the part before it.
fn c_text(text: &str) -> CString {
    let bytes: Vec<u8> = text.bytes().take_while(|b| *b != 0).collect();
    CString::new(bytes).unwrap_or_default()
}

fn set_last_error(message: &str) {
    LAST_ERROR.with(|e| *e.borrow_mut() = c_text(message));
}

/// Records the last failure's code and paths (an empty code and `[]` after a success).
fn set_last_detail(code: &str, paths: &[String]) {
    LAST_CODE.with(|c| *c.borrow_mut() = c_text(code));
    let json = Value::from(paths.to_vec()).to_string();
    LAST_PATHS.with(|p| *p.borrow_mut() = c_text(&json));
}

/// The panic boundary every fallible entry point runs in: clears the thread's last error, runs
/// `f`, and turns an error or a panic into a status with the message recorded.
fn guard(f: impl FnOnce() -> Result<(), Failure>) -> TgStatus {
    set_last_error("");
    set_last_detail("", &[]);
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => TgStatus::Ok,
        Ok(Err(failure)) => {
            set_last_error(&failure.message);
            set_last_detail(&failure.code, &failure.paths);
            failure.status
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_owned());
            set_last_error(&format!(
                "internal error (panic caught at the C boundary): {what}"
            ));
            TgStatus::Panic
        }
    }
}

/// A handle type's C names: `ARG`, its argument's when a call acts on one (`gate`), and `OUT`,
/// the out pointer of the calls that make one (`out_gate`).
trait CHandle {
    const ARG: &'static str;
    const OUT: &'static str;
}

/// The handle types' plumbing: each wraps one facade handle, derefs to it, is made from it (so
/// [`handle_result`] boxes whatever the facade returns) and has its C names.
macro_rules! c_handle {
    ($($handle:ty => $inner:ty, $arg:literal),* $(,)?) => {$(
        impl std::ops::Deref for $handle {
            type Target = $inner;
            fn deref(&self) -> &$inner {
                &self.handle
            }
        }
        impl From<$inner> for $handle {
            fn from(handle: $inner) -> Self {
                Self { handle }
            }
        }
        impl CHandle for $handle {
            const ARG: &'static str = $arg;
            const OUT: &'static str = concat!("out_", $arg);
        }
    )*};
}
c_handle!(
    TgPolicy => Arc<PolicyHandle>, "policy",
    store::TgStore => Arc<crate::StoreHandle>, "store",
    approver::TgApprover => crate::approver::ApproverHandle, "approver",
    gate::TgGate => Arc<crate::GateHandle>, "gate",
);

/// A required string argument.
///
/// # Safety
/// `ptr` is NULL or a NUL-terminated string valid for `'a`.
unsafe fn arg<'a>(name: &str, ptr: *const c_char) -> Result<&'a str, Failure> {
    if ptr.is_null() {
        return Err(null_argument(name));
    }
    // SAFETY: the caller guarantees a NUL-terminated string that outlives the call.
    let s = unsafe { CStr::from_ptr(ptr) };
    s.to_str().map_err(|e| {
        Failure::new(
            TgStatus::Utf8,
            format!("argument `{name}` is not valid UTF-8: {e}"),
        )
    })
}

fn null_argument(name: &str) -> Failure {
    Failure::new(TgStatus::NullArgument, format!("argument `{name}` is NULL"))
}

/// An optional string argument (NULL is none).
///
/// # Safety
/// As [`arg`].
unsafe fn opt_arg<'a>(name: &str, ptr: *const c_char) -> Result<Option<&'a str>, Failure> {
    // SAFETY: forwarded from the caller.
    (!ptr.is_null())
        .then(|| unsafe { arg(name, ptr) })
        .transpose()
}

/// A required JSON text argument, parsed.
///
/// # Safety
/// As [`arg`].
unsafe fn json_arg(name: &str, ptr: *const c_char) -> Result<Value, Failure> {
    // SAFETY: forwarded from the caller.
    let text = unsafe { arg(name, ptr) }?;
    serde_json::from_str(text)
        .map_err(|e| Failure::new(TgStatus::Invalid, format!("{name}: not valid JSON: {e}")))
}

/// An optional JSON text argument (NULL is none).
///
/// # Safety
/// As [`arg`].
unsafe fn opt_json_arg(name: &str, ptr: *const c_char) -> Result<Option<Value>, Failure> {
    // SAFETY: forwarded from the caller.
    (!ptr.is_null())
        .then(|| unsafe { json_arg(name, ptr) })
        .transpose()
}

/// A JSON text argument deserialized as `T` (a request record); an error is `name: ` then `what`
/// (empty, or what was expected ending in `: `) then serde's reason.
///
/// # Safety
/// As [`arg`].
unsafe fn record_arg<T: DeserializeOwned>(
    name: &str,
    what: &str,
    ptr: *const c_char,
) -> Result<T, Failure> {
    // SAFETY: forwarded from the caller.
    serde_json::from_value(unsafe { json_arg(name, ptr) }?)
        .map_err(|e| Failure::new(TgStatus::Invalid, format!("{name}: {what}{e}")))
}

/// The `(kind, target, tool)` of an action given as three strings (`tool` may be NULL).
///
/// # Safety
/// As [`arg`], for each.
unsafe fn action_args<'a>(
    kind: *const c_char,
    target: *const c_char,
    tool: *const c_char,
) -> Result<(&'a str, &'a str, Option<&'a str>), Failure> {
    // SAFETY: forwarded from the caller.
    unsafe {
        Ok((
            arg("kind", kind)?,
            arg("target", target)?,
            opt_arg("tool", tool)?,
        ))
    }
}

/// A borrowed handle argument (a policy, store, approver or gate).
///
/// # Safety
/// `ptr` is NULL or a live handle of type `T` from this library.
unsafe fn handle_arg<'a, T>(name: &str, ptr: *const T) -> Result<&'a T, Failure> {
    // SAFETY: the caller guarantees a live handle or NULL.
    unsafe { ptr.as_ref() }.ok_or_else(|| null_argument(name))
}

/// A borrowed handle argument named as its type's [`CHandle::ARG`] (`gate`, `store`, ...).
///
/// # Safety
/// As [`handle_arg`].
unsafe fn handle<'a, H: CHandle>(ptr: *const H) -> Result<&'a H, Failure> {
    // SAFETY: forwarded from the caller.
    unsafe { handle_arg(H::ARG, ptr) }
}

/// Checks an out pointer and clears what it points to, so that a failure leaves no stale value.
///
/// # Safety
/// `out` is NULL or valid for a write of `T`.
unsafe fn out_ptr<'a, T>(name: &str, out: *mut T, empty: T) -> Result<&'a mut T, Failure> {
    // SAFETY: the caller guarantees `out` is NULL or writable.
    let slot = unsafe { out.as_mut() }.ok_or_else(|| null_argument(name))?;
    *slot = empty;
    Ok(slot)
}

/// The shape of every fallible entry point: in the panic boundary, clears `*out` (named `name`
/// in errors) to `empty`, runs `f` and writes its result to `*out`.
///
/// # Safety
/// `out` is NULL or valid for a write of `T`.
unsafe fn value_result<T>(
    name: &str,
    out: *mut T,
    empty: T,
    f: impl FnOnce() -> Result<T, Failure>,
) -> TgStatus {
    guard(|| {
        // SAFETY: forwarded from the caller.
        let slot = unsafe { out_ptr(name, out, empty) }?;
        *slot = f()?;
        Ok(())
    })
}

/// An owned C string for `s`, to be released with `tg_string_free`.
fn c_string(what: &str, s: String) -> Result<*mut c_char, Failure> {
    CString::new(s)
        .map(CString::into_raw)
        .map_err(|e| Failure::new(TgStatus::Utf8, format!("{what} holds a NUL byte: {e}")))
}

/// Runs `f` and writes its string result (or NULL for none) to `out` (named `name` in errors).
///
/// # Safety
/// `out` is NULL or valid for a write of a pointer.
unsafe fn string_result(
    name: &str,
    out: *mut *mut c_char,
    f: impl FnOnce() -> Result<Option<String>, Failure>,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        value_result(name, out, null_mut(), || {
            f()?.map_or(Ok(null_mut()), |s| c_string("result", s))
        })
    }
}

/// Runs `f` and writes the handle made from its result, boxed, to `out` (named `out_policy`,
/// `out_store`, ... in errors, as [`CHandle::OUT`]).
///
/// # Safety
/// `out` is NULL or valid for a write of a pointer.
unsafe fn handle_result<T: From<I> + CHandle, I>(
    out: *mut *mut T,
    f: impl FnOnce() -> Result<I, Failure>,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        value_result(T::OUT, out, null_mut(), || {
            Ok(Box::into_raw(Box::new(f()?.into())))
        })
    }
}

/// Releases a handle made by [`handle_result`]. NULL is a no-op.
///
/// # Safety
/// `ptr` is NULL or a handle of type `T` from this library that has not been freed, and no
/// other thread is using it.
unsafe fn free_handle<T>(ptr: *mut T) {
    if !ptr.is_null() {
        // SAFETY: `ptr` came from `Box::into_raw` in this library and is freed once.
        let _ = catch_unwind(AssertUnwindSafe(|| drop(unsafe { Box::from_raw(ptr) })));
    }
}

/// Runs `f` and writes its result as JSON text to `out_json`: a JSON value as it is, a facade
/// record in its serde form (the one shape every language sees).
///
/// # Safety
/// `out_json` is NULL or valid for a write of a pointer.
unsafe fn json_result<T: Serialize>(
    out_json: *mut *mut c_char,
    f: impl FnOnce() -> Result<T, Failure>,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe { string_result("out_json", out_json, || Ok(Some(json_text(&f()?)?))) }
}

/// [`json_result`] of a call on a handle: borrows the handle at `ptr` (as [`handle`]) before
/// any other argument is read, then runs `f` on it.
///
/// # Safety
/// `ptr` is NULL or a live handle of type `H` from this library; `out_json` as for
/// [`json_result`].
unsafe fn handle_json<H: CHandle, T: Serialize>(
    ptr: *const H,
    out_json: *mut *mut c_char,
    f: impl FnOnce(&H) -> Result<T, Failure>,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe { json_result(out_json, || f(handle(ptr)?)) }
}

/// `value` as JSON text.
fn json_text<T: Serialize>(value: &T) -> Result<String, Failure> {
    serde_json::to_string(value)
        .map_err(|e| Failure::new(TgStatus::Invalid, format!("result: not serializable: {e}")))
}

// ---- library ---------------------------------------------------------------------------------

/// The version of turngate, as a static string. Never free it.
#[unsafe(no_mangle)]
pub extern "C" fn tg_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// The message of the last failed `tg_` call on this thread, or "" when the last call
/// succeeded. The string is borrowed: it stays valid until the next `tg_` call on this thread.
/// Never free it.
#[unsafe(no_mangle)]
pub extern "C" fn tg_last_error_message() -> *const c_char {
    catch_unwind(|| LAST_ERROR.with(|e| e.borrow().as_ptr())).unwrap_or(c"".as_ptr())
}

/// The machine-readable code of the last failed `tg_` call on this thread: for
/// `TG_STATUS_CHANGES` the change set refusal (`conflicts`, `policy_refused`, `tampered`,
/// `not_pending`, `busy`, `not_found`, `bad_id`, `unsupported`, `unavailable`, `io`, ...), for
/// `TG_STATUS_SNAPSHOT` the snapshot error's code; "" otherwise. Borrowed like
/// `tg_last_error_message()`: valid until the next `tg_` call on this thread. Never free it.
#[unsafe(no_mangle)]
pub extern "C" fn tg_last_error_code() -> *const c_char {
    catch_unwind(|| LAST_CODE.with(|c| c.borrow().as_ptr())).unwrap_or(c"".as_ptr())
}

/// The paths the last failed `tg_` call on this thread names, as a JSON array of strings
/// (absolute paths: a change set's conflicting, refused or tampered paths); `[]` when it names
/// none. Borrowed like `tg_last_error_message()`. Never free it.
#[unsafe(no_mangle)]
pub extern "C" fn tg_last_error_paths_json() -> *const c_char {
    catch_unwind(|| LAST_PATHS.with(|p| p.borrow().as_ptr())).unwrap_or(c"[]".as_ptr())
}

/// Releases a string returned by a `tg_` function. NULL is a no-op.
///
/// # Safety
/// `s` is NULL or a string returned by this library that has not been freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_string_free(s: *mut c_char) {
    if !s.is_null() {
        // SAFETY: `s` came from `CString::into_raw` in this library and is freed once.
        let _ = catch_unwind(AssertUnwindSafe(|| drop(unsafe { CString::from_raw(s) })));
    }
}

/// The wire name of an effect (`allow`, `ask`, `deny`), as a static string. Never free it.
#[unsafe(no_mangle)]
pub extern "C" fn tg_effect_name(effect: TgEffect) -> *const c_char {
    match effect {
        TgEffect::Allow => c"allow".as_ptr(),
        TgEffect::Ask => c"ask".as_ptr(),
        TgEffect::Deny => c"deny".as_ptr(),
    }
}

// ---- plain JSON access -----------------------------------------------------------------------

/// The number of elements of the JSON array `json`. Fails (`TG_STATUS_INVALID`) when `json` is
/// not an array.
///
/// # Safety
/// `json` is NUL-terminated; `out_len` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_json_array_len(json: *const c_char, out_len: *mut usize) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        value_result("out_len", out_len, 0, || {
            Ok(array(json_arg("json", json)?)?.len())
        })
    }
}

/// Element `index` of the JSON array `json`, as JSON text. `*out_json` is owned by the caller.
///
/// # Safety
/// `json` is NUL-terminated; `out_json` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_json_array_get(
    json: *const c_char,
    index: usize,
    out_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        json_result(out_json, || {
            let mut items = array(json_arg("json", json)?)?;
            let len = items.len();
            (index < len)
                .then(|| items.swap_remove(index))
                .ok_or_else(|| {
                    let message = format!("index {index} is out of range for an array of {len}");
                    Failure::new(TgStatus::Invalid, message)
                })
        })
    }
}

/// Member `key` of the JSON object `json`, as JSON text, or `*out_json` NULL when the object
/// has no such member. A non-NULL `*out_json` is owned by the caller.
///
/// # Safety
/// `json` and `key` are NUL-terminated; `out_json` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_json_get(
    json: *const c_char,
    key: *const c_char,
    out_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        string_result("out_json", out_json, || {
            let key = arg("key", key)?;
            member(json_arg("json", json)?, key)?
                .map(|v| json_text(&v))
                .transpose()
        })
    }
}

/// Member `key` of the JSON object `json` when it is a string, unquoted; `*out_text` NULL when
/// the member is missing or null. Fails (`TG_STATUS_INVALID`) for any other type. A non-NULL
/// `*out_text` is owned by the caller.
///
/// # Safety
/// `json` and `key` are NUL-terminated; `out_text` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_json_get_string(
    json: *const c_char,
    key: *const c_char,
    out_text: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        string_result("out_text", out_text, || {
            let key = arg("key", key)?;
            match member(json_arg("json", json)?, key)? {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s)),
                Some(other) => Err(not_a(key, "a string", &other)),
            }
        })
    }
}

/// Whether the JSON texts `a` and `b` denote equal values (object member order does not
/// matter; numbers compare by value). Writes 1 or 0 to `*out_equal`.
///
/// # Safety
/// `a` and `b` are NUL-terminated; `out_equal` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_json_equal(
    a: *const c_char,
    b: *const c_char,
    out_equal: *mut i32,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        value_result("out_equal", out_equal, 0, || {
            Ok(i32::from(json_arg("a", a)? == json_arg("b", b)?))
        })
    }
}

fn array(json: Value) -> Result<Vec<Value>, Failure> {
    match json {
        Value::Array(items) => Ok(items),
        other => Err(not_a("json", "an array", &other)),
    }
}

fn member(json: Value, key: &str) -> Result<Option<Value>, Failure> {
    match json {
        Value::Object(mut map) => Ok(map.remove(key)),
        other => Err(not_a("json", "an object", &other)),
    }
}

fn not_a(what: &str, expected: &str, got: &Value) -> Failure {
    let kind = match got {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    Failure::new(
        TgStatus::Invalid,
        format!("{what}: expected {expected}, got {kind}"),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn last_error() -> String {
        // SAFETY: the pointer is valid until the next tg_ call on this thread.
        unsafe { CStr::from_ptr(tg_last_error_message()) }
            .to_str()
            .unwrap()
            .to_owned()
    }

    #[test]
    fn a_panic_is_a_status_with_a_message() {
        let status = guard(|| panic!("boom"));
        assert_eq!(status, TgStatus::Panic);
        assert!(last_error().contains("boom"), "{}", last_error());
        assert_eq!(guard(|| Ok(())), TgStatus::Ok);
        assert_eq!(last_error(), "");
    }
}
