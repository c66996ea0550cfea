//! Permission modes and the policies they compile to.

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::action::{ActionKind, Effect};
use crate::error::PolicyError;
use crate::policy::{Defaults, Policy};

/// The three built-in permission modes. The derived order is strictness:
/// `FullAccess < AutoAcceptEdits < Supervised`.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Default,
    Serialize,
    Deserialize,
    JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum PermissionMode {
    /// Everything allowed without asking. The default when no profile is selected.
    #[default]
    FullAccess,
    /// File reads, file writes and MCP reads allowed; everything else asks.
    AutoAcceptEdits,
    /// File reads and MCP reads allowed; everything else asks.
    Supervised,
}

impl PermissionMode {
    /// Every mode, least strict first.
    pub const ALL: [PermissionMode; 3] = [
        PermissionMode::FullAccess,
        PermissionMode::AutoAcceptEdits,
        PermissionMode::Supervised,
    ];

    /// The snake_case wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            PermissionMode::FullAccess => "full_access",
            PermissionMode::AutoAcceptEdits => "auto_accept_edits",
            PermissionMode::Supervised => "supervised",
        }
    }

    /// The label a UI shows.
    pub const fn ui_label(self) -> &'static str {
        match self {
            PermissionMode::FullAccess => "Full access",
            PermissionMode::AutoAcceptEdits => "Auto-accept edits",
            PermissionMode::Supervised => "Supervised",
        }
    }

    /// The stricter of two modes.
    pub fn stricter(self, other: PermissionMode) -> PermissionMode {
        self.max(other)
    }

    /// The kinds this mode allows without asking (every other kind asks).
    pub fn allowed_kinds(self) -> &'static [ActionKind] {
        match self {
            PermissionMode::FullAccess => &ActionKind::ALL,
            PermissionMode::AutoAcceptEdits => &[
                ActionKind::FileRead,
                ActionKind::FileWrite,
                ActionKind::McpRead,
            ],
            PermissionMode::Supervised => &[ActionKind::FileRead, ActionKind::McpRead],
        }
    }

    /// The compiled policy: every kind's default set explicitly. The restricted modes add
    /// layer `builtin-secrets` (secret files denied for read and write) and layer
    /// `builtin-protected` (writing git hooks and config asks); `full_access` has no rules.
    pub fn policy(self) -> Policy {
        let mut defaults = Defaults::all(Effect::Ask);
        for kind in self.allowed_kinds() {
            defaults.set(*kind, Effect::Allow);
        }
        let policy = Policy {
            name: Some(format!("mode:{}", self.as_str())),
            defaults,
            layers: Vec::new(),
            caps: Vec::new(),
        };
        match self {
            PermissionMode::FullAccess => policy,
            PermissionMode::AutoAcceptEdits | PermissionMode::Supervised => {
                policy.with_builtin_secrets().with_builtin_protected()
            }
        }
    }
}

impl fmt::Display for PermissionMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for PermissionMode {
    type Err = PolicyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PermissionMode::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| PolicyError::UnknownMode(s.to_owned()))
    }
}
