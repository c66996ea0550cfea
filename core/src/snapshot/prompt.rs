//! The "Current Permissions" section of the model's prompt.
//!
//! It describes the profile to the model: which actions may need approval, which are denied,
//! and that a denied action calls for an allowed alternative. It never grants or refuses
//! anything itself, and it adds nothing for the default unconstrained full-access profile.

use std::fmt::Write as _;

use crate::action::{ActionKind, Effect};
use crate::policy::{PermissionMode, Policy, Rule};
use crate::protocol::TurnPermissionProfileSnapshot;

/// How the model is told about an action kind.
fn kind_label(kind: ActionKind) -> &'static str {
    match kind {
        ActionKind::FileRead => "file reads",
        ActionKind::FileWrite => "file writes",
        ActionKind::ShellCommand => "shell commands",
        ActionKind::Network => "network access",
        ActionKind::McpRead => "MCP reads",
        ActionKind::McpWriteOrUnknown => "MCP writes or unknown MCP calls",
        ActionKind::DynamicSkillTool => "dynamic skill tools",
        ActionKind::ComputerUse => "computer use",
        ActionKind::TaskSubagent => "task and subagent launches",
        ActionKind::Internal => "internal actions",
        ActionKind::Unknown => "unclassified actions",
    }
}

fn join(items: &[&str]) -> String {
    if items.is_empty() {
        "none".to_owned()
    } else {
        items.join(", ")
    }
}

fn rules_of(policy: &Policy, out: &mut Vec<Rule>) {
    for rule in policy.layers.iter().flat_map(|l| l.rules.iter()) {
        if !out.contains(rule) {
            out.push(rule.clone());
        }
    }
    for cap in &policy.caps {
        rules_of(cap, out);
    }
}

/// One line per run of rules that share their kinds and tool filter: `file reads and file
/// writes matching `.env`, `*.pem``, so a built-in layer reads as one sentence, not one line
/// per rule and kind.
fn describe(rules: &[&Rule]) -> Vec<String> {
    // Per pattern and tool, the kinds it governs, in first-seen order.
    let mut per_pattern: Vec<(&str, Option<&str>, Vec<ActionKind>)> = Vec::new();
    for rule in rules {
        let key = (rule.pattern.as_str(), rule.tool.as_deref());
        match per_pattern.iter_mut().find(|(p, t, _)| (*p, *t) == key) {
            Some((_, _, kinds)) if !kinds.contains(&rule.kind) => kinds.push(rule.kind),
            Some(_) => {}
            None => per_pattern.push((key.0, key.1, vec![rule.kind])),
        }
    }
    let mut lines: Vec<(Vec<ActionKind>, Option<&str>, Vec<&str>)> = Vec::new();
    for (pattern, tool, kinds) in per_pattern {
        match lines.last_mut() {
            Some((k, t, patterns)) if *k == kinds && *t == tool => patterns.push(pattern),
            _ => lines.push((kinds, tool, vec![pattern])),
        }
    }
    lines
        .into_iter()
        .map(|(kinds, tool, patterns)| {
            let kinds: Vec<&str> = kinds.into_iter().map(kind_label).collect();
            let patterns: Vec<String> = patterns.iter().map(|p| format!("`{p}`")).collect();
            let mut s = format!("{} matching {}", kinds.join(" and "), patterns.join(", "));
            if let Some(tool) = tool {
                let _ = write!(s, " from tools matching `{tool}`");
            }
            s
        })
        .collect()
}

/// The "Current Permissions" text for `profile`, or `None` for the default unconstrained
/// full-access profile (its policy is exactly the full-access mode's).
pub fn render_permissions_section(profile: &TurnPermissionProfileSnapshot) -> Option<String> {
    if profile.mode == PermissionMode::FullAccess
        && profile.effective_policy == PermissionMode::FullAccess.policy()
    {
        return None;
    }
    let effects = &profile.tool_policy.effects;
    let effect_of = |k: ActionKind| effects.get(&k).copied().unwrap_or(Effect::Ask);
    let by = |e: Effect| -> Vec<&'static str> {
        ActionKind::ALL
            .into_iter()
            .filter(|k| effect_of(*k) == e)
            .map(kind_label)
            .collect()
    };
    let mut rules = Vec::new();
    rules_of(&profile.effective_policy, &mut rules);

    let mut s = String::from("# Current Permissions\n\n");
    let _ = writeln!(
        s,
        "Permission mode: {} (`{}`, source: {}).",
        profile.mode.ui_label(),
        profile.mode.as_str(),
        profile.source.as_str()
    );
    let _ = writeln!(s, "Allowed without approval: {}.", join(&by(Effect::Allow)));
    let _ = writeln!(s, "May need approval: {}.", join(&by(Effect::Ask)));
    let _ = writeln!(s, "Denied: {}.", join(&by(Effect::Deny)));
    for (effect, title) in [
        (Effect::Deny, "Always denied"),
        (Effect::Ask, "Need approval"),
        (Effect::Allow, "Allowed without approval"),
    ] {
        let matching: Vec<&Rule> = rules
            .iter()
            .filter(|r| {
                r.effect == effect
                    && !(effect == Effect::Allow && effect_of(r.kind) == Effect::Allow)
            })
            .collect();
        let matching = describe(&matching);
        if !matching.is_empty() {
            let _ = writeln!(s, "{title}:");
            for m in matching {
                let _ = writeln!(s, "- {m}");
            }
        }
    }
    s.push_str(
        "\nWhen an action needs approval, the user is asked before it runs; wait for the answer \
         instead of retrying.\nWhen an action is denied, do not retry it or work around the \
         restriction: continue with an allowed alternative, or say what you could not do.\n",
    );
    Some(s)
}
