//! The checkers over snapshot parts: the file checker, the network checker, the spawn plan, the
//! environment filter, the shell parse, and `evaluate` (the checker of an action's kind, as the
//! gate runs it). Each function is the facade's (`turngate_ffi::check`) with its records made
//! plain objects; nothing here decides anything.

use napi::Env;
use napi::bindgen_prelude::{Buffer, Either, PromiseRaw, Unknown};
use napi_derive::napi;
use serde_json::Value;
use turngate_ffi::check::{self as fc, FilteredEnvRecord, SpawnPlanRequest};

use crate::convert::{object_arg, options, owned_record, record};
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

/// An environment variable as raw bytes.
#[napi(object)]
pub struct EnvBytes {
    /// The name.
    pub name: Buffer,
    /// The value.
    pub value: Buffer,
}

/// A variable the filter dropped, and why.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct DroppedVar {
    /// The name (lossy text).
    pub name: String,
    /// The reason's wire name (`injection`, `secret`, ...).
    pub reason: String,
}

/// A filtered environment.
#[napi(object)]
pub struct FilteredEnv {
    /// The variables kept.
    pub vars: Vec<EnvBytes>,
    /// The variables dropped.
    pub dropped: Vec<DroppedVar>,
}

impl From<FilteredEnvRecord> for FilteredEnv {
    fn from(r: FilteredEnvRecord) -> Self {
        FilteredEnv {
            vars: r
                .vars
                .into_iter()
                .map(|(n, v)| EnvBytes {
                    name: n.into(),
                    value: v.into(),
                })
                .collect(),
            dropped: r
                .dropped
                .into_iter()
                .map(|d| DroppedVar {
                    name: d.name,
                    reason: d.reason,
                })
                .collect(),
        }
    }
}

fn env_bytes(vars: Vec<EnvVar>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let b = |e: Either<String, Buffer>| match e {
        Either::A(s) => s.into_bytes(),
        Either::B(b) => b.to_vec(),
    };
    vars.into_iter().map(|v| (b(v.name), b(v.value))).collect()
}

/// One command of a line and its verdict.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct CommandVerdict {
    /// The program.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Its verdict.
    #[napi(ts_type = "Verdict")]
    pub verdict: Value,
}

/// How a command line would be spawned.
#[napi(object)]
pub struct SpawnPlan {
    /// The verdict of the whole line (the strictest of its commands and constructs).
    #[napi(ts_type = "Verdict")]
    pub verdict: Value,
    /// The argv that runs.
    pub argv: Vec<String>,
    /// The working directory.
    pub cwd: String,
    /// The filtered environment.
    pub env: FilteredEnv,
    /// The timeout in milliseconds.
    pub timeout_ms: Option<f64>,
    /// Whether the child inherits stdin.
    pub inherit_stdin: bool,
    /// Whether the child gets a new session.
    pub new_session: bool,
    /// Whether a sandbox is required.
    pub sandbox_required: bool,
    /// Each command and its verdict.
    pub commands: Vec<CommandVerdict>,
    /// Shell constructs that cannot be resolved statically.
    pub unresolved: Vec<String>,
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
/// `TurnProcessPolicySnapshot` and `policy`.
#[napi(
    ts_args_type = "sandbox: JsonObject, process: JsonObject, policy: Policy, commandLine: string, options?: SpawnPlanOptions"
)]
pub fn plan_spawn(
    env: Env,
    sandbox: Value,
    process: Value,
    policy: &Policy,
    command_line: String,
    options: Option<Unknown<'_>>,
) -> napi::Result<SpawnPlan> {
    let o: SpawnPlanOptions = object_arg(&env, "options", options)?.unwrap_or_default();
    let request = SpawnPlanRequest {
        command_line,
        cwd: o.cwd,
        env: env_bytes(o.env.unwrap_or_default()),
        timeout_ms: o.timeout_ms.map(u64::from),
        tool: o.tool,
    };
    let p = fc::plan_spawn(sandbox, process, &policy.handle, request).or_throw(&env)?;
    Ok(SpawnPlan {
        verdict: record(&env, &p.verdict)?,
        argv: p.argv,
        cwd: p.cwd,
        env: p.env.into(),
        timeout_ms: p.timeout_ms.map(|t| t as f64),
        inherit_stdin: p.inherit_stdin,
        new_session: p.new_session,
        sandbox_required: p.sandbox_required,
        commands: p
            .commands
            .into_iter()
            .map(|c| {
                Ok(CommandVerdict {
                    verdict: record(&env, &c.verdict)?,
                    program: c.program,
                    args: c.args,
                })
            })
            .collect::<napi::Result<_>>()?,
        unresolved: p.unresolved,
    })
}

/// Filter an environment for a child in `cwd` under `mode` (`all`, `filtered`, `none`); the
/// `untrustedPathRoots` (the writable roots) are removed from PATH.
#[napi(
    ts_args_type = "vars: EnvVar[], mode: 'all' | 'filtered' | 'none', cwd: string, untrustedPathRoots?: string[]"
)]
pub fn filter_env(
    env: Env,
    vars: Vec<EnvVar>,
    mode: String,
    cwd: String,
    untrusted_path_roots: Option<Vec<String>>,
) -> napi::Result<FilteredEnv> {
    fc::filter_env(
        env_bytes(vars),
        &mode,
        &cwd,
        &untrusted_path_roots.unwrap_or_default(),
    )
    .map(FilteredEnv::from)
    .or_throw(&env)
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

opaque_debug!(EnvVar, EnvBytes, FilteredEnv, SpawnPlan);

impl std::fmt::Debug for SpawnPlanOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpawnPlanOptions")
            .field("cwd", &self.cwd)
            .field("tool", &self.tool)
            .finish_non_exhaustive()
    }
}
