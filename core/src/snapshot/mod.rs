//! Resolves a permission selection into a turn's [`TurnExecutionSecuritySnapshot`], narrows a
//! snapshot by a cap, and answers the questions the rest of the system asks of a snapshot
//! (may a native shell run under it, what does the model need to be told, how does it map onto
//! a CLI runtime).
//!
//! [`resolve`] is a function of its inputs: it never probes the platform (the caller passes
//! [`PlatformCapabilities`], see `probe`) and never enforces anything. Enforcement belongs to
//! the checkers and the sandbox. It looks at the file system only to refuse roots that are not
//! existing directories and, in the restricted modes, roots that are `/`, the user's home or an
//! ancestor of it (followed through symlinks); it reads `HOME` only when the context names no
//! home.

mod cap;
mod enforcement;
mod paths;
mod prompt;
mod runtime;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::action::{ActionKind, Effect};
use crate::error::PolicyError;
use crate::policy::{PermissionMode, Policy};
use crate::protocol::{
    ApprovalScope, BackendRequirement, EnvInheritance, ExecutionBackend, FilesystemEntry, FsAccess,
    FsProvenance, NetworkMode, PlatformCapabilities, SandboxBackendKind, SandboxMode,
    TaskAgentSecurityCap, TmpPolicy, ToolPermissionPolicySnapshot, TurnApprovalPolicySnapshot,
    TurnExecutionSecuritySnapshot, TurnFilesystemSnapshot, TurnNetworkPolicySnapshot,
    TurnPermissionProfileSelection, TurnPermissionProfileSnapshot, TurnPermissionProfileSource,
    TurnProcessPolicySnapshot, TurnSandboxSnapshot, TurnSecurityBackendSnapshot,
    TurnSecurityEnforcementStatus,
};

pub use cap::{cap_from_parent, intersect};
pub use paths::is_within;
pub use prompt::render_permissions_section;
pub use runtime::map_cli_runtime;

/// The timeout cap of the restricted built-in modes: 10 minutes.
pub const RESTRICTED_MAX_DURATION_MS: u64 = 600_000;

/// Everything besides the selection that a snapshot depends on. A plain value, so tests and
/// conformance vectors can inject any platform.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResolveContext {
    /// The turn's workspace root (absolute, canonical).
    pub workspace_root: PathBuf,
    /// Further project roots (absolute, canonical).
    #[serde(default)]
    pub project_roots: Vec<PathBuf>,
    /// App runtime roots, granted read access only.
    #[serde(default)]
    pub app_read_roots: Vec<PathBuf>,
    /// The working directory; relative paths are joined to the workspace root. Absent: the
    /// workspace root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// Who executes the turn's tools.
    pub execution_backend: ExecutionBackend,
    /// The model provider's id, recorded in the backend snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<String>,
    /// The probed platform (`probe::probe_platform()`, or an injected value).
    pub platform: PlatformCapabilities,
    /// The user's home directory, for the home-workspace check. Absent: the process's `HOME`
    /// (`USERPROFILE` on Windows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home: Option<PathBuf>,
    /// Accept a restricted-mode workspace or project root that is `/`, the user's home or an
    /// ancestor of it. Off by default: a workspace is a project, not a home.
    #[serde(default, skip_serializing_if = "is_false")]
    pub allow_home_workspace: bool,
    /// Overrides the mode's network mode for this turn (the CLI's `--net`). In `restricted`,
    /// sandboxed commands reach the network through the egress proxy (DESIGN §13).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_mode: Option<NetworkMode>,
    /// Hosts (`host`, `host:port`, an IP) granted for this turn (the CLI's `--allow-net`),
    /// added to the snapshot's allowed domains.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_domains: Vec<String>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl ResolveContext {
    /// A native-backend context for `workspace_root` on `platform`, with no other roots.
    pub fn new(workspace_root: impl Into<PathBuf>, platform: PlatformCapabilities) -> Self {
        ResolveContext {
            workspace_root: workspace_root.into(),
            project_roots: Vec::new(),
            app_read_roots: Vec::new(),
            cwd: None,
            execution_backend: ExecutionBackend::Native,
            provider_id: None,
            platform,
            home: None,
            allow_home_workspace: false,
            network_mode: None,
            allowed_domains: Vec::new(),
        }
    }
}

/// A snapshot could not be resolved or used. Each variant names the bad input.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum SnapshotError {
    /// A root or the cwd is not a usable path.
    #[error("{what}: `{path}`: {reason}")]
    InvalidPath {
        /// The input field (`context.workspace_root`, `context.project_roots[1]`, ...).
        what: String,
        /// The path as given.
        path: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// In a restricted mode the cwd must lie inside one of the snapshot's roots.
    #[error(
        "context.cwd: `{cwd}` is outside every root of the {mode} snapshot (workspace, project and app roots)"
    )]
    CwdOutsideRoots {
        /// The resolved cwd.
        cwd: String,
        /// The mode.
        mode: PermissionMode,
    },
    /// A restricted mode refuses a workspace or project root that is `/`, the user's home or an
    /// ancestor of it, unless the context sets `allow_home_workspace`.
    #[error(
        "{what}: `{path}` is {relation}; a {mode} workspace must be a project directory, not a home: open a project directory instead, or set `allow_home_workspace` in the context to accept it"
    )]
    HomeAsWorkspace {
        /// The input field (`context.workspace_root`, `context.project_roots[0]`).
        what: String,
        /// The path as given.
        path: String,
        /// What the path is: the file-system root, the home directory, or an ancestor of it.
        relation: String,
        /// The (capped) mode that refused it.
        mode: PermissionMode,
    },
    /// The selection named a source only the resolver may set.
    #[error(
        "selection.source: `{0}` is set by the resolver; a selection may name `composer` or `system`"
    )]
    SourceNotSelectable(&'static str),
    /// The selected policy file did not compile.
    #[error("selection.policy: {0}")]
    Policy(#[from] PolicyError),
    /// A provider-native sandbox protects a CLI runtime's own execution, never a process
    /// turngate spawns.
    #[error(
        "the snapshot's sandbox backend is provider_native ({execution_backend} runtime); it cannot confine a native shell, so native shell execution is refused"
    )]
    ProviderNativeOnNativeShell {
        /// The snapshot's execution backend.
        execution_backend: &'static str,
    },
    /// The snapshot requires a sandbox backend that is unavailable here.
    #[error("the snapshot requires a sandbox backend but enforcement is unavailable: {reasons}")]
    SandboxUnavailable {
        /// The degradation reasons, joined.
        reasons: String,
    },
}

/// Resolve `selection` (absent: the default full-access profile) in `context`, narrowed by
/// `parent_cap` when the turn is a capped child. Pure: the same inputs give the same snapshot.
pub fn resolve(
    selection: Option<&TurnPermissionProfileSelection>,
    context: &ResolveContext,
    parent_cap: Option<&TaskAgentSecurityCap>,
) -> Result<TurnExecutionSecuritySnapshot, SnapshotError> {
    let (mode, source) = mode_and_source(selection)?;
    let restricted = mode != PermissionMode::FullAccess;

    let mut effective_policy = mode.policy();
    if let Some(overlay) = selection.and_then(|s| s.policy.clone()) {
        effective_policy = effective_policy.merge(overlay);
    }
    // Hosts granted for the turn are allow rules too (the host, and its subdomains as the
    // allow-list covers them), in a layer whose network default is the loosest so the merge
    // keeps the mode's: a host not granted still asks where it asked.
    if !context.allowed_domains.is_empty() {
        let mut layer = Policy::new().layer("allowed_domains");
        for host in &context.allowed_domains {
            layer = layer.allow_net(host.clone());
            let named = crate::policy::normalize_network_target(host).ok();
            if named.is_some_and(|t| {
                t.ip.is_none()
                    && crate::check::net::classify_name(&t.host)
                        == crate::check::net::AddressClass::Public
            }) {
                layer = layer.allow_net(format!("*.{}", host.trim_start_matches("*.")));
            }
        }
        layer.defaults.network = Effect::Allow;
        effective_policy = effective_policy.merge(layer);
    }
    // Fail closed on a policy that would not compile (bad glob), naming it now.
    effective_policy.compile()?;

    let workspace = paths::normalize_root(&context.workspace_root, "context.workspace_root")?;
    let mut projects = Vec::new();
    for (i, root) in context.project_roots.iter().enumerate() {
        projects.push(paths::normalize_root(
            root,
            &format!("context.project_roots[{i}]"),
        )?);
    }
    let mut apps = Vec::new();
    for (i, root) in context.app_read_roots.iter().enumerate() {
        apps.push(paths::normalize_root(
            root,
            &format!("context.app_read_roots[{i}]"),
        )?);
    }
    // The mode the turn will run in, a cap included: a restricted child of a full-access parent
    // must not run on a home either.
    let final_mode = parent_cap
        .and_then(|c| c.profile.as_ref())
        .map_or(mode, |p| mode.stricter(p.mode));
    let mut checked: Vec<(&Path, &Path, String)> = vec![(
        &context.workspace_root,
        &workspace,
        "context.workspace_root".to_owned(),
    )];
    for (i, (given, root)) in context.project_roots.iter().zip(&projects).enumerate() {
        checked.push((given, root, format!("context.project_roots[{i}]")));
    }
    if final_mode != PermissionMode::FullAccess && !context.allow_home_workspace {
        let home = match &context.home {
            Some(home) => Some(paths::normalize_root(home, "context.home")?),
            None => paths::process_home(),
        };
        for (given, root, what) in &checked {
            if let Some(relation) = paths::home_relation(root, home.as_deref()) {
                return Err(SnapshotError::HomeAsWorkspace {
                    what: what.clone(),
                    path: given.display().to_string(),
                    relation: relation.to_string(),
                    mode: final_mode,
                });
            }
        }
    }
    for (given, root, what) in &checked {
        paths::ensure_directory(given, root, what)?;
    }
    let cwd = match &context.cwd {
        None => workspace.clone(),
        Some(cwd) if cwd.is_absolute() => paths::normalize_root(cwd, "context.cwd")?,
        Some(cwd) => paths::normalize_root(&workspace.join(cwd), "context.cwd")?,
    };

    let sandbox_mode = match mode {
        PermissionMode::FullAccess => SandboxMode::Unrestricted,
        PermissionMode::AutoAcceptEdits => SandboxMode::WorkspaceWrite,
        PermissionMode::Supervised => SandboxMode::ReadOnly,
    };
    let root_access = if sandbox_mode == SandboxMode::ReadOnly {
        FsAccess::Read
    } else {
        FsAccess::Write
    };
    let mut entries: Vec<FilesystemEntry> = Vec::new();
    let mut add = |path: PathBuf, access: FsAccess, provenance: FsProvenance| {
        if !entries.iter().any(|e| e.path == path) {
            entries.push(FilesystemEntry {
                path,
                access,
                provenance,
            });
        }
    };
    add(workspace, root_access, FsProvenance::Workspace);
    for p in projects {
        add(p, root_access, FsProvenance::Project);
    }
    for p in apps {
        add(p, FsAccess::Read, FsProvenance::Runtime);
    }
    if restricted && !entries.iter().any(|e| is_within(&cwd, &e.path)) {
        return Err(SnapshotError::CwdOutsideRoots {
            cwd: cwd.display().to_string(),
            mode,
        });
    }

    let (mut network, process, approval) = mode_bounds(mode);
    if let Some(net_mode) = context.network_mode {
        network.mode = net_mode;
    }
    for host in &context.allowed_domains {
        if !network.allowed_domains.contains(host) {
            network.allowed_domains.push(host.clone());
        }
    }
    let backend_preference = match context.execution_backend {
        ExecutionBackend::Native => enforcement::native_preference(context.platform.os),
        ExecutionBackend::CodexCli | ExecutionBackend::ClaudeCli => {
            SandboxBackendKind::ProviderNative
        }
    };
    let approval = TurnApprovalPolicySnapshot {
        allowed_scopes: approval,
    };
    let sandbox = TurnSandboxSnapshot {
        mode: sandbox_mode,
        cwd,
        filesystem: TurnFilesystemSnapshot { entries },
        tmp: if restricted {
            TmpPolicy::Isolated
        } else {
            TmpPolicy::Host
        },
        network: network.clone(),
        backend_requirement: if restricted {
            BackendRequirement::Required
        } else {
            BackendRequirement::Optional
        },
        backend_preference,
    };
    let tool_policy = tool_policy_of(&effective_policy);
    let mut snapshot = TurnExecutionSecuritySnapshot {
        permission_profile: TurnPermissionProfileSnapshot {
            mode,
            source,
            effective_policy,
            tool_policy,
        },
        sandbox,
        network,
        process,
        approval,
        backend: TurnSecurityBackendSnapshot {
            execution_backend: context.execution_backend,
            sandbox_backend: SandboxBackendKind::None,
            provider_id: context.provider_id.clone(),
            capabilities: enforcement::capabilities(
                context.execution_backend,
                SandboxBackendKind::None,
                &context.platform,
            ),
            platform: context.platform.clone(),
        },
        enforcement: TurnSecurityEnforcementStatus::Active,
        parent_cap: None,
    };
    refresh_enforcement(&mut snapshot);
    match parent_cap {
        Some(cap) => Ok(intersect(&snapshot, cap)),
        None => Ok(snapshot),
    }
}

/// The network, process and approval bounds a mode starts with.
pub(crate) fn mode_bounds(
    mode: PermissionMode,
) -> (
    TurnNetworkPolicySnapshot,
    TurnProcessPolicySnapshot,
    Vec<ApprovalScope>,
) {
    let restricted = mode != PermissionMode::FullAccess;
    let network = TurnNetworkPolicySnapshot {
        mode: if restricted {
            NetworkMode::Disabled
        } else {
            NetworkMode::Enabled
        },
        allowed_domains: Vec::new(),
        denied_domains: Vec::new(),
        allow_localhost: !restricted,
        allow_unix_sockets: !restricted,
        allowed_tcp_ports: Vec::new(),
    };
    let process = TurnProcessPolicySnapshot {
        shell_enabled: true,
        inherit_stdin: !restricted,
        inherit_session: !restricted,
        env: if restricted {
            EnvInheritance::Filtered
        } else {
            EnvInheritance::All
        },
        max_duration_ms: restricted.then_some(RESTRICTED_MAX_DURATION_MS),
        denied_commands: Vec::new(),
        allowed_command_families: Vec::new(),
    };
    let scopes = if restricted {
        vec![ApprovalScope::AllowOnce, ApprovalScope::AllowForTurn]
    } else {
        ApprovalScope::ALL.to_vec()
    };
    (network, process, scopes)
}

fn mode_and_source(
    selection: Option<&TurnPermissionProfileSelection>,
) -> Result<(PermissionMode, TurnPermissionProfileSource), SnapshotError> {
    let Some(selection) = selection else {
        return Ok((
            PermissionMode::FullAccess,
            TurnPermissionProfileSource::Defaulted,
        ));
    };
    let source = match selection.source {
        None | Some(TurnPermissionProfileSource::Composer) => TurnPermissionProfileSource::Composer,
        Some(TurnPermissionProfileSource::System) => TurnPermissionProfileSource::System,
        Some(other) => return Err(SnapshotError::SourceNotSelectable(other.as_str())),
    };
    match selection.mode {
        Some(mode) => Ok((mode, source)),
        None if selection.source.is_none() => Ok((
            PermissionMode::FullAccess,
            TurnPermissionProfileSource::Defaulted,
        )),
        None => Ok((PermissionMode::FullAccess, source)),
    }
}

/// Recompute the backend selection, its capabilities and the enforcement status from the
/// snapshot's own requirements and its recorded platform.
pub(crate) fn refresh_enforcement(s: &mut TurnExecutionSecuritySnapshot) {
    let needs = enforcement::Needs::of(s.sandbox.mode, &s.network, &s.process, &s.approval);
    let exec = s.backend.execution_backend;
    let platform = &s.backend.platform;
    let backend = enforcement::select_backend(exec, &needs, platform);
    let caps = enforcement::capabilities(exec, backend, platform);
    s.enforcement = enforcement::status(
        exec,
        backend,
        s.sandbox.backend_requirement == BackendRequirement::Required,
        &needs,
        &caps,
        &s.network,
        platform,
    );
    s.backend.sandbox_backend = backend;
    s.backend.capabilities = caps;
}

/// Summarize a policy for clients: per-kind effects (defaults tightened by every cap) and the
/// tool and path globs of its rules (caps included).
pub fn tool_policy_of(policy: &Policy) -> ToolPermissionPolicySnapshot {
    let mut effects = BTreeMap::new();
    for kind in ActionKind::ALL {
        effects.insert(kind, default_effect(policy, kind));
    }
    let mut out = ToolPermissionPolicySnapshot {
        effects,
        allowed_tools: Vec::new(),
        denied_tools: Vec::new(),
        allowed_paths: Vec::new(),
        denied_paths: Vec::new(),
    };
    collect_rules(policy, &mut out);
    out
}

fn default_effect(policy: &Policy, kind: ActionKind) -> Effect {
    policy
        .caps
        .iter()
        .fold(policy.defaults.effective(kind), |e, cap| {
            e.stricter(default_effect(cap, kind))
        })
}

fn collect_rules(policy: &Policy, out: &mut ToolPermissionPolicySnapshot) {
    fn push(list: &mut Vec<String>, item: &str) {
        if !list.iter().any(|x| x == item) {
            list.push(item.to_owned());
        }
    }
    for rule in policy.layers.iter().flat_map(|l| l.rules.iter()) {
        if let Some(tool) = &rule.tool {
            match rule.effect {
                Effect::Allow => push(&mut out.allowed_tools, tool),
                Effect::Deny => push(&mut out.denied_tools, tool),
                Effect::Ask => {}
            }
        }
        if rule.kind.is_file() {
            match rule.effect {
                Effect::Allow => push(&mut out.allowed_paths, &rule.pattern),
                Effect::Deny => push(&mut out.denied_paths, &rule.pattern),
                Effect::Ask => {}
            }
        }
    }
    for cap in &policy.caps {
        collect_rules(cap, out);
    }
}

/// Refuse a native shell under `snapshot`: a provider-native sandbox protects a CLI runtime's
/// own execution, not a process turngate spawns; and a required backend that is unavailable
/// means no sandboxed command may run.
pub fn ensure_native_shell_allowed(
    snapshot: &TurnExecutionSecuritySnapshot,
) -> Result<(), SnapshotError> {
    if snapshot.backend.sandbox_backend == SandboxBackendKind::ProviderNative
        || snapshot.sandbox.backend_preference == SandboxBackendKind::ProviderNative
    {
        return Err(SnapshotError::ProviderNativeOnNativeShell {
            execution_backend: snapshot.backend.execution_backend.as_str(),
        });
    }
    if let TurnSecurityEnforcementStatus::Unavailable { degradations } = &snapshot.enforcement {
        if snapshot.sandbox.backend_requirement == BackendRequirement::Required {
            let reasons = degradations
                .iter()
                .map(|d| d.reason.as_str())
                .collect::<Vec<_>>()
                .join("; ");
            return Err(SnapshotError::SandboxUnavailable { reasons });
        }
    }
    Ok(())
}
