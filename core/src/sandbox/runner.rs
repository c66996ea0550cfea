//! The process runner: spawn one command (optionally sandboxed), capture its output up to a cap,
//! enforce the timeout on the whole process tree, and report how it ended.
//!
//! It never decides whether the command may run, and never widens the request: the environment
//! is cleared and set only from the request, stdin is null unless inherited, and the child gets
//! its own process group (and session, by default).
//!
//! Unix only: on Windows the request and outcome types exist, but every run is refused with
//! [`RunError::Unsupported`] (there is no Windows runner nor sandbox backend yet; ADR 0021).

use std::ffi::OsString;
#[cfg(unix)]
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
#[cfg(unix)]
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
#[cfg(unix)]
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
#[cfg(unix)]
use std::time::Instant;

#[cfg(unix)]
use tokio::io::{AsyncRead, AsyncReadExt};

use super::report::SandboxReport;
use super::spec::SandboxSpec;
#[cfg(unix)]
use super::spec::TmpSpec;
#[cfg(unix)]
use super::{Launch, prepare, tree};
use super::{PreparedSandbox, SandboxBackend, SandboxError, native_backend};

/// How long output is still read after the command's process group is gone, in case a process
/// that left the group still holds the pipes.
#[cfg(unix)]
const DRAIN_GRACE: Duration = Duration::from_millis(500);

/// Default per-stream output cap (1 MiB).
pub const DEFAULT_OUTPUT_CAP: usize = 1 << 20;

/// What the child's stdin is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StdinPolicy {
    /// `/dev/null`.
    #[default]
    Null,
    /// The parent's stdin.
    Inherit,
}

/// One command to run.
#[derive(Debug, Clone)]
pub struct ProcessRequest {
    /// Program and arguments; `argv[0]` is the program (a path, or a name looked up in the
    /// request's `PATH`).
    pub argv: Vec<OsString>,
    /// The working directory.
    pub cwd: PathBuf,
    /// The whole environment of the child (the parent's is cleared first).
    pub env: Vec<(OsString, OsString)>,
    /// stdin.
    pub stdin: StdinPolicy,
    /// `true`: own session (`setsid`); `false`: own process group in the parent's session.
    pub new_session: bool,
    /// Wall-clock limit; on expiry the whole tree is killed.
    pub timeout: Option<Duration>,
    /// Per-stream output cap in bytes; output beyond it is read and discarded.
    pub output_cap: usize,
    /// The sandbox; `None` runs unconfined (the gate decides when that is allowed).
    pub sandbox: Option<SandboxSpec>,
    /// A server's stdin and stdout, in place of `stdin` and the captured stdout; its stderr
    /// is then copied to this process's stderr as it comes instead of captured.
    pub stdio: Option<Arc<StdioPipes>>,
    /// Bytes written to the child's stdin (a pipe, closed after them), in place of `stdin`.
    pub stdin_data: Option<Arc<[u8]>>,
    /// Called with every chunk of stdout and stderr as it is read (before the cap applies to
    /// the captured copy).
    pub on_output: Option<OutputSink>,
}

/// Which output stream a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputStream {
    /// The child's stdout.
    Stdout,
    /// The child's stderr.
    Stderr,
}

impl OutputStream {
    /// `stdout` or `stderr`.
    pub const fn as_str(self) -> &'static str {
        match self {
            OutputStream::Stdout => "stdout",
            OutputStream::Stderr => "stderr",
        }
    }
}

/// A callback that receives a command's output as it comes.
#[derive(Clone)]
pub struct OutputSink(pub Arc<dyn Fn(OutputStream, &[u8]) + Send + Sync>);

impl std::fmt::Debug for OutputSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OutputSink(..)")
    }
}

/// One end of a pipe: a descriptor (Unix) or a handle (Windows).
#[cfg(unix)]
pub type PipeEnd = std::os::fd::OwnedFd;
/// One end of a pipe: a descriptor (Unix) or a handle (Windows).
#[cfg(windows)]
pub type PipeEnd = std::os::windows::io::OwnedHandle;

/// The child's ends of two pipes: what it reads as stdin and writes as stdout. The runner
/// closes its copies once the child has them, so the caller's ends see EOF when it exits.
#[derive(Debug)]
pub struct StdioPipes {
    /// The read end the child gets as stdin.
    pub stdin: PipeEnd,
    /// The write end the child gets as stdout.
    pub stdout: PipeEnd,
}

impl StdioPipes {
    /// Two pipes for a server: refused on Windows, where no command can be run (see
    /// [`RunError::Unsupported`]).
    #[cfg(windows)]
    pub fn new() -> std::io::Result<(StdioPipes, PipeEnd, PipeEnd)> {
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "turngate cannot run commands on Windows yet",
        ))
    }

    /// Two close-on-exec pipes: the child's ends, and the caller's `(write to its stdin,
    /// read from its stdout)` ends.
    #[cfg(unix)]
    pub fn new() -> std::io::Result<(StdioPipes, OwnedFd, OwnedFd)> {
        let (stdin_read, stdin_write) = cloexec_pipe()?;
        let (stdout_read, stdout_write) = cloexec_pipe()?;
        Ok((
            StdioPipes {
                stdin: stdin_read,
                stdout: stdout_write,
            },
            stdin_write,
            stdout_read,
        ))
    }
}

impl ProcessRequest {
    /// A request with an empty environment, null stdin, a new session, no timeout, the default
    /// output cap and no sandbox.
    pub fn new<I, S>(argv: I, cwd: impl AsRef<Path>) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        Self {
            argv: argv.into_iter().map(Into::into).collect(),
            cwd: cwd.as_ref().to_path_buf(),
            env: Vec::new(),
            stdin: StdinPolicy::Null,
            new_session: true,
            timeout: None,
            output_cap: DEFAULT_OUTPUT_CAP,
            sandbox: None,
            stdio: None,
            stdin_data: None,
            on_output: None,
        }
    }

    /// Write `data` to the child's stdin (a pipe closed after it) instead of `stdin`.
    pub fn stdin_bytes(mut self, data: impl Into<Arc<[u8]>>) -> Self {
        self.stdin_data = Some(data.into());
        self
    }

    /// Hand every chunk of output to `sink` as it is read.
    pub fn on_output(mut self, sink: OutputSink) -> Self {
        self.on_output = Some(sink);
        self
    }

    /// Connect the child's stdin and stdout to `pipes` (a server that speaks over them).
    pub fn stdio(mut self, pipes: StdioPipes) -> Self {
        self.stdio = Some(Arc::new(pipes));
        self
    }

    /// Add environment variables.
    pub fn env<I, K, V>(mut self, vars: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<OsString>,
        V: Into<OsString>,
    {
        self.env
            .extend(vars.into_iter().map(|(k, v)| (k.into(), v.into())));
        self
    }

    /// Set the stdin policy.
    pub fn stdin(mut self, stdin: StdinPolicy) -> Self {
        self.stdin = stdin;
        self
    }

    /// Own session (`true`) or own process group only (`false`).
    pub fn new_session(mut self, new_session: bool) -> Self {
        self.new_session = new_session;
        self
    }

    /// Set the timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Set the per-stream output cap.
    pub fn output_cap(mut self, cap: usize) -> Self {
        self.output_cap = cap;
        self
    }

    /// Run under this sandbox.
    pub fn sandbox(mut self, spec: SandboxSpec) -> Self {
        self.sandbox = Some(spec);
        self
    }
}

/// How a command ended.
#[derive(Debug, Clone)]
pub struct ProcessOutcome {
    /// The child's pid (also its process group id).
    pub pid: u32,
    /// The exit code, when it exited.
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    /// Whether the timeout fired (the tree was killed).
    pub timed_out: bool,
    /// Wall-clock time from spawn to exit.
    pub duration: Duration,
    /// Captured stdout, at most `output_cap` bytes.
    pub stdout: Vec<u8>,
    /// Captured stderr, at most `output_cap` bytes.
    pub stderr: Vec<u8>,
    /// Whether stdout was longer than the cap.
    pub stdout_truncated: bool,
    /// Whether stderr was longer than the cap.
    pub stderr_truncated: bool,
    /// A process outside the command's group still held the output pipes after it ended;
    /// reading stopped after a short grace period.
    pub output_left_open: bool,
    /// What the sandbox enforced, when one was requested.
    pub sandbox: Option<SandboxReport>,
}

impl ProcessOutcome {
    /// Whether the command exited with code 0.
    pub fn success(&self) -> bool {
        self.exit_code == Some(0)
    }
}

/// Why a command did not run (or could not be waited for).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The request is malformed.
    #[error("invalid process request: {0}")]
    InvalidRequest(String),
    /// The sandbox could not be set up; the command was not run.
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// The child could not apply the prepared sandbox; it exited before exec.
    #[error(
        "the child could not apply the sandbox at stage {stage} (errno {errno}: {}); the command \
         was not run",
        std::io::Error::from_raw_os_error(*errno)
    )]
    SandboxApply {
        /// The stage that failed (`no_new_privs`, `create_ruleset`, ...).
        stage: &'static str,
        /// The kernel's errno.
        errno: i32,
    },
    /// A step of the namespace layer failed in the child (fail closed: nothing ran).
    #[error(
        "the sandbox's namespace layer could not be set up ({step}: {}); the command was not run",
        std::io::Error::from_raw_os_error(*errno)
    )]
    NamespaceSetup {
        /// The step that failed (`unshare`, `bind /w read-write`, `mount_proc`, ...).
        step: String,
        /// The kernel's errno.
        errno: i32,
    },
    /// The program could not be started (not found, not executable, denied by the sandbox...).
    #[error("could not start {program:?}: {source}")]
    Spawn {
        /// `argv[0]`.
        program: OsString,
        /// The cause.
        source: std::io::Error,
    },
    /// An I/O error while running the command.
    #[error("process I/O failed: {0}")]
    Io(#[from] std::io::Error),
    /// This platform has no process runner (Windows): nothing was run, sandboxed or not.
    #[error("{0}; the command was not run")]
    Unsupported(String),
}

/// Runs commands through a sandbox backend.
#[derive(Debug, Clone)]
pub struct ProcessRunner {
    backend: Arc<dyn SandboxBackend>,
    /// The last prepared sandbox and the spec it was prepared for. A turn spawns under one
    /// spec, so every spawn after the first skips the parent-side preparation (opening every
    /// granted path, building the seccomp filter); each child still applies it afresh.
    /// A spec with a per-run tmp dir is never cached.
    #[cfg_attr(windows, allow(dead_code))]
    prepared: Arc<std::sync::Mutex<PreparedCache>>,
}

type PreparedCache = Option<(SandboxSpec, Arc<PreparedSandbox>)>;

/// Bytes read from one stream, up to a cap.
#[cfg(unix)]
#[derive(Debug, Default)]
struct Capped {
    data: Vec<u8>,
    truncated: bool,
}

/// Copy a stream to this process's stderr as it comes (a server's log lines).
#[cfg(unix)]
async fn forward_to_stderr<R: AsyncRead + Unpin>(mut reader: R) {
    use tokio::io::AsyncWriteExt;
    let mut stderr = tokio::io::stderr();
    let mut chunk = [0u8; 8192];
    loop {
        match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let _ = stderr.write_all(&chunk[..n]).await;
                let _ = stderr.flush().await;
            }
        }
    }
}

#[cfg(unix)]
async fn read_capped<R: AsyncRead + Unpin>(
    mut reader: R,
    cap: usize,
    out: &mut Capped,
    sink: Option<(&OutputSink, OutputStream)>,
) {
    let mut chunk = [0u8; 8192];
    loop {
        match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if let Some((sink, stream)) = sink {
                    (sink.0)(stream, &chunk[..n]);
                }
                let room = cap.saturating_sub(out.data.len());
                if n > room {
                    out.truncated = true;
                }
                out.data.extend_from_slice(&chunk[..n.min(room)]);
            }
        }
    }
}

/// A private tmp dir made for one run, removed afterwards.
#[cfg(unix)]
struct TmpDirGuard(PathBuf);

#[cfg(unix)]
impl TmpDirGuard {
    fn create() -> std::io::Result<Self> {
        let template = std::env::temp_dir().join("turngate-tmp-XXXXXX");
        let mut bytes = template.into_os_string().into_encoded_bytes();
        bytes.push(0);
        // SAFETY: `bytes` is a NUL-terminated, writable template that outlives the call.
        let ptr = unsafe { libc::mkdtemp(bytes.as_mut_ptr().cast()) };
        if ptr.is_null() {
            return Err(std::io::Error::last_os_error());
        }
        bytes.pop();
        // SAFETY: the bytes came from an OsString and mkdtemp only replaced ASCII `X`s.
        let path = unsafe { OsString::from_encoded_bytes_unchecked(bytes) };
        Ok(Self(PathBuf::from(path)))
    }
}

#[cfg(unix)]
impl Drop for TmpDirGuard {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// This run's private host tmp dir as the child needs it: an `O_PATH` descriptor on it (for
/// the Landlock rule; without a mount namespace the dir is reached by its host path).
#[cfg(target_os = "linux")]
struct RunTmp {
    fd: OwnedFd,
}

#[cfg(target_os = "linux")]
impl RunTmp {
    fn open(dir: &Path) -> Result<RunTmp, RunError> {
        let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
            .map_err(|_| RunError::InvalidRequest("the tmp dir contains a NUL byte".into()))?;
        // SAFETY: a NUL-terminated path; the descriptor is owned below.
        let fd = unsafe {
            libc::open(
                path.as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(RunError::Io(std::io::Error::last_os_error()));
        }
        // SAFETY: `open` returned a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(RunTmp { fd })
    }
}

/// Kills the process group if the run is abandoned before the child was reaped.
#[cfg(unix)]
struct GroupGuard {
    pgid: i32,
    armed: bool,
}

#[cfg(unix)]
impl Drop for GroupGuard {
    fn drop(&mut self) {
        if self.armed {
            tree::kill_group(self.pgid);
        }
    }
}

#[cfg(target_os = "linux")]
fn stage_name(code: u32) -> &'static str {
    match code {
        1 => "no_new_privs",
        2 => "create_ruleset",
        3 => "add_path_rule",
        4 => "add_net_rule",
        5 => "restrict_self",
        6 => "install_static_filter",
        7 => "setsid",
        _ => "other",
    }
}

/// The command's exec, prepared in the parent: C (a `CLONE_VM` child of the namespace's init)
/// cannot return into `std`'s exec, so it execs itself, searching `PATH` as `execvp` does.
#[cfg(target_os = "linux")]
struct ExecPlan {
    /// The paths to try, in order: the program itself when it names a path, else each `PATH`
    /// entry joined with it.
    candidates: Vec<std::ffi::CString>,
    _argv: Vec<std::ffi::CString>,
    _envp: Vec<std::ffi::CString>,
    argv_ptrs: Vec<*const libc::c_char>,
    envp_ptrs: Vec<*const libc::c_char>,
    /// `/bin/sh <candidate> argv[1..]` for a file the kernel will not exec (`ENOEXEC`), as
    /// `execvp` does; slot 1 is set to the candidate in the child.
    sh_ptrs: Vec<*const libc::c_char>,
}

// SAFETY: the pointers point into the CStrings owned by the same struct (heap buffers that do
// not move); they are only read, and only in the child.
#[cfg(target_os = "linux")]
unsafe impl Send for ExecPlan {}
// SAFETY: as above.
#[cfg(target_os = "linux")]
unsafe impl Sync for ExecPlan {}

#[cfg(target_os = "linux")]
impl ExecPlan {
    fn new(
        argv: &[OsString],
        env: &std::collections::BTreeMap<OsString, OsString>,
    ) -> Result<ExecPlan, std::io::Error> {
        use std::ffi::CString;
        let nul = |_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "nul byte found");
        let c = |b: &[u8]| CString::new(b).map_err(nul);
        let argv: Vec<CString> = argv
            .iter()
            .map(|a| c(a.as_encoded_bytes()))
            .collect::<Result<_, _>>()?;
        let envp: Vec<CString> = env
            .iter()
            .map(|(k, v)| {
                let mut kv = k.as_encoded_bytes().to_vec();
                kv.push(b'=');
                kv.extend_from_slice(v.as_encoded_bytes());
                c(&kv)
            })
            .collect::<Result<_, _>>()?;
        let program = argv.first().map(|p| p.as_bytes()).unwrap_or_default();
        let candidates = if program.contains(&b'/') {
            vec![c(program)?]
        } else {
            let path = env
                .get(std::ffi::OsStr::new("PATH"))
                .map(|p| p.as_encoded_bytes())
                .unwrap_or(b"/bin:/usr/bin");
            path.split(|b| *b == b':')
                .map(|dir| {
                    if dir.is_empty() {
                        c(program)
                    } else {
                        let mut full = dir.to_vec();
                        full.push(b'/');
                        full.extend_from_slice(program);
                        c(&full)
                    }
                })
                .collect::<Result<_, _>>()?
        };
        let ptrs = |v: &[CString]| {
            v.iter()
                .map(|s| s.as_ptr())
                .chain(std::iter::once(std::ptr::null()))
                .collect::<Vec<_>>()
        };
        let argv_ptrs = ptrs(&argv);
        let envp_ptrs = ptrs(&envp);
        let mut sh_ptrs = vec![c"/bin/sh".as_ptr(), std::ptr::null()];
        sh_ptrs.extend(argv_ptrs.iter().skip(1));
        if argv_ptrs.len() < 2 {
            sh_ptrs.push(std::ptr::null());
        }
        Ok(ExecPlan {
            candidates,
            _argv: argv,
            _envp: envp,
            argv_ptrs,
            envp_ptrs,
            sh_ptrs,
        })
    }

    /// Exec the command; returns only on failure, with `execvp`'s errno.
    ///
    /// # Safety
    /// Call only in the child. Raw syscalls only.
    unsafe fn exec(&mut self) -> (u32, i32) {
        let mut eacces = false;
        let mut last = libc::ENOENT;
        // SAFETY: NUL-terminated strings and NULL-terminated pointer arrays owned by `self`.
        unsafe {
            for path in &self.candidates {
                libc::execve(
                    path.as_ptr(),
                    self.argv_ptrs.as_ptr(),
                    self.envp_ptrs.as_ptr(),
                );
                let mut e = *libc::__errno_location();
                if e == libc::ENOEXEC {
                    self.sh_ptrs[1] = path.as_ptr();
                    libc::execve(
                        c"/bin/sh".as_ptr(),
                        self.sh_ptrs.as_ptr(),
                        self.envp_ptrs.as_ptr(),
                    );
                    e = *libc::__errno_location();
                }
                match e {
                    libc::EACCES => eacces = true,
                    libc::ENOENT
                    | libc::ESTALE
                    | libc::ENOTDIR
                    | libc::ENODEV
                    | libc::ETIMEDOUT => {}
                    _ => return (super::namespace::STEP_EXEC, e),
                }
                last = e;
            }
        }
        let e = if eacces { libc::EACCES } else { last };
        (super::namespace::STEP_EXEC, e)
    }
}

/// Everything the child applies before exec, in order: the namespace layer (with a PID
/// namespace P and I stay in it and never return, and C runs [`confine_command`] and the exec
/// there), then [`confine_command`] in this process when it is the command's own.
///
/// # Safety
/// Call only between fork and exec. Raw syscalls only.
#[cfg(target_os = "linux")]
#[allow(clippy::too_many_arguments)]
unsafe fn confine(
    launch: &super::linux::LinuxLaunch,
    cwd: &std::ffi::CStr,
    parent: libc::pid_t,
    bridge: libc::c_int,
    tmp: libc::c_int,
    report: libc::c_int,
    failure: libc::c_int,
    exec: &mut ExecPlan,
) -> Result<(), (u32, i32)> {
    // This run's tmp dir (-1: none yet): the host directory the runner made, or the root of
    // the tmpfs P mounts in the view. I and C share P's memory, so they read what P set.
    let tmp = std::cell::Cell::new(tmp);
    // SAFETY (whole function): raw syscalls on scalars and NUL-terminated strings prepared by
    // the parent.
    unsafe {
        if let Some(plan) = &launch.namespaces {
            let mut command = || match confine_command(launch, cwd, tmp.get()) {
                Ok(()) => exec.exec(),
                Err(failed) => failed,
            };
            plan.enter(parent, bridge, &tmp, report, failure, &mut command)?;
        }
        // No PID namespace: this process is the command's own; std execs it.
        confine_command(launch, cwd, tmp.get())
    }
}

/// The command's own confinement: the working directory again (the mount view changed under
/// it), every inherited descriptor above stderr close-on-exec, the tmp grant, Landlock and
/// nono's seccomp filter, the Unix socket filter, and no capabilities.
///
/// # Safety
/// Call only in the command's process before exec. Raw syscalls only.
#[cfg(target_os = "linux")]
unsafe fn confine_command(
    launch: &super::linux::LinuxLaunch,
    cwd: &std::ffi::CStr,
    tmp: libc::c_int,
) -> Result<(), (u32, i32)> {
    use super::namespace as ns;
    // SAFETY (whole function): as in `confine`.
    unsafe {
        if launch.namespaces.is_some() && libc::chdir(cwd.as_ptr()) != 0 {
            return Err((ns::STEP_CHDIR, *libc::__errno_location()));
        }
        libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        );
        // The tmp grant's rule descriptors stand for a deleted placeholder until they are
        // pointed at this run's tmp dir (see `linux::TmpSlot`).
        if let Some(slots) = &launch.tmp_slot {
            if tmp < 0 {
                return Err((ns::STEP_TMP, libc::ENOENT));
            }
            for slot in slots {
                if libc::dup3(tmp, *slot, libc::O_CLOEXEC) < 0 {
                    return Err((ns::STEP_TMP, *libc::__errno_location()));
                }
            }
        }
        if let Err(e) = launch.landlock.apply_raw() {
            return Err((stage_code(e.stage()), e.errno()));
        }
        if super::unix_filter::SUPPORTED
            && let Err(errno) = super::unix_filter::install(launch.unix_filter)
        {
            return Err((ns::STEP_UNIX_FILTER, errno));
        }
        if launch.namespaces.is_some() {
            ns::drop_capabilities()?;
        }
    }
    Ok(())
}

#[cfg(target_os = "linux")]
fn stage_code(stage: nono::sandbox::RawSandboxStage) -> u32 {
    use nono::sandbox::RawSandboxStage as S;
    match stage {
        S::NoNewPrivs => 1,
        S::CreateRuleset => 2,
        S::AddPathRule => 3,
        S::AddNetRule => 4,
        S::RestrictSelf => 5,
        S::InstallStaticFilter => 6,
        _ => 8,
    }
}

/// Write `(stage, errno)` to `fd` with one raw `write`. Async-signal-safe, allocation-free.
#[cfg(target_os = "linux")]
fn report_child_failure(fd: i32, stage: u32, errno: i32) {
    let mut msg = [0u8; 8];
    msg[..4].copy_from_slice(&stage.to_ne_bytes());
    msg[4..].copy_from_slice(&errno.to_ne_bytes());
    // SAFETY: `msg` is a live 8-byte stack buffer; a failed write is ignored.
    unsafe {
        libc::write(fd, msg.as_ptr().cast(), msg.len());
    }
}

/// A pipe whose two ends are close-on-exec.
#[cfg(target_os = "linux")]
pub(crate) fn cloexec_pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0i32; 2];
    // SAFETY: `fds` is a valid out-array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded, so both descriptors are fresh and owned by us.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Off Linux (macOS has no `pipe2`) a close-on-exec pipe takes two steps, `pipe` then
/// `fcntl(FD_CLOEXEC)` on each end, and a child forked in between would inherit the ends.
/// turngate's own pipe creation holds this lock shared and its spawns hold it exclusive, so no
/// child turngate starts inherits a half-made pipe. A fork by other code in the host process
/// (not through [`ProcessRunner`]) can still land in the window, as it can with std's own
/// `Stdio::piped` there, which has the same two steps; what it would get is a pipe end between
/// turngate and its caller, never a way out of a sandbox, and it keeps that pipe open (no EOF)
/// until it exits or execs. ADR 0021.
#[cfg(all(unix, not(target_os = "linux")))]
static CLOEXEC_WINDOW: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// A pipe whose two ends are close-on-exec (see [`CLOEXEC_WINDOW`]).
#[cfg(all(unix, not(target_os = "linux")))]
pub(crate) fn cloexec_pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let _window = CLOEXEC_WINDOW
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut fds = [0i32; 2];
    // SAFETY: `fds` is a valid out-array of two ints.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: pipe succeeded, so both descriptors are fresh and owned by us; they close on
    // drop, also when setting the flag fails.
    let ends = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    for fd in [ends.0.as_raw_fd(), ends.1.as_raw_fd()] {
        // SAFETY: fcntl on a descriptor this function owns.
        if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(ends)
}

/// Spawn `cmd` so that no pipe of [`cloexec_pipe`] is half made while it forks (off Linux).
#[cfg(unix)]
fn spawn_child(cmd: &mut tokio::process::Command) -> std::io::Result<tokio::process::Child> {
    #[cfg(not(target_os = "linux"))]
    let _window = CLOEXEC_WINDOW
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    cmd.spawn()
}

/// A `SOCK_SEQPACKET` socketpair, both ends close-on-exec: turngate's end and P's end of the
/// egress bridge.
#[cfg(target_os = "linux")]
fn bridge_pair() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0i32; 2];
    // SAFETY: `fds` is a valid out-array of two ints.
    let rc = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: socketpair succeeded, so both descriptors are fresh and owned by us.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The listener P sent over the bridge (it was sent before the command could start, so it is
/// there once the spawn returned). Close-on-exec in turngate.
#[cfg(target_os = "linux")]
fn receive_listener(bridge: &OwnedFd) -> std::io::Result<std::net::TcpListener> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut control = [0u64; 8];
    // SAFETY: a zeroed msghdr pointing at live stack buffers; the kernel fills at most
    // `msg_controllen` bytes of control data.
    let fd = unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        let n = libc::recvmsg(
            bridge.as_raw_fd(),
            &mut msg,
            libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC,
        );
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if n != 1
            || cmsg.is_null()
            || (*cmsg).cmsg_level != libc::SOL_SOCKET
            || (*cmsg).cmsg_type != libc::SCM_RIGHTS
            || (*cmsg).cmsg_len as usize
                != libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as usize
            || msg.msg_flags & libc::MSG_CTRUNC != 0
        {
            return Err(std::io::Error::other(
                "the egress bridge carried no listener",
            ));
        }
        let mut fd: libc::c_int = -1;
        std::ptr::copy_nonoverlapping(
            libc::CMSG_DATA(cmsg),
            (&mut fd as *mut libc::c_int).cast::<u8>(),
            std::mem::size_of::<libc::c_int>(),
        );
        fd
    };
    if fd < 0 {
        return Err(std::io::Error::other(
            "the egress bridge carried no listener",
        ));
    }
    // SAFETY: the kernel installed `fd` for us just now; nothing else owns it.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    Ok(std::net::TcpListener::from(owned))
}

/// The read end of the status pipe as a non-blocking tokio pipe.
#[cfg(target_os = "linux")]
fn status_receiver(read_end: OwnedFd) -> std::io::Result<tokio::net::unix::pipe::Receiver> {
    // SAFETY: fcntl on a descriptor this function owns.
    let rc = unsafe {
        let flags = libc::fcntl(read_end.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(
            read_end.as_raw_fd(),
            libc::F_SETFL,
            flags | libc::O_NONBLOCK,
        )
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    tokio::net::unix::pipe::Receiver::from_owned_fd_unchecked(read_end)
}

/// The failure the child wrote, if any. Non-blocking: every writer wrote before the spawn
/// returned.
#[cfg(target_os = "linux")]
fn read_child_failure(read_end: &OwnedFd) -> Option<(u32, i32)> {
    let mut msg = [0u8; 8];
    // SAFETY: fcntl on an owned descriptor; `msg` is a live 8-byte buffer.
    let n = unsafe {
        let flags = libc::fcntl(read_end.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(
            read_end.as_raw_fd(),
            libc::F_SETFL,
            flags | libc::O_NONBLOCK,
        );
        libc::read(read_end.as_raw_fd(), msg.as_mut_ptr().cast(), msg.len())
    };
    if n != 8 {
        return None;
    }
    let stage = u32::from_ne_bytes([msg[0], msg[1], msg[2], msg[3]]);
    let errno = i32::from_ne_bytes([msg[4], msg[5], msg[6], msg[7]]);
    Some((stage, errno))
}

/// The error for a child that did not start: the step it reported (the sandbox's, the
/// namespace layer's, or the exec's own), else the spawn's error.
#[cfg(unix)]
fn child_error(
    prepared: Option<&PreparedSandbox>,
    failure: Option<(u32, i32)>,
    program: OsString,
    source: std::io::Error,
) -> RunError {
    #[cfg(target_os = "linux")]
    if let Some((stage, errno)) = failure {
        if stage == super::namespace::STEP_EXEC {
            return RunError::Spawn {
                program,
                source: std::io::Error::from_raw_os_error(errno),
            };
        }
        if stage >= 20 {
            let step = match prepared.map(|p| &p.launch) {
                Some(Launch::PreExec(l)) => match &l.namespaces {
                    Some(plan) => plan.step_description(stage),
                    None => super::namespace::step_name(stage).to_string(),
                },
                _ => super::namespace::step_name(stage).to_string(),
            };
            return RunError::NamespaceSetup { step, errno };
        }
        return RunError::SandboxApply {
            stage: stage_name(stage),
            errno,
        };
    }
    let _ = (prepared, failure);
    RunError::Spawn { program, source }
}

impl ProcessRunner {
    /// A runner on `backend`.
    pub fn new(backend: Arc<dyn SandboxBackend>) -> Self {
        Self {
            backend,
            prepared: Arc::default(),
        }
    }

    /// The prepared sandbox for `spec`: the cached one when `spec` is the last one prepared.
    #[cfg(unix)]
    fn prepare_cached(&self, spec: &SandboxSpec) -> Result<Arc<PreparedSandbox>, SandboxError> {
        if let Ok(cache) = self.prepared.lock()
            && let Some((cached_spec, prepared)) = cache.as_ref()
            && cached_spec == spec
        {
            return Ok(prepared.clone());
        }
        let prepared = Arc::new(prepare(self.backend.as_ref(), spec)?);
        if let Ok(mut cache) = self.prepared.lock() {
            *cache = Some((spec.clone(), prepared.clone()));
        }
        Ok(prepared)
    }

    /// A runner on this platform's native backend.
    pub fn native() -> Self {
        Self::new(native_backend())
    }

    /// The backend.
    pub fn backend(&self) -> &Arc<dyn SandboxBackend> {
        &self.backend
    }

    /// Run `request` from synchronous code (builds a small current-thread runtime). Refuses,
    /// with an error, to run inside a tokio runtime: use [`ProcessRunner::run`] there.
    pub fn run_blocking(&self, request: ProcessRequest) -> Result<ProcessOutcome, RunError> {
        if tokio::runtime::Handle::try_current().is_ok() {
            return Err(RunError::InvalidRequest(
                "run_blocking was called inside a tokio runtime; use `run(..).await`".into(),
            ));
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        runtime.block_on(self.run(request))
    }

    /// Run `request` to completion (or timeout). A `network = restricted` sandbox's egress
    /// proxy refuses every connection: use [`ProcessRunner::run_with_egress`] to decide them.
    pub async fn run(&self, request: ProcessRequest) -> Result<ProcessOutcome, RunError> {
        self.run_with_egress(request, &super::egress::RefuseAll)
            .await
    }

    /// [`ProcessRunner::run`], where the connections of a `network = restricted` command go
    /// through the egress proxy and `egress` decides each one (DESIGN §13). The proxy runs
    /// in this task while the command runs and is gone when it ends.
    #[cfg(unix)]
    pub async fn run_with_egress(
        &self,
        mut request: ProcessRequest,
        egress: &dyn super::egress::EgressDecider,
    ) -> Result<ProcessOutcome, RunError> {
        let stdio = request.stdio.take();
        let Some(program) = request.argv.first().cloned() else {
            return Err(RunError::InvalidRequest("argv is empty".into()));
        };

        let mut tmp_guard = None;
        let mut tmp_env = None;
        let prepared = match &request.sandbox {
            None => None,
            Some(spec) => {
                if spec.tmp == TmpSpec::Isolated(None) && self.backend.prepares_per_run_tmp() {
                    // Prepared once; this run's tmp dir is handed to the child: a tmpfs of its
                    // own in its mount view (ADR 0027), or a host directory made here.
                    let prepared = self.prepare_cached(spec)?;
                    match prepared.mounted_tmp() {
                        Some(path) => tmp_env = Some(path.as_os_str().to_os_string()),
                        None => {
                            let guard = TmpDirGuard::create()?;
                            tmp_env = Some(guard.0.as_os_str().to_os_string());
                            tmp_guard = Some(guard);
                        }
                    }
                    Some(prepared)
                } else if spec.tmp == TmpSpec::Isolated(None) {
                    let guard = TmpDirGuard::create()?;
                    tmp_env = Some(guard.0.as_os_str().to_os_string());
                    let mut spec = spec.clone();
                    spec.tmp = TmpSpec::Isolated(Some(guard.0.clone()));
                    let prepared = Arc::new(prepare(self.backend.as_ref(), &spec)?);
                    tmp_guard = Some(guard);
                    Some(prepared)
                } else {
                    tmp_env = spec.tmp_dir().map(|d| d.as_os_str().to_os_string());
                    Some(self.prepare_cached(spec)?)
                }
            }
        };

        let mut cmd = match prepared.as_ref().map(|p| &p.launch) {
            Some(Launch::Wrap { helper, profile }) => {
                let argv = super::seatbelt::seatbelt_argv(profile, &request.argv);
                let mut cmd = tokio::process::Command::new(helper);
                cmd.args(&argv[1..]);
                cmd
            }
            _ => {
                let mut cmd = tokio::process::Command::new(&program);
                cmd.args(&request.argv[1..]);
                cmd
            }
        };
        // The child's whole environment, as std builds it (later entries win); the sandboxed
        // command's own exec uses the same map (`ExecPlan`).
        let mut env: std::collections::BTreeMap<OsString, OsString> =
            request.env.iter().cloned().collect();
        if let Some(dir) = &tmp_env {
            for name in ["TMPDIR", "TMP", "TEMP"] {
                env.insert(name.into(), dir.clone());
            }
        }
        cmd.current_dir(&request.cwd)
            .stdin(match (&stdio, request.stdin) {
                (Some(pipes), _) => Stdio::from(pipes.stdin.try_clone()?),
                (None, _) if request.stdin_data.is_some() => Stdio::piped(),
                (None, StdinPolicy::Null) => Stdio::null(),
                (None, StdinPolicy::Inherit) => Stdio::inherit(),
            })
            .stdout(match &stdio {
                Some(pipes) => Stdio::from(pipes.stdout.try_clone()?),
                None => Stdio::piped(),
            })
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let new_session = request.new_session;
        if !new_session {
            cmd.process_group(0);
        }

        #[cfg(target_os = "linux")]
        let mut failure_pipe = None;
        #[cfg(target_os = "linux")]
        let mut bridge: Option<(OwnedFd, OwnedFd)> = None;
        // The command's end as its namespace's init reports it (a PID namespace only).
        #[cfg(target_os = "linux")]
        let mut status_pipe: Option<(OwnedFd, OwnedFd)> = None;
        match prepared.as_ref().map(|p| &p.launch) {
            #[cfg(target_os = "linux")]
            Some(Launch::PreExec(sandbox)) => {
                if sandbox
                    .namespaces
                    .as_ref()
                    .and_then(super::namespace::NamespacePlan::egress_port)
                    .is_some()
                {
                    bridge = Some(bridge_pair()?);
                    for (name, value) in super::egress::PROXY_ENV {
                        env.insert(name.into(), value.into());
                    }
                }
                let bridge_fd = bridge.as_ref().map_or(-1, |(_, child)| child.as_raw_fd());
                if sandbox
                    .namespaces
                    .as_ref()
                    .is_some_and(super::namespace::NamespacePlan::pid_namespace)
                {
                    status_pipe = Some(cloexec_pipe()?);
                    // P outlives the command by a moment (it reaps I); once the status is in,
                    // it is left to finish on its own and tokio reaps it. Cancellation and
                    // timeouts still kill its whole group (`GroupGuard`, `kill_tree`).
                    cmd.kill_on_drop(false);
                }
                let report_fd = status_pipe.as_ref().map_or(-1, |(_, w)| w.as_raw_fd());
                // This run's own tmp dir, for a sandbox prepared with a placeholder for it.
                let run_tmp = match (&sandbox.tmp_slot, &tmp_guard) {
                    (None, _) => None,
                    // P mounts it and hands its root to the command step.
                    (Some(_), None) if sandbox.tmpfs.is_some() => None,
                    (Some(_), Some(guard)) => Some(RunTmp::open(&guard.0)?),
                    (Some(_), None) => {
                        return Err(RunError::InvalidRequest(
                            "the sandbox expects a private tmp dir for this run".into(),
                        ));
                    }
                };
                let (read_end, write_end) = cloexec_pipe()?;
                let fd = write_end.as_raw_fd();
                let mut exec =
                    ExecPlan::new(&request.argv, &env).map_err(|source| RunError::Spawn {
                        program: program.clone(),
                        source,
                    })?;
                let sandbox = Arc::clone(sandbox);
                let cwd = std::ffi::CString::new(request.cwd.as_os_str().as_encoded_bytes())
                    .map_err(|_| RunError::InvalidRequest("cwd contains a NUL byte".into()))?;
                let parent = std::process::id() as libc::pid_t;
                // SAFETY: the hook runs between fork and exec. It makes raw syscalls only
                // (setsid, the namespace layer with its raw clones, the prepared
                // Landlock/seccomp apply, write): no allocation, no lock, no panic path, so it
                // is sound in a multi-threaded parent.
                unsafe {
                    cmd.pre_exec(move || {
                        if new_session && libc::setsid() < 0 {
                            let errno = *libc::__errno_location();
                            report_child_failure(fd, 7, errno);
                            return Err(std::io::Error::from_raw_os_error(errno));
                        }
                        let tmp = run_tmp.as_ref().map_or(-1, |t| t.fd.as_raw_fd());
                        if let Err((step, errno)) = confine(
                            &sandbox, &cwd, parent, bridge_fd, tmp, report_fd, fd, &mut exec,
                        ) {
                            report_child_failure(fd, step, errno);
                            return Err(std::io::Error::from_raw_os_error(errno));
                        }
                        Ok(())
                    });
                }
                failure_pipe = Some((read_end, write_end));
            }
            _ => {
                if new_session {
                    // SAFETY: setsid is async-signal-safe and takes no arguments.
                    unsafe {
                        cmd.pre_exec(|| {
                            if libc::setsid() < 0 {
                                return Err(std::io::Error::last_os_error());
                            }
                            Ok(())
                        });
                    }
                }
            }
        }

        cmd.env_clear().envs(&env);
        let start = Instant::now();
        let spawned = spawn_child(&mut cmd);
        // The child has its stdio now: this process keeps no copy of a server's pipe ends,
        // so the caller's ends see EOF when the server exits.
        drop(cmd);
        let forward_stderr = stdio.is_some();
        drop(stdio);
        #[cfg(target_os = "linux")]
        let child_failure = failure_pipe.and_then(|(read_end, write_end)| {
            // Every failure, of P, I or C, was written before the spawn returned (before the
            // last copy of std's exec pipe closed), so a non-blocking read sees it.
            drop(write_end);
            read_child_failure(&read_end)
        });
        #[cfg(not(target_os = "linux"))]
        let child_failure: Option<(u32, i32)> = None;
        let mut child = match spawned {
            // I or C failed after P's spawn succeeded: nothing ran; P is ending on its own.
            #[cfg(target_os = "linux")]
            Ok(mut child) if child_failure.is_some() => {
                let _ = child.wait().await;
                let source = std::io::Error::other("the sandboxed command did not start");
                return Err(child_error(
                    prepared.as_deref(),
                    child_failure,
                    program,
                    source,
                ));
            }
            Ok(child) => child,
            Err(source) => {
                return Err(child_error(
                    prepared.as_deref(),
                    child_failure,
                    program,
                    source,
                ));
            }
        };
        let pid = child.id().unwrap_or(0);
        let pgid = i32::try_from(pid).unwrap_or(0);
        let mut group = GroupGuard { pgid, armed: true };
        #[cfg(target_os = "linux")]
        let mut status_rx = match status_pipe {
            Some((read_end, write_end)) => {
                drop(write_end);
                Some(status_receiver(read_end)?)
            }
            None => None,
        };

        // The egress proxy: the listener P made inside the command's network namespace.
        let tasks = Arc::new(std::sync::Mutex::new(tokio::task::JoinSet::new()));
        #[cfg(target_os = "linux")]
        let listener = match bridge {
            Some((parent_end, child_end)) => {
                drop(child_end);
                match receive_listener(&parent_end) {
                    Ok(listener) => Some(listener),
                    Err(e) => {
                        return Err(RunError::NamespaceSetup {
                            step: "egress_listener".to_owned(),
                            errno: e.raw_os_error().unwrap_or(libc::EIO),
                        });
                    }
                }
            }
            None => None,
        };
        #[cfg(not(target_os = "linux"))]
        let listener: Option<std::net::TcpListener> = None;
        let mut proxy_done = listener.is_none();
        let proxy = async {
            if let Some(listener) = listener {
                super::egress::serve(listener, egress, tasks.clone()).await;
            }
        };
        tokio::pin!(proxy);

        let stdout = child.stdout.take();
        let stdin = child.stdin.take();
        let stdin_data = request.stdin_data.take();
        let sink = request.on_output.take();
        let (Some(stderr), true) = (child.stderr.take(), stdout.is_some() || forward_stderr) else {
            return Err(RunError::Io(std::io::Error::other("child pipes missing")));
        };
        let cap = request.output_cap;
        let mut out = Capped::default();
        let mut err = Capped::default();
        let mut timed_out = false;
        let mut status = None;
        let mut drained = false;
        let mut exited_at = None;
        {
            let readers = async {
                tokio::join!(
                    async {
                        if let (Some(mut stdin), Some(data)) = (stdin, stdin_data) {
                            use tokio::io::AsyncWriteExt;
                            // A child that stops reading early closes the pipe: not an error.
                            let _ = stdin.write_all(&data).await;
                            let _ = stdin.shutdown().await;
                        }
                    },
                    async {
                        if let Some(stdout) = stdout {
                            let sink = sink.as_ref().map(|s| (s, OutputStream::Stdout));
                            read_capped(stdout, cap, &mut out, sink).await;
                        }
                    },
                    async {
                        if forward_stderr {
                            forward_to_stderr(stderr).await;
                        } else {
                            let sink = sink.as_ref().map(|s| (s, OutputStream::Stderr));
                            read_capped(stderr, cap, &mut err, sink).await;
                        }
                    }
                )
            };
            tokio::pin!(readers);
            let waiter = async {
                #[cfg(target_os = "linux")]
                if let Some(rx) = status_rx.as_mut() {
                    let mut buf = [0u8; 4];
                    if tokio::io::AsyncReadExt::read_exact(rx, &mut buf)
                        .await
                        .is_ok()
                    {
                        // The namespace's init reaped the command and reported it: the kernel
                        // ends the namespace, and everything left in it, as I leaves; P reaps
                        // I and exits on its own. (EOF instead: P or I ended first; wait.)
                        return Ok(std::process::ExitStatus::from_raw(i32::from_ne_bytes(buf)));
                    }
                }
                let s = child.wait().await;
                // The command is over: nothing it left behind in its group keeps running.
                tree::kill_group(pgid);
                s
            };
            tokio::pin!(waiter);
            let far = Duration::from_secs(60 * 60 * 24 * 365);
            let deadline = tokio::time::Instant::from_std(start + request.timeout.unwrap_or(far));
            loop {
                let drain_deadline = exited_at.unwrap_or(deadline) + DRAIN_GRACE;
                tokio::select! {
                    () = &mut proxy, if !proxy_done => proxy_done = true,
                    s = &mut waiter, if status.is_none() => {
                        status = Some(s?);
                        exited_at = Some(tokio::time::Instant::now());
                    }
                    _ = &mut readers, if !drained => drained = true,
                    () = tokio::time::sleep_until(deadline), if !timed_out && status.is_none() => {
                        timed_out = true;
                        tree::kill_tree(pgid, pgid);
                    }
                    () = tokio::time::sleep_until(drain_deadline), if status.is_some() && !drained => {
                        break;
                    }
                }
                if status.is_some() && drained {
                    break;
                }
            }
        }
        group.armed = false;
        // The command is gone: its tunnels and upstream connections go with it.
        if let Ok(mut set) = tasks.lock() {
            set.abort_all();
        }
        let duration = exited_at
            .map(|t| t.into_std().saturating_duration_since(start))
            .unwrap_or_else(|| start.elapsed());
        let status = status.ok_or_else(|| std::io::Error::other("child status missing"))?;
        drop(tmp_guard);

        Ok(ProcessOutcome {
            pid,
            exit_code: status.code(),
            signal: status.signal(),
            timed_out,
            duration,
            stdout: out.data,
            stderr: err.data,
            stdout_truncated: out.truncated,
            stderr_truncated: err.truncated,
            output_left_open: !drained,
            sandbox: prepared.map(|p| p.report.clone()),
        })
    }

    /// Refused on Windows: turngate has no process runner nor sandbox backend there yet, so
    /// nothing is spawned, with or without a sandbox (never unconfined in place of one).
    #[cfg(windows)]
    pub async fn run_with_egress(
        &self,
        request: ProcessRequest,
        _egress: &dyn super::egress::EgressDecider,
    ) -> Result<ProcessOutcome, RunError> {
        if request.argv.is_empty() {
            return Err(RunError::InvalidRequest("argv is empty".into()));
        }
        let backend = self.backend.probe();
        Err(RunError::Unsupported(format!(
            "turngate cannot run commands on Windows yet (no process runner; sandbox backend {:?}: \
             {})",
            backend.backend, backend.detail
        )))
    }
}

#[cfg(all(test, windows))]
mod windows_tests {
    use super::*;

    /// No command runs on Windows, with or without a sandbox.
    #[test]
    fn every_run_is_refused() {
        let runner = ProcessRunner::native();
        let plain = runner.run_blocking(ProcessRequest::new(["cmd.exe", "/c", "echo hi"], "."));
        assert!(matches!(plain, Err(RunError::Unsupported(_))), "{plain:?}");
        assert!(StdioPipes::new().is_err());
    }
}
