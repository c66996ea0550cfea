//! The durable audit and approval store for C: an opaque `TgStore` over a SQLite file, whose
//! events and approvals cross as JSON in their protocol shape. Each call blocks until the store
//! answers. Resolving here only records a resolution; a gate's `tg_gate_resume_json` decides.

use std::ffi::c_char;
use std::sync::Arc;

use serde_json::Value;

use super::gate::run;
use super::{
    TgStatus, arg, free_handle, handle, handle_json, handle_result, json_arg, json_result,
    json_text, opt_arg, opt_json_arg, string_result, value_result,
};
use crate::{ApplyOptionsRecord, StoreHandle, changes};

/// An open audit store (opaque), shared by gates. Open with `tg_store_open`, release with
/// `tg_store_free`; a gate made from it keeps its own reference.
#[derive(Debug)]
pub struct TgStore {
    pub(super) handle: Arc<StoreHandle>,
}

/// Opens (creating if needed) the SQLite store at `path`. On success `*out_store` is a new
/// store owned by the caller (release with `tg_store_free`).
///
/// # Safety
/// `path` is NUL-terminated; `out_store` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_store_open(
    path: *const c_char,
    out_store: *mut *mut TgStore,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe { handle_result(out_store, || Ok(StoreHandle::open(arg("path", path)?)?)) }
}

/// `tg_store_open` with a durability level: `durability` is `"process"` (the default, also
/// for NULL: every recorded event survives a kill of the process) or `"power"` (an fsync per
/// group commit: it also survives a power loss); another name fails with `TG_STATUS_INVALID`
/// naming it.
///
/// # Safety
/// `path` is NUL-terminated, `durability` NULL or NUL-terminated; `out_store` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_store_open_durable(
    path: *const c_char,
    durability: *const c_char,
    out_store: *mut *mut TgStore,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        handle_result(out_store, || {
            let durability = opt_arg("durability", durability)?;
            Ok(StoreHandle::open_durable(arg("path", path)?, durability)?)
        })
    }
}

/// Opens a store in memory, for tests: the file store's semantics, nothing kept after the
/// last reference is released. `*out_store` is owned by the caller.
///
/// # Safety
/// `out_store` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_store_memory(out_store: *mut *mut TgStore) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe { handle_result(out_store, || Ok(StoreHandle::memory()?)) }
}

/// Blocks until the stored approval `request_id` is resolved (through this store at once, by
/// another process within 100 ms) or `timeout_ms` passes (negative: no limit), and writes the
/// approval as JSON (`{"request", "action", "resolution"?}`: resolved, or still pending after
/// the timeout). An unknown id fails with `TG_STATUS_APPROVAL`. Not from an approver callback.
/// `*out_json` is owned by the caller.
///
/// # Safety
/// `store` is a live store; `request_id` NUL-terminated; `out_json` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_store_wait_resolved_json(
    store: *const TgStore,
    request_id: *const c_char,
    timeout_ms: i64,
    out_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        handle_json(store, out_json, |s| {
            let id = arg("request_id", request_id)?;
            let timeout = u64::try_from(timeout_ms).ok();
            run("tg_store_wait_resolved_json", s.wait_resolved(id, timeout))
        })
    }
}

/// Releases a store. NULL is a no-op. Gates made from it keep working (they hold their own
/// reference); the file closes when the last one is released.
///
/// # Safety
/// `store` is NULL or a store from this library that has not been freed, and no other thread
/// is using it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_store_free(store: *mut TgStore) {
    // SAFETY: forwarded from the caller.
    unsafe { free_handle(store) }
}

/// The store's file path. `*out_path` is owned by the caller.
///
/// # Safety
/// `store` is a live store; `out_path` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_store_path(
    store: *const TgStore,
    out_path: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe { string_result("out_path", out_path, || Ok(Some(handle(store)?.path()))) }
}

/// Appends a `TurnPermissionAuditEvent` (JSON) and writes its assigned sequence number to
/// `*out_seq`.
///
/// # Safety
/// `store` is a live store; `event` NUL-terminated; `out_seq` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_store_append_json(
    store: *const TgStore,
    event: *const c_char,
    out_seq: *mut u64,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        value_result("out_seq", out_seq, 0, || {
            Ok(handle(store)?.append(json_arg("event", event)?)?)
        })
    }
}

/// The events of `turn_id` in sequence order: a JSON array of `TurnPermissionAuditEvent`
/// (each with `kind`: `profile_selected`, `decision_allowed`, `decision_denied`,
/// `approval_requested`, `approval_resolved`). `*out_json` is owned by the caller.
///
/// # Safety
/// `store` is a live store; `turn_id` NUL-terminated; `out_json` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_store_replay_json(
    store: *const TgStore,
    turn_id: *const c_char,
    out_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe { handle_json(store, out_json, |s| Ok(s.replay(arg("turn_id", turn_id)?)?)) }
}

/// Every turn id with events, oldest first, as a JSON array of strings. `*out_json` is owned
/// by the caller.
///
/// # Safety
/// `store` is a live store; `out_json` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_store_turns_json(
    store: *const TgStore,
    out_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe { handle_json(store, out_json, |s| Ok(s.turns()?)) }
}

/// Every stored approval without a resolution, oldest first: a JSON array of
/// `{"request", "action"}` (the `TurnPermissionApprovalRequest` and the action it would run).
/// `*out_json` is owned by the caller.
///
/// # Safety
/// `store` is a live store; `out_json` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_store_pending_approvals_json(
    store: *const TgStore,
    out_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe { handle_json(store, out_json, |s| Ok(s.pending_approvals()?)) }
}

/// The stored approval `request_id` as `{"request", "action", "resolution"?}`, or `*out_json`
/// NULL when there is none. A non-NULL `*out_json` is owned by the caller.
///
/// # Safety
/// `store` is a live store; `request_id` NUL-terminated; `out_json` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_store_approval_json(
    store: *const TgStore,
    request_id: *const c_char,
    out_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        string_result("out_json", out_json, || {
            let approval = handle(store)?.approval(arg("request_id", request_id)?)?;
            approval.map(|a| json_text(&a)).transpose()
        })
    }
}

/// Records `resolution` (`allow_once`, `allow_for_turn`, `deny`, `cancelled`, `expired`) for a
/// stored approval, with `reason` (NULL for `"responder"`); the first resolution wins. Writes
/// `{"resolution", "reason", "applied"}`: the resolution now recorded (this call's or an
/// earlier one), and whether this call recorded it. This only records: `tg_gate_resume_json`
/// re-checks the action against the policy and decides it. `*out_json` is owned by the caller.
///
/// # Safety
/// `store` is a live store; `request_id`, `resolution` NUL-terminated; `reason` NULL or
/// NUL-terminated; `out_json` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_store_resolve_json(
    store: *const TgStore,
    request_id: *const c_char,
    resolution: *const c_char,
    reason: *const c_char,
    out_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        handle_json(store, out_json, |s| {
            let (id, resolution) = (
                arg("request_id", request_id)?,
                arg("resolution", resolution)?,
            );
            Ok(s.resolve(
                id,
                resolution,
                opt_arg("reason", reason)?.unwrap_or("responder"),
            )?)
        })
    }
}

// ---- change sets (reviewable writes) ---------------------------------------------------------

/// Every change set a reviewed spawn (`"review": true` in `tg_gate_spawn_json`) recorded
/// beside this store, oldest first: a JSON array of `ChangeSet` (`{"id", "turn_id",
/// "command", "status", "roots", "changes": [{"root", "path", "kind", "entry", "diff"?, ...}],
/// ...}`, `schemas/ChangeSet.schema.json`). `*out_json` is owned by the caller.
///
/// # Safety
/// `store` is a live store; `out_json` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_store_change_sets_json(
    store: *const TgStore,
    out_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe { handle_json(store, out_json, |s| Ok(s.change_sets()?)) }
}

/// The change set `id` as `ChangeSet` JSON (a unified diff per text file). An id that is not a
/// change set id (`../x`) fails with `TG_STATUS_CHANGES` and code `bad_id`, an unknown one with
/// `not_found` (`tg_last_error_code()`). `*out_json` is owned by the caller.
///
/// # Safety
/// `store` is a live store; `id` NUL-terminated; `out_json` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_store_change_set_json(
    store: *const TgStore,
    id: *const c_char,
    out_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe { handle_json(store, out_json, |s| Ok(s.change_set(arg("id", id)?)?)) }
}

/// Applies change set `id` to the workspace, all or nothing. `options` is NULL or JSON
/// `{"confirm_asks"?: bool, "by"?: string}` (unknown fields are refused). Writes the applied
/// `ChangeSet`. A refusal fails with `TG_STATUS_CHANGES`: `tg_last_error_code()` says why
/// (`conflicts`, `policy_refused`, `tampered`, `not_pending`, `busy`, `unsupported`, ...) and
/// `tg_last_error_paths_json()` names the paths; nothing in the workspace changed.
/// `*out_json` is owned by the caller.
///
/// # Safety
/// `store` is a live store; `id` NUL-terminated; `options` NULL or NUL-terminated; `out_json`
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_store_apply_change_set_json(
    store: *const TgStore,
    id: *const c_char,
    options: *const c_char,
    out_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        handle_json(store, out_json, |s| {
            let options: ApplyOptionsRecord = match opt_json_arg("options", options)? {
                None | Some(Value::Null) => ApplyOptionsRecord::default(),
                Some(v) => crate::convert::from_value("options", v)?,
            };
            Ok(s.apply_change_set(arg("id", id)?, &options)?)
        })
    }
}

/// Discards change set `id`: its writes are dropped (the workspace was never touched); `by`
/// (NULL for none) is who discards it. Writes the discarded `ChangeSet`; a set already applied
/// or discarded fails with `TG_STATUS_CHANGES` (`not_pending`). `*out_json` is owned by the
/// caller.
///
/// # Safety
/// `store` is a live store; `id` NUL-terminated; `by` NULL or NUL-terminated; `out_json`
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_store_discard_change_set_json(
    store: *const TgStore,
    id: *const c_char,
    by: *const c_char,
    out_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        handle_json(store, out_json, |s| {
            Ok(s.discard_change_set(arg("id", id)?, opt_arg("by", by)?)?)
        })
    }
}

/// Checks `change_set` (JSON) against the `ChangeSet` type and writes it back as turngate
/// writes it; an unknown field, kind or status fails with `TG_STATUS_INVALID`, naming it.
/// `*out_json` is owned by the caller.
///
/// # Safety
/// `change_set` NUL-terminated; `out_json` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_change_set_parse_json(
    change_set: *const c_char,
    out_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        json_result(out_json, || {
            Ok(changes::parse(json_arg("change_set", change_set)?)?)
        })
    }
}
