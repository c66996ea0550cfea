//! How a permission mode maps onto a CLI runtime's own approval policy.
//!
//! Plain data; `snapshot::map_cli_runtime` fills it in. A mapping that cannot be exact is never
//! looser than the mode: it falls back to something stricter and says so.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::policy::PermissionMode;

/// A CLI runtime that runs turns with its own approvals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CliRuntime {
    /// The Codex CLI (`--ask-for-approval`, `--sandbox`).
    Codex,
    /// The Claude CLI (`--permission-mode`).
    Claude,
}

/// How faithful a mapping is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MappingQuality {
    /// The runtime's policy means the same as the mode.
    Exact,
    /// The runtime has no equivalent; a stricter policy is used (more prompts, never fewer).
    StricterFallback,
}

/// One mode mapped onto one CLI runtime.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CliRuntimeMapping {
    /// The runtime.
    pub runtime: CliRuntime,
    /// The turngate mode.
    pub mode: PermissionMode,
    /// The runtime's approval policy value (Codex `never`/`on-request`; Claude
    /// `bypassPermissions`/`acceptEdits`/`default`).
    pub approval_policy: String,
    /// The runtime's sandbox value, where it has one (Codex `danger-full-access`,
    /// `workspace-write`, `read-only`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
    /// Exact, or a stricter fallback.
    pub quality: MappingQuality,
}
