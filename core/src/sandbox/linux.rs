//! The Linux backend: Landlock (filesystem, TCP ports, signal and abstract-socket scoping) and a
//! static seccomp socket filter, both through the pinned `nono` crate.
//!
//! The parent detects the ABI once and prepares every spawn (opens the rule paths, builds the
//! rules and the BPF program). The child applies it in `pre_exec` with `apply_raw()`, which
//! makes raw syscalls only: no allocation, no lock, safe after `fork` in a multi-threaded host.
//! The parent is never sandboxed. `apply_auto()` is never used (its fallback leaves UDP open).

use std::sync::{Arc, OnceLock};

use nono::sandbox::PreparedLandlockSandbox;
use nono::{AccessMode, CapabilitySet, DetectedAbi, FsCapability, IpcMode, Sandbox, SeccompOpts};

use crate::protocol::{FsAccess, SandboxBackendKind};

use super::landlock_plan::{NONO_MAX_ENFORCED_ABI, NetPlan, plan};
use super::report::{BackendProbe, Degradation, DegradationArea, SandboxReport};
use super::spec::SandboxSpec;
use super::{Launch, PreparedSandbox, SandboxBackend, SandboxError};

/// The nono (Landlock + seccomp) backend. Cheap to create; the ABI is detected once per process.
#[derive(Debug, Default, Clone, Copy)]
pub struct LinuxNonoBackend;

fn detected() -> &'static Result<DetectedAbi, String> {
    static ABI: OnceLock<Result<DetectedAbi, String>> = OnceLock::new();
    ABI.get_or_init(|| nono::detect_abi().map_err(|e| e.to_string()))
}

impl LinuxNonoBackend {
    /// A handle on the backend.
    pub fn new() -> Self {
        Self
    }

    /// The Landlock ABI number the kernel reports and a probe confirmed, if any.
    pub fn abi_version(&self) -> Option<u32> {
        detected().as_ref().ok().map(|abi| abi.abi as u32)
    }

    fn detail(abi: &DetectedAbi) -> String {
        format!(
            "landlock {} (enforcing {}) + seccomp socket filter, nono 0.81.0",
            abi.version_string(),
            abi.enforced_version_string()
        )
    }
}

fn access_mode(access: FsAccess) -> AccessMode {
    match access {
        FsAccess::Read => AccessMode::Read,
        FsAccess::Write => AccessMode::ReadWrite,
    }
}

impl SandboxBackend for LinuxNonoBackend {
    fn kind(&self) -> SandboxBackendKind {
        SandboxBackendKind::Nono
    }

    fn probe(&self) -> BackendProbe {
        match detected() {
            Ok(abi) => {
                let v = (abi.abi as u32).min(NONO_MAX_ENFORCED_ABI);
                let mut capabilities = vec!["filesystem".to_string(), "network_block".to_string()];
                if v >= 4 {
                    capabilities.push("tcp_port_rules".to_string());
                }
                if v >= 6 {
                    capabilities.push("signal_scoping".to_string());
                    capabilities.push("abstract_unix_scoping".to_string());
                }
                BackendProbe {
                    backend: SandboxBackendKind::Nono,
                    available: true,
                    detail: Self::detail(abi),
                    capabilities,
                }
            }
            Err(reason) => BackendProbe {
                backend: SandboxBackendKind::Nono,
                available: false,
                detail: format!("Landlock is not available: {reason}"),
                capabilities: Vec::new(),
            },
        }
    }

    fn prepare(&self, spec: &SandboxSpec) -> Result<PreparedSandbox, SandboxError> {
        let abi = match detected() {
            Ok(abi) => *abi,
            Err(reason) => {
                return Err(SandboxError::BackendUnavailable {
                    backend: SandboxBackendKind::Nono,
                    reason: format!("Landlock is not available: {reason}"),
                });
            }
        };
        let planned = plan(spec, abi.abi as u32);
        let mut narrowings = planned.narrowings;
        let degradations: Vec<Degradation> = planned.degradations;

        let mut caps = CapabilitySet::new();
        for grant in spec.effective_grants() {
            let meta = match std::fs::metadata(&grant.path) {
                Ok(meta) => meta,
                Err(err) => {
                    if spec.is_turn_root(&grant.path) {
                        narrowings.push(Degradation::new(
                            DegradationArea::Filesystem,
                            format!("root {} is not granted: {err}", grant.path.display()),
                        ));
                    }
                    continue;
                }
            };
            let mode = access_mode(grant.access);
            let cap = if meta.is_dir() {
                FsCapability::new_dir(&grant.path, mode)
            } else {
                FsCapability::new_file(&grant.path, mode)
            }
            .map_err(|e| SandboxError::Prepare(format!("grant {}: {e}", grant.path.display())))?;
            caps.add_fs(cap);
        }

        caps = match &planned.net {
            NetPlan::AllowAll => caps,
            NetPlan::BlockAll => caps.block_network(),
            NetPlan::TcpConnect(ports) => ports
                .iter()
                .fold(caps.block_network(), |c, p| c.allow_tcp_connect(*p)),
        };
        if planned.allow_abstract_unix {
            caps = caps.set_ipc_mode(IpcMode::Full);
        }

        let prepared: PreparedLandlockSandbox =
            Sandbox::prepare_seccomp_with_abi(&caps, &abi, SeccompOpts::network_baseline())
                .map_err(|e| SandboxError::Prepare(e.to_string()))?;

        Ok(PreparedSandbox {
            report: SandboxReport::applied(
                SandboxBackendKind::Nono,
                Self::detail(&abi),
                degradations,
                narrowings,
            ),
            launch: Launch::PreExec(Arc::new(prepared)),
        })
    }
}
