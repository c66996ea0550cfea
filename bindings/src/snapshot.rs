//! Snapshot resolution, cap intersection, the prompt section, the CLI runtime mapping, the
//! platform probe and the protocol schemas. Protocol objects cross as JSON values (or their
//! text); each function deserializes its inputs with the core types, calls the core, and
//! serializes the result. Nothing here decides anything.

use serde_json::Value;
use turngate::PermissionMode;
use turngate::protocol::{
    CapOrigin, CliRuntime, TaskAgentSecurityCap, TurnExecutionSecuritySnapshot,
    TurnPermissionProfileSelection, TurnPermissionProfileSnapshot,
};
use turngate::snapshot::{self as core, ResolveContext};

use crate::TurnGateError;

fn from_value<T: serde::de::DeserializeOwned>(
    what: &str,
    value: Value,
) -> Result<T, TurnGateError> {
    serde_json::from_value(value).map_err(|e| TurnGateError::invalid(what, e))
}

fn to_value<T: serde::Serialize>(what: &str, value: &T) -> Result<Value, TurnGateError> {
    serde_json::to_value(value).map_err(|e| TurnGateError::invalid(what, e))
}

fn parse_text(what: &str, text: &str) -> Result<Value, TurnGateError> {
    serde_json::from_str(text).map_err(|e| TurnGateError::invalid(what, e))
}

fn optional<T: serde::de::DeserializeOwned>(
    what: &str,
    value: Option<Value>,
) -> Result<Option<T>, TurnGateError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(v) => from_value(what, v).map(Some),
    }
}

/// `resolve(selection, context, parent_cap)`: a `TurnPermissionProfileSelection` (or none for
/// the default full-access profile), a `ResolveContext` and an optional `TaskAgentSecurityCap`,
/// to a `TurnExecutionSecuritySnapshot`.
pub fn resolve(
    selection: Option<Value>,
    context: Value,
    cap: Option<Value>,
) -> Result<Value, TurnGateError> {
    let selection: Option<TurnPermissionProfileSelection> = optional("selection", selection)?;
    let context: ResolveContext = from_value("context", context)?;
    let cap: Option<TaskAgentSecurityCap> = optional("cap", cap)?;
    let snapshot = core::resolve(selection.as_ref(), &context, cap.as_ref())?;
    to_value("snapshot", &snapshot)
}

/// [`resolve`] over JSON text.
pub fn resolve_json(
    selection: Option<&str>,
    context: &str,
    cap: Option<&str>,
) -> Result<String, TurnGateError> {
    let selection = selection.map(|s| parse_text("selection", s)).transpose()?;
    let cap = cap.map(|c| parse_text("cap", c)).transpose()?;
    let out = resolve(selection, parse_text("context", context)?, cap)?;
    Ok(out.to_string())
}

/// `intersect(snapshot, cap)`: the snapshot narrowed by the cap.
pub fn intersect(snapshot: Value, cap: Value) -> Result<Value, TurnGateError> {
    let snapshot: TurnExecutionSecuritySnapshot = from_value("snapshot", snapshot)?;
    let cap: TaskAgentSecurityCap = from_value("cap", cap)?;
    to_value("snapshot", &core::intersect(&snapshot, &cap))
}

/// `cap_from_parent(snapshot, origin)`: the cap a child of `snapshot` receives (`origin` is
/// `parent_turn` or `task_policy`).
pub fn cap_from_parent(snapshot: Value, origin: &str) -> Result<Value, TurnGateError> {
    let snapshot: TurnExecutionSecuritySnapshot = from_value("snapshot", snapshot)?;
    let origin: CapOrigin = from_value("origin", Value::String(origin.to_owned()))?;
    to_value("cap", &core::cap_from_parent(&snapshot, origin))
}

/// Refuse a native shell under `snapshot` (a provider-native backend, or a required sandbox
/// that is unavailable): `Ok(())` when a native shell may run.
pub fn ensure_native_shell_allowed(snapshot: Value) -> Result<(), TurnGateError> {
    let snapshot: TurnExecutionSecuritySnapshot = from_value("snapshot", snapshot)?;
    Ok(core::ensure_native_shell_allowed(&snapshot)?)
}

/// The system-prompt permissions section for a `TurnPermissionProfileSnapshot`, or none.
pub fn render_permissions_section(profile: Value) -> Result<Option<String>, TurnGateError> {
    let profile: TurnPermissionProfileSnapshot = from_value("profile", profile)?;
    Ok(core::render_permissions_section(&profile))
}

/// `map_cli_runtime(runtime, mode)`: how a CLI runtime (`codex`, `claude`) is driven in a mode,
/// as a `CliRuntimeMapping`.
pub fn map_cli_runtime(runtime: &str, mode: &str) -> Result<Value, TurnGateError> {
    let runtime: CliRuntime = from_value("runtime", Value::String(runtime.to_owned()))?;
    let mode: PermissionMode = mode.parse()?;
    to_value("mapping", &core::map_cli_runtime(runtime, mode))
}

/// The probed `PlatformCapabilities` of this machine.
pub fn probe_platform() -> Result<Value, TurnGateError> {
    to_value("platform", &turngate::probe::probe_platform())
}

/// The JSON Schema of one protocol type, by its type name.
pub fn schema(name: &str) -> Result<Value, TurnGateError> {
    turngate::schema::get(name).ok_or_else(|| {
        let names: Vec<&str> = turngate::schema::all()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        TurnGateError::invalid(
            "schema",
            format!(
                "unknown type `{name}` (expected one of {})",
                names.join(", ")
            ),
        )
    })
}

/// The names of every protocol type with a schema.
pub fn schema_names() -> Vec<String> {
    turngate::schema::all()
        .into_iter()
        .map(|(n, _)| n.to_owned())
        .collect()
}
