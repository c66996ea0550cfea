//! Policy tooling (DESIGN §17): lint finds each kind of dead rule and raises no false alarm on
//! the built-in policies; replay lists exactly the recorded decisions a candidate flips.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::sync::Arc;

use turngate::audit::{
    AuditDecision, AuditEventKind, AuditStore, ProfileSource, SqliteAuditStore,
    TurnPermissionAuditEvent,
};
use turngate::tooling::{LintCode, ReplayOptions, lint, replay};
use turngate::{ActionKind, Effect, PermissionMode, Policy, TieredOptions};

fn fixture(name: &str) -> Policy {
    Policy::from_path(format!(
        "{}/../cli/tests/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

#[test]
fn lint_finds_the_five_kinds_of_dead_rules_and_the_argument_rule_warning() {
    let findings = lint(&fixture("dead-rules.toml"));
    let got: Vec<(LintCode, &str)> = findings.iter().map(|f| (f.code, f.path.as_str())).collect();
    assert_eq!(
        got,
        vec![
            (LintCode::ShadowedAllow, "layers[1].rules[0]"),
            (LintCode::ShadowedAsk, "layers[1].rules[1]"),
            (LintCode::Unmatchable, "layers[1].rules[2]"),
            (LintCode::Duplicate, "layers[1].rules[4]"),
            (LintCode::AfterNeverMet, "layers[1].rules[5]"),
            (LintCode::RestrictiveArgumentRule, "layers[1].rules[6]"),
        ]
    );
    assert!(findings[..5].iter().all(|f| f.severity == "error"));
    assert_eq!(findings[5].severity, "warning");
    assert_eq!(
        findings[0].by.as_deref(),
        Some("base: file_read deny `*.pem`")
    );
}

#[test]
fn lint_raises_no_false_alarm_on_the_built_in_policies() {
    let mut builtins = vec![
        ("default".to_owned(), Policy::default()),
        (
            "tiered".to_owned(),
            Policy::tiered(&TieredOptions {
                test_binary: Some("cargo-test".to_owned()),
                provider_host: Some("api.anthropic.com".to_owned()),
            }),
        ),
        ("permissive".to_owned(), Policy::permissive()),
    ];
    for mode in PermissionMode::ALL {
        builtins.push((mode.to_string(), mode.policy()));
    }
    for (name, policy) in builtins {
        assert_eq!(lint(&policy), vec![], "{name}");
    }
}

#[test]
fn lint_reads_a_log_only_layer_as_never_deciding() {
    let policy = Policy::new()
        .layer("base")
        .deny_read("*.pem")
        .log_only_layer("trial")
        .allow_read("certs/*.pem")
        .deny_net("https://x/");
    let codes: Vec<LintCode> = lint(&policy).iter().map(|f| f.code).collect();
    // The log-only allow is not reported dead; its URL pattern still cannot match.
    assert_eq!(codes, vec![LintCode::Unmatchable]);
}

fn event(turn: &str, kind: AuditEventKind, decision: AuditDecision) -> TurnPermissionAuditEvent {
    let mut e = TurnPermissionAuditEvent::new(
        turn,
        kind,
        PermissionMode::AutoAcceptEdits,
        ProfileSource::Composer,
    );
    e.decision = Some(decision);
    e.decider = Some("policy".to_owned());
    e.timestamp = Some("2026-12-01T08:00:00.000000Z".to_owned());
    e
}

/// 10,000 recorded decisions over 100 turns: reads (every seventh a `.log`), shell commands
/// that asked, and denied secrets.
/// Ten writers share the store's group commits.
fn record(store: &Arc<SqliteAuditStore>) -> BTreeSet<(String, u64)> {
    let writers: Vec<_> = (0..10)
        .map(|w| {
            let store = store.clone();
            std::thread::spawn(move || record_turns(store.as_ref(), w * 10..w * 10 + 10))
        })
        .collect();
    writers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect()
}

fn record_turns(store: &dyn AuditStore, turns: std::ops::Range<usize>) -> BTreeSet<(String, u64)> {
    let mut logs = BTreeSet::new();
    for t in turns {
        let turn = format!("turn-{t:03}");
        store
            .append(event(
                &turn,
                AuditEventKind::ProfileSelected,
                AuditDecision::Allow,
            ))
            .unwrap();
        for i in 0..100 {
            let n = t * 100 + i;
            let mut e = match n % 10 {
                0..=6 => {
                    let mut e = event(&turn, AuditEventKind::DecisionAllowed, AuditDecision::Allow);
                    let ext = if n % 7 == 0 { "log" } else { "rs" };
                    e.action_kind = Some(ActionKind::FileRead);
                    e.target = Some(format!("/w/src/m{n}.{ext}"));
                    e.reason = Some("default".to_owned());
                    e.layer = Some("defaults".to_owned());
                    e
                }
                7 | 8 => {
                    let mut e = event(&turn, AuditEventKind::ApprovalRequested, AuditDecision::Ask);
                    e.action_kind = Some(ActionKind::ShellCommand);
                    e.target = Some(format!("cargo test -p m{n}"));
                    e.reason = Some("default".to_owned());
                    e.request_key = Some(format!("apr_{n}"));
                    e
                }
                _ => {
                    let mut e = event(&turn, AuditEventKind::DecisionDenied, AuditDecision::Deny);
                    e.action_kind = Some(ActionKind::FileRead);
                    e.target = Some("/w/.env".to_owned());
                    e.reason = Some(
                        "deny by rule `.env` (deny_rule) in layer `builtin-secrets`".to_owned(),
                    );
                    e
                }
            };
            e.tool_name = Some("tool".to_owned());
            let is_log = e.target.as_deref().is_some_and(|t| t.ends_with(".log"));
            let seq = store.append(e).unwrap();
            if is_log {
                logs.insert((turn.clone(), seq));
            }
        }
    }
    logs
}

#[test]
fn replay_lists_exactly_the_decisions_a_candidate_flips() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteAuditStore::open(dir.path().join("audit.db")).unwrap());
    let logs = record(&store);
    let recorded = PermissionMode::AutoAcceptEdits.policy();

    // The policy the decisions were made under flips nothing.
    let same = replay(
        store.as_ref(),
        &recorded.compile().unwrap(),
        &ReplayOptions::default(),
    )
    .unwrap();
    assert_eq!((same.decisions, same.flips.len()), (10_000, 0));

    // One more denied pattern flips exactly the reads it matches.
    let candidate = recorded.merge(Policy::new().layer("logs").deny_read("*.log"));
    let report = replay(
        store.as_ref(),
        &candidate.compile().unwrap(),
        &ReplayOptions::default(),
    )
    .unwrap();
    assert_eq!(report.decisions, 10_000);
    let flipped: BTreeSet<(String, u64)> = report
        .flips
        .iter()
        .map(|f| (f.turn_id.clone(), f.seq))
        .collect();
    assert_eq!(flipped, logs);
    assert!(
        report
            .flips
            .iter()
            .all(|f| (f.before, f.after) == (Effect::Allow, Effect::Deny)
                && f.layer == "logs"
                && f.rule.as_deref() == Some("*.log"))
    );

    // --turn narrows it.
    let one = ReplayOptions {
        turn: Some("turn-000".to_owned()),
        ..ReplayOptions::default()
    };
    let report = replay(store.as_ref(), &candidate.compile().unwrap(), &one).unwrap();
    assert_eq!(report.decisions, 100);
    assert_eq!(
        report.flips.len(),
        logs.iter().filter(|(t, _)| t == "turn-000").count()
    );
}

#[test]
fn replay_keeps_a_checkers_refusal_and_sees_turn_aware_rules() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteAuditStore::open(dir.path().join("audit.db")).unwrap();
    // A write outside the roots, refused by the file checker: no policy loosens it.
    let mut outside = event("t", AuditEventKind::DecisionDenied, AuditDecision::Deny);
    outside.action_kind = Some(ActionKind::FileWrite);
    outside.target = Some("/etc/passwd".to_owned());
    outside.reason = Some("deny (outside_roots) in layer `files`".to_owned());
    store.append(outside).unwrap();
    // A read of .env, then a connection, both allowed.
    for (kind, target) in [
        (ActionKind::FileRead, "/w/.env"),
        (ActionKind::Network, "x.com:443"),
    ] {
        let mut e = event("t", AuditEventKind::DecisionAllowed, AuditDecision::Allow);
        e.action_kind = Some(kind);
        e.target = Some(target.to_owned());
        e.reason = Some("default".to_owned());
        store.append(e).unwrap();
    }
    let candidate = Policy::permissive().merge(
        Policy::new()
            .with_default(ActionKind::Network, Effect::Allow)
            .rule(
                turngate::Rule::new(ActionKind::Network, Effect::Ask, "*")
                    .after(ActionKind::FileRead, ".env"),
            ),
    );
    let report = replay(
        &store,
        &candidate.compile().unwrap(),
        &ReplayOptions::default(),
    )
    .unwrap();
    let flips: Vec<(ActionKind, Effect, Effect)> = report
        .flips
        .iter()
        .map(|f| (f.kind, f.before, f.after))
        .collect();
    assert_eq!(
        flips,
        vec![(ActionKind::Network, Effect::Allow, Effect::Ask)]
    );
}
