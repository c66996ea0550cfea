//! The macOS backend: a Seatbelt (SBPL) profile generated from the spec, applied by a helper
//! (`/usr/bin/sandbox-exec -p PROFILE -- argv…`) that confines itself and then execs the command.
//! A forking multi-threaded host never applies a profile in its own child.
//!
//! Profile generation is a pure function, unit-tested on every platform. Running under
//! Seatbelt is only possible on macOS; elsewhere the probe reports `unavailable` with the reason.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::protocol::{FsAccess, NetworkMode, SandboxBackendKind};

use super::landlock_plan::NetPlan;
use super::report::{BackendProbe, Degradation, DegradationArea, SandboxReport};
use super::spec::SandboxSpec;
use super::{Launch, PreparedSandbox, SandboxBackend, SandboxError};

/// The helper that applies a profile to itself, then execs.
pub const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// Quote `path` as an SBPL string literal. Fails on non-UTF-8 and control characters, which the
/// profile language cannot carry safely.
fn sbpl_string(path: &Path) -> Result<String, SandboxError> {
    let Some(text) = path.to_str() else {
        return Err(SandboxError::InvalidSpec(format!(
            "path {} is not UTF-8 and cannot be written into a Seatbelt profile",
            path.display()
        )));
    };
    if text.chars().any(|c| c.is_control()) {
        return Err(SandboxError::InvalidSpec(format!(
            "path {text:?} contains a control character"
        )));
    }
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    Ok(out)
}

/// The network shape Seatbelt enforces for `spec`: the same as Linux, except that Seatbelt can
/// block everything or allow TCP to ports (`remote tcp "*:PORT"`) on any ABI.
fn net_plan(spec: &SandboxSpec) -> NetPlan {
    // The ABI number only matters for Landlock; pass the highest so no ABI narrowing applies.
    super::landlock_plan::plan(spec, u32::MAX).net
}

/// Generate the Seatbelt profile for `spec`. Deny by default; allow process basics, the
/// granted paths (`subpath` for directories, `literal` for files) and the network shape.
pub fn seatbelt_profile(spec: &SandboxSpec) -> Result<String, SandboxError> {
    let mut p = String::from(
        "(version 1)\n(deny default)\n\
         (allow process-exec)\n(allow process-fork)\n\
         (allow signal (target same-sandbox))\n\
         (allow process-info* (target same-sandbox))\n\
         (allow sysctl-read)\n(allow mach-lookup)\n(allow ipc-posix-shm*)\n\
         (allow file-read-metadata)\n",
    );
    if spec.system_roots {
        // macOS system locations a program needs to start.
        for dir in [
            "/System",
            "/Library",
            "/usr",
            "/bin",
            "/sbin",
            "/private/etc",
            "/etc",
        ] {
            p.push_str(&format!(
                "(allow file-read* (subpath {}))\n",
                sbpl_string(Path::new(dir))?
            ));
        }
        p.push_str(
            "(allow file-read* file-write-data (literal \"/dev/null\") (literal \"/dev/zero\"))\n\
             (allow file-read* (literal \"/dev/random\") (literal \"/dev/urandom\"))\n",
        );
    }
    for grant in spec.effective_grants() {
        if spec.system_roots && grant.path.starts_with("/dev") {
            continue;
        }
        // `subpath` matches the path itself and everything beneath it, file or directory.
        let quoted = sbpl_string(&grant.path)?;
        let ops = match grant.access {
            FsAccess::Read => "file-read*",
            FsAccess::Write => "file-read* file-write*",
        };
        p.push_str(&format!("(allow {ops} (subpath {quoted}))\n"));
    }
    match net_plan(spec) {
        NetPlan::AllowAll => p.push_str("(allow network*)\n"),
        NetPlan::BlockAll => {}
        NetPlan::TcpConnect(ports) => {
            for port in ports {
                p.push_str(&format!(
                    "(allow network-outbound (remote tcp \"*:{port}\"))\n"
                ));
            }
        }
    }
    Ok(p)
}

/// What Seatbelt does not enforce of `spec` (degradations) and where it is stricter than asked
/// (narrowings): macOS has no counterpart of the Linux namespace layer, so each of its layers
/// is named as missing, never implied.
pub fn seatbelt_notes(spec: &SandboxSpec) -> (Vec<Degradation>, Vec<Degradation>) {
    let mut degradations = vec![
        Degradation::new(
            DegradationArea::SandboxBackend,
            "the Seatbelt backend is not verified by turngate's enforcement tests (they run on \
             Linux only)",
        ),
        Degradation::new(
            DegradationArea::Filesystem,
            "no mount view on macOS: policy-denied paths inside the roots are not hidden from \
             the command (the checkers still refuse them)",
        ),
        Degradation::new(
            DegradationArea::Process,
            "no PID namespace on macOS: host processes are visible to the command, and a \
             process that leaves its group can outlive the run (the tree is killed by process \
             group only)",
        ),
    ];
    let mut narrowings = Vec::new();
    if spec.network.mode == NetworkMode::Restricted {
        match net_plan(spec) {
            NetPlan::TcpConnect(_) => degradations.push(Degradation::new(
                DegradationArea::Network,
                "allowed domains are not enforced by the kernel (turngate's filtering proxy \
                 needs a Linux network namespace); only the TCP port list is, on every host",
            )),
            _ => narrowings.push(Degradation::new(
                DegradationArea::Network,
                "a domain allow-list needs turngate's filtering proxy, which needs a Linux \
                 network namespace; all network egress is blocked (grant TCP ports to open some)",
            )),
        }
    }
    (degradations, narrowings)
}

/// The argv that runs `argv` under `profile` through the helper.
pub fn seatbelt_argv(profile: &str, argv: &[OsString]) -> Vec<OsString> {
    let mut out: Vec<OsString> = vec![
        SANDBOX_EXEC.into(),
        "-p".into(),
        profile.into(),
        "--".into(),
    ];
    out.extend(argv.iter().cloned());
    out
}

/// The Seatbelt backend.
#[derive(Debug, Default, Clone, Copy)]
pub struct SeatbeltBackend;

impl SeatbeltBackend {
    /// A handle on the backend.
    pub fn new() -> Self {
        Self
    }

    fn unavailable_reason() -> Option<String> {
        if !cfg!(target_os = "macos") {
            return Some(format!(
                "Seatbelt exists only on macOS (this is {})",
                std::env::consts::OS
            ));
        }
        if !Path::new(SANDBOX_EXEC).exists() {
            return Some(format!("{SANDBOX_EXEC} is missing"));
        }
        None
    }
}

impl SandboxBackend for SeatbeltBackend {
    fn kind(&self) -> SandboxBackendKind {
        SandboxBackendKind::Seatbelt
    }

    fn probe(&self) -> BackendProbe {
        match Self::unavailable_reason() {
            Some(reason) => BackendProbe {
                backend: SandboxBackendKind::Seatbelt,
                available: false,
                detail: reason,
                capabilities: Vec::new(),
            },
            None => BackendProbe {
                backend: SandboxBackendKind::Seatbelt,
                available: true,
                detail: format!("{SANDBOX_EXEC} (profile applied by the helper, then exec)"),
                capabilities: vec![
                    "filesystem".into(),
                    "network_block".into(),
                    "tcp_port_rules".into(),
                ],
            },
        }
    }

    fn prepare(&self, spec: &SandboxSpec) -> Result<PreparedSandbox, SandboxError> {
        if let Some(reason) = Self::unavailable_reason() {
            return Err(SandboxError::BackendUnavailable {
                backend: SandboxBackendKind::Seatbelt,
                reason,
            });
        }
        let profile = seatbelt_profile(spec)?;
        let (degradations, narrowings) = seatbelt_notes(spec);
        Ok(PreparedSandbox {
            report: SandboxReport::applied(
                SandboxBackendKind::Seatbelt,
                SANDBOX_EXEC,
                degradations,
                narrowings,
            ),
            launch: Launch::Wrap {
                profile,
                helper: PathBuf::from(SANDBOX_EXEC),
            },
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::protocol::{
        BackendRequirement, NetworkMode, SandboxMode, TurnNetworkPolicySnapshot,
    };
    use crate::sandbox::spec::{FsGrant, TmpSpec};

    fn spec(mode: NetworkMode, ports: Vec<u16>) -> SandboxSpec {
        SandboxSpec {
            mode: SandboxMode::WorkspaceWrite,
            roots: vec![
                FsGrant {
                    path: "/w/proj".into(),
                    access: FsAccess::Write,
                },
                FsGrant {
                    path: "/opt/app".into(),
                    access: FsAccess::Read,
                },
            ],
            system_roots: true,
            tmp: TmpSpec::Isolated(Some("/w/.tmp".into())),
            network: TurnNetworkPolicySnapshot {
                mode,
                allowed_domains: vec![],
                denied_domains: vec![],
                allow_localhost: false,
                allow_unix_sockets: false,
                allowed_tcp_ports: ports,
            },
            requirement: BackendRequirement::Required,
            preference: SandboxBackendKind::Seatbelt,
            home: None,
            masks: Vec::new(),
            masks_truncated: false,
            review: None,
        }
    }

    #[test]
    fn denies_by_default_and_grants_roots_by_access() {
        let p = seatbelt_profile(&spec(NetworkMode::Disabled, vec![])).unwrap();
        assert!(p.starts_with("(version 1)\n(deny default)\n"));
        assert!(p.contains("(allow file-read* file-write* (subpath \"/w/proj\"))"));
        assert!(p.contains("(allow file-read* (subpath \"/opt/app\"))"));
        assert!(!p.contains("file-write* (subpath \"/opt/app\")"));
        assert!(p.contains("(allow file-read* file-write* (subpath \"/w/.tmp\"))"));
    }

    #[test]
    fn disabled_network_has_no_network_allow() {
        let p = seatbelt_profile(&spec(NetworkMode::Disabled, vec![])).unwrap();
        assert!(!p.contains("network"));
    }

    #[test]
    fn tcp_ports_become_outbound_rules_only() {
        let p = seatbelt_profile(&spec(NetworkMode::Disabled, vec![443, 8080, 443])).unwrap();
        assert!(p.contains("(allow network-outbound (remote tcp \"*:443\"))"));
        assert!(p.contains("(allow network-outbound (remote tcp \"*:8080\"))"));
        assert_eq!(p.matches("*:443").count(), 1);
        assert!(!p.contains("(allow network*)"));
    }

    #[test]
    fn enabled_network_allows_all() {
        let p = seatbelt_profile(&spec(NetworkMode::Enabled, vec![])).unwrap();
        assert!(p.contains("(allow network*)"));
    }

    #[test]
    fn quotes_cannot_break_out_of_a_string() {
        let mut s = spec(NetworkMode::Disabled, vec![]);
        s.roots = vec![FsGrant {
            path: "/w/a\")(allow default)(\"".into(),
            access: FsAccess::Read,
        }];
        let p = seatbelt_profile(&s).unwrap();
        assert!(p.contains(r#"(subpath "/w/a\")(allow default)(\""))"#));
        assert!(!p.contains("\n(allow default)"));
    }

    #[test]
    fn control_characters_are_refused() {
        let mut s = spec(NetworkMode::Disabled, vec![]);
        s.roots = vec![FsGrant {
            path: "/w/a\n(allow default)".into(),
            access: FsAccess::Read,
        }];
        assert!(matches!(
            seatbelt_profile(&s),
            Err(SandboxError::InvalidSpec(_))
        ));
    }

    #[test]
    fn read_only_mode_lowers_writes() {
        let mut s = spec(NetworkMode::Disabled, vec![]);
        s.mode = SandboxMode::ReadOnly;
        let p = seatbelt_profile(&s).unwrap();
        assert!(p.contains("(allow file-read* (subpath \"/w/proj\"))"));
        assert!(!p.contains("file-write* (subpath \"/w/proj\")"));
    }

    #[test]
    fn notes_name_every_missing_linux_layer() {
        let (degradations, narrowings) = seatbelt_notes(&spec(NetworkMode::Disabled, vec![]));
        let areas: Vec<_> = degradations.iter().map(|d| d.area).collect();
        assert!(areas.contains(&DegradationArea::Filesystem));
        assert!(areas.contains(&DegradationArea::Process));
        assert!(areas.contains(&DegradationArea::SandboxBackend));
        assert!(narrowings.is_empty());

        // Restricted without ports: everything blocked (a narrowing), never open.
        let s = spec(NetworkMode::Restricted, vec![]);
        assert_eq!(net_plan(&s), NetPlan::BlockAll);
        let (degradations, narrowings) = seatbelt_notes(&s);
        assert!(
            narrowings
                .iter()
                .any(|d| d.area == DegradationArea::Network)
        );
        assert!(
            !degradations
                .iter()
                .any(|d| d.area == DegradationArea::Network)
        );
        assert!(!seatbelt_profile(&s).unwrap().contains("network"));

        // Restricted with ports: the domains are not enforced, and the report says so.
        let (degradations, _) = seatbelt_notes(&spec(NetworkMode::Restricted, vec![443]));
        assert!(
            degradations
                .iter()
                .any(|d| d.area == DegradationArea::Network
                    && d.reason.contains("allowed domains are not enforced"))
        );
    }

    #[test]
    fn helper_argv_wraps_the_command() {
        let argv = seatbelt_argv("(version 1)", &["/bin/echo".into(), "hi".into()]);
        assert_eq!(argv[0], OsString::from(SANDBOX_EXEC));
        assert_eq!(argv[1], OsString::from("-p"));
        assert_eq!(argv[3], OsString::from("--"));
        assert_eq!(argv[4], OsString::from("/bin/echo"));
    }

    #[cfg(not(target_os = "macos"))]
    #[test]
    fn probe_is_unavailable_off_macos() {
        let probe = SeatbeltBackend::new().probe();
        assert!(!probe.available);
        assert!(probe.detail.contains("only on macOS"));
        assert!(matches!(
            SeatbeltBackend::new().prepare(&spec(NetworkMode::Disabled, vec![])),
            Err(SandboxError::BackendUnavailable { .. })
        ));
    }
}
