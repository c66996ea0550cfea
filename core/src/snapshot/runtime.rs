//! Maps a permission mode onto a CLI runtime's approval policy.
//!
//! A mapping is exact or a stricter fallback, and says which; it is never looser than the mode.

use crate::policy::PermissionMode;
use crate::protocol::{CliRuntime, CliRuntimeMapping, MappingQuality};

/// The runtime's approval (and, for Codex, sandbox) setting for `mode`.
pub fn map_cli_runtime(runtime: CliRuntime, mode: PermissionMode) -> CliRuntimeMapping {
    let (approval_policy, sandbox, quality) = match (runtime, mode) {
        (CliRuntime::Codex, PermissionMode::FullAccess) => {
            ("never", Some("danger-full-access"), MappingQuality::Exact)
        }
        // Codex has no policy that auto-approves edits but asks for the rest: asking for
        // everything on request is the stricter fallback.
        (CliRuntime::Codex, PermissionMode::AutoAcceptEdits) => (
            "on-request",
            Some("workspace-write"),
            MappingQuality::StricterFallback,
        ),
        (CliRuntime::Codex, PermissionMode::Supervised) => {
            ("on-request", Some("read-only"), MappingQuality::Exact)
        }
        (CliRuntime::Claude, PermissionMode::FullAccess) => {
            ("bypassPermissions", None, MappingQuality::Exact)
        }
        (CliRuntime::Claude, PermissionMode::AutoAcceptEdits) => {
            ("acceptEdits", None, MappingQuality::Exact)
        }
        (CliRuntime::Claude, PermissionMode::Supervised) => {
            ("default", None, MappingQuality::Exact)
        }
    };
    CliRuntimeMapping {
        runtime,
        mode,
        approval_policy: approval_policy.to_owned(),
        sandbox: sandbox.map(str::to_owned),
        quality,
    }
}
