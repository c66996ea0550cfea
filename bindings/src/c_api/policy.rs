//! The C ABI of compiled policies: load, compose, check and explain.

use std::ffi::c_char;

use super::*;
use crate::PolicyHandle;

// ---- policy ----------------------------------------------------------------------------------

/// Parses a policy file's JSON text and compiles it. On success `*out_policy` is a new policy
/// owned by the caller (release with `tg_policy_free`). `origin` (a file name, may be NULL) is
/// quoted in errors, which name the failing field, line and column.
///
/// # Safety
/// `text` and `origin` are NULL or NUL-terminated strings; `out_policy` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_policy_from_json(
    text: *const c_char,
    origin: *const c_char,
    out_policy: *mut *mut TgPolicy,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe { policy_from_text(text, origin, out_policy, PolicyHandle::from_json) }
}

/// Parses a policy file's TOML text and compiles it. Ownership as `tg_policy_from_json`.
///
/// # Safety
/// As `tg_policy_from_json`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_policy_from_toml(
    text: *const c_char,
    origin: *const c_char,
    out_policy: *mut *mut TgPolicy,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe { policy_from_text(text, origin, out_policy, PolicyHandle::from_toml) }
}

/// The compiled policy of a permission mode (`full_access`, `auto_accept_edits`,
/// `supervised`). On success `*out_policy` is owned by the caller.
///
/// # Safety
/// `mode` is a NUL-terminated string; `out_policy` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_policy_from_mode(
    mode: *const c_char,
    out_policy: *mut *mut TgPolicy,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        handle_result(out_policy, || {
            Ok(PolicyHandle::from_mode(arg("mode", mode)?)?)
        })
    }
}

/// The tiered policy (`tiered` in every language): reads allowed, writes and exec ask (`rustc` and the optional
/// `test_binary` allowed), network denied (the optional `provider_host` allowed), secrets
/// denied. Both arguments may be NULL. On success `*out_policy` is owned by the caller.
///
/// # Safety
/// `test_binary` and `provider_host` are NULL or NUL-terminated; `out_policy` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_policy_tiered(
    test_binary: *const c_char,
    provider_host: *const c_char,
    out_policy: *mut *mut TgPolicy,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        handle_result(out_policy, || {
            let test_binary = opt_arg("test_binary", test_binary)?.map(str::to_owned);
            let provider_host = opt_arg("provider_host", provider_host)?.map(str::to_owned);
            Ok(PolicyHandle::tiered(test_binary, provider_host)?)
        })
    }
}

/// `Policy::permissive()`: enforces nothing. On success `*out_policy` is owned by the caller.
///
/// # Safety
/// `out_policy` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_policy_permissive(out_policy: *mut *mut TgPolicy) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe { handle_result(out_policy, || Ok(PolicyHandle::permissive()?)) }
}

/// `merge`: `other` composed as a peer over `policy` (the stricter default wins; an overlay can
/// never re-allow a deny). Both inputs stay owned by the caller; `*out_policy` is a new policy
/// owned by the caller.
///
/// # Safety
/// `policy` and `other` are live policies; `out_policy` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_policy_merge(
    policy: *const TgPolicy,
    other: *const TgPolicy,
    out_policy: *mut *mut TgPolicy,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        handle_result(out_policy, || {
            Ok(handle(policy)?.merge(handle_arg("other", other)?)?)
        })
    }
}

/// `contain`: `cap` added to `policy` as a cap (the result is at least as strict as both). Both
/// inputs stay owned by the caller; `*out_policy` is a new policy owned by the caller.
///
/// # Safety
/// `policy` and `cap` are live policies; `out_policy` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_policy_contain(
    policy: *const TgPolicy,
    cap: *const TgPolicy,
    out_policy: *mut *mut TgPolicy,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        handle_result(out_policy, || {
            Ok(handle(policy)?.contain(handle_arg("cap", cap)?)?)
        })
    }
}

/// Releases a policy. NULL is a no-op.
///
/// # Safety
/// `policy` is NULL or a policy from this library that has not been freed, and no other thread
/// is using it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_policy_free(policy: *mut TgPolicy) {
    // SAFETY: forwarded from the caller.
    unsafe { free_handle(policy) }
}

/// The effect of an action (the hot path): exactly the `effect` of `tg_policy_explain_json`.
/// `kind` is a wire name (`file_read`, `shell_command`, ...), `target` the path, command line,
/// `host:port`, `server/tool` or name; `tool` may be NULL. Writes `*out_effect`.
///
/// # Safety
/// `policy` is a live policy; `kind`, `target` are NUL-terminated, `tool` NULL or
/// NUL-terminated; `out_effect` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_policy_check(
    policy: *const TgPolicy,
    kind: *const c_char,
    target: *const c_char,
    tool: *const c_char,
    out_effect: *mut TgEffect,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        value_result("out_effect", out_effect, TgEffect::Deny, || {
            let p = handle(policy)?;
            let (kind, target, tool) = action_args(kind, target, tool)?;
            Ok(p.check(kind, target, tool)?.into())
        })
    }
}

/// The verdict of an action as JSON: `{"effect", "rule", "layer", "reason"}`, with `rule` the
/// deciding rule's pattern or null (a default decided). `*out_json` is owned by the caller
/// (release with `tg_string_free`).
///
/// # Safety
/// As `tg_policy_check`, with `out_json` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_policy_explain_json(
    policy: *const TgPolicy,
    kind: *const c_char,
    target: *const c_char,
    tool: *const c_char,
    out_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        handle_json(policy, out_json, |p| {
            let (kind, target, tool) = action_args(kind, target, tool)?;
            Ok(p.explain(kind, target, tool)?)
        })
    }
}

/// The policy in the policy-file JSON format. `*out_json` is owned by the caller.
///
/// # Safety
/// `policy` is a live policy; `out_json` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_policy_to_json(
    policy: *const TgPolicy,
    out_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe { string_result("out_json", out_json, || Ok(Some(handle(policy)?.to_json()))) }
}

/// The shared body of `tg_policy_from_json` and `tg_policy_from_toml`: `parse` over the text.
///
/// # Safety
/// As those functions.
unsafe fn policy_from_text(
    text: *const c_char,
    origin: *const c_char,
    out_policy: *mut *mut TgPolicy,
    parse: fn(&str, Option<&str>) -> Result<Arc<PolicyHandle>, TurnGateError>,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        handle_result(out_policy, || {
            Ok(parse(arg("text", text)?, opt_arg("origin", origin)?)?)
        })
    }
}
