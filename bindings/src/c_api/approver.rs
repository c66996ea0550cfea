//! Approvers for C: a built-in (`approve_all`, `deny_all`, `defer_all`), or a C function called
//! with each ask as JSON that answers a decision as JSON. An answer that is not a decision (a
//! failure status, no answer, text that does not parse) is a denial carrying the reason: the
//! bridge fails closed. Whatever the callback answers, the core re-checks it against the
//! policy; this module only converts.

use std::ffi::{CStr, CString, c_char, c_void};
use std::sync::Arc;

use super::{TgStatus, arg, free_handle, handle_result, null_argument};
use crate::TurnGateError;
use crate::approver::{
    ApproverHandle, DecisionRecord, ForeignApprover, ForeignDecisionFuture, decision_from_value,
};

/// Who answers a gate's asks (opaque). Create with `tg_approver_builtin` or
/// `tg_approver_from_callback`, release with `tg_approver_free`; a gate made with it keeps its
/// own reference.
#[derive(Debug)]
pub struct TgApprover {
    pub(super) handle: ApproverHandle,
}

/// An approver callback. Called with `user_data`, the ask as JSON text (`{"request", "action",
/// "verdict"}`: the `TurnPermissionApprovalRequest` exactly as shown, the action that would
/// run, the ask verdict; borrowed for the call), and `out_decision_json`, which is NULL on
/// entry.
///
/// Answer by storing a decision in `*out_decision_json` and returning 0 (`TG_STATUS_OK`):
/// `{"decision": "approve"}` (also `"allow"`; optionally `"modified": {"kind", "target",
/// "tool"?}` to run instead and `"remember": [{"kind", "effect", "pattern", "tool"?}]`, both
/// re-checked), `{"decision": "deny", "reason": "..."}` or `{"decision": "defer"}` (the request
/// is persisted for `tg_gate_resume_json`).
///
/// Ownership: `*out_decision_json`, when set, must be allocated with `malloc` (`strdup`,
/// `asprintf`, ...); turngate copies it and releases it with `free`, whatever the status. A
/// non-zero return is a failure: the gate records a denial whose reason carries the returned
/// value and the text in `*out_decision_json`, if any. No answer, or an answer that does not
/// parse as a decision, is likewise a denial with the reason.
///
/// Threads: the callback runs on a turngate worker thread, not the thread that called the
/// gate, and may run on several threads at once; it may block (a prompt) for as long as the
/// decision takes, and the gate call waits. It must not unwind (no C++ exception or `longjmp`
/// out of it) and must not call the blocking `tg_gate_*` functions (they refuse there).
pub type TgDecideFn = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        ask_json: *const c_char,
        out_decision_json: *mut *mut c_char,
    ) -> i32,
>;

/// Releases an approver callback's `user_data`; called once, when the last approver and gate
/// holding it are released.
pub type TgFreeFn = Option<unsafe extern "C" fn(user_data: *mut c_void)>;

unsafe extern "C" {
    /// The C library's `free`, for the callback's `malloc`ed answer.
    fn free(ptr: *mut c_void);
}

/// Parses a decision: `{"decision": "approve" | "allow" | "deny" | "defer", "reason"?,
/// "modified"?, "remember"?}` (the facade's [`decision_from_value`]). A malformed one fails,
/// naming the bad field.
pub(super) fn parse_decision_json(text: &str) -> Result<DecisionRecord, TurnGateError> {
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| TurnGateError::invalid("decision", format!("not a decision object: {e}")))?;
    decision_from_value("decision", value)
}

/// The callback's `user_data`, sent to the worker threads that call it.
#[derive(Debug, Clone, Copy)]
struct UserData(*mut c_void);

// SAFETY: `tg_approver_from_callback` requires `user_data` to be usable from any thread, at once
// from several (documented on it and on `TgDecideFn`).
unsafe impl Send for UserData {}
// SAFETY: as for `Send`.
unsafe impl Sync for UserData {}

/// A C approver callback with its `user_data`, released with `free_user_data` on drop.
struct Callback {
    decide: unsafe extern "C" fn(*mut c_void, *const c_char, *mut *mut c_char) -> i32,
    user_data: UserData,
    free_user_data: TgFreeFn,
}

impl Drop for Callback {
    fn drop(&mut self) {
        if let Some(free_user_data) = self.free_user_data {
            // SAFETY: `tg_approver_from_callback` requires `free_user_data` to accept
            // `user_data`; this runs once, when the last holder is released.
            unsafe { free_user_data(self.user_data.0) };
        }
    }
}

impl Callback {
    /// Calls the callback (blocking) and parses its answer; a failure is the denial's text.
    fn decide_blocking(&self, ask: &serde_json::Value) -> Result<DecisionRecord, String> {
        let ask = CString::new(ask.to_string())
            .map_err(|e| format!("the ask could not be passed to C: {e}"))?;
        let mut out: *mut c_char = std::ptr::null_mut();
        // SAFETY: `tg_approver_from_callback` requires `decide` to be callable with this
        // `user_data` from any thread; `ask` outlives the call; `out` is a valid slot.
        let code = unsafe { (self.decide)(self.user_data.0, ask.as_ptr(), &mut out) };
        let answer = if out.is_null() {
            None
        } else {
            // SAFETY: the callback stored a NUL-terminated string from `malloc` (documented on
            // `TgDecideFn`); it is copied, then freed once.
            let text = unsafe { CStr::from_ptr(out) }
                .to_str()
                .map(str::to_owned)
                .map_err(|e| format!("the callback's answer is not valid UTF-8: {e}"));
            // SAFETY: as above; nothing reads `out` after this.
            unsafe { free(out.cast()) };
            Some(text)
        };
        if code != 0 {
            let text = match answer {
                Some(Ok(t)) => format!(": {t}"),
                _ => String::new(),
            };
            return Err(format!("the callback returned status {code}{text}"));
        }
        match answer {
            None => {
                Err("the callback returned no decision (out_decision_json was NULL)".to_owned())
            }
            Some(Err(e)) => Err(e),
            Some(Ok(text)) => parse_decision_json(&text)
                .map_err(|e| format!("the callback's answer is malformed ({})", e.message())),
        }
    }
}

/// The facade's foreign approver over a C callback: each ask is decided on the runtime's
/// blocking pool, so a callback that waits for a person blocks no runtime worker.
struct CallbackApprover(Arc<Callback>);

impl ForeignApprover for CallbackApprover {
    fn decide(&self, request: serde_json::Value) -> ForeignDecisionFuture {
        let callback = Arc::clone(&self.0);
        Box::pin(async move {
            tokio::task::spawn_blocking(move || callback.decide_blocking(&request))
                .await
                .map_err(|e| format!("the approver callback's thread failed: {e}"))?
        })
    }
}

/// A built-in approver: `approve_all` (every ask approved, then re-checked), `deny_all` (the
/// safe default for unattended runs) or `defer_all` (every ask persisted for
/// `tg_gate_resume_json`). On success `*out_approver` is owned by the caller (release with
/// `tg_approver_free`).
///
/// # Safety
/// `name` is NUL-terminated; `out_approver` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_approver_builtin(
    name: *const c_char,
    out_approver: *mut *mut TgApprover,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        handle_result(out_approver, || {
            Ok(ApproverHandle::builtin(arg("name", name)?)?)
        })
    }
}

/// An approver that calls `decide` (see `TgDecideFn` for the answer, its ownership and the
/// threads it runs on) with `user_data` for each ask. `user_data` may be NULL; it must be
/// usable from any thread, from several at once. `free_user_data` (may be NULL) is called with
/// `user_data` exactly once, when this approver and every gate made with it are released. On
/// failure nothing is taken: `free_user_data` is not called. On success `*out_approver` is
/// owned by the caller (release with `tg_approver_free`).
///
/// # Safety
/// `decide` and `free_user_data` are NULL or functions with these signatures that stay
/// callable until `free_user_data` has run; `out_approver` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_approver_from_callback(
    decide: TgDecideFn,
    user_data: *mut c_void,
    free_user_data: TgFreeFn,
    out_approver: *mut *mut TgApprover,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        handle_result(out_approver, || {
            let decide = decide.ok_or_else(|| null_argument("decide"))?;
            let callback = Callback {
                decide,
                user_data: UserData(user_data),
                free_user_data,
            };
            let approver = CallbackApprover(Arc::new(callback));
            Ok(ApproverHandle::foreign(Arc::new(approver)))
        })
    }
}

/// Releases an approver. NULL is a no-op. Gates made with it keep working (they hold their
/// own reference).
///
/// # Safety
/// `approver` is NULL or an approver from this library that has not been freed, and no other
/// thread is using it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_approver_free(approver: *mut TgApprover) {
    // SAFETY: forwarded from the caller.
    unsafe { free_handle(approver) }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_decision_parses_with_its_modified_action_and_rules() {
        let d = parse_decision_json(
            r#"{"decision": "approve", "modified": {"kind": "file_write", "target": "b"},
                "remember": [{"kind": "file_write", "effect": "allow", "pattern": "src/**"}]}"#,
        )
        .unwrap();
        let DecisionRecord::Approve { modified, remember } = d else {
            panic!("expected an approval, got {d:?}");
        };
        assert_eq!(modified.unwrap().target, "b");
        assert_eq!(remember[0].pattern, "src/**");
        assert_eq!(
            parse_decision_json(r#"{"decision": "deny"}"#).unwrap(),
            DecisionRecord::Deny {
                reason: "denied by the approver".to_owned()
            }
        );
    }

    #[test]
    fn a_malformed_decision_names_what_is_wrong() {
        for (text, named) in [
            (r#"{"decision": "approve", "remeber": []}"#, "remeber"),
            (r#"{"decision": "later"}"#, "later"),
            (
                r#"{"decision": "approve", "remember": [{"kind": "file_write", "effect": "maybe", "pattern": "x"}]}"#,
                "remember[0]",
            ),
            ("approve", "not a decision object"),
        ] {
            let e = parse_decision_json(text).unwrap_err();
            assert!(e.message().contains(named), "{text}: {}", e.message());
        }
    }
}
