//! Read an overlay's upper directory into changes, against the lower layer (the workspace).
//!
//! overlayfs records a deletion as a whiteout (a character device 0/0, or on newer kernels a
//! zero-size file with an `overlay.whiteout` xattr), a directory that replaced a lower one as
//! an *opaque* directory (`overlay.opaque` = `y`), and a file or directory written as a full
//! copy in the upper directory. In a user namespace the overlay is mounted with `userxattr`,
//! so its xattrs are `user.overlay.*`; `trusted.overlay.*` (a privileged mount) is read too.
//! Renaming a directory is refused by the overlay with `EXDEV` (no `redirect_dir` in a user
//! namespace), so programs copy it and delete the original; a `redirect` xattr, should one
//! appear anyway, makes the change unsupported rather than misread.

use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::fsx;
use super::{Change, ChangeError, ChangeKind, EntryType, PathState};

/// Files larger than this get no diff (sizes only).
const DIFF_MAX: u64 = 1 << 20;

pub(crate) use super::hex;

fn xattr(path: &Path, name: &std::ffi::CStr) -> Option<Vec<u8>> {
    let path = fsx::cstr(path).ok()?;
    let mut buf = [0u8; 256];
    // SAFETY: NUL-terminated strings and a live buffer of its length.
    let n = unsafe {
        libc::lgetxattr(
            path.as_ptr(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    (n >= 0).then(|| buf[..n as usize].to_vec())
}

fn overlay_xattr(path: &Path, what: &str) -> Option<Vec<u8>> {
    let (user, trusted) = match what {
        "opaque" => (c"user.overlay.opaque", c"trusted.overlay.opaque"),
        "whiteout" => (c"user.overlay.whiteout", c"trusted.overlay.whiteout"),
        "redirect" => (c"user.overlay.redirect", c"trusted.overlay.redirect"),
        "metacopy" => (c"user.overlay.metacopy", c"trusted.overlay.metacopy"),
        _ => return None,
    };
    xattr(path, user).or_else(|| xattr(path, trusted))
}

fn ns(sec: i64, nsec: i64) -> i64 {
    sec.saturating_mul(1_000_000_000).saturating_add(nsec)
}

fn file_type(mode: u32) -> EntryType {
    match mode & libc::S_IFMT {
        libc::S_IFREG => EntryType::File,
        libc::S_IFDIR => EntryType::Dir,
        libc::S_IFLNK => EntryType::Symlink,
        _ => EntryType::Other,
    }
}

/// SHA-256 of what `fd` reads, and the bytes when there are at most `keep` of them.
fn hash_fd(fd: OwnedFd, keep: u64) -> std::io::Result<(String, Option<Vec<u8>>)> {
    let mut file = std::fs::File::from(fd);
    let mut hasher = Sha256::new();
    let mut kept = Vec::new();
    let mut keeping = true;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        if keeping {
            if (kept.len() + n) as u64 > keep {
                keeping = false;
                kept = Vec::new();
            } else {
                kept.extend_from_slice(&buf[..n]);
            }
        }
    }
    Ok((hex(&hasher.finalize()), keeping.then_some(kept)))
}

/// The state of `rel` beneath the root descriptor `root`, never following a symlink; a
/// symlink on the way is an error (`ELOOP`). With `deep`, a directory carries its subtree's
/// digest. Also returns a file's content when it is at most `keep` bytes.
pub(crate) fn state_at(
    root: &OwnedFd,
    rel: &Path,
    deep: bool,
    keep: u64,
) -> std::io::Result<(PathState, Option<Vec<u8>>)> {
    let parent_rel = rel.parent().unwrap_or(Path::new(""));
    let name = rel.file_name().map(Path::new).unwrap_or(Path::new("."));
    let parent = match fsx::open_beneath(root, parent_rel, libc::O_PATH | libc::O_DIRECTORY, 0) {
        Ok(fd) => fd,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok((PathState::Absent, None)),
        Err(e) => return Err(e),
    };
    let st = match fsx::stat_at(&parent, name) {
        Ok(st) => st,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok((PathState::Absent, None)),
        Err(e) => return Err(e),
    };
    let mode = st.st_mode;
    Ok(match file_type(mode) {
        EntryType::File => {
            let fd = fsx::open_beneath(root, rel, libc::O_RDONLY, 0)?;
            let now = fsx::stat_fd(&fd)?;
            if now.st_ino != st.st_ino || now.st_dev != st.st_dev {
                return Err(std::io::Error::from_raw_os_error(libc::ESTALE));
            }
            let (sha256, content) = hash_fd(fd, keep)?;
            (
                PathState::File {
                    dev: st.st_dev,
                    ino: st.st_ino,
                    size: st.st_size as u64,
                    mode: mode & 0o7777,
                    mtime_ns: ns(st.st_mtime, st.st_mtime_nsec),
                    ctime_ns: ns(st.st_ctime, st.st_ctime_nsec),
                    sha256,
                },
                content,
            )
        }
        EntryType::Dir => {
            let tree = if deep {
                let fd = fsx::open_beneath(root, rel, libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
                let mut hasher = Sha256::new();
                tree_digest(&fd, Path::new(""), &mut hasher)?;
                Some(hex(&hasher.finalize()))
            } else {
                None
            };
            (
                PathState::Dir {
                    mode: mode & 0o7777,
                    tree,
                },
                None,
            )
        }
        EntryType::Symlink => (
            PathState::Symlink {
                target: fsx::readlink_at(&parent, name)?
                    .to_string_lossy()
                    .into_owned(),
            },
            None,
        ),
        EntryType::Other => (PathState::Other { mode }, None),
    })
}

/// Names in the directory `fd`, sorted.
fn names(fd: &OwnedFd) -> std::io::Result<Vec<std::ffi::OsString>> {
    let mut names: Vec<_> = std::fs::read_dir(format!("/proc/self/fd/{}", fd.as_raw_fd()))?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<Result<_, _>>()?;
    names.sort();
    Ok(names)
}

/// Digest everything below the directory `dir`: names, types, modes, inodes, sizes, times.
fn tree_digest(dir: &OwnedFd, rel: &Path, hasher: &mut Sha256) -> std::io::Result<()> {
    for name in names(dir)? {
        let name = Path::new(&name);
        let st = fsx::stat_at(dir, name)?;
        let child = rel.join(name);
        hasher.update(child.as_os_str().as_bytes());
        hasher.update(
            format!(
                "\0{:o}\0{}\0{}\0{}\0{}\n",
                st.st_mode,
                st.st_ino,
                st.st_size,
                ns(st.st_mtime, st.st_mtime_nsec),
                ns(st.st_ctime, st.st_ctime_nsec)
            )
            .as_bytes(),
        );
        if file_type(st.st_mode) == EntryType::Dir {
            let sub = fsx::open_beneath(dir, name, libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
            tree_digest(&sub, &child, hasher)?;
        }
    }
    Ok(())
}

/// Digest every entry of an upper directory (names, types, modes, content, link targets and
/// the overlay's own xattrs): what `apply` compares to detect tampering since the run.
pub(crate) fn digest_upper(upper: &Path, hasher: &mut Sha256) -> std::io::Result<()> {
    let root = fsx::open_root(upper)?;
    digest_dir(&root, upper, Path::new(""), hasher)
}

fn digest_dir(root: &OwnedFd, base: &Path, rel: &Path, hasher: &mut Sha256) -> std::io::Result<()> {
    let dir = fsx::open_beneath(root, rel, libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
    for name in names(&dir)? {
        let name = Path::new(&name);
        let child = rel.join(name);
        let st = fsx::stat_at(&dir, name)?;
        hasher.update(child.as_os_str().as_bytes());
        hasher.update(format!("\0{:o}\0{}\0{}\0", st.st_mode, st.st_size, st.st_rdev).as_bytes());
        for what in ["opaque", "whiteout", "redirect", "metacopy"] {
            if let Some(v) = overlay_xattr(&base.join(&child), what) {
                hasher.update(what.as_bytes());
                hasher.update(&v);
            }
        }
        match file_type(st.st_mode) {
            EntryType::File => {
                let fd = fsx::open_beneath(root, &child, libc::O_RDONLY, 0)?;
                hasher.update(hash_fd(fd, 0)?.0.as_bytes());
            }
            EntryType::Symlink => {
                hasher.update(fsx::readlink_at(&dir, name)?.as_bytes());
            }
            EntryType::Dir => digest_dir(root, base, &child, hasher)?,
            EntryType::Other => {}
        }
        hasher.update(b"\n");
    }
    Ok(())
}

/// Whether `bytes` read as text (UTF-8 without NUL).
fn text(bytes: &[u8]) -> Option<&str> {
    if bytes.contains(&0) {
        return None;
    }
    std::str::from_utf8(bytes).ok()
}

fn unified(path: &str, old: &str, new: &str) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string()
}

struct Scan<'a> {
    root: &'a Path,
    lower: OwnedFd,
    upper: &'a Path,
    upper_fd: OwnedFd,
    out: Vec<Change>,
}

fn io(what: &str, path: &Path, e: std::io::Error) -> ChangeError {
    ChangeError::io(format!("{what} {}", path.display()), e)
}

/// The changes in `upper` (an overlay's upper directory) against `root` (its lower layer).
pub(crate) fn scan(root: &Path, upper: &Path) -> Result<Vec<Change>, ChangeError> {
    let mut scan = Scan {
        root,
        lower: fsx::open_root(root).map_err(|e| io("open", root, e))?,
        upper,
        upper_fd: fsx::open_root(upper).map_err(|e| io("open", upper, e))?,
        out: Vec::new(),
    };
    scan.dir(Path::new(""), true)?;
    let mut out = scan.out;
    out.sort_by(|a, b| {
        a.path
            .cmp(&b.path)
            .then(kind_order(a.kind).cmp(&kind_order(b.kind)))
    });
    Ok(out)
}

/// A deletion before an addition of the same path.
fn kind_order(kind: ChangeKind) -> u8 {
    match kind {
        ChangeKind::Deleted => 0,
        _ => 1,
    }
}

impl Scan<'_> {
    fn change(&self, rel: &str, kind: ChangeKind, entry: EntryType, before: PathState) -> Change {
        Change {
            root: self.root.to_path_buf(),
            path: rel.to_owned(),
            kind,
            entry,
            mode: None,
            old_mode: None,
            size: None,
            old_size: None,
            sha256: None,
            link_target: None,
            binary: false,
            diff: None,
            note: None,
            before,
        }
    }

    fn lower_state(
        &self,
        rel: &Path,
        deep: bool,
    ) -> Result<(PathState, Option<Vec<u8>>), ChangeError> {
        state_at(&self.lower, rel, deep, DIFF_MAX).map_err(|e| io("read", &self.root.join(rel), e))
    }

    /// A deletion of whatever the lower layer has at `rel`.
    fn deleted(&mut self, rel_s: &str, lower: PathState, content: Option<Vec<u8>>) {
        let entry = match &lower {
            PathState::File { .. } => EntryType::File,
            PathState::Dir { .. } => EntryType::Dir,
            PathState::Symlink { .. } => EntryType::Symlink,
            PathState::Other { .. } | PathState::Absent => EntryType::Other,
        };
        let mut change = self.change(rel_s, ChangeKind::Deleted, entry, lower.clone());
        if let PathState::File { size, mode, .. } = &lower {
            change.old_size = Some(*size);
            change.old_mode = Some(*mode);
            match content.as_deref().and_then(text) {
                Some(old) => change.diff = Some(unified(rel_s, old, "")),
                None => change.binary = true,
            }
        }
        if let PathState::Dir { mode, .. } = &lower {
            change.old_mode = Some(*mode);
        }
        self.out.push(change);
    }

    fn dir(&mut self, rel: &Path, lower_is_dir: bool) -> Result<(), ChangeError> {
        let dir = fsx::open_beneath(&self.upper_fd, rel, libc::O_RDONLY | libc::O_DIRECTORY, 0)
            .map_err(|e| io("open", &self.upper.join(rel), e))?;
        let entries = names(&dir).map_err(|e| io("list", &self.upper.join(rel), e))?;
        for name in entries {
            let child = rel.join(&name);
            let upper_path = self.upper.join(&child);
            let Some(rel_s) = child.to_str().map(str::to_owned) else {
                let mut c = self.change(
                    &child.to_string_lossy(),
                    ChangeKind::Unsupported,
                    EntryType::Other,
                    PathState::Absent,
                );
                c.note = Some("the name is not UTF-8".into());
                self.out.push(c);
                continue;
            };
            let st =
                fsx::stat_at(&dir, Path::new(&name)).map_err(|e| io("stat", &upper_path, e))?;
            let (lower, lower_content) = if lower_is_dir {
                self.lower_state(&child, false)?
            } else {
                (PathState::Absent, None)
            };
            let kind = file_type(st.st_mode);
            let whiteout = (st.st_mode & libc::S_IFMT == libc::S_IFCHR && st.st_rdev == 0)
                || (kind == EntryType::File
                    && st.st_size == 0
                    && overlay_xattr(&upper_path, "whiteout").is_some());
            if whiteout {
                if lower != PathState::Absent {
                    let deep = matches!(lower, PathState::Dir { .. });
                    let (lower, content) = if deep {
                        self.lower_state(&child, true)?
                    } else {
                        (lower, lower_content)
                    };
                    self.deleted(&rel_s, lower, content);
                }
                continue;
            }
            let mode = st.st_mode & 0o7777;
            match kind {
                EntryType::Dir => {
                    if overlay_xattr(&upper_path, "redirect").is_some() {
                        let mut c =
                            self.change(&rel_s, ChangeKind::Unsupported, EntryType::Dir, lower);
                        c.note = Some("an overlay redirect (a renamed directory)".into());
                        self.out.push(c);
                        continue;
                    }
                    let opaque = overlay_xattr(&upper_path, "opaque").as_deref() == Some(b"y");
                    match &lower {
                        PathState::Dir { mode: old, .. } if !opaque => {
                            if *old != mode {
                                let mut c = self.change(
                                    &rel_s,
                                    ChangeKind::ModeChanged,
                                    EntryType::Dir,
                                    lower.clone(),
                                );
                                c.mode = Some(mode);
                                c.old_mode = Some(*old);
                                self.out.push(c);
                            }
                            self.dir(&child, true)?;
                        }
                        _ => {
                            let mut before = PathState::Absent;
                            if lower != PathState::Absent {
                                // Replaced: the lower entry (a whole directory when opaque)
                                // goes first.
                                let (l, content) = self
                                    .lower_state(&child, matches!(lower, PathState::Dir { .. }))?;
                                self.deleted(&rel_s, l, content);
                                before = PathState::Absent;
                            }
                            let mut c =
                                self.change(&rel_s, ChangeKind::Added, EntryType::Dir, before);
                            c.mode = Some(mode);
                            self.out.push(c);
                            self.dir(&child, false)?;
                        }
                    }
                }
                EntryType::File => {
                    if overlay_xattr(&upper_path, "metacopy").is_some() {
                        let mut c =
                            self.change(&rel_s, ChangeKind::Unsupported, EntryType::File, lower);
                        c.note = Some("an overlay metadata-only copy".into());
                        self.out.push(c);
                        continue;
                    }
                    let fd = fsx::open_beneath(&self.upper_fd, &child, libc::O_RDONLY, 0)
                        .map_err(|e| io("open", &upper_path, e))?;
                    let (sha256, content) =
                        hash_fd(fd, DIFF_MAX).map_err(|e| io("read", &upper_path, e))?;
                    let note = (st.st_nlink > 1)
                        .then(|| "a hard link in the change set; applied as a copy".to_owned());
                    let mut c = match &lower {
                        PathState::File {
                            sha256: old_sha,
                            mode: old_mode,
                            size: old_size,
                            ..
                        } => {
                            if *old_sha == sha256 && *old_mode == mode {
                                continue;
                            }
                            let kind = if *old_sha == sha256 {
                                ChangeKind::ModeChanged
                            } else {
                                ChangeKind::Modified
                            };
                            let mut c = self.change(&rel_s, kind, EntryType::File, lower.clone());
                            c.old_mode = Some(*old_mode);
                            c.old_size = Some(*old_size);
                            if kind == ChangeKind::Modified {
                                match (
                                    lower_content.as_deref().and_then(text),
                                    content.as_deref().and_then(text),
                                ) {
                                    (Some(old), Some(new)) => {
                                        c.diff = Some(unified(&rel_s, old, new))
                                    }
                                    _ => c.binary = true,
                                }
                            }
                            c
                        }
                        other => {
                            if *other != PathState::Absent {
                                let (l, lc) = self
                                    .lower_state(&child, matches!(other, PathState::Dir { .. }))?;
                                self.deleted(&rel_s, l, lc);
                            }
                            let mut c = self.change(
                                &rel_s,
                                ChangeKind::Added,
                                EntryType::File,
                                PathState::Absent,
                            );
                            match content.as_deref().and_then(text) {
                                Some(new) => c.diff = Some(unified(&rel_s, "", new)),
                                None => c.binary = true,
                            }
                            c
                        }
                    };
                    c.mode = Some(mode);
                    c.size = Some(st.st_size as u64);
                    c.sha256 = Some(sha256);
                    c.note = note;
                    self.out.push(c);
                }
                EntryType::Symlink => {
                    let target = fsx::readlink_at(&dir, Path::new(&name))
                        .map_err(|e| io("readlink", &upper_path, e))?;
                    let target = target.to_string_lossy().into_owned();
                    let mut c = match &lower {
                        PathState::Symlink { target: old } if *old == target => continue,
                        PathState::Symlink { .. } => self.change(
                            &rel_s,
                            ChangeKind::Modified,
                            EntryType::Symlink,
                            lower.clone(),
                        ),
                        other => {
                            if *other != PathState::Absent {
                                let (l, lc) = self
                                    .lower_state(&child, matches!(other, PathState::Dir { .. }))?;
                                self.deleted(&rel_s, l, lc);
                            }
                            self.change(
                                &rel_s,
                                ChangeKind::Added,
                                EntryType::Symlink,
                                PathState::Absent,
                            )
                        }
                    };
                    if escapes(&child, &target) {
                        c.note = Some(
                            "the link points outside the root; apply creates the link and \
                             writes nothing through it"
                                .into(),
                        );
                    }
                    c.link_target = Some(target);
                    self.out.push(c);
                }
                EntryType::Other => {
                    let mut c =
                        self.change(&rel_s, ChangeKind::Unsupported, EntryType::Other, lower);
                    c.mode = Some(st.st_mode);
                    c.note = Some(match st.st_mode & libc::S_IFMT {
                        libc::S_IFIFO => "a fifo".to_owned(),
                        libc::S_IFSOCK => "a socket".to_owned(),
                        _ => "a device node".to_owned(),
                    });
                    self.out.push(c);
                }
            }
        }
        Ok(())
    }
}

/// Whether the symlink at `rel` with `target` leads outside its root, lexically.
fn escapes(rel: &Path, target: &str) -> bool {
    let target = Path::new(target);
    if target.is_absolute() {
        return true;
    }
    let mut depth: i64 = rel.components().count() as i64 - 1;
    for c in target.components() {
        match c {
            std::path::Component::ParentDir => depth -= 1,
            std::path::Component::Normal(_) => depth += 1,
            _ => {}
        }
        if depth < 0 {
            return true;
        }
    }
    false
}

/// The relative path of `change` as a `PathBuf`.
pub(crate) fn rel(change: &Change) -> PathBuf {
    PathBuf::from(&change.path)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn set_xattr(path: &Path, name: &std::ffi::CStr, value: &[u8]) -> bool {
        let p = fsx::cstr(path).unwrap();
        // SAFETY: NUL-terminated strings and a live slice.
        unsafe {
            libc::lsetxattr(
                p.as_ptr(),
                name.as_ptr(),
                value.as_ptr().cast(),
                value.len(),
                0,
            ) == 0
        }
    }

    fn whiteout(path: &Path) -> bool {
        let p = fsx::cstr(path).unwrap();
        // SAFETY: a NUL-terminated path.
        unsafe { libc::mknod(p.as_ptr(), libc::S_IFCHR | 0o600, 0) == 0 }
    }

    /// A lower dir and an upper dir written the way overlayfs writes them, by hand: a
    /// whiteout as a 0/0 device or as an xattr-marked empty file, an opaque directory marked
    /// with the `user.` or the `trusted.` xattr.
    #[test]
    fn whiteouts_and_opaque_dirs_in_both_xattr_namespaces() {
        let base = tempfile::tempdir().unwrap();
        let (lower, upper) = (base.path().join("lower"), base.path().join("upper"));
        for d in [
            "lower/gone_dir/x",
            "lower/opaque_u",
            "lower/opaque_t",
            "upper/opaque_u",
            "upper/opaque_t",
        ] {
            std::fs::create_dir_all(base.path().join(d)).unwrap();
        }
        for f in [
            "gone.txt",
            "gone2.txt",
            "opaque_u/old",
            "opaque_t/old",
            "gone_dir/x/y",
        ] {
            std::fs::write(lower.join(f), "old\n").unwrap();
        }
        std::fs::write(upper.join("opaque_u/new"), "new\n").unwrap();
        std::fs::write(upper.join("opaque_t/new"), "new\n").unwrap();
        // SAFETY: geteuid cannot fail.
        let root = unsafe { libc::geteuid() } == 0;
        if !(whiteout(&upper.join("gone.txt")) && whiteout(&upper.join("gone_dir"))) {
            assert!(!root, "root could not create a whiteout");
            return;
        }
        std::fs::write(upper.join("gone2.txt"), "").unwrap();
        if !set_xattr(&upper.join("gone2.txt"), c"user.overlay.whiteout", b"") {
            return; // no user xattrs on this filesystem
        }
        assert!(set_xattr(
            &upper.join("opaque_u"),
            c"user.overlay.opaque",
            b"y"
        ));
        let trusted = root && set_xattr(&upper.join("opaque_t"), c"trusted.overlay.opaque", b"y");
        let changes = scan(&lower, &upper).unwrap();
        let got: Vec<(&str, ChangeKind, EntryType)> = changes
            .iter()
            .map(|c| (c.path.as_str(), c.kind, c.entry))
            .collect();
        let mut want = vec![
            ("gone.txt", ChangeKind::Deleted, EntryType::File),
            ("gone2.txt", ChangeKind::Deleted, EntryType::File),
            ("gone_dir", ChangeKind::Deleted, EntryType::Dir),
            ("opaque_t/new", ChangeKind::Added, EntryType::File),
            ("opaque_u", ChangeKind::Deleted, EntryType::Dir),
            ("opaque_u", ChangeKind::Added, EntryType::Dir),
            ("opaque_u/new", ChangeKind::Added, EntryType::File),
        ];
        if trusted {
            want.insert(3, ("opaque_t", ChangeKind::Deleted, EntryType::Dir));
            want.insert(4, ("opaque_t", ChangeKind::Added, EntryType::Dir));
        }
        assert_eq!(got, want, "{changes:#?}");
        let gone_dir = changes.iter().find(|c| c.path == "gone_dir").unwrap();
        assert!(matches!(
            gone_dir.before,
            PathState::Dir { tree: Some(_), .. }
        ));
    }

    #[test]
    fn a_redirect_or_a_device_is_unsupported() {
        let base = tempfile::tempdir().unwrap();
        let (lower, upper) = (base.path().join("lower"), base.path().join("upper"));
        std::fs::create_dir_all(lower.join("d")).unwrap();
        std::fs::create_dir_all(upper.join("d")).unwrap();
        if !set_xattr(&upper.join("d"), c"user.overlay.redirect", b"/elsewhere") {
            return;
        }
        let p = fsx::cstr(&upper.join("fifo")).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(p.as_ptr(), 0o600) }, 0);
        let changes = scan(&lower, &upper).unwrap();
        assert!(
            changes.iter().all(|c| c.kind == ChangeKind::Unsupported),
            "{changes:#?}"
        );
        assert_eq!(changes.len(), 2);
    }

    #[test]
    fn links_that_leave_the_root_are_noted() {
        assert!(escapes(Path::new("a"), "/etc/passwd"));
        assert!(escapes(Path::new("a"), "../x"));
        assert!(escapes(Path::new("d/a"), "../../x"));
        assert!(!escapes(Path::new("d/a"), "../x"));
        assert!(!escapes(Path::new("a"), "b/c"));
        assert!(escapes(Path::new("a"), "b/../../c"));
    }
}
