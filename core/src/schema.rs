//! JSON Schemas of the protocol types, generated from the Rust types.
//!
//! The checked-in copies under `schemas/` are compared with these by a test, so a schema can
//! never drift from the type. This module only generates; it never validates documents.

use schemars::JsonSchema;

use crate::policy::Policy;
use crate::protocol::{
    CliRuntimeMapping, PlatformCapabilities, TaskAgentSecurityCap, ToolPermissionPolicySnapshot,
    TurnExecutionSecuritySnapshot, TurnNetworkPolicySnapshot, TurnPermissionProfileCap,
    TurnPermissionProfileSelection, TurnPermissionProfileSnapshot, TurnPermissionProfileSource,
    TurnProcessPolicySnapshot, TurnSandboxSnapshot, TurnSecurityBackendSnapshot,
    TurnSecurityEnforcementStatus,
};
use crate::snapshot::ResolveContext;

fn schema<T: JsonSchema>() -> serde_json::Value {
    serde_json::Value::from(schemars::schema_for!(T))
}

/// Every protocol schema, as `(TypeName, schema)`, sorted by name. `schemas/<TypeName>.schema.json`
/// holds the checked-in copy.
pub fn all() -> Vec<(&'static str, serde_json::Value)> {
    let mut out = vec![
        ("CliRuntimeMapping", schema::<CliRuntimeMapping>()),
        ("PlatformCapabilities", schema::<PlatformCapabilities>()),
        ("Policy", schema::<Policy>()),
        ("ResolveContext", schema::<ResolveContext>()),
        ("TaskAgentSecurityCap", schema::<TaskAgentSecurityCap>()),
        (
            "ToolPermissionPolicySnapshot",
            schema::<ToolPermissionPolicySnapshot>(),
        ),
        (
            "TurnExecutionSecuritySnapshot",
            schema::<TurnExecutionSecuritySnapshot>(),
        ),
        (
            "TurnNetworkPolicySnapshot",
            schema::<TurnNetworkPolicySnapshot>(),
        ),
        (
            "TurnPermissionProfileCap",
            schema::<TurnPermissionProfileCap>(),
        ),
        (
            "TurnPermissionProfileSelection",
            schema::<TurnPermissionProfileSelection>(),
        ),
        (
            "TurnPermissionProfileSnapshot",
            schema::<TurnPermissionProfileSnapshot>(),
        ),
        (
            "TurnPermissionProfileSource",
            schema::<TurnPermissionProfileSource>(),
        ),
        (
            "TurnProcessPolicySnapshot",
            schema::<TurnProcessPolicySnapshot>(),
        ),
        ("TurnSandboxSnapshot", schema::<TurnSandboxSnapshot>()),
        (
            "TurnPermissionApprovalRequest",
            schema::<crate::approval::TurnPermissionApprovalRequest>(),
        ),
        (
            "TurnPermissionAuditEvent",
            schema::<crate::audit::TurnPermissionAuditEvent>(),
        ),
        (
            "ApprovalNotification",
            schema::<crate::approval::ApprovalNotification>(),
        ),
        (
            "TurnSecurityBackendSnapshot",
            schema::<TurnSecurityBackendSnapshot>(),
        ),
        (
            "TurnSecurityEnforcementStatus",
            schema::<TurnSecurityEnforcementStatus>(),
        ),
        ("ChangeSet", schema::<crate::changes::ChangeSet>()),
        ("Change", schema::<crate::changes::Change>()),
    ];
    out.sort_by_key(|(name, _)| *name);
    out
}

/// The schema of one type by name, `None` when the name is unknown.
pub fn get(name: &str) -> Option<serde_json::Value> {
    all().into_iter().find(|(n, _)| *n == name).map(|(_, s)| s)
}
