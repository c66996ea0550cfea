//! The gate of one turn for C: an opaque `TgGate` that authorizes tool calls, runs shell
//! commands under the snapshot's sandbox, opens files race-free and resumes deferred requests.
//! The facade's async calls run to completion on an internal runtime while the calling thread
//! blocks; results cross as JSON in the shapes of the Python binding. Every rule is the core
//! gate's; this module only converts and waits.

use std::ffi::{c_char, c_int};
use std::future::Future;
use std::ptr::null_mut;
use std::sync::Arc;

use super::approver::{TgApprover, parse_decision_json};
use super::check::invocation_arg;
use super::store::TgStore;
use super::{
    Failure, TgStatus, arg, c_string, free_handle, guard, handle, handle_json, handle_result,
    json_arg, json_text, opt_arg, out_ptr, string_result,
};
use crate::gate::OpenRecord;
use crate::{GateHandle, TurnGateError};

/// The gate of one turn (opaque). Create with `tg_gate_new`, release with `tg_gate_free`. It
/// may be used from many threads at once.
#[derive(Debug)]
pub struct TgGate {
    pub(super) handle: Arc<GateHandle>,
}

/// Runs a facade call on the facade's blocking runtime; its error becomes a failure.
pub(super) fn run<T>(
    what: &str,
    fut: impl Future<Output = Result<T, TurnGateError>>,
) -> Result<T, Failure> {
    Ok(crate::runtime::block_on(what, fut)?)
}

/// A gate for `turn_id` under a `TurnExecutionSecuritySnapshot` (JSON, from
/// `tg_snapshot_resolve_json`), recording to `store` and asking `approver` on an ask. The gate
/// holds its own references to `store` and `approver`: the caller keeps and releases its own.
/// On success `*out_gate` is owned by the caller (release with `tg_gate_free`).
///
/// # Safety
/// `turn_id` and `snapshot` are NUL-terminated; `store` and `approver` live handles;
/// `out_gate` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_gate_new(
    turn_id: *const c_char,
    snapshot: *const c_char,
    store: *const TgStore,
    approver: *const TgApprover,
    out_gate: *mut *mut TgGate,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        handle_result(out_gate, || {
            let (turn_id, snapshot) = (arg("turn_id", turn_id)?, json_arg("snapshot", snapshot)?);
            let (store, approver) = (handle(store)?, handle(approver)?);
            Ok(GateHandle::new(turn_id, snapshot, store, approver, None)?)
        })
    }
}

/// Releases a gate. NULL is a no-op.
///
/// # Safety
/// `gate` is NULL or a gate from this library that has not been freed, and no other thread is
/// using it (no call on it is still running).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_gate_free(gate: *mut TgGate) {
    // SAFETY: forwarded from the caller.
    unsafe { free_handle(gate) }
}

/// The gate's turn id. `*out_text` is owned by the caller.
///
/// # Safety
/// `gate` is a live gate; `out_text` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_gate_turn_id(
    gate: *const TgGate,
    out_text: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe { string_result("out_text", out_text, || Ok(Some(handle(gate)?.turn_id()))) }
}

/// The gate's `TurnExecutionSecuritySnapshot`, as JSON. `*out_json` is owned by the caller.
///
/// # Safety
/// `gate` is a live gate; `out_json` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_gate_snapshot_json(
    gate: *const TgGate,
    out_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe { handle_json(gate, out_json, |g| Ok(g.snapshot()?)) }
}

/// Evaluates one call with the checker of its kind, recording nothing and asking nobody.
/// `invocation` is `{"kind", "target", "tool"?, "cwd"?}`. Writes `{"verdict", "target"}` (the
/// canonical target judged). `*out_json` is owned by the caller.
///
/// # Safety
/// `gate` is a live gate; `invocation` NUL-terminated; `out_json` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_gate_evaluate_json(
    gate: *const TgGate,
    invocation: *const c_char,
    out_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        handle_json(gate, out_json, |g| {
            Ok(g.evaluate(&invocation_arg("invocation", invocation, None)?)?)
        })
    }
}

/// Decides one call, blocking until decided: evaluates it with the checker of its kind,
/// consults the turn's grants, asks the approver on an ask (a deny never reaches it),
/// re-checks the answer, and records audit rows. `invocation` is `{"kind", "target", "tool"?,
/// "item_id"?, "tool_id"?, "cwd"?}`. Writes one of
/// - `{"outcome": "allowed", "kind", "target", "tool", "verdict", "cached_approval",
///   "remember"}` (the action to run, canonical target; `remember` the re-checked rules);
/// - `{"outcome": "denied", "kind", "target", "tool", "reason", "verdict", "tool_result"}`
///   (`tool_result` the text to hand the model);
/// - `{"outcome": "deferred", "request_id", "kind", "target", "tool", "reason", "request"}`
///   (the request is persisted in the store; decide it later with `tg_gate_resume_json`).
///
/// A refusal is a result, not a failure: the status is `TG_STATUS_OK`. `*out_json` is owned by
/// the caller.
///
/// # Safety
/// `gate` is a live gate; `invocation` NUL-terminated; `out_json` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_gate_authorize_json(
    gate: *const TgGate,
    invocation: *const c_char,
    out_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        handle_json(gate, out_json, |g| {
            let inv = invocation_arg("invocation", invocation, None)?;
            run("tg_gate_authorize_json", g.authorize(&inv))
        })
    }
}

/// Decides a deferred request (possibly persisted by another process) with `decision` (JSON, as
/// a `TgDecideFn` answers: `{"decision": "approve" | "deny" | "defer", ...}`): the stored
/// action, exactly as shown, is re-checked against this gate's policy. Writes an authorization
/// as `tg_gate_authorize_json` does; an unknown or already resolved request fails with
/// `TG_STATUS_APPROVAL`. A NULL `decision` takes the decision already recorded in the store
/// (a person answered through another process; see `tg_store_wait_resolved_json`): an allow
/// is re-checked and spent once, a recorded deny is the denial, a pending request fails with
/// `TG_STATUS_APPROVAL`. `*out_json` is owned by the caller.
///
/// # Safety
/// `gate` is a live gate; `request_id` NUL-terminated, `decision` NULL or NUL-terminated;
/// `out_json` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_gate_resume_json(
    gate: *const TgGate,
    request_id: *const c_char,
    decision: *const c_char,
    out_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        handle_json(gate, out_json, |g| {
            let request_id = arg("request_id", request_id)?;
            let d = opt_arg("decision", decision)?
                .map(parse_decision_json)
                .transpose()?;
            Ok(g.resume_or_recorded(request_id, d.as_ref())?)
        })
    }
}

/// Authorizes a shell command and, when allowed, runs it under the snapshot's sandbox, blocking
/// until it exits. `invocation` is `{"target": command line, "tool"?, "cwd"?, "item_id"?,
/// "tool_id"?, "review"?}` (`"kind"`, if given, must be `shell_command`). Writes
/// - `{"outcome": "ran", "pid", "exit_code", "signal", "timed_out", "duration_ms", "stdout",
///   "stderr", "stdout_truncated", "stderr_truncated", "sandbox", "change_set"}` (`exit_code`
///   null when a signal ended it; the output as text, invalid UTF-8 replaced; `sandbox` the
///   `SandboxReport` of what the kernel enforced, null when none was required; `change_set`
///   null unless reviewed);
/// - or a denial or deferral as `tg_gate_authorize_json` writes (nothing ran).
///
/// With `"review": true` (Linux) the writes are reviewable: the writable roots are overlays,
/// the workspace stays untouched, and `change_set` is `{"id", "status", "summary", "added",
/// "modified", "deleted", "mode_changed", "unsupported"}` (absolute paths), to apply or discard
/// with `tg_store_apply_change_set_json` / `tg_store_discard_change_set_json` on the gate's
/// store. Where that cannot be done (no overlayfs in a user namespace, an unsandboxed mode, a
/// store with no directory) it fails with `TG_STATUS_CHANGES` (code `unavailable`), and where the
/// store's directory is a writable root with `TG_STATUS_RUN`: nothing runs, never unreviewed.
///
/// A snapshot that requires a sandbox this platform cannot provide fails with
/// `TG_STATUS_SANDBOX_UNAVAILABLE`; nothing runs unconfined. `*out_json` is owned by the
/// caller.
///
/// # Safety
/// `gate` is a live gate; `invocation` NUL-terminated; `out_json` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_gate_spawn_json(
    gate: *const TgGate,
    invocation: *const c_char,
    out_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        handle_json(gate, out_json, |g| {
            let inv = invocation_arg("invocation", invocation, Some("shell_command"))?;
            run("tg_gate_spawn_json", g.spawn(&inv))
        })
    }
}

/// Decides a deferred shell command with `decision` (JSON, as for `tg_gate_resume_json`) and,
/// when it is allowed, runs exactly its stored action under the snapshot it was requested under
/// (narrowed by this gate's), blocking until it exits. Writes a spawn result as
/// `tg_gate_spawn_json` does. An `allow_once` approval runs once: a second call fails with
/// `TG_STATUS_APPROVAL` (`already_used`). `*out_json` is owned by the caller.
///
/// # Safety
/// `gate` is a live gate; `request_id` and `decision` NUL-terminated; `out_json` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_gate_resume_spawn_json(
    gate: *const TgGate,
    request_id: *const c_char,
    decision: *const c_char,
    out_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        handle_json(gate, out_json, |g| {
            let request_id = arg("request_id", request_id)?;
            let d = parse_decision_json(arg("decision", decision)?)?;
            run("tg_gate_resume_spawn_json", g.resume_spawn(request_id, &d))
        })
    }
}

/// Runs the stored shell command of an already approved request `request_id` under its stored
/// snapshot and sandbox, blocking until it exits. Writes a spawn result as `tg_gate_spawn_json`
/// does. An unresolved, denied or spent request fails with `TG_STATUS_APPROVAL`: no command
/// line runs without a decision. `*out_json` is owned by the caller.
///
/// # Safety
/// `gate` is a live gate; `request_id` NUL-terminated; `out_json` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_gate_run_approved_json(
    gate: *const TgGate,
    request_id: *const c_char,
    out_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        handle_json(gate, out_json, |g| {
            let request_id = arg("request_id", request_id)?;
            run("tg_gate_run_approved_json", g.run_approved(request_id))
        })
    }
}

/// The file descriptor of an opened file, handed to the caller.
#[cfg(unix)]
fn into_fd(file: std::fs::File) -> Result<c_int, Failure> {
    use std::os::fd::IntoRawFd;
    Ok(file.into_raw_fd())
}

#[cfg(not(unix))]
fn into_fd(file: std::fs::File) -> Result<c_int, Failure> {
    drop(file);
    Err(Failure::new(
        TgStatus::Invalid,
        "race-free opens need a Unix platform".to_owned(),
    ))
}

/// The shared body of `tg_gate_open_read` and `tg_gate_open_write`.
///
/// # Safety
/// As those functions.
unsafe fn open(
    write: bool,
    gate: *const TgGate,
    invocation: *const c_char,
    out_fd: *mut c_int,
    out_denial_json: *mut *mut c_char,
) -> TgStatus {
    guard(|| {
        // SAFETY: forwarded from the caller.
        unsafe {
            // Both outs are cleared before either is refused, so a NULL one leaves no stale
            // value in the other.
            let fd_slot = out_ptr("out_fd", out_fd, -1);
            let denial_slot = out_ptr("out_denial_json", out_denial_json, null_mut());
            let (fd_slot, denial_slot) = (fd_slot?, denial_slot?);
            let g = handle(gate)?;
            let kind = if write { "file_write" } else { "file_read" };
            let inv = invocation_arg("invocation", invocation, Some(kind))?;
            let opened = if write {
                run("tg_gate_open_write", g.open_write(&inv))?
            } else {
                run("tg_gate_open_read", g.open_read(&inv))?
            };
            match opened {
                OpenRecord::Opened(file) => *fd_slot = into_fd(file)?,
                OpenRecord::Denied(d) => *denial_slot = c_string("denial", json_text(&*d)?)?,
            }
        }
        Ok(())
    })
}

/// Authorizes a read of `invocation`'s target (`{"target": path, "tool"?, "item_id"?,
/// "tool_id"?}`; `"kind"`, if given, must be `file_read`) and opens it race-free beneath its
/// root (`openat2` with `RESOLVE_BENEATH` on Linux), blocking until decided. When opened,
/// `*out_fd` is a read-only descriptor owned by the caller (release with `close`) and
/// `*out_denial_json` stays NULL. When refused (by the policy, the approver, a deferral or the
/// race-free open), `*out_fd` is -1 and `*out_denial_json` the `Denial`
/// record (`{"kind", "target", "tool", "reason", "verdict", "tool_result"}`), owned by the caller; the status is still
/// `TG_STATUS_OK`.
///
/// # Safety
/// `gate` is a live gate; `invocation` NUL-terminated; `out_fd` and `out_denial_json` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_gate_open_read(
    gate: *const TgGate,
    invocation: *const c_char,
    out_fd: *mut c_int,
    out_denial_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe { open(false, gate, invocation, out_fd, out_denial_json) }
}

/// `tg_gate_open_read` for a write: authorizes a write of the target (`"kind"`, if given, must
/// be `file_write`) and opens it race-free, created or truncated; `*out_fd` is a write-only
/// descriptor owned by the caller (release with `close`).
///
/// # Safety
/// As `tg_gate_open_read`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_gate_open_write(
    gate: *const TgGate,
    invocation: *const c_char,
    out_fd: *mut c_int,
    out_denial_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe { open(true, gate, invocation, out_fd, out_denial_json) }
}

/// Checks a URL (or `host[:port]`) against the turn's network policy and resolves it, vetting
/// every address; `tool` may be NULL. Writes `{"verdict", "host", "port", "host_port",
/// "scheme", "address_class", "addrs"}`: connect only to `addrs` (`ip:port`, empty unless
/// allowed or asked). Blocks on DNS; records nothing. `*out_json` is owned by the caller.
///
/// # Safety
/// `gate` is a live gate; `url` NUL-terminated; `tool` NULL or NUL-terminated; `out_json`
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_gate_resolve_and_check_json(
    gate: *const TgGate,
    url: *const c_char,
    tool: *const c_char,
    out_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        handle_json(gate, out_json, |g| {
            Ok(g.resolve_and_check(arg("url", url)?, opt_arg("tool", tool)?))
        })
    }
}

/// Grants `scope_hash` (from `tg_scope_hash`) for the rest of the turn: a later ask with that
/// scope is allowed without asking (`cached_approval`), still re-checked against the policy.
///
/// # Safety
/// `gate` is a live gate; `scope_hash` NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_gate_grant_for_turn(
    gate: *const TgGate,
    scope_hash: *const c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        guard(|| {
            let g = handle(gate)?;
            g.grant_for_turn(arg("scope_hash", scope_hash)?);
            Ok(())
        })
    }
}
