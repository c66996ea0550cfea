//! `turngate test`, `turngate lint` and `turngate replay`: the core's policy tooling
//! (`turngate::tooling`) rendered for a terminal or as JSON.

use std::path::{Path, PathBuf};

use serde_json::json;
use turngate::audit::AuditStore;
use turngate::tooling::{ReplayOptions, TestFile, lint, replay};
use turngate::{PermissionMode, Policy};

use crate::CliError;

/// Exit status of `replay` when some decision flips.
pub const EXIT_FLIPS: u8 = 4;

/// A mode's policy with an optional policy file merged over it (as `check` and `run` do).
pub fn candidate(mode: Option<&str>, file: Option<&Path>) -> Result<Policy, CliError> {
    let mode = match mode {
        Some(m) => Some(m.parse::<PermissionMode>()?),
        None => None,
    };
    let file = match file {
        Some(f) => Some(Policy::from_path(f)?),
        None => None,
    };
    match (mode, file) {
        (Some(m), Some(f)) => Ok(m.policy().merge(f)),
        (Some(m), None) => Ok(m.policy()),
        (None, Some(f)) => Ok(f),
        (None, None) => Err(CliError("give a policy file, --mode, or both".to_owned())),
    }
}

pub fn run_test(file: &Path, json: bool) -> Result<u8, CliError> {
    let cases = TestFile::from_path(file)?;
    let base = file.parent().unwrap_or_else(|| Path::new("."));
    let report = cases.run(base)?;
    if json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        for case in &report.cases {
            let v = &case.verdict;
            let rule = v.rule.as_ref().map_or("(none)", |r| r.pattern.as_str());
            if case.passed {
                println!(
                    "ok    {}  ({} layer={} rule={rule})",
                    case.name, v.effect, v.layer
                );
            } else {
                println!("FAIL  {}  {}", case.name, case.failures.join("; "));
            }
        }
        println!("{} passed, {} failed", report.passed, report.failed);
    }
    Ok(if report.failed == 0 { 0 } else { 1 })
}

pub fn run_lint(
    policy: &Path,
    mode: Option<&str>,
    strict: bool,
    json: bool,
) -> Result<u8, CliError> {
    let policy = candidate(mode, Some(policy))?;
    // A policy that does not compile is an error, not a lint finding.
    policy.compile()?;
    let findings = lint(&policy);
    if json {
        println!("{}", serde_json::to_string(&json!({"findings": findings}))?);
    } else {
        for f in &findings {
            println!(
                "{:7}  {}  {}  {} {} `{}`: {}",
                f.severity,
                f.code.as_str(),
                f.path,
                f.rule.kind,
                f.rule.effect,
                f.rule.pattern,
                f.message
            );
        }
        println!("{} finding(s)", findings.len());
    }
    Ok(if strict && !findings.is_empty() { 1 } else { 0 })
}

pub struct ReplayArgs<'a> {
    pub policy: &'a Path,
    pub mode: Option<&'a str>,
    pub store: Option<&'a PathBuf>,
    pub turn: Option<&'a str>,
    pub since: Option<&'a str>,
    pub workspace: Option<&'a Path>,
    pub json: bool,
}

pub fn run_replay(args: &ReplayArgs<'_>) -> Result<u8, CliError> {
    if let Some(since) = args.since {
        if turngate::policy::parse_timestamp_us(since).is_none() {
            return Err(CliError(format!(
                "--since `{since}`: expected an RFC 3339 time such as 2026-12-01T09:00:00Z"
            )));
        }
    }
    let policy = candidate(args.mode, Some(args.policy))?.compile()?;
    let store = crate::session::open_existing_store(args.store)?;
    let workspace = match args.workspace {
        Some(w) => Some(
            std::fs::canonicalize(w)
                .map_err(|e| CliError(format!("workspace {}: {e}", w.display())))?
                .to_string_lossy()
                .into_owned(),
        ),
        None => None,
    };
    let options = ReplayOptions {
        turn: args.turn.map(str::to_owned),
        since: args.since.map(str::to_owned),
        workspace,
    };
    let report = replay(store.as_ref() as &dyn AuditStore, &policy, &options)?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        for f in &report.flips {
            let rule = f.rule.as_deref().unwrap_or("(none)");
            println!(
                "{} #{}  {} {}  {} -> {}  layer={} rule={rule} reason={}",
                f.turn_id,
                f.seq,
                f.kind,
                f.target,
                f.before,
                f.after,
                f.layer,
                f.reason.as_str()
            );
        }
        println!(
            "{} of {} recorded decision(s) would flip",
            report.flips.len(),
            report.decisions
        );
    }
    Ok(if report.flips.is_empty() {
        0
    } else {
        EXIT_FLIPS
    })
}
