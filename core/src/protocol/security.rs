//! The turn's execution security snapshot and its approval, backend and enforcement parts.
//!
//! Plain data with the seed's names and snake_case JSON. `snapshot::resolve` builds it; the
//! checkers, the approval broker and the sandbox read it. Nothing here decides or enforces.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::cap::TaskAgentSecurityCap;
use super::platform::PlatformCapabilities;
use super::profile::TurnPermissionProfileSnapshot;
use super::sandbox::{
    SandboxBackendKind, TurnNetworkPolicySnapshot, TurnProcessPolicySnapshot, TurnSandboxSnapshot,
};

/// A scope an approval may be granted for. The derived order is breadth:
/// `AllowOnce < AllowForTurn < AllowForSession < Always`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalScope {
    /// This request only.
    AllowOnce,
    /// This normalized scope for the rest of the turn.
    AllowForTurn,
    /// This scope for the rest of the session (never in restricted built-in modes).
    AllowForSession,
    /// This scope from now on (never in restricted built-in modes).
    Always,
}

impl ApprovalScope {
    /// Every scope, narrowest first.
    pub const ALL: [ApprovalScope; 4] = [
        ApprovalScope::AllowOnce,
        ApprovalScope::AllowForTurn,
        ApprovalScope::AllowForSession,
        ApprovalScope::Always,
    ];
}

/// Which approval scopes the turn accepts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnApprovalPolicySnapshot {
    /// The allowed scopes, narrowest first. A resolution naming another scope is refused.
    pub allowed_scopes: Vec<ApprovalScope>,
}

/// Who executes the turn's tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ExecutionBackend {
    /// turngate's own tools runtime spawns processes (native API-provider turns).
    Native,
    /// The Codex CLI runs the turn with its own sandbox and approvals.
    CodexCli,
    /// The Claude CLI runs the turn with its own permission modes.
    ClaudeCli,
}

impl ExecutionBackend {
    /// The snake_case wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            ExecutionBackend::Native => "native",
            ExecutionBackend::CodexCli => "codex_cli",
            ExecutionBackend::ClaudeCli => "claude_cli",
        }
    }
}

/// What the selected backend can enforce on this platform, independent of what the turn needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BackendCapabilities {
    /// Reads of spawned commands can be confined to the snapshot's roots.
    pub filesystem_read_confinement: bool,
    /// Writes of spawned commands can be confined to the snapshot's write roots.
    pub filesystem_write_confinement: bool,
    /// Truncation of files can be controlled (Landlock ABI 3+).
    pub filesystem_truncate_control: bool,
    /// All egress of spawned commands (TCP and UDP) can be blocked.
    pub network_blocking: bool,
    /// TCP connections can be limited to ports (Landlock ABI 4+).
    pub network_port_rules: bool,
    /// turngate's process plan (environment filter, timeout cap, command rules) applies to
    /// spawned commands.
    pub process_policy: bool,
    /// Approval prompts offer only the snapshot's allowed scopes.
    pub turn_scoped_approvals: bool,
}

/// The execution and sandbox backend of the turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnSecurityBackendSnapshot {
    /// native, codex_cli or claude_cli.
    pub execution_backend: ExecutionBackend,
    /// The sandbox backend selected for the turn (`none` when nothing needs confining or
    /// nothing is available).
    pub sandbox_backend: SandboxBackendKind,
    /// The model provider's id, when the caller named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<String>,
    /// What the selected backend can enforce here.
    pub capabilities: BackendCapabilities,
    /// The probed platform the capabilities were derived from.
    pub platform: PlatformCapabilities,
}

/// The part of the snapshot a degradation concerns (the snapshot's `enforcement` areas). One
/// vocabulary for the snapshot's enforcement status and the sandbox backend's report.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum DegradationArea {
    /// Filesystem confinement.
    Filesystem,
    /// Network confinement.
    Network,
    /// Process policy and confinement (environment, timeout, commands, signals, process tree).
    Process,
    /// Approval semantics.
    Approval,
    /// The sandbox backend itself.
    SandboxBackend,
}

/// One named deviation from the requested enforcement.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Degradation {
    /// Which area.
    pub area: DegradationArea,
    /// Why, in words a person can act on.
    pub reason: String,
}

impl Degradation {
    /// A deviation in `area` with `reason`.
    pub fn new(area: DegradationArea, reason: impl Into<String>) -> Self {
        Self {
            area,
            reason: reason.into(),
        }
    }
}

/// Whether the resolved security policy is really enforced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "status", rename_all = "snake_case", deny_unknown_fields)]
pub enum TurnSecurityEnforcementStatus {
    /// Everything the snapshot requires is enforced.
    Active,
    /// Enforced, except for the named degradations.
    PartiallyActive {
        /// What is not enforced, and why.
        degradations: Vec<Degradation>,
    },
    /// A required sandbox backend is unavailable: sandboxed commands must not run.
    Unavailable {
        /// What is missing, and why.
        degradations: Vec<Degradation>,
    },
}

impl TurnSecurityEnforcementStatus {
    /// The degradations (empty when active).
    pub fn degradations(&self) -> &[Degradation] {
        match self {
            TurnSecurityEnforcementStatus::Active => &[],
            TurnSecurityEnforcementStatus::PartiallyActive { degradations }
            | TurnSecurityEnforcementStatus::Unavailable { degradations } => degradations,
        }
    }

    /// The snake_case status name.
    pub const fn as_str(&self) -> &'static str {
        match self {
            TurnSecurityEnforcementStatus::Active => "active",
            TurnSecurityEnforcementStatus::PartiallyActive { .. } => "partially_active",
            TurnSecurityEnforcementStatus::Unavailable { .. } => "unavailable",
        }
    }
}

/// The resolved execution contract for one turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnExecutionSecuritySnapshot {
    /// The compiled profile used by the permission evaluator and the prompt section.
    pub permission_profile: TurnPermissionProfileSnapshot,
    /// Sandbox mode, cwd, filesystem roots, tmp, network mirror and backend requirement.
    pub sandbox: TurnSandboxSnapshot,
    /// The network policy.
    pub network: TurnNetworkPolicySnapshot,
    /// The process policy.
    pub process: TurnProcessPolicySnapshot,
    /// The allowed approval scopes.
    pub approval: TurnApprovalPolicySnapshot,
    /// The execution and sandbox backend.
    pub backend: TurnSecurityBackendSnapshot,
    /// Whether all of it is enforced here, computed from the probe.
    pub enforcement: TurnSecurityEnforcementStatus,
    /// The cap this turn was narrowed by, when it is a capped child turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_cap: Option<TaskAgentSecurityCap>,
}
