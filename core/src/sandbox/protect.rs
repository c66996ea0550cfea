//! Protected files a sandboxed command created (red-team finding F8, ADR 0020).
//!
//! The mount view binds a protected path read-only only when it exists at spawn: Landlock
//! cannot refuse one name inside a writable directory, and a bind needs an existing target.
//! So a command in a writable mode could *create* `.git/config` (with `core.fsmonitor`, code
//! that git runs outside any sandbox later), `.envrc` (direnv runs it), `.env`, or
//! `.git/hooks/*` where `.git/hooks` is absent.
//!
//! The gate takes a [`Baseline`] of the protected entries inside the writable roots before
//! the command runs and, once it has ended (every process of it gone: its PID namespace dies
//! with it), [`Baseline::quarantine_new`] walks the roots again and moves every protected
//! entry that is new (a path that was not there, or is another file now) into a quarantine
//! directory under the state dir, so it never takes effect; the sandbox report lists each one.
//!
//! "Protected" is what the policy protects: a path that a file_read deny rule matches (a
//! secret: `.env`, `.envrc`) or that a file_write deny or ask rule matches (`.git/config`,
//! `.git/hooks/*`), judged by the workspace-relative and the absolute spelling, as the mask
//! walk judges them. Symlinks are judged by their own name and never followed. It fails
//! closed: a walk that cannot finish (a directory it cannot list, more than [`MAX_ENTRIES`]
//! entries, an I/O error) or an entry that cannot be moved away is named in the report as an
//! incomplete scan, and the gate removes what it could not move.

use std::collections::HashSet;
#[cfg(unix)]
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::action::{ActionKind, Effect};
use crate::policy::CompiledPolicy;
use crate::verdict::Reason;

/// Entries visited per walk at most (all roots together).
pub const MAX_ENTRIES: usize = 200_000;

/// Paths judged first in every root (relative to it), so that a root with more entries than
/// [`MAX_ENTRIES`] still has its well-known ones checked.
const FIRST: &[&str] = &[
    ".env",
    ".envrc",
    ".git/config",
    ".git/config.worktree",
    ".git/commondir",
    ".git/hooks",
];

/// One protected entry the command created, and where it went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QuarantinedPath {
    /// Where the command created it.
    pub path: PathBuf,
    /// Where it is now (under the quarantine directory); `None` when it could not be moved
    /// and was removed instead.
    pub moved_to: Option<PathBuf>,
    /// `file`, `dir`, `symlink` or `other`.
    pub kind: String,
}

/// A protected entry found by a walk.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Entry {
    path: PathBuf,
    dev: u64,
    ino: u64,
    kind: &'static str,
    /// The inode's change time (seconds, nanoseconds): set by the kernel on creation, rename
    /// and every change, never by the command.
    ctime: (i64, i64),
}

/// What one walk of the writable roots found.
#[derive(Debug, Clone, Default)]
struct Found {
    entries: Vec<Entry>,
    /// Why the walk did not see everything (a directory it could not list, the cap).
    incomplete: Vec<String>,
}

/// The protected entries inside the writable roots before the command ran.
#[derive(Debug, Clone)]
pub struct Baseline {
    roots: Vec<PathBuf>,
    /// Not walked: turngate's own state directory (the quarantine among it).
    skip: Vec<PathBuf>,
    workspace: Option<PathBuf>,
    /// Path, device, inode and change time: an inode number can be reused at once for a file
    /// created in the place of a removed one; its change time is the kernel's, never the
    /// command's.
    before: HashSet<(PathBuf, u64, u64, (i64, i64))>,
    /// Directories the first walk could not list: the command could not reach them either
    /// when the mount view hid them, so they are not counted against the second walk.
    unlistable: HashSet<(PathBuf, u64, u64)>,
    /// The first walk stopped at the cap: an entry it did not reach is new only if its inode
    /// changed after the baseline was taken.
    truncated: bool,
    /// When the baseline was taken (before the command started), as a change time.
    started: (i64, i64),
}

/// The result of the second walk.
#[derive(Debug, Clone, Default)]
pub struct Quarantine {
    /// Each new protected entry and where it went.
    pub quarantined: Vec<QuarantinedPath>,
    /// Why the scan is incomplete (empty: it is complete); the entries it could not judge or
    /// move are not known to be harmless.
    pub incomplete: Vec<String>,
}

fn kind_of(meta: &std::fs::Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_symlink() {
        "symlink"
    } else if t.is_dir() {
        "dir"
    } else if t.is_file() {
        "file"
    } else {
        "other"
    }
}

/// Whether `policy` protects `path`: a read deny, or a write deny or ask. A `.git`
/// *directory* is not protected itself (each commit changes it; what in it runs code is
/// judged by name), a `.git` file (a worktree's pointer) is.
fn protected(policy: &CompiledPolicy, workspace: Option<&Path>, path: &Path) -> bool {
    if path.file_name().is_some_and(|n| n == ".git")
        && std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
    {
        return false;
    }
    let abs = path.to_string_lossy();
    let rel = workspace
        .and_then(|ws| path.strip_prefix(ws).ok())
        .map(|r| r.to_string_lossy())
        .filter(|r| !r.is_empty());
    let spellings: Vec<&str> = rel.as_deref().into_iter().chain([abs.as_ref()]).collect();
    let read = policy.explain_path(ActionKind::FileRead, &spellings, None);
    if read.effect == Effect::Deny {
        return true;
    }
    let write = policy.explain_path(ActionKind::FileWrite, &spellings, None);
    matches!(write.reason, Reason::DenyRule | Reason::AskRule)
}

/// Walk `roots` breadth-first without following symlinks, recording every protected entry
/// (and descending into protected directories too: a file created inside an existing one is
/// new as well).
fn walk(
    roots: &[PathBuf],
    skip: &[PathBuf],
    workspace: Option<&Path>,
    policy: &CompiledPolicy,
    unlistable: &mut Vec<(PathBuf, u64, u64)>,
) -> Found {
    let mut found = Found::default();
    let mut seen: HashSet<PathBuf> = HashSet::new();
    let mut record = |found: &mut Found, path: &Path, meta: &std::fs::Metadata| {
        if seen.insert(path.to_path_buf()) {
            found.entries.push(Entry {
                path: path.to_path_buf(),
                dev: meta.dev(),
                ino: meta.ino(),
                kind: kind_of(meta),
                ctime: (meta.ctime(), meta.ctime_nsec()),
            });
        }
    };
    for root in roots {
        for rel in FIRST {
            let path = root.join(rel);
            if let Ok(meta) = std::fs::symlink_metadata(&path)
                && protected(policy, workspace, &path)
            {
                record(&mut found, &path, &meta);
            }
        }
    }
    let mut visited = 0usize;
    for root in roots {
        let mut queue = std::collections::VecDeque::from([root.clone()]);
        while let Some(dir) = queue.pop_front() {
            let entries = match std::fs::read_dir(&dir) {
                Ok(entries) => entries,
                Err(e) => {
                    if let Ok(meta) = std::fs::symlink_metadata(&dir) {
                        unlistable.push((dir.clone(), meta.dev(), meta.ino()));
                    }
                    found
                        .incomplete
                        .push(format!("{} could not be listed: {e}", dir.display()));
                    continue;
                }
            };
            for entry in entries {
                visited += 1;
                if visited > MAX_ENTRIES {
                    found.incomplete.push(format!(
                        "the writable roots hold more than {MAX_ENTRIES} entries; the rest was \
                         not scanned"
                    ));
                    return found;
                }
                let entry = match entry {
                    Ok(entry) => entry,
                    Err(e) => {
                        found.incomplete.push(format!(
                            "an entry of {} could not be read: {e}",
                            dir.display()
                        ));
                        continue;
                    }
                };
                let path = entry.path();
                if skip.contains(&path) {
                    continue;
                }
                // Only a protected entry needs its inode (an lstat); the walk itself goes by the
                // listing's file type, which never follows a symlink.
                if protected(policy, workspace, &path) {
                    match std::fs::symlink_metadata(&path) {
                        Ok(meta) => record(&mut found, &path, &meta),
                        // Gone between the listing and the lstat: nothing left to judge.
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                        Err(e) => {
                            found
                                .incomplete
                                .push(format!("{} could not be examined: {e}", path.display()));
                            continue;
                        }
                    }
                }
                let is_dir = match entry.file_type() {
                    Ok(t) => t.is_dir(),
                    Err(e) => {
                        found
                            .incomplete
                            .push(format!("{} could not be examined: {e}", path.display()));
                        continue;
                    }
                };
                if is_dir {
                    queue.push_back(path);
                }
            }
        }
    }
    found
}

impl Baseline {
    /// Walk the writable `roots` (canonical paths) before the command runs. `workspace` is
    /// the root the policy's relative patterns are relative to.
    /// `skip` are directories not to walk (turngate's state directory).
    pub fn take(
        roots: &[PathBuf],
        skip: &[PathBuf],
        workspace: Option<&Path>,
        policy: &CompiledPolicy,
    ) -> Self {
        let roots: Vec<PathBuf> = roots
            .iter()
            .filter_map(|r| std::fs::canonicalize(r).ok())
            .collect();
        let skip: Vec<PathBuf> = skip
            .iter()
            .map(|s| std::fs::canonicalize(s).unwrap_or_else(|_| s.clone()))
            .collect();
        let workspace = workspace.and_then(|w| std::fs::canonicalize(w).ok());
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| (d.as_secs() as i64, i64::from(d.subsec_nanos())))
            .unwrap_or((0, 0));
        let mut unlistable = Vec::new();
        let found = walk(&roots, &skip, workspace.as_deref(), policy, &mut unlistable);
        let truncated = found
            .incomplete
            .iter()
            .any(|w| w.contains("entries; the rest"));
        Baseline {
            truncated,
            started,
            before: found
                .entries
                .into_iter()
                .map(|e| (e.path, e.dev, e.ino, e.ctime))
                .collect(),
            unlistable: unlistable.into_iter().collect(),
            roots,
            skip,
            workspace,
        }
    }

    /// Walk the roots again and move every protected entry that is new since [`Baseline::take`]
    /// into a fresh directory under `quarantine_dir`. Call only once the command and every
    /// process it started are gone.
    pub fn quarantine_new(&self, policy: &CompiledPolicy, quarantine_dir: &Path) -> Quarantine {
        let mut unlistable = Vec::new();
        let found = walk(
            &self.roots,
            &self.skip,
            self.workspace.as_deref(),
            policy,
            &mut unlistable,
        );
        let mut result = Quarantine::default();
        // A directory that could not be listed before either (and so was hidden from the
        // command, ADR 0010) is not new; one that is new is moved away whole, below.
        let mut new_unlistable = Vec::new();
        for (path, dev, ino) in &unlistable {
            if !self.unlistable.contains(&(path.clone(), *dev, *ino)) {
                new_unlistable.push(path.clone());
            }
        }
        let listing_errors: Vec<String> = found
            .incomplete
            .iter()
            .filter(|why| !why.contains("could not be listed"))
            .cloned()
            .collect();
        result.incomplete.extend(listing_errors);
        let mut new: Vec<(PathBuf, &'static str)> = found
            .entries
            .iter()
            .filter(|e| {
                !self
                    .before
                    .contains(&(e.path.clone(), e.dev, e.ino, e.ctime))
            })
            // Beyond a truncated baseline only what changed since it was taken can be new (a
            // second of slack for filesystems with coarse timestamps).
            .filter(|e| !self.truncated || e.ctime.0 >= self.started.0 - 1)
            .map(|e| (e.path.clone(), e.kind))
            .chain(new_unlistable.into_iter().map(|p| (p, "dir")))
            .collect();
        // Shallowest first; what lies inside a moved entry goes with it.
        new.sort_by_key(|(p, _)| p.components().count());
        let mut moved: Vec<PathBuf> = Vec::new();
        let stamp = format!(
            "{}-{}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis())
                .unwrap_or_default(),
            std::process::id()
        );
        let target_dir = quarantine_dir.join(stamp);
        if new.is_empty() {
            return result;
        }
        // Private: a quarantined `.env` is still a secret. The quarantine must be a directory
        // of this user's, not a symlink (one planted in a shared tmp dir by another user would
        // receive what is moved); otherwise nothing is moved and every new entry is removed.
        let private = {
            let _ = std::fs::create_dir_all(&target_dir);
            let me = current_uid();
            [quarantine_dir, target_dir.as_path()].iter().all(|dir| {
                std::fs::symlink_metadata(dir)
                    .is_ok_and(|m| m.file_type().is_dir() && m.uid() == me)
                    && make_private(dir).is_ok()
            })
        };
        for (i, (path, kind)) in new.into_iter().enumerate() {
            if moved.iter().any(|m| path.starts_with(m)) {
                continue;
            }
            let name = path
                .file_name()
                .map(|n| n.to_os_string())
                .unwrap_or_else(|| "entry".into());
            let dest = target_dir.join(format!("{i}")).join(name);
            let moved_there = if private {
                move_away(&path, &dest)
            } else {
                Err(std::io::Error::other(format!(
                    "the quarantine {} is not a private directory of this user's",
                    quarantine_dir.display()
                )))
            };
            match moved_there {
                Ok(()) => result.quarantined.push(QuarantinedPath {
                    path: path.clone(),
                    moved_to: Some(dest),
                    kind: kind.to_string(),
                }),
                Err(move_err) => match remove(&path) {
                    Ok(()) => result.quarantined.push(QuarantinedPath {
                        path: path.clone(),
                        moved_to: None,
                        kind: kind.to_string(),
                    }),
                    Err(rm_err) => result.incomplete.push(format!(
                        "{} was created by the command and could not be moved ({move_err}) or \
                         removed ({rm_err})",
                        path.display()
                    )),
                },
            }
            moved.push(path);
        }
        if private && !result.quarantined.is_empty() {
            // Where each entry came from, beside it, for a person deciding what to restore.
            let listing: String = result
                .quarantined
                .iter()
                .filter_map(|q| {
                    q.moved_to
                        .as_ref()
                        .map(|to| format!("{}\t{}\n", to.display(), q.path.display()))
                })
                .collect();
            let _ = std::fs::write(target_dir.join("MANIFEST"), listing);
        }
        result
    }
}

/// Move `path` (not following a symlink) to `dest`: a rename, or a copy and a removal across
/// filesystems.
fn move_away(path: &Path, dest: &Path) -> std::io::Result<()> {
    if let Some(parent) = dest.parent() {
        std::fs::create_dir_all(parent)?;
        let _ = make_private(parent);
    }
    match std::fs::rename(path, dest) {
        Ok(()) => Ok(()),
        Err(e) if crosses_filesystems(&e) => {
            copy_tree(path, dest)?;
            remove(path)
        }
        Err(e) => Err(e),
    }
}

fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    let meta = std::fs::symlink_metadata(from)?;
    let t = meta.file_type();
    if t.is_symlink() {
        copy_symlink(from, to)
    } else if t.is_dir() {
        std::fs::create_dir(to)?;
        for entry in std::fs::read_dir(from)? {
            let entry = entry?;
            copy_tree(&entry.path(), &to.join(entry.file_name()))?;
        }
        Ok(())
    } else if t.is_file() {
        std::fs::copy(from, to).map(|_| ())
    } else {
        // A fifo, socket or device node: nothing worth keeping; it is removed.
        Ok(())
    }
}

fn remove(path: &Path) -> std::io::Result<()> {
    let meta = std::fs::symlink_metadata(path)?;
    if meta.file_type().is_dir() {
        // An unlistable directory the command made: make it listable first (it is ours).
        let _ = make_private(path);
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    }
}

/// This user's uid.
#[cfg(unix)]
pub(crate) fn current_uid() -> u32 {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() }
}

/// Mode 0700 on `path`.
#[cfg(unix)]
fn make_private(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))
}

#[cfg(unix)]
fn copy_symlink(from: &Path, to: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(std::fs::read_link(from)?, to)
}

#[cfg(unix)]
fn crosses_filesystems(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(libc::EXDEV)
}

// Off Unix no command runs (the runner refuses every run, ADR 0021), so nothing is ever
// scanned or moved: these stand-ins only let the module compile, and every one of them
// fails closed (no private quarantine, so a scan would remove rather than keep).
#[cfg(not(unix))]
trait MetadataExt {
    fn dev(&self) -> u64 {
        0
    }
    fn ino(&self) -> u64 {
        0
    }
    fn ctime(&self) -> i64 {
        0
    }
    fn ctime_nsec(&self) -> i64 {
        0
    }
    fn uid(&self) -> u32 {
        u32::MAX
    }
}

#[cfg(not(unix))]
impl MetadataExt for std::fs::Metadata {}

#[cfg(not(unix))]
pub(crate) fn current_uid() -> u32 {
    0
}

#[cfg(not(unix))]
fn make_private(_path: &Path) -> std::io::Result<()> {
    Err(std::io::Error::other(
        "no Unix permissions on this platform",
    ))
}

#[cfg(not(unix))]
fn copy_symlink(_from: &Path, _to: &Path) -> std::io::Result<()> {
    Err(std::io::Error::other("no symlinks copied on this platform"))
}

#[cfg(not(unix))]
fn crosses_filesystems(_e: &std::io::Error) -> bool {
    false
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::policy::Policy;

    fn setup() -> (tempfile::TempDir, PathBuf, PathBuf, CompiledPolicy) {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let w = base.join("w");
        let state = base.join("state");
        std::fs::create_dir_all(w.join(".git")).unwrap();
        std::fs::create_dir_all(&state).unwrap();
        std::fs::write(w.join(".env"), "OLD=1").unwrap();
        std::fs::write(w.join(".git/config"), "[core]").unwrap();
        std::fs::write(w.join("a.txt"), "a").unwrap();
        (
            dir,
            w,
            state,
            Policy::default()
                .with_builtin_protected()
                .compile()
                .unwrap(),
        )
    }

    fn paths(q: &Quarantine) -> Vec<PathBuf> {
        let mut p: Vec<PathBuf> = q.quarantined.iter().map(|q| q.path.clone()).collect();
        p.sort();
        p
    }

    #[test]
    fn only_what_is_new_is_moved_and_existing_files_stay() {
        let (_d, w, state, policy) = setup();
        let base = Baseline::take(
            std::slice::from_ref(&w),
            std::slice::from_ref(&state),
            Some(&w),
            &policy,
        );
        std::fs::write(w.join(".envrc"), "evil").unwrap();
        std::fs::create_dir_all(w.join("sub/.git/hooks")).unwrap();
        std::fs::write(w.join("sub/.git/hooks/pre-commit"), "evil").unwrap();
        std::os::unix::fs::symlink("a.txt", w.join(".env.local")).unwrap();
        std::fs::write(w.join("b.txt"), "b").unwrap();
        // Replaced: same path, another file.
        std::fs::remove_file(w.join(".git/config")).unwrap();
        std::fs::write(w.join(".git/config"), "[core]\n\tfsmonitor = x").unwrap();
        let q = base.quarantine_new(&policy, &state.join("quarantine"));
        assert!(q.incomplete.is_empty(), "{:?}", q.incomplete);
        assert_eq!(
            paths(&q),
            [
                w.join(".env.local"),
                w.join(".envrc"),
                w.join(".git/config"),
                w.join("sub/.git/hooks"),
            ]
        );
        assert_eq!(std::fs::read_to_string(w.join(".env")).unwrap(), "OLD=1");
        assert!(w.join("b.txt").is_file() && w.join("sub/.git").is_dir());
        for q in &q.quarantined {
            let to = q.moved_to.as_ref().unwrap();
            assert!(std::fs::symlink_metadata(to).is_ok(), "{to:?}");
            assert!(std::fs::symlink_metadata(&q.path).is_err());
        }
        let link = q
            .quarantined
            .iter()
            .find(|q| q.path.ends_with(".env.local"))
            .unwrap();
        assert_eq!(link.kind, "symlink");
        // A second scan from a fresh baseline finds nothing new.
        let again = Baseline::take(
            std::slice::from_ref(&w),
            std::slice::from_ref(&state),
            Some(&w),
            &policy,
        );
        assert!(
            again
                .quarantine_new(&policy, &state.join("quarantine"))
                .quarantined
                .is_empty()
        );
    }

    #[test]
    fn what_cannot_be_moved_is_removed() {
        let (_d, w, state, policy) = setup();
        let base = Baseline::take(std::slice::from_ref(&w), &[], Some(&w), &policy);
        std::fs::write(w.join(".envrc"), "evil").unwrap();
        // The quarantine cannot be made: a file stands where its directory would be.
        let blocked = state.join("blocked");
        std::fs::write(&blocked, "").unwrap();
        let q = base.quarantine_new(&policy, &blocked);
        assert!(q.incomplete.is_empty(), "{:?}", q.incomplete);
        assert_eq!(q.quarantined.len(), 1);
        assert_eq!(q.quarantined[0].moved_to, None);
        assert!(!w.join(".envrc").exists());
    }

    #[test]
    fn a_quarantine_that_is_a_symlink_receives_nothing() {
        let (_d, w, state, policy) = setup();
        let base = Baseline::take(std::slice::from_ref(&w), &[], Some(&w), &policy);
        std::fs::write(w.join(".envrc"), "evil").unwrap();
        let elsewhere = state.join("elsewhere");
        std::fs::create_dir_all(&elsewhere).unwrap();
        let planted = state.join("quarantine");
        std::os::unix::fs::symlink(&elsewhere, &planted).unwrap();
        let q = base.quarantine_new(&policy, &planted);
        assert_eq!(q.quarantined.len(), 1);
        assert_eq!(q.quarantined[0].moved_to, None);
        assert!(!w.join(".envrc").exists());
        // Nothing but the (empty) stamp directory create_dir_all made through the link.
        let inside: Vec<_> = walkdir(&elsewhere);
        assert!(inside.iter().all(|p| p.is_dir()), "{inside:?}");
    }

    fn walkdir(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            out.push(e.path());
            if e.path().is_dir() {
                out.extend(walkdir(&e.path()));
            }
        }
        out
    }

    #[test]
    fn the_state_dir_is_not_scanned() {
        let (_d, w, _state, policy) = setup();
        let state = w.join(".tgstate");
        std::fs::create_dir_all(&state).unwrap();
        let base = Baseline::take(
            std::slice::from_ref(&w),
            std::slice::from_ref(&state),
            Some(&w),
            &policy,
        );
        std::fs::write(state.join(".env"), "turngate's own").unwrap();
        let q = base.quarantine_new(&policy, &state.join("quarantine"));
        assert!(q.quarantined.is_empty(), "{:?}", q.quarantined);
        assert!(state.join(".env").exists());
    }
}
