//! The sandbox spec: the part of a turn's snapshot a kernel sandbox enforces, plus the minimal
//! system roots a program needs to start.
//!
//! It decides which paths are readable or writable and which network shape is asked for. It
//! never decides whether a command may run (that is the checkers' job) and never touches the
//! kernel (that is the backends' job).

use std::path::{Path, PathBuf};

use crate::policy::CompiledPolicy;
use crate::protocol::{
    BackendRequirement, FsAccess, SandboxBackendKind, SandboxMode, TmpPolicy,
    TurnNetworkPolicySnapshot, TurnSandboxSnapshot,
};

/// Directories every sandboxed program may read (and execute from): the loader, libraries,
/// interpreters and their data. Missing ones are skipped.
pub const SYSTEM_READ_DIRS: &[&str] = &[
    "/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin",
];

/// Single files or small directories under `/etc` a program needs to start, resolve users and
/// names, and verify TLS. The rest of `/etc` is not granted. Missing ones are skipped.
pub const SYSTEM_READ_ETC: &[&str] = &[
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/ld.so.preload",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/resolv.conf",
    "/etc/gai.conf",
    "/etc/protocols",
    "/etc/services",
    "/etc/alternatives",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/mime.types",
    // Tools' system-wide configuration.
    "/etc/gitconfig",
    "/etc/pip.conf",
    // Distribution identity (pip's `distro`, platform checks of build tools).
    "/etc/os-release",
    "/etc/debian_version",
    "/etc/lsb-release",
    // Debian's python3 links sitecustomize.py here.
    "/etc/python3",
    "/etc/python3.9",
    "/etc/python3.10",
    "/etc/python3.11",
    "/etc/python3.12",
    "/etc/python3.13",
    "/etc/python3.14",
];

/// Device files readable and writable by every sandboxed program.
pub const SYSTEM_RW_DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];

/// Device files readable by every sandboxed program.
pub const SYSTEM_READ_DEVICES: &[&str] = &["/dev/random", "/dev/urandom"];

/// Tools' own configuration in HOME, readable by every sandboxed program (relative to HOME;
/// missing ones are skipped), so `git status` finds `~/.gitconfig`. Credential files inside
/// them stay masked ([`HOME_CONFIG_SECRETS`](super::masks::HOME_CONFIG_SECRETS) and the
/// policy's read denies).
pub const HOME_CONFIG: &[&str] = &[
    ".gitconfig",
    ".config/git",
    ".cargo/config.toml",
    ".cargo/config",
    ".config/pip",
    ".pip/pip.conf",
];

/// User-installed toolchains in HOME, readable by every sandboxed program (relative to HOME;
/// missing ones are skipped): rustup's proxies and toolchains and cargo's downloaded crates.
/// Unlike [`HOME_CONFIG`] they are not walked for masks: they hold published files only.
pub const HOME_TOOLCHAINS: &[&str] = &[
    ".cargo/bin",
    ".cargo/registry",
    ".cargo/git",
    ".rustup/settings.toml",
    ".rustup/toolchains",
];

/// Host temporary directories granted read-write under `tmp = host`.
pub const HOST_TMP_DIRS: &[&str] = &["/tmp", "/var/tmp"];

/// Where a sandboxed process writes temporary files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TmpSpec {
    /// The host's shared `/tmp` and `/var/tmp` (read-write).
    Host,
    /// A private directory. `None` asks the runner to create one for this run (mode 0700, removed
    /// afterwards); `Some` is the turn's own private tmp dir. `TMPDIR`, `TMP` and `TEMP` point
    /// to it in the child.
    Isolated(Option<PathBuf>),
}

/// What the mount view does to one path.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum MaskKind {
    /// Hidden: an empty, unreadable file or directory is mounted over it (a file_read deny).
    Hidden,
    /// Bound read-only inside a writable root (a file_write deny or ask rule).
    ReadOnly,
    /// An empty directory over a host socket directory (`/run`).
    Emptied,
}

/// A path the mount view masks.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct Mask {
    /// The absolute path.
    pub path: PathBuf,
    /// What is done to it.
    pub kind: MaskKind,
    /// Whether it is a directory.
    pub dir: bool,
    /// The device and inode the walk judged; the child masks that file only (0: unchecked).
    #[serde(skip)]
    #[schemars(skip)]
    pub dev: u64,
    /// See `dev`.
    #[serde(skip)]
    #[schemars(skip)]
    pub ino: u64,
}

/// One filesystem grant.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FsGrant {
    /// An absolute path.
    pub path: PathBuf,
    /// Read (read, list, execute) or write (read plus create, write, delete).
    pub access: FsAccess,
}

/// What a native sandbox must enforce for one spawn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSpec {
    /// The sandbox mode. `unrestricted` grants `/` read-write (the network shape still applies).
    pub mode: SandboxMode,
    /// The turn's roots. In `read_only` mode every write grant is lowered to read.
    pub roots: Vec<FsGrant>,
    /// Whether to add the system roots ([`SYSTEM_READ_DIRS`], [`SYSTEM_READ_ETC`] and the
    /// device files). Without them almost no program can start.
    pub system_roots: bool,
    /// The tmp policy.
    pub tmp: TmpSpec,
    /// The network shape (the snapshot's mirror).
    pub network: TurnNetworkPolicySnapshot,
    /// Whether the command must not run without a kernel sandbox.
    pub requirement: BackendRequirement,
    /// The preferred backend.
    pub preference: SandboxBackendKind,
    /// The HOME whose tools' configuration ([`HOME_CONFIG`]) is readable; `None` grants none.
    pub home: Option<PathBuf>,
    /// Paths the mount view masks (from the turn's policy, see [`SandboxSpec::with_policy`]).
    pub masks: Vec<Mask>,
    /// Whether the walk that found the masks stopped at its cap (deeper paths are not masked).
    pub masks_truncated: bool,
    /// Reviewable writes: every writable turn root is an overlay whose writes land in an upper
    /// directory (see [`crate::changes`]). `None` binds the roots writable as they are.
    pub review: Option<Vec<ReviewLayer>>,
}

/// One writable root under review: an overlay with `root` as its lower layer and `upper` and
/// `work` (on one filesystem, in the state dir) for its writes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ReviewLayer {
    /// The writable root (canonical).
    pub root: PathBuf,
    /// The overlay's upper directory: where the command's writes land.
    pub upper: PathBuf,
    /// The overlay's work directory (same filesystem as `upper`).
    pub work: PathBuf,
}

impl SandboxSpec {
    /// The spec for a turn's sandbox snapshot. With `tmp = isolated` the runner creates a private
    /// tmp dir per run unless [`SandboxSpec::with_tmp_dir`] names the turn's own.
    pub fn from_snapshot(snapshot: &TurnSandboxSnapshot) -> Self {
        let roots = snapshot
            .filesystem
            .entries
            .iter()
            .map(|entry| FsGrant {
                path: entry.path.clone(),
                access: entry.access,
            })
            .collect();
        Self {
            mode: snapshot.mode,
            roots,
            system_roots: true,
            tmp: match snapshot.tmp {
                TmpPolicy::Host => TmpSpec::Host,
                TmpPolicy::Isolated => TmpSpec::Isolated(None),
            },
            network: snapshot.network.clone(),
            requirement: snapshot.backend_requirement,
            preference: snapshot.backend_preference,
            home: std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|h| h.is_absolute() && h != Path::new("/")),
            masks: Vec::new(),
            masks_truncated: false,
            review: None,
        }
    }

    /// Mask what `policy` denies inside the roots of `snapshot` (the snapshot this spec was
    /// made from): file_read denies are hidden, file_write deny or ask rules inside writable
    /// roots are bound read-only. The roots are walked now, so call it per spawn. Only a
    /// mount view can carry masks: where there is none (not Linux, or no mount namespace here)
    /// nothing is walked, and the backend's report names the missing layer.
    pub fn with_policy(mut self, snapshot: &TurnSandboxSnapshot, policy: &CompiledPolicy) -> Self {
        #[cfg(target_os = "linux")]
        let mount_view = super::namespace::probe().mount;
        #[cfg(not(target_os = "linux"))]
        let mount_view = false;
        if !mount_view {
            return self;
        }
        let home_config = self.home_config();
        let (masks, truncated) = super::masks::policy_masks(snapshot, policy, &home_config);
        self.masks = masks;
        self.masks_truncated = truncated;
        self
    }

    /// Hide turngate's own state directory `dir` (the audit store's, with its WAL and its
    /// change sets) from the command when it lies beneath one of the roots: a command that
    /// could write it could erase the audit log, forge approvals or edit pending change
    /// sets, and one that could read it would learn earlier turns' arguments and answers.
    /// `Err(root)` when that cannot be done safely: `dir` is a root itself (hiding it would
    /// hide the workspace or the whole `--read` directory), or it lies in a writable root
    /// and there is no mount view to carry the mask. Without a mount view a store beneath
    /// a read-only root stays readable (never writable); the report names the missing
    /// mount layer.
    pub fn hide_state_dir(&mut self, dir: &Path) -> Result<(), PathBuf> {
        use std::os::unix::fs::MetadataExt;
        let Some(root) = self
            .roots
            .iter()
            .filter(|r| dir.starts_with(&r.path))
            .max_by_key(|r| (r.access == FsAccess::Write, r.path.components().count()))
        else {
            return Ok(());
        };
        let writable = self.roots.iter().any(|r| {
            r.access == FsAccess::Write
                && self.mode != SandboxMode::ReadOnly
                && dir.starts_with(&r.path)
        });
        #[cfg(target_os = "linux")]
        let mount_view = super::namespace::probe().mount;
        #[cfg(not(target_os = "linux"))]
        let mount_view = false;
        let meta = std::fs::symlink_metadata(dir).ok().filter(|m| m.is_dir());
        match meta {
            Some(meta) if mount_view && dir != root.path => {
                self.masks.push(Mask {
                    path: dir.to_path_buf(),
                    kind: MaskKind::Hidden,
                    dir: true,
                    dev: meta.dev(),
                    ino: meta.ino(),
                });
                Ok(())
            }
            // The root itself: the command would read it (red team F4) or write it.
            Some(_) if mount_view => Err(root.path.clone()),
            _ if writable => Err(root.path.clone()),
            // Beneath a read-only root and not hideable: readable, never writable.
            _ => Ok(()),
        }
    }

    /// The HOME toolchain paths granted for reading (existing or not).
    pub fn home_toolchains(&self) -> Vec<PathBuf> {
        match (&self.home, self.system_roots) {
            (Some(home), true) => HOME_TOOLCHAINS.iter().map(|p| home.join(p)).collect(),
            _ => Vec::new(),
        }
    }

    /// The HOME configuration paths granted for reading (existing or not).
    pub fn home_config(&self) -> Vec<PathBuf> {
        match (&self.home, self.system_roots) {
            (Some(home), true) => HOME_CONFIG.iter().map(|p| home.join(p)).collect(),
            _ => Vec::new(),
        }
    }

    /// Use `dir` (which must exist) as the private tmp dir.
    pub fn with_tmp_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.tmp = TmpSpec::Isolated(Some(dir.into()));
        self
    }

    /// The private tmp dir, when one is set.
    pub fn tmp_dir(&self) -> Option<&Path> {
        match &self.tmp {
            TmpSpec::Isolated(Some(dir)) => Some(dir),
            _ => None,
        }
    }

    /// Every grant the backend must install, in order: system roots, tmp, then the turn's
    /// roots (lowered to read in `read_only` mode). Paths are not checked for existence here.
    pub fn effective_grants(&self) -> Vec<FsGrant> {
        let mut grants = Vec::new();
        if self.mode == SandboxMode::Unrestricted {
            grants.push(FsGrant {
                path: PathBuf::from("/"),
                access: FsAccess::Write,
            });
            return grants;
        }
        if self.system_roots {
            let read = SYSTEM_READ_DIRS
                .iter()
                .chain(SYSTEM_READ_ETC)
                .chain(SYSTEM_READ_DEVICES);
            grants.extend(read.map(|p| FsGrant {
                path: PathBuf::from(p),
                access: FsAccess::Read,
            }));
            grants.extend(SYSTEM_RW_DEVICES.iter().map(|p| FsGrant {
                path: PathBuf::from(p),
                access: FsAccess::Write,
            }));
            grants.extend(
                self.home_config()
                    .into_iter()
                    .chain(self.home_toolchains())
                    .map(|path| FsGrant {
                        path,
                        access: FsAccess::Read,
                    }),
            );
        }
        match &self.tmp {
            TmpSpec::Host => grants.extend(HOST_TMP_DIRS.iter().map(|p| FsGrant {
                path: PathBuf::from(p),
                access: FsAccess::Write,
            })),
            TmpSpec::Isolated(Some(dir)) => grants.push(FsGrant {
                path: dir.clone(),
                access: FsAccess::Write,
            }),
            TmpSpec::Isolated(None) => {}
        }
        for root in &self.roots {
            let access = if self.mode == SandboxMode::ReadOnly {
                FsAccess::Read
            } else {
                root.access
            };
            grants.push(FsGrant {
                path: root.path.clone(),
                access,
            });
        }
        grants
    }

    /// Whether a grant came from the turn (as opposed to the system list); missing turn roots
    /// are reported, missing system roots are skipped silently.
    pub(crate) fn is_turn_root(&self, path: &Path) -> bool {
        self.roots.iter().any(|r| r.path == path)
    }
}
