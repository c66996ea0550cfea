//! The file checker: may this path be read or written in this turn?
//!
//! It resolves the path against the sandbox cwd, canonicalizes it (a new write target through
//! its nearest existing ancestor), checks root containment component by component, read-only
//! roots (with the supervised exception), symlink escapes, and then the policy's glob rules on
//! both the lexical and the resolved form. Every I/O error is a deny. It also offers race-free
//! opens (`openat2` beneath the governing root, Linux). It never writes anything.

use std::borrow::Cow;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::action::{ActionKind, Effect};
use crate::policy::{CompiledPolicy, normalize_path_lexically};
use crate::protocol::{FsAccess, FsProvenance, SandboxMode, TurnSandboxSnapshot};
use crate::verdict::{Reason, Verdict};

/// The layer reported when the filesystem boundary (not a policy rule) decided.
pub const FILESYSTEM_LAYER: &str = "sandbox.filesystem";

/// Symlink hops followed by hand (for dangling final components) before ELOOP.
const MAX_HOPS: usize = 40;

/// A file verdict and the normalized targets it judged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileCheck {
    /// The verdict.
    pub verdict: Verdict,
    /// The absolute, lexically normalized path (`None` when it could not be formed).
    pub lexical: Option<PathBuf>,
    /// The symlink-resolved path (`None` when resolution failed; the verdict is then deny).
    pub resolved: Option<PathBuf>,
    /// The canonical root that governs `resolved` (`None` outside every root, or when the
    /// sandbox is unrestricted).
    pub root: Option<PathBuf>,
}

impl FileCheck {
    /// The verdict's effect.
    pub fn effect(&self) -> Effect {
        self.verdict.effect
    }
}

/// Why a checked open failed.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The check did not allow the open (deny, or ask without approval).
    #[error("not allowed: {} ({})", .0.verdict.effect, .0.verdict.reason.as_str())]
    NotAllowed(Box<FileCheck>),
    /// The open itself failed (including an escape attempt raced in after the check).
    #[error("open failed: {0}")]
    Io(#[from] io::Error),
}

#[derive(Debug, Clone)]
struct Root {
    lexical: PathBuf,
    canonical: Option<PathBuf>,
    access: FsAccess,
    provenance: FsProvenance,
}

/// A turn's filesystem roots, canonicalized once. Keep one per turn and build checkers with
/// [`FilePolicyChecker::with_roots`], so no check repeats the roots' `realpath` calls.
#[derive(Debug, Clone)]
pub struct FileRoots {
    roots: Vec<Root>,
    workspace: Option<usize>,
}

impl FileRoots {
    /// Canonicalize the absolute entries of `sandbox`'s filesystem.
    pub fn new(sandbox: &TurnSandboxSnapshot) -> Self {
        let roots: Vec<Root> = sandbox
            .filesystem
            .entries
            .iter()
            .filter(|e| e.path.is_absolute())
            .filter_map(|e| {
                Some(Root {
                    lexical: lexical_path(&e.path)?,
                    canonical: std::fs::canonicalize(&e.path).ok(),
                    access: e.access,
                    provenance: e.provenance,
                })
            })
            .collect();
        let workspace = roots
            .iter()
            .position(|r| r.provenance == FsProvenance::Workspace);
        FileRoots { roots, workspace }
    }

    /// The workspace root, canonical when it exists.
    pub fn workspace_root(&self) -> Option<&Path> {
        let root = self.roots.get(self.workspace?)?;
        Some(root.canonical.as_deref().unwrap_or(&root.lexical))
    }

    /// Every writable root, as given and canonicalized (both spellings).
    pub fn writable_paths(&self) -> Vec<PathBuf> {
        self.roots
            .iter()
            .filter(|r| r.access == FsAccess::Write)
            .flat_map(|r| std::iter::once(r.lexical.clone()).chain(r.canonical.clone()))
            .collect()
    }
}

/// Judges file reads and writes against a turn's sandbox and policy.
#[derive(Debug)]
pub struct FilePolicyChecker<'a> {
    sandbox: &'a TurnSandboxSnapshot,
    policy: &'a CompiledPolicy,
    roots: Cow<'a, FileRoots>,
    layer: Arc<str>,
}

fn lexical_path(p: &Path) -> Option<PathBuf> {
    let s = p.to_str()?;
    normalize_path_lexically(s)
        .ok()
        .map(|c| PathBuf::from(c.into_owned()))
}

/// The deepest root containing `path`, compared component by component.
fn governing<'r>(
    roots: &'r [Root],
    path: &Path,
    form: impl Fn(&Root) -> Option<&Path>,
) -> Option<&'r Root> {
    roots
        .iter()
        .filter_map(|r| {
            let root = form(r)?;
            strip_root(path, root).map(|_| (r, root.as_os_str().len()))
        })
        .max_by_key(|(_, depth)| *depth)
        .map(|(r, _)| r)
}

/// `path` below `root`, as bytes (empty for the root itself), when `root` contains `path`
/// component-wise: `/w_evil` is not inside `/w`. Both must be normalized (absolute, no `.`,
/// `..`, empty components or trailing `/`), as every lexical and canonical form here is; on
/// such paths this byte comparison is exactly `Path::starts_with`, without walking components.
fn strip_root<'p>(path: &'p Path, root: &Path) -> Option<&'p [u8]> {
    let (p, r) = (
        path.as_os_str().as_encoded_bytes(),
        root.as_os_str().as_encoded_bytes(),
    );
    let rest = p.strip_prefix(r)?;
    if r == b"/" {
        return Some(rest);
    }
    match rest {
        [] => Some(rest),
        [b'/', tail @ ..] => Some(tail),
        _ => None,
    }
}
impl<'a> FilePolicyChecker<'a> {
    /// A checker for `sandbox` under `policy` (canonicalizes the roots now).
    pub fn new(sandbox: &'a TurnSandboxSnapshot, policy: &'a CompiledPolicy) -> Self {
        FilePolicyChecker {
            sandbox,
            policy,
            roots: Cow::Owned(FileRoots::new(sandbox)),
            layer: Arc::from(FILESYSTEM_LAYER),
        }
    }

    /// A checker over roots canonicalized earlier (by [`FileRoots::new`] on the same sandbox).
    pub fn with_roots(
        sandbox: &'a TurnSandboxSnapshot,
        policy: &'a CompiledPolicy,
        roots: &'a FileRoots,
    ) -> Self {
        FilePolicyChecker {
            sandbox,
            policy,
            roots: Cow::Borrowed(roots),
            layer: Arc::from(FILESYSTEM_LAYER),
        }
    }

    fn deny(
        &self,
        reason: Reason,
        lexical: Option<PathBuf>,
        resolved: Option<PathBuf>,
    ) -> FileCheck {
        FileCheck {
            verdict: Verdict::without_rule(Effect::Deny, self.layer.clone(), reason),
            lexical,
            resolved,
            root: None,
        }
    }

    /// Judge `kind` (`file_read` or `file_write`) on `path`, called from `tool`.
    pub fn check(&self, kind: ActionKind, path: impl AsRef<Path>, tool: Option<&str>) -> FileCheck {
        let path = path.as_ref();
        if !kind.is_file() {
            return self.deny(Reason::InvalidTarget, None, None);
        }
        let Some(text) = path.to_str() else {
            return self.deny(Reason::InvalidTarget, None, None);
        };
        if text.is_empty() || text.contains('\0') {
            return self.deny(Reason::InvalidTarget, None, None);
        }
        // 1. Resolve against the sandbox cwd.
        let absolute = if path.is_absolute() {
            path.to_path_buf()
        } else if self.sandbox.cwd.is_absolute() {
            self.sandbox.cwd.join(path)
        } else {
            return self.deny(Reason::InvalidTarget, None, None);
        };
        if too_long(&absolute) {
            return self.deny(Reason::IoError, None, None);
        }
        let Some(lexical) = lexical_path(&absolute) else {
            return self.deny(Reason::InvalidTarget, None, None);
        };
        // 2. Canonicalize (a new target through its nearest existing ancestor).
        let resolved = match resolve(&absolute) {
            Ok(r) => r,
            Err(_) => return self.deny(Reason::IoError, Some(lexical), None),
        };
        if too_long(&resolved) {
            return self.deny(Reason::IoError, Some(lexical), None);
        }
        let write = kind == ActionKind::FileWrite;
        let mut floor: Option<Verdict> = None;
        let mut governing_root = None;
        if self.sandbox.mode != SandboxMode::Unrestricted {
            // 3 and 5. Containment, on the resolved form; a lexically contained path that
            // resolves outside every root is a symlink escape.
            let res_root = governing(&self.roots.roots, &resolved, |r| r.canonical.as_deref());
            let Some(root) = res_root else {
                let lex_root =
                    governing(&self.roots.roots, &lexical, |r| Some(r.lexical.as_path()));
                let reason = if lex_root.is_some() {
                    Reason::SymlinkEscape
                } else {
                    Reason::OutsideRoots
                };
                return self.deny(reason, Some(lexical), Some(resolved));
            };
            // 4. Read-only roots, with the supervised exception.
            if write && root.access == FsAccess::Read {
                let mode_made_it = self.sandbox.mode == SandboxMode::ReadOnly
                    && matches!(
                        root.provenance,
                        FsProvenance::Workspace | FsProvenance::Project
                    );
                if !mode_made_it {
                    return self.deny(Reason::ReadOnlyRoot, Some(lexical), Some(resolved));
                }
                floor = Some(Verdict::without_rule(
                    Effect::Ask,
                    self.layer.clone(),
                    Reason::ReadOnlyRoot,
                ));
            }
            governing_root = root.canonical.clone();
        }
        // 6. Glob rules on both forms: workspace-relative inside the workspace, else absolute.
        let ws = self.roots.workspace.and_then(|i| self.roots.roots.get(i));
        let lexical_form = relative_form(&lexical, ws.map(|r| r.lexical.as_path()));
        let resolved_form = relative_form(&resolved, ws.and_then(|r| r.canonical.as_deref()));
        let (Some(lexical_form), Some(resolved_form)) = (lexical_form, resolved_form) else {
            return self.deny(Reason::InvalidTarget, Some(lexical), Some(resolved));
        };
        // Each form is judged in both spellings (workspace-relative and absolute), so a rule
        // written either way applies; without a symlink both forms are equal: evaluate once.
        let (Some(lexical_abs), Some(resolved_abs)) = (lexical.to_str(), resolved.to_str()) else {
            return self.deny(Reason::InvalidTarget, Some(lexical), Some(resolved));
        };
        let lex_pair = [lexical_form.as_str(), lexical_abs];
        let res_pair = [resolved_form.as_str(), resolved_abs];
        let lex = if lexical_abs == lexical_form {
            &lex_pair[1..]
        } else {
            &lex_pair[..]
        };
        let res = if resolved_abs == resolved_form {
            &res_pair[1..]
        } else {
            &res_pair[..]
        };
        let policy = if lex == res {
            self.policy.explain_path(kind, lex, tool)
        } else {
            self.policy
                .explain_path(kind, lex, tool)
                .stricter(self.policy.explain_path(kind, res, tool))
        };
        let verdict = match floor {
            Some(floor) => floor.stricter(policy),
            None => policy,
        };
        FileCheck {
            verdict,
            lexical: Some(lexical),
            resolved: Some(resolved),
            root: governing_root,
        }
    }

    /// Check and open `path` for reading, race-free (see [`open_checked`](Self::open_checked)).
    pub fn open_read(&self, path: impl AsRef<Path>, tool: Option<&str>) -> Result<File, OpenError> {
        let check = self.check(ActionKind::FileRead, path, tool);
        self.open_checked(&check, false, false)
    }

    /// Check and open `path` for writing (created if missing, truncated), race-free.
    pub fn open_write(
        &self,
        path: impl AsRef<Path>,
        tool: Option<&str>,
    ) -> Result<File, OpenError> {
        let check = self.check(ActionKind::FileWrite, path, tool);
        self.open_checked(&check, true, false)
    }

    /// Open the path a previous [`check`](Self::check) judged: allowed, or ask and
    /// `approved`. The open starts from an `O_PATH` fd on the governing root and resolves the
    /// rest with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS)`:
    /// the checked path had no symlinks left, so any symlink found now was raced in after
    /// the check, and the open fails instead of following it (even one that stays inside the
    /// root but points at a denied file).
    pub fn open_checked(
        &self,
        check: &FileCheck,
        write: bool,
        approved: bool,
    ) -> Result<File, OpenError> {
        let permitted = match check.verdict.effect {
            Effect::Allow => true,
            Effect::Ask => approved,
            Effect::Deny => false,
        };
        let Some(resolved) = check.resolved.as_deref().filter(|_| permitted) else {
            return Err(OpenError::NotAllowed(Box::new(check.clone())));
        };
        let root = check.root.as_deref().unwrap_or(Path::new("/"));
        let rel = resolved
            .strip_prefix(root)
            .map_err(|_| io::Error::new(io::ErrorKind::PermissionDenied, "path left its root"))?;
        Ok(open_beneath(root, rel, write)?)
    }

    /// Replace the file of `check` with `content`, atomically and race-free (see
    /// [`replace_beneath`]), when the check allows a write (or asks and the ask was
    /// `approved`).
    pub fn replace_checked(
        &self,
        check: &FileCheck,
        content: &[u8],
        approved: bool,
    ) -> Result<(), OpenError> {
        let permitted = match check.verdict.effect {
            Effect::Allow => true,
            Effect::Ask => approved,
            Effect::Deny => false,
        };
        let Some(resolved) = check.resolved.as_deref().filter(|_| permitted) else {
            return Err(OpenError::NotAllowed(Box::new(check.clone())));
        };
        let root = check.root.as_deref().unwrap_or(Path::new("/"));
        let rel = resolved
            .strip_prefix(root)
            .map_err(|_| io::Error::new(io::ErrorKind::PermissionDenied, "path left its root"))?;
        Ok(replace_beneath(root, rel, content)?)
    }
}

/// ENAMETOOLONG, decided up front: the kernel refuses paths over `PATH_MAX` and names over
/// `NAME_MAX`, and a path that no syscall saw whole (a missing tail) must not pass either.
fn too_long(path: &Path) -> bool {
    const PATH_MAX: usize = 4096;
    const NAME_MAX: usize = 255;
    let bytes = path.as_os_str().as_encoded_bytes();
    bytes.len() >= PATH_MAX || bytes.split(|b| *b == b'/').any(|c| c.len() > NAME_MAX)
}

fn relative_form(path: &Path, workspace: Option<&Path>) -> Option<String> {
    if let Some(rel) = workspace.and_then(|ws| strip_root(path, ws)) {
        let rel = std::str::from_utf8(rel).ok()?;
        return Some(if rel.is_empty() {
            ".".to_owned()
        } else {
            rel.to_owned()
        });
    }
    path.to_str().map(str::to_owned)
}

/// Canonicalize `path`; for a missing target, canonicalize its nearest existing ancestor and
/// append the remaining names. A dangling symlink is followed by hand (its target is what a
/// write would create). Any other error is returned (the caller denies).
pub(crate) fn resolve(path: &Path) -> io::Result<PathBuf> {
    let mut current = path.to_path_buf();
    for _ in 0..MAX_HOPS {
        match std::fs::canonicalize(&current) {
            Ok(p) => return Ok(p),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let meta = std::fs::symlink_metadata(&current);
                if meta.as_ref().is_ok_and(|m| m.file_type().is_symlink()) {
                    let target = std::fs::read_link(&current)?;
                    current = match current.parent() {
                        Some(parent) => parent.join(target),
                        None => target,
                    };
                    continue;
                }
                return resolve_missing(&current);
            }
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other("too many levels of symbolic links"))
}

fn resolve_missing(path: &Path) -> io::Result<PathBuf> {
    let invalid = || io::Error::new(io::ErrorKind::InvalidInput, "unresolvable missing path");
    let mut tail = Vec::new();
    let mut current = path;
    loop {
        tail.push(current.file_name().ok_or_else(invalid)?);
        current = current.parent().ok_or_else(invalid)?;
        match std::fs::canonicalize(current) {
            Ok(mut base) => {
                for name in tail.iter().rev() {
                    base.push(name);
                }
                return Ok(base);
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if std::fs::symlink_metadata(current).is_ok() {
                    // A dangling symlink in the middle of the path: refuse to guess.
                    return Err(invalid());
                }
            }
            Err(e) => return Err(e),
        }
    }
}

/// Open `rel` beneath `root` with `openat2`, refusing any symlink and any escape.
#[cfg(target_os = "linux")]
pub fn open_beneath(root: &Path, rel: &Path, write: bool) -> io::Result<File> {
    let (flags, mode) = if write {
        (
            libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC,
            0o666,
        )
    } else {
        (libc::O_RDONLY | libc::O_CLOEXEC, 0)
    };
    open_beneath_fd(root, rel, flags, mode).map(File::from)
}

/// Replace the file `rel` beneath `root` with `content`, atomically: its directory is opened
/// race-free like [`open_beneath`] (no symlink, no escape), the bytes go to a fresh temporary
/// file beside it (`O_EXCL`, never a name that exists), are synced, and the temporary is
/// renamed over the name. A reader, or a crash, sees the old content or the new, never a
/// part. An existing file keeps its permission bits; a new one gets `0o666` less the umask.
/// A symlink or a directory now at the name is refused (nothing is written through it).
#[cfg(target_os = "linux")]
pub fn replace_beneath(root: &Path, rel: &Path, content: &[u8]) -> io::Result<()> {
    use std::ffi::CString;
    use std::io::Write;
    use std::os::fd::{AsRawFd, FromRawFd};
    use std::os::unix::ffi::OsStrExt;
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);

    let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidInput, what.to_owned());
    let name = rel
        .file_name()
        .ok_or_else(|| invalid("no file name to write"))?;
    let parent = rel.parent().unwrap_or(Path::new(""));
    let dir = open_beneath_fd(
        root,
        parent,
        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        0,
    )?;
    let name_c = CString::new(name.as_bytes()).map_err(|_| invalid("NUL in path"))?;
    // SAFETY: `stat` is a plain C struct; zeroed is a valid value for fstatat to fill.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid descriptor, NUL-terminated name, and a writable stat buffer.
    let found = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name_c.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    } == 0;
    let mode = if found {
        match st.st_mode & libc::S_IFMT {
            libc::S_IFREG => Some(st.st_mode & 0o7777),
            libc::S_IFLNK => return Err(io::Error::from_raw_os_error(libc::ELOOP)),
            libc::S_IFDIR => return Err(io::Error::from_raw_os_error(libc::EISDIR)),
            _ => return Err(invalid("not a regular file")),
        }
    } else {
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::NotFound {
            return Err(err);
        }
        None
    };
    let tmp = format!(
        ".{}.turngate-{}-{}.tmp",
        name.to_string_lossy(),
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let tmp_c = CString::new(tmp).map_err(|_| invalid("NUL in path"))?;
    // SAFETY: valid descriptor and NUL-terminated name; the result is checked.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            tmp_c.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o666 as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new descriptor that we now own.
    let mut file = unsafe { File::from_raw_fd(fd) };
    let written = (|| {
        if let Some(mode) = mode {
            // SAFETY: an owned, open descriptor.
            if unsafe { libc::fchmod(file.as_raw_fd(), mode) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        file.write_all(content)?;
        file.sync_all()?;
        // SAFETY: valid descriptor and NUL-terminated names, both beneath `dir`.
        if unsafe {
            libc::renameat(
                dir.as_raw_fd(),
                tmp_c.as_ptr(),
                dir.as_raw_fd(),
                name_c.as_ptr(),
            )
        } != 0
        {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    })();
    drop(file);
    if written.is_err() {
        // SAFETY: valid descriptor and NUL-terminated name; a failure leaves nothing to undo.
        unsafe { libc::unlinkat(dir.as_raw_fd(), tmp_c.as_ptr(), 0) };
        return written;
    }
    // The rename is durable once the directory is synced (best effort: the data is in).
    let dir = File::from(dir);
    let _ = dir.sync_all();
    Ok(())
}

/// `openat2(root, rel, flags, mode)` with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS |
/// RESOLVE_NO_SYMLINKS`.
#[cfg(target_os = "linux")]
fn open_beneath_fd(
    root: &Path,
    rel: &Path,
    flags: libc::c_int,
    mode: u64,
) -> io::Result<std::os::fd::OwnedFd> {
    use std::ffi::CString;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;

    let root_c = CString::new(root.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in root"))?;
    let rel_bytes = rel.as_os_str().as_bytes();
    let rel_c = CString::new(if rel_bytes.is_empty() {
        b"." as &[u8]
    } else {
        rel_bytes
    })
    .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
    // SAFETY: `root_c` is a valid NUL-terminated string; the returned fd is checked.
    let root_fd = unsafe {
        libc::open(
            root_c.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if root_fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `root_fd` is a freshly opened, owned descriptor.
    let root_fd = unsafe { OwnedFd::from_raw_fd(root_fd) };
    // SAFETY: `open_how` is a plain C struct; zeroed is a valid value.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = flags as u64;
    how.mode = mode;
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS | libc::RESOLVE_NO_SYMLINKS;
    // SAFETY: all pointers are valid for the call; the size matches the struct passed.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            root_fd.as_raw_fd(),
            rel_c.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = i32::try_from(fd).map_err(|_| io::Error::other("fd out of range"))?;
    // SAFETY: the kernel returned a new descriptor that we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Atomic replacement needs `openat2`; elsewhere it fails closed.
#[cfg(not(target_os = "linux"))]
pub fn replace_beneath(_root: &Path, _rel: &Path, _content: &[u8]) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "race-free writes need openat2 (Linux)",
    ))
}

/// Race-free opens need `openat2`; elsewhere they fail closed.
#[cfg(not(target_os = "linux"))]
pub fn open_beneath(_root: &Path, _rel: &Path, _write: bool) -> io::Result<File> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "race-free opens need openat2 (Linux)",
    ))
}
