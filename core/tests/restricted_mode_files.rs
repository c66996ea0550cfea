//! The restricted modes' built-in layers on a real file system: secrets denied and repository
//! hooks protected whatever spelling, symlink or absolute path reaches them, through the
//! FilePolicyChecker of a resolved snapshot. Pure spelling cases live in
//! `tests/conformance/policy.json`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use turngate::check::FilePolicyChecker;
use turngate::probe::probe_platform;
use turngate::protocol::{TurnExecutionSecuritySnapshot, TurnPermissionProfileSelection};
use turngate::snapshot::{ResolveContext, resolve};
use turngate::{ActionKind, CompiledPolicy, Effect, PermissionMode};

struct Turn {
    _tmp: tempfile::TempDir,
    ws: PathBuf,
    snapshot: TurnExecutionSecuritySnapshot,
    policy: CompiledPolicy,
}

/// A workspace with secrets, a git directory and symlinks to both, resolved in `mode`.
fn turn(mode: PermissionMode) -> Turn {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let ws = base.join("ws");
    for d in ["sub/dir", ".git/hooks", ".ssh", ".aws"] {
        std::fs::create_dir_all(ws.join(d)).unwrap();
    }
    for f in [
        ".env",
        "sub/dir/.env",
        ".env.local",
        "server.pem",
        ".ssh/id_ed25519",
        ".aws/credentials",
        ".git/config",
        ".git/hooks/pre-commit.sample",
        "notes.txt",
    ] {
        std::fs::write(ws.join(f), "x").unwrap();
    }
    std::os::unix::fs::symlink(ws.join(".env"), ws.join("innocuous")).unwrap();
    std::os::unix::fs::symlink(ws.join(".git/hooks"), ws.join("hooks")).unwrap();
    std::os::unix::fs::symlink(ws.join(".git/config"), ws.join("settings")).unwrap();
    let mut context = ResolveContext::new(&ws, probe_platform());
    context.home = Some(base.join("home"));
    let snapshot = resolve(
        Some(&TurnPermissionProfileSelection::mode(mode)),
        &context,
        None,
    )
    .unwrap();
    let policy = snapshot
        .permission_profile
        .effective_policy
        .compile()
        .unwrap();
    Turn {
        _tmp: tmp,
        ws,
        snapshot,
        policy,
    }
}

fn effect(t: &Turn, kind: ActionKind, path: impl AsRef<Path>) -> (Effect, String) {
    let checker = FilePolicyChecker::new(&t.snapshot.sandbox, &t.policy);
    let c = checker.check(kind, path, None);
    (c.effect(), c.verdict.layer.to_string())
}

#[test]
fn secrets_are_denied_for_read_and_write_in_both_restricted_modes() {
    for mode in [PermissionMode::Supervised, PermissionMode::AutoAcceptEdits] {
        let t = turn(mode);
        let abs = t.ws.join(".env").display().to_string();
        let spellings = [
            ".env",
            "./.env",
            "sub/dir/.env",
            ".env.local",
            ".ENV",
            "sub/../.env",
            abs.as_str(),
            "innocuous",
            "server.pem",
            ".ssh/id_ed25519",
            ".aws/credentials",
        ];
        for kind in [ActionKind::FileRead, ActionKind::FileWrite] {
            for p in spellings {
                let (e, layer) = effect(&t, kind, p);
                assert_eq!(
                    (e, layer.as_str()),
                    (Effect::Deny, "builtin-secrets"),
                    "{mode} {kind} {p}"
                );
            }
        }
        // Through a directory that does not exist the path cannot be resolved: denied as well.
        assert_eq!(
            effect(&t, ActionKind::FileRead, "a/../.env").0,
            Effect::Deny
        );
        // A secret's name is judged even where the file does not exist yet (a new write).
        let (e, layer) = effect(&t, ActionKind::FileWrite, "sub/.env.production");
        assert_eq!(
            (e, layer.as_str()),
            (Effect::Deny, "builtin-secrets"),
            "{mode}"
        );
        assert_eq!(
            effect(&t, ActionKind::FileRead, "notes.txt").0,
            Effect::Allow,
            "{mode}"
        );
    }
}

#[test]
fn hooks_and_git_config_writes_ask_whatever_the_spelling() {
    let t = turn(PermissionMode::AutoAcceptEdits);
    let abs = t.ws.join(".git/hooks/pre-commit").display().to_string();
    for p in [
        ".git/hooks/pre-commit",
        "./.git/hooks/pre-push",
        ".git//hooks/x",
        ".git/hooks/../config",
        ".git/config",
        abs.as_str(),
        // Through a symlink to the hooks directory and to the config: the resolved form asks.
        "hooks/pre-commit",
        "settings",
    ] {
        let (e, layer) = effect(&t, ActionKind::FileWrite, p);
        assert_eq!(e, Effect::Ask, "{p}: {layer}");
        assert_eq!(layer, "builtin-protected", "{p}");
    }
    // Reading hooks and writing ordinary files stay allowed in auto_accept_edits.
    assert_eq!(
        effect(&t, ActionKind::FileRead, ".git/hooks/pre-commit.sample").0,
        Effect::Allow
    );
    assert_eq!(
        effect(&t, ActionKind::FileWrite, "notes.txt").0,
        Effect::Allow
    );
}

#[test]
fn full_access_stays_unrestricted() {
    let t = turn(PermissionMode::FullAccess);
    assert_eq!(effect(&t, ActionKind::FileRead, ".env").0, Effect::Allow);
    assert_eq!(
        effect(&t, ActionKind::FileWrite, ".git/hooks/pre-commit").0,
        Effect::Allow
    );
}
