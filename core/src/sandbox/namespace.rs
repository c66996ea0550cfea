//! The namespace layer (Linux): user, mount, PID, network, UTS and IPC namespaces under the
//! Landlock + seccomp layer, created with raw syscalls in the spawned child (ADR 0010).
//!
//! The parent prepares everything that allocates: every path as a `CString`, the id maps, the
//! list of mount operations. The child only reads that plan and makes raw syscalls; it forks
//! with a raw `clone` (no `atfork` handlers, no malloc lock), so it is sound after `fork` in a
//! multi-threaded host (Python, Node, Swift).
//!
//! Process shape, for one command:
//! - **P**, the process the runner spawned (the one fork of the host's address space), sets
//!   `PR_SET_PDEATHSIG`, joins or unshares the namespaces, builds the mount view, then creates
//!   **I** and waits for it; it exits with the command's status (re-raising its signal).
//! - **I** is PID 1 of the new PID namespace, a `clone(CLONE_VM)` child of P on a stack of its
//!   own (no copy of the address space): it mounts a fresh `/proc`, creates **C**, reaps every
//!   orphan, forwards `SIGTERM`/`SIGINT`/`SIGHUP`/`SIGQUIT`/`SIGUSR1`/`SIGUSR2` to C, and exits
//!   when C does. When I exits the kernel kills every process in the namespace; I dies with P
//!   (`PR_SET_PDEATHSIG`), and P dies with turngate.
//! - **C** is a `clone(CLONE_VM | CLONE_VFORK)` child of I on the other stack (I waits until C
//!   execs, as with vfork): it restores the signal mask and runs the runner's command step,
//!   which changes into the working directory again (in the new mount view), marks every
//!   inherited descriptor close-on-exec, applies Landlock and seccomp, drops the capabilities
//!   of the user namespace and execs the command itself (the runner's prepared argv, envp and
//!   `PATH` candidates). A failure of I or C is written to the runner's failure pipe.
//!
//! It never decides what may run; it only narrows what the command can reach.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::report::{Degradation, DegradationArea};
use super::spec::{Mask, MaskKind, ReviewLayer};

// Mount API constants (linux/mount.h); stable kernel ABI, not all exported by `libc`.
const MOUNT_ATTR_RDONLY: u64 = 0x0000_0001;
const MOUNT_ATTR_NOSUID: u64 = 0x0000_0002;
const MOUNT_ATTR_NODEV: u64 = 0x0000_0004;
const MOUNT_ATTR_NOEXEC: u64 = 0x0000_0008;
const AT_RECURSIVE: libc::c_uint = 0x8000;
const OPEN_TREE_CLONE: libc::c_uint = 0x1;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
const FSOPEN_CLOEXEC: libc::c_uint = 0x1;
const FSMOUNT_CLOEXEC: libc::c_uint = 0x1;
const FSCONFIG_SET_STRING: libc::c_uint = 1;
const FSCONFIG_CMD_CREATE: libc::c_uint = 6;

/// `struct mount_attr` (linux/mount.h), `MOUNT_ATTR_SIZE_VER0`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// Child-side failure: a step code (see [`step_name`]) and the kernel's errno.
pub(crate) type RawFailure = (u32, i32);

/// Step codes below 100; `100 + i` is mount operation `i` of the plan.
pub(crate) const STEP_PDEATHSIG: u32 = 20;
pub(crate) const STEP_UNSHARE: u32 = 21;
pub(crate) const STEP_ID_MAP: u32 = 22;
pub(crate) const STEP_FORK_INIT: u32 = 23;
pub(crate) const STEP_PROC: u32 = 24;
pub(crate) const STEP_LOOPBACK: u32 = 25;
pub(crate) const STEP_FORK_COMMAND: u32 = 26;
pub(crate) const STEP_CHDIR: u32 = 27;
pub(crate) const STEP_PARENT_GONE: u32 = 28;
pub(crate) const STEP_CAPS: u32 = 29;
pub(crate) const STEP_UNIX_FILTER: u32 = 30;
pub(crate) const STEP_EGRESS_LISTENER: u32 = 31;
pub(crate) const STEP_OVERLAY_RULE: u32 = 32;
pub(crate) const STEP_SETNS: u32 = 33;
pub(crate) const STEP_TMP: u32 = 34;
pub(crate) const STEP_EXEC: u32 = 35;
pub(crate) const STEP_MOUNT_BASE: u32 = 100;

/// Which namespaces an unprivileged process may create on this machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NamespaceSupport {
    /// A user namespace (the others need it).
    pub user: bool,
    /// A mount namespace with the new mount API (`open_tree`, `move_mount`, `mount_setattr`).
    pub mount: bool,
    /// A PID namespace with a fresh `/proc`.
    pub pid: bool,
    /// A network namespace with its loopback up.
    pub network: bool,
    /// A UTS namespace.
    pub uts: bool,
    /// An IPC namespace.
    pub ipc: bool,
    /// The errno of the first step that failed (0 when everything worked).
    pub errno: i32,
}

impl NamespaceSupport {
    /// Every layer available.
    pub const ALL: NamespaceSupport = NamespaceSupport {
        user: true,
        mount: true,
        pid: true,
        network: true,
        uts: true,
        ipc: true,
        errno: 0,
    };

    /// No layer available (no user namespaces), with the errno that said so.
    pub const fn none(errno: i32) -> NamespaceSupport {
        NamespaceSupport {
            user: false,
            mount: false,
            pid: false,
            network: false,
            uts: false,
            ipc: false,
            errno,
        }
    }

    fn from_bits(bits: u32, errno: i32) -> NamespaceSupport {
        let on = |i: u32| bits & (1 << i) != 0;
        NamespaceSupport {
            user: on(0),
            mount: on(0) && on(1),
            pid: on(0) && on(1) && on(2),
            network: on(0) && on(3),
            uts: on(0) && on(4),
            ipc: on(0) && on(5),
            errno,
        }
    }
}

/// Probe once per process: a throwaway child tries every step the real launch makes.
pub fn probe() -> NamespaceSupport {
    static SUPPORT: OnceLock<NamespaceSupport> = OnceLock::new();
    *SUPPORT.get_or_init(run_probe)
}

fn run_probe() -> NamespaceSupport {
    match probe_child() {
        Ok(support) => support,
        Err(err) => NamespaceSupport::none(err.raw_os_error().unwrap_or(libc::EINVAL)),
    }
}

fn probe_child() -> std::io::Result<NamespaceSupport> {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;

    let maps = IdMaps::current();
    let (read_end, write_end) = super::runner::cloexec_pipe()?;
    let fd = write_end.as_raw_fd();
    let mut cmd = std::process::Command::new("/");
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: the hook runs between fork and exec and makes raw syscalls only (no allocation,
    // no lock); it always ends in `_exit`, never returning to the runtime.
    unsafe {
        cmd.pre_exec(move || {
            let (bits, errno) = probe_in_child(&maps);
            let mut msg = [0u8; 8];
            msg[..4].copy_from_slice(&bits.to_ne_bytes());
            msg[4..].copy_from_slice(&errno.to_ne_bytes());
            libc::write(fd, msg.as_ptr().cast(), msg.len());
            libc::_exit(0);
        });
    }
    let mut child = cmd.spawn()?;
    drop(write_end);
    let mut msg = [0u8; 8];
    // SAFETY: `msg` is a live 8-byte buffer; every write end is closed once the child exits.
    let n = unsafe { libc::read(read_end.as_raw_fd(), msg.as_mut_ptr().cast(), msg.len()) };
    let _ = child.wait();
    if n != 8 {
        return Ok(NamespaceSupport::none(libc::EIO));
    }
    let bits = u32::from_ne_bytes([msg[0], msg[1], msg[2], msg[3]]);
    let errno = i32::from_ne_bytes([msg[4], msg[5], msg[6], msg[7]]);
    Ok(NamespaceSupport::from_bits(bits, errno))
}

/// Whether an overlay can be mounted in a user namespace with its upper layer in `scratch`
/// (a directory on the filesystem that will hold the upper dirs), and behaves as review needs:
/// a whiteout for a deleted file and an opaque directory for a recreated one. A throwaway
/// child tries it in its own namespaces; `scratch` is left empty. Kernels before 5.11 refuse
/// an overlay in a user namespace; some filesystems cannot be its upper layer.
pub fn probe_overlay(scratch: &Path) -> Result<(), String> {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;

    let support = probe();
    if !(support.user && support.mount) {
        let why = std::io::Error::from_raw_os_error(support.errno.max(1));
        return Err(format!("no user or mount namespace ({why})"));
    }
    let base = scratch.join(format!(".probe-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let io = |what: &str, e: std::io::Error| format!("overlay probe: {what}: {e}");
    for dir in ["lower/d", "upper", "work"] {
        std::fs::create_dir_all(base.join(dir)).map_err(|e| io("create", e))?;
    }
    std::fs::write(base.join("lower/f"), b"f").map_err(|e| io("create", e))?;
    std::fs::write(base.join("lower/d/g"), b"g").map_err(|e| io("create", e))?;
    let layer = ReviewLayer {
        root: base.join("lower"),
        upper: base.join("upper"),
        work: base.join("work"),
    };
    let result = (|| {
        let data = overlay_data(&layer)?;
        let lower = cstring(&layer.root)?;
        let file = cstring(&layer.root.join("f"))?;
        let dir = cstring(&layer.root.join("d"))?;
        let inner = cstring(&layer.root.join("d/g"))?;
        let maps = IdMaps::current();
        let (read_end, write_end) = super::runner::cloexec_pipe().map_err(|e| io("pipe", e))?;
        let fd = write_end.as_raw_fd();
        let mut cmd = std::process::Command::new("/");
        cmd.stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        // SAFETY: the hook runs between fork and exec and makes raw syscalls only on strings
        // prepared above; it always ends in `_exit`.
        unsafe {
            cmd.pre_exec(move || {
                let (step, err) = overlay_in_child(&maps, &lower, &data, &file, &dir, &inner);
                let mut msg = [0u8; 8];
                msg[..4].copy_from_slice(&step.to_ne_bytes());
                msg[4..].copy_from_slice(&err.to_ne_bytes());
                libc::write(fd, msg.as_ptr().cast(), msg.len());
                libc::_exit(0);
            });
        }
        let mut child = cmd.spawn().map_err(|e| io("spawn", e))?;
        drop(write_end);
        let mut msg = [0u8; 8];
        // SAFETY: a live 8-byte buffer; every write end is closed once the child exits.
        let n = unsafe { libc::read(read_end.as_raw_fd(), msg.as_mut_ptr().cast(), msg.len()) };
        let _ = child.wait();
        if n != 8 {
            return Err("overlay probe: the child did not answer".to_owned());
        }
        let step = u32::from_ne_bytes([msg[0], msg[1], msg[2], msg[3]]);
        let err = i32::from_ne_bytes([msg[4], msg[5], msg[6], msg[7]]);
        if step == 0 {
            return Ok(());
        }
        let what = match step {
            1 => "create a user namespace",
            2 => "write the id maps",
            3 => "create a mount namespace",
            4 => {
                "mount an overlay in a user namespace (Linux 5.11 or later, and an upper \
                  filesystem that supports user xattrs)"
            }
            5 => "delete a lower file through the overlay (whiteout)",
            6 => "recreate a lower directory through the overlay (opaque directory)",
            _ => "probe",
        };
        Err(format!(
            "cannot {what}: {}",
            std::io::Error::from_raw_os_error(err)
        ))
    })();
    let _ = std::fs::remove_dir_all(&base);
    result
}

/// The overlay probe's child side: `(0, 0)` or the failed step and its errno.
fn overlay_in_child(
    maps: &IdMaps,
    lower: &std::ffi::CStr,
    data: &std::ffi::CStr,
    file: &std::ffi::CStr,
    dir: &std::ffi::CStr,
    inner: &std::ffi::CStr,
) -> (u32, i32) {
    // SAFETY (whole function): raw syscalls on NUL-terminated strings and scalars.
    unsafe {
        if libc::syscall(libc::SYS_unshare, libc::CLONE_NEWUSER) != 0 {
            return (1, errno());
        }
        if let Err((_, e)) = maps.write_raw() {
            return (2, e);
        }
        if libc::syscall(libc::SYS_unshare, libc::CLONE_NEWNS) != 0
            || libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) != 0
        {
            return (3, errno());
        }
        if libc::mount(
            c"overlay".as_ptr(),
            lower.as_ptr(),
            c"overlay".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            data.as_ptr().cast(),
        ) != 0
        {
            return (4, errno());
        }
        if libc::unlink(file.as_ptr()) != 0 {
            return (5, errno());
        }
        if libc::unlink(inner.as_ptr()) != 0
            || libc::rmdir(dir.as_ptr()) != 0
            || libc::mkdir(dir.as_ptr(), 0o755) != 0
        {
            return (6, errno());
        }
        (0, 0)
    }
}

/// The probe's child side: `(bits, errno of the first failure)`.
fn probe_in_child(maps: &IdMaps) -> (u32, i32) {
    let mut first_errno = 0;
    let mut note = |e: i32| {
        if first_errno == 0 {
            first_errno = e;
        }
    };
    // SAFETY (whole function): raw syscalls with scalar arguments or pointers to live stack
    // buffers and NUL-terminated strings prepared by the parent.
    unsafe {
        if libc::syscall(libc::SYS_unshare, libc::CLONE_NEWUSER) != 0 {
            return (0, errno());
        }
        if let Err((_, e)) = maps.write_raw() {
            return (0, e);
        }
        let mut bits = 1u32;
        if libc::syscall(libc::SYS_unshare, libc::CLONE_NEWNS) == 0 {
            let ok = libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) == 0
                && {
                    let fd = libc::syscall(
                        libc::SYS_open_tree,
                        libc::AT_FDCWD,
                        c"/dev/null".as_ptr(),
                        OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint,
                    );
                    if fd >= 0 {
                        libc::close(fd as i32);
                    }
                    fd >= 0
                }
                && set_attr(libc::AT_FDCWD, c"/", AT_RECURSIVE, MOUNT_ATTR_RDONLY, 0).is_ok();
            if ok {
                bits |= 1 << 1;
            } else {
                note(errno());
            }
        } else {
            note(errno());
        }
        if libc::syscall(libc::SYS_unshare, libc::CLONE_NEWNET) == 0 {
            if loopback_up().is_ok() {
                bits |= 1 << 3;
            } else {
                note(errno());
            }
        } else {
            note(errno());
        }
        if libc::syscall(libc::SYS_unshare, libc::CLONE_NEWUTS) == 0 {
            bits |= 1 << 4;
        } else {
            note(errno());
        }
        if libc::syscall(libc::SYS_unshare, libc::CLONE_NEWIPC) == 0 {
            bits |= 1 << 5;
        } else {
            note(errno());
        }
        if bits & (1 << 1) != 0 && libc::syscall(libc::SYS_unshare, libc::CLONE_NEWPID) == 0 {
            // The next child is PID 1; it must be able to mount its own /proc.
            match raw_fork() {
                0 => {
                    let rc = libc::mount(
                        c"proc".as_ptr(),
                        c"/proc".as_ptr(),
                        c"proc".as_ptr(),
                        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                        std::ptr::null(),
                    );
                    libc::_exit(if rc == 0 { 0 } else { 1 });
                }
                pid if pid > 0 => {
                    let mut status = 0;
                    let waited = libc::waitpid(pid, &mut status, 0);
                    if waited == pid && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
                        bits |= 1 << 2;
                    } else {
                        note(libc::EPERM);
                    }
                }
                _ => note(errno()),
            }
        }
        (bits, first_errno)
    }
}

fn errno() -> i32 {
    // SAFETY: reads the calling thread's errno.
    unsafe { *libc::__errno_location() }
}

/// One user namespace, and one network namespace with only `lo` (up) in it, made once per
/// process and joined with `setns` by every sandbox that can share them (ADR 0017): creating
/// and tearing down a network namespace is the largest single cost of a sandboxed spawn.
///
/// They are held by two descriptors (close-on-exec) for the life of the process; the process
/// that made them is gone. Every sandbox still gets its own mount, PID, UTS and IPC namespaces.
/// A command joins the shared network namespace only when it can open no socket at all
/// (seccomp refuses every family, `AF_UNIX` included; a socketpair's ends are connected to each
/// other only), so sharing its loopback reaches nothing; a command that may open sockets (Unix
/// sockets allowed, the egress proxy, TCP ports) gets a network namespace of its own.
pub(crate) struct SharedNamespaces {
    user: std::os::fd::OwnedFd,
    net: std::os::fd::OwnedFd,
    uid: libc::uid_t,
    gid: libc::gid_t,
}

impl std::fmt::Debug for SharedNamespaces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedNamespaces")
            .field("uid", &self.uid)
            .field("gid", &self.gid)
            .finish_non_exhaustive()
    }
}

/// The process's shared namespaces, made on first use; `None` when they cannot be made or
/// joined here (then every sandbox unshares its own, as before).
pub(crate) fn shared() -> Option<&'static SharedNamespaces> {
    static SHARED: OnceLock<Option<SharedNamespaces>> = OnceLock::new();
    SHARED.get_or_init(|| make_shared().ok()).as_ref()
}

/// A throwaway child makes the namespaces and waits while the parent opens them through
/// `/proc/<pid>/ns`; a second child checks that they can be joined and that a sandbox's own
/// namespaces can be made inside them.
fn make_shared() -> Result<SharedNamespaces, i32> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

    let maps = IdMaps::current();
    let io = |e: std::io::Error| e.raw_os_error().unwrap_or(libc::EIO);
    let (ready_r, ready_w) = super::runner::cloexec_pipe().map_err(io)?;
    let (release_r, release_w) = super::runner::cloexec_pipe().map_err(io)?;
    let (rr, rw) = (ready_r.as_raw_fd(), ready_w.as_raw_fd());
    let (lr, lw) = (release_r.as_raw_fd(), release_w.as_raw_fd());
    // SAFETY: the child makes raw syscalls only (on the maps prepared above and stack buffers)
    // and always ends in `_exit`.
    let pid = unsafe { raw_fork() };
    if pid < 0 {
        return Err(errno());
    }
    if pid == 0 {
        // SAFETY: as above.
        unsafe {
            libc::close(rr);
            libc::close(lw);
            let (step, e) = shared_in_child(&maps);
            let mut msg = [0u8; 8];
            msg[..4].copy_from_slice(&step.to_ne_bytes());
            msg[4..].copy_from_slice(&e.to_ne_bytes());
            libc::write(rw, msg.as_ptr().cast(), msg.len());
            if step == 0 {
                // Stay alive (so the namespaces can be opened) until the parent lets go.
                let mut byte = [0u8; 1];
                while libc::read(lr, byte.as_mut_ptr().cast(), 1) < 0 && errno() == libc::EINTR {}
            }
            libc::_exit(0);
        }
    }
    drop(ready_w);
    drop(release_r);
    let mut msg = [0u8; 8];
    // SAFETY: a live 8-byte buffer; the child writes once or exits.
    let n = unsafe { libc::read(rr, msg.as_mut_ptr().cast(), msg.len()) };
    let step = u32::from_ne_bytes([msg[0], msg[1], msg[2], msg[3]]);
    let err = i32::from_ne_bytes([msg[4], msg[5], msg[6], msg[7]]);
    let open = |what: &str| -> Result<OwnedFd, i32> {
        let path = CString::new(format!("/proc/{pid}/ns/{what}")).map_err(|_| libc::EINVAL)?;
        // SAFETY: a NUL-terminated path; the descriptor is owned below.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(errno());
        }
        // SAFETY: `open` returned a fresh descriptor nothing else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    };
    let opened = if n != 8 {
        Err(libc::EIO)
    } else if step != 0 {
        Err(err)
    } else {
        open("user").and_then(|user| Ok((user, open("net")?)))
    };
    drop(release_w);
    let mut status = 0;
    // SAFETY: waits for the child made above.
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 && errno() == libc::EINTR {}
    let (user, net) = opened?;
    // SAFETY: geteuid/getegid cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let shared = SharedNamespaces {
        user,
        net,
        uid,
        gid,
    };
    check_joinable(&shared)?;
    Ok(shared)
}

/// The first child's side of [`make_shared`]: `(0, 0)` or the failed step and its errno.
fn shared_in_child(maps: &IdMaps) -> (u32, i32) {
    // SAFETY: scalar raw syscalls and the prepared maps.
    unsafe {
        if libc::syscall(libc::SYS_unshare, libc::CLONE_NEWUSER) != 0 {
            return (STEP_UNSHARE, errno());
        }
        if let Err(e) = maps.write_raw() {
            return e;
        }
        if libc::syscall(libc::SYS_unshare, libc::CLONE_NEWNET) != 0 {
            return (STEP_UNSHARE, errno());
        }
        if let Err(e) = loopback_up() {
            return (STEP_LOOPBACK, e);
        }
    }
    (0, 0)
}

/// A child joins `shared` and unshares what a sandbox unshares inside it.
fn check_joinable(shared: &SharedNamespaces) -> Result<(), i32> {
    use std::os::fd::AsRawFd;
    let (user, net) = (shared.user.as_raw_fd(), shared.net.as_raw_fd());
    // SAFETY: the child makes scalar raw syscalls only and ends in `_exit`.
    let pid = unsafe { raw_fork() };
    if pid < 0 {
        return Err(errno());
    }
    if pid == 0 {
        // SAFETY: as above.
        unsafe {
            let flags = libc::CLONE_NEWNS | libc::CLONE_NEWPID | libc::CLONE_NEWUTS;
            let code = if libc::syscall(libc::SYS_setns, user, libc::CLONE_NEWUSER) != 0
                || libc::syscall(libc::SYS_setns, net, libc::CLONE_NEWNET) != 0
                || libc::syscall(libc::SYS_unshare, flags | libc::CLONE_NEWIPC) != 0
            {
                errno().clamp(1, 255)
            } else {
                0
            };
            libc::_exit(code);
        }
    }
    // Not a status: a failed wait (`ECHILD` where SIGCHLD is ignored) is no success.
    let mut status = -1;
    // SAFETY: waits for the child made above.
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 && errno() == libc::EINTR {}
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        Ok(())
    } else if libc::WIFEXITED(status) {
        Err(libc::WEXITSTATUS(status))
    } else {
        Err(libc::ECHILD)
    }
}

/// `fork` as a raw `clone(SIGCHLD)`: no `atfork` handlers run, so no lock the host's other
/// threads held is touched in the child.
///
/// # Safety
/// The child must only make raw syscalls until it execs or exits.
pub(crate) unsafe fn raw_fork() -> libc::pid_t {
    // SAFETY: clone with SIGCHLD and a null stack behaves as fork; arguments are scalars.
    unsafe {
        libc::syscall(libc::SYS_clone, libc::SIGCHLD as libc::c_long, 0, 0, 0, 0) as libc::pid_t
    }
}

fn set_attr(
    dirfd: libc::c_int,
    path: &std::ffi::CStr,
    flags: libc::c_uint,
    set: u64,
    clear: u64,
) -> Result<(), i32> {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clear,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: `path` is NUL-terminated and `attr` a live, correctly sized struct.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            dirfd,
            path.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if rc == 0 { Ok(()) } else { Err(errno()) }
}

// ioctl's request is an `unsigned long` in glibc and an `int` in musl (`libc::Ioctl`).
#[allow(clippy::unnecessary_cast)]
const SIOCGIFFLAGS: libc::Ioctl = libc::SIOCGIFFLAGS as libc::Ioctl;
#[allow(clippy::unnecessary_cast)]
const SIOCSIFFLAGS: libc::Ioctl = libc::SIOCSIFFLAGS as libc::Ioctl;

/// Bring `lo` up in the current network namespace (raw socket + two ioctls).
fn loopback_up() -> Result<(), i32> {
    #[repr(C)]
    struct Ifreq {
        name: [u8; 16],
        flags: libc::c_short,
        pad: [u8; 22],
    }
    // SAFETY: scalar syscalls and a live, ifreq-sized stack buffer.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(errno());
        }
        let mut req = Ifreq {
            name: [0; 16],
            flags: 0,
            pad: [0; 22],
        };
        req.name[0] = b'l';
        req.name[1] = b'o';
        let mut rc = libc::ioctl(fd, SIOCGIFFLAGS, &mut req as *mut Ifreq);
        if rc == 0 {
            req.flags |= libc::IFF_UP as libc::c_short;
            rc = libc::ioctl(fd, SIOCSIFFLAGS, &mut req as *mut Ifreq);
        }
        let err = errno();
        libc::close(fd);
        if rc == 0 { Ok(()) } else { Err(err) }
    }
}

/// The id maps a child writes for itself: its own uid and gid, mapped to themselves.
#[derive(Debug, Clone)]
pub(crate) struct IdMaps {
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
}

impl IdMaps {
    fn current() -> IdMaps {
        // SAFETY: geteuid/getegid cannot fail.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        IdMaps {
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{gid} {gid} 1\n").into_bytes(),
        }
    }

    /// Write `setgroups`, `uid_map`, `gid_map` of the calling process. Raw syscalls only.
    fn write_raw(&self) -> Result<(), RawFailure> {
        write_file(c"/proc/self/setgroups", b"deny")?;
        write_file(c"/proc/self/uid_map", &self.uid_map)?;
        write_file(c"/proc/self/gid_map", &self.gid_map)
    }
}

fn write_file(path: &std::ffi::CStr, data: &[u8]) -> Result<(), RawFailure> {
    // SAFETY: `path` is NUL-terminated; `data` is a live slice.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err((STEP_ID_MAP, errno()));
        }
        let n = libc::write(fd, data.as_ptr().cast(), data.len());
        let err = errno();
        libc::close(fd);
        if n != data.len() as isize {
            return Err((STEP_ID_MAP, err));
        }
    }
    Ok(())
}

/// One mount operation of the plan. Paths are absolute and NUL-terminated.
#[derive(Debug, Clone)]
enum MountOp {
    /// Stop mount events from propagating between the host and the new namespace.
    MakePrivate,
    /// Clone a host path (before it is covered) into clone slot `slot`.
    Clone { path: CString, slot: usize },
    /// `/` and every mount below it: read-only, `nosuid`, `nodev`.
    RootReadOnly,
    /// Bind a writable root over itself and make it writable again (`nosuid`, `nodev`).
    BindWritable { path: CString },
    /// The run's private tmp dir: a fresh tmpfs (`options`: its size cap, mode 0700) mounted
    /// on the placeholder directory `path`, which must still be the directory prepared
    /// (`dev`, `ino`; no symlink on the way). The new mount's root descriptor is the tmp dir
    /// the command's Landlock rule is built on.
    TmpfsTmp {
        path: CString,
        dev: u64,
        ino: u64,
        options: Vec<(CString, CString)>,
    },
    /// Bind a path over itself read-only.
    BindReadOnly { path: CString },
    /// A tmpfs (mode and size in `data`).
    Tmpfs {
        path: CString,
        data: CString,
        read_only: bool,
    },
    /// Create an empty file (a mount point or the mask source).
    CreateFile { path: CString, mode: libc::mode_t },
    /// Create a directory.
    Mkdir { path: CString, mode: libc::mode_t },
    /// Create a symlink `path -> target`.
    Symlink { target: CString, path: CString },
    /// Move clone `slot` onto `path` (a device node onto its place in the new `/dev`).
    Place { slot: usize, path: CString },
    /// A fresh devpts instance.
    Devpts { path: CString },
    /// Bind `source` (an empty file) over `path`, read-only. `path` must still be the file
    /// the walk judged (`dev`, `ino`; 0 skips the check; inside a reviewed root see
    /// [`Identity`]).
    MaskFile {
        source: CString,
        path: CString,
        dev: u64,
        ino: u64,
        check: Identity,
    },
    /// An empty, unreadable, read-only tmpfs over the directory `path` (checked as above).
    MaskDir {
        path: CString,
        dev: u64,
        ino: u64,
        check: Identity,
    },
    /// Check that `path` is still the file the walk judged (`dev`, `ino`), before an overlay
    /// covers it (the overlay reports other numbers for some files, see [`Identity`]).
    Verify { path: CString, dev: u64, ino: u64 },
    /// An overlay over the writable root `path` (its own lower layer); `data` holds the
    /// options (`lowerdir`, `upperdir`, `workdir`, `userxattr`). Mounted before `/` is made
    /// read-only: the overlay keeps a private writable clone of its upper layer's mount.
    Overlay { path: CString, data: CString },
    /// Remove a file (the mask source, once every mask is mounted).
    Unlink { path: CString },
}

impl MountOp {
    fn describe(&self) -> String {
        let s = |c: &CString| c.to_string_lossy().into_owned();
        match self {
            MountOp::MakePrivate => "make / private".into(),
            MountOp::Clone { path, .. } => format!("clone {}", s(path)),
            MountOp::RootReadOnly => "mount / read-only".into(),
            MountOp::BindWritable { path } => format!("bind {} read-write", s(path)),
            MountOp::TmpfsTmp { path, .. } => {
                format!("tmpfs for the private tmp dir on {}", s(path))
            }
            MountOp::BindReadOnly { path } => format!("bind {} read-only", s(path)),
            MountOp::Tmpfs { path, .. } => format!("tmpfs on {}", s(path)),
            MountOp::CreateFile { path, .. } => format!("create {}", s(path)),
            MountOp::Mkdir { path, .. } => format!("mkdir {}", s(path)),
            MountOp::Symlink { path, .. } => format!("symlink {}", s(path)),
            MountOp::Place { path, .. } => format!("bind device {}", s(path)),
            MountOp::Devpts { path } => format!("devpts on {}", s(path)),
            MountOp::MaskFile { path, .. } | MountOp::MaskDir { path, .. } => {
                format!("mask {}", s(path))
            }
            MountOp::Unlink { path } => format!("unlink {}", s(path)),
            MountOp::Verify { path, .. } => format!("verify {}", s(path)),
            MountOp::Overlay { path, .. } => format!("overlay (review) on {}", s(path)),
        }
    }
}

/// How a mask checks that its target is still the file the walk judged.
///
/// Through a freshly mounted overlay (its upper layer empty), every file below the root comes
/// from the lower layer, one filesystem: a non-directory keeps its inode number but reports
/// another device (the overlay's, or a per-layer one when the upper layer is on another
/// filesystem), and a directory keeps its inode number only when both layers share a
/// filesystem. Each such mask is also verified on the real path, device and inode, just before
/// the overlay is mounted ([`MountOp::Verify`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Identity {
    /// Device and inode (not under review).
    Exact,
    /// The inode only (in a reviewed root).
    Inode,
    /// Nothing more after the overlay (a directory when the layers are on two filesystems):
    /// only the check before the overlay was mounted.
    Verified,
}

/// Devices of the minimal `/dev` (bound from the host).
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

/// Where the mask source lives while the masks are mounted (inside the new `/dev` tmpfs).
const MASK_SOURCE: &std::ffi::CStr = c"/dev/.turngate-mask";

/// Host directories that hold daemons' sockets; emptied unless Unix sockets are allowed.
pub const SOCKET_DIRS: &[&str] = &["/run", "/var/run"];

/// The input of a plan, computed by the backend from the spec.
#[derive(Debug, Clone, Default)]
pub struct ViewSpec {
    /// Roots bound read-write (existing directories or files), shallowest first.
    pub writable: Vec<PathBuf>,
    /// Masks inside the roots.
    pub masks: Vec<Mask>,
    /// Whether host socket directories are emptied.
    pub empty_socket_dirs: bool,
    /// Whether to enter a network namespace (the network is blocked, or goes through the
    /// egress proxy).
    pub network: bool,
    /// The egress proxy's port: P listens on `127.0.0.1:PORT` inside the new network
    /// namespace and passes the listener to turngate (DESIGN §13).
    pub egress_port: Option<u16>,
    /// Reviewable writes: an overlay over each of these writable roots (empty: none).
    pub overlays: Vec<ReviewLayer>,
    /// Whether the command may share the process's network namespace ([`SharedNamespaces`]):
    /// the backend sets it only when the command can open no socket that reaches anything
    /// there (the network blocked, Unix sockets refused, abstract sockets scoped).
    pub shared_network: bool,
    /// The per-run private tmp dir: a tmpfs of its own mounted on this placeholder in every
    /// run's mount view (`None`: no private tmp dir of the run's own).
    pub tmp: Option<TmpMount>,
    /// For each overlay, the descriptors of the Landlock path rules prepared for its root.
    /// Landlock ignores a rule on a directory hidden by a mount, so once the overlay covers
    /// the root, the child points these descriptors at the overlay's root instead (`dup3`),
    /// before the ruleset is built from them.
    pub overlay_rule_fds: Vec<Vec<i32>>,
}

/// Where each run's private tmpfs goes, and how large it may grow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TmpMount {
    /// The placeholder directory on the host (empty, mode 0700, the runner's own), the mount
    /// point in every run's view.
    pub path: PathBuf,
    /// The placeholder's device and inode: the mount point must still be this directory.
    pub dev: u64,
    /// See `dev`.
    pub ino: u64,
    /// The tmpfs's `size` option (bytes, or with a `k`, `m` or `g` suffix).
    pub size: String,
    /// The tmpfs's `nr_inodes` option.
    pub inodes: u64,
}

/// Everything the child needs, prepared in the parent.
#[derive(Debug, Clone)]
pub struct NamespacePlan {
    flags: libc::c_int,
    /// The shared user namespace to join, and the shared network namespace (-1: not joined).
    join: Option<(libc::c_int, libc::c_int)>,
    maps: IdMaps,
    ops: Vec<MountOp>,
    mount: bool,
    pid: bool,
    /// Whether P made its own network namespace (and brings its `lo` up).
    network: bool,
    egress_port: Option<u16>,
    /// Each reviewed root and the Landlock rule descriptors to repoint at its overlay.
    overlay_rules: Vec<(CString, Vec<i32>)>,
    /// The masks in force, for the report.
    pub(crate) masks: Vec<Mask>,
    /// The namespaces entered, by name, for the report.
    pub(crate) entered: Vec<&'static str>,
}

fn cstring(path: &Path) -> Result<CString, String> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| format!("path {} contains a NUL byte", path.display()))
}

fn under(path: &Path, dir: &Path) -> bool {
    path.starts_with(dir)
}

impl NamespacePlan {
    /// The plan for `view` on a machine with `support`, and what is missing.
    pub fn new(
        view: &ViewSpec,
        support: NamespaceSupport,
    ) -> Result<(Option<NamespacePlan>, Vec<Degradation>), String> {
        let mut missing = Vec::new();
        let why = if support.errno != 0 {
            format!(" ({})", std::io::Error::from_raw_os_error(support.errno))
        } else {
            String::new()
        };
        if !support.user {
            missing.push(Degradation::new(
                DegradationArea::Process,
                format!(
                    "no user namespace{why}: the namespace layer is off (mount, PID, network, UTS \
                     and IPC isolation); Landlock and seccomp still confine the command"
                ),
            ));
        }
        if !support.mount {
            missing.push(Degradation::new(
                DegradationArea::Filesystem,
                format!(
                    "no mount namespace{why}: chmod, chown, utimes and xattrs outside the writable \
                     roots are not blocked, and policy-denied paths inside the roots are not masked"
                ),
            ));
        }
        if !support.pid {
            missing.push(Degradation::new(
                DegradationArea::Process,
                format!(
                    "no PID namespace{why}: host processes are visible to the command (prlimit, \
                     renice), and a process that leaves its group can outlive turngate"
                ),
            ));
        }
        if view.network && !support.network {
            missing.push(Degradation::new(
                DegradationArea::Network,
                format!(
                    "no network namespace{why}: the network is blocked by Landlock and seccomp only"
                ),
            ));
        }
        if !support.uts {
            missing.push(Degradation::new(
                DegradationArea::Process,
                format!("no UTS namespace{why}: the hostname is the host's"),
            ));
        }
        if !support.ipc {
            missing.push(Degradation::new(
                DegradationArea::Process,
                format!("no IPC namespace{why}: SysV IPC and POSIX message queues are the host's"),
            ));
        }
        let mountable = support.user && support.mount;
        if !view.overlays.is_empty() && !mountable {
            // Never unreviewed: without a mount namespace the writes would land in place.
            return Err(format!(
                "reviewable writes need a user and a mount namespace, which this machine does \
                 not allow{why}; nothing was run"
            ));
        }
        if !support.user {
            return Ok((None, missing));
        }

        // The process's shared user namespace (and network namespace, when the command can
        // share it), if it was made for this uid and gid.
        // SAFETY: geteuid/getegid cannot fail.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let shared = shared().filter(|s| s.uid == uid && s.gid == gid);
        let mut flags = if shared.is_some() {
            0
        } else {
            libc::CLONE_NEWUSER
        };
        let mut entered = vec!["user"];
        let mut ops = Vec::new();
        let mut masks = Vec::new();
        if support.mount {
            flags |= libc::CLONE_NEWNS;
            entered.push("mount");
            ops = mount_ops(view, &mut masks)?;
        }
        if support.pid {
            flags |= libc::CLONE_NEWPID;
            entered.push("pid");
        }
        let network = view.network && support.network;
        // Never for the egress proxy: its listener must be the command's own.
        let join_net =
            network && view.shared_network && view.egress_port.is_none() && shared.is_some();
        if network {
            if !join_net {
                flags |= libc::CLONE_NEWNET;
            }
            entered.push("network");
        }
        let join = shared.map(|s| {
            use std::os::fd::AsRawFd;
            (
                s.user.as_raw_fd(),
                if join_net { s.net.as_raw_fd() } else { -1 },
            )
        });
        if support.uts {
            flags |= libc::CLONE_NEWUTS;
            entered.push("uts");
        }
        if support.ipc {
            flags |= libc::CLONE_NEWIPC;
            entered.push("ipc");
        }
        let mut overlay_rules = Vec::new();
        for (i, layer) in view.overlays.iter().enumerate() {
            let fds = view.overlay_rule_fds.get(i).cloned().unwrap_or_default();
            if fds.is_empty() {
                return Err(format!(
                    "no Landlock rule was prepared for the reviewed root {}",
                    layer.root.display()
                ));
            }
            overlay_rules.push((cstring(&layer.root)?, fds));
        }
        Ok((
            Some(NamespacePlan {
                flags,
                join,
                maps: IdMaps::current(),
                ops,
                mount: support.mount,
                pid: support.pid,
                network: network && !join_net,
                egress_port: view.egress_port.filter(|_| network && !join_net),
                overlay_rules,
                masks,
                entered,
            }),
            missing,
        ))
    }

    /// Whether the command joins the process's shared network namespace ([`SharedNamespaces`]).
    pub(crate) fn shares_network(&self) -> bool {
        self.join.is_some_and(|(_, net)| net >= 0)
    }

    /// Whether the command runs in a PID namespace of its own (then I, its init, can report
    /// the command's end straight to the runner, see [`NamespacePlan::enter`]).
    pub(crate) fn pid_namespace(&self) -> bool {
        self.pid
    }

    /// Whether every run mounts a private tmpfs of its own on the view's tmp placeholder.
    pub(crate) fn mounts_tmp(&self) -> bool {
        self.ops
            .iter()
            .any(|op| matches!(op, MountOp::TmpfsTmp { .. }))
    }

    /// The egress proxy's port when P creates its listener (the network namespace is
    /// entered and the network goes through the proxy).
    pub(crate) fn egress_port(&self) -> Option<u16> {
        self.egress_port
    }

    /// A person's name for a failed step.
    pub(crate) fn step_description(&self, step: u32) -> String {
        if step >= STEP_MOUNT_BASE {
            let i = (step - STEP_MOUNT_BASE) as usize;
            return match self.ops.get(i) {
                Some(op) => op.describe(),
                None => format!("mount step {i}"),
            };
        }
        step_name(step).to_string()
    }
}

/// The name of a non-mount step.
pub(crate) fn step_name(step: u32) -> &'static str {
    match step {
        STEP_PDEATHSIG => "parent_death_signal",
        STEP_UNSHARE => "unshare",
        STEP_ID_MAP => "id_map",
        STEP_FORK_INIT => "fork_init",
        STEP_PROC => "mount_proc",
        STEP_LOOPBACK => "loopback",
        STEP_FORK_COMMAND => "fork_command",
        STEP_CHDIR => "chdir",
        STEP_PARENT_GONE => "parent_gone",
        STEP_CAPS => "drop_capabilities",
        STEP_UNIX_FILTER => "seccomp_filter",
        STEP_EGRESS_LISTENER => "egress_listener",
        STEP_OVERLAY_RULE => "overlay_landlock_rule",
        STEP_SETNS => "join_shared_namespaces",
        STEP_TMP => "private_tmp",
        STEP_EXEC => "exec",
        _ => "other",
    }
}

/// The overlay's mount options for `layer`. Paths that the option parser would split (`,`
/// between options, `:` between lower layers, `\\` escapes) are refused.
fn overlay_data(layer: &ReviewLayer) -> Result<CString, String> {
    let mut data = Vec::new();
    for (key, path) in [
        ("lowerdir", &layer.root),
        ("upperdir", &layer.upper),
        ("workdir", &layer.work),
    ] {
        let bytes = path.as_os_str().as_bytes();
        if bytes
            .iter()
            .any(|b| matches!(b, b',' | b':' | b'\\' | b'\n'))
        {
            return Err(format!(
                "cannot review {}: the path {} holds a character overlayfs options cannot \
                 carry (`,`, `:`, `\\`)",
                layer.root.display(),
                path.display()
            ));
        }
        if !data.is_empty() {
            data.push(b',');
        }
        data.extend_from_slice(key.as_bytes());
        data.push(b'=');
        data.extend_from_slice(bytes);
    }
    // In a user namespace only `user.` xattrs can be written: without `userxattr` the
    // overlay cannot mark a directory opaque, and `rm -rf dir` fails with EIO.
    data.extend_from_slice(b",userxattr");
    CString::new(data).map_err(|_| format!("path under {} has a NUL byte", layer.root.display()))
}

fn mount_ops(view: &ViewSpec, masks_out: &mut Vec<Mask>) -> Result<Vec<MountOp>, String> {
    let mut ops = vec![MountOp::MakePrivate];
    // 0. Overlays over the reviewed roots, while `/` (and so their upper layers' mount) is
    //    still writable. A root nested in another reviewed root is refused: its lower layer
    //    would be the outer overlay, and its changes would be split between two upper dirs.
    for layer in &view.overlays {
        if view
            .overlays
            .iter()
            .any(|o| o.root != layer.root && layer.root.starts_with(&o.root))
        {
            return Err(format!(
                "cannot review {}: it lies inside the reviewed root {}",
                layer.root.display(),
                view.overlays
                    .iter()
                    .find(|o| o.root != layer.root && layer.root.starts_with(&o.root))
                    .map_or_else(String::new, |o| o.root.display().to_string())
            ));
        }
        for mask in view
            .masks
            .iter()
            .filter(|m| m.kind == MaskKind::Hidden && m.ino != 0 && m.path.starts_with(&layer.root))
        {
            ops.push(MountOp::Verify {
                path: cstring(&mask.path)?,
                dev: mask.dev,
                ino: mask.ino,
            });
        }
        ops.push(MountOp::Overlay {
            path: cstring(&layer.root)?,
            data: overlay_data(layer)?,
        });
    }
    let identity = |mask: &Mask| -> Identity {
        use std::os::unix::fs::MetadataExt;
        let Some(layer) = view
            .overlays
            .iter()
            .find(|o| mask.path.starts_with(&o.root))
        else {
            return Identity::Exact;
        };
        if !mask.dir {
            return Identity::Inode;
        }
        let dev = |p: &Path| std::fs::metadata(p).map(|m| m.dev()).ok();
        match (dev(&layer.root), dev(&layer.upper)) {
            (Some(a), Some(b)) if a == b => Identity::Inode,
            _ => Identity::Verified,
        }
    };
    // 1. Clone the devices before /dev is covered.
    let mut devices = Vec::new();
    for (slot, name) in DEVICES.iter().enumerate() {
        let host = PathBuf::from("/dev").join(name);
        if std::fs::metadata(&host).is_ok() {
            ops.push(MountOp::Clone {
                path: cstring(&host)?,
                slot,
            });
            devices.push((slot, host));
        }
    }
    // 2. Everything read-only.
    ops.push(MountOp::RootReadOnly);
    // 3. Writable roots, shallowest first (a nested root's bind lands on top of its parent's).
    let mut writable = view.writable.clone();
    writable.sort_by_key(|p| p.components().count());
    writable.dedup();
    for path in &writable {
        ops.push(MountOp::BindWritable {
            path: cstring(path)?,
        });
    }
    // The run's private tmp dir: a tmpfs of its own, so nothing of the plan lies inside it.
    if let Some(tmp) = &view.tmp {
        let opt = |k: &str, v: &str| -> Result<(CString, CString), String> {
            Ok((
                CString::new(k).map_err(|_| "NUL in a tmpfs option".to_string())?,
                CString::new(v).map_err(|_| format!("the tmpfs option {k}={v:?} has a NUL"))?,
            ))
        };
        ops.push(MountOp::TmpfsTmp {
            path: cstring(&tmp.path)?,
            dev: tmp.dev,
            ino: tmp.ino,
            options: vec![
                opt("mode", "0700")?,
                opt("size", &tmp.size)?,
                opt("nr_inodes", &tmp.inodes.to_string())?,
            ],
        });
    }
    // 4. Pin every directory between a writable root and a mask as a mount point of its own:
    //    a mount point cannot be renamed or removed (EBUSY), so `mv .git .git-old` cannot move
    //    the protected `.git/hooks` aside and recreate it unprotected. Before any mask, so
    //    their recursive re-enabling of writes does not reach a mask.
    // A mask inside a hidden directory is covered by it (and its path is gone once the
    // directory is hidden).
    let hidden_dirs: Vec<&Path> = view
        .masks
        .iter()
        .filter(|m| m.kind == MaskKind::Hidden && m.dir)
        .map(|m| m.path.as_path())
        .collect();
    let mut masks: Vec<Mask> = view
        .masks
        .iter()
        .filter(|m| {
            !hidden_dirs
                .iter()
                .any(|d| m.path.starts_with(d) && m.path.as_path() != *d)
        })
        .cloned()
        .collect();
    let mut pins: Vec<PathBuf> = Vec::new();
    for mask in &masks {
        let Some(root) = writable
            .iter()
            .filter(|w| mask.path.starts_with(w) && mask.path != **w)
            .max_by_key(|w| w.components().count())
        else {
            continue;
        };
        let mut dir = mask.path.parent();
        while let Some(d) = dir {
            if d == root.as_path() || !d.starts_with(root) {
                break;
            }
            pins.push(d.to_path_buf());
            dir = d.parent();
        }
    }
    pins.sort();
    pins.dedup();
    pins.sort_by_key(|p| p.components().count());
    for pin in &pins {
        if !writable.contains(pin) {
            ops.push(MountOp::BindWritable {
                path: cstring(pin)?,
            });
        }
    }
    // 5. Read-only binds inside writable roots, then the hidden paths on top.
    masks.sort_by_key(|m| (m.kind != MaskKind::ReadOnly, m.path.components().count()));
    for mask in masks.iter().filter(|m| m.kind == MaskKind::ReadOnly) {
        ops.push(MountOp::BindReadOnly {
            path: cstring(&mask.path)?,
        });
        masks_out.push(mask.clone());
    }
    // 6. A minimal /dev, unless a root lies inside it.
    let roots_in = |dir: &str| {
        let dir = Path::new(dir);
        writable.iter().any(|w| under(w, dir) || under(dir, w))
            || view.masks.iter().any(|m| under(&m.path, dir))
    };
    let own_dev = !roots_in("/dev");
    if own_dev {
        ops.push(MountOp::Tmpfs {
            path: c"/dev".into(),
            data: c"mode=0755,size=64k,nr_inodes=64".into(),
            read_only: false,
        });
        for (slot, host) in &devices {
            ops.push(MountOp::CreateFile {
                path: cstring(host)?,
                mode: 0o600,
            });
            ops.push(MountOp::Place {
                slot: *slot,
                path: cstring(host)?,
            });
        }
        ops.push(MountOp::Mkdir {
            path: c"/dev/pts".into(),
            mode: 0o755,
        });
        ops.push(MountOp::Devpts {
            path: c"/dev/pts".into(),
        });
        ops.push(MountOp::Symlink {
            target: c"pts/ptmx".into(),
            path: c"/dev/ptmx".into(),
        });
        ops.push(MountOp::Mkdir {
            path: c"/dev/shm".into(),
            mode: 0o1777,
        });
        for (target, name) in [
            (c"/proc/self/fd", c"/dev/fd"),
            (c"/proc/self/fd/0", c"/dev/stdin"),
            (c"/proc/self/fd/1", c"/dev/stdout"),
            (c"/proc/self/fd/2", c"/dev/stderr"),
        ] {
            ops.push(MountOp::Symlink {
                target: target.into(),
                path: name.into(),
            });
        }
    }
    // 7. Hidden paths: an empty mode-0 file bound over a file, an empty mode-0 tmpfs over a dir.
    let hidden: Vec<&Mask> = masks
        .iter()
        .filter(|m| m.kind == MaskKind::Hidden)
        .collect();
    let source = CString::from(MASK_SOURCE);
    let file_masks = hidden.iter().any(|m| !m.dir);
    if file_masks && !own_dev {
        return Err(format!(
            "cannot mask files: a root lies inside /dev, where the mask source ({}) \
             would be",
            MASK_SOURCE.to_string_lossy()
        ));
    }
    if file_masks {
        ops.push(MountOp::CreateFile {
            path: source.clone(),
            mode: 0,
        });
    }
    for mask in &hidden {
        let path = cstring(&mask.path)?;
        let check = identity(mask);
        ops.push(if mask.dir {
            MountOp::MaskDir {
                path,
                dev: mask.dev,
                ino: mask.ino,
                check,
            }
        } else {
            MountOp::MaskFile {
                source: source.clone(),
                path,
                dev: mask.dev,
                ino: mask.ino,
                check,
            }
        });
        masks_out.push((*mask).clone());
    }
    if file_masks {
        ops.push(MountOp::Unlink { path: source });
    }
    // 8. Empty socket directories.
    if view.empty_socket_dirs {
        for dir in SOCKET_DIRS {
            let path = Path::new(dir);
            let Ok(meta) = std::fs::symlink_metadata(path) else {
                continue;
            };
            if !meta.is_dir() || roots_in(dir) {
                continue;
            }
            ops.push(MountOp::Tmpfs {
                path: cstring(path)?,
                data: c"mode=0755,size=4k,nr_inodes=8".into(),
                read_only: true,
            });
            masks_out.push(Mask {
                path: path.to_path_buf(),
                kind: MaskKind::Emptied,
                dir: true,
                dev: 0,
                ino: 0,
            });
        }
    }
    Ok(ops)
}

/// The slots of cloned host mounts a plan may use.
const SLOTS: usize = 8;

fn mount_op(
    op: &MountOp,
    slots: &mut [libc::c_int; SLOTS],
    tmp_fd: &std::cell::Cell<libc::c_int>,
) -> Result<(), i32> {
    let null = std::ptr::null::<libc::c_char>();
    let ok = |rc: libc::c_long| if rc == 0 { Ok(()) } else { Err(errno()) };
    // SAFETY (whole function): raw syscalls on NUL-terminated strings prepared by the parent,
    // live stack structs and scalars.
    unsafe {
        match op {
            MountOp::MakePrivate => ok(libc::mount(
                null,
                c"/".as_ptr(),
                null,
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) as libc::c_long),
            MountOp::Clone { path, slot } => {
                let fd = libc::syscall(
                    libc::SYS_open_tree,
                    libc::AT_FDCWD,
                    path.as_ptr(),
                    OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint,
                );
                if fd < 0 {
                    return Err(errno());
                }
                match slots.get_mut(*slot) {
                    Some(s) => {
                        *s = fd as libc::c_int;
                        Ok(())
                    }
                    None => Err(libc::EINVAL),
                }
            }
            MountOp::RootReadOnly => set_attr(
                libc::AT_FDCWD,
                c"/",
                AT_RECURSIVE,
                MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                0,
            ),
            MountOp::BindWritable { path } => {
                // Recursively where it can; a submount the host made read-only stays so.
                bind_over_itself(
                    path,
                    MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                    MOUNT_ATTR_RDONLY,
                )
            }
            MountOp::TmpfsTmp {
                path,
                dev,
                ino,
                options,
            } => {
                // The placeholder itself, never what a symlink planted there points to.
                let target = Fd(open_exact(path, *dev, *ino, Identity::Exact)?);
                let root = new_tmpfs(options)?;
                if let Err(e) = move_onto(root, target.0) {
                    libc::close(root);
                    return Err(e);
                }
                // The mount's root: the command's tmp dir (close-on-exec; the command step
                // points the Landlock rule descriptors at it).
                tmp_fd.set(root);
                Ok(())
            }
            MountOp::BindReadOnly { path } => bind_over_itself(
                path,
                MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                0,
            ),
            MountOp::Tmpfs {
                path,
                data,
                read_only,
            } => {
                let mut flags = libc::MS_NOSUID | libc::MS_NODEV;
                if *read_only {
                    flags |= libc::MS_RDONLY | libc::MS_NOEXEC;
                }
                ok(libc::mount(
                    c"tmpfs".as_ptr(),
                    path.as_ptr(),
                    c"tmpfs".as_ptr(),
                    flags,
                    data.as_ptr().cast(),
                ) as libc::c_long)
            }
            MountOp::CreateFile { path, mode } => {
                let fd = libc::open(
                    path.as_ptr(),
                    libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_CLOEXEC,
                    *mode as libc::c_uint,
                );
                if fd < 0 {
                    return Err(errno());
                }
                libc::close(fd);
                Ok(())
            }
            MountOp::Mkdir { path, mode } => {
                if libc::mkdir(path.as_ptr(), *mode) != 0 {
                    return Err(errno());
                }
                // mkdir applies the umask; the mode asked for is the mode meant.
                ok(libc::chmod(path.as_ptr(), *mode) as libc::c_long)
            }
            MountOp::Symlink { target, path } => {
                ok(libc::symlink(target.as_ptr(), path.as_ptr()) as libc::c_long)
            }
            MountOp::Place { slot, path } => {
                let Some(&fd) = slots.get(*slot) else {
                    return Err(libc::EINVAL);
                };
                if fd < 0 {
                    return Err(libc::EBADF);
                }
                set_attr(
                    fd,
                    c"",
                    libc::AT_EMPTY_PATH as libc::c_uint,
                    MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC,
                    0,
                )?;
                let rc = libc::syscall(
                    libc::SYS_move_mount,
                    fd,
                    c"".as_ptr(),
                    libc::AT_FDCWD,
                    path.as_ptr(),
                    MOVE_MOUNT_F_EMPTY_PATH,
                );
                libc::close(fd);
                if let Some(s) = slots.get_mut(*slot) {
                    *s = -1;
                }
                ok(rc)
            }
            MountOp::Devpts { path } => ok(libc::mount(
                c"devpts".as_ptr(),
                path.as_ptr(),
                c"devpts".as_ptr(),
                libc::MS_NOSUID | libc::MS_NOEXEC,
                c"newinstance,ptmxmode=0666,mode=0620".as_ptr().cast(),
            ) as libc::c_long),
            MountOp::MaskFile {
                source,
                path,
                dev,
                ino,
                check,
            } => {
                let target = Fd(open_exact(path, *dev, *ino, *check)?);
                let mask = Fd(open_tree(libc::AT_FDCWD, source, 0)?);
                set_attr(
                    mask.0,
                    c"",
                    libc::AT_EMPTY_PATH as libc::c_uint,
                    MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
                    0,
                )?;
                move_onto(mask.0, target.0)
            }
            MountOp::MaskDir {
                path,
                dev,
                ino,
                check,
            } => {
                let target = Fd(open_exact(path, *dev, *ino, *check)?);
                // mount(2) onto the descriptor's magic link: exactly the directory opened,
                // whatever its path has become since.
                let mut link = [0u8; 32];
                fd_link(target.0, &mut link);
                ok(libc::mount(
                    c"tmpfs".as_ptr(),
                    link.as_ptr().cast(),
                    c"tmpfs".as_ptr(),
                    libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    c"mode=0000,size=4k,nr_inodes=1".as_ptr().cast(),
                ) as libc::c_long)
            }
            MountOp::Unlink { path } => ok(libc::unlink(path.as_ptr()) as libc::c_long),
            MountOp::Verify { path, dev, ino } => {
                let _target = Fd(open_exact(path, *dev, *ino, Identity::Exact)?);
                Ok(())
            }
            MountOp::Overlay { path, data } => {
                // The root itself must not have become a symlink since the plan was made.
                let _target = Fd(open_exact(path, 0, 0, Identity::Exact)?);
                ok(libc::mount(
                    c"overlay".as_ptr(),
                    path.as_ptr(),
                    c"overlay".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV,
                    data.as_ptr().cast(),
                ) as libc::c_long)
            }
        }
    }
}

/// A descriptor closed when dropped (child side: a raw `close`).
struct Fd(libc::c_int);

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: closes a descriptor this process opened.
        unsafe {
            libc::close(self.0);
        }
    }
}

/// `struct open_how` (linux/openat2.h).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
const RESOLVE_NO_SYMLINKS: u64 = 0x04;
const MOVE_MOUNT_T_EMPTY_PATH: libc::c_uint = 0x0000_0040;

/// Open `path` as an `O_PATH` descriptor without following any symlink on the way (the plan's
/// paths are canonical, so a symlink there is a swap since the walk) and, when `ino` is not 0,
/// check it is still the file the walk judged, as `check` says.
fn open_exact(
    path: &std::ffi::CStr,
    dev: u64,
    ino: u64,
    check: Identity,
) -> Result<libc::c_int, i32> {
    let how = OpenHow {
        flags: (libc::O_PATH | libc::O_CLOEXEC | libc::O_NOFOLLOW) as u64,
        mode: 0,
        resolve: RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    // SAFETY: a NUL-terminated path and a live, correctly sized `open_how`.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            path.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd < 0 {
        return Err(errno());
    }
    let fd = fd as libc::c_int;
    if ino != 0 {
        // SAFETY: a zeroed stat buffer on the stack.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `fd` is open; `st` is live.
        if unsafe { libc::fstat(fd, &mut st) } != 0 {
            let e = errno();
            // SAFETY: closes the descriptor opened above.
            unsafe { libc::close(fd) };
            return Err(e);
        }
        let same = match check {
            Identity::Exact => st.st_dev == dev && st.st_ino == ino,
            Identity::Inode => st.st_ino == ino,
            Identity::Verified => true,
        };
        if !same {
            // SAFETY: as above.
            unsafe { libc::close(fd) };
            return Err(libc::ESTALE);
        }
    }
    Ok(fd)
}

/// A detached clone of the mount tree at `dirfd`/`path` (`AT_EMPTY_PATH` when `path` is "").
fn open_tree(
    dirfd: libc::c_int,
    path: &std::ffi::CStr,
    flags: libc::c_uint,
) -> Result<libc::c_int, i32> {
    let mut flags = flags | OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint;
    if path.is_empty() {
        flags |= libc::AT_EMPTY_PATH as libc::c_uint;
    }
    // SAFETY: a NUL-terminated path and scalar flags.
    let fd = unsafe { libc::syscall(libc::SYS_open_tree, dirfd, path.as_ptr(), flags) };
    if fd < 0 {
        Err(errno())
    } else {
        Ok(fd as libc::c_int)
    }
}

/// A detached tmpfs with `options` (`nosuid`, `nodev`): the descriptor of its root.
fn new_tmpfs(options: &[(CString, CString)]) -> Result<libc::c_int, i32> {
    // SAFETY: raw syscalls on NUL-terminated strings prepared by the parent and scalars; every
    // descriptor opened is closed or returned.
    unsafe {
        let fs = libc::syscall(libc::SYS_fsopen, c"tmpfs".as_ptr(), FSOPEN_CLOEXEC);
        if fs < 0 {
            return Err(errno());
        }
        let fs = Fd(fs as libc::c_int);
        for (key, value) in options {
            if libc::syscall(
                libc::SYS_fsconfig,
                fs.0,
                FSCONFIG_SET_STRING,
                key.as_ptr(),
                value.as_ptr(),
                0,
            ) != 0
            {
                return Err(errno());
            }
        }
        if libc::syscall(
            libc::SYS_fsconfig,
            fs.0,
            FSCONFIG_CMD_CREATE,
            std::ptr::null::<libc::c_char>(),
            std::ptr::null::<libc::c_void>(),
            0,
        ) != 0
        {
            return Err(errno());
        }
        let root = libc::syscall(
            libc::SYS_fsmount,
            fs.0,
            FSMOUNT_CLOEXEC,
            MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        );
        if root < 0 {
            return Err(errno());
        }
        Ok(root as libc::c_int)
    }
}

/// Attach the detached mount `mount` on top of the file `target` (both descriptors).
fn move_onto(mount: libc::c_int, target: libc::c_int) -> Result<(), i32> {
    // SAFETY: two descriptors, empty paths and scalar flags.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            mount,
            c"".as_ptr(),
            target,
            c"".as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
        )
    };
    if rc == 0 { Ok(()) } else { Err(errno()) }
}

/// Bind the tree at `path` over itself with `set`/`clear` attributes, through descriptors
/// opened without following symlinks, so a path swapped for a symlink since the plan was made
/// fails (ELOOP) instead of binding whatever it now points to.
fn bind_over_itself(path: &std::ffi::CStr, set: u64, clear: u64) -> Result<(), i32> {
    let target = Fd(open_exact(path, 0, 0, Identity::Exact)?);
    let tree = Fd(open_tree(target.0, c"", AT_RECURSIVE)?);
    let empty = libc::AT_EMPTY_PATH as libc::c_uint;
    match set_attr(tree.0, c"", empty | AT_RECURSIVE, set, clear) {
        Ok(()) => {}
        // A submount the host made read-only cannot be made writable: clear the top only.
        Err(libc::EPERM) if clear != 0 => set_attr(tree.0, c"", empty, set, clear)?,
        Err(e) => return Err(e),
    }
    move_onto(tree.0, target.0)
}

/// `/proc/self/fd/<fd>` into `buf`, NUL-terminated. No allocation.
fn fd_link(fd: libc::c_int, buf: &mut [u8; 32]) {
    let prefix = b"/proc/self/fd/";
    buf[..prefix.len()].copy_from_slice(prefix);
    let mut digits = [0u8; 10];
    let mut n = fd.max(0) as u32;
    let mut len = 0;
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for i in 0..len {
        buf[prefix.len() + i] = digits[len - 1 - i];
    }
    buf[prefix.len() + len] = 0;
}

/// Listen on `127.0.0.1:port` in the current (new) network namespace and send the listener
/// over `bridge` with `SCM_RIGHTS`; this process keeps no copy. Raw syscalls and stack
/// buffers only.
fn send_listener(port: u16, bridge: libc::c_int) -> Result<(), i32> {
    if bridge < 0 {
        return Err(libc::EBADF);
    }
    // SAFETY (whole function): raw syscalls with scalars and live, correctly sized stack
    // structs; the control buffer is aligned for `cmsghdr` and large enough for one fd.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(errno());
        }
        let one: libc::c_int = 1;
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
        let addr = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from_ne_bytes([127, 0, 0, 1]),
            },
            sin_zero: [0; 8],
        };
        let rc = libc::bind(
            fd,
            (&addr as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        );
        if rc != 0 || libc::listen(fd, 1024) != 0 {
            let e = errno();
            libc::close(fd);
            return Err(e);
        }
        let mut byte = [b'L'];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let mut control = [0u64; 4];
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<libc::c_int>() as u32) as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null() {
            libc::close(fd);
            return Err(libc::EINVAL);
        }
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as _;
        std::ptr::copy_nonoverlapping(
            (&fd as *const libc::c_int).cast::<u8>(),
            libc::CMSG_DATA(cmsg),
            std::mem::size_of::<libc::c_int>(),
        );
        let n = libc::sendmsg(bridge, &msg, libc::MSG_NOSIGNAL);
        let e = errno();
        libc::close(fd);
        if n != 1 {
            return Err(if n < 0 { e } else { libc::EIO });
        }
    }
    Ok(())
}

/// Signals I forwards to the command.
const FORWARDED: &[libc::c_int] = &[
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

/// Where the two `CLONE_VM` children's stacks and their shared state live: one anonymous
/// mapping made in P (the runner's forked copy of the host, never the host itself), each stack
/// below a guard page, the [`Handoff`] at the top. It is never unmapped: it goes with P's
/// address space when the last of P, I and C is gone (or C has exec'd).
const GUARD: usize = 64 << 10;
const STACK: usize = 256 << 10;
const REGION: usize = 2 * (GUARD + STACK) + GUARD;

/// What I and C read from P, in the shared mapping (never on a stack another process may
/// reuse). Written by P before I exists; `old_mask` by I before C exists.
struct Handoff<'a> {
    plan: *const NamespacePlan,
    /// The rest of the confinement and the exec, run by C (returns only on failure).
    command: *mut (dyn FnMut() -> RawFailure + 'a),
    alive: libc::c_int,
    status_out: libc::c_int,
    report: libc::c_int,
    failure: libc::c_int,
    command_stack: *mut libc::c_void,
    old_mask: libc::sigset_t,
}

/// Write `(step, errno)` to the runner's failure pipe (-1: none). One raw `write`.
fn write_failure(fd: libc::c_int, (step, errno): RawFailure) {
    if fd < 0 {
        return;
    }
    let mut msg = [0u8; 8];
    msg[..4].copy_from_slice(&step.to_ne_bytes());
    msg[4..].copy_from_slice(&errno.to_ne_bytes());
    // SAFETY: a live 8-byte stack buffer; a failed write is ignored.
    unsafe {
        libc::write(fd, msg.as_ptr().cast(), msg.len());
    }
}

/// Map the stacks of I and C and place `handoff` at the top; returns the mapping's base.
///
/// # Safety
/// Raw syscalls only; call in P.
unsafe fn map_region() -> Result<*mut u8, i32> {
    // SAFETY: an anonymous private mapping; the guard pages are made inaccessible.
    unsafe {
        let base = libc::mmap(
            std::ptr::null_mut(),
            REGION,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK | libc::MAP_NORESERVE,
            -1,
            0,
        );
        if base == libc::MAP_FAILED {
            return Err(errno());
        }
        let base = base.cast::<u8>();
        for guard in [0, GUARD + STACK] {
            if libc::mprotect(base.add(guard).cast(), GUARD, libc::PROT_NONE) != 0 {
                return Err(errno());
            }
        }
        Ok(base)
    }
}

/// I's entry on its own stack (`clone(CLONE_VM)` from P).
extern "C" fn init_entry(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the Handoff P wrote into the shared mapping before cloning; the plan it
    // points at lives in P's memory, which P never frees (it never returns).
    unsafe {
        let handoff = &mut *arg.cast::<Handoff<'_>>();
        let failed = (*handoff.plan).init(handoff);
        write_failure(handoff.failure, failed);
        libc::_exit(127)
    }
}

/// C's entry on its own stack (`clone(CLONE_VM | CLONE_VFORK)` from I: I is suspended until
/// C execs or exits, so nothing else touches the memory C uses).
extern "C" fn command_entry(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: as in `init_entry`; I waits (vfork) while C runs.
    unsafe {
        let handoff = &mut *arg.cast::<Handoff<'_>>();
        libc::close(handoff.status_out);
        if handoff.report >= 0 {
            libc::close(handoff.report);
        }
        libc::sigprocmask(libc::SIG_SETMASK, &handoff.old_mask, std::ptr::null_mut());
        let failed = (*handoff.command)();
        write_failure(handoff.failure, failed);
        libc::_exit(127)
    }
}

impl NamespacePlan {
    /// Run in P (the spawned child, before exec). Returns `Ok` only where there is no PID
    /// namespace: then P is the command's process and the caller confines it and execs.
    /// With a PID namespace P never returns on success: I and C are `CLONE_VM` children on
    /// stacks of their own (no copy of the host's page tables, ADR 0017 §4), C runs `command`
    /// (the rest of the confinement and the exec; it returns only on failure), and every
    /// failure of I or C is written to `failure` (the runner's failure pipe); P's own failures
    /// are returned. `bridge` is P's end of the egress
    /// socketpair (-1 without the proxy): the listener goes to turngate through it, and both
    /// are closed before anything else runs in the namespace. `report` is the write end of the
    /// runner's status pipe (-1: none): I writes the command's wait status there as it
    /// reaps it, so the runner need not wait for P and I to leave (ADR 0017).
    ///
    /// # Safety
    /// Call only between fork and exec. Raw syscalls only; `command` must be too.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn enter(
        &self,
        parent_pid: libc::pid_t,
        bridge: libc::c_int,
        tmp_fd: &std::cell::Cell<libc::c_int>,
        report: libc::c_int,
        failure: libc::c_int,
        command: &mut dyn FnMut() -> RawFailure,
    ) -> Result<(), RawFailure> {
        // SAFETY (whole function): raw syscalls with scalars, live stack buffers, and
        // NUL-terminated strings prepared by the parent.
        unsafe {
            // P and I run on in the host's process image without exec: a handler the host
            // installed (libuv's, Python's) must never run in them.
            reset_signal_handlers();
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err((STEP_PDEATHSIG, errno()));
            }
            if libc::getppid() != parent_pid {
                return Err((STEP_PARENT_GONE, libc::ESRCH));
            }
            if let Some((user, net)) = self.join {
                // The shared namespaces: their id maps and `lo` are already in place.
                if libc::syscall(libc::SYS_setns, user, libc::CLONE_NEWUSER) != 0
                    || (net >= 0 && libc::syscall(libc::SYS_setns, net, libc::CLONE_NEWNET) != 0)
                {
                    return Err((STEP_SETNS, errno()));
                }
            }
            if libc::syscall(libc::SYS_unshare, self.flags) != 0 {
                return Err((STEP_UNSHARE, errno()));
            }
            if self.join.is_none() {
                self.maps.write_raw()?;
            }
            if self.mount {
                let mut slots = [-1; SLOTS];
                for (i, op) in self.ops.iter().enumerate() {
                    if let Err(e) = mount_op(op, &mut slots, tmp_fd) {
                        return Err((STEP_MOUNT_BASE + i as u32, e));
                    }
                }
                for (root, fds) in &self.overlay_rules {
                    let fd = match open_exact(root, 0, 0, Identity::Exact) {
                        Ok(fd) => Fd(fd),
                        Err(e) => return Err((STEP_OVERLAY_RULE, e)),
                    };
                    for target in fds {
                        if libc::dup3(fd.0, *target, libc::O_CLOEXEC) < 0 {
                            return Err((STEP_OVERLAY_RULE, errno()));
                        }
                    }
                }
            }
            if self.network
                && let Err(e) = loopback_up()
            {
                return Err((STEP_LOOPBACK, e));
            }
            if let Some(port) = self.egress_port {
                let sent = send_listener(port, bridge);
                libc::close(bridge);
                if let Err(e) = sent {
                    return Err((STEP_EGRESS_LISTENER, e));
                }
            }
            if !self.pid {
                // No PID namespace: P is the command itself.
                return Ok(());
            }
            // A pipe whose write end only P holds: I sees EOF once P is gone.
            let mut alive = [0i32; 2];
            // A pipe for C's wait status, I -> P.
            let mut status_pipe = [0i32; 2];
            if libc::pipe2(alive.as_mut_ptr(), libc::O_CLOEXEC) != 0
                || libc::pipe2(status_pipe.as_mut_ptr(), libc::O_CLOEXEC) != 0
            {
                return Err((STEP_FORK_INIT, errno()));
            }
            let base = match map_region() {
                Ok(base) => base,
                Err(e) => return Err((STEP_FORK_INIT, e)),
            };
            let handoff = base.add(REGION - GUARD).cast::<Handoff<'_>>();
            handoff.write(Handoff {
                plan: self,
                command,
                alive: alive[0],
                status_out: status_pipe[1],
                report,
                failure,
                command_stack: base.add(2 * (GUARD + STACK)).cast(),
                old_mask: std::mem::zeroed(),
            });
            // I shares P's address space (no copy of it) on its own stack; its file table,
            // signal handlers and namespaces are its own. SIGCHLD: P reaps it.
            let init = libc::clone(
                init_entry,
                base.add(GUARD + STACK).cast(),
                libc::CLONE_VM | libc::SIGCHLD,
                handoff.cast(),
            );
            if init < 0 {
                return Err((STEP_FORK_INIT, errno()));
            }
            // P: keep only the ends it needs; everything else (stdio, the runner's pipes) is
            // closed so that only C holds them.
            libc::close(alive[0]);
            libc::close(status_pipe[1]);
            close_all_but(&[alive[1], status_pipe[0]]);
            supervise(init, status_pipe[0])
        }
    }

    /// I: PID 1 of the namespace. Returns only its own failure (C's go to the runner's failure
    /// pipe from C).
    unsafe fn init(&self, handoff: &mut Handoff<'_>) -> RawFailure {
        // SAFETY (whole function): as in `enter`.
        unsafe {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return (STEP_PDEATHSIG, errno());
            }
            // P may have died before the death signal was armed.
            let mut pfd = libc::pollfd {
                fd: handoff.alive,
                events: libc::POLLIN,
                revents: 0,
            };
            if libc::poll(&mut pfd, 1, 0) != 0 {
                return (STEP_PARENT_GONE, libc::ESRCH);
            }
            libc::close(handoff.alive);
            if self.mount
                && libc::mount(
                    c"proc".as_ptr(),
                    c"/proc".as_ptr(),
                    c"proc".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    std::ptr::null(),
                ) != 0
            {
                return (STEP_PROC, errno());
            }
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGCHLD);
            for sig in FORWARDED {
                libc::sigaddset(&mut set, *sig);
            }
            libc::sigprocmask(libc::SIG_BLOCK, &set, &mut handoff.old_mask);
            // C shares the address space too, on the other stack; I is suspended until C
            // execs (or exits on a failure it reported), as with vfork.
            let command = libc::clone(
                command_entry,
                handoff.command_stack,
                libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                (handoff as *mut Handoff<'_>).cast(),
            );
            if command < 0 {
                return (STEP_FORK_COMMAND, errno());
            }
            close_all_but(&[handoff.status_out, handoff.report]);
            reap(command, &set, handoff.status_out, handoff.report)
        }
    }
}

/// Every signal's disposition back to the default (glibc's own two it keeps, refusing them).
///
/// # Safety
/// Raw syscalls only.
unsafe fn reset_signal_handlers() {
    // SAFETY: sigaction with a zeroed, SIG_DFL action on the stack; failures are ignored.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = libc::SIG_DFL;
        for sig in 1..=64 {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                libc::sigaction(sig, &action, std::ptr::null_mut());
            }
        }
    }
}

/// Close every descriptor except `keep`.
///
/// # Safety
/// Raw syscalls only.
unsafe fn close_all_but(keep: &[libc::c_int]) {
    let mut sorted = [0 as libc::c_uint; 4];
    let mut n = 0;
    // Negative entries (no such descriptor) keep nothing.
    for fd in keep.iter().filter(|fd| **fd >= 0) {
        if n == sorted.len() {
            break;
        }
        sorted[n] = *fd as libc::c_uint;
        n += 1;
    }
    sorted[..n].sort_unstable();
    let mut first: libc::c_uint = 0;
    // SAFETY: scalar raw syscalls.
    unsafe {
        for fd in &sorted[..n] {
            if *fd > first {
                libc::syscall(libc::SYS_close_range, first, *fd - 1, 0);
            }
            first = *fd + 1;
        }
        libc::syscall(libc::SYS_close_range, first, libc::c_uint::MAX, 0);
    }
}

/// P: wait for C's status from I; exit as the command did.
unsafe fn supervise(init: libc::pid_t, status_in: libc::c_int) -> ! {
    // SAFETY (whole function): raw syscalls with scalars and live stack buffers.
    unsafe {
        // I writes C's status and exits right away: wait for its exit first, so P wakes once
        // (not on the write and again on the exit) and still reaps I (a zombie left to the
        // host's init would pile up where that init does not reap). Once I is gone nothing
        // holds the pipe's write end, so the read below cannot block.
        let mut init_status = 0;
        while libc::waitpid(init, &mut init_status, 0) < 0 && errno() == libc::EINTR {}
        let mut buf = [0u8; 4];
        let mut got = 0usize;
        while got < 4 {
            let n = libc::read(status_in, buf[got..].as_mut_ptr().cast(), 4 - got);
            if n > 0 {
                got += n as usize;
            } else if n < 0 && errno() == libc::EINTR {
                continue;
            } else {
                break;
            }
        }
        exit_like(if got == 4 {
            i32::from_ne_bytes(buf)
        } else {
            init_status
        })
    }
}

/// Exit with `status`: the same code, or death by the same signal.
unsafe fn exit_like(status: libc::c_int) -> ! {
    // SAFETY (whole function): scalar raw syscalls.
    unsafe {
        if libc::WIFSIGNALED(status) {
            let sig = libc::WTERMSIG(status);
            let no_core = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &no_core);
            libc::signal(sig, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::syscall(libc::SYS_kill, libc::syscall(libc::SYS_getpid), sig);
            libc::_exit(128 + sig);
        }
        if libc::WIFEXITED(status) {
            libc::_exit(libc::WEXITSTATUS(status));
        }
        libc::_exit(125)
    }
}

/// I: reap every child, forward signals to the command, exit when it ends.
unsafe fn reap(
    command: libc::pid_t,
    set: &libc::sigset_t,
    status_out: libc::c_int,
    report: libc::c_int,
) -> ! {
    // SAFETY (whole function): raw syscalls with scalars and live stack buffers.
    unsafe {
        loop {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let sig = libc::sigwaitinfo(set, &mut info);
            if sig < 0 {
                continue;
            }
            if sig != libc::SIGCHLD {
                libc::kill(command, sig);
                continue;
            }
            loop {
                let mut status = 0;
                let pid = libc::waitpid(-1, &mut status, libc::WNOHANG);
                if pid <= 0 {
                    break;
                }
                if pid == command {
                    let bytes = status.to_ne_bytes();
                    libc::write(status_out, bytes.as_ptr().cast(), bytes.len());
                    if report >= 0 {
                        libc::write(report, bytes.as_ptr().cast(), bytes.len());
                    }
                    // Leaving ends the namespace: the kernel kills whatever is left in it.
                    libc::_exit(0);
                }
            }
        }
    }
}

/// Drop every capability the user namespace gave: bounding set, ambient, and the
/// effective/permitted/inheritable sets, so the command execs with none (also as uid 0).
///
/// # Safety
/// Raw syscalls only.
pub(crate) unsafe fn drop_capabilities() -> Result<(), RawFailure> {
    #[repr(C)]
    struct CapHeader {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct CapData {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    // SAFETY: scalar prctls and a capset on live, correctly sized structs.
    unsafe {
        // Capabilities are numbered 0..=CAP_LAST_CAP without gaps, and the kernel answers
        // EINVAL for a number past the last one only: the first EINVAL ends the bounding set.
        for cap in 0..64 {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 {
                match errno() {
                    libc::EINVAL if cap > 0 => break,
                    e => return Err((STEP_CAPS, e)),
                }
            }
        }
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        );
        let header = CapHeader {
            version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
            pid: 0,
        };
        let data = [CapData {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        if libc::syscall(libc::SYS_capset, &header as *const CapHeader, data.as_ptr()) != 0 {
            return Err((STEP_CAPS, errno()));
        }
    }
    Ok(())
}
