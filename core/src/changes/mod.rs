//! Reviewable writes (DESIGN §18, Linux): a command runs with its writable roots as overlays,
//! its writes land in upper directories in the state dir, and the result is a **change set**
//! a person applies or discards later, from any process.
//!
//! This module records what changed (from the overlay's upper directories), persists it, and
//! moves exactly those changes into the workspace on `apply` — re-checked against the turn's
//! file policy, refused on any conflict with the workspace, never through a symlink and never
//! outside a root. It never decides whether a command may run (the gate does) and never
//! mounts anything (the namespace layer does, from [`ReviewLayer`]s this module hands out).
//!
//! Layout of one change set, `<state>/changes/<id>/`:
//! - `manifest.json`: the [`ChangeSet`] (status, changes, the workspace's state of every
//!   changed path at the end of the run, a digest of the upper directories);
//! - `snapshot.json`: the turn's snapshot, whose file policy `apply` re-checks against;
//! - `upper/<n>`, `work/<n>`: the overlay of root `n` (removed on apply and discard);
//! - `lock`: taken (`flock`) by apply and discard, so two processes cannot both proceed.
//!
//! Off Linux the types and `list`/`get` compile and work, but `begin`, `apply` and `discard`
//! refuse with [`ChangeError::Unavailable`]: the run, the scan of the upper directories and
//! the descriptor-based apply need overlayfs, `openat2` and `renameat2` (ADR 0021).

#[cfg(target_os = "linux")]
mod apply;
#[cfg(target_os = "linux")]
mod fsx;
#[cfg(target_os = "linux")]
mod scan;

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::audit::AuditStore;
#[cfg(target_os = "linux")]
use crate::audit::{AuditEventKind, TurnPermissionAuditEvent};
use crate::protocol::TurnExecutionSecuritySnapshot;
use crate::sandbox::ReviewLayer;

/// How to apply.
#[derive(Debug, Clone, Default)]
pub struct ApplyOptions {
    /// Apply paths the file policy would ask about (the person applying is the one who
    /// approves them). Denied paths are refused regardless.
    pub confirm_asks: bool,
    /// Who applies (recorded with the change set and in the audit row).
    pub by: Option<String>,
}

/// The mode apply gives a path the command set to `mode`: without setuid, setgid, the sticky
/// bit and write for others (apply may run as a more privileged user than the command did, and
/// must not leave a world-writable file or directory in the workspace). The change set keeps
/// the mode the command asked for.
pub fn applied_mode(mode: u32) -> u32 {
    mode & 0o0775
}

/// Lower-case hex of `bytes`.
#[cfg(target_os = "linux")]
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Why reviewable writes are refused on this platform (every platform but Linux).
#[cfg(not(target_os = "linux"))]
fn unavailable_here() -> ChangeError {
    ChangeError::Unavailable(format!(
        "reviewable writes need overlayfs in a user namespace (Linux); this is {}",
        std::env::consts::OS
    ))
}

/// What happened to one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// The path did not exist and now does.
    Added,
    /// A file's content (and maybe its mode) or a symlink's target changed.
    Modified,
    /// The path (a file, a symlink, or a directory with everything in it) was removed.
    Deleted,
    /// Only the permission bits changed.
    ModeChanged,
    /// Something apply will not create (a fifo, a socket, a device node, an overlay redirect):
    /// the whole change set is refused while it holds one.
    Unsupported,
}

impl ChangeKind {
    /// The snake_case wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Added => "added",
            ChangeKind::Modified => "modified",
            ChangeKind::Deleted => "deleted",
            ChangeKind::ModeChanged => "mode_changed",
            ChangeKind::Unsupported => "unsupported",
        }
    }
}

/// What kind of filesystem entry a change is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EntryType {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
    /// A fifo, socket or device node.
    Other,
}

/// Where a change set stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChangeSetStatus {
    /// Recorded, waiting for apply or discard.
    Pending,
    /// Applied to the workspace (once; a second apply is refused).
    Applied,
    /// Dropped; the workspace was never touched.
    Discarded,
}

impl ChangeSetStatus {
    /// The snake_case wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            ChangeSetStatus::Pending => "pending",
            ChangeSetStatus::Applied => "applied",
            ChangeSetStatus::Discarded => "discarded",
        }
    }
}

/// The workspace's state of one path, recorded at the end of the run and compared at apply:
/// any difference is a conflict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum PathState {
    /// Nothing at the path.
    Absent,
    /// A regular file.
    File {
        /// Device.
        dev: u64,
        /// Inode.
        ino: u64,
        /// Size in bytes.
        size: u64,
        /// Permission bits.
        mode: u32,
        /// Modification time, nanoseconds since the epoch.
        mtime_ns: i64,
        /// Status change time, nanoseconds since the epoch (no program can set it back).
        ctime_ns: i64,
        /// SHA-256 of the content, hex.
        sha256: String,
    },
    /// A directory. `tree` digests everything below it (names, types, inodes, sizes, times)
    /// when the change is about the whole tree (a deletion).
    Dir {
        /// Permission bits.
        mode: u32,
        /// The subtree's digest, hex, for a deleted directory.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tree: Option<String>,
    },
    /// A symbolic link.
    Symlink {
        /// Its target, as stored.
        target: String,
    },
    /// A fifo, socket or device node.
    Other {
        /// The full `st_mode`.
        mode: u32,
    },
}

/// One change in a change set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Change {
    /// The writable root the path is in (absolute, canonical).
    pub root: PathBuf,
    /// The path relative to `root`, `/`-separated.
    pub path: String,
    /// What happened.
    pub kind: ChangeKind,
    /// What the path is after the change (for a deletion: what was deleted).
    pub entry: EntryType,
    /// Permission bits after the change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<u32>,
    /// Permission bits before, when the path existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_mode: Option<u32>,
    /// A file's size after the change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// A file's size before, when it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_size: Option<u64>,
    /// SHA-256 of a file's new content, hex (apply checks the upper file against it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// A symlink's new target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_target: Option<String>,
    /// True when either side of a file change is not text (no diff; sizes only).
    #[serde(default)]
    pub binary: bool,
    /// A unified diff for a text file (`a/PATH` → `b/PATH`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// Anything a reviewer should know (why a change is unsupported, a hard link copied).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The workspace's state of the path at the end of the run.
    pub before: PathState,
}

/// One reviewed root: the workspace directory and the name of its overlay layer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReviewRoot {
    /// The writable root (absolute, canonical).
    pub path: PathBuf,
    /// The layer's directory name under `upper/` and `work/`.
    pub layer: String,
}

/// The changes one reviewed command made, waiting for a person.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChangeSet {
    /// The id (`cs-...`).
    pub id: String,
    /// The turn the command ran in.
    pub turn_id: String,
    /// The command line.
    pub command: String,
    /// When the run ended (UTC, RFC 3339).
    pub created_at: String,
    /// Pending, applied or discarded.
    pub status: ChangeSetStatus,
    /// The reviewed roots.
    pub roots: Vec<ReviewRoot>,
    /// The changes, sorted by root and path.
    pub changes: Vec<Change>,
    /// The command's exit code, when it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// SHA-256 over every entry of the upper directories at the end of the run: an upper
    /// directory changed since (an entry added, a file rewritten) refuses the apply.
    pub upper_digest: String,
    /// When it was applied or discarded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_at: Option<String>,
    /// Who applied or discarded it (`person:NAME`, or the caller's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_by: Option<String>,
}

impl ChangeSet {
    /// "2 added, 1 modified, 1 deleted" (kinds with no change are left out).
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        for kind in [
            ChangeKind::Added,
            ChangeKind::Modified,
            ChangeKind::Deleted,
            ChangeKind::ModeChanged,
            ChangeKind::Unsupported,
        ] {
            let n = self.changes.iter().filter(|c| c.kind == kind).count();
            if n > 0 {
                parts.push(format!("{n} {}", kind.as_str().replace('_', " ")));
            }
        }
        if parts.is_empty() {
            "no changes".to_owned()
        } else {
            parts.join(", ")
        }
    }
}

/// One path the policy refuses to let apply write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RefusedPath {
    /// The absolute path.
    pub path: String,
    /// `deny` or `ask`.
    pub effect: String,
    /// Why, in words (the rule and layer).
    pub reason: String,
}

/// Why a change set operation did not happen. Nothing was changed in the workspace.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChangeError {
    /// Reviewable writes are not available here (no overlay in a user namespace, not Linux).
    #[error("reviewable writes are unavailable: {0}; the command was not run")]
    Unavailable(String),
    /// No change set with this id.
    #[error("no change set `{0}`")]
    NotFound(String),
    /// The id is not a change set id.
    #[error("`{0}` is not a change set id (cs-...)")]
    BadId(String),
    /// The change set was already applied or discarded.
    #[error("change set {id} is {status}, not pending; nothing was changed")]
    NotPending {
        /// The id.
        id: String,
        /// Its status.
        status: &'static str,
    },
    /// Another process is applying or discarding it.
    #[error("change set {0} is being applied or discarded by another process")]
    Busy(String),
    /// The upper directories, the manifest or the snapshot changed since the run.
    #[error(
        "change set {id} was tampered with since the run (what differs: {}); \
         nothing was applied, discard it",
        paths.join(", ")
    )]
    Tampered {
        /// The id.
        id: String,
        /// What differs.
        paths: Vec<String>,
    },
    /// The file policy refuses some of the paths.
    #[error(
        "change set {id}: the file policy refuses writing {}; nothing was applied",
        paths.iter().map(|p| format!("{} ({}: {})", p.path, p.effect, p.reason)).collect::<Vec<_>>().join(", ")
    )]
    PolicyRefused {
        /// The id.
        id: String,
        /// The refused paths.
        paths: Vec<RefusedPath>,
    },
    /// Paths changed in the workspace since the run.
    #[error(
        "change set {id} conflicts with the workspace: changed since the run: {}; nothing was \
         applied",
        paths.join(", ")
    )]
    Conflicts {
        /// The id.
        id: String,
        /// The conflicting paths (absolute).
        paths: Vec<String>,
    },
    /// The change set holds entries apply does not create.
    #[error("change set {id} holds entries apply will not create: {}; nothing was applied", paths.join(", "))]
    Unsupported {
        /// The id.
        id: String,
        /// The paths.
        paths: Vec<String>,
    },
    /// A file or directory of the change set or the workspace could not be read or written.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A stored manifest could not be read.
    #[error("change set {id}: corrupt {what}: {message}")]
    Corrupt {
        /// The id.
        id: String,
        /// The file.
        what: String,
        /// What was wrong.
        message: String,
    },
    /// The apply or discard could not be recorded in the audit log.
    #[error("audit: {0}")]
    Audit(#[from] crate::audit::AuditError),
}

impl ChangeError {
    /// A machine-readable name for the error (the facade's `code`).
    pub fn code(&self) -> &'static str {
        match self {
            ChangeError::Unavailable(_) => "unavailable",
            ChangeError::NotFound(_) => "not_found",
            ChangeError::BadId(_) => "bad_id",
            ChangeError::NotPending { .. } => "not_pending",
            ChangeError::Busy(_) => "busy",
            ChangeError::Tampered { .. } => "tampered",
            ChangeError::PolicyRefused { .. } => "policy_refused",
            ChangeError::Conflicts { .. } => "conflicts",
            ChangeError::Unsupported { .. } => "unsupported",
            ChangeError::Io { .. } => "io",
            ChangeError::Corrupt { .. } => "corrupt",
            ChangeError::Audit(_) => "audit",
        }
    }

    /// The paths the error is about (conflicts, refusals, tampering), absolute where known.
    pub fn paths(&self) -> Vec<String> {
        match self {
            ChangeError::Tampered { paths, .. }
            | ChangeError::Conflicts { paths, .. }
            | ChangeError::Unsupported { paths, .. } => paths.clone(),
            ChangeError::PolicyRefused { paths, .. } => {
                paths.iter().map(|p| p.path.clone()).collect()
            }
            _ => Vec::new(),
        }
    }

    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> ChangeError {
        ChangeError::Io {
            what: what.into(),
            source,
        }
    }
}

/// The change sets of one state dir: `<state>/changes/`.
#[derive(Debug, Clone)]
pub struct ChangeStore {
    dir: PathBuf,
}

/// A review in progress: the overlay layers handed to the sandbox, and where they live.
#[derive(Debug)]
pub struct Review {
    id: String,
    dir: PathBuf,
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    roots: Vec<ReviewRoot>,
    layers: Vec<ReviewLayer>,
}

fn valid_id(id: &str) -> bool {
    id.len() <= 64
        && id.starts_with("cs-")
        && id[3..]
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && id.len() > 3
}

#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn new_id() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let mut random = [0u8; 4];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        let _ = std::io::Read::read_exact(&mut f, &mut random);
    }
    format!(
        "cs-{now}-{}-{:08x}",
        std::process::id(),
        u32::from_ne_bytes(random)
    )
}

/// Write `bytes` to `path` atomically (a temporary file in the same directory, fsync,
/// rename), mode 0600.
#[cfg(target_os = "linux")]
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ChangeError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .map_err(|e| ChangeError::io(format!("write {}", tmp.display()), e))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|e| ChangeError::io(format!("write {}", tmp.display()), e))?;
    std::fs::rename(&tmp, path)
        .map_err(|e| ChangeError::io(format!("rename {}", path.display()), e))
}

impl ChangeStore {
    /// The change sets under `dir` (created on first use).
    pub fn new(dir: impl Into<PathBuf>) -> ChangeStore {
        ChangeStore { dir: dir.into() }
    }

    /// The change sets that belong with the audit store at `db`: `changes/` beside it.
    pub fn beside(db: &Path) -> ChangeStore {
        let parent = db.parent().filter(|p| !p.as_os_str().is_empty());
        ChangeStore::new(parent.unwrap_or(Path::new(".")).join("changes"))
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn set_dir(&self, id: &str) -> Result<PathBuf, ChangeError> {
        if !valid_id(id) {
            return Err(ChangeError::BadId(id.to_owned()));
        }
        Ok(self.dir.join(id))
    }

    /// Start a review of `roots` (the writable roots of the turn): probe that an overlay can
    /// be mounted here, create the change set's directory and one overlay layer per root.
    /// Refused (never unreviewed) where overlayfs in a user namespace is unavailable.
    #[cfg(target_os = "linux")]
    pub fn begin(&self, roots: &[PathBuf]) -> Result<Review, ChangeError> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(|e| ChangeError::io(format!("create {}", self.dir.display()), e))?;
        probe_cached(&self.dir).map_err(ChangeError::Unavailable)?;
        if roots.is_empty() {
            return Err(ChangeError::Unavailable(
                "the turn has no writable root to review".into(),
            ));
        }
        let id = new_id();
        let dir = self.dir.join(&id);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| ChangeError::io(format!("create {}", dir.display()), e))?;
        let mut review = Review {
            id,
            dir,
            roots: Vec::new(),
            layers: Vec::new(),
        };
        for (n, root) in roots.iter().enumerate() {
            let root = std::fs::canonicalize(root)
                .map_err(|e| ChangeError::io(format!("root {}", root.display()), e))?;
            let layer = n.to_string();
            let upper = review.dir.join("upper").join(&layer);
            let work = review.dir.join("work").join(&layer);
            for d in [&upper, &work] {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(d)
                    .map_err(|e| ChangeError::io(format!("create {}", d.display()), e))?;
            }
            review.roots.push(ReviewRoot {
                path: root.clone(),
                layer,
            });
            review.layers.push(ReviewLayer { root, upper, work });
        }
        Ok(review)
    }

    /// Start a review: refused here, reviewable writes are Linux-only. Nothing is created.
    #[cfg(not(target_os = "linux"))]
    pub fn begin(&self, _roots: &[PathBuf]) -> Result<Review, ChangeError> {
        Err(unavailable_here())
    }

    /// Every change set, oldest first.
    pub fn list(&self) -> Result<Vec<ChangeSet>, ChangeError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(ChangeError::io(format!("list {}", self.dir.display()), e)),
        };
        let mut sets = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !valid_id(&name) || !entry.path().join("manifest.json").exists() {
                continue;
            }
            sets.push(self.get(&name)?);
        }
        sets.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
        Ok(sets)
    }

    /// The change set `id`.
    pub fn get(&self, id: &str) -> Result<ChangeSet, ChangeError> {
        let dir = self.set_dir(id)?;
        let path = dir.join("manifest.json");
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ChangeError::NotFound(id.to_owned()));
            }
            Err(e) => return Err(ChangeError::io(format!("read {}", path.display()), e)),
        };
        let set: ChangeSet = serde_json::from_str(&text).map_err(|e| ChangeError::Corrupt {
            id: id.to_owned(),
            what: "manifest.json".into(),
            message: e.to_string(),
        })?;
        // Another set's manifest copied here would otherwise carry its own (valid) seal.
        if set.id != id {
            return Err(ChangeError::Corrupt {
                id: id.to_owned(),
                what: "manifest.json".into(),
                message: format!("it is the manifest of change set `{}`", set.id),
            });
        }
        Ok(set)
    }

    #[cfg(target_os = "linux")]
    fn snapshot(&self, id: &str) -> Result<TurnExecutionSecuritySnapshot, ChangeError> {
        parse_snapshot(id, &self.snapshot_bytes(id)?)
    }

    #[cfg(target_os = "linux")]
    fn snapshot_bytes(&self, id: &str) -> Result<Vec<u8>, ChangeError> {
        let path = self.set_dir(id)?.join("snapshot.json");
        std::fs::read(&path).map_err(|e| ChangeError::io(format!("read {}", path.display()), e))
    }

    /// Take the change set's lock (non-blocking) and re-read it: it must still be pending.
    #[cfg(target_os = "linux")]
    fn lock_pending(&self, id: &str) -> Result<(std::fs::File, ChangeSet), ChangeError> {
        use std::os::fd::AsRawFd;
        let dir = self.set_dir(id)?;
        let set = self.get(id)?;
        let lock = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(dir.join("lock"))
            .map_err(|e| ChangeError::io(format!("lock {id}"), e))?;
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return Err(ChangeError::Busy(id.to_owned()));
        }
        // Re-read under the lock: another process may have finished meanwhile.
        let set = if set.status == ChangeSetStatus::Pending {
            self.get(id)?
        } else {
            set
        };
        if set.status != ChangeSetStatus::Pending {
            return Err(ChangeError::NotPending {
                id: id.to_owned(),
                status: set.status.as_str(),
            });
        }
        Ok((lock, set))
    }

    #[cfg(target_os = "linux")]
    fn save(&self, set: &ChangeSet) -> Result<(), ChangeError> {
        let dir = self.set_dir(&set.id)?;
        let json = serde_json::to_vec_pretty(set).map_err(|e| ChangeError::Corrupt {
            id: set.id.clone(),
            what: "manifest.json".into(),
            message: e.to_string(),
        })?;
        write_atomic(&dir.join("manifest.json"), &json)
    }

    #[cfg(target_os = "linux")]
    fn drop_layers(&self, id: &str) -> Result<(), ChangeError> {
        let dir = self.set_dir(id)?;
        for sub in ["upper", "work"] {
            let path = dir.join(sub);
            if path.exists() {
                fsx::remove_tree(&path)
                    .map_err(|e| ChangeError::io(format!("remove {}", path.display()), e))?;
            }
        }
        Ok(())
    }

    /// Apply change set `id` to the workspace: every path re-checked against the turn's file
    /// policy, the upper directories checked against the digest taken at the end of the run,
    /// every changed path checked against its recorded workspace state (a conflict refuses
    /// the whole set and names the paths), then staged and moved in place through
    /// descriptors, never following a symlink. A failure while moving undoes what was moved.
    /// Recorded in `audit` (applied, or refused with the reason) when one is given.
    #[cfg(target_os = "linux")]
    pub fn apply(
        &self,
        id: &str,
        options: &ApplyOptions,
        audit: Option<&dyn AuditStore>,
    ) -> Result<ChangeSet, ChangeError> {
        let (lock, mut set) = self.lock_pending(id)?;
        let snapshot_bytes = self.snapshot_bytes(id)?;
        // Before anything else: the manifest and the snapshot must be the ones the run
        // recorded in the audit store (anyone who can write the state dir can edit them).
        let sealed = match audit {
            Some(audit) => verify_seal(audit, &set, &snapshot_bytes),
            None => Err(ChangeError::Tampered {
                id: set.id.clone(),
                paths: vec!["no audit store to check the change set against".to_owned()],
            }),
        };
        let dir = self.set_dir(id)?;
        if let Err(err) = sealed {
            if let (Some(audit), Ok(snapshot)) = (audit, parse_snapshot(id, &snapshot_bytes)) {
                audit.append(refused_event(&set, &snapshot, &err, options))?;
            }
            return Err(err);
        }
        let snapshot = parse_snapshot(id, &snapshot_bytes)?;
        if let Err(err) = apply::apply(&set, &dir, &snapshot, options) {
            if let Some(audit) = audit {
                audit.append(refused_event(&set, &snapshot, &err, options))?;
            }
            return Err(err);
        }
        set.status = ChangeSetStatus::Applied;
        set.resolved_at = Some(crate::audit::now_rfc3339());
        set.resolved_by = options.by.clone();
        self.save(&set)?;
        self.drop_layers(id)?;
        drop(lock);
        if let Some(audit) = audit {
            let mut event = audit_event(&set, &snapshot, AuditEventKind::ChangesApplied);
            event.decider = options.by.clone();
            audit.append(event)?;
        }
        Ok(set)
    }

    /// Discard change set `id`: its upper directories are removed; the workspace was never
    /// touched. Recorded in `audit` when one is given.
    #[cfg(target_os = "linux")]
    pub fn discard(
        &self,
        id: &str,
        by: Option<&str>,
        audit: Option<&dyn AuditStore>,
    ) -> Result<ChangeSet, ChangeError> {
        let (lock, mut set) = self.lock_pending(id)?;
        set.status = ChangeSetStatus::Discarded;
        set.resolved_at = Some(crate::audit::now_rfc3339());
        set.resolved_by = by.map(str::to_owned);
        self.save(&set)?;
        self.drop_layers(id)?;
        drop(lock);
        if let Some(audit) = audit {
            let snapshot = self.snapshot(id)?;
            let mut event = audit_event(&set, &snapshot, AuditEventKind::ChangesDiscarded);
            event.decider = set.resolved_by.clone();
            audit.append(event)?;
        }
        Ok(set)
    }

    /// Apply a change set: refused here (reviewable writes are Linux-only); nothing is read
    /// from the change set and nothing in the workspace changes.
    #[cfg(not(target_os = "linux"))]
    pub fn apply(
        &self,
        id: &str,
        _options: &ApplyOptions,
        _audit: Option<&dyn AuditStore>,
    ) -> Result<ChangeSet, ChangeError> {
        self.set_dir(id)?;
        Err(unavailable_here())
    }

    /// Discard a change set: refused here (reviewable writes are Linux-only).
    #[cfg(not(target_os = "linux"))]
    pub fn discard(
        &self,
        id: &str,
        _by: Option<&str>,
        _audit: Option<&dyn AuditStore>,
    ) -> Result<ChangeSet, ChangeError> {
        self.set_dir(id)?;
        Err(unavailable_here())
    }
}

#[cfg(target_os = "linux")]
fn parse_snapshot(id: &str, bytes: &[u8]) -> Result<TurnExecutionSecuritySnapshot, ChangeError> {
    serde_json::from_slice(bytes).map_err(|e| ChangeError::Corrupt {
        id: id.to_owned(),
        what: "snapshot.json".into(),
        message: e.to_string(),
    })
}

/// The prefix of the seal in a `changes_recorded` event's `reason`.
#[cfg(target_os = "linux")]
const SEAL_PREFIX: &str = "sealed sha256:";

/// What binds a change set to its audit row: SHA-256 over the manifest's immutable part (id,
/// turn, command, roots, changes with the workspace states, upper digest) and the stored
/// snapshot's exact bytes. Status and resolution fields are left out (they change on apply).
#[cfg(target_os = "linux")]
fn seal(set: &ChangeSet, snapshot_json: &[u8]) -> Result<String, ChangeError> {
    use sha2::Digest;
    #[derive(Serialize)]
    struct Immutable<'a> {
        id: &'a str,
        turn_id: &'a str,
        command: &'a str,
        created_at: &'a str,
        roots: &'a [ReviewRoot],
        changes: &'a [Change],
        exit_code: Option<i32>,
        upper_digest: &'a str,
    }
    let manifest = serde_json::to_vec(&Immutable {
        id: &set.id,
        turn_id: &set.turn_id,
        command: &set.command,
        created_at: &set.created_at,
        roots: &set.roots,
        changes: &set.changes,
        exit_code: set.exit_code,
        upper_digest: &set.upper_digest,
    })
    .map_err(|e| ChangeError::Corrupt {
        id: set.id.clone(),
        what: "manifest.json".into(),
        message: e.to_string(),
    })?;
    let mut digest = sha2::Sha256::default();
    for part in [manifest.as_slice(), snapshot_json] {
        digest.update((part.len() as u64).to_le_bytes());
        digest.update(part);
    }
    Ok(scan::hex(&digest.finalize()))
}

/// The change set's manifest and snapshot must be the ones its `changes_recorded` row sealed:
/// exactly one such row for the id in the turn, with an equal seal. Anything else is tampering.
#[cfg(target_os = "linux")]
fn verify_seal(
    audit: &dyn AuditStore,
    set: &ChangeSet,
    snapshot_json: &[u8],
) -> Result<(), ChangeError> {
    let tampered = |what: &str| ChangeError::Tampered {
        id: set.id.clone(),
        paths: vec![what.to_owned()],
    };
    let recorded: Vec<String> = audit
        .replay(&set.turn_id)?
        .into_iter()
        .filter(|e| {
            e.kind == AuditEventKind::ChangesRecorded
                && e.request_key.as_deref() == Some(set.id.as_str())
        })
        .map(|e| e.reason.unwrap_or_default())
        .collect();
    let [reason] = recorded.as_slice() else {
        return Err(tampered(
            "the audit store holds no single record of this change set for its turn",
        ));
    };
    let Some(sealed) = reason.strip_prefix(SEAL_PREFIX) else {
        return Err(tampered(
            "the audit store's record of this change set carries no seal",
        ));
    };
    if sealed != seal(set, snapshot_json)? {
        return Err(tampered(
            "manifest.json or snapshot.json differs from what the run recorded in the audit store",
        ));
    }
    Ok(())
}

#[cfg(target_os = "linux")]
fn refused_event(
    set: &ChangeSet,
    snapshot: &TurnExecutionSecuritySnapshot,
    err: &ChangeError,
    options: &ApplyOptions,
) -> TurnPermissionAuditEvent {
    let mut event = audit_event(set, snapshot, AuditEventKind::ChangesRefused);
    event.reason = Some(err.code().to_owned());
    event.message = Some(err.to_string());
    event.decider = options.by.clone();
    event
}

/// An audit event about change set `set`: `request_key` is its id, `target` its summary.
#[cfg(target_os = "linux")]
fn audit_event(
    set: &ChangeSet,
    snapshot: &TurnExecutionSecuritySnapshot,
    kind: AuditEventKind,
) -> TurnPermissionAuditEvent {
    let mut event = TurnPermissionAuditEvent::new(
        set.turn_id.clone(),
        kind,
        snapshot.permission_profile.mode,
        snapshot.permission_profile.source,
    );
    event.request_key = Some(set.id.clone());
    event.target = Some(format!("{} ({})", set.command, set.summary()));
    event.tool_name = Some("turngate review".to_owned());
    event
}

#[cfg(target_os = "linux")]
fn probe_cached(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    static OK: std::sync::Mutex<Vec<u64>> = std::sync::Mutex::new(Vec::new());
    let dev = std::fs::metadata(dir).map_err(|e| e.to_string())?.dev();
    if OK.lock().map(|ok| ok.contains(&dev)).unwrap_or(false) {
        return Ok(());
    }
    crate::sandbox::namespace::probe_overlay(dir)?;
    if let Ok(mut ok) = OK.lock() {
        ok.push(dev);
    }
    Ok(())
}

impl Review {
    /// The change set's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The overlay layers for [`SandboxSpec::review`](crate::sandbox::SandboxSpec::review).
    pub fn layers(&self) -> &[ReviewLayer] {
        &self.layers
    }

    /// The run ended: read the upper directories into a change set and persist it (with the
    /// snapshot `apply` will re-check against). Recorded in `audit` when one is given.
    #[cfg(target_os = "linux")]
    pub fn finish(
        self,
        turn_id: &str,
        command: &str,
        snapshot: &TurnExecutionSecuritySnapshot,
        exit_code: Option<i32>,
        audit: Option<&dyn AuditStore>,
    ) -> Result<ChangeSet, ChangeError> {
        let mut changes = Vec::new();
        let mut digest = sha2::Sha256::default();
        for layer in &self.layers {
            changes.extend(scan::scan(&layer.root, &layer.upper)?);
            scan::digest_upper(&layer.upper, &mut digest)
                .map_err(|e| ChangeError::io(format!("read {}", layer.upper.display()), e))?;
        }
        let set = ChangeSet {
            id: self.id.clone(),
            turn_id: turn_id.to_owned(),
            command: command.to_owned(),
            created_at: crate::audit::now_rfc3339(),
            status: ChangeSetStatus::Pending,
            roots: self.roots.clone(),
            changes,
            exit_code,
            upper_digest: scan::hex(&sha2::Digest::finalize(digest)),
            resolved_at: None,
            resolved_by: None,
        };
        let json = serde_json::to_vec(snapshot).map_err(|e| ChangeError::Corrupt {
            id: self.id.clone(),
            what: "snapshot.json".into(),
            message: e.to_string(),
        })?;
        write_atomic(&self.dir.join("snapshot.json"), &json)?;
        let store = ChangeStore::new(self.dir.parent().unwrap_or(Path::new(".")));
        store.save(&set)?;
        if let Some(audit) = audit {
            let mut event = audit_event(&set, snapshot, AuditEventKind::ChangesRecorded);
            event.reason = Some(format!("{SEAL_PREFIX}{}", seal(&set, &json)?));
            audit.append(event)?;
        }
        Ok(set)
    }

    /// The run ended: refused here (a [`Review`] is only made on Linux).
    #[cfg(not(target_os = "linux"))]
    pub fn finish(
        self,
        _turn_id: &str,
        _command: &str,
        _snapshot: &TurnExecutionSecuritySnapshot,
        _exit_code: Option<i32>,
        _audit: Option<&dyn AuditStore>,
    ) -> Result<ChangeSet, ChangeError> {
        Err(unavailable_here())
    }

    /// The run did not happen (the sandbox refused it): remove what `begin` created.
    pub fn abandon(self) {
        #[cfg(target_os = "linux")]
        let _ = fsx::remove_tree(&self.dir);
        #[cfg(not(target_os = "linux"))]
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_cannot_name_another_directory() {
        assert!(valid_id(&new_id()));
        for bad in [
            "",
            "cs-",
            "../cs-1",
            "cs-1/../../x",
            "cs-A",
            "cs-1.2",
            "x-1",
            "cs-1 2",
        ] {
            assert!(!valid_id(bad), "{bad}");
        }
        let store = ChangeStore::new("/nonexistent");
        assert!(matches!(store.get("../etc"), Err(ChangeError::BadId(_))));
    }

    /// Off Linux nothing of a review happens: no directory is created, apply and discard
    /// refuse with the same code as a Linux machine without overlayfs.
    #[cfg(not(target_os = "linux"))]
    #[test]
    fn review_is_refused_off_linux() {
        let dir = std::env::temp_dir().join(format!("tg-changes-{}", new_id()));
        let store = ChangeStore::new(&dir);
        let begun = store.begin(std::slice::from_ref(&dir));
        assert!(
            matches!(&begun, Err(e) if e.code() == "unavailable"),
            "{begun:?}"
        );
        assert!(!dir.exists());
        let applied = store.apply("cs-1", &ApplyOptions::default(), None);
        assert!(matches!(applied, Err(ChangeError::Unavailable(_))));
        let discarded = store.discard("cs-1", None, None);
        assert!(matches!(discarded, Err(ChangeError::Unavailable(_))));
        assert!(matches!(
            store.discard("../x", None, None),
            Err(ChangeError::BadId(_))
        ));
    }
}
