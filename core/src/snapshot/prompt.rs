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

fn describe(rule: &Rule) -> String {
    let mut s = format!("{} matching `{}`", kind_label(rule.kind), rule.pattern);
    if let Some(tool) = &rule.tool {
        let _ = write!(s, " from tools matching `{tool}`");
    }
    s
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
        let matching: Vec<String> = rules
            .iter()
            .filter(|r| {
                r.effect == effect
                    && !(effect == Effect::Allow && effect_of(r.kind) == Effect::Allow)
            })
            .map(describe)
            .collect();
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
