//! `turngate test`, `lint` and `replay` end to end, and a `limit` that holds across processes:
//! each `turngate run --turn T` is a new process rebuilding the turn's history from the store.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn turngate(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_turngate"))
        .args(args)
        .current_dir(cwd)
        .env("XDG_STATE_HOME", cwd.join("state"))
        .output()
        .unwrap()
}

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn a_limit_allows_three_runs_and_asks_the_fourth_in_a_new_process() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    // Outside the workspace: a store directly in a writable root refuses the spawn.
    let state = tempfile::tempdir().unwrap();
    let db = state.path().join("audit.db").to_string_lossy().into_owned();
    let policy = fixture("exfil.toml");
    let run = |turn: &str| {
        turngate(
            &[
                "run",
                "--store",
                &db,
                "--turn",
                turn,
                "--policy",
                &policy,
                "--approver",
                "deny",
                "--",
                "true",
            ],
            &ws,
        )
    };
    for i in 0..3 {
        let o = run("t");
        assert_eq!(o.status.code(), Some(0), "run {i}: {}", text(&o));
    }
    let fourth = run("t");
    assert_eq!(fourth.status.code(), Some(126), "{}", text(&fourth));
    assert!(
        text(&fourth).contains("limit_exceeded") || text(&fourth).contains("denied"),
        "{}",
        text(&fourth)
    );
    // Another turn starts its own count.
    assert_eq!(run("u").status.code(), Some(0));

    // Replay: a candidate that denies `true` flips the four allowed runs; the recorded policy
    // flips nothing.
    let same = turngate(&["replay", "--policy", &policy, "--store", &db], &ws);
    assert_eq!(same.status.code(), Some(0), "{}", text(&same));
    std::fs::write(
        ws.join("no-true.toml"),
        "[[layers]]\nname = \"strict\"\n[[layers.rules]]\nkind = \"shell_command\"\neffect = \"deny\"\npattern = \"true\"\n",
    )
    .unwrap();
    let candidate = ws.join("no-true.toml").to_string_lossy().into_owned();
    let o = turngate(
        &[
            "replay", "--policy", &candidate, "--store", &db, "--turn", "t", "--json",
        ],
        &ws,
    );
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let flips = report["flips"].as_array().unwrap();
    // Three allowed runs, and the fourth that asked: all four become deny.
    assert_eq!(flips.len(), 4, "{report}");
    assert!(
        flips
            .iter()
            .all(|f| f["after"] == "deny" && f["layer"] == "strict")
    );
}

#[test]
fn lint_exits_one_with_strict_and_names_each_dead_rule() {
    let dir = tempfile::tempdir().unwrap();
    let dead = fixture("dead-rules.toml");
    let plain = turngate(&["lint", &dead], dir.path());
    assert_eq!(plain.status.code(), Some(0), "{}", text(&plain));
    let strict = turngate(&["lint", &dead, "--strict", "--json"], dir.path());
    assert_eq!(strict.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&strict.stdout).unwrap();
    let codes: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect();
    assert_eq!(
        codes,
        [
            "shadowed_allow",
            "shadowed_ask",
            "unmatchable",
            "duplicate",
            "after_never_met",
            "restrictive_argument_rule"
        ]
    );
    // A malformed limit is an error naming the field, line and column, exit 1.
    std::fs::write(
        dir.path().join("bad.toml"),
        "[[layers]]\nname = \"r\"\n[[layers.rules]]\nkind = \"shell_command\"\neffect = \"allow\"\npattern = \"rm\"\nlimit = {count = 3, per = \"ten minutes\"}\n",
    )
    .unwrap();
    let bad = turngate(&["lint", "bad.toml"], dir.path());
    assert_eq!(bad.status.code(), Some(1));
    let err = text(&bad);
    assert!(
        err.contains("layers[0].rules[0].limit.per") && err.contains("line 7, column 27"),
        "{err}"
    );
}

#[test]
fn test_reports_each_case_and_fails_on_a_wrong_expectation() {
    let dir = tempfile::tempdir().unwrap();
    let ok = turngate(&["test", &fixture("exfil-cases.toml")], dir.path());
    assert_eq!(ok.status.code(), Some(0), "{}", text(&ok));
    assert!(text(&ok).contains("4 passed, 0 failed"));
    std::fs::write(
        dir.path().join("cases.toml"),
        "mode = \"supervised\"\n[[case]]\nkind = \"file_read\"\ntarget = \".env\"\nexpect = \"allow\"\n",
    )
    .unwrap();
    let fail = turngate(&["test", "cases.toml", "--json"], dir.path());
    assert_eq!(fail.status.code(), Some(1), "{}", text(&fail));
    let v: serde_json::Value = serde_json::from_slice(&fail.stdout).unwrap();
    assert_eq!(v["failed"], 1);
    assert_eq!(v["cases"][0]["failures"][0], "expected allow, got deny");
}
