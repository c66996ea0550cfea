//! Narrowing a snapshot by a cap, and deriving a cap from a parent snapshot.
//!
//! [`intersect`] is restrictive on every field: the result is never broader than the snapshot
//! nor the cap. Where two bounds cannot be expressed exactly in the snapshot's vocabulary, the
//! result falls back to something stricter, never looser.

use std::path::Path;

use crate::action::{ActionKind, Effect};
use crate::policy::{PermissionMode, Policy};
use crate::protocol::{
    BackendRequirement, CapOrigin, EnvInheritance, FilesystemEntry, FsAccess, FsProvenance,
    NetworkMode, SandboxMode, TaskAgentSecurityCap, TmpPolicy, TurnExecutionSecuritySnapshot,
    TurnFilesystemSnapshot, TurnNetworkPolicySnapshot, TurnPermissionProfileCap,
    TurnPermissionProfileSource, TurnProcessPolicySnapshot,
};

use super::paths::is_within;
use super::{refresh_enforcement, tool_policy_of};

/// The name of the cap policy added when allowed command families have nothing in common.
pub const COMMAND_FAMILY_CAP: &str = "cap:command-families";

/// Derive the cap a child of `parent` receives: the parent's mode and effective policy, sandbox
/// mode, roots (none when unrestricted), network, process and approval scopes.
pub fn cap_from_parent(
    parent: &TurnExecutionSecuritySnapshot,
    origin: CapOrigin,
) -> TaskAgentSecurityCap {
    TaskAgentSecurityCap {
        origin,
        profile: Some(TurnPermissionProfileCap {
            mode: parent.permission_profile.mode,
            policy: Some(parent.permission_profile.effective_policy.clone()),
        }),
        sandbox_mode: Some(parent.sandbox.mode),
        filesystem: (parent.sandbox.mode != SandboxMode::Unrestricted)
            .then(|| parent.sandbox.filesystem.clone()),
        network: Some(parent.network.clone()),
        process: Some(parent.process.clone()),
        approval_scopes: Some(parent.approval.allowed_scopes.clone()),
    }
}

/// Narrow `snapshot` by `cap`. Every field of the result is at least as strict as the same
/// field of the snapshot and of the cap; the profile source becomes `task_permission_cap` or
/// `inherited_from_parent_turn`, and the enforcement status is recomputed from the recorded
/// platform.
pub fn intersect(
    snapshot: &TurnExecutionSecuritySnapshot,
    cap: &TaskAgentSecurityCap,
) -> TurnExecutionSecuritySnapshot {
    let mut out = snapshot.clone();

    // Profile: the stricter mode; the cap's policy (and the stricter mode's policy) contained.
    let profile = &mut out.permission_profile;
    let mut policy = profile.effective_policy.clone();
    let (network, process, approval) = (&mut out.network, &mut out.process, &mut out.approval);
    if let Some(pcap) = &cap.profile {
        if pcap.mode > profile.mode {
            policy = policy.contain(pcap.mode.policy());
        }
        if let Some(cap_policy) = &pcap.policy {
            if *cap_policy != pcap.mode.policy() || pcap.mode <= profile.mode {
                policy = policy.contain(cap_policy.clone());
            }
        }
        if pcap.mode > profile.mode {
            // The stricter mode brings its resource bounds along with its policy.
            let (net, proc, scopes) = super::mode_bounds(pcap.mode);
            *network = intersect_network(network, &net);
            *process = intersect_process(process, &proc).0;
            approval.allowed_scopes.retain(|s| scopes.contains(s));
        }
        profile.mode = profile.mode.stricter(pcap.mode);
    }
    profile.source = match cap.origin {
        CapOrigin::ParentTurn => TurnPermissionProfileSource::InheritedFromParentTurn,
        CapOrigin::TaskPolicy => TurnPermissionProfileSource::TaskPermissionCap,
    };

    // Sandbox mode: the strictest of the snapshot's, the cap's and the one the mode implies.
    let mode_sandbox = match profile.mode {
        PermissionMode::FullAccess => SandboxMode::Unrestricted,
        PermissionMode::AutoAcceptEdits => SandboxMode::WorkspaceWrite,
        PermissionMode::Supervised => SandboxMode::ReadOnly,
    };
    let mut sandbox_mode = out.sandbox.mode.max(mode_sandbox);
    if let Some(m) = cap.sandbox_mode {
        sandbox_mode = sandbox_mode.max(m);
    }

    // Filesystem: an unrestricted snapshot grants everything; a cap without roots bounds
    // nothing. A bounded result can no longer be unrestricted.
    let snapshot_universe = snapshot.sandbox.mode == SandboxMode::Unrestricted;
    let mut entries = match (&cap.filesystem, snapshot_universe) {
        (None, _) => out.sandbox.filesystem.entries.clone(),
        (Some(cap_fs), true) => cap_fs
            .entries
            .iter()
            .map(|c| FilesystemEntry {
                path: c.path.clone(),
                access: c.access,
                provenance: FsProvenance::TaskCap,
            })
            .collect(),
        (Some(cap_fs), false) => intersect_roots(&out.sandbox.filesystem.entries, &cap_fs.entries),
    };
    if cap.filesystem.is_some() && sandbox_mode == SandboxMode::Unrestricted {
        sandbox_mode = SandboxMode::WorkspaceWrite;
    }
    if sandbox_mode == SandboxMode::ReadOnly {
        for e in &mut entries {
            e.access = FsAccess::Read;
        }
    }
    out.sandbox.mode = sandbox_mode;
    out.sandbox.filesystem = TurnFilesystemSnapshot { entries };
    if sandbox_mode != SandboxMode::Unrestricted {
        out.sandbox.tmp = TmpPolicy::Isolated;
        out.sandbox.backend_requirement = BackendRequirement::Required;
    }

    // Network.
    if let Some(net) = &cap.network {
        out.network = intersect_network(&out.network, net);
    }
    out.sandbox.network = out.network.clone();

    // Process.
    if let Some(proc) = &cap.process {
        let (process, families_emptied) = intersect_process(&out.process, proc);
        out.process = process;
        if families_emptied {
            // Both sides limited what runs without asking and share nothing: every command
            // must ask at least.
            policy = policy.contain(
                Policy::permissive()
                    .named(COMMAND_FAMILY_CAP)
                    .with_default(ActionKind::ShellCommand, Effect::Ask),
            );
        }
    }

    // Approval scopes.
    if let Some(scopes) = &cap.approval_scopes {
        out.approval.allowed_scopes.retain(|s| scopes.contains(s));
    }

    out.permission_profile.tool_policy = tool_policy_of(&policy);
    out.permission_profile.effective_policy = policy;
    out.parent_cap = Some(cap.clone());
    refresh_enforcement(&mut out);
    out
}

/// Roots inside both: for each pair where one contains the other, the deeper path, writable
/// only when both grant write.
fn intersect_roots(ours: &[FilesystemEntry], caps: &[FilesystemEntry]) -> Vec<FilesystemEntry> {
    let mut out: Vec<FilesystemEntry> = Vec::new();
    let mut add = |path: &Path, access: FsAccess, provenance: FsProvenance| {
        if let Some(existing) = out.iter_mut().find(|e| e.path == path) {
            existing.access = existing.access.max(access);
            return;
        }
        out.push(FilesystemEntry {
            path: path.to_path_buf(),
            access,
            provenance,
        });
    };
    for e in ours {
        for c in caps {
            let access = e.access.min(c.access);
            if is_within(&e.path, &c.path) {
                add(&e.path, access, e.provenance);
            } else if is_within(&c.path, &e.path) {
                add(&c.path, access, FsProvenance::TaskCap);
            }
        }
    }
    out
}

fn normalize_domain(d: &str) -> String {
    d.trim_end_matches('.').to_lowercase()
}

/// Whether domain rule `rule` covers `domain` (equal, or a subdomain at a label boundary).
fn domain_covers(rule: &str, domain: &str) -> bool {
    let (rule, domain) = (normalize_domain(rule), normalize_domain(domain));
    domain == rule || domain.ends_with(&format!(".{rule}"))
}

fn push_unique<T: PartialEq + Clone>(list: &mut Vec<T>, item: &T) {
    if !list.contains(item) {
        list.push(item.clone());
    }
}

/// Mode stricter, deny lists union, allow lists intersect, flags AND, ports intersect. Two
/// port lists with nothing in common disable the network (an empty list would mean any port).
pub(crate) fn intersect_network(
    a: &TurnNetworkPolicySnapshot,
    b: &TurnNetworkPolicySnapshot,
) -> TurnNetworkPolicySnapshot {
    let mut mode = a.mode.max(b.mode);
    let mut denied = Vec::new();
    for d in a.denied_domains.iter().chain(&b.denied_domains) {
        push_unique(&mut denied, d);
    }
    // An enabled side allows any host, so its list does not bound the other side.
    let allowed = match (
        a.mode == NetworkMode::Enabled,
        b.mode == NetworkMode::Enabled,
    ) {
        (true, true) => Vec::new(),
        (true, false) => b.allowed_domains.clone(),
        (false, true) => a.allowed_domains.clone(),
        (false, false) => {
            let mut out = Vec::new();
            for x in &a.allowed_domains {
                if b.allowed_domains.iter().any(|y| domain_covers(y, x)) {
                    push_unique(&mut out, x);
                }
            }
            for y in &b.allowed_domains {
                if a.allowed_domains.iter().any(|x| domain_covers(x, y)) {
                    push_unique(&mut out, y);
                }
            }
            out
        }
    };
    let ports = match (
        a.allowed_tcp_ports.is_empty(),
        b.allowed_tcp_ports.is_empty(),
    ) {
        (true, _) => b.allowed_tcp_ports.clone(),
        (false, true) => a.allowed_tcp_ports.clone(),
        (false, false) => {
            let common: Vec<u16> = a
                .allowed_tcp_ports
                .iter()
                .filter(|p| b.allowed_tcp_ports.contains(p))
                .copied()
                .collect();
            if common.is_empty() {
                mode = NetworkMode::Disabled;
            }
            common
        }
    };
    TurnNetworkPolicySnapshot {
        mode,
        allowed_domains: allowed,
        denied_domains: denied,
        allow_localhost: a.allow_localhost && b.allow_localhost,
        allow_unix_sockets: a.allow_unix_sockets && b.allow_unix_sockets,
        allowed_tcp_ports: ports,
    }
}

fn env_rank(e: EnvInheritance) -> u8 {
    match e {
        EnvInheritance::All => 0,
        EnvInheritance::Filtered => 1,
        EnvInheritance::None => 2,
    }
}

/// Flags AND, stricter env, shorter timeout, denied commands union, allowed families intersect
/// (exact glob text, or `*` on one side). Returns whether two non-empty family lists had
/// nothing in common (an empty list would mean "no limit", so the caller must add a cap).
pub(crate) fn intersect_process(
    a: &TurnProcessPolicySnapshot,
    b: &TurnProcessPolicySnapshot,
) -> (TurnProcessPolicySnapshot, bool) {
    let mut denied = Vec::new();
    for d in a.denied_commands.iter().chain(&b.denied_commands) {
        push_unique(&mut denied, d);
    }
    let mut emptied = false;
    let families = match (
        a.allowed_command_families.is_empty(),
        b.allowed_command_families.is_empty(),
    ) {
        (true, _) => b.allowed_command_families.clone(),
        (false, true) => a.allowed_command_families.clone(),
        (false, false) => {
            let mut out = Vec::new();
            for x in &a.allowed_command_families {
                if b.allowed_command_families
                    .iter()
                    .any(|y| y == x || y == "*")
                {
                    push_unique(&mut out, x);
                }
            }
            for y in &b.allowed_command_families {
                if a.allowed_command_families.iter().any(|x| x == "*") {
                    push_unique(&mut out, y);
                }
            }
            emptied = out.is_empty();
            out
        }
    };
    let max_duration_ms = match (a.max_duration_ms, b.max_duration_ms) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    };
    let env = if env_rank(a.env) >= env_rank(b.env) {
        a.env
    } else {
        b.env
    };
    (
        TurnProcessPolicySnapshot {
            shell_enabled: a.shell_enabled && b.shell_enabled,
            inherit_stdin: a.inherit_stdin && b.inherit_stdin,
            inherit_session: a.inherit_session && b.inherit_session,
            env,
            max_duration_ms,
            denied_commands: denied,
            allowed_command_families: families,
        },
        emptied,
    )
}
