//! Snapshot resolution, caps, the prompt section, the CLI runtime mapping, the platform probe,
//! the protocol schemas, the client-core reducers and approval scopes. Protocol objects cross
//! as plain JavaScript objects in the JSON shape of the schemas; every function is the
//! facade's (`turngate_ffi::snapshot`, `turngate_ffi::reduce`) with its errors made native.

use napi::Env;
use napi_derive::napi;
use serde_json::Value;
use turngate_ffi::{reduce as fr, snapshot as fs};

use crate::error::OrThrow;

/// A JavaScript `null` argument is the same as a missing one.
pub fn opt(v: Option<Value>) -> Option<Value> {
    v.filter(|v| !v.is_null())
}

/// Resolve a turn's `TurnExecutionSecuritySnapshot` from a `TurnPermissionProfileSelection`
/// (null: the default full-access profile), a `ResolveContext` and an optional
/// `TaskAgentSecurityCap`. Pure: the same inputs give the same snapshot.
#[napi(
    ts_args_type = "selection: TurnPermissionProfileSelection | null | undefined, context: ResolveContext, cap?: TaskAgentSecurityCap | null",
    ts_return_type = "TurnExecutionSecuritySnapshot"
)]
pub fn resolve(
    env: Env,
    selection: Option<Value>,
    context: Value,
    cap: Option<Value>,
) -> napi::Result<Value> {
    fs::resolve(opt(selection), context, opt(cap)).or_throw(&env)
}

/// Narrow a snapshot by a `TaskAgentSecurityCap`.
#[napi(
    ts_args_type = "snapshot: TurnExecutionSecuritySnapshot, cap: TaskAgentSecurityCap",
    ts_return_type = "TurnExecutionSecuritySnapshot"
)]
pub fn intersect(env: Env, snapshot: Value, cap: Value) -> napi::Result<Value> {
    fs::intersect(snapshot, cap).or_throw(&env)
}

/// The `TaskAgentSecurityCap` a child of `snapshot` receives; `origin` is `"parent_turn"` or
/// `"task_policy"`.
#[napi(
    ts_args_type = "snapshot: TurnExecutionSecuritySnapshot, origin: 'parent_turn' | 'task_policy'",
    ts_return_type = "TaskAgentSecurityCap"
)]
pub fn cap_from_parent(env: Env, snapshot: Value, origin: String) -> napi::Result<Value> {
    fs::cap_from_parent(snapshot, &origin).or_throw(&env)
}

/// Throws `SnapshotError` (`snapshotCode` `provider_native_on_native_shell`) or
/// `SandboxUnavailableError` when a native shell may not run under `snapshot`.
#[napi(ts_args_type = "snapshot: TurnExecutionSecuritySnapshot")]
pub fn ensure_native_shell_allowed(env: Env, snapshot: Value) -> napi::Result<()> {
    fs::ensure_native_shell_allowed(snapshot).or_throw(&env)
}

/// The system-prompt permissions section for a snapshot's `permission_profile`, or null.
#[napi(ts_args_type = "profile: JsonObject")]
pub fn render_permissions_section(env: Env, profile: Value) -> napi::Result<Option<String>> {
    fs::render_permissions_section(profile).or_throw(&env)
}

/// How a CLI runtime (`"codex"`, `"claude"`) is driven in a permission mode (a
/// `CliRuntimeMapping` object).
#[napi(
    ts_args_type = "runtime: 'codex' | 'claude', mode: PermissionMode",
    ts_return_type = "JsonObject"
)]
pub fn map_cli_runtime(env: Env, runtime: String, mode: String) -> napi::Result<Value> {
    fs::map_cli_runtime(&runtime, &mode).or_throw(&env)
}

/// This machine's `PlatformCapabilities` (OS, Landlock ABI, Seatbelt, ...).
#[napi(ts_return_type = "JsonObject")]
pub fn probe_platform(env: Env) -> napi::Result<Value> {
    fs::probe_platform().or_throw(&env)
}

/// The JSON Schema of a protocol type, by name (see `schemaNames()`).
#[napi(ts_return_type = "JsonObject")]
pub fn schema(env: Env, name: String) -> napi::Result<Value> {
    fs::schema(&name).or_throw(&env)
}

/// The names of every protocol type with a JSON Schema.
#[napi]
pub fn schema_names() -> Vec<String> {
    fs::schema_names()
}

/// Apply one reducer input (`{audit_event}` or `{notification}`) to a client state (null: the
/// empty state); returns the next state.
#[napi(
    ts_args_type = "state: ClientState | null | undefined, input: ReducerInput",
    ts_return_type = "ClientState"
)]
pub fn reduce(env: Env, state: Option<Value>, input: Value) -> napi::Result<Value> {
    fr::reduce(opt(state), input).or_throw(&env)
}

/// Apply reducer inputs in order from `state` (null: the empty state); returns the state
/// (`{timeline, prompts, last_seq}`).
#[napi(
    ts_args_type = "inputs: ReducerInput[], state?: ClientState | null",
    ts_return_type = "ClientState"
)]
pub fn reduce_all(env: Env, inputs: Value, state: Option<Value>) -> napi::Result<Value> {
    fr::reduce_all(opt(state), inputs).or_throw(&env)
}

/// The normalized approval scope of an action (relative paths joined to `cwd`).
#[napi(
    ts_args_type = "kind: ActionKind, target: string, tool?: string | null, cwd?: string | null",
    ts_return_type = "ApprovalScope"
)]
pub fn scope_from_action(
    env: Env,
    kind: String,
    target: String,
    tool: Option<String>,
    cwd: Option<String>,
) -> napi::Result<Value> {
    fr::scope_from_action(&kind, &target, tool.as_deref(), cwd.as_deref()).or_throw(&env)
}

/// The `scope_hash` (lowercase hex SHA-256) of an approval scope.
#[napi(ts_args_type = "scope: ApprovalScope")]
pub fn scope_hash(env: Env, scope: Value) -> napi::Result<String> {
    fr::scope_hash(scope).or_throw(&env)
}
