//! The checkers over snapshot parts: the file checker, the network checker, the spawn plan, the
//! environment filter, the shell parse, and `evaluate` (the checker of an action's kind, as the
//! gate runs it). Each function is the facade's (`turngate_ffi::check`) with its records made
//! plain objects; nothing here decides anything.

use napi::Env;
use napi::bindgen_prelude::{Buffer, Either, PromiseRaw};
use napi_derive::napi;
use serde_json::Value;
use turngate_ffi::InvocationRecord;
use turngate_ffi::check::{
    self as fc, EvaluationRecord, FileCheckRecord, FilteredEnvRecord, NetworkCheckRecord,
    NetworkResolutionRecord, SpawnPlanRequest,
};

use crate::error::{OrThrow, blocking};
use crate::policy::{Policy, Verdict};

/// One tool call as the gate takes it.
#[napi(object)]
#[derive(Debug, Clone, Default)]
pub struct Invocation {
    /// The action kind's wire name.
    #[napi(ts_type = "ActionKind")]
    pub kind: String,
    /// The target (path, command line, URL or `host:port`, `server/tool`, name).
    pub target: String,
    /// The tool's name.
    pub tool: Option<String>,
    /// The turn item id (audit rows).
    pub item_id: Option<String>,
    /// The tool call id (audit rows).
    pub tool_id: Option<String>,
    /// For shell commands: the working directory.
    pub cwd: Option<String>,
}

impl From<Invocation> for InvocationRecord {
    fn from(i: Invocation) -> Self {
        InvocationRecord {
            kind: i.kind,
            target: i.target,
            tool: i.tool,
            item_id: i.item_id,
            tool_id: i.tool_id,
            cwd: i.cwd,
        }
    }
}

/// The checker evaluation of one call: the verdict and the canonical target judged.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct Evaluation {
    /// The verdict.
    pub verdict: Verdict,
    /// The canonical target (resolved path, `host:port`, the command line).
    pub target: String,
}

impl From<EvaluationRecord> for Evaluation {
    fn from(e: EvaluationRecord) -> Self {
        Evaluation {
            verdict: e.verdict.into(),
            target: e.target,
        }
    }
}

/// What the file checker decided, with the path forms it judged.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct FileCheck {
    /// The verdict.
    pub verdict: Verdict,
    /// The lexically normalized absolute path.
    pub lexical: Option<String>,
    /// The fully resolved path (symlinks followed), when it could be resolved.
    pub resolved: Option<String>,
    /// The root that contains it.
    pub root: Option<String>,
}

impl From<FileCheckRecord> for FileCheck {
    fn from(r: FileCheckRecord) -> Self {
        FileCheck {
            verdict: r.verdict.into(),
            lexical: r.lexical,
            resolved: r.resolved,
            root: r.root,
        }
    }
}

/// What the network checker decided, with the parsed target.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct NetworkCheck {
    /// The verdict.
    pub verdict: Verdict,
    /// The host.
    pub host: Option<String>,
    /// The port.
    pub port: Option<u32>,
    /// `host:port`.
    pub host_port: Option<String>,
    /// The URL scheme.
    pub scheme: Option<String>,
    /// The address class of a literal address (`loopback`, `private`, ...).
    pub address_class: Option<String>,
}

impl From<NetworkCheckRecord> for NetworkCheck {
    fn from(r: NetworkCheckRecord) -> Self {
        NetworkCheck {
            verdict: r.verdict.into(),
            host: r.host,
            port: r.port.map(u32::from),
            host_port: r.host_port,
            scheme: r.scheme,
            address_class: r.address_class,
        }
    }
}

/// A network check with the vetted addresses to connect to.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct NetworkResolution {
    /// The check.
    pub check: NetworkCheck,
    /// The resolved, vetted addresses (connect only to these).
    pub addrs: Vec<String>,
}

impl From<NetworkResolutionRecord> for NetworkResolution {
    fn from(r: NetworkResolutionRecord) -> Self {
        NetworkResolution {
            check: r.check.into(),
            addrs: r.addrs,
        }
    }
}

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
    pub verdict: Verdict,
}

/// How a command line would be spawned.
#[napi(object)]
pub struct SpawnPlan {
    /// The verdict of the whole line (the strictest of its commands and constructs).
    pub verdict: Verdict,
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

/// What the shell parser finds in a command line.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct ParsedCommandLine {
    /// The programs an exec rule judges.
    pub programs: Vec<String>,
    /// Constructs that cannot be resolved statically (`command_substitution`, ...).
    pub unresolved: Vec<String>,
    /// True for a plain line (no shell constructs).
    pub plain: bool,
}

/// Check a file path with the file checker of a `TurnSandboxSnapshot` and `policy`.
#[napi(
    ts_args_type = "sandbox: JsonObject, policy: Policy, kind: 'file_read' | 'file_write', path: string, tool?: string | null"
)]
pub fn check_file(
    env: Env,
    sandbox: Value,
    policy: &Policy,
    kind: String,
    path: String,
    tool: Option<String>,
) -> napi::Result<FileCheck> {
    fc::check_file(sandbox, &policy.handle, &kind, &path, tool.as_deref())
        .map(FileCheck::from)
        .or_throw(&env)
}

/// Check a network target (URL or `host[:port]`) with the network checker of a
/// `TurnNetworkPolicySnapshot` and `policy`, without resolving it.
#[napi(ts_args_type = "network: JsonObject, policy: Policy, target: string, tool?: string | null")]
pub fn check_network(
    env: Env,
    network: Value,
    policy: &Policy,
    target: String,
    tool: Option<String>,
) -> napi::Result<NetworkCheck> {
    fc::check_network(network, &policy.handle, &target, tool.as_deref())
        .map(NetworkCheck::from)
        .or_throw(&env)
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
) -> napi::Result<PromiseRaw<'env, NetworkResolution>> {
    let handle = std::sync::Arc::clone(&policy.handle);
    blocking(
        env,
        move || fc::resolve_and_check_network(network, &handle, &target, tool.as_deref()),
        |_, r| Ok(NetworkResolution::from(r)),
    )
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
    options: Option<SpawnPlanOptions>,
) -> napi::Result<SpawnPlan> {
    let o = options.unwrap_or_default();
    let request = SpawnPlanRequest {
        command_line,
        cwd: o.cwd,
        env: env_bytes(o.env.unwrap_or_default()),
        timeout_ms: o.timeout_ms.map(u64::from),
        tool: o.tool,
    };
    let p = fc::plan_spawn(sandbox, process, &policy.handle, request).or_throw(&env)?;
    Ok(SpawnPlan {
        verdict: p.verdict.into(),
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
            .map(|c| CommandVerdict {
                program: c.program,
                args: c.args,
                verdict: c.verdict.into(),
            })
            .collect(),
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
#[napi]
pub fn parse_command_line(line: String) -> ParsedCommandLine {
    let p = fc::parse_command_line(&line);
    ParsedCommandLine {
        programs: p.programs,
        unresolved: p.unresolved,
        plain: p.plain,
    }
}

/// Evaluate one call under a `TurnExecutionSecuritySnapshot` with the checker of its kind,
/// exactly as the gate does, without recording or asking.
#[napi(ts_args_type = "snapshot: TurnExecutionSecuritySnapshot, invocation: Invocation")]
pub fn evaluate(env: Env, snapshot: Value, invocation: Invocation) -> napi::Result<Evaluation> {
    fc::evaluate(snapshot, &invocation.into())
        .map(Evaluation::from)
        .or_throw(&env)
}

impl std::fmt::Debug for EnvVar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnvVar").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for EnvBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnvBytes").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for FilteredEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FilteredEnv").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for SpawnPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpawnPlan").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for SpawnPlanOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpawnPlanOptions")
            .field("cwd", &self.cwd)
            .field("tool", &self.tool)
            .finish_non_exhaustive()
    }
}
