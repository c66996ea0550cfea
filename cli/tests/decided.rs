//! What runs is what was decided, driven through the `turngate` binary as an attacker would:
//! resume one approval again and again, resume without the sandbox's flags, read a store path
//! that does not exist, and read the audit of a turn with several approved commands.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_turngate")
}

struct Env {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
    store: PathBuf,
}

fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    Env {
        ws: ws.canonicalize().unwrap(),
        outside: outside.canonicalize().unwrap(),
        store: dir.path().join("audit.db"),
        _dir: dir,
    }
}

impl Env {
    fn store(&self) -> String {
        self.store.to_string_lossy().into_owned()
    }

    fn ws(&self) -> String {
        self.ws.to_string_lossy().into_owned()
    }

    fn turngate(&self, args: &[&str]) -> Output {
        Command::new(bin())
            .args(args)
            .current_dir(&self.ws)
            .env("XDG_STATE_HOME", self.store.parent().unwrap())
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// `turngate run --mode auto_accept_edits --approver defer -- sh ARGS...`, waiting.
    fn deferred_run(&self, turn: &str, args: &[&str]) -> Child {
        let ws = self.ws();
        let store = self.store();
        let mut all = vec![
            "run",
            "--mode",
            "auto_accept_edits",
            "--approver",
            "defer",
            "--workspace",
            &ws,
            "--store",
            &store,
            "--turn",
            turn,
            "--",
        ];
        all.extend_from_slice(args);
        Command::new(bin())
            .args(all)
            .current_dir(&self.ws)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// The ids of the pending approvals, once `n` are pending.
    fn pending(&self, n: usize) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let out = self.turngate(&["approvals", "list", "--json", "--store", &self.store()]);
            if out.status.success() {
                let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
                let ids: Vec<String> = v
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| p["request"]["id"].as_str().unwrap().to_owned())
                    .collect();
                if ids.len() >= n {
                    return ids;
                }
            }
            assert!(
                Instant::now() < deadline,
                "{n} pending approvals never appeared"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |s| s.lines().count())
}

/// Defer `sh ARGS` in a run, kill the waiting run, and return the request id.
fn orphaned_request(env: &Env, turn: &str, args: &[&str]) -> String {
    let mut waiting = env.deferred_run(turn, args);
    let id = env.pending(1).pop().unwrap();
    waiting.kill().unwrap();
    waiting.wait().unwrap();
    id
}

#[test]
fn approvals_resume_three_times_runs_the_command_once() {
    let env = env();
    let log = env.ws.join("log.txt");
    let script = format!("echo ran >> {}", log.display());
    let id = orphaned_request(&env, "t-once", &["sh", "-c", &script]);
    let store = env.store();
    let resume = || env.turngate(&["approvals", "resume", &id, "--store", &store]);
    let first = resume();
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    for _ in 0..2 {
        let again = resume();
        assert_eq!(again.status.code(), Some(1), "{}", stderr(&again));
        assert!(
            stderr(&again).contains("already_used"),
            "{}",
            stderr(&again)
        );
    }
    assert_eq!(lines(&log), 1, "one allow_once ran more than once");
}

#[test]
fn approvals_resume_runs_under_the_sandbox_the_request_was_made_under() {
    let env = env();
    let escaped = env.outside.join("escaped.txt");
    // A script hides the write from the policy: the stored sandbox must stop it.
    std::fs::write(
        env.ws.join("w.sh"),
        format!("echo in > in.txt\necho out > {}\n", escaped.display()),
    )
    .unwrap();
    let id = orphaned_request(&env, "t-sandbox", &["sh", "./w.sh"]);
    // No --mode, no --workspace: the resumer's own profile is full access, and still the
    // request's auto_accept_edits sandbox applies.
    let out = env.turngate(&["approvals", "resume", &id, "--store", &env.store()]);
    assert!(env.ws.join("in.txt").exists(), "{}", stderr(&out));
    assert!(
        !escaped.exists(),
        "resume ran the command without its sandbox"
    );
    assert_ne!(out.status.code(), Some(0));
}

#[test]
fn commands_that_read_history_never_create_a_store() {
    let env = env();
    let missing_dir = env.ws.join("nonexistent/dir");
    let missing = missing_dir.join("x.db");
    let m = missing.to_string_lossy().into_owned();
    for args in [
        vec!["audit", "--store", &m],
        vec!["audit", "--json", "--store", &m],
        vec!["approvals", "list", "--store", &m],
        vec!["approvals", "resolve", "apr_x", "deny", "--store", &m],
        vec!["approvals", "resume", "apr_x", "--store", &m],
    ] {
        let out = env.turngate(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(&m), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("does not exist"), "{}", stderr(&out));
        assert!(
            !missing_dir.exists(),
            "{args:?} created {}",
            missing_dir.display()
        );
    }
    // An existing file that is not a directory path typo still opens (and migrates).
    let ran = env.turngate(&[
        "run",
        "--mode",
        "auto_accept_edits",
        "--approver",
        "deny",
        "--workspace",
        &env.ws(),
        "--store",
        &env.store(),
        "--",
        "true",
    ]);
    assert_eq!(ran.status.code(), Some(126), "{}", stderr(&ran));
    let out = env.turngate(&["audit", "--store", &env.store()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn the_audit_of_three_approved_commands_names_each_with_its_time_and_the_reviewers_words() {
    let env = env();
    let store = env.store();
    let commands = ["echo one", "echo two", "echo three"];
    for (i, line) in commands.iter().enumerate() {
        let waiting = env.deferred_run("t-three", &["sh", "-c", line]);
        let id = env.pending(1).pop().unwrap();
        let note = format!("looks fine ({i})");
        let out = env.turngate(&[
            "approvals",
            "resolve",
            &id,
            "allow_once",
            "--reason",
            &note,
            "--by",
            "alice",
            "--store",
            &store,
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        let done = waiting.wait_with_output().unwrap();
        assert_eq!(done.status.code(), Some(0), "{}", stderr(&done));
    }
    let out = env.turngate(&["audit", "--turn", "t-three", "--json", "--store", &store]);
    assert!(out.status.success(), "{}", stderr(&out));
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let resolved: Vec<_> = rows
        .iter()
        .filter(|r| r["kind"] == "approval_resolved")
        .collect();
    assert_eq!(resolved.len(), 3, "{rows:#?}");
    let targets: Vec<_> = resolved.iter().map(|r| r["target"].clone()).collect();
    let want: Vec<_> = commands
        .iter()
        .map(|c| serde_json::json!(format!("sh -c '{c}'")))
        .collect();
    assert_eq!(targets, want);
    let mut stamps = Vec::new();
    for (i, r) in resolved.iter().enumerate() {
        assert_eq!(r["message"], format!("looks fine ({i})"), "{r}");
        assert_eq!(r["decider"], "person:alice", "{r}");
        assert!(
            r["title"]
                .as_str()
                .unwrap()
                .contains(&format!("looks fine ({i})"))
        );
        let ts = r["timestamp"].as_str().unwrap().to_owned();
        assert!(ts.ends_with('Z') && ts.len() == 27, "{ts}");
        stamps.push(ts);
    }
    assert!(stamps[0] < stamps[1] && stamps[1] < stamps[2], "{stamps:?}");
    // The text form shows them too.
    let text = env.turngate(&["audit", "--turn", "t-three", "--store", &store]);
    let text = String::from_utf8_lossy(&text.stdout);
    for c in commands {
        assert!(text.contains(c), "{text}");
    }
}

#[test]
fn a_home_workspace_is_refused_unless_the_caller_opts_in() {
    let env = env();
    // HOME is the workspace: a restricted mode refuses it, naming the path; the flag accepts it.
    let check = |extra: &[&str]| {
        let mut args = vec![
            "check",
            "file_read",
            "a.txt",
            "--mode",
            "supervised",
            "--workspace",
        ];
        let ws = env.ws();
        args.push(&ws);
        args.extend_from_slice(extra);
        Command::new(bin())
            .args(&args)
            .env("HOME", &env.ws)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let refused = check(&[]);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert!(stderr(&refused).contains(&env.ws()), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("allow_home_workspace"),
        "{}",
        stderr(&refused)
    );
    let accepted = check(&["--allow-home-workspace"]);
    assert_eq!(accepted.status.code(), Some(0), "{}", stderr(&accepted));
    // A missing workspace is an error naming it, not a turn where everything is denied.
    let missing = env.ws.join("nope");
    let out = Command::new(bin())
        .args([
            "check",
            "file_read",
            "a.txt",
            "--mode",
            "supervised",
            "--workspace",
        ])
        .arg(&missing)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("nope"), "{}", stderr(&out));
}
