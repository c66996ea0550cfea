//! Apply a change set: check everything first (unsupported entries, tampering, the file
//! policy, conflicts), stage every new file and link in a directory inside the root, then
//! move the changes in place through descriptors with an undo log, so a fault while moving
//! puts back what was already moved.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::scan::{self, hex, state_at};
use super::{
    ApplyOptions, Change, ChangeError, ChangeKind, ChangeSet, EntryType, PathState, RefusedPath,
    applied_mode, fsx,
};
use crate::action::{ActionKind, Effect};
use crate::gate::{ToolInvocation, evaluate};
use crate::protocol::TurnExecutionSecuritySnapshot;

const RENAME_NOREPLACE: u32 = 1;
const RENAME_EXCHANGE: u32 = 2;

fn io(what: impl Into<String>, e: std::io::Error) -> ChangeError {
    ChangeError::io(what, e)
}

/// The file policy's verdict on writing every path the change set touches (a deleted
/// directory: everything in it too).
fn policy_check(
    set: &ChangeSet,
    snapshot: &TurnExecutionSecuritySnapshot,
    options: &ApplyOptions,
) -> Result<(), ChangeError> {
    let policy = snapshot
        .permission_profile
        .effective_policy
        .compile()
        .map_err(|e| ChangeError::Corrupt {
            id: set.id.clone(),
            what: "snapshot.json (policy)".into(),
            message: e.to_string(),
        })?;
    let mut paths = Vec::new();
    for change in &set.changes {
        let abs = change.root.join(&change.path);
        paths.push(abs.clone());
        if change.kind == ChangeKind::Deleted && change.entry == EntryType::Dir {
            let mut stack = vec![abs];
            while let Some(dir) = stack.pop() {
                let Ok(entries) = std::fs::read_dir(&dir) else {
                    continue;
                };
                for entry in entries.flatten() {
                    let path = entry.path();
                    if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                        stack.push(path.clone());
                    }
                    paths.push(path);
                }
            }
        }
    }
    let mut refused = Vec::new();
    for path in paths {
        let target = path.to_string_lossy().into_owned();
        let inv = ToolInvocation::new(ActionKind::FileWrite, &target).with_tool("turngate review");
        let verdict = evaluate(snapshot, &policy, &inv).verdict;
        let refuse = match verdict.effect {
            Effect::Deny => true,
            Effect::Ask => !options.confirm_asks,
            Effect::Allow => false,
        };
        if refuse {
            let rule = verdict.rule.as_ref().map_or_else(
                || verdict.reason.as_str().to_owned(),
                |r| format!("{} {} `{}`", r.kind, r.effect, r.pattern),
            );
            refused.push(RefusedPath {
                path: target,
                effect: verdict.effect.to_string(),
                reason: format!("{rule} in layer {}", verdict.layer),
            });
        }
    }
    if refused.is_empty() {
        Ok(())
    } else {
        Err(ChangeError::PolicyRefused {
            id: set.id.clone(),
            paths: refused,
        })
    }
}

/// The upper directories must be what they were at the end of the run.
fn tamper_check(set: &ChangeSet, dir: &Path) -> Result<(), ChangeError> {
    let mut digest = Sha256::default();
    for root in &set.roots {
        let upper = dir.join("upper").join(&root.layer);
        scan::digest_upper(&upper, &mut digest)
            .map_err(|e| io(format!("read {}", upper.display()), e))?;
    }
    if hex(&digest.finalize()) == set.upper_digest {
        return Ok(());
    }
    // Name what differs, as far as a fresh scan can tell.
    let key = |c: &Change| {
        (
            c.root.join(&c.path),
            c.kind,
            c.sha256.clone(),
            c.link_target.clone(),
            c.mode,
        )
    };
    let recorded: HashSet<_> = set.changes.iter().map(key).collect();
    let mut paths = Vec::new();
    for root in &set.roots {
        let upper = dir.join("upper").join(&root.layer);
        if let Ok(now) = scan::scan(&root.path, &upper) {
            for c in &now {
                if !recorded.contains(&key(c)) {
                    paths.push(c.root.join(&c.path).display().to_string());
                }
            }
        }
    }
    if paths.is_empty() {
        paths.push("the upper directory's digest".into());
    }
    Err(ChangeError::Tampered {
        id: set.id.clone(),
        paths,
    })
}

/// Whether the workspace's state now is the state recorded at the end of the run.
fn same_state(before: &PathState, now: &PathState) -> bool {
    before == now
}

fn parent_of(rel: &Path) -> &Path {
    rel.parent().unwrap_or(Path::new(""))
}

fn name_of(rel: &Path) -> &Path {
    rel.file_name().map(Path::new).unwrap_or(Path::new("."))
}

/// Every path whose workspace state differs from the one recorded at the end of the run.
fn conflicts(root: &OwnedFd, root_path: &Path, changes: &[&Change]) -> Vec<String> {
    let added_dirs: HashSet<PathBuf> = changes
        .iter()
        .filter(|c| c.kind == ChangeKind::Added && c.entry == EntryType::Dir)
        .map(|c| scan::rel(c))
        .collect();
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for change in changes {
        let rel = scan::rel(change);
        let abs = root_path.join(&rel).display().to_string();
        let deep = matches!(change.before, PathState::Dir { tree: Some(_), .. });
        // A path deleted and re-added in the set was recorded once, before the deletion.
        if change.kind == ChangeKind::Added && change.before == PathState::Absent {
            let deleted_here = changes
                .iter()
                .any(|c| c.kind == ChangeKind::Deleted && c.path == change.path);
            let parent = parent_of(&rel);
            let parent_added = added_dirs.contains(parent)
                || changes
                    .iter()
                    .any(|c| c.kind == ChangeKind::Deleted && parent.starts_with(scan::rel(c)));
            if deleted_here {
                continue;
            }
            if parent_added {
                continue;
            }
            if !parent.as_os_str().is_empty() {
                match state_at(root, parent, false, 0) {
                    Ok((PathState::Dir { .. }, _)) => {}
                    _ => {
                        if seen.insert(abs.clone()) {
                            out.push(abs);
                        }
                        continue;
                    }
                }
            }
        }
        let ok = match state_at(root, &rel, deep, 0) {
            Ok((now, _)) => same_state(&change.before, &now),
            Err(_) => false,
        };
        if !ok && seen.insert(abs.clone()) {
            out.push(abs);
        }
    }
    out
}

/// One step already taken, and how to take it back.
enum Undo {
    /// Move `staging/name` back to `parent/entry`.
    Restore {
        parent: PathBuf,
        name: PathBuf,
        staged: String,
    },
    /// Remove the directory `rel`.
    Rmdir { rel: PathBuf },
    /// Move `rel` back to `staging/staged`.
    Unplace { rel: PathBuf, staged: String },
    /// Exchange `rel` and `staging/staged` again.
    Exchange { rel: PathBuf, staged: String },
    /// Set `rel`'s mode back.
    Chmod { rel: PathBuf, mode: u32 },
}

struct Applier<'a> {
    root: OwnedFd,
    root_path: &'a Path,
    staging: OwnedFd,
    staging_name: PathBuf,
    undo: Vec<Undo>,
}

impl Applier<'_> {
    fn parent(&self, rel: &Path) -> std::io::Result<OwnedFd> {
        fsx::open_beneath(
            &self.root,
            parent_of(rel),
            libc::O_PATH | libc::O_DIRECTORY,
            0,
        )
    }

    fn abs(&self, rel: &Path) -> String {
        self.root_path.join(rel).display().to_string()
    }

    fn rollback(&mut self) {
        while let Some(step) = self.undo.pop() {
            let _ = match step {
                Undo::Restore {
                    parent,
                    name,
                    staged,
                } => self.parent(&parent.join(&name)).and_then(|p| {
                    fsx::rename_at(
                        &self.staging,
                        Path::new(&staged),
                        &p,
                        &name,
                        RENAME_NOREPLACE,
                    )
                }),
                Undo::Rmdir { rel } => self
                    .parent(&rel)
                    .and_then(|p| fsx::unlink_at(&p, name_of(&rel), libc::AT_REMOVEDIR)),
                Undo::Unplace { rel, staged } => self.parent(&rel).and_then(|p| {
                    fsx::rename_at(
                        &p,
                        name_of(&rel),
                        &self.staging,
                        Path::new(&staged),
                        RENAME_NOREPLACE,
                    )
                }),
                Undo::Exchange { rel, staged } => self.parent(&rel).and_then(|p| {
                    fsx::rename_at(
                        &self.staging,
                        Path::new(&staged),
                        &p,
                        name_of(&rel),
                        RENAME_EXCHANGE,
                    )
                }),
                Undo::Chmod { rel, mode } => fsx::open_beneath(&self.root, &rel, libc::O_PATH, 0)
                    .and_then(|fd| fsx::chmod_fd(&fd, mode)),
            };
        }
    }
}

fn safe_mode(mode: u32) -> u32 {
    applied_mode(mode)
}

/// Copy the upper file `rel` into `staging/staged`, checking its content against `sha256`.
fn stage_file(
    upper: &OwnedFd,
    staging: &OwnedFd,
    change: &Change,
    staged: &str,
) -> Result<(), ChangeError> {
    let rel = scan::rel(change);
    let src = fsx::open_beneath(upper, &rel, libc::O_RDONLY, 0)
        .map_err(|e| io(format!("open {} in the change set", change.path), e))?;
    let st = fsx::stat_fd(&src).map_err(|e| io(format!("stat {}", change.path), e))?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(ChangeError::Tampered {
            id: String::new(),
            paths: vec![change.path.clone()],
        });
    }
    let dst = fsx::open_beneath(
        staging,
        Path::new(staged),
        libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
        0o600,
    )
    .map_err(|e| io(format!("stage {}", change.path), e))?;
    let mut src = std::fs::File::from(src);
    let mut dst = std::fs::File::from(dst);
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = src
            .read(&mut buf)
            .map_err(|e| io(format!("read {}", change.path), e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        dst.write_all(&buf[..n])
            .map_err(|e| io(format!("stage {}", change.path), e))?;
    }
    if Some(hex(&hasher.finalize())) != change.sha256 {
        return Err(ChangeError::Tampered {
            id: String::new(),
            paths: vec![change.path.clone()],
        });
    }
    use std::os::unix::fs::PermissionsExt;
    dst.set_permissions(std::fs::Permissions::from_mode(safe_mode(
        change.mode.unwrap_or(0o644),
    )))
    .map_err(|e| io(format!("stage {}", change.path), e))
}

/// Apply `set` (stored in `dir`) under `snapshot`'s file policy.
pub(crate) fn apply(
    set: &ChangeSet,
    dir: &Path,
    snapshot: &TurnExecutionSecuritySnapshot,
    options: &ApplyOptions,
) -> Result<(), ChangeError> {
    let unsupported: Vec<String> = set
        .changes
        .iter()
        .filter(|c| c.kind == ChangeKind::Unsupported)
        .map(|c| {
            let what = c.note.as_deref().unwrap_or("unsupported");
            format!("{} ({what})", c.root.join(&c.path).display())
        })
        .collect();
    if !unsupported.is_empty() {
        return Err(ChangeError::Unsupported {
            id: set.id.clone(),
            paths: unsupported,
        });
    }
    tamper_check(set, dir)?;
    policy_check(set, snapshot, options)?;
    let mut opened = Vec::new();
    let mut conflicting = Vec::new();
    for root in &set.roots {
        let fd = fsx::open_root(&root.path)
            .map_err(|e| io(format!("open {}", root.path.display()), e))?;
        let changes: Vec<&Change> = set.changes.iter().filter(|c| c.root == root.path).collect();
        conflicting.extend(conflicts(&fd, &root.path, &changes));
        opened.push((root, fd, changes));
    }
    if !conflicting.is_empty() {
        return Err(ChangeError::Conflicts {
            id: set.id.clone(),
            paths: conflicting,
        });
    }
    let mut done: Vec<Applier> = Vec::new();
    for (root, fd, changes) in opened {
        if changes.is_empty() {
            continue;
        }
        let upper = dir.join("upper").join(&root.layer);
        match apply_root(set, &root.path, fd, &upper, &changes) {
            Ok(applier) => done.push(applier),
            Err(err) => {
                for mut a in done.into_iter().rev() {
                    a.rollback();
                    let _ = fsx::remove_tree(&a.root_path.join(&a.staging_name));
                }
                // Steps below name no id: the set's is filled in here.
                return Err(match err {
                    ChangeError::Tampered { paths, .. } => ChangeError::Tampered {
                        id: set.id.clone(),
                        paths,
                    },
                    ChangeError::Conflicts { paths, .. } => ChangeError::Conflicts {
                        id: set.id.clone(),
                        paths,
                    },
                    other => other,
                });
            }
        }
    }
    for a in done {
        drop(a.staging);
        let _ = fsx::remove_tree(&a.root_path.join(&a.staging_name));
    }
    Ok(())
}

fn apply_root<'a>(
    set: &ChangeSet,
    root_path: &'a Path,
    root: OwnedFd,
    upper_path: &Path,
    changes: &[&Change],
) -> Result<Applier<'a>, ChangeError> {
    let staging_name = PathBuf::from(format!(".turngate-apply-{}", set.id));
    fsx::mkdir_at(&root, &staging_name, 0o700).map_err(|e| {
        io(
            format!(
                "create the staging directory {}",
                root_path.join(&staging_name).display()
            ),
            e,
        )
    })?;
    let staging = fsx::open_beneath(&root, &staging_name, libc::O_PATH | libc::O_DIRECTORY, 0)
        .map_err(|e| io("open the staging directory", e))?;
    let mut a = Applier {
        root,
        root_path,
        staging,
        staging_name,
        undo: Vec::new(),
    };
    match apply_steps(&mut a, upper_path, changes) {
        Ok(()) => Ok(a),
        Err(e) => {
            a.rollback();
            let _ = fsx::remove_tree(&root_path.join(&a.staging_name));
            Err(e)
        }
    }
}

fn apply_steps(a: &mut Applier, upper_path: &Path, changes: &[&Change]) -> Result<(), ChangeError> {
    let upper =
        fsx::open_root(upper_path).map_err(|e| io(format!("open {}", upper_path.display()), e))?;
    // 1. Stage every file and link (nothing in the workspace changes yet).
    let mut staged: Vec<Option<String>> = Vec::with_capacity(changes.len());
    for (n, change) in changes.iter().enumerate() {
        let name = format!("new-{n}");
        let placed = matches!(change.kind, ChangeKind::Added | ChangeKind::Modified);
        match (placed, change.entry) {
            (true, EntryType::File) => {
                stage_file(&upper, &a.staging, change, &name)?;
                staged.push(Some(name));
            }
            (true, EntryType::Symlink) => {
                let rel = scan::rel(change);
                let parent =
                    fsx::open_beneath(&upper, parent_of(&rel), libc::O_PATH | libc::O_DIRECTORY, 0)
                        .map_err(|e| io(format!("open {} in the change set", change.path), e))?;
                let target = fsx::readlink_at(&parent, name_of(&rel))
                    .map_err(|e| io(format!("readlink {}", change.path), e))?;
                if Some(target.to_string_lossy().into_owned()) != change.link_target {
                    return Err(ChangeError::Tampered {
                        id: String::new(),
                        paths: vec![change.path.clone()],
                    });
                }
                fsx::symlink_at(Path::new(&target), &a.staging, Path::new(&name))
                    .map_err(|e| io(format!("stage {}", change.path), e))?;
                staged.push(Some(name));
            }
            _ => staged.push(None),
        }
    }
    // One flush of the staged content before anything is moved (not one fsync per file).
    {
        use std::os::fd::AsRawFd;
        let dir = fsx::open_beneath(
            &a.root,
            &a.staging_name,
            libc::O_RDONLY | libc::O_DIRECTORY,
            0,
        )
        .map_err(|e| io("open the staging directory", e))?;
        // SAFETY: syncfs on an open descriptor.
        if unsafe { libc::syncfs(dir.as_raw_fd()) } != 0 {
            return Err(io(
                "flush the staged files",
                std::io::Error::last_os_error(),
            ));
        }
    }
    let depth = |c: &Change| Path::new(&c.path).components().count();
    let mut order: Vec<usize> = (0..changes.len()).collect();
    // 2. Deletions, deepest first.
    order.sort_by_key(|&i| std::cmp::Reverse(depth(changes[i])));
    for (t, &i) in order.iter().enumerate() {
        let change = changes[i];
        if change.kind != ChangeKind::Deleted {
            continue;
        }
        let rel = scan::rel(change);
        let trash = format!("old-{t}");
        let parent = a
            .parent(&rel)
            .map_err(|e| io(format!("open the directory of {}", a.abs(&rel)), e))?;
        fsx::rename_at(
            &parent,
            name_of(&rel),
            &a.staging,
            Path::new(&trash),
            RENAME_NOREPLACE,
        )
        .map_err(|e| io(format!("delete {}", a.abs(&rel)), e))?;
        a.undo.push(Undo::Restore {
            parent: parent_of(&rel).to_path_buf(),
            name: name_of(&rel).to_path_buf(),
            staged: trash,
        });
    }
    // 3. New directories, shallowest first.
    order.sort_by_key(|&i| depth(changes[i]));
    for &i in &order {
        let change = changes[i];
        if change.kind != ChangeKind::Added || change.entry != EntryType::Dir {
            continue;
        }
        let rel = scan::rel(change);
        let parent = a
            .parent(&rel)
            .map_err(|e| io(format!("open the directory of {}", a.abs(&rel)), e))?;
        fsx::mkdir_at(&parent, name_of(&rel), 0o700)
            .map_err(|e| io(format!("create {}", a.abs(&rel)), e))?;
        a.undo.push(Undo::Rmdir { rel });
    }
    // 4. Files and links: a new path by a rename that never replaces, a modified one by an
    //    exchange (the old file ends in the staging directory until the end).
    for &i in &order {
        let change = changes[i];
        let Some(name) = &staged[i] else { continue };
        let rel = scan::rel(change);
        let parent = a
            .parent(&rel)
            .map_err(|e| io(format!("open the directory of {}", a.abs(&rel)), e))?;
        if change.kind == ChangeKind::Modified {
            fsx::rename_at(
                &a.staging,
                Path::new(name),
                &parent,
                name_of(&rel),
                RENAME_EXCHANGE,
            )
            .map_err(|e| io(format!("replace {}", a.abs(&rel)), e))?;
            a.undo.push(Undo::Exchange {
                rel,
                staged: name.clone(),
            });
        } else {
            fsx::rename_at(
                &a.staging,
                Path::new(name),
                &parent,
                name_of(&rel),
                RENAME_NOREPLACE,
            )
            .map_err(|e| io(format!("create {}", a.abs(&rel)), e))?;
            a.undo.push(Undo::Unplace {
                rel,
                staged: name.clone(),
            });
        }
    }
    // 5. Mode changes, then the new directories' own modes (deepest first, so a read-only
    //    directory does not stop its children).
    let mut modes: Vec<&Change> = changes
        .iter()
        .copied()
        .filter(|c| {
            c.kind == ChangeKind::ModeChanged
                || (c.kind == ChangeKind::Added && c.entry == EntryType::Dir)
        })
        .collect();
    modes.sort_by_key(|c| std::cmp::Reverse(depth(c)));
    for change in modes {
        let rel = scan::rel(change);
        let Some(mode) = change.mode else { continue };
        let fd = fsx::open_beneath(&a.root, &rel, libc::O_PATH, 0)
            .map_err(|e| io(format!("open {}", a.abs(&rel)), e))?;
        let st = fsx::stat_fd(&fd).map_err(|e| io(format!("stat {}", a.abs(&rel)), e))?;
        let is_dir = st.st_mode & libc::S_IFMT == libc::S_IFDIR;
        if is_dir != (change.entry == EntryType::Dir) || st.st_mode & libc::S_IFMT == libc::S_IFLNK
        {
            return Err(ChangeError::Conflicts {
                id: String::new(),
                paths: vec![a.abs(&rel)],
            });
        }
        fsx::chmod_fd(&fd, safe_mode(mode)).map_err(|e| io(format!("chmod {}", a.abs(&rel)), e))?;
        a.undo.push(Undo::Chmod {
            rel,
            mode: st.st_mode & 0o7777,
        });
    }
    Ok(())
}
