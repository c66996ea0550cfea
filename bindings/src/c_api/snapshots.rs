//! The C ABI of snapshots (resolve, intersect, caps, the prompt section, the runtime
//! mapping, the platform probe) and of the client-core reducers and approval scopes.

use std::ffi::c_char;

use super::*;
use crate::{reduce, snapshot};

// ---- snapshots -------------------------------------------------------------------------------

/// `resolve(selection, context, cap)` over JSON text: a `TurnPermissionProfileSelection` (NULL
/// for the default full-access profile), a `ResolveContext` and an optional
/// `TaskAgentSecurityCap` (NULL for none), to a `TurnExecutionSecuritySnapshot`. `*out_json` is
/// owned by the caller.
///
/// # Safety
/// `context` is NUL-terminated; `selection` and `cap` NULL or NUL-terminated; `out_json`
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_snapshot_resolve_json(
    selection: *const c_char,
    context: *const c_char,
    cap: *const c_char,
    out_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        string_result("out_json", out_json, || {
            Ok(Some(snapshot::resolve_json(
                opt_arg("selection", selection)?,
                arg("context", context)?,
                opt_arg("cap", cap)?,
            )?))
        })
    }
}

/// `intersect(snapshot, cap)`: the snapshot narrowed by a `TaskAgentSecurityCap`, as JSON.
/// `*out_json` is owned by the caller.
///
/// # Safety
/// `snapshot` and `cap` are NUL-terminated; `out_json` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_snapshot_intersect_json(
    snapshot: *const c_char,
    cap: *const c_char,
    out_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        json_result(out_json, || {
            let s = snapshot::intersect(json_arg("snapshot", snapshot)?, json_arg("cap", cap)?)?;
            Ok(s)
        })
    }
}

/// `cap_from_parent(snapshot, origin)`: the `TaskAgentSecurityCap` a child of `snapshot`
/// receives; `origin` is `parent_turn` or `task_policy`. `*out_json` is owned by the caller.
///
/// # Safety
/// `snapshot` and `origin` are NUL-terminated; `out_json` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_snapshot_cap_from_parent_json(
    snapshot: *const c_char,
    origin: *const c_char,
    out_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        json_result(out_json, || {
            let snapshot = json_arg("snapshot", snapshot)?;
            Ok(snapshot::cap_from_parent(snapshot, arg("origin", origin)?)?)
        })
    }
}

/// The system-prompt permissions section for a `TurnPermissionProfileSnapshot` (JSON), or
/// `*out_text` NULL when the profile needs none (the default full-access profile). A non-NULL
/// `*out_text` is owned by the caller.
///
/// # Safety
/// `profile` is NUL-terminated; `out_text` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_render_permissions_section(
    profile: *const c_char,
    out_text: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        string_result("out_text", out_text, || {
            Ok(snapshot::render_permissions_section(json_arg(
                "profile", profile,
            )?)?)
        })
    }
}

/// How a CLI runtime (`codex`, `claude`) is driven in a mode, as a `CliRuntimeMapping` (JSON).
/// `*out_json` is owned by the caller.
///
/// # Safety
/// `runtime` and `mode` are NUL-terminated; `out_json` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_map_cli_runtime_json(
    runtime: *const c_char,
    mode: *const c_char,
    out_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        json_result(out_json, || {
            let m = snapshot::map_cli_runtime(arg("runtime", runtime)?, arg("mode", mode)?)?;
            Ok(m)
        })
    }
}

/// The probed `PlatformCapabilities` of this machine (OS, Landlock ABI, seccomp, ...), as JSON:
/// the `platform` of a `ResolveContext`. `*out_json` is owned by the caller.
///
/// # Safety
/// `out_json` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_probe_platform_json(out_json: *mut *mut c_char) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe { json_result(out_json, || Ok(snapshot::probe_platform()?)) }
}

// ---- reducers and scopes ---------------------------------------------------------------------

/// Applies one reducer input (`{"audit_event": ...}` or `{"notification": ...}`) to a
/// `ClientState` (NULL for the empty state), giving the next state as JSON. `*out_json` is
/// owned by the caller.
///
/// # Safety
/// `input` is NUL-terminated; `state` NULL or NUL-terminated; `out_json` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_reduce_json(
    state: *const c_char,
    input: *const c_char,
    out_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        json_result(out_json, || {
            let s = reduce::reduce(opt_json_arg("state", state)?, json_arg("input", input)?)?;
            Ok(s)
        })
    }
}

/// Applies a JSON list of reducer inputs in order from `state` (NULL for the empty state).
/// `*out_json` is owned by the caller.
///
/// # Safety
/// `inputs` is NUL-terminated; `state` NULL or NUL-terminated; `out_json` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_reduce_all_json(
    state: *const c_char,
    inputs: *const c_char,
    out_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        json_result(out_json, || {
            let state = opt_json_arg("state", state)?;
            Ok(reduce::reduce_all(state, json_arg("inputs", inputs)?)?)
        })
    }
}

/// The normalized `ApprovalScope` of an action, as JSON (relative paths joined to `cwd`; `tool`
/// and `cwd` may be NULL). `*out_json` is owned by the caller.
///
/// # Safety
/// `kind`, `target` are NUL-terminated; `tool`, `cwd` NULL or NUL-terminated; `out_json`
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_scope_from_action_json(
    kind: *const c_char,
    target: *const c_char,
    tool: *const c_char,
    cwd: *const c_char,
    out_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        json_result(out_json, || {
            let (kind, target, tool) = action_args(kind, target, tool)?;
            let s = reduce::scope_from_action(kind, target, tool, opt_arg("cwd", cwd)?)?;
            Ok(s)
        })
    }
}

/// The `scope_hash` (lowercase hex SHA-256) of an `ApprovalScope` given as JSON. `*out_hash` is
/// owned by the caller.
///
/// # Safety
/// `scope` is NUL-terminated; `out_hash` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_scope_hash(
    scope: *const c_char,
    out_hash: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        string_result("out_hash", out_hash, || {
            Ok(Some(reduce::scope_hash(json_arg("scope", scope)?)?))
        })
    }
}
