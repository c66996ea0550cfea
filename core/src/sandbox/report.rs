//! What a sandbox backend could and could not enforce, in the snapshot's vocabulary.
//!
//! A report is computed from the probe and the spec, never assumed. It names every place where
//! enforcement is weaker than the snapshot asked for (a *degradation*) and, separately, every
//! place where it is stricter (a *narrowing*: fail-closed, e.g. "all network blocked because the
//! kernel cannot filter TCP ports").

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::protocol::SandboxBackendKind;
pub use crate::protocol::{Degradation, DegradationArea};

use super::spec::Mask;

/// How much of the requested confinement is in force (the snapshot's enforcement status).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EnforcementLevel {
    /// Everything requested is enforced by the kernel.
    Active,
    /// The kernel enforces some of it; see the degradations.
    PartiallyActive,
    /// Nothing is enforced by a kernel sandbox.
    Unavailable,
}

/// The outcome of probing and preparing a backend for one spec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SandboxReport {
    /// The backend that was (or would have been) used.
    pub backend: SandboxBackendKind,
    /// active, partially_active or unavailable; computed from `degradations`.
    pub status: EnforcementLevel,
    /// Backend detail, e.g. `"landlock V7 (enforcing V6)"`.
    pub detail: String,
    /// Where enforcement is weaker than requested.
    pub degradations: Vec<Degradation>,
    /// Where enforcement is stricter than requested (fail-closed substitutions).
    pub narrowings: Vec<Degradation>,
    /// The namespaces the command runs in (Linux: `user`, `mount`, `pid`, `network`, `uts`,
    /// `ipc`); empty where the namespace layer is off or does not exist.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
    /// What the mount view hides, binds read-only or empties.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub masks: Vec<Mask>,
    /// Protected files the command created, moved into quarantine after it ended so they
    /// never take effect (ADR 0020).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub quarantined: Vec<super::protect::QuarantinedPath>,
}

impl SandboxReport {
    /// A report for a backend that enforces nothing, with the reason.
    pub fn unavailable(backend: SandboxBackendKind, reason: impl Into<String>) -> Self {
        let reason = reason.into();
        Self {
            backend,
            status: EnforcementLevel::Unavailable,
            detail: reason.clone(),
            degradations: vec![Degradation::new(DegradationArea::SandboxBackend, reason)],
            narrowings: Vec::new(),
            namespaces: Vec::new(),
            masks: Vec::new(),
            quarantined: Vec::new(),
        }
    }

    /// A report for an applied sandbox; the status follows from the degradations.
    pub fn applied(
        backend: SandboxBackendKind,
        detail: impl Into<String>,
        degradations: Vec<Degradation>,
        narrowings: Vec<Degradation>,
    ) -> Self {
        let status = if degradations.is_empty() {
            EnforcementLevel::Active
        } else {
            EnforcementLevel::PartiallyActive
        };
        Self {
            backend,
            status,
            detail: detail.into(),
            degradations,
            narrowings,
            namespaces: Vec::new(),
            masks: Vec::new(),
            quarantined: Vec::new(),
        }
    }

    /// Record what the scan for protected files created during the run found (ADR 0020): the
    /// quarantined entries, and a filesystem degradation for a scan that could not complete
    /// (what it could not judge or move is not known to be harmless).
    pub fn add_quarantine(&mut self, quarantine: super::protect::Quarantine) {
        self.quarantined.extend(quarantine.quarantined);
        if !quarantine.incomplete.is_empty() {
            self.degradations.push(Degradation::new(
                DegradationArea::Filesystem,
                format!(
                    "the scan for protected files created by the command did not complete: {}",
                    quarantine.incomplete.join("; ")
                ),
            ));
            self.status = EnforcementLevel::PartiallyActive;
        }
    }

    /// The degradations as `(area, reason)` pairs, the shape the snapshot stores.
    pub fn degradation_pairs(&self) -> Vec<(DegradationArea, String)> {
        self.degradations
            .iter()
            .map(|d| (d.area, d.reason.clone()))
            .collect()
    }
}

/// What a backend's probe found on this machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BackendProbe {
    /// The backend probed.
    pub backend: SandboxBackendKind,
    /// Whether it can confine a process here.
    pub available: bool,
    /// Version or reason, e.g. `"landlock V7 (enforcing V6)"` or why it is unavailable.
    pub detail: String,
    /// Capability names (`"filesystem"`, `"network_block"`, `"tcp_port_rules"`, ...).
    pub capabilities: Vec<String>,
}
