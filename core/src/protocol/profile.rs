//! The permission profile of a turn: the client's selection, where the profile came from, and
//! the materialized profile with its compiled policy.
//!
//! Plain data. Resolving a selection into a profile is `snapshot`'s job.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::action::{ActionKind, Effect};
use crate::policy::{PermissionMode, Policy};

/// The client's request shape in `turn/start`: which permission mode the turn runs under.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnPermissionProfileSelection {
    /// The selected mode; absent means the default (`full_access`, source `defaulted`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<PermissionMode>,
    /// Who selected it: `composer` (the default when a mode is given) or `system`.
    /// `defaulted`, `inherited_from_parent_turn` and `task_permission_cap` are set by the
    /// resolver and rejected here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<TurnPermissionProfileSource>,
    /// An optional policy file merged over the mode's compiled policy: it can add rules but
    /// never loosen the mode's defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<Policy>,
}

impl TurnPermissionProfileSelection {
    /// A composer selection of `mode`.
    pub fn mode(mode: PermissionMode) -> Self {
        TurnPermissionProfileSelection {
            mode: Some(mode),
            source: None,
            policy: None,
        }
    }
}

/// Why a profile exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TurnPermissionProfileSource {
    /// The user or client selected a mode for this turn.
    Composer,
    /// No profile was provided, so the default full-access profile applies.
    Defaulted,
    /// A child or continuation inherited its parent turn's profile.
    InheritedFromParentTurn,
    /// A task or subagent turn was capped by task policy.
    TaskPermissionCap,
    /// The system selected a system-owned profile.
    System,
}

impl TurnPermissionProfileSource {
    /// The snake_case wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            TurnPermissionProfileSource::Composer => "composer",
            TurnPermissionProfileSource::Defaulted => "defaulted",
            TurnPermissionProfileSource::InheritedFromParentTurn => "inherited_from_parent_turn",
            TurnPermissionProfileSource::TaskPermissionCap => "task_permission_cap",
            TurnPermissionProfileSource::System => "system",
        }
    }
}

/// The materialized profile stored on the turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnPermissionProfileSnapshot {
    /// The mode the turn runs under (after any cap).
    pub mode: PermissionMode,
    /// Where the profile came from.
    pub source: TurnPermissionProfileSource,
    /// The compiled policy the gate evaluates: the mode's policy, any selected policy file
    /// merged over it, and any caps contained in it.
    pub effective_policy: Policy,
    /// A summary of `effective_policy` for clients that do not evaluate policies.
    pub tool_policy: ToolPermissionPolicySnapshot,
}

/// The effective behaviour per action kind plus the tool and path lists of the policy's rules.
/// A summary for display: the gate always evaluates `effective_policy` itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolPermissionPolicySnapshot {
    /// Per action kind (every kind present), the effect when no rule matches: the kind's
    /// default, tightened by every cap.
    pub effects: BTreeMap<ActionKind, Effect>,
    /// Tool-name globs of allow rules.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_tools: Vec<String>,
    /// Tool-name globs of deny rules.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub denied_tools: Vec<String>,
    /// Path globs of file allow rules.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_paths: Vec<String>,
    /// Path globs of file deny rules.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub denied_paths: Vec<String>,
}
