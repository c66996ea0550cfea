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
    unsafe {
        policy_result(out_policy, || {
            Ok(PolicyHandle::from_json(
                arg("text", text)?,
                opt_arg("origin", origin)?,
            )?)
        })
    }
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
    unsafe {
        policy_result(out_policy, || {
            Ok(PolicyHandle::from_toml(
                arg("text", text)?,
                opt_arg("origin", origin)?,
            )?)
        })
    }
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
        policy_result(out_policy, || {
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
        policy_result(out_policy, || {
            Ok(PolicyHandle::tiered(
                opt_arg("test_binary", test_binary)?.map(str::to_owned),
                opt_arg("provider_host", provider_host)?.map(str::to_owned),
            )?)
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
    unsafe { policy_result(out_policy, || Ok(PolicyHandle::permissive()?)) }
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
        policy_result(out_policy, || {
            let p = policy_arg("policy", policy)?;
            let o = policy_arg("other", other)?;
            Ok(p.handle.merge(&o.handle)?)
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
        policy_result(out_policy, || {
            let p = policy_arg("policy", policy)?;
            let c = policy_arg("cap", cap)?;
            Ok(p.handle.contain(&c.handle)?)
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
    guard(|| {
        // SAFETY: forwarded from the caller.
        unsafe {
            let slot = out_ptr("out_effect", out_effect, TgEffect::Deny)?;
            let p = policy_arg("policy", policy)?;
            let effect = p.handle.check(
                arg("kind", kind)?,
                arg("target", target)?,
                opt_arg("tool", tool)?,
            )?;
            *slot = effect.into();
        }
        Ok(())
    })
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
        string_result(out_json, || {
            let p = policy_arg("policy", policy)?;
            let v = p.handle.explain(
                arg("kind", kind)?,
                arg("target", target)?,
                opt_arg("tool", tool)?,
            )?;
            Ok(Some(record_json("verdict", &v)?.to_string()))
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
    unsafe {
        string_result(out_json, || {
            Ok(Some(policy_arg("policy", policy)?.handle.to_json()))
        })
    }
}
