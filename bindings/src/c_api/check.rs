//! The checkers for C: the file checker, the network checker (with and without resolving), the
//! spawn plan, the environment filter, the shell parse and `evaluate`, each over the snapshot
//! part it needs as JSON text and a `TgPolicy`. Results are JSON in the shapes of the Python
//! binding's dicts. Every rule is the core checker's; this module only converts.

use std::ffi::c_char;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{Failure, TgPolicy, TgStatus, arg, handle, json_arg, json_result, opt_arg, record_arg};
use crate::check::{self as facade, FilteredEnvRecord, SpawnPlanRequest};
use crate::convert::{from_value, to_value};
use crate::{InvocationRecord, PolicyHandle, TurnGateError};

/// The invocation argument `name`: the facade's `Invocation` record as JSON (`{"kind",
/// "target", "tool"?, "item_id"?, "tool_id"?, "cwd"?}`; unknown fields refused). With
/// `fixed_kind` (the kind a function acts on), `kind` may be left out, and any other kind is
/// refused; without it, `kind` is required.
///
/// # Safety
/// `ptr` is NULL or a NUL-terminated string valid for the call.
pub(super) unsafe fn invocation_arg(
    name: &str,
    ptr: *const c_char,
    fixed_kind: Option<&str>,
) -> Result<InvocationRecord, Failure> {
    // SAFETY: forwarded from the caller.
    let mut value = unsafe { json_arg(name, ptr) }?;
    if let (Some(fixed), Value::Object(fields)) = (fixed_kind, &mut value) {
        match fields.get("kind") {
            None => {
                fields.insert("kind".into(), fixed.into());
            }
            Some(k) if k.as_str() == Some(fixed) => {}
            Some(k) => {
                return Err(Failure::new(
                    TgStatus::Invalid,
                    format!("{name}.kind: this call acts on `{fixed}`, not {k}"),
                ));
            }
        }
    }
    Ok(from_value(name, value)?)
}

/// The request of `tg_plan_spawn_json`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpawnPlanJson {
    command_line: String,
    cwd: Option<String>,
    #[serde(default)]
    env: Vec<EnvVarJson>,
    timeout_ms: Option<u64>,
    tool: Option<String>,
}

/// One variable of an environment given as JSON: `{"name", "value"}` (the shape of the
/// filtered environment's `vars`; unknown fields refused) or a `[name, value]` pair (serde
/// reads a struct from an array of its fields, in order), strings either way.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EnvVarJson {
    name: String,
    value: String,
}

/// What a C caller is told when its `env` is neither form.
const ENV_FORMS: &str = "expected [{\"name\", \"value\"}, ...] or [[name, value], ...] strings: ";

/// An environment given as JSON (see [`EnvVarJson`]), as bytes.
fn env_pairs(env: Vec<EnvVarJson>) -> Vec<(Vec<u8>, Vec<u8>)> {
    env.into_iter()
        .map(|v| (v.name.into_bytes(), v.value.into_bytes()))
        .collect()
}

/// The filtered environment as JSON: the record with each kept variable's name and value as
/// strings (invalid UTF-8 replaced by U+FFFD), which C reads more easily than byte arrays.
fn env_json(e: &FilteredEnvRecord) -> Result<Value, Failure> {
    let lossy = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let mut v = to_value("env", e)?;
    v["vars"] = e
        .vars
        .iter()
        .map(|x| json!({"name": lossy(&x.name), "value": lossy(&x.value)}))
        .collect();
    Ok(v)
}

/// Checks a path with the file checker of a `TurnSandboxSnapshot` (JSON, e.g. a snapshot's
/// `sandbox`) and `policy`. `kind` is `file_read` or `file_write`; `tool` may be NULL. Writes
/// `{"verdict", "lexical", "resolved", "root"}` (the normalized path, the path with symlinks
/// resolved, the root it lies under; each null when unknown). `*out_json` is owned by the
/// caller.
///
/// # Safety
/// `sandbox`, `kind`, `path` are NUL-terminated; `tool` NULL or NUL-terminated; `policy` a live
/// policy; `out_json` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_check_file_json(
    sandbox: *const c_char,
    policy: *const TgPolicy,
    kind: *const c_char,
    path: *const c_char,
    tool: *const c_char,
    out_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        json_result(out_json, || {
            Ok(facade::check_file(
                json_arg("sandbox", sandbox)?,
                handle(policy)?,
                arg("kind", kind)?,
                arg("path", path)?,
                opt_arg("tool", tool)?,
            )?)
        })
    }
}

/// Checks a network target (a URL or `host[:port]`) with the network checker of a
/// `TurnNetworkPolicySnapshot` (JSON, e.g. a snapshot's `network`) and `policy`, without
/// resolving it. Writes `{"verdict", "host", "port", "host_port", "scheme", "address_class"}`.
/// `*out_json` is owned by the caller.
///
/// # Safety
/// `network`, `target` are NUL-terminated; `tool` NULL or NUL-terminated; `policy` a live
/// policy; `out_json` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_check_network_json(
    network: *const c_char,
    policy: *const TgPolicy,
    target: *const c_char,
    tool: *const c_char,
    out_json: *mut *mut c_char,
) -> TgStatus {
    let check = facade::check_network;
    // SAFETY: forwarded from the caller.
    unsafe { network_json(network, policy, target, tool, out_json, check) }
}

/// `tg_check_network_json`, then resolves the host and vets every address (DNS rebinding to a
/// forbidden address is a deny). Writes the check plus `addrs`, the `ip:port` addresses to
/// connect to (empty unless allowed or asked). Blocks on DNS. `*out_json` is owned by the
/// caller.
///
/// # Safety
/// As `tg_check_network_json`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_resolve_and_check_network_json(
    network: *const c_char,
    policy: *const TgPolicy,
    target: *const c_char,
    tool: *const c_char,
    out_json: *mut *mut c_char,
) -> TgStatus {
    let check = facade::resolve_and_check_network;
    // SAFETY: forwarded from the caller.
    unsafe { network_json(network, policy, target, tool, out_json, check) }
}

/// The shared body of `tg_check_network_json` and `tg_resolve_and_check_network_json`: `check`
/// over the arguments, read in their order.
///
/// # Safety
/// As those functions.
unsafe fn network_json<T: Serialize>(
    network: *const c_char,
    policy: *const TgPolicy,
    target: *const c_char,
    tool: *const c_char,
    out_json: *mut *mut c_char,
    check: fn(Value, &PolicyHandle, &str, Option<&str>) -> Result<T, TurnGateError>,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        json_result(out_json, || {
            let (network, policy) = (json_arg("network", network)?, handle(policy)?);
            let (target, tool) = (arg("target", target)?, opt_arg("tool", tool)?);
            Ok(check(network, policy, target, tool)?)
        })
    }
}

/// The spawn plan of a command line under a `TurnSandboxSnapshot` and a
/// `TurnProcessPolicySnapshot` (JSON, e.g. a snapshot's `sandbox` and `process`) and `policy`.
/// `request` is `{"command_line", "cwd"?, "env"?, "timeout_ms"?, "tool"?}`, `env` as
/// `tg_filter_env_json` takes it. Writes `{"verdict", "argv", "cwd", "env": {"vars": [{"name",
/// "value"}], "dropped": [{"name", "reason"}]}, "timeout_ms", "inherit_stdin", "new_session",
/// "sandbox_required", "commands": [{"program", "args", "verdict"}], "unresolved"}`. Nothing
/// runs. `*out_json` is owned by the caller.
///
/// # Safety
/// `sandbox`, `process`, `request` are NUL-terminated; `policy` a live policy; `out_json`
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_plan_spawn_json(
    sandbox: *const c_char,
    process: *const c_char,
    policy: *const TgPolicy,
    request: *const c_char,
    out_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        json_result(out_json, || {
            let r: SpawnPlanJson = record_arg("request", "", request)?;
            let request = SpawnPlanRequest {
                command_line: r.command_line,
                cwd: r.cwd,
                env: env_pairs(r.env),
                timeout_ms: r.timeout_ms,
                tool: r.tool,
            };
            let (sandbox, process) = (json_arg("sandbox", sandbox)?, json_arg("process", process)?);
            let p = facade::plan_spawn(sandbox, process, handle(policy)?, request)?;
            let mut v = to_value("plan", &p)?;
            v["env"] = env_json(&p.env)?;
            Ok(v)
        })
    }
}

/// Filters an environment (a JSON array of `{"name", "value"}` objects or `[name, value]`
/// pairs, strings) for a child in `cwd` under inheritance `mode` (`all`, `filtered`, `none`);
/// `untrusted_path_roots` (a JSON array of paths, or NULL for none) are removed from PATH.
/// Writes `{"vars": [{"name", "value"}], "dropped": [{"name", "reason"}]}`, names and values
/// as strings (bytes that are not UTF-8 replaced by U+FFFD). `*out_json` is owned by the
/// caller.
///
/// # Safety
/// `env`, `mode`, `cwd` are NUL-terminated; `untrusted_path_roots` NULL or NUL-terminated;
/// `out_json` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_filter_env_json(
    env: *const c_char,
    mode: *const c_char,
    cwd: *const c_char,
    untrusted_path_roots: *const c_char,
    out_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        json_result(out_json, || {
            let vars = record_arg("env", ENV_FORMS, env)?;
            let roots: Vec<String> = if untrusted_path_roots.is_null() {
                Vec::new()
            } else {
                record_arg(
                    "untrusted_path_roots",
                    "expected an array of strings: ",
                    untrusted_path_roots,
                )?
            };
            let (mode, cwd) = (arg("mode", mode)?, arg("cwd", cwd)?);
            env_json(&facade::filter_env(env_pairs(vars), mode, cwd, &roots)?)
        })
    }
}

/// What the shell parser finds in a command line: `{"programs", "unresolved", "plain"}` (every
/// simple command's program, the constructs that cannot be resolved statically, whether the
/// line is plain words). `*out_json` is owned by the caller.
///
/// # Safety
/// `line` is NUL-terminated; `out_json` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_parse_command_line_json(
    line: *const c_char,
    out_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        json_result(out_json, || {
            Ok(facade::parse_command_line(arg("line", line)?))
        })
    }
}

/// Evaluates one call under a `TurnExecutionSecuritySnapshot` (JSON) with the checker of its
/// kind, exactly as the gate does, recording nothing and asking nobody. `invocation` is
/// `{"kind", "target", "tool"?, "cwd"?}`. Writes `{"verdict", "target"}` (the canonical target
/// judged). `*out_json` is owned by the caller.
///
/// # Safety
/// `snapshot` and `invocation` are NUL-terminated; `out_json` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tg_evaluate_json(
    snapshot: *const c_char,
    invocation: *const c_char,
    out_json: *mut *mut c_char,
) -> TgStatus {
    // SAFETY: forwarded from the caller.
    unsafe {
        json_result(out_json, || {
            let inv = invocation_arg("invocation", invocation, None)?;
            Ok(facade::evaluate(json_arg("snapshot", snapshot)?, &inv)?)
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn an_environment_is_taken_by_name_or_as_pairs_and_nothing_else() {
        let vars: Vec<EnvVarJson> =
            serde_json::from_str(r#"[{"name": "A", "value": "1"}, ["B", "2"]]"#).unwrap();
        assert_eq!(
            env_pairs(vars),
            vec![
                (b"A".to_vec(), b"1".to_vec()),
                (b"B".to_vec(), b"2".to_vec())
            ]
        );
        for bad in [
            r#"[{"name": "A", "value": "1", "extra": 0}]"#,
            r#"[{"name": "A"}]"#,
            r#"[["A"]]"#,
            r#"[["A", "1", "2"]]"#,
            r#"[["A", 1]]"#,
            r#"["A=1"]"#,
        ] {
            assert!(
                serde_json::from_str::<Vec<EnvVarJson>>(bad).is_err(),
                "{bad} taken"
            );
        }
    }
}
