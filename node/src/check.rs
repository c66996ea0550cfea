//! The checkers over snapshot parts: the file checker, the network checker, the spawn plan, the
//! environment filter, the shell parse, and `evaluate` (the checker of an action's kind, as the
//! gate runs it). Each function is the facade's (`turngate_ffi::check`) with its records made
//! plain objects; nothing here decides anything.

use napi::Env;
use napi::bindgen_prelude::{Buffer, Either, JsObjectValue, Object, PromiseRaw, Unknown};
use napi_derive::napi;
use serde_json::Value;
use turngate_ffi::check::{self as fc, SpawnPlanRequest};

use crate::convert::{js_record, object_arg, options, owned_record, record};
use crate::error::OrThrow;
use crate::policy::Policy;
use crate::settle::blocking;

/// An environment variable, as text or raw bytes.
#[napi(object)]
pub struct EnvVar {
    /// The name.
    pub name: Either<String, Buffer>,
    /// The value.
    pub value: Either<String, Buffer>,
}

fn env_bytes(vars: Vec<EnvVar>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let b = |e: Either<String, Buffer>| match e {
        Either::A(s) => s.into_bytes(),
        Either::B(b) => b.to_vec(),
    };
    vars.into_iter().map(|v| (b(v.name), b(v.value))).collect()
}

/// Options of `planSpawn`.
#[napi(object)]
#[derive(Default)]
pub struct SpawnPlanOptions {
    /// The working directory (relative to the sandbox cwd).
    pub cwd: Option<String>,
    /// The environment to filter.
    pub env: Option<Vec<EnvVar>>,
    /// The timeout the caller asks for, capped by the process policy.
    pub timeout_ms: Option<u32>,
    /// The tool's name.
    pub tool: Option<String>,
}

/// Check a file path with the file checker of a `TurnSandboxSnapshot` and `policy`.
#[napi(
    ts_args_type = "sandbox: JsonObject, policy: Policy, kind: 'file_read' | 'file_write', path: string, tool?: string | null",
    ts_return_type = "FileCheck"
)]
pub fn check_file(
    env: Env,
    sandbox: Value,
    policy: &Policy,
    kind: String,
    path: String,
    tool: Option<String>,
) -> napi::Result<Value> {
    let c =
        fc::check_file(sandbox, &policy.handle, &kind, &path, tool.as_deref()).or_throw(&env)?;
    record(&env, &c)
}

/// Check a network target (URL or `host[:port]`) with the network checker of a
/// `TurnNetworkPolicySnapshot` and `policy`, without resolving it.
#[napi(
    ts_args_type = "network: JsonObject, policy: Policy, target: string, tool?: string | null",
    ts_return_type = "NetworkCheck"
)]
pub fn check_network(
    env: Env,
    network: Value,
    policy: &Policy,
    target: String,
    tool: Option<String>,
) -> napi::Result<Value> {
    let c = fc::check_network(network, &policy.handle, &target, tool.as_deref()).or_throw(&env)?;
    record(&env, &c)
}

/// Check a network target and resolve it (DNS, off the event loop), vetting every address.
#[napi(
    ts_args_type = "network: JsonObject, policy: Policy, target: string, tool?: string | null",
    ts_return_type = "Promise<NetworkResolution>"
)]
pub fn resolve_and_check_network<'env>(
    env: &'env Env,
    network: Value,
    policy: &Policy,
    target: String,
    tool: Option<String>,
) -> napi::Result<PromiseRaw<'env, Value>> {
    let handle = std::sync::Arc::clone(&policy.handle);
    let work = move || fc::resolve_and_check_network(network, &handle, &target, tool.as_deref());
    blocking(env, work, owned_record)
}

/// The spawn plan of a command line under a `TurnSandboxSnapshot`, a
/// `TurnProcessPolicySnapshot` and `policy` (nothing runs); the environment's names and values
/// are Buffers.
#[napi(
    ts_args_type = "sandbox: JsonObject, process: JsonObject, policy: Policy, commandLine: string, options?: SpawnPlanOptions",
    ts_return_type = "SpawnPlan"
)]
pub fn plan_spawn<'env>(
    env: &'env Env,
    sandbox: Value,
    process: Value,
    policy: &Policy,
    command_line: String,
    options: Option<Unknown<'_>>,
) -> napi::Result<Unknown<'env>> {
    let o: SpawnPlanOptions = object_arg(env, "options", options)?.unwrap_or_default();
    let request = SpawnPlanRequest {
        command_line,
        cwd: o.cwd,
        env: env_bytes(o.env.unwrap_or_default()),
        timeout_ms: o.timeout_ms.map(u64::from),
        tool: o.tool,
    };
    let p = fc::plan_spawn(sandbox, process, &policy.handle, request).or_throw(env)?;
    let plan = js_record(env, &p)?;
    if p.timeout_ms.is_none() {
        // An uncapped plan has no `timeoutMs` (`timeoutMs?: number`), as it always had in Node.
        // SAFETY: `plan` is the object `js_record` just made in `env`'s current scope.
        unsafe { plan.cast::<Object>() }?.delete_named_property("timeoutMs")?;
    }
    Ok(plan)
}

/// Filter an environment for a child in `cwd` under `mode` (`all`, `filtered`, `none`); the
/// `untrustedPathRoots` (the writable roots) are removed from PATH.
#[napi(
    ts_args_type = "vars: EnvVar[], mode: 'all' | 'filtered' | 'none', cwd: string, untrustedPathRoots?: string[]",
    ts_return_type = "FilteredEnv"
)]
pub fn filter_env<'env>(
    env: &'env Env,
    vars: Vec<EnvVar>,
    mode: String,
    cwd: String,
    untrusted_path_roots: Option<Vec<String>>,
) -> napi::Result<Unknown<'env>> {
    let roots = untrusted_path_roots.unwrap_or_default();
    let e = fc::filter_env(env_bytes(vars), &mode, &cwd, &roots).or_throw(env)?;
    js_record(env, &e)
}

/// What the shell parser finds in a command line (the programs an exec rule judges).
#[napi(ts_return_type = "ParsedCommandLine")]
pub fn parse_command_line(env: Env, line: String) -> napi::Result<Value> {
    record(&env, &fc::parse_command_line(&line))
}

/// Evaluate one call under a `TurnExecutionSecuritySnapshot` with the checker of its kind,
/// exactly as the gate does, without recording or asking.
#[napi(
    ts_args_type = "snapshot: TurnExecutionSecuritySnapshot, invocation: Invocation",
    ts_return_type = "Evaluation"
)]
pub fn evaluate(env: Env, snapshot: Value, invocation: Value) -> napi::Result<Value> {
    let inv = options(&env, "invocation", invocation)?;
    record(&env, &fc::evaluate(snapshot, &inv).or_throw(&env)?)
}

opaque_debug!(EnvVar);

impl std::fmt::Debug for SpawnPlanOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpawnPlanOptions")
            .field("cwd", &self.cwd)
            .field("tool", &self.tool)
            .finish_non_exhaustive()
    }
}
