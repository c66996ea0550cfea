//! Caps passed to task and subagent turns, so a child can never silently broaden its parent.
//!
//! Plain data. `snapshot::intersect` applies a cap; `snapshot::cap_from_parent` derives one.
//! An absent field means "no constraint on that area".

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::sandbox::{
    SandboxMode, TurnFilesystemSnapshot, TurnNetworkPolicySnapshot, TurnProcessPolicySnapshot,
};
use super::security::ApprovalScope;
use crate::policy::{PermissionMode, Policy};

/// Where a cap came from; it decides the capped child's profile source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CapOrigin {
    /// The parent turn's own snapshot: the child's source becomes `inherited_from_parent_turn`.
    ParentTurn,
    /// Task policy: the child's source becomes `task_permission_cap`.
    TaskPolicy,
}

/// The cap on a child's permission profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnPermissionProfileCap {
    /// The least strict mode the child may run under; a looser child mode is raised to it.
    pub mode: PermissionMode,
    /// A policy contained in the child's effective policy (typically the parent's effective
    /// policy). Absent: the mode's compiled policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<Policy>,
}

/// The security cap passed to task and subagent execution.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskAgentSecurityCap {
    /// Parent turn or task policy.
    pub origin: CapOrigin,
    /// The profile cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<TurnPermissionProfileCap>,
    /// The least strict sandbox mode the child may run under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_mode: Option<SandboxMode>,
    /// The roots the child may stay within; a child root survives only where it lies inside one
    /// of these, and it is writable only when both grant write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filesystem: Option<TurnFilesystemSnapshot>,
    /// The network bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<TurnNetworkPolicySnapshot>,
    /// The process bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<TurnProcessPolicySnapshot>,
    /// The approval scopes the child may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_scopes: Option<Vec<ApprovalScope>>,
}

impl TaskAgentSecurityCap {
    /// A cap that constrains nothing (intersecting with it only changes the profile source).
    pub fn unconstrained(origin: CapOrigin) -> Self {
        TaskAgentSecurityCap {
            origin,
            profile: None,
            sandbox_mode: None,
            filesystem: None,
            network: None,
            process: None,
            approval_scopes: None,
        }
    }
}
