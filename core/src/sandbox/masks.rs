//! The masks of the mount view: which paths inside the turn's roots the policy denies reading
//! (hidden) or writing (bound read-only), found by walking the roots once per spawn.
//!
//! A pure function of the roots on disk and the compiled policy; it never touches the kernel.
//! The walk is breadth-first and does not follow symlinks, and it fails closed:
//! - a directory it cannot list is hidden (what it holds cannot be judged);
//! - a symlink whose name is denied hides its target inside the roots, and every other name
//!   (hard link) of a denied file is hidden too, so an alias planted before the secret was
//!   written does not read it;
//! - names that are not UTF-8 are judged by their lossy form, and their directories walked;
//! - well-known secret and git paths at the top of each root are judged first, so flooding a
//!   root with entries cannot push them past [`MAX_ENTRIES`]; past the cap the spec says so and
//!   the report names the degradation.

use std::collections::{HashMap, HashSet, VecDeque};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::action::{ActionKind, Effect};
use crate::policy::CompiledPolicy;
use crate::protocol::{FsAccess, FsProvenance, SandboxMode, TurnSandboxSnapshot};
use crate::verdict::Reason;

use super::spec::{Mask, MaskKind};

/// Entries visited per spawn at most (all roots together).
pub const MAX_ENTRIES: usize = 50_000;

/// File names always hidden inside the HOME configuration the sandbox may read.
pub const HOME_CONFIG_SECRETS: &[&str] = &[
    "credentials",
    "credentials.toml",
    ".git-credentials",
    "hosts.yml",
];

/// Paths judged first in every root, before the walk (relative to the root).
const FIRST: &[&str] = &[
    ".env",
    ".envrc",
    ".netrc",
    ".npmrc",
    ".pypirc",
    "credentials.json",
    ".aws",
    ".aws/credentials",
    ".ssh",
    ".git",
    ".git/hooks",
    ".git/config",
    ".git/config.worktree",
    ".git/commondir",
    ".git/modules",
];

/// The masks for `sandbox` under `policy`, and whether the walk stopped early.
pub fn policy_masks(
    sandbox: &TurnSandboxSnapshot,
    policy: &CompiledPolicy,
    home_config: &[PathBuf],
) -> (Vec<Mask>, bool) {
    if sandbox.mode == SandboxMode::Unrestricted {
        return (Vec::new(), false);
    }
    let workspace = sandbox
        .filesystem
        .entries
        .iter()
        .find(|e| e.provenance == FsProvenance::Workspace)
        .and_then(|e| std::fs::canonicalize(&e.path).ok());
    let roots: Vec<(PathBuf, bool, bool)> = sandbox
        .filesystem
        .entries
        .iter()
        .filter_map(|entry| {
            let root = std::fs::canonicalize(&entry.path).ok()?;
            let writable = entry.access == FsAccess::Write && sandbox.mode != SandboxMode::ReadOnly;
            Some((root, writable, false))
        })
        .chain(
            home_config
                .iter()
                .filter_map(|d| std::fs::canonicalize(d).ok())
                .map(|d| (d, false, true)),
        )
        .collect();
    let mut walk = Walk {
        policy,
        workspace,
        roots: roots.iter().map(|(r, _, _)| r.clone()).collect(),
        seen: HashSet::new(),
        masks: Vec::new(),
        linked: HashMap::new(),
        denied_inodes: HashSet::new(),
        visited: 0,
        truncated: false,
    };
    for (root, writable, home) in &roots {
        walk.first(root, *writable, *home);
    }
    for (root, writable, home) in &roots {
        walk.root(root, *writable, *home);
    }
    walk.aliases();
    (walk.masks, walk.truncated)
}

struct Walk<'a> {
    policy: &'a CompiledPolicy,
    workspace: Option<PathBuf>,
    roots: Vec<PathBuf>,
    seen: HashSet<PathBuf>,
    masks: Vec<Mask>,
    /// Regular files with more than one name: (dev, ino) -> their paths.
    linked: HashMap<(u64, u64), Vec<PathBuf>>,
    /// Inodes of denied files with more than one name.
    denied_inodes: HashSet<(u64, u64)>,
    visited: usize,
    truncated: bool,
}

impl Walk<'_> {
    /// Judge the well-known paths of `root` before anything else.
    fn first(&mut self, root: &Path, writable: bool, home_config: bool) {
        for rel in FIRST {
            let path = root.join(rel);
            if let Ok(meta) = std::fs::symlink_metadata(&path) {
                self.judge(&path, &meta, writable, home_config);
            }
        }
    }

    fn root(&mut self, root: &Path, writable: bool, home_config: bool) {
        let Ok(meta) = std::fs::symlink_metadata(root) else {
            return;
        };
        if !meta.is_dir() {
            if home_config {
                self.judge(root, &meta, false, true);
            }
            return;
        }
        let mut queue = VecDeque::from([root.to_path_buf()]);
        while let Some(dir) = queue.pop_front() {
            let entries = match std::fs::read_dir(&dir) {
                Ok(entries) => entries,
                Err(_) => {
                    // What cannot be listed cannot be judged: hide it.
                    if let Ok(meta) = std::fs::symlink_metadata(&dir) {
                        self.push(&dir, MaskKind::Hidden, &meta);
                    }
                    continue;
                }
            };
            for entry in entries {
                if self.visited >= MAX_ENTRIES {
                    self.truncated = true;
                    return;
                }
                self.visited += 1;
                let Ok(entry) = entry else {
                    continue;
                };
                let path = entry.path();
                let Ok(meta) = std::fs::symlink_metadata(&path) else {
                    continue;
                };
                if self.judge(&path, &meta, writable, home_config) && meta.is_dir() {
                    queue.push_back(path);
                }
            }
        }
    }

    /// Record the masks `path` needs; whether to descend into it.
    fn judge(
        &mut self,
        path: &Path,
        meta: &std::fs::Metadata,
        writable: bool,
        home_config: bool,
    ) -> bool {
        let abs = path.to_string_lossy();
        let rel = self
            .workspace
            .as_deref()
            .and_then(|ws| path.strip_prefix(ws).ok())
            .map(|r| r.to_string_lossy())
            .filter(|r| !r.is_empty());
        let spellings: Vec<&str> = rel.as_deref().into_iter().chain([abs.as_ref()]).collect();
        let secret_name = home_config
            && path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| HOME_CONFIG_SECRETS.contains(&n));
        let read = self
            .policy
            .explain_path(ActionKind::FileRead, &spellings, None);
        let denied = secret_name || read.effect == Effect::Deny;
        let git_name = path.file_name().is_some_and(|n| n == ".git");
        if meta.file_type().is_symlink() {
            if writable && git_name {
                self.symlinked_git_dir(path);
            }
            if denied {
                // An alias under a denied name: hide what it points to, inside the roots.
                if let Ok(target) = std::fs::canonicalize(path)
                    && self.roots.iter().any(|r| target.starts_with(r))
                    && let Ok(tmeta) = std::fs::symlink_metadata(&target)
                {
                    self.push(&target, MaskKind::Hidden, &tmeta);
                    self.note_denied(&tmeta);
                }
            }
            return false;
        }
        if meta.is_file() && meta.nlink() > 1 {
            self.linked
                .entry((meta.dev(), meta.ino()))
                .or_default()
                .push(path.to_path_buf());
        }
        if denied {
            self.push(path, MaskKind::Hidden, meta);
            self.note_denied(meta);
            return false;
        }
        if writable {
            let write = self
                .policy
                .explain_path(ActionKind::FileWrite, &spellings, None);
            let protected = matches!(write.reason, Reason::DenyRule | Reason::AskRule);
            // The `.git` directory stays writable (commits write it); what in it runs code
            // is masked by name. A `.git` *file* (a worktree's or a submodule's pointer)
            // is read-only whatever the policy says (red team 4 F4).
            if (protected && !(git_name && meta.is_dir())) || (git_name && meta.is_file()) {
                self.push(path, MaskKind::ReadOnly, meta);
            }
        }
        true
    }

    /// A `.git` that is a symlink (the Android `repo` layout): the repository it points to,
    /// inside the roots, gets the masks a `.git` directory here would get. The link itself
    /// can still be replaced by the command (a mount cannot sit on a symlink); see
    /// `docs/sandbox.md`, known limits.
    fn symlinked_git_dir(&mut self, link: &Path) {
        let Ok(target) = std::fs::canonicalize(link) else {
            return;
        };
        if !self.roots.iter().any(|r| target.starts_with(r)) {
            return;
        }
        for rel in ["config", "config.worktree", "commondir", "hooks"] {
            let path = target.join(rel);
            if let Ok(meta) = std::fs::symlink_metadata(&path)
                && !meta.file_type().is_symlink()
            {
                self.push(&path, MaskKind::ReadOnly, &meta);
            }
        }
    }

    fn note_denied(&mut self, meta: &std::fs::Metadata) {
        if meta.is_file() && meta.nlink() > 1 {
            self.denied_inodes.insert((meta.dev(), meta.ino()));
        }
    }

    /// Hide every other name of a denied file.
    fn aliases(&mut self) {
        let names: Vec<PathBuf> = self
            .denied_inodes
            .iter()
            .filter_map(|inode| self.linked.get(inode))
            .flatten()
            .cloned()
            .collect();
        for path in names {
            if let Ok(meta) = std::fs::symlink_metadata(&path) {
                self.push(&path, MaskKind::Hidden, &meta);
            }
        }
    }

    fn push(&mut self, path: &Path, kind: MaskKind, meta: &std::fs::Metadata) {
        if self.seen.insert(path.to_path_buf()) {
            self.masks.push(Mask {
                path: path.to_path_buf(),
                kind,
                dir: meta.is_dir(),
                dev: meta.dev(),
                ino: meta.ino(),
            });
        }
    }
}
