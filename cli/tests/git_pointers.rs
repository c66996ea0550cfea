//! A `.git` that is a file (a linked worktree, a submodule checkout) or a symlink names the
//! repository git uses. A sandboxed command that rewrote it sent the person's next `git
//! status` to a config with `core.fsmonitor` it had written: code outside the sandbox (red
//! team 4 F4). Real children, as root and as the unprivileged test user.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_turngate")
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.email=t@t", "-c", "user.name=t"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

fn chown_tree(path: &Path, uid: u32, gid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), Some(gid)).unwrap();
    if path.is_dir() && !path.is_symlink() {
        for entry in std::fs::read_dir(path).unwrap() {
            chown_tree(&entry.unwrap().path(), uid, gid);
        }
    }
}

/// `turngate run --mode auto_accept_edits -- sh -c SCRIPT` in `ws`, as `ids` when given.
fn run(ws: &Path, store: &Path, ids: Option<(u32, u32)>, script: &str) -> Output {
    let mut cmd = match ids {
        Some((uid, gid)) => {
            let mut c = Command::new("setpriv");
            c.arg(format!("--reuid={uid}"))
                .arg(format!("--regid={gid}"))
                .arg("--clear-groups")
                .arg("--")
                .arg(bin());
            c
        }
        None => Command::new(bin()),
    };
    cmd.args(["run", "--mode", "auto_accept_edits", "--approver", "allow"])
        .arg("--workspace")
        .arg(ws)
        .arg("--store")
        .arg(store)
        .args(["--", "sh", "-c", script])
        .current_dir(ws)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", ws.parent().unwrap())
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

struct Repo {
    _base: tempfile::TempDir,
    /// The workspace: a linked worktree whose `.git` is a file, with a submodule-like
    /// `sub/.git` file and a `link/.git` symlink.
    ws: PathBuf,
    store: PathBuf,
    ids: Option<(u32, u32)>,
}

impl Repo {
    fn new(user: bool) -> Repo {
        let base = tempfile::tempdir().unwrap();
        let root = base.path().canonicalize().unwrap();
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
        let main = root.join("main");
        std::fs::create_dir_all(&main).unwrap();
        git(&main, &["init", "-q", "."]);
        std::fs::write(main.join("a.txt"), "a\n").unwrap();
        git(&main, &["add", "a.txt"]);
        git(&main, &["commit", "-qm", "init"]);
        let ws = root.join("ws");
        git(&main, &["worktree", "add", "-q", ws.to_str().unwrap()]);
        // A submodule checkout's pointer, and a repository reached through a `.git` symlink.
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::fs::write(ws.join("sub/.git"), "gitdir: ../.sub-repo\n").unwrap();
        let linked = ws.join("vendor-repo");
        std::fs::create_dir_all(&linked).unwrap();
        git(&linked, &["init", "-q", "."]);
        std::fs::create_dir_all(ws.join("link")).unwrap();
        std::os::unix::fs::symlink(linked.join(".git"), ws.join("link/.git")).unwrap();
        let ids = user.then(common::test_user);
        if let Some((uid, gid)) = ids {
            chown_tree(&root, uid, gid);
        }
        let store = root.join("state/audit.db");
        std::fs::create_dir_all(store.parent().unwrap()).unwrap();
        if let Some((uid, gid)) = ids {
            chown_tree(&root.join("state"), uid, gid);
        }
        Repo {
            _base: base,
            ws,
            store,
            ids,
        }
    }
}

#[test]
fn a_git_pointer_file_cannot_be_rewritten_from_the_sandbox() {
    for user in [false, true] {
        let repo = Repo::new(user);
        let before = std::fs::read_to_string(repo.ws.join(".git")).unwrap();
        assert!(before.starts_with("gitdir: "), "{before}");
        let out = run(
            &repo.ws,
            &repo.store,
            repo.ids,
            "printf 'gitdir: ./evil\\n' > .git && echo WROTE; \
             printf 'gitdir: ./evil\\n' > sub/.git && echo WROTE-SUB; \
             rm -f .git && echo REMOVED; mv sub/.git sub/old && echo MOVED; \
             echo '[core]' >> link/.git/config && echo WROTE-LINKED; \
             echo ok > a.txt && echo EDITED",
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        for word in ["WROTE\n", "WROTE-SUB", "REMOVED", "MOVED", "WROTE-LINKED"] {
            assert!(
                !stdout.contains(word),
                "user={user}: the command {word}: {stdout} {stderr}"
            );
        }
        // Ordinary work in the worktree still works.
        assert!(stdout.contains("EDITED"), "user={user}: {stdout} {stderr}");
        assert_eq!(
            std::fs::read_to_string(repo.ws.join(".git")).unwrap(),
            before
        );
        assert_eq!(
            std::fs::read_to_string(repo.ws.join("sub/.git")).unwrap(),
            "gitdir: ../.sub-repo\n"
        );
    }
}

#[test]
fn a_write_to_a_git_pointer_asks_in_the_checker() {
    let repo = Repo::new(false);
    for target in [".git", "sub/.git"] {
        let out = Command::new(bin())
            .args(["check", "file_write", target, "--mode", "auto_accept_edits"])
            .arg("--workspace")
            .arg(&repo.ws)
            .output()
            .unwrap();
        let line = String::from_utf8_lossy(&out.stdout);
        assert!(line.starts_with("ask"), "{target}: {line}");
    }
}
