//! Native sandbox backends and the process runner.
//!
//! This module runs a command that the checkers already allowed, confined by a kernel sandbox
//! built from the turn's [`TurnSandboxSnapshot`](crate::protocol::TurnSandboxSnapshot), and
//! reports honestly what the platform could enforce. It never decides whether a command may run
//! (the checkers do), and it never runs a command unconfined when the snapshot requires a
//! sandbox that is unavailable.
//!
//! From a snapshot to a sandboxed run:
//!
//! ```no_run
//! # fn demo(snapshot: &turngate::protocol::TurnSandboxSnapshot) -> Result<(), turngate::sandbox::RunError> {
//! use std::time::Duration;
//! use turngate::sandbox::{ProcessRequest, ProcessRunner, SandboxSpec};
//!
//! let runner = ProcessRunner::native();
//! let request = ProcessRequest::new(["/bin/sh", "-c", "echo hi > out.txt"], &snapshot.cwd)
//!     .env([("PATH", "/usr/bin:/bin")])
//!     .timeout(Duration::from_secs(30))
//!     .sandbox(SandboxSpec::from_snapshot(snapshot));
//! let outcome = runner.run_blocking(request)?;
//! println!("exit {:?}, sandbox {:?}", outcome.exit_code, outcome.sandbox.map(|r| r.status));
//! # Ok(()) }
//! ```

use std::path::PathBuf;
use std::sync::Arc;

use crate::protocol::{BackendRequirement, SandboxBackendKind};

pub mod egress;
pub mod landlock_plan;
#[cfg(target_os = "linux")]
mod linux;
#[cfg(unix)]
pub mod masks;
#[cfg(target_os = "linux")]
pub mod namespace;
pub mod protect;
mod report;
mod restricted_token;
mod runner;
pub mod seatbelt;
mod spec;
#[cfg(unix)]
mod tree;
#[cfg(target_os = "linux")]
mod unix_filter;

#[cfg(target_os = "linux")]
pub use linux::LinuxNonoBackend;
#[cfg(target_os = "linux")]
pub use namespace::NamespaceSupport;
pub use protect::QuarantinedPath;
pub use report::{BackendProbe, Degradation, DegradationArea, EnforcementLevel, SandboxReport};
pub use restricted_token::RestrictedTokenBackend;
pub use runner::{
    OutputSink, OutputStream, PipeEnd, ProcessOutcome, ProcessRequest, ProcessRunner, RunError,
    StdinPolicy, StdioPipes,
};
pub use seatbelt::SeatbeltBackend;
pub use spec::{
    FsGrant, HOME_CONFIG, HOME_TOOLCHAINS, HOST_TMP_DIRS, Mask, MaskKind, ReviewLayer,
    SYSTEM_READ_DEVICES, SYSTEM_READ_DIRS, SYSTEM_READ_ETC, SYSTEM_RW_DEVICES, SandboxSpec,
    TmpSpec,
};

/// Why a sandbox could not be set up. The command has not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// The backend cannot confine a process on this machine and the snapshot requires one.
    #[error(
        "sandbox backend {backend:?} is required but unavailable: {reason}. The command was not \
         run; use a machine with this backend or a profile whose sandbox is optional"
    )]
    BackendUnavailable {
        /// The backend.
        backend: SandboxBackendKind,
        /// Why it is unavailable.
        reason: String,
    },
    /// A provider-native snapshot was used on the native shell path.
    #[error(
        "a provider-native sandbox protects provider-runtime execution only, not a process \
         turngate spawns; resolve the snapshot for the native backend"
    )]
    ProviderNative,
    /// The backend is present but preparing the rules failed (fail closed).
    #[error("could not prepare the sandbox, so the command was not run: {0}")]
    Prepare(String),
    /// The spec cannot be expressed for this backend.
    #[error("invalid sandbox spec: {0}")]
    InvalidSpec(String),
}

/// A kernel sandbox backend: probe once, prepare per spawn in the parent.
pub trait SandboxBackend: Send + Sync + std::fmt::Debug {
    /// Which backend this is.
    fn kind(&self) -> SandboxBackendKind;
    /// What the backend can enforce on this machine.
    fn probe(&self) -> BackendProbe;
    /// Prepare `spec` for one spawn. Everything that allocates or opens paths happens here.
    fn prepare(&self, spec: &SandboxSpec) -> Result<PreparedSandbox, SandboxError>;
    /// Whether [`SandboxBackend::prepare`] accepts `TmpSpec::Isolated(None)` and the
    /// prepared sandbox takes each run's own tmp dir at spawn, so the runner can reuse it
    /// across runs. Otherwise the runner prepares a spec naming each run's tmp dir.
    fn prepares_per_run_tmp(&self) -> bool {
        false
    }
}

/// How the prepared confinement reaches the child.
pub(crate) enum Launch {
    /// Apply in `pre_exec` with raw syscalls (Linux).
    #[cfg(target_os = "linux")]
    PreExec(Arc<linux::LinuxLaunch>),
    /// Run the command through a helper that confines itself, then execs (macOS).
    #[cfg_attr(windows, allow(dead_code))]
    Wrap {
        /// The helper program.
        helper: PathBuf,
        /// The profile it applies.
        profile: String,
    },
    /// No confinement (the snapshot's sandbox is optional and none is available).
    Unconfined,
}

/// Confinement prepared for one spawn, with its report.
pub struct PreparedSandbox {
    pub(crate) report: SandboxReport,
    pub(crate) launch: Launch,
}

impl std::fmt::Debug for PreparedSandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let launch = match &self.launch {
            #[cfg(target_os = "linux")]
            Launch::PreExec(_) => "pre_exec",
            Launch::Wrap { .. } => "helper",
            Launch::Unconfined => "unconfined",
        };
        f.debug_struct("PreparedSandbox")
            .field("report", &self.report)
            .field("launch", &launch)
            .finish()
    }
}

impl PreparedSandbox {
    /// What will be enforced.
    pub fn report(&self) -> &SandboxReport {
        &self.report
    }

    /// Whether the child will run without any kernel confinement.
    pub fn is_unconfined(&self) -> bool {
        matches!(self.launch, Launch::Unconfined)
    }

    /// Where every run's private tmp dir is, when each run mounts a tmpfs of its own there
    /// (a mount namespace, ADR 0027): the same path in every run, a different filesystem in
    /// each, and an empty directory on the host. `None`: the runner makes a host directory
    /// per run.
    pub fn mounted_tmp(&self) -> Option<&std::path::Path> {
        match &self.launch {
            #[cfg(target_os = "linux")]
            Launch::PreExec(launch) => launch.mounted_tmp(),
            _ => None,
        }
    }
}

/// The platform has no sandbox backend turngate knows.
#[cfg(not(any(target_os = "linux", target_os = "macos", windows)))]
#[derive(Debug, Default, Clone, Copy)]
struct NoBackend;

#[cfg(not(any(target_os = "linux", target_os = "macos", windows)))]
impl SandboxBackend for NoBackend {
    fn kind(&self) -> SandboxBackendKind {
        SandboxBackendKind::None
    }
    fn probe(&self) -> BackendProbe {
        BackendProbe {
            backend: SandboxBackendKind::None,
            available: false,
            detail: format!("no sandbox backend for {}", std::env::consts::OS),
            capabilities: Vec::new(),
        }
    }
    fn prepare(&self, _spec: &SandboxSpec) -> Result<PreparedSandbox, SandboxError> {
        Err(SandboxError::BackendUnavailable {
            backend: SandboxBackendKind::None,
            reason: format!("no sandbox backend for {}", std::env::consts::OS),
        })
    }
}

/// The native backend for this platform: nono on Linux, Seatbelt on macOS, a restricted token
/// on Windows (unavailable in this build), none elsewhere.
pub fn native_backend() -> Arc<dyn SandboxBackend> {
    #[cfg(target_os = "linux")]
    {
        Arc::new(LinuxNonoBackend::new())
    }
    #[cfg(target_os = "macos")]
    {
        Arc::new(SeatbeltBackend::new())
    }
    #[cfg(windows)]
    {
        Arc::new(RestrictedTokenBackend::new())
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos", windows)))]
    {
        Arc::new(NoBackend)
    }
}

/// Prepare `spec` on `backend`, applying the snapshot's requirement:
/// - a provider-native preference is refused on this path;
/// - an unavailable backend is an error when the sandbox is required, and an explicitly
///   unconfined run (reported `unavailable`) when it is optional;
/// - any other preparation failure is an error even when optional (fail closed: the backend
///   exists, so something is wrong).
pub fn prepare(
    backend: &dyn SandboxBackend,
    spec: &SandboxSpec,
) -> Result<PreparedSandbox, SandboxError> {
    let unconfined = |reason: String| PreparedSandbox {
        report: SandboxReport::unavailable(backend.kind(), reason),
        launch: Launch::Unconfined,
    };
    if spec.review.is_some() && backend.kind() != SandboxBackendKind::Nono {
        return Err(SandboxError::InvalidSpec(format!(
            "reviewable writes need overlayfs in a user namespace (Linux); the {:?} backend \
             cannot provide it, so nothing was run",
            backend.kind()
        )));
    }
    match spec.preference {
        SandboxBackendKind::ProviderNative => return Err(SandboxError::ProviderNative),
        SandboxBackendKind::None => {
            return match spec.requirement {
                BackendRequirement::Required => Err(SandboxError::BackendUnavailable {
                    backend: SandboxBackendKind::None,
                    reason: "the snapshot selects no sandbox backend but requires one".into(),
                }),
                BackendRequirement::Optional if spec.review.is_none() => {
                    Ok(unconfined("the snapshot selects no sandbox backend".into()))
                }
                BackendRequirement::Optional => Err(SandboxError::InvalidSpec(
                    "reviewable writes need a sandbox, and the snapshot selects none".into(),
                )),
            };
        }
        _ => {}
    }
    match backend.prepare(spec) {
        Ok(prepared) => Ok(prepared),
        // Never unreviewed: an optional sandbox that is missing refuses a review.
        Err(SandboxError::BackendUnavailable { reason, .. })
            if spec.requirement == BackendRequirement::Optional && spec.review.is_none() =>
        {
            Ok(unconfined(reason))
        }
        Err(err) => Err(err),
    }
}
