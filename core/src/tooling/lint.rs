//! `lint`: rules of a policy that can never take effect, and rules that work differently from
//! how they read.
//!
//! A finding is sound, never a guess: a rule is reported dead only when the reason is certain
//! from the patterns alone (an allow whose every match a deny also matches, a pattern no target
//! of its kind can take, an exact duplicate, an `after` condition that can never be met). So a
//! clean policy, such as every built-in mode's, gets no finding.

use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::action::{ActionKind, Effect};
use crate::policy::glob::glob_regex;
use crate::policy::normalize::fold_case;
use crate::policy::{Policy, Rule};

/// What a finding is about. The wire form is snake_case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LintCode {
    /// An allow rule whose every match a deny or ask rule also matches: it never allows.
    ShadowedAllow,
    /// An ask rule whose every match a deny rule also matches: it never asks.
    ShadowedAsk,
    /// A pattern no target of the rule's kind can take (a URL for `network`, a path for a
    /// program, a trailing `/`, an MCP name without its server, ...).
    Unmatchable,
    /// The same rule again: the later copy never decides.
    Duplicate,
    /// An `after` condition whose actions are always denied: the turn can never have one
    /// allowed, so the rule never applies.
    AfterNeverMet,
    /// A deny or ask argument rule (`git push`): option reordering is not normalized, so it
    /// restricts less than it reads (`git -C . push`). Allow narrowly instead.
    RestrictiveArgumentRule,
}

impl LintCode {
    /// The snake_case wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            LintCode::ShadowedAllow => "shadowed_allow",
            LintCode::ShadowedAsk => "shadowed_ask",
            LintCode::Unmatchable => "unmatchable",
            LintCode::Duplicate => "duplicate",
            LintCode::AfterNeverMet => "after_never_met",
            LintCode::RestrictiveArgumentRule => "restrictive_argument_rule",
        }
    }

    /// Whether the rule can never take effect (an error) or only reads wrong (a warning).
    pub const fn is_dead_rule(self) -> bool {
        !matches!(self, LintCode::RestrictiveArgumentRule)
    }
}

/// One finding about one rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LintFinding {
    /// What is wrong.
    pub code: LintCode,
    /// `error` for a dead rule, `warning` otherwise.
    pub severity: String,
    /// Where the rule is: `layers[i].rules[j]`, with `caps[k].` before it for a cap's rule.
    pub path: String,
    /// The rule's layer.
    pub layer: String,
    /// The rule.
    pub rule: Rule,
    /// The rule that makes it dead, when another rule does (`layer: kind effect pattern`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// The finding in words.
    pub message: String,
}

struct Located<'a> {
    path: String,
    layer: &'a str,
    enforce: bool,
    rule: &'a Rule,
}

fn rules_of<'a>(policy: &'a Policy, prefix: &str) -> Vec<Located<'a>> {
    let mut out = Vec::new();
    for (i, layer) in policy.layers.iter().enumerate() {
        for (j, rule) in layer.rules.iter().enumerate() {
            out.push(Located {
                path: format!("{prefix}layers[{i}].rules[{j}]"),
                layer: &layer.name,
                enforce: layer.enforce,
                rule,
            });
        }
    }
    out
}

/// Every finding of `policy` and its caps (each cap is linted on its own), in rule order.
pub fn lint(policy: &Policy) -> Vec<LintFinding> {
    let mut findings = lint_one(policy, "");
    for (k, cap) in policy.caps.iter().enumerate() {
        findings.extend(lint_one(cap, &format!("caps[{k}].")));
    }
    findings
}

fn describe(l: &Located<'_>) -> String {
    format!(
        "{}: {} {} `{}`",
        l.layer, l.rule.kind, l.rule.effect, l.rule.pattern
    )
}

fn finding(l: &Located<'_>, code: LintCode, by: Option<String>, message: String) -> LintFinding {
    LintFinding {
        code,
        severity: if code.is_dead_rule() {
            "error"
        } else {
            "warning"
        }
        .to_owned(),
        path: l.path.clone(),
        layer: l.layer.to_owned(),
        rule: l.rule.clone(),
        by,
        message,
    }
}

fn lint_one(policy: &Policy, prefix: &str) -> Vec<LintFinding> {
    let rules = rules_of(policy, prefix);
    let mut findings = Vec::new();
    for (i, l) in rules.iter().enumerate() {
        let rule = l.rule;
        if let Some(why) = unmatchable(rule.kind, rule.effect, &rule.pattern) {
            findings.push(finding(
                l,
                LintCode::Unmatchable,
                None,
                format!(
                    "`{}` can never match a {} target: {why}",
                    rule.pattern, rule.kind
                ),
            ));
            continue;
        }
        if !l.enforce {
            // A log-only layer's rules never decide by design.
            continue;
        }
        if let Some(first) = rules[..i].iter().find(|o| o.enforce && o.rule == rule) {
            findings.push(finding(
                l,
                LintCode::Duplicate,
                Some(describe(first)),
                format!("the same rule is already at {}", first.path),
            ));
            continue;
        }
        let stricter: &[Effect] = match rule.effect {
            Effect::Allow => &[Effect::Deny, Effect::Ask],
            Effect::Ask => &[Effect::Deny],
            Effect::Deny => &[],
        };
        if let Some(cover) = rules.iter().find(|o| {
            o.enforce
                && stricter.contains(&o.rule.effect)
                && unconditional(o.rule)
                && covers(o.rule, rule.kind, &rule.pattern, rule.tool.as_deref())
        }) {
            let code = if rule.effect == Effect::Allow {
                LintCode::ShadowedAllow
            } else {
                LintCode::ShadowedAsk
            };
            findings.push(finding(
                l,
                code,
                Some(describe(cover)),
                format!(
                    "every target `{}` matches is also matched by {} rule `{}` in layer `{}`, which wins",
                    rule.pattern, cover.rule.effect, cover.rule.pattern, cover.layer
                ),
            ));
            continue;
        }
        if let Some(after) = &rule.after {
            if let Some(cover) = rules.iter().find(|o| {
                o.enforce
                    && o.rule.effect == Effect::Deny
                    && unconditional(o.rule)
                    && covers(o.rule, after.kind, &after.pattern, None)
            }) {
                findings.push(finding(
                    l,
                    LintCode::AfterNeverMet,
                    Some(describe(cover)),
                    format!(
                        "the condition after {} `{}` is never met: deny rule `{}` in layer `{}` refuses every such action",
                        after.kind, after.pattern, cover.rule.pattern, cover.layer
                    ),
                ));
                continue;
            }
        }
        if rule.kind == ActionKind::ShellCommand
            && rule.effect != Effect::Allow
            && rule.pattern.split_whitespace().count() > 1
        {
            findings.push(finding(
                l,
                LintCode::RestrictiveArgumentRule,
                None,
                format!(
                    "{} argument rule `{}` matches the arguments in this order only (`{}` with an option first escapes it); {} the program, or allow its safe forms narrowly",
                    rule.effect,
                    rule.pattern,
                    rule.pattern.split_whitespace().next().unwrap_or_default(),
                    rule.effect
                ),
            ));
        }
    }
    findings
}

/// A rule that applies whatever the turn did (no `after`; a `limit` only makes an allow
/// stricter, and only allows carry one).
fn unconditional(rule: &Rule) -> bool {
    rule.after.is_none()
}

/// Why no target of `kind` can match `pattern`, if none can.
fn unmatchable(kind: ActionKind, effect: Effect, pattern: &str) -> Option<&'static str> {
    if pattern.trim().is_empty() {
        return Some("the pattern is empty");
    }
    match kind {
        ActionKind::Network => {
            if pattern.contains("://") {
                return Some("network targets are `host` or `host:port`, never a URL");
            }
            if pattern.contains('/') {
                return Some("network targets are `host` or `host:port`, never a path");
            }
            if pattern.ends_with('.') {
                return Some("hosts are matched without their trailing dot");
            }
            if effect == Effect::Allow && pattern.chars().any(char::is_uppercase) {
                return Some("hosts are lowercased, and an allow rule matches exactly");
            }
            None
        }
        ActionKind::ShellCommand => {
            let program = pattern.split_whitespace().next().unwrap_or_default();
            program
                .contains('/')
                .then_some("a program is matched by its basename, which has no `/`")
        }
        ActionKind::FileRead | ActionKind::FileWrite => (pattern.len() > 1
            && (pattern.ends_with('/') || pattern.ends_with("/.")))
        .then_some("normalized paths never end with `/` or `/.`"),
        ActionKind::McpRead | ActionKind::McpWriteOrUnknown => (!pattern.contains('/')
            && !pattern.contains(['*', '?', '[', '{']))
        .then_some("MCP targets are `server/tool`"),
        _ => None,
    }
}

/// Whether the glob has only literals and `*` (so it is a sound coverer).
fn star_only(glob: &str) -> bool {
    !glob.contains(['?', '[', ']', '{', '}', '\\'])
}

/// Whether the glob is safe to read as a literal covered text (only `*` and `?`).
fn plain(glob: &str) -> bool {
    !glob.contains(['[', ']', '{', '}', '\\'])
}

fn glob_matches(glob: &str, text: &str) -> bool {
    glob_regex(glob)
        .ok()
        .and_then(|re| Regex::new(&re).ok())
        .is_some_and(|re| re.is_match(text))
}

/// Whether `cover` matches every target a rule of `kind` with `pattern` (and `tool`) matches.
///
/// Sound, not complete: `cover`'s glob must have only literals and `*`; then if it matches
/// `pattern`'s text read literally, the covered pattern's wildcards all fall inside `cover`'s
/// `*`s, so every expansion matches too.
fn covers(cover: &Rule, kind: ActionKind, pattern: &str, tool: Option<&str>) -> bool {
    if cover.kind != kind {
        return false;
    }
    if cover.tool.is_some() && cover.tool.as_deref() != tool {
        return false;
    }
    let fold = |s: &str| fold_case(s).into_owned();
    let (c, p) = (fold(&cover.pattern), fold(pattern));
    if kind == ActionKind::ShellCommand {
        let mut cw = c.split_whitespace();
        let mut pw = p.split_whitespace();
        let (Some(cprog), Some(pprog)) = (cw.next(), pw.next()) else {
            return false;
        };
        // A single-word cover matches the program whatever its arguments.
        return cw.next().is_none() && covers_text(cprog, pprog);
    }
    if covers_text(&c, &p) {
        return true;
    }
    match kind {
        // A path pattern is also tested against the basename: when every target of the
        // covered pattern ends in the same literal last component, a cover of that
        // component covers it.
        ActionKind::FileRead | ActionKind::FileWrite => match p.rsplit_once('/') {
            Some((_, last)) if !last.is_empty() && !last.contains(['*', '?']) && plain(last) => {
                covers_text(&c, last)
            }
            _ => false,
        },
        // `host` covers `host:port`.
        ActionKind::Network => match p.rsplit_once(':') {
            Some((host, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => {
                covers_text(&c, host)
            }
            _ => false,
        },
        _ => false,
    }
}

fn covers_text(cover: &str, pattern: &str) -> bool {
    cover == pattern || (star_only(cover) && plain(pattern) && glob_matches(cover, pattern))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(kind: ActionKind, effect: Effect, p: &str) -> Rule {
        Rule::new(kind, effect, p)
    }

    #[test]
    fn coverage_is_sound_on_wildcards() {
        let fr = ActionKind::FileRead;
        assert!(covers(
            &r(fr, Effect::Deny, "*.pem"),
            fr,
            "certs/*.pem",
            None
        ));
        assert!(covers(
            &r(fr, Effect::Deny, ".env"),
            fr,
            "config/.env",
            None
        ));
        assert!(!covers(&r(fr, Effect::Deny, "a?c"), fr, "a*c", None));
        assert!(!covers(&r(fr, Effect::Deny, "src/*"), fr, "*", None));
        assert!(!covers(&r(fr, Effect::Deny, ".env"), fr, "config/*", None));
        let net = ActionKind::Network;
        assert!(covers(
            &r(net, Effect::Deny, "*.evil.com"),
            net,
            "api.evil.com:443",
            None
        ));
        assert!(!covers(
            &r(net, Effect::Deny, "evil.com:80"),
            net,
            "evil.com",
            None
        ));
    }
}
