//! One 100-rule policy written three ways: as a turngate policy, as Cedar policies with `like`
//! patterns, and as the bare globset patterns (the floor). Every contestant of the check rows
//! is built from this one definition, and [`Case`] lists the requests they are all asked.

use std::fmt::Write as _;

use turngate::{ActionKind, Effect, Policy};

/// File writes allowed by a rule: `src/mod{i}/*.rs`.
pub const WRITE_RULES: usize = 40;
/// File reads denied by a rule: `secret{i}/*.key`.
pub const READ_RULES: usize = 40;
/// Commands allowed by a rule on the program name: `tool{i}-*`.
pub const COMMAND_RULES: usize = 20;

/// The turngate form. Defaults: read allowed, write and shell ask (no rule matched).
pub fn turngate() -> Policy {
    let mut p = Policy::new()
        .with_default(ActionKind::FileRead, Effect::Allow)
        .with_default(ActionKind::FileWrite, Effect::Ask)
        .with_default(ActionKind::ShellCommand, Effect::Ask)
        .layer("bench");
    for i in 0..WRITE_RULES {
        p = p.allow_write(write_glob(i));
    }
    for i in 0..READ_RULES {
        p = p.deny_read(read_glob(i));
    }
    for i in 0..COMMAND_RULES {
        p = p.allow_exec(command_glob(i));
    }
    p
}

/// The Cedar form: one policy per rule, each a `like` on the request's context, and one more
/// `permit` for turngate's read default. Cedar has no `ask`: where turngate's default asks,
/// Cedar's default denies (neither allows).
pub fn cedar() -> String {
    let mut text = String::new();
    text.push_str("permit(principal, action == Action::\"file_read\", resource);\n");
    for i in 0..WRITE_RULES {
        let _ = writeln!(
            text,
            "permit(principal, action == Action::\"file_write\", resource) \
             when {{ context.path like \"{}\" }};",
            write_glob(i)
        );
    }
    for i in 0..READ_RULES {
        let _ = writeln!(
            text,
            "forbid(principal, action == Action::\"file_read\", resource) \
             when {{ context.path like \"{}\" }};",
            read_glob(i)
        );
    }
    for i in 0..COMMAND_RULES {
        let _ = writeln!(
            text,
            "permit(principal, action == Action::\"shell_command\", resource) \
             when {{ context.program like \"{}\" }};",
            command_glob(i)
        );
    }
    text
}

/// The globset patterns of one kind, in rule order.
pub fn globs(kind: ActionKind) -> Vec<String> {
    match kind {
        ActionKind::FileWrite => (0..WRITE_RULES).map(write_glob).collect(),
        ActionKind::FileRead => (0..READ_RULES).map(read_glob).collect(),
        ActionKind::ShellCommand => (0..COMMAND_RULES).map(command_glob).collect(),
        _ => Vec::new(),
    }
}

fn write_glob(i: usize) -> String {
    format!("src/mod{i}/*.rs")
}

fn read_glob(i: usize) -> String {
    format!("secret{i}/*.key")
}

fn command_glob(i: usize) -> String {
    format!("tool{i}-*")
}

/// One request every contestant is asked.
#[derive(Debug, Clone)]
pub struct Case {
    /// A short id used in row names.
    pub id: &'static str,
    /// The action kind.
    pub kind: ActionKind,
    /// What turngate is handed: a path, or the whole command line.
    pub target: &'static str,
    /// What Cedar and globset are handed: the path, or the program name (neither parses a
    /// command line, so they get the word turngate's parser finds).
    pub matched: &'static str,
    /// turngate's expected effect.
    pub turngate: Effect,
    /// Cedar's expected decision (`true` is allow).
    pub cedar_allows: bool,
    /// Whether a rule matches (a hit) or only the default applies (a miss).
    pub hit: bool,
    /// turngate is handed the program name already parsed (`explain_program`), as Cedar and
    /// globset are: the like-for-like command row. Otherwise it gets `target` through `check`.
    pub program_only: bool,
}

/// The requests: a hit on each rule family, and a miss.
pub fn cases() -> Vec<Case> {
    vec![
        Case {
            id: "write_allow_hit",
            kind: ActionKind::FileWrite,
            target: "src/mod37/handler.rs",
            matched: "src/mod37/handler.rs",
            turngate: Effect::Allow,
            cedar_allows: true,
            hit: true,
            program_only: false,
        },
        Case {
            id: "read_deny_hit",
            kind: ActionKind::FileRead,
            target: "secret12/signing.key",
            matched: "secret12/signing.key",
            turngate: Effect::Deny,
            cedar_allows: false,
            hit: true,
            program_only: false,
        },
        Case {
            id: "command_allow_hit",
            kind: ActionKind::ShellCommand,
            target: "tool7-lint --fix src",
            matched: "tool7-lint",
            turngate: Effect::Allow,
            cedar_allows: true,
            hit: true,
            program_only: false,
        },
        Case {
            id: "program_allow_hit",
            kind: ActionKind::ShellCommand,
            target: "tool7-lint",
            matched: "tool7-lint",
            turngate: Effect::Allow,
            cedar_allows: true,
            hit: true,
            program_only: true,
        },
        Case {
            id: "write_miss",
            kind: ActionKind::FileWrite,
            target: "docs/guide/intro.md",
            matched: "docs/guide/intro.md",
            turngate: Effect::Ask,
            cedar_allows: false,
            hit: false,
            program_only: false,
        },
    ]
}

/// The policy and the cases as JSON, for the Python anchor script.
pub fn emit_json() -> serde_json::Value {
    // Python's API takes the whole line, so the parsed-program case is Rust's alone.
    let cases: Vec<serde_json::Value> = cases()
        .iter()
        .filter(|c| !c.program_only)
        .map(|c| {
            serde_json::json!({
                "id": c.id,
                "kind": c.kind.as_str(),
                "target": c.target,
                "matched": c.matched,
                "context_key": if c.kind == ActionKind::ShellCommand { "program" } else { "path" },
                "turngate": c.turngate.as_str(),
                "cedar_allows": c.cedar_allows,
                "hit": c.hit,
            })
        })
        .collect();
    serde_json::json!({
        "turngate_policy": turngate().to_json_string(),
        "cedar_policies": cedar(),
        "cases": cases,
    })
}
