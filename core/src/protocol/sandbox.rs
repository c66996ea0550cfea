//! The resource boundary parts of a turn's snapshot: sandbox, filesystem, network, process.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The sandbox mode. The derived order is strictness: `Unrestricted < WorkspaceWrite < ReadOnly`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SandboxMode {
    /// No filesystem confinement (full access).
    Unrestricted,
    /// Workspace and project roots writable, app roots readable.
    WorkspaceWrite,
    /// Every root read-only.
    ReadOnly,
}

/// The access a filesystem entry grants. `Write` implies read.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum FsAccess {
    /// Read and list.
    Read,
    /// Read, list, create, write and delete.
    Write,
}

/// Where a filesystem entry came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FsProvenance {
    /// The turn's workspace root.
    Workspace,
    /// A project root.
    Project,
    /// An app runtime read root.
    Runtime,
    /// Granted by a task cap.
    TaskCap,
    /// Added by the system (e.g. an isolated tmp dir).
    System,
    /// Selected in the composer.
    Composer,
}

/// One root the turn may access.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FilesystemEntry {
    /// An absolute path.
    pub path: PathBuf,
    /// Read or write.
    pub access: FsAccess,
    /// Where this entry came from.
    pub provenance: FsProvenance,
}

/// The filesystem roots of a turn.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnFilesystemSnapshot {
    /// The roots; a path outside every entry is refused (unless the sandbox is unrestricted).
    pub entries: Vec<FilesystemEntry>,
}

/// The temporary-directory policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TmpPolicy {
    /// The host's shared tmp.
    Host,
    /// A private tmp dir per turn (restricted modes).
    Isolated,
}

/// Whether a sandbox backend must be present for commands to run.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum BackendRequirement {
    /// Run unconfined when no backend is available.
    Optional,
    /// Refuse to run when the backend is unavailable.
    Required,
}

/// The kernel sandbox backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SandboxBackendKind {
    /// Linux: nono (Landlock + seccomp).
    Nono,
    /// macOS Seatbelt.
    Seatbelt,
    /// Windows restricted token.
    RestrictedToken,
    /// The CLI runtime's own sandbox (protects provider-runtime execution only).
    ProviderNative,
    /// No sandbox.
    None,
}

/// The network mode.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum NetworkMode {
    /// Any host (subject to the denied list and address classes).
    Enabled,
    /// Only allowed domains (and grants).
    Restricted,
    /// No connection without a grant.
    Disabled,
}

/// The turn's network policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnNetworkPolicySnapshot {
    /// enabled, restricted or disabled.
    pub mode: NetworkMode,
    /// Allowed domains. `example.com` covers `example.com` and its subdomains, at label
    /// boundaries only.
    #[serde(default)]
    pub allowed_domains: Vec<String>,
    /// Denied domains, checked before allowed ones.
    #[serde(default)]
    pub denied_domains: Vec<String>,
    /// Whether loopback addresses may be reached.
    #[serde(default)]
    pub allow_localhost: bool,
    /// Whether unix-domain sockets may be used.
    #[serde(default)]
    pub allow_unix_sockets: bool,
    /// When non-empty, the only TCP ports a sandboxed process may connect to.
    #[serde(default)]
    pub allowed_tcp_ports: Vec<u16>,
}

/// How a spawned process inherits the environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EnvInheritance {
    /// The whole parent environment (full access).
    All,
    /// The parent environment minus secret-like names, credential-bearing values and
    /// loader/interpreter injection variables; PATH rebuilt from trusted entries.
    Filtered,
    /// Nothing but a minimal PATH, HOME and PWD.
    None,
}

/// The turn's process policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnProcessPolicySnapshot {
    /// Whether shell commands may run at all.
    pub shell_enabled: bool,
    /// Whether the child inherits stdin.
    pub inherit_stdin: bool,
    /// Whether the child stays in the parent's session (otherwise it gets its own).
    pub inherit_session: bool,
    /// Environment inheritance.
    pub env: EnvInheritance,
    /// Maximum wall-clock duration in milliseconds; `None` for no cap.
    pub max_duration_ms: Option<u64>,
    /// Program globs that are always denied.
    #[serde(default)]
    pub denied_commands: Vec<String>,
    /// When non-empty, program globs that may run without asking (others ask).
    #[serde(default)]
    pub allowed_command_families: Vec<String>,
}

/// The turn's sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnSandboxSnapshot {
    /// unrestricted, workspace_write or read_only.
    pub mode: SandboxMode,
    /// The resolved working directory for relative paths and process cwd checks.
    pub cwd: PathBuf,
    /// The roots.
    pub filesystem: TurnFilesystemSnapshot,
    /// host or isolated tmp.
    pub tmp: TmpPolicy,
    /// A mirror of the turn's network policy.
    pub network: TurnNetworkPolicySnapshot,
    /// Whether a backend must be present.
    pub backend_requirement: BackendRequirement,
    /// The preferred backend.
    pub backend_preference: SandboxBackendKind,
}
