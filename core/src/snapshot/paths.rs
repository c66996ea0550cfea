//! Lexical path handling for snapshot roots: absolute, no `..`, no NUL, `.` removed.
//!
//! Resolution is pure, so nothing here touches the file system; callers pass canonical roots and
//! the FilePolicyChecker canonicalizes the paths it checks.

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
    fn containment_is_by_component() {
        assert!(is_within(Path::new("/w/a"), Path::new("/w")));
        assert!(is_within(Path::new("/w"), Path::new("/w")));
        assert!(!is_within(Path::new("/w_evil"), Path::new("/w")));
        assert!(!is_within(Path::new("/"), Path::new("/w")));
    }
}
