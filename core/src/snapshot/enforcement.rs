//! Which sandbox backend a turn gets, what that backend can enforce on the probed platform, and
//! the enforcement status that follows.
//!
//! Everything here is computed from the [`PlatformCapabilities`] value and the snapshot's own
//! requirements; nothing is assumed and nothing is probed. A requirement the backend cannot
//! meet is always named as a degradation, never dropped.

use crate::protocol::{
    ApprovalScope, BackendCapabilities, Degradation, DegradationArea, EnvInheritance,
    ExecutionBackend, NetworkMode, OsFamily, PlatformCapabilities, SandboxBackendKind, SandboxMode,
    TurnApprovalPolicySnapshot, TurnNetworkPolicySnapshot, TurnProcessPolicySnapshot,
    TurnSecurityEnforcementStatus,
};

/// The Landlock ABI that adds truncate control.
const LANDLOCK_ABI_TRUNCATE: u32 = 3;
/// The Landlock ABI that adds TCP bind/connect rules.
const LANDLOCK_ABI_TCP: u32 = 4;

/// The native backend this OS would use, whether or not it is available.
pub(crate) fn native_preference(os: OsFamily) -> SandboxBackendKind {
    match os {
        OsFamily::Linux => SandboxBackendKind::Nono,
        OsFamily::Macos => SandboxBackendKind::Seatbelt,
        OsFamily::Windows => SandboxBackendKind::RestrictedToken,
        OsFamily::Other => SandboxBackendKind::None,
    }
}

/// Whether the native backend of this OS is usable here.
fn native_available(p: &PlatformCapabilities) -> bool {
    match p.os {
        OsFamily::Linux => p.landlock_abi.is_some_and(|abi| abi >= 1),
        OsFamily::Macos => p.seatbelt,
        OsFamily::Windows => p.restricted_token,
        OsFamily::Other => false,
    }
}

/// Whether a CLI runtime's own sandbox has what it needs here (Codex: Landlock and seccomp on
/// Linux, Seatbelt on macOS).
fn provider_sandbox_available(exec: ExecutionBackend, p: &PlatformCapabilities) -> bool {
    match exec {
        ExecutionBackend::Native => false,
        ExecutionBackend::CodexCli => match p.os {
            OsFamily::Linux => p.landlock_abi.is_some_and(|abi| abi >= 1) && p.seccomp,
            OsFamily::Macos => p.seatbelt,
            OsFamily::Windows | OsFamily::Other => false,
        },
        ExecutionBackend::ClaudeCli => false,
    }
}

/// What the snapshot asks to be enforced.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Needs {
    filesystem: bool,
    network: bool,
    network_ports: bool,
    process: bool,
    approval: bool,
}

impl Needs {
    pub(crate) fn of(
        sandbox_mode: SandboxMode,
        network: &TurnNetworkPolicySnapshot,
        process: &TurnProcessPolicySnapshot,
        approval: &TurnApprovalPolicySnapshot,
    ) -> Needs {
        Needs {
            filesystem: sandbox_mode != SandboxMode::Unrestricted,
            network: network.mode != NetworkMode::Enabled,
            network_ports: network.mode != NetworkMode::Enabled
                && !network.allowed_tcp_ports.is_empty(),
            process: !process.shell_enabled
                || !process.inherit_stdin
                || !process.inherit_session
                || process.env != EnvInheritance::All
                || process.max_duration_ms.is_some()
                || !process.denied_commands.is_empty()
                || !process.allowed_command_families.is_empty(),
            approval: !(approval
                .allowed_scopes
                .contains(&ApprovalScope::AllowForSession)
                && approval.allowed_scopes.contains(&ApprovalScope::Always)),
        }
    }

    fn confinement(&self) -> bool {
        self.filesystem || self.network
    }
}

/// The sandbox backend for the turn: a CLI runtime always uses its provider-native sandbox; a
/// native turn gets the OS backend when something needs confining and it is available, else
/// `none`.
pub(crate) fn select_backend(
    exec: ExecutionBackend,
    needs: &Needs,
    p: &PlatformCapabilities,
) -> SandboxBackendKind {
    match exec {
        ExecutionBackend::CodexCli | ExecutionBackend::ClaudeCli => {
            SandboxBackendKind::ProviderNative
        }
        ExecutionBackend::Native if needs.confinement() && native_available(p) => {
            native_preference(p.os)
        }
        ExecutionBackend::Native => SandboxBackendKind::None,
    }
}

/// What `backend` can enforce for `exec` on platform `p`.
pub(crate) fn capabilities(
    exec: ExecutionBackend,
    backend: SandboxBackendKind,
    p: &PlatformCapabilities,
) -> BackendCapabilities {
    let native = exec == ExecutionBackend::Native;
    let mut c = BackendCapabilities {
        filesystem_read_confinement: false,
        filesystem_write_confinement: false,
        filesystem_truncate_control: false,
        network_blocking: false,
        network_port_rules: false,
        process_policy: native,
        turn_scoped_approvals: native,
    };
    match backend {
        SandboxBackendKind::Nono => {
            let abi = p.landlock_abi.unwrap_or(0);
            c.filesystem_read_confinement = abi >= 1;
            c.filesystem_write_confinement = abi >= 1;
            c.filesystem_truncate_control = abi >= LANDLOCK_ABI_TRUNCATE;
            c.network_blocking = abi >= LANDLOCK_ABI_TCP && p.seccomp;
            c.network_port_rules = abi >= LANDLOCK_ABI_TCP;
        }
        SandboxBackendKind::Seatbelt => {
            c.filesystem_read_confinement = true;
            c.filesystem_write_confinement = true;
            c.filesystem_truncate_control = true;
            c.network_blocking = true;
            c.network_port_rules = true;
        }
        SandboxBackendKind::RestrictedToken => {
            c.filesystem_write_confinement = true;
            c.filesystem_truncate_control = true;
        }
        SandboxBackendKind::ProviderNative => {
            if provider_sandbox_available(exec, p) {
                // Codex's workspace-write/read-only sandbox confines writes and blocks egress,
                // but lets commands read the whole file system.
                c.filesystem_write_confinement = true;
                c.filesystem_truncate_control = true;
                c.network_blocking = true;
            }
        }
        SandboxBackendKind::None => {}
    }
    c
}

fn runtime_name(exec: ExecutionBackend) -> &'static str {
    match exec {
        ExecutionBackend::Native => "turngate",
        ExecutionBackend::CodexCli => "the Codex CLI",
        ExecutionBackend::ClaudeCli => "the Claude CLI",
    }
}

fn missing_backend_reason(exec: ExecutionBackend, p: &PlatformCapabilities) -> String {
    match exec {
        ExecutionBackend::CodexCli => match p.os {
            OsFamily::Linux => "the Codex CLI sandbox needs Landlock and seccomp, and this Linux kernel lacks them, so commands it runs are not confined".to_owned(),
            OsFamily::Macos => "the Codex CLI sandbox needs Seatbelt, which this macOS host lacks, so commands it runs are not confined".to_owned(),
            OsFamily::Windows | OsFamily::Other => "the Codex CLI has no sandbox on this operating system, so commands it runs are not confined".to_owned(),
        },
        ExecutionBackend::ClaudeCli => "the Claude CLI does not kernel-sandbox the commands it runs".to_owned(),
        ExecutionBackend::Native => match p.os {
            OsFamily::Linux => "Landlock is unavailable on this Linux kernel (not built in or disabled at boot), so nono cannot confine commands".to_owned(),
            OsFamily::Macos => "Seatbelt (sandbox-exec) is unavailable on this macOS host".to_owned(),
            OsFamily::Windows => "no restricted-token backend is available on this Windows host".to_owned(),
            OsFamily::Other => "no sandbox backend exists for this operating system".to_owned(),
        },
    }
}

/// The enforcement status: the degradations of every area the snapshot needs, and
/// `unavailable` when a required backend is missing.
pub(crate) fn status(
    exec: ExecutionBackend,
    backend: SandboxBackendKind,
    required: bool,
    needs: &Needs,
    caps: &BackendCapabilities,
    network: &TurnNetworkPolicySnapshot,
    p: &PlatformCapabilities,
) -> TurnSecurityEnforcementStatus {
    let mut out: Vec<Degradation> = Vec::new();
    let mut push = |area: DegradationArea, reasons: Vec<String>| {
        if !reasons.is_empty() {
            out.push(Degradation {
                area,
                reason: reasons.join("; "),
            });
        }
    };
    let who = runtime_name(exec);
    let backend_missing = needs.confinement()
        && match backend {
            SandboxBackendKind::None => true,
            SandboxBackendKind::ProviderNative => !provider_sandbox_available(exec, p),
            _ => false,
        };
    let abi = p.landlock_abi.unwrap_or(0);

    if needs.filesystem && !backend_missing {
        let mut r = Vec::new();
        match backend {
            SandboxBackendKind::Nono => {
                if !caps.filesystem_truncate_control {
                    r.push(format!(
                        "Landlock ABI {abi} cannot restrict file truncation (needs ABI {LANDLOCK_ABI_TRUNCATE})"
                    ));
                }
            }
            SandboxBackendKind::RestrictedToken => {
                r.push(
                    "a restricted token cannot confine reads to the snapshot's roots".to_owned(),
                );
            }
            SandboxBackendKind::ProviderNative => {
                if !caps.filesystem_read_confinement {
                    r.push(format!(
                        "{who} sandbox lets commands read outside the snapshot's roots"
                    ));
                }
            }
            SandboxBackendKind::Seatbelt | SandboxBackendKind::None => {}
        }
        push(DegradationArea::Filesystem, r);
    }

    if needs.network && !backend_missing {
        let mut r = Vec::new();
        match backend {
            SandboxBackendKind::Nono => {
                if abi < LANDLOCK_ABI_TCP {
                    r.push(format!(
                        "Landlock ABI {abi} has no TCP bind/connect rules (needs ABI {LANDLOCK_ABI_TCP}), so TCP egress of sandboxed commands is not blocked"
                    ));
                }
                if !p.seccomp {
                    r.push("seccomp is unavailable, so UDP and other non-TCP sockets of sandboxed commands are not blocked".to_owned());
                }
            }
            SandboxBackendKind::RestrictedToken => {
                r.push("a restricted token cannot block network egress".to_owned());
            }
            _ => {
                if !caps.network_blocking {
                    r.push(format!(
                        "{who} does not block network egress of the commands it runs"
                    ));
                } else if needs.network_ports && !caps.network_port_rules {
                    r.push(format!(
                        "{who} cannot limit egress to TCP ports, so allowed ports are blocked too"
                    ));
                }
            }
        }
        // On Linux with user namespaces the egress proxy enforces the domain allow-list
        // (DESIGN §13): the ports reach only the command's own loopback. Unrestricted
        // sandboxes use no namespaces, so no proxy either.
        let proxied = backend == SandboxBackendKind::Nono && p.user_namespaces && needs.filesystem;
        if network.mode == NetworkMode::Restricted
            && !network.allowed_domains.is_empty()
            && !network.allowed_tcp_ports.is_empty()
            && caps.network_port_rules
            && !proxied
        {
            r.push("allowed TCP ports are open to any host: domain allowlists need a filtering proxy, which this build does not provide".to_owned());
        }
        push(DegradationArea::Network, r);
    }

    if needs.process && !caps.process_policy {
        push(
            DegradationArea::Process,
            vec![format!(
                "{who} spawns commands itself, so turngate's environment filter, timeout cap and command rules do not apply to them"
            )],
        );
    }

    if needs.approval && !caps.turn_scoped_approvals {
        let reason = match exec {
            ExecutionBackend::CodexCli => {
                "the Codex CLI can offer session-wide approvals, broader than allow_once and allow_for_turn"
            }
            _ => {
                "the Claude CLI can offer 'don't ask again' grants that outlive the turn, broader than allow_once and allow_for_turn"
            }
        };
        push(DegradationArea::Approval, vec![reason.to_owned()]);
    }

    if backend_missing {
        push(
            DegradationArea::SandboxBackend,
            vec![missing_backend_reason(exec, p)],
        );
    }

    if out.is_empty() {
        TurnSecurityEnforcementStatus::Active
    } else if backend_missing && required && backend == SandboxBackendKind::None {
        // A native turn whose required backend is missing: sandboxed commands must not run.
        // A CLI runtime without its own sandbox still gates commands with its approval mode,
        // so it is partially active with the missing sandbox named.
        TurnSecurityEnforcementStatus::Unavailable { degradations: out }
    } else {
        TurnSecurityEnforcementStatus::PartiallyActive { degradations: out }
    }
}
