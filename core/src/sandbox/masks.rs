//! The masks of the mount view: which paths inside the turn's roots the policy denies reading
//! (hidden) or writing (bound read-only), found by walking the roots once per spawn.
//!
//! A pure function of the roots on disk and the compiled policy; it never touches the kernel.
//! The walk does not follow symlinks (a symlink's target is judged where it lies, by Landlock),
//! and stops at [`MAX_ENTRIES`]; the spec then says so and the report names the degradation.

use std::collections::HashSet;
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
    let mut walk = Walk {
        policy,
        workspace,
        seen: HashSet::new(),
        masks: Vec::new(),
        visited: 0,
        truncated: false,
    };
    for entry in &sandbox.filesystem.entries {
        let Ok(root) = std::fs::canonicalize(&entry.path) else {
            continue;
        };
        let writable = entry.access == FsAccess::Write && sandbox.mode != SandboxMode::ReadOnly;
        walk.root(&root, writable, false);
    }
    for dir in home_config {
        if let Ok(root) = std::fs::canonicalize(dir) {
            walk.root(&root, false, true);
        }
    }
    (walk.masks, walk.truncated)
}

struct Walk<'a> {
    policy: &'a CompiledPolicy,
    workspace: Option<PathBuf>,
    seen: HashSet<PathBuf>,
    masks: Vec<Mask>,
    visited: usize,
    truncated: bool,
}

impl Walk<'_> {
    fn root(&mut self, root: &Path, writable: bool, home_config: bool) {
        let Ok(meta) = std::fs::symlink_metadata(root) else {
            return;
        };
        if !meta.is_dir() {
            if home_config {
                self.judge(root, false, false, true);
            }
            return;
        }
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                if self.visited >= MAX_ENTRIES {
                    self.truncated = true;
                    return;
                }
                self.visited += 1;
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                if kind.is_symlink() {
                    continue;
                }
                let path = entry.path();
                let is_dir = kind.is_dir();
                if self.judge(&path, is_dir, writable, home_config) && is_dir {
                    stack.push(path);
                }
            }
        }
    }

    /// Record the masks `path` needs; whether to descend into it.
    fn judge(&mut self, path: &Path, dir: bool, writable: bool, home_config: bool) -> bool {
        let Some(abs) = path.to_str() else {
            // Not UTF-8: no rule can name it; its contents are judged by Landlock.
            return false;
        };
        let rel = self
            .workspace
            .as_deref()
            .and_then(|ws| path.strip_prefix(ws).ok())
            .and_then(Path::to_str)
            .filter(|r| !r.is_empty());
        let spellings: Vec<&str> = rel.into_iter().chain(std::iter::once(abs)).collect();
        let secret_name = home_config
            && path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| HOME_CONFIG_SECRETS.contains(&n));
        let read = self
            .policy
            .explain_path(ActionKind::FileRead, &spellings, None);
        if secret_name || read.effect == Effect::Deny {
            self.push(path, MaskKind::Hidden, dir);
            return false;
        }
        if writable {
            let write = self
                .policy
                .explain_path(ActionKind::FileWrite, &spellings, None);
            if matches!(write.reason, Reason::DenyRule | Reason::AskRule) {
                self.push(path, MaskKind::ReadOnly, dir);
            }
        }
        true
    }

    fn push(&mut self, path: &Path, kind: MaskKind, dir: bool) {
        if self.seen.insert(path.to_path_buf()) {
            self.masks.push(Mask {
                path: path.to_path_buf(),
                kind,
                dir,
            });
        }
    }
}
