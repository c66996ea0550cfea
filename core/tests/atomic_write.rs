//! `replace_beneath` (the guarded tools' `write_file`/`edit_file`): the file is replaced whole,
//! through a temporary beside it renamed over it, and never through a symlink, whether it sits
//! at the name or on the way there.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use turngate::check::file::replace_beneath;

#[test]
fn a_replace_writes_the_whole_file_keeps_its_mode_and_leaves_no_temporary() {
    let root = tempfile::tempdir().unwrap();
    let file = root.path().join("a.txt");
    std::fs::write(&file, "old").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
    replace_beneath(root.path(), Path::new("a.txt"), b"new content").unwrap();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "new content");
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o640
    );
    let names: Vec<_> = std::fs::read_dir(root.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("a.txt")]);
    // A new file in a subdirectory.
    std::fs::create_dir(root.path().join("sub")).unwrap();
    replace_beneath(root.path(), Path::new("sub/b.txt"), b"b").unwrap();
    assert_eq!(
        std::fs::read_to_string(root.path().join("sub/b.txt")).unwrap(),
        "b"
    );
}

#[test]
fn a_symlink_at_the_name_is_refused_and_its_target_untouched() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("victim");
    std::fs::write(&target, "keep").unwrap();
    std::os::unix::fs::symlink(&target, root.path().join("link")).unwrap();
    let err = replace_beneath(root.path(), Path::new("link"), b"evil").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ELOOP), "{err}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    assert!(
        std::fs::symlink_metadata(root.path().join("link"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
fn a_symlinked_directory_on_the_way_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), root.path().join("dir")).unwrap();
    assert!(replace_beneath(root.path(), Path::new("dir/x"), b"evil").is_err());
    assert!(
        !outside.path().join("x").exists(),
        "nothing was written through the symlink"
    );
    // And `..` cannot climb out of the root.
    assert!(replace_beneath(root.path(), Path::new("../escaped"), b"evil").is_err());
    assert!(!root.path().parent().unwrap().join("escaped").exists());
}
