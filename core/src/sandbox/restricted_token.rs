//! The Windows backend (a restricted token). It is not built here: turngate has no Windows
//! machine to verify it on, so the probe says `unavailable` with that reason and a required
//! sandbox refuses to run. Never pretend.

use crate::protocol::SandboxBackendKind;

use super::report::BackendProbe;
use super::spec::SandboxSpec;
use super::{PreparedSandbox, SandboxBackend, SandboxError};

/// The restricted-token backend; unavailable in this build.
#[derive(Debug, Default, Clone, Copy)]
pub struct RestrictedTokenBackend;

impl RestrictedTokenBackend {
    /// A handle on the backend.
    pub fn new() -> Self {
        Self
    }

    fn reason() -> String {
        if cfg!(windows) {
            "the restricted-token backend is not implemented in this build (it could not be \
             verified); commands that require a sandbox are refused"
                .to_string()
        } else {
            format!(
                "restricted tokens exist only on Windows (this is {})",
                std::env::consts::OS
            )
        }
    }
}

impl SandboxBackend for RestrictedTokenBackend {
    fn kind(&self) -> SandboxBackendKind {
        SandboxBackendKind::RestrictedToken
    }

    fn probe(&self) -> BackendProbe {
        BackendProbe {
            backend: SandboxBackendKind::RestrictedToken,
            available: false,
            detail: Self::reason(),
            capabilities: Vec::new(),
        }
    }

    fn prepare(&self, _spec: &SandboxSpec) -> Result<PreparedSandbox, SandboxError> {
        Err(SandboxError::BackendUnavailable {
            backend: SandboxBackendKind::RestrictedToken,
            reason: Self::reason(),
        })
    }
}
