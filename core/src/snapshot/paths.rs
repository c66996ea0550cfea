//! Path handling for snapshot roots: lexical normalization (absolute, no `..`, no NUL, `.`
//! removed), the existence check, and where a root stands relative to the user's home.
//!
//! The only file-system access is `metadata` and `canonicalize` on the roots themselves;
//! the FilePolicyChecker canonicalizes the paths it checks.

use std::ffi::OsString;
use std::fmt;
use std::io;
use std::path::{Component, Path, PathBuf};

use super::SnapshotError;

/// Normalize a root lexically, naming `what` (e.g. `context.workspace_root`) in any error.
pub(crate) fn normalize_root(path: &Path, what: &str) -> Result<PathBuf, SnapshotError> {
    let bad = |reason: &'static str| SnapshotError::InvalidPath {
        what: what.to_owned(),
        path: path.display().to_string(),
        reason,
    };
    if path.as_os_str().is_empty() {
        return Err(bad("the path is empty"));
    }
    if path.as_os_str().as_encoded_bytes().contains(&0) {
        return Err(bad("the path contains a NUL byte"));
    }
    if !path.is_absolute() {
        return Err(bad("the path must be absolute"));
    }
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                return Err(bad(
                    "the path contains `..`; pass a canonical path (resolution does not follow symlinks)",
                ));
            }
            other => out.push(other.as_os_str()),
        }
    }
    Ok(out)
}

/// Refuse a root that is not an existing directory: a turn on a missing root would deny every
/// action as a symlink escape instead of saying what is wrong.
pub(crate) fn ensure_directory(
    given: &Path,
    normalized: &Path,
    what: &str,
) -> Result<(), SnapshotError> {
    let reason = match std::fs::metadata(normalized) {
        Ok(m) if m.is_dir() => return Ok(()),
        Ok(_) => "it is not a directory; a snapshot's roots must be existing directories",
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            "it does not exist; a snapshot's roots must be existing directories"
        }
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            "it cannot be inspected (permission denied); a snapshot's roots must be existing directories"
        }
        Err(_) => "it cannot be inspected; a snapshot's roots must be existing directories",
    };
    Err(SnapshotError::InvalidPath {
        what: what.to_owned(),
        path: given.display().to_string(),
        reason,
    })
}

/// Why a root cannot be a restricted-mode workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HomeRelation {
    /// The root is the file-system root (`/`, or a drive root on Windows).
    FilesystemRoot,
    /// The root is the user's home directory.
    Home(PathBuf),
    /// The root contains the user's home directory.
    AncestorOfHome(PathBuf),
}

impl fmt::Display for HomeRelation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HomeRelation::FilesystemRoot => f.write_str("the file-system root"),
            HomeRelation::Home(h) => write!(f, "the user's home directory (`{}`)", h.display()),
            HomeRelation::AncestorOfHome(h) => {
                write!(
                    f,
                    "an ancestor of the user's home directory `{}`",
                    h.display()
                )
            }
        }
    }
}

/// The home directory of the process: `HOME` (`USERPROFILE` on Windows), when set and absolute.
pub(crate) fn process_home() -> Option<PathBuf> {
    let name = if cfg!(windows) { "USERPROFILE" } else { "HOME" };
    std::env::var_os(name)
        .filter(|h: &OsString| !h.is_empty())
        .map(PathBuf::from)
        .filter(|h| h.is_absolute())
}

/// Whether `root` is the file-system root, `home`, or an ancestor of `home`. Both are compared
/// as given (lexically normalized) and canonicalized, so a symlink to HOME is HOME.
pub(crate) fn home_relation(root: &Path, home: Option<&Path>) -> Option<HomeRelation> {
    let canonical_root = std::fs::canonicalize(root).ok();
    let roots: Vec<&Path> = std::iter::once(root)
        .chain(canonical_root.as_deref())
        .collect();
    if roots.iter().any(|r| r.parent().is_none()) {
        return Some(HomeRelation::FilesystemRoot);
    }
    let home = home?;
    let lexical_home = normalize_root(home, "home").ok();
    let canonical_home = std::fs::canonicalize(home).ok();
    let homes: Vec<&Path> = lexical_home
        .as_deref()
        .into_iter()
        .chain(canonical_home.as_deref())
        .collect();
    for r in &roots {
        for h in &homes {
            if r == h {
                return Some(HomeRelation::Home(home.to_path_buf()));
            }
            if h.starts_with(r) {
                return Some(HomeRelation::AncestorOfHome(home.to_path_buf()));
            }
        }
    }
    None
}

/// Whether `path` is `root` or lies beneath it, compared by component (`/w_evil` is not inside
/// `/w`).
pub fn is_within(path: &Path, root: &Path) -> bool {
    path.starts_with(root)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn roots_are_normalized_and_validated() {
        let ok = normalize_root(Path::new("/w/./src//x"), "r").unwrap();
        assert_eq!(ok, PathBuf::from("/w/src/x"));
        for bad in ["", "rel/dir", "/w/../etc", "/w/a\0b"] {
            let err = normalize_root(Path::new(bad), "context.workspace_root").unwrap_err();
            assert!(err.to_string().contains("context.workspace_root"), "{err}");
        }
    }

    #[test]
    fn missing_roots_and_files_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let err = ensure_directory(&missing, &missing, "context.workspace_root").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("context.workspace_root"), "{text}");
        assert!(text.contains(&missing.display().to_string()), "{text}");
        assert!(text.contains("does not exist"), "{text}");
        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap();
        let err = ensure_directory(&file, &file, "context.project_roots[0]").unwrap_err();
        assert!(err.to_string().contains("not a directory"), "{err}");
        assert!(ensure_directory(dir.path(), dir.path(), "r").is_ok());
    }

    #[test]
    fn home_relation_sees_root_home_ancestors_and_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home/me");
        std::fs::create_dir_all(home.join("proj")).unwrap();
        assert_eq!(
            home_relation(Path::new("/"), None),
            Some(HomeRelation::FilesystemRoot)
        );
        assert_eq!(
            home_relation(&home, Some(&home)),
            Some(HomeRelation::Home(home.clone()))
        );
        assert_eq!(
            home_relation(&dir.path().join("home"), Some(&home)),
            Some(HomeRelation::AncestorOfHome(home.clone()))
        );
        assert_eq!(home_relation(&home.join("proj"), Some(&home)), None);
        assert_eq!(
            home_relation(&dir.path().join("home/me2"), Some(&home)),
            None
        );
        // HOME spelled with a trailing slash or `.` is the same directory.
        let spelled = PathBuf::from(format!("{}/./", home.display()));
        assert!(home_relation(&home, Some(&spelled)).is_some());
        #[cfg(unix)]
        {
            let link = dir.path().join("link");
            std::os::unix::fs::symlink(&home, &link).unwrap();
            assert_eq!(
                home_relation(&link, Some(&home)),
                Some(HomeRelation::Home(home.clone()))
            );
        }
    }

    #[test]
    fn containment_is_by_component() {
        assert!(is_within(Path::new("/w/a"), Path::new("/w")));
        assert!(is_within(Path::new("/w"), Path::new("/w")));
        assert!(!is_within(Path::new("/w_evil"), Path::new("/w")));
        assert!(!is_within(Path::new("/"), Path::new("/w")));
    }
}
