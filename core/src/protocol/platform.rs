//! The platform's sandbox capabilities, as a plain value.
//!
//! `probe::probe_platform` fills this in for the running machine; tests and conformance vectors
//! inject any platform. This module only describes; it never probes and never decides.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The operating-system family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OsFamily {
    /// Linux (Landlock + seccomp through nono).
    Linux,
    /// macOS (Seatbelt).
    Macos,
    /// Windows (restricted token).
    Windows,
    /// Anything else: no sandbox backend is known.
    Other,
}

/// What the platform offers a sandbox backend. Every field is a probed fact, never a wish.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlatformCapabilities {
    /// The OS family.
    pub os: OsFamily,
    /// The Landlock ABI version the kernel reports, `None` when Landlock is absent or disabled.
    /// ABI 3 adds truncate control, ABI 4 TCP port rules, ABI 6 signal and abstract-socket
    /// scoping.
    #[serde(default)]
    pub landlock_abi: Option<u32>,
    /// Whether seccomp filters can be installed.
    #[serde(default)]
    pub seccomp: bool,
    /// Whether unprivileged user namespaces are available.
    #[serde(default)]
    pub user_namespaces: bool,
    /// Whether macOS Seatbelt (`sandbox_init`/`sandbox-exec`) is available.
    #[serde(default)]
    pub seatbelt: bool,
    /// Whether a Windows restricted-token backend can be built.
    #[serde(default)]
    pub restricted_token: bool,
}

impl PlatformCapabilities {
    /// A platform with no sandbox capability at all (the fail-closed starting point).
    pub fn none(os: OsFamily) -> Self {
        PlatformCapabilities {
            os,
            landlock_abi: None,
            seccomp: false,
            user_namespaces: false,
            seatbelt: false,
            restricted_token: false,
        }
    }
}
