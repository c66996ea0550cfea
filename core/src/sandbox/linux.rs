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

use crate::protocol::{FsAccess, NetworkMode, SandboxBackendKind, SandboxMode};

use super::egress::PROXY_PORT;
use super::landlock_plan::{NONO_MAX_ENFORCED_ABI, NetPlan, plan_with_proxy};
use super::namespace::{self, NamespacePlan, NamespaceSupport, TmpMount, ViewSpec};
use super::report::{BackendProbe, Degradation, DegradationArea, SandboxReport};
use super::spec::{SandboxSpec, TmpSpec};
use super::{Launch, PreparedSandbox, SandboxBackend, SandboxError, unix_filter};

/// The nono (Landlock + seccomp) backend, with the namespace layer under it. Cheap to create;
/// the Landlock ABI and the namespace support are probed once per process.
#[derive(Debug, Default, Clone, Copy)]
pub struct LinuxNonoBackend {
    /// A namespace support that replaces the probe's (tests of the degraded paths).
    namespaces: Option<NamespaceSupport>,
}

/// What the child applies, prepared by [`LinuxNonoBackend::prepare`].
pub(crate) struct LinuxLaunch {
    /// Landlock + nono's seccomp socket filter.
    pub(crate) landlock: PreparedLandlockSandbox,
    /// The namespace layer, when this machine has user namespaces.
    pub(crate) namespaces: Option<NamespacePlan>,
    /// Whether to refuse `socket(AF_UNIX)`.
    pub(crate) unix_filter: bool,
    /// The Landlock rule descriptors standing for the per-run tmp dir ([`TmpSlot`]); `None`
    /// when the spec names its tmp dir (or has none of its own).
    pub(crate) tmp_slot: Option<Vec<i32>>,
    /// With a mount namespace, the placeholder every run's private tmpfs is mounted on (the
    /// run's `TMPDIR`); kept, empty, as long as this preparation. `None`: the runner makes a
    /// host directory per run.
    pub(crate) tmpfs: Option<TmpSlot>,
}

impl LinuxLaunch {
    /// The path of every run's own tmpfs, when the mount view makes one.
    pub(crate) fn mounted_tmp(&self) -> Option<&std::path::Path> {
        self.tmpfs.as_ref().map(|slot| slot.path.as_path())
    }
}

/// The private tmpfs's default size cap (`TMPDIR` of a sandboxed command, in memory).
pub const DEFAULT_TMP_SIZE: &str = "1g";
/// The private tmpfs's cap on files and directories.
pub const TMP_INODES: u64 = 262_144;
/// The variable that sets the private tmpfs's size cap (`512m`, `2g`, bytes...).
pub const TMP_SIZE_VAR: &str = "TURNGATE_SANDBOX_TMP_SIZE";

/// The private tmpfs's size cap: [`TMP_SIZE_VAR`] when set, else [`DEFAULT_TMP_SIZE`]. A value
/// that is not a positive whole number with an optional `k`, `m` or `g` is refused.
fn tmp_size() -> Result<String, SandboxError> {
    let Some(value) = std::env::var_os(TMP_SIZE_VAR) else {
        return Ok(DEFAULT_TMP_SIZE.to_owned());
    };
    let value = value.to_string_lossy().into_owned();
    let digits = value
        .strip_suffix(['k', 'K', 'm', 'M', 'g', 'G'])
        .unwrap_or(&value);
    if digits.is_empty()
        || !digits.bytes().all(|b| b.is_ascii_digit())
        || digits.bytes().all(|b| b == b'0')
    {
        return Err(SandboxError::Prepare(format!(
            "{TMP_SIZE_VAR}={value:?} is not a size (a positive number of bytes, optionally \
             with k, m or g)"
        )));
    }
    Ok(value)
}

fn detected() -> &'static Result<DetectedAbi, String> {
    static ABI: OnceLock<Result<DetectedAbi, String>> = OnceLock::new();
    ABI.get_or_init(|| nono::detect_abi().map_err(|e| e.to_string()))
}

impl LinuxNonoBackend {
    /// A handle on the backend.
    pub fn new() -> Self {
        Self { namespaces: None }
    }

    /// The backend as if this machine had only `support` for namespaces (the probe is not
    /// run). Lets a test show the degraded paths on a machine that has every namespace.
    pub fn with_namespace_support(support: NamespaceSupport) -> Self {
        Self {
            namespaces: Some(support),
        }
    }

    /// The namespace support in force: the injected one, or the probe's.
    pub fn namespace_support(&self) -> NamespaceSupport {
        self.namespaces.unwrap_or_else(namespace::probe)
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

/// What the mount view binds writable and masks, from the spec's grants. `slot` is the
/// placeholder standing for the per-run tmp dir ([`TmpSlot`]): bound at spawn, not here.
fn view_spec(
    spec: &SandboxSpec,
    net: &NetPlan,
    proxy: Option<u16>,
    slot: Option<&TmpSlot>,
    shared_network: bool,
) -> Result<ViewSpec, SandboxError> {
    let writable = spec
        .effective_grants()
        .into_iter()
        .filter(|g| g.access == FsAccess::Write)
        .map(|g| g.path)
        // Device files are bound into the new /dev on their own.
        .filter(|p| !p.starts_with("/dev"))
        .filter(|p| Some(p.as_path()) != slot.map(|s| s.path.as_path()))
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect();
    let tmp = match slot {
        Some(slot) => Some(TmpMount {
            path: slot.path.clone(),
            dev: slot.dev,
            ino: slot.ino,
            size: tmp_size()?,
            inodes: TMP_INODES,
        }),
        None => None,
    };
    Ok(ViewSpec {
        writable,
        masks: spec.masks.clone(),
        empty_socket_dirs: !spec.network.allow_unix_sockets,
        network: matches!(net, NetPlan::BlockAll) || proxy.is_some(),
        egress_port: proxy,
        shared_network,
        tmp,
        overlays: spec.review.clone().unwrap_or_default(),
        overlay_rule_fds: Vec::new(),
    })
}

/// The placeholder for a per-run private tmp dir (`TmpSpec::Isolated(None)`), so that the
/// preparation can be cached across runs (opening every granted path and building the
/// seccomp filter is most of the parent's work). The sandbox is prepared with this fresh,
/// empty directory (mode 0700) as the tmp grant. Each run's child points the Landlock rule
/// descriptors nono opened for it at that run's own tmp dir (`dup3`) before the ruleset is
/// built from them:
/// - with a mount namespace, the placeholder is kept (empty) while the preparation lives and
///   every run mounts a tmpfs of its own on it in its mount view (ADR 0027): the tmpfs's root
///   is the run's tmp dir;
/// - without one, the placeholder is removed right after preparing (the descriptors then
///   point at a deleted directory, in which nothing can be created) and the runner makes a
///   host directory per run.
pub(crate) struct TmpSlot {
    path: std::path::PathBuf,
    dev: u64,
    ino: u64,
}

impl std::fmt::Debug for TmpSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("TmpSlot").field(&self.path).finish()
    }
}

impl TmpSlot {
    fn create() -> Result<TmpSlot, SandboxError> {
        let template = std::env::temp_dir().join("turngate-slot-XXXXXX");
        let mut bytes = template.into_os_string().into_encoded_bytes();
        bytes.push(0);
        // SAFETY: `bytes` is a NUL-terminated, writable template that outlives the call.
        let ptr = unsafe { libc::mkdtemp(bytes.as_mut_ptr().cast()) };
        if ptr.is_null() {
            return Err(SandboxError::Prepare(format!(
                "could not create the private tmp dir's placeholder in {}: {}",
                std::env::temp_dir().display(),
                std::io::Error::last_os_error()
            )));
        }
        bytes.pop();
        // SAFETY: the bytes came from an OsString and mkdtemp only replaced ASCII `X`s.
        let path = std::path::PathBuf::from(unsafe {
            std::ffi::OsString::from_encoded_bytes_unchecked(bytes)
        });
        // mkdtemp made it; its identity is what every run's mount point must still be.
        use std::os::unix::fs::MetadataExt;
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_dir() => Ok(TmpSlot {
                dev: meta.dev(),
                ino: meta.ino(),
                path,
            }),
            other => {
                let _ = std::fs::remove_dir(&path);
                Err(SandboxError::Prepare(format!(
                    "the private tmp dir's placeholder {} is not the directory made: {other:?}",
                    path.display()
                )))
            }
        }
    }
}

impl Drop for TmpSlot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.path);
    }
}

/// The descriptors open in this process (`/proc/self/fd`).
fn open_fds() -> std::collections::HashSet<i32> {
    std::fs::read_dir("/proc/self/fd")
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
                .collect()
        })
        .unwrap_or_default()
}

/// Of the descriptors in `new`, the `O_PATH` ones open on the directory `root` (by device
/// and inode): the Landlock rule descriptors nono prepared for it.
fn rule_fds_for(root: &std::path::Path, new: &[i32]) -> Vec<i32> {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(root) else {
        return Vec::new();
    };
    new.iter()
        .copied()
        .filter(|&fd| {
            // SAFETY: fcntl and fstat on a descriptor number; a closed one just fails.
            let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
            if flags < 0 || flags & libc::O_PATH == 0 {
                return false;
            }
            // SAFETY: a zeroed stat buffer on the stack.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            // SAFETY: as above.
            let ok = unsafe { libc::fstat(fd, &mut st) } == 0;
            ok && st.st_dev == meta.dev() && st.st_ino == meta.ino()
        })
        .collect()
}

/// Under review, every writable turn root must be one of the overlays: a root bound writable
/// as it is would take its writes unreviewed.
fn check_review(spec: &SandboxSpec, view: &ViewSpec) -> Result<(), SandboxError> {
    if spec.review.is_none() {
        return Ok(());
    }
    if spec.mode == SandboxMode::Unrestricted {
        return Err(SandboxError::Prepare(
            "reviewable writes need the namespace layer, which the unrestricted sandbox mode \
             does not use; nothing was run"
                .into(),
        ));
    }
    for grant in spec.effective_grants() {
        if grant.access != FsAccess::Write || !spec.is_turn_root(&grant.path) {
            continue;
        }
        let Ok(path) = std::fs::canonicalize(&grant.path) else {
            continue;
        };
        if !view.overlays.iter().any(|o| o.root == path) {
            return Err(SandboxError::Prepare(format!(
                "the writable root {} has no review overlay; nothing was run",
                path.display()
            )));
        }
    }
    Ok(())
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

    fn prepares_per_run_tmp(&self) -> bool {
        true
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
                if unix_filter::SUPPORTED {
                    capabilities.push("unix_socket_filter".to_string());
                }
                let ns = self.namespace_support();
                for (on, name) in [
                    (ns.user, "user_namespace"),
                    (ns.mount, "mount_namespace"),
                    (ns.pid, "pid_namespace"),
                    (ns.network, "network_namespace"),
                    (ns.uts, "uts_namespace"),
                    (ns.ipc, "ipc_namespace"),
                ] {
                    if on {
                        capabilities.push(name.to_string());
                    }
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
        // `network = restricted` goes through the egress proxy when the command can have its
        // own network namespace (not in unrestricted mode, which uses no namespaces).
        let support = self.namespace_support();
        let proxy = (spec.network.mode == NetworkMode::Restricted
            && spec.mode != SandboxMode::Unrestricted
            && support.user
            && support.network)
            .then_some(PROXY_PORT);
        // A per-run tmp dir: prepared once with a placeholder, see `TmpSlot`.
        // (`unrestricted` grants `/` read-write and needs no tmp rule.)
        let slot = match spec.tmp {
            TmpSpec::Isolated(None) if spec.mode != SandboxMode::Unrestricted => {
                Some(TmpSlot::create()?)
            }
            _ => None,
        };
        let slotted;
        let spec = match &slot {
            Some(slot) => {
                slotted = spec.clone().with_tmp_dir(&slot.path);
                &slotted
            }
            None => spec,
        };
        let planned = plan_with_proxy(spec, abi.abi as u32, proxy);
        let mut narrowings = planned.narrowings;
        let mut degradations: Vec<Degradation> = planned.degradations;

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

        let before = spec.review.is_some().then(open_fds);
        let prepared: PreparedLandlockSandbox =
            Sandbox::prepare_seccomp_with_abi(&caps, &abi, SeccompOpts::network_baseline())
                .map_err(|e| SandboxError::Prepare(e.to_string()))?;
        // The descriptors nono opened for the reviewed roots' rules (see `ViewSpec`).
        let new_fds: Vec<i32> = match &before {
            Some(before) => open_fds().difference(before).copied().collect(),
            None => Vec::new(),
        };

        let tmp_slot = match &slot {
            Some(slot) => {
                // Every descriptor of this process on the placeholder, not only those opened
                // since `before`: another thread's closed descriptor number may have been
                // reused for ours meanwhile. Nothing but nono knows the placeholder's name.
                let all: Vec<i32> = open_fds().into_iter().collect();
                let fds = rule_fds_for(&slot.path, &all);
                if fds.is_empty() {
                    return Err(SandboxError::Prepare(
                        "no Landlock rule was prepared for the private tmp dir".into(),
                    ));
                }
                Some(fds)
            }
            None => None,
        };

        let unix_filter = !spec.network.allow_unix_sockets && unix_filter::SUPPORTED;
        // The process's shared network namespace only where the command can open no socket
        // that reaches anything in it: the network blocked (seccomp refuses every family but
        // Unix) and `socket(AF_UNIX)` refused too, so all it can make is a socketpair, whose
        // ends are connected to each other only (ADR 0017).
        let shared_network = matches!(planned.net, NetPlan::BlockAll)
            && proxy.is_none()
            && unix_filter
            && !planned.allow_abstract_unix;
        let (namespaces, masks, entered) = if spec.mode == SandboxMode::Unrestricted {
            check_review(spec, &ViewSpec::default())?;
            (None, Vec::new(), Vec::new())
        } else {
            let mut view = view_spec(spec, &planned.net, proxy, slot.as_ref(), shared_network)?;
            check_review(spec, &view)?;
            view.overlay_rule_fds = view
                .overlays
                .iter()
                .map(|o| rule_fds_for(&o.root, &new_fds))
                .collect();
            let (plan, missing) =
                NamespacePlan::new(&view, support).map_err(SandboxError::Prepare)?;
            degradations.extend(missing);
            if spec.masks_truncated {
                degradations.push(Degradation::new(
                    DegradationArea::Filesystem,
                    format!(
                        "the roots hold more than {} entries; policy-denied paths beyond them \
                         are not masked in the mount view (the checkers still refuse them)",
                        super::masks::MAX_ENTRIES
                    ),
                ));
            }
            match plan {
                Some(plan) => {
                    let masks = plan.masks.clone();
                    let entered = plan.entered.iter().map(|s| s.to_string()).collect();
                    (Some(plan), masks, entered)
                }
                None => (None, Vec::new(), Vec::new()),
            }
        };

        let egress = namespaces.as_ref().and_then(NamespacePlan::egress_port);
        let detail = match egress {
            Some(port) => format!(
                "{}; network through the egress proxy on 127.0.0.1:{port} in a network \
                 namespace with loopback only",
                Self::detail(&abi)
            ),
            None if namespaces
                .as_ref()
                .is_some_and(NamespacePlan::shares_network) =>
            {
                format!(
                    "{}; the network namespace (loopback only) is shared with this process's other \
                 sandboxes that can open no socket",
                    Self::detail(&abi)
                )
            }
            None => Self::detail(&abi),
        };
        // Every run mounts its own tmpfs on the placeholder: keep it while this preparation
        // lives. Otherwise it goes now, and each run gets a host directory.
        let tmpfs = match slot {
            Some(slot) if namespaces.as_ref().is_some_and(NamespacePlan::mounts_tmp) => Some(slot),
            _ => None,
        };
        let mut report =
            SandboxReport::applied(SandboxBackendKind::Nono, detail, degradations, narrowings);
        report.namespaces = entered;
        report.masks = masks;
        Ok(PreparedSandbox {
            report,
            launch: Launch::PreExec(Arc::new(LinuxLaunch {
                landlock: prepared,
                namespaces,
                unix_filter,
                tmp_slot,
                tmpfs,
            })),
        })
    }
}
