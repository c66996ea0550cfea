//! End to end: lines whose code hides in data (variables, builtins' arguments, streams, the
//! dynamic loader, wrappers, programs that run an option value) are stopped before they run.
//!
//! Each line would create the file `pwned` in the workspace (run by bash directly, each does).
//! The policy allows `echo`, the shells and every wrapper, loader or program the line goes
//! through, but not `touch`, and the shell default is ask; under `--approver deny` an ask is a
//! denial, so `pwned` must not exist. A control line through the same policy does run, so the
//! marker is a real witness.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_turngate")
}

const ALLOWED: &[&str] = &[
    "echo",
    "printf",
    "bash",
    "sh",
    "test",
    "read",
    "let",
    "declare",
    "compgen",
    "mapfile",
    "trap",
    "setpriv",
    "prlimit",
    "nohup",
    "setsid",
    "stdbuf",
    "time",
    "sed",
    "find",
    "xargs",
    "git",
    "awk",
    "tar",
    "true",
    "cat",
    "ld-linux-x86-64.so.2",
];

fn policy_file(dir: &Path) -> PathBuf {
    let mut toml =
        String::from("[defaults]\nshell_command = \"ask\"\n[[layers]]\nname = \"allow-list\"\n");
    for program in ALLOWED {
        toml.push_str(&format!(
            "[[layers.rules]]\nkind = \"shell_command\"\neffect = \"allow\"\npattern = \"{program}\"\n"
        ));
    }
    let path = dir.join("policy.toml");
    std::fs::write(&path, toml).unwrap();
    path
}

/// `turngate run --approver deny -- bash -c LINE` in a fresh workspace; the exit code and
/// whether `pwned` was created.
fn run(line: &str) -> (Option<i32>, bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let ws = ws.canonicalize().unwrap();
    let policy = policy_file(dir.path());
    let store = dir.path().join("audit.db");
    let out: Output = Command::new(bin())
        .args([
            "run",
            "--mode",
            "full_access",
            "--policy",
            &policy.to_string_lossy(),
            "--approver",
            "deny",
            "--workspace",
            &ws.to_string_lossy(),
            "--store",
            &store.to_string_lossy(),
            "--turn",
            "t-round2",
            "--",
            "bash",
            "-c",
            line,
        ])
        .current_dir(&ws)
        .env("XDG_STATE_HOME", dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let ran = ws.join("pwned").exists();
    (
        out.status.code(),
        ran,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn assert_stopped(lines: &[&str]) {
    for line in lines {
        let (code, ran, err) = run(line);
        assert!(!ran, "{line:?} ran: {err}");
        assert_eq!(code, Some(126), "{line:?}: {err}");
    }
}

#[test]
fn the_control_line_runs_so_the_marker_is_a_witness() {
    let (code, ran, err) = run("echo x > pwned");
    assert_eq!(code, Some(0), "{err}");
    assert!(ran, "{err}");
}

#[test]
fn code_stored_in_a_variable_does_not_run() {
    assert_stopped(&[
        "x='$(touch pwned)'; echo ${x@P}",
        "x='a[$(touch pwned)]'; echo $((x))",
        "x='a[$(touch pwned)]'; a=(1); echo ${a[x]}",
        "x='a[$(touch pwned)]'; echo ${x:x}",
    ]);
}

#[test]
fn builtins_that_evaluate_arguments_do_not_run_them() {
    assert_stopped(&[
        "test -v 'a[$(touch pwned)]'",
        "printf -v 'a[$(touch pwned)]' %s x",
        "echo 1 | read 'a[$(touch pwned)]'",
        "let 'a[$(touch pwned)]=1'",
        "declare 'a[$(touch pwned)]=1'",
        "compgen -W '$(touch pwned)' x",
        "echo x | mapfile -C 'touch pwned' -c 1 arr",
        "trap -- 'touch pwned' EXIT",
    ]);
}

#[test]
fn scripts_read_from_a_stream_do_not_run() {
    assert_stopped(&[
        "bash /dev/stdin <<< 'touch pwned'",
        "printf 'touch pwned' | bash /dev/fd/0",
        "bash <(echo touch pwned)",
        "source /dev/stdin <<< 'touch pwned'",
    ]);
}

#[test]
fn the_dynamic_loader_is_a_launcher() {
    assert_stopped(&[
        "/lib64/ld-linux-x86-64.so.2 /usr/bin/touch pwned",
        "exec /lib64/ld-linux-x86-64.so.2 --preload '' /usr/bin/touch pwned",
    ]);
}

#[test]
fn wrappers_are_followed_to_the_command_they_run() {
    assert_stopped(&[
        "setpriv touch pwned",
        "prlimit --nofile=100 touch pwned",
        "nohup setsid stdbuf -oL touch pwned",
        "time -p touch pwned",
    ]);
}

#[test]
fn programs_that_run_an_option_value_ask() {
    assert_stopped(&[
        "echo x | sed 's/x/touch pwned/e'",
        "find . -maxdepth 0 -exec touch pwned \\;",
        "echo pwned | xargs touch",
        "git -c alias.x='!touch pwned' x",
        "awk 'BEGIN{system(\"touch pwned\")}'",
        "echo x > f && tar -cf a.tar f && tar -xf a.tar --to-command='touch pwned'",
    ]);
}

#[test]
fn pure_shell_lines_are_not_denied() {
    let dir = tempfile::tempdir().unwrap();
    let policy = policy_file(dir.path());
    for line in ["[[ -n x ]]", "(( i++ ))", "x=1"] {
        // Judged on its own (`turngate run --` would quote `[[` into a program name).
        let out = Command::new(bin())
            .args(["check", "shell_command", line, "--mode", "full_access"])
            .args(["--policy", &policy.to_string_lossy(), "--json"])
            .args(["--workspace", &dir.path().to_string_lossy()])
            .env("XDG_STATE_HOME", dir.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["effect"], "allow", "{line:?}: {v}");
        assert_eq!(v["layer"], "shell", "{line:?}: {v}");
        let (code, _, err) = run(&format!("{line} || true"));
        assert_eq!(code, Some(0), "{line:?}: {err}");
    }
}

#[test]
fn check_json_names_the_argument_rule_that_matched() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "[defaults]\nshell_command = \"ask\"\n[[layers]]\nname = \"project\"\n[[layers.rules]]\nkind = \"shell_command\"\neffect = \"allow\"\npattern = \"git status\"\n[[layers.rules]]\nkind = \"shell_command\"\neffect = \"allow\"\npattern = \"find\"\n[[layers.rules]]\nkind = \"shell_command\"\neffect = \"allow\"\npattern = \"cat\"\n",
    )
    .unwrap();
    let check = |line: &str| -> (Option<i32>, serde_json::Value) {
        let out = Command::new(bin())
            .args([
                "check",
                "shell_command",
                line,
                "--mode",
                "full_access",
                "--policy",
                &policy.to_string_lossy(),
                "--workspace",
                &ws.to_string_lossy(),
                "--json",
            ])
            .current_dir(&ws)
            .env("XDG_STATE_HOME", dir.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let v = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        (out.status.code(), v)
    };
    let (code, v) = check("git status -s");
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["effect"], "allow");
    assert_eq!(v["rule"]["pattern"], "git status", "{v}");
    assert_eq!(v["layer"], "project");
    let (code, v) = check("git push origin");
    assert_eq!(code, Some(2), "{v}");
    assert_eq!(v["effect"], "ask");
    assert!(v["rule"].is_null(), "{v}");
    // A program that runs code from an argument names that argument.
    let (code, v) = check("git status -s; find . -exec cat {} \\;");
    assert_eq!(code, Some(2), "{v}");
    assert_eq!(
        v["decided_by"], "command `find`, which runs code given in `-exec`",
        "{v}"
    );
}
