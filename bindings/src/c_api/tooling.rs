//! The policy tooling for C: `lint`, `explain` in a turn, and `replay` (of events, or of a
//! store), over JSON text and a `TgPolicy`. Results are JSON in the core's shapes. Every rule is
//! the core's; this module only converts.

use std::ffi::c_char;

use serde_json::json;

use super::store::TgStore;
use super::{TgPolicy, TgStatus, action_args, handle, handle_json, json_arg, opt_json_arg};

/// The lint findings of `policy` (`turngate lint`): a JSON array of `{"code", "severity",
/// "path", "layer", "rule", "by"?, "message"}`, in rule order. `*out_json` is owned by the
/// caller (release with `tg_string_free`).
///
/// # Safety
/// `policy` is a live policy; `out_json` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_policy_lint_json(
    policy: *const TgPolicy,
    out_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe { handle_json(policy, out_json, |p| Ok(p.lint()?)) }
}

/// The full verdict of an action in a turn, as JSON `{"effect", "rule", "layer", "reason",
/// "condition"?, "would"?}` (`rule` the deciding rule object or null). `history_json` is the
/// turn's earlier allowed actions, a JSON array of `{"kind", "target", "tool"?,
/// "seconds_ago"?}`, oldest first (NULL: none). `*out_json` is owned by the caller.
///
/// # Safety
/// `policy` is a live policy; `kind` and `target` NUL-terminated; `tool` and `history_json`
/// NULL or NUL-terminated; `out_json` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_policy_explain_in_turn_json(
    policy: *const TgPolicy,
    kind: *const c_char,
    target: *const c_char,
    tool: *const c_char,
    history_json: *const c_char,
    out_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        handle_json(policy, out_json, |p| {
            let (kind, target, tool) = action_args(kind, target, tool)?;
            let history = opt_json_arg("history_json", history_json)?.unwrap_or(json!([]));
            Ok(p.explain_in_turn(kind, target, tool, history)?)
        })
    }
}

/// Replay recorded audit events (`events_json`, a JSON array of `TurnPermissionAuditEvent`)
/// with `policy` as the candidate: the JSON `{"decisions", "flips": [...]}` of the decisions
/// that flip. `options_json` is `{"turn"?, "since"?, "workspace"?}` or NULL. `*out_json` is
/// owned by the caller.
///
/// # Safety
/// `policy` is a live policy; `events_json` NUL-terminated; `options_json` NULL or
/// NUL-terminated; `out_json` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_policy_replay_events_json(
    policy: *const TgPolicy,
    events_json: *const c_char,
    options_json: *const c_char,
    out_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        handle_json(policy, out_json, |p| {
            let events = json_arg("events_json", events_json)?;
            let options = opt_json_arg("options_json", options_json)?.unwrap_or_default();
            Ok(p.replay_events(events, options)?)
        })
    }
}

/// Re-decide every decision recorded in `store` under `policy` as a candidate (`turngate
/// replay`): the JSON `{"decisions", "flips": [...]}`. `options_json` is `{"turn"?, "since"?,
/// "workspace"?}` or NULL. `*out_json` is owned by the caller.
///
/// # Safety
/// `store` and `policy` are live; `options_json` NULL or NUL-terminated; `out_json` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_store_replay_policy_json(
    store: *const TgStore,
    policy: *const TgPolicy,
    options_json: *const c_char,
    out_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        handle_json(store, out_json, |s| {
            let p = handle(policy)?;
            let options = opt_json_arg("options_json", options_json)?.unwrap_or_default();
            Ok(s.replay_policy(p, options)?)
        })
    }
}
