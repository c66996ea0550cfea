//! The one public error enum of the facade. It keeps the core error's message and the fields a
//! caller can act on (the failing field path and position of a policy file, a snapshot error's
//! code); it never collapses failures into one generic error.

use turngate::PolicyError;
use turngate::approval::{ApprovalError, BrokerError};
use turngate::audit::AuditError;
use turngate::gate::GateError;
use turngate::sandbox::RunError;
use turngate::snapshot::SnapshotError;

/// Every failure a binding can see. Each variant names what was wrong in `message`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Error))]
#[non_exhaustive]
pub enum TurnGateError {
    /// A policy did not parse or compile, or named an unknown kind, effect or mode.
    #[error("{message}")]
    Policy {
        /// The full message, naming the bad input.
        message: String,
        /// For a parse error: the failing field path (`.` for the document).
        path: Option<String>,
        /// For a parse error: the 1-based line.
        line: Option<u64>,
        /// For a parse error: the 1-based column.
        column: Option<u64>,
    },
    /// A snapshot could not be resolved, or refuses what was asked of it.
    #[error("{message}")]
    Snapshot {
        /// A stable, machine-readable code (`invalid_path`, `cwd_outside_roots`,
        /// `source_not_selectable`, `provider_native_on_native_shell`).
        code: String,
        /// The full message, naming the bad field.
        message: String,
    },
    /// The durable store failed (open, append, replay).
    #[error("{message}")]
    Store {
        /// The full message.
        message: String,
    },
    /// A sandbox backend is required but unavailable on this platform.
    #[error("{message}")]
    SandboxUnavailable {
        /// The full message, with the degradation reasons.
        message: String,
    },
    /// An approval operation was refused: an unknown or duplicate request id, a resolution the
    /// request does not offer, a closed broker, a deferral with nowhere to persist it.
    #[error("{message}")]
    Approval {
        /// The full message, naming the request.
        message: String,
    },
    /// A command could not be run (spawn failed, I/O failed, the sandbox could not be applied
    /// in the child). Nothing ran unconfined.
    #[error("{message}")]
    Run {
        /// The full message, naming the program.
        message: String,
    },
    /// A change set operation was refused or failed (reviewable writes): `code` is the
    /// core's (`unavailable`, `not_found`, `not_pending`, `busy`, `tampered`,
    /// `policy_refused`, `conflicts`, `unsupported`, `io`, ...), `paths` the paths it names.
    /// Nothing was changed in the workspace.
    #[error("{message}")]
    Changes {
        /// A stable, machine-readable code.
        code: String,
        /// The full message, naming the paths.
        message: String,
        /// The conflicting, refused or tampered paths (absolute), when there are any.
        paths: Vec<String>,
    },
    /// An argument was malformed: JSON that is not the expected protocol object, an unknown
    /// name. The message names the argument.
    #[error("{message}")]
    InvalidInput {
        /// The full message.
        message: String,
    },
}

impl TurnGateError {
    /// An [`TurnGateError::InvalidInput`] naming `what`.
    pub fn invalid(what: &str, detail: impl std::fmt::Display) -> Self {
        TurnGateError::InvalidInput {
            message: format!("{what}: {detail}"),
        }
    }

    /// The variant's name (`Policy`, ..., `InvalidInput`): a binding's error class or code
    /// derives from it.
    pub fn kind(&self) -> &'static str {
        match self {
            TurnGateError::Policy { .. } => "Policy",
            TurnGateError::Snapshot { .. } => "Snapshot",
            TurnGateError::Store { .. } => "Store",
            TurnGateError::SandboxUnavailable { .. } => "SandboxUnavailable",
            TurnGateError::Approval { .. } => "Approval",
            TurnGateError::Run { .. } => "Run",
            TurnGateError::Changes { .. } => "Changes",
            TurnGateError::InvalidInput { .. } => "InvalidInput",
        }
    }

    /// The machine-readable code a caller can act on: a snapshot error's, or a change set
    /// refusal's (`conflicts`, `not_pending`, ...); `None` for the other variants.
    pub fn code(&self) -> Option<&str> {
        match self {
            TurnGateError::Snapshot { code, .. } | TurnGateError::Changes { code, .. } => {
                Some(code)
            }
            _ => None,
        }
    }

    /// The paths a change set refusal names (absolute); empty for the other variants.
    pub fn paths(&self) -> &[String] {
        match self {
            TurnGateError::Changes { paths, .. } => paths,
            _ => &[],
        }
    }

    /// The message, as every binding shows it.
    pub fn message(&self) -> &str {
        match self {
            TurnGateError::Policy { message, .. }
            | TurnGateError::Snapshot { message, .. }
            | TurnGateError::Store { message }
            | TurnGateError::SandboxUnavailable { message }
            | TurnGateError::Approval { message }
            | TurnGateError::Run { message }
            | TurnGateError::Changes { message, .. }
            | TurnGateError::InvalidInput { message } => message,
        }
    }
}

impl From<PolicyError> for TurnGateError {
    fn from(e: PolicyError) -> Self {
        let message = e.to_string();
        match e {
            PolicyError::Parse {
                path, line, column, ..
            } => TurnGateError::Policy {
                message,
                path: Some(path),
                line: line.map(|l| l as u64),
                column: column.map(|c| c as u64),
            },
            _ => TurnGateError::Policy {
                message,
                path: None,
                line: None,
                column: None,
            },
        }
    }
}

impl From<SnapshotError> for TurnGateError {
    fn from(e: SnapshotError) -> Self {
        let message = e.to_string();
        let code = match e {
            // A policy error inside a snapshot keeps the snapshot's message, which names the
            // selection field (`selection.policy: ...`).
            SnapshotError::Policy(p) => {
                return match TurnGateError::from(p) {
                    TurnGateError::Policy {
                        path, line, column, ..
                    } => TurnGateError::Policy {
                        message,
                        path,
                        line,
                        column,
                    },
                    other => other,
                };
            }
            SnapshotError::SandboxUnavailable { .. } => {
                return TurnGateError::SandboxUnavailable { message };
            }
            SnapshotError::InvalidPath { .. } => "invalid_path",
            SnapshotError::CwdOutsideRoots { .. } => "cwd_outside_roots",
            SnapshotError::SourceNotSelectable(_) => "source_not_selectable",
            SnapshotError::ProviderNativeOnNativeShell { .. } => "provider_native_on_native_shell",
            _ => "snapshot",
        };
        TurnGateError::Snapshot {
            code: code.to_owned(),
            message,
        }
    }
}

impl From<AuditError> for TurnGateError {
    fn from(e: AuditError) -> Self {
        match e {
            AuditError::UnknownRequest(_) | AuditError::DuplicateRequest(_) => {
                TurnGateError::Approval {
                    message: e.to_string(),
                }
            }
            _ => TurnGateError::Store {
                message: e.to_string(),
            },
        }
    }
}

impl From<BrokerError> for TurnGateError {
    fn from(e: BrokerError) -> Self {
        TurnGateError::Approval {
            message: e.to_string(),
        }
    }
}

impl From<ApprovalError> for TurnGateError {
    fn from(e: ApprovalError) -> Self {
        match e {
            ApprovalError::Audit(a) => a.into(),
            other => TurnGateError::Approval {
                message: other.to_string(),
            },
        }
    }
}

impl From<RunError> for TurnGateError {
    fn from(e: RunError) -> Self {
        let message = e.to_string();
        match e {
            // No runner on this platform (Windows): the same class as a missing sandbox, so a
            // client that handles one refuses the other.
            RunError::Sandbox(_) | RunError::Unsupported(_) => {
                TurnGateError::SandboxUnavailable { message }
            }
            _ => TurnGateError::Run { message },
        }
    }
}

impl From<GateError> for TurnGateError {
    fn from(e: GateError) -> Self {
        match e {
            GateError::Policy(p) => p.into(),
            GateError::Snapshot(s) => s.into(),
            GateError::Audit(a) => a.into(),
            GateError::Approval(a) => a.into(),
            GateError::Run(r) => r.into(),
            GateError::Changes(c) => c.into(),
            GateError::Scope(s) => TurnGateError::invalid("target", s),
            e @ GateError::WrongKind { .. } => TurnGateError::invalid("kind", e),
            // Nothing ran: the sandbox could not keep the command off the audit store.
            e @ GateError::StoreExposed { .. } => TurnGateError::Run {
                message: e.to_string(),
            },
            other => TurnGateError::Approval {
                message: other.to_string(),
            },
        }
    }
}

impl From<turngate::changes::ChangeError> for TurnGateError {
    fn from(e: turngate::changes::ChangeError) -> Self {
        TurnGateError::Changes {
            code: e.code().to_owned(),
            message: e.to_string(),
            paths: e.paths(),
        }
    }
}
