//! End-to-end tests that drive the built `turngate` binary.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
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
    let store = dir.path().join("audit.db");
    Env {
        ws: ws.canonicalize().unwrap(),
        outside: outside.canonicalize().unwrap(),
        store,
        _dir: dir,
    }
}

fn turngate(env: &Env, args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .current_dir(&env.ws)
        .env("XDG_STATE_HOME", env.store.parent().unwrap())
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn store_arg(env: &Env) -> String {
    env.store.to_string_lossy().into_owned()
}

/// `turngate run --mode auto_accept_edits --approver allow -- sh -c SCRIPT` in the workspace.
fn run_auto_accept_edits(env: &Env, script: &str) -> Output {
    let ws = env.ws.to_string_lossy().into_owned();
    turngate(
        env,
        &[
            "run",
            "--mode",
            "auto_accept_edits",
            "--approver",
            "allow",
            "--workspace",
            &ws,
            "--store",
            &store_arg(env),
            "--",
            "sh",
            "-c",
            script,
        ],
    )
}

fn audit_titles(env: &Env, turn: &str) -> Vec<String> {
    let out = turngate(
        env,
        &[
            "audit",
            "--turn",
            turn,
            "--json",
            "--store",
            &store_arg(env),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    rows.as_array()
        .unwrap()
        .iter()
        .map(|r| r["title"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn check_exit_codes_and_json() {
    let env = env();
    let ws = env.ws.to_string_lossy().into_owned();
    let out = turngate(
        &env,
        &[
            "check",
            "file_read",
            "a.txt",
            "--mode",
            "supervised",
            "--workspace",
            &ws,
            "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["effect"], "allow");
    assert_eq!(v["target"]["normalized"], format!("{ws}/a.txt"));

    let out = turngate(
        &env,
        &[
            "check",
            "file_write",
            "a.txt",
            "--mode",
            "supervised",
            "--workspace",
            &ws,
            "--json",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    let out = turngate(
        &env,
        &[
            "check",
            "file_write",
            "/etc/passwd",
            "--mode",
            "auto_accept_edits",
            "--workspace",
            &ws,
            "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(3));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["effect"], "deny");
    assert_eq!(v["reason"], "outside_roots");
    assert!(
        v.get("decided_by").is_none(),
        "only shell lines name a deciding part"
    );

    // A shell line names the part that decided: here the file its redirection writes.
    let out = turngate(
        &env,
        &[
            "check",
            "shell_command",
            "echo x >> /etc/profile",
            "--mode",
            "auto_accept_edits",
            "--workspace",
            &ws,
            "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(3));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["reason"], "outside_roots");
    assert_eq!(
        v["decided_by"],
        "the redirection that writes `/etc/profile`"
    );
}

#[test]
fn bad_input_is_one_line_and_exit_1() {
    let env = env();
    let out = turngate(&env, &["check", "file_raed", "x"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown action kind `file_raed`"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");

    let policy = env.ws.join("bad.toml");
    std::fs::write(&policy, "[defaults]\nfile_read = \"allow\"\n\n[[layers]]\nname = \"p\"\n[[layers.rules]]\nkind = \"file_read\"\nefect = \"deny\"\n").unwrap();
    let out = turngate(
        &env,
        &[
            "check",
            "file_read",
            "x",
            "--policy",
            &policy.to_string_lossy(),
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("efect") && err.contains("line 8") && err.contains("column 1"),
        "{err}"
    );

    let out = turngate(
        &env,
        &["audit", "--store", "/proc/nonexistent/dir/audit.db"],
    );
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn run_allowed_write_inside_the_workspace() {
    let env = env();
    let ws = env.ws.to_string_lossy().into_owned();
    let out = turngate(
        &env,
        &[
            "run",
            "--mode",
            "auto_accept_edits",
            "--approver",
            "allow",
            "--workspace",
            &ws,
            "--store",
            &store_arg(&env),
            "--turn",
            "t-inside",
            "--",
            "sh",
            "-c",
            "echo hello > inside.txt && cat inside.txt",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hello\n");
    assert_eq!(
        std::fs::read_to_string(env.ws.join("inside.txt")).unwrap(),
        "hello\n"
    );
    let titles = audit_titles(&env, "t-inside");
    assert!(
        titles.iter().any(|t| t.contains("Approval requested")),
        "{titles:?}"
    );
}

#[test]
fn run_write_outside_the_roots_is_refused_by_the_kernel() {
    let env = env();
    let target = env.outside.join("escape.txt");
    // `touch` opens the file itself: the policy cannot see it, the kernel must refuse it.
    let script = format!("touch {}", target.display());
    let out = run_auto_accept_edits(&env, &script);
    assert_ne!(out.status.code(), Some(0));
    // The namespace layer's read-only view refuses it (EROFS); Landlock would say EACCES.
    let stderr = String::from_utf8_lossy(&out.stderr);
    let refusal = if turngate::sandbox::namespace::probe().mount {
        "Read-only file system"
    } else {
        "Permission denied"
    };
    assert!(stderr.contains(refusal), "{stderr}");
    assert!(!target.exists(), "the sandbox let a write escape");
}

#[test]
fn run_redirect_outside_the_roots_is_denied_before_it_runs() {
    let env = env();
    let target = env.outside.join("escape.txt");
    let marker = env.ws.join("ran.txt");
    // The shell would open the redirect target itself: the policy judges it as a file write.
    let script = format!(
        "touch {} && echo x > {}",
        marker.display(),
        target.display()
    );
    let out = run_auto_accept_edits(&env, &script);
    assert_eq!(out.status.code(), Some(126));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("outside_roots"), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "the redirection that writes `{}`",
            target.display()
        )),
        "the denial names the file: {stderr}"
    );
    assert!(!marker.exists(), "nothing of a denied line runs");
    assert!(!target.exists());
}

#[test]
fn run_denied_command_exits_126_and_writes_nothing() {
    let env = env();
    let ws = env.ws.to_string_lossy().into_owned();
    let policy = env.ws.join("policy.toml");
    std::fs::write(&policy, "[[layers]]\nname = \"project\"\n[[layers.rules]]\nkind = \"shell_command\"\neffect = \"deny\"\npattern = \"touch\"\n").unwrap();
    let out = turngate(
        &env,
        &[
            "run",
            "--mode",
            "full_access",
            "--policy",
            &policy.to_string_lossy(),
            "--approver",
            "allow",
            "--workspace",
            &ws,
            "--store",
            &store_arg(&env),
            "--turn",
            "t-denied",
            "--",
            "touch",
            "made.txt",
        ],
    );
    assert_eq!(out.status.code(), Some(126));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("denied") && err.contains("touch") && err.contains("project"),
        "{err}"
    );
    assert!(!env.ws.join("made.txt").exists());
    let titles = audit_titles(&env, "t-denied");
    assert!(titles.iter().any(|t| t.starts_with("Denied")), "{titles:?}");
}

/// Answer the tty approver through a real pseudo-terminal (util-linux `script`).
fn run_on_pty(env: &Env, answer: &str, turn: &str) -> (Option<i32>, String) {
    let ws = env.ws.to_string_lossy().into_owned();
    let inner = format!(
        "{} run --mode supervised --approver tty --workspace {ws} --store {} --turn {turn} -- echo ran",
        bin(),
        store_arg(env)
    );
    let mut child = Command::new("script")
        .args(["-qec", &inner, "/dev/null"])
        .current_dir(&env.ws)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("script(1) from util-linux");
    std::thread::sleep(Duration::from_millis(700));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(answer.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn tty_approver_on_a_pseudo_terminal() {
    let env = env();
    let (code, text) = run_on_pty(&env, "y\n", "t-yes");
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("ran"), "{text}");
    let (code, text) = run_on_pty(&env, "n\n", "t-no");
    assert_eq!(code, Some(126), "{text}");
    assert!(!text.contains("\nran"), "{text}");
    assert!(
        audit_titles(&env, "t-yes")
            .iter()
            .any(|t| t.contains("allowed once"))
    );
    assert!(
        audit_titles(&env, "t-no")
            .iter()
            .any(|t| t.starts_with("Denied"))
    );
}

/// The id of the one pending approval, once the waiting `run` has persisted it. Fails with the
/// waiting process's output if it exits first.
fn pending_id(env: &Env, waiting: &mut std::process::Child, deadline: Instant) -> String {
    loop {
        if let Some(status) = waiting.try_wait().unwrap() {
            let mut err = String::new();
            if let Some(mut e) = waiting.stderr.take() {
                std::io::Read::read_to_string(&mut e, &mut err).unwrap();
            }
            panic!("the waiting run exited ({status}) before its request was pending: {err}");
        }
        let out = turngate(
            env,
            &["approvals", "list", "--json", "--store", &store_arg(env)],
        );
        // Until the waiting run has created the store, `list` says it does not exist.
        let v: serde_json::Value = if out.status.success() {
            serde_json::from_slice(&out.stdout).unwrap()
        } else {
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("does not exist"), "{err}");
            serde_json::Value::Null
        };
        if let Some(id) = v[0]["request"]["id"].as_str() {
            return id.to_owned();
        }
        assert!(Instant::now() < deadline, "no pending approval appeared");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn defer_then_resolve_from_a_second_process() {
    let env = env();
    let ws = env.ws.to_string_lossy().into_owned();
    let mut waiting = Command::new(bin())
        .args([
            "run",
            "--mode",
            "auto_accept_edits",
            "--approver",
            "defer",
            "--workspace",
            &ws,
            "--store",
            &store_arg(&env),
            "--turn",
            "t-defer",
            "--",
            "sh",
            "-c",
            "echo deferred > d.txt",
        ])
        .current_dir(&env.ws)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let id = pending_id(&env, &mut waiting, Instant::now() + Duration::from_secs(60));
    let out = turngate(
        &env,
        &[
            "approvals",
            "resolve",
            &id,
            "allow_once",
            "--store",
            &store_arg(&env),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Idempotent: a later resolution returns the recorded one.
    let out = turngate(
        &env,
        &[
            "approvals",
            "resolve",
            &id,
            "deny",
            "--store",
            &store_arg(&env),
        ],
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("already resolved as allow_once"));
    let out = waiting.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(env.ws.join("d.txt")).unwrap(),
        "deferred\n"
    );
    let titles = audit_titles(&env, "t-defer");
    assert!(
        titles.iter().any(|t| t.contains("allowed once")),
        "{titles:?}"
    );
}

#[test]
fn resume_runs_the_command_whose_waiting_run_was_killed() {
    let env = env();
    let ws = env.ws.to_string_lossy().into_owned();
    let mut waiting = Command::new(bin())
        .args([
            "run",
            "--mode",
            "auto_accept_edits",
            "--approver",
            "defer",
            "--workspace",
            &ws,
            "--store",
            &store_arg(&env),
            "--turn",
            "t-resume",
            "--",
            "sh",
            "-c",
            "echo resumed > r.txt",
        ])
        .current_dir(&env.ws)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let id = pending_id(&env, &mut waiting, Instant::now() + Duration::from_secs(60));
    waiting.kill().unwrap();
    waiting.wait().unwrap();
    assert!(!env.ws.join("r.txt").exists());
    let out = turngate(
        &env,
        &[
            "approvals",
            "resume",
            &id,
            "--mode",
            "auto_accept_edits",
            "--workspace",
            &ws,
            "--store",
            &store_arg(&env),
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(env.ws.join("r.txt")).unwrap(),
        "resumed\n"
    );
}
