//! The checkers over JSON snapshot parts: the file checker, the network checker, the process
//! spawn plan, the environment filter, the shell parse, and the gate's `evaluate` (the checker
//! of an action's kind). Each function deserializes the snapshot part with the core type, calls
//! the core checker, and converts the result to an owned record. Nothing here decides anything.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use turngate::check::net::AddressClass;
use turngate::check::{FilePolicyChecker, NetworkPolicyChecker, ProcessSpawnPlan, SpawnRequest};
use turngate::gate::ToolInvocation;
use turngate::protocol::{
    EnvInheritance, TurnExecutionSecuritySnapshot, TurnNetworkPolicySnapshot,
    TurnProcessPolicySnapshot, TurnSandboxSnapshot,
};

use crate::convert::from_value;
use crate::{PolicyHandle, TurnGateError, VerdictRecord, parse_kind};

fn path_string(p: Option<PathBuf>) -> Option<String> {
    p.map(|p| p.to_string_lossy().into_owned())
}

/// What the file checker decided for one path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record), uniffi(name = "FileCheck"))]
pub struct FileCheckRecord {
    /// The verdict.
    pub verdict: VerdictRecord,
    /// The lexically normalized absolute path, when the input was a valid path.
    pub lexical: Option<String>,
    /// The path with symlinks resolved, when it could be resolved.
    pub resolved: Option<String>,
    /// The workspace root it lies under, when any.
    pub root: Option<String>,
}

/// What the network checker decided for one target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[cfg_attr(
    feature = "uniffi",
    derive(uniffi::Record),
    uniffi(name = "NetworkCheck")
)]
pub struct NetworkCheckRecord {
    /// The verdict.
    pub verdict: VerdictRecord,
    /// The canonical host, when the target parsed.
    pub host: Option<String>,
    /// The port (explicit or the scheme's default).
    pub port: Option<u16>,
    /// `host:port` (IPv6 bracketed), when there is a port.
    pub host_port: Option<String>,
    /// The URL scheme, for a URL target.
    pub scheme: Option<String>,
    /// The address class of the host (`public`, `loopback`, `private`, `metadata`, ...).
    pub address_class: Option<String>,
}

/// A network check plus the vetted addresses to connect to (empty unless allowed or asked).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[cfg_attr(
    feature = "uniffi",
    derive(uniffi::Record),
    uniffi(name = "NetworkResolution")
)]
pub struct NetworkResolutionRecord {
    /// The check (a deny when a resolved address is forbidden).
    pub check: NetworkCheckRecord,
    /// The vetted socket addresses, `ip:port`.
    pub addrs: Vec<String>,
}

/// One simple command of a shell line with its own verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[cfg_attr(
    feature = "uniffi",
    derive(uniffi::Record),
    uniffi(name = "CommandVerdict")
)]
pub struct CommandVerdictRecord {
    /// The program as written.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Its verdict.
    pub verdict: VerdictRecord,
}

/// An environment variable the filter kept, as raw bytes (non-UTF-8 names and values survive
/// the boundary). Its serde form is `{"name", "value"}`, each as bytes (`serialize_bytes`: a
/// Node `Buffer`, Python `bytes`, a JSON array of numbers).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record), uniffi(name = "EnvVar"))]
pub struct EnvVarRecord {
    /// The name's bytes.
    #[serde(serialize_with = "as_bytes")]
    #[schemars(with = "Vec<u8>")]
    pub name: Vec<u8>,
    /// The value's bytes.
    #[serde(serialize_with = "as_bytes")]
    #[schemars(with = "Vec<u8>")]
    pub value: Vec<u8>,
}

impl From<EnvVarRecord> for (Vec<u8>, Vec<u8>) {
    fn from(v: EnvVarRecord) -> Self {
        (v.name, v.value)
    }
}

fn as_bytes<S: serde::Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_bytes(bytes)
}

/// An environment variable the filter dropped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[cfg_attr(
    feature = "uniffi",
    derive(uniffi::Record),
    uniffi(name = "DroppedVar")
)]
pub struct DroppedVarRecord {
    /// The name (invalid UTF-8 replaced).
    pub name: String,
    /// Why: `secret_name`, `credential_value`, `injection`, `invalid_encoding`,
    /// `not_inherited`, `rebuilt`.
    pub reason: String,
}

/// The filtered environment: raw bytes in and out, so non-UTF-8 names survive the boundary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[cfg_attr(
    feature = "uniffi",
    derive(uniffi::Record),
    uniffi(name = "FilteredEnv")
)]
pub struct FilteredEnvRecord {
    /// The variables kept (PATH and PWD rebuilt).
    pub vars: Vec<EnvVarRecord>,
    /// The variables dropped, with the reason.
    pub dropped: Vec<DroppedVarRecord>,
}

/// How a command line would be spawned: its verdict, argv, cwd, filtered environment, limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record), uniffi(name = "SpawnPlan"))]
pub struct SpawnPlanRecord {
    /// The verdict of the whole line (the strictest of its commands, shell constructs and the
    /// process policy).
    pub verdict: VerdictRecord,
    /// The argv to execute (`sh -c line` unless the line is plain words).
    pub argv: Vec<String>,
    /// The working directory.
    pub cwd: String,
    /// The filtered environment passed to the child.
    pub env: FilteredEnvRecord,
    /// The timeout in milliseconds, when capped.
    pub timeout_ms: Option<u64>,
    /// Whether stdin is inherited.
    pub inherit_stdin: bool,
    /// Whether the child gets a new session.
    pub new_session: bool,
    /// Whether the snapshot requires a sandbox for it.
    pub sandbox_required: bool,
    /// Every simple command found, with its verdict.
    pub commands: Vec<CommandVerdictRecord>,
    /// Shell constructs that cannot be resolved statically.
    pub unresolved: Vec<String>,
}

/// What the shell parser found in a command line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[cfg_attr(
    feature = "uniffi",
    derive(uniffi::Record),
    uniffi(name = "ParsedCommandLine")
)]
pub struct ParsedCommandLineRecord {
    /// Every simple command's program (nested wrappers and `sh -c` strings included).
    pub programs: Vec<String>,
    /// Constructs that cannot be resolved statically (`command_substitution`, ...).
    pub unresolved: Vec<String>,
    /// True when the line is plain words.
    pub plain: bool,
}

/// One tool call, as every binding passes it to the gate (`authorize`, `spawn`, `evaluate`,
/// `open_read`/`open_write`): `Invocation` in every language. It is the one declared options
/// record of those calls: a field added here reaches every language (Python keyword arguments,
/// a Node options object, a Swift record field, a C JSON object) with no per-language code.
/// Unknown fields are refused (fail closed), never ignored.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[cfg_attr(
    feature = "uniffi",
    derive(uniffi::Record),
    uniffi(name = "Invocation")
)]
pub struct InvocationRecord {
    /// The action kind's wire name.
    pub kind: String,
    /// The target (path, command line, URL or `host:port`, `server/tool`, name).
    pub target: String,
    /// The tool's name.
    #[serde(default)]
    #[cfg_attr(feature = "uniffi", uniffi(default = None))]
    pub tool: Option<String>,
    /// The turn item id (audit rows).
    #[serde(default)]
    #[cfg_attr(feature = "uniffi", uniffi(default = None))]
    pub item_id: Option<String>,
    /// The tool call id (audit rows).
    #[serde(default)]
    #[cfg_attr(feature = "uniffi", uniffi(default = None))]
    pub tool_id: Option<String>,
    /// For shell commands: the working directory.
    #[serde(default)]
    #[cfg_attr(feature = "uniffi", uniffi(default = None))]
    pub cwd: Option<String>,
    /// For `spawn` only: run with reviewable writes (DESIGN §18, Linux). The writable roots
    /// are overlays, the command's writes become a change set beside the gate's audit store,
    /// and the workspace is untouched until the change set is applied. Refused (nothing runs)
    /// where that cannot be done, never run unreviewed; refused on any call but `spawn`.
    #[serde(default)]
    #[cfg_attr(feature = "uniffi", uniffi(default = false))]
    pub review: bool,
}

impl InvocationRecord {
    /// The core invocation of a call that is not a spawn: `review` is refused there (it
    /// would promise a review nothing performs).
    pub fn to_core(&self) -> Result<ToolInvocation, TurnGateError> {
        if self.review {
            return Err(TurnGateError::invalid(
                "review",
                "reviewable writes apply to `spawn` only (a shell command the gate runs)",
            ));
        }
        self.to_core_unchecked()
    }

    /// The core invocation, `review` left to the caller (the gate's `spawn`).
    pub(crate) fn to_core_unchecked(&self) -> Result<ToolInvocation, TurnGateError> {
        Ok(ToolInvocation {
            kind: parse_kind(&self.kind)?,
            target: self.target.clone(),
            tool_name: self.tool.clone(),
            item_id: self.item_id.clone(),
            tool_id: self.tool_id.clone(),
            cwd: self.cwd.as_ref().map(PathBuf::from),
        })
    }
}

/// The checker evaluation of one call: verdict, the canonical target judged, and for a shell
/// command that is denied or asks, the part of the line that decided (`Evaluation` in every
/// language).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(
    feature = "uniffi",
    derive(uniffi::Record),
    uniffi(name = "Evaluation")
)]
pub struct EvaluationRecord {
    /// The verdict.
    pub verdict: VerdictRecord,
    /// The canonical target (resolved path, `host:port`, the command line).
    pub target: String,
    /// For a shell command that is denied or asks: the part of the line that decided, in
    /// words.
    pub decided_by: Option<String>,
}

impl From<turngate::gate::Evaluation> for EvaluationRecord {
    fn from(e: turngate::gate::Evaluation) -> Self {
        EvaluationRecord {
            verdict: e.verdict.into(),
            target: e.target,
            decided_by: e.decided_by,
        }
    }
}

pub(crate) fn file_record(c: turngate::check::FileCheck) -> FileCheckRecord {
    FileCheckRecord {
        verdict: c.verdict.into(),
        lexical: path_string(c.lexical),
        resolved: path_string(c.resolved),
        root: path_string(c.root),
    }
}

fn class_name(class: AddressClass) -> &'static str {
    match class {
        AddressClass::Public => "public",
        AddressClass::Loopback => "loopback",
        AddressClass::Unspecified => "unspecified",
        AddressClass::Metadata => "metadata",
        AddressClass::Private => "private",
        AddressClass::LinkLocal => "link_local",
        AddressClass::Reserved => "reserved",
    }
}

pub(crate) fn network_record(c: turngate::check::NetworkCheck) -> NetworkCheckRecord {
    let t = c.target;
    NetworkCheckRecord {
        verdict: c.verdict.into(),
        host: t.as_ref().map(|t| t.host.clone()),
        port: t.as_ref().and_then(|t| t.port),
        host_port: t.as_ref().and_then(|t| t.host_port()),
        scheme: t.as_ref().and_then(|t| t.scheme.clone()),
        address_class: c.class.map(|k| class_name(k).to_owned()),
    }
}

pub(crate) fn resolution_record(r: turngate::check::NetworkResolution) -> NetworkResolutionRecord {
    NetworkResolutionRecord {
        check: network_record(r.check),
        addrs: r.addrs.iter().map(ToString::to_string).collect(),
    }
}

#[cfg(unix)]
fn os(bytes: Vec<u8>) -> OsString {
    use std::os::unix::ffi::OsStringExt;
    OsString::from_vec(bytes)
}

#[cfg(not(unix))]
fn os(bytes: Vec<u8>) -> OsString {
    OsString::from(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(unix)]
fn bytes(s: OsString) -> Vec<u8> {
    use std::os::unix::ffi::OsStringExt;
    s.into_vec()
}

#[cfg(not(unix))]
fn bytes(s: OsString) -> Vec<u8> {
    s.to_string_lossy().into_owned().into_bytes()
}

fn env_record(
    vars: Vec<(OsString, OsString)>,
    dropped: &[turngate::check::DroppedVar],
) -> FilteredEnvRecord {
    FilteredEnvRecord {
        vars: vars
            .into_iter()
            .map(|(n, v)| EnvVarRecord {
                name: bytes(n),
                value: bytes(v),
            })
            .collect(),
        dropped: dropped
            .iter()
            .map(|d| DroppedVarRecord {
                name: d.name.clone(),
                reason: d.reason.as_str().to_owned(),
            })
            .collect(),
    }
}

/// Check a file path with the [`FilePolicyChecker`] of a `TurnSandboxSnapshot` and `policy`.
/// `kind` is `file_read` or `file_write`.
pub fn check_file(
    sandbox: Value,
    policy: &PolicyHandle,
    kind: &str,
    path: &str,
    tool: Option<&str>,
) -> Result<FileCheckRecord, TurnGateError> {
    let sandbox: TurnSandboxSnapshot = from_value("sandbox", sandbox)?;
    let kind = parse_kind(kind)?;
    if !matches!(
        kind,
        turngate::ActionKind::FileRead | turngate::ActionKind::FileWrite
    ) {
        return Err(TurnGateError::invalid(
            "kind",
            format!("the file checker takes file_read or file_write, not `{kind}`"),
        ));
    }
    Ok(file_record(
        FilePolicyChecker::new(&sandbox, policy.compiled()).check(kind, path, tool),
    ))
}

/// Check a network target (URL or `host[:port]`) with the [`NetworkPolicyChecker`] of a
/// `TurnNetworkPolicySnapshot` and `policy`, without resolving it.
pub fn check_network(
    network: Value,
    policy: &PolicyHandle,
    target: &str,
    tool: Option<&str>,
) -> Result<NetworkCheckRecord, TurnGateError> {
    let net: TurnNetworkPolicySnapshot = from_value("network", network)?;
    Ok(network_record(
        NetworkPolicyChecker::new(&net, policy.compiled()).check(target, tool),
    ))
}

/// Check a network target and resolve it, vetting every address (DNS rebinding refused).
pub fn resolve_and_check_network(
    network: Value,
    policy: &PolicyHandle,
    target: &str,
    tool: Option<&str>,
) -> Result<NetworkResolutionRecord, TurnGateError> {
    let net: TurnNetworkPolicySnapshot = from_value("network", network)?;
    Ok(resolution_record(
        NetworkPolicyChecker::new(&net, policy.compiled()).resolve_and_check(target, tool),
    ))
}

/// The arguments of [`plan_spawn`] beyond the snapshot parts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SpawnPlanRequest {
    /// The command line.
    pub command_line: String,
    /// The working directory (relative to the sandbox cwd), when not the sandbox cwd.
    pub cwd: Option<String>,
    /// The environment to filter, as `(name, value)` bytes.
    pub env: Vec<(Vec<u8>, Vec<u8>)>,
    /// The timeout the caller asks for, capped by the process policy.
    pub timeout_ms: Option<u64>,
    /// The tool's name.
    pub tool: Option<String>,
}

/// Build the [`ProcessSpawnPlan`] of a command line under a `TurnSandboxSnapshot`, a
/// `TurnProcessPolicySnapshot` and `policy`.
pub fn plan_spawn(
    sandbox: Value,
    process: Value,
    policy: &PolicyHandle,
    request: SpawnPlanRequest,
) -> Result<SpawnPlanRecord, TurnGateError> {
    let sandbox: TurnSandboxSnapshot = from_value("sandbox", sandbox)?;
    let process: TurnProcessPolicySnapshot = from_value("process", process)?;
    let cwd = request.cwd.as_ref().map(PathBuf::from);
    let plan = ProcessSpawnPlan::build(
        &sandbox,
        &process,
        policy.compiled(),
        SpawnRequest {
            command_line: &request.command_line,
            cwd: cwd.as_deref(),
            env: request
                .env
                .into_iter()
                .map(|(n, v)| (os(n), os(v)))
                .collect(),
            timeout_ms: request.timeout_ms,
            tool: request.tool.as_deref(),
        },
    );
    Ok(SpawnPlanRecord {
        env: env_record(plan.env, &plan.dropped_env),
        verdict: plan.verdict.into(),
        argv: plan.argv,
        cwd: plan.cwd.to_string_lossy().into_owned(),
        timeout_ms: plan
            .timeout
            .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
        inherit_stdin: plan.inherit_stdin,
        new_session: plan.new_session,
        sandbox_required: plan.sandbox_required,
        commands: plan
            .commands
            .into_iter()
            .map(|c| CommandVerdictRecord {
                program: c.command.program,
                args: c.command.args,
                verdict: c.verdict.into(),
            })
            .collect(),
        unresolved: plan.unresolved.iter().map(|u| (*u).to_owned()).collect(),
    })
}

/// Parse an inheritance mode: `all`, `filtered` or `none`.
fn parse_inheritance(mode: &str) -> Result<EnvInheritance, TurnGateError> {
    from_value("mode", Value::String(mode.to_owned()))
}

/// Filter an environment for a child in `cwd` under inheritance `mode` (`all`, `filtered`,
/// `none`); `untrusted_path_roots` (the writable roots) are removed from PATH.
pub fn filter_env(
    vars: Vec<(Vec<u8>, Vec<u8>)>,
    mode: &str,
    cwd: &str,
    untrusted_path_roots: &[String],
) -> Result<FilteredEnvRecord, TurnGateError> {
    let mode = parse_inheritance(mode)?;
    let roots: Vec<PathBuf> = untrusted_path_roots.iter().map(PathBuf::from).collect();
    let env = turngate::check::filter_env(
        vars.into_iter().map(|(n, v)| (os(n), os(v))),
        mode,
        Path::new(cwd),
        &roots,
    );
    Ok(env_record(env.vars, &env.dropped))
}

/// What the shell parser finds in a command line (the programs an exec rule judges).
pub fn parse_command_line(line: &str) -> ParsedCommandLineRecord {
    let parsed = turngate::shell::parse_command_line(line);
    ParsedCommandLineRecord {
        programs: parsed.commands.into_iter().map(|c| c.program).collect(),
        unresolved: parsed.unresolved.iter().map(|u| (*u).to_owned()).collect(),
        plain: parsed.plain,
    }
}

/// Evaluate one call under a `TurnExecutionSecuritySnapshot` with the checker of its kind,
/// exactly as the gate (and `turngate check`) does, without recording or asking.
pub fn evaluate(
    snapshot: Value,
    invocation: &InvocationRecord,
) -> Result<EvaluationRecord, TurnGateError> {
    let inv = invocation.to_core()?;
    let compiled = compiled_snapshot(snapshot)?;
    Ok(turngate::gate::evaluate(&compiled.0, &compiled.1, &inv).into())
}

/// A snapshot and its compiled policy.
type CompiledSnapshot = (TurnExecutionSecuritySnapshot, turngate::CompiledPolicy);

/// The parsed snapshot and compiled policy of `snapshot`, reused while callers pass the same
/// snapshot again (the usual case: one snapshot per turn). The cache holds one entry and is
/// keyed by the whole JSON value, so any change parses and compiles afresh; the file roots are
/// still canonicalized on every call by the evaluation itself.
fn compiled_snapshot(snapshot: Value) -> Result<std::sync::Arc<CompiledSnapshot>, TurnGateError> {
    use std::sync::{Arc, Mutex};
    static LAST: Mutex<Option<(Value, Arc<CompiledSnapshot>)>> = Mutex::new(None);
    if let Ok(last) = LAST.lock()
        && let Some((seen, compiled)) = last.as_ref()
        && *seen == snapshot
    {
        return Ok(Arc::clone(compiled));
    }
    let parsed: TurnExecutionSecuritySnapshot = from_value("snapshot", snapshot.clone())?;
    let policy = parsed.permission_profile.effective_policy.compile()?;
    let compiled = Arc::new((parsed, policy));
    if let Ok(mut last) = LAST.lock() {
        *last = Some((snapshot, Arc::clone(&compiled)));
    }
    Ok(compiled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_variables_serialize_by_name_as_bytes() {
        let vars = vec![(b"A\xff".to_vec(), b"\xfe".to_vec())];
        let e = filter_env(vars, "all", "/w", &[]).unwrap();
        assert_eq!(
            e.vars[0],
            EnvVarRecord {
                name: b"A\xff".to_vec(),
                value: b"\xfe".to_vec()
            }
        );
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(
            v["vars"][0],
            serde_json::json!({"name": [65, 255], "value": [254]})
        );
        assert_eq!(v["vars"].as_array().map(Vec::len), Some(e.vars.len()));
        assert_eq!(v["dropped"], serde_json::json!([]));
    }
}
