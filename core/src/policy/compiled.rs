//! The compiled policy: every glob translated once (by globset) and gathered per kind into
//! multi-pattern regex sets, evaluated by the one function [`CompiledPolicy::explain`].
//! `check` is `explain(..).effect`. Nothing here is recompiled per call.
//!
//! A `shell_command` pattern of several words is an argument rule: its first word joins the
//! regex set (it matches the program's basename), the others match a prefix of the
//! arguments, one glob per word. An allow word matches only an argument bash passes as
//! written; a deny or ask word also matches an argument that is not static (it could be that
//! word).

use std::borrow::Cow;
use std::cmp::Reverse;
use std::sync::Arc;

use regex::bytes::{RegexSet, RegexSetBuilder};
use regex::{Regex, RegexBuilder};

use crate::action::{Action, ActionKind, Effect};
use crate::error::PolicyError;
use crate::policy::glob::glob_regex;
use crate::policy::normalize::{
    basename, fold_case, fold_platform_separators, nfc, normalize_network_target,
    normalize_path_lexically,
};
use crate::policy::turn::{TurnAction, TurnHistory, Window};
use crate::policy::{Policy, Rule};
use crate::shell;
use crate::verdict::{DEFAULTS_LAYER, Reason, TurnCondition, Verdict, Would};

/// The layer name reported when the shell parser, not a rule, raised a verdict to ask.
pub const SHELL_LAYER: &str = "shell";
/// The layer name reported when a target could not be normalized.
pub const TARGET_LAYER: &str = "target";

#[derive(Debug)]
struct Entry {
    rule: Arc<Rule>,
    layer: Arc<str>,
    tool: Option<Regex>,
    /// Position in the policy (layer order, then rule order); the lowest match decides.
    order: usize,
    /// For an argument rule, the globs of the words after the program, in order.
    words: Vec<Regex>,
    /// Whether `words` were compiled case-folded (deny and ask rules).
    folded: bool,
    /// The rule's `after` condition, compiled.
    after: Option<Matcher>,
    /// The rule's `limit`, compiled.
    limit: Option<CompiledLimit>,
}

/// Whether an earlier action of the turn matches a glob of a kind: the glob compiled as the
/// one deny rule of a policy whose defaults allow, so it matches exactly as a deny rule of
/// that kind would (case-folded, every normalization, any simple command of a line).
#[derive(Debug)]
struct Matcher {
    kind: ActionKind,
    pattern: String,
    policy: Box<CompiledPolicy>,
}

impl Matcher {
    fn new(kind: ActionKind, pattern: &str, tool: Option<&str>) -> Result<Matcher, PolicyError> {
        let mut rule = Rule::new(kind, Effect::Deny, pattern);
        rule.tool = tool.map(str::to_owned);
        let mut policy = Policy::new().layer("turn").rule(rule);
        policy.defaults = crate::policy::Defaults::all(Effect::Allow);
        Ok(Matcher {
            kind,
            pattern: pattern.to_owned(),
            policy: Box::new(CompiledPolicy::new(policy)?),
        })
    }

    fn matches(&self, action: &TurnAction, workspace: Option<&str>) -> bool {
        if action.kind != self.kind {
            return false;
        }
        let tool = action.tool.as_deref();
        let verdict = if self.kind.is_file() {
            let relative = workspace.and_then(|w| relative_to(&action.target, w));
            match relative {
                Some(rel) => self
                    .policy
                    .explain_path(self.kind, &[rel, &action.target], tool),
                None => self.policy.explain_path(self.kind, &[&action.target], tool),
            }
        } else {
            self.policy.explain_parts(self.kind, &action.target, tool)
        };
        verdict.reason == Reason::DenyRule
    }
}

/// `path` relative to `root` when it lies beneath it.
pub(crate) fn relative_to<'a>(path: &'a str, root: &str) -> Option<&'a str> {
    let root = root.trim_end_matches('/');
    let rest = path.strip_prefix(root)?.strip_prefix('/')?;
    (!rest.is_empty()).then_some(rest)
}

#[derive(Debug)]
struct CompiledLimit {
    count: u32,
    per: Window,
    over: Effect,
    /// The rule itself as a matcher: which earlier actions count.
    matcher: Matcher,
}

/// A rule that matched, with its effect once its turn-aware conditions are applied.
struct Hit<'a> {
    entry: &'a Entry,
    effect: Effect,
    reason: Reason,
    condition: Option<TurnCondition>,
}

impl Entry {
    /// The entry's effect in `turn`, or `None` when its `after` condition is not met.
    fn in_turn(&self, turn: Option<&TurnHistory>) -> Option<Hit<'_>> {
        let mut hit = Hit {
            entry: self,
            effect: self.rule.effect,
            reason: match self.rule.effect {
                Effect::Deny => Reason::DenyRule,
                Effect::Ask => Reason::AskRule,
                Effect::Allow => Reason::AllowRule,
            },
            condition: None,
        };
        if self.after.is_none() && self.limit.is_none() {
            return Some(hit);
        }
        let empty = TurnHistory::default();
        let turn = turn.unwrap_or(&empty);
        let workspace = turn.workspace.as_deref();
        if let Some(after) = &self.after {
            let met = turn.actions.iter().find(|a| after.matches(a, workspace))?;
            hit.condition = Some(TurnCondition::After {
                kind: after.kind,
                pattern: after.pattern.clone(),
                matched: met.target.clone(),
            });
        }
        if let Some(limit) = &self.limit {
            let since = turn.now_us.saturating_sub(limit.per.micros());
            let seen = turn
                .actions
                .iter()
                .filter(|a| a.at_us > since && limit.matcher.matches(a, workspace))
                .count();
            let seen = u32::try_from(seen).unwrap_or(u32::MAX);
            if seen >= limit.count {
                hit.effect = hit.effect.stricter(limit.over);
                hit.reason = Reason::LimitExceeded;
            }
            // An `after` condition that applied is the one reported; otherwise the limit.
            if hit.condition.is_none() || hit.reason == Reason::LimitExceeded {
                hit.condition = Some(TurnCondition::Limit {
                    count: limit.count,
                    per: limit.per.to_string(),
                    seen,
                });
            }
        }
        Some(hit)
    }
}

/// The arguments of one simple command, for argument rules.
#[derive(Clone, Copy)]
struct Argv<'a> {
    args: &'a [String],
    args_static: &'a [bool],
}

impl Entry {
    /// Whether the entry's argument words match a prefix of `argv` (always, for a rule of one
    /// word).
    fn matches_args(&self, argv: Option<Argv<'_>>) -> bool {
        if self.words.is_empty() {
            return true;
        }
        let Some(argv) = argv else { return false };
        if argv.args.len() < self.words.len() {
            return false;
        }
        self.words.iter().enumerate().all(|(i, glob)| {
            let fixed = argv.args_static.get(i).copied().unwrap_or(false);
            if !fixed {
                // An allow never matches a word bash computes; a deny or ask always may.
                return self.folded;
            }
            let arg = nfc(&argv.args[i]);
            if self.folded {
                glob.is_match(&fold_case(&arg))
            } else {
                glob.is_match(&arg)
            }
        })
    }
}

/// Rules of one kind compiled into one multi-pattern regex set: one automaton pass per
/// candidate, whatever the rule count. The regexes are globset's own translation of each
/// glob in Unicode mode ([`glob_regex`]): globset's syntax, `?` one character.
#[derive(Debug)]
struct RuleSet {
    set: Option<RegexSet>,
    entries: Vec<Entry>,
}

impl RuleSet {
    /// The matching entry of the strictest effect (lowest order among equals) for any
    /// candidate, honouring tool filters.
    /// `argv` is the simple command's arguments for argument rules (`None` matches no
    /// argument rule); `min_words` skips rules of fewer words (program included).
    fn strictest_match(
        &self,
        candidates: &[&str],
        argv: Option<Argv<'_>>,
        min_words: usize,
        tool: Option<&str>,
        turn: Option<&TurnHistory>,
    ) -> Option<Hit<'_>> {
        let set = self.set.as_ref()?;
        let mut best: Option<Hit<'_>> = None;
        for candidate in candidates {
            let bytes = candidate.as_bytes();
            if !set.is_match(bytes) {
                continue;
            }
            for i in set.matches(bytes).iter() {
                let Some(entry) = self.entries.get(i) else {
                    continue;
                };
                let tool_ok = match (&entry.tool, tool) {
                    (None, _) => true,
                    (Some(m), Some(t)) => m.is_match(nfc(t).as_ref()),
                    (Some(_), None) => false,
                };
                if !tool_ok || entry.words.len() + 1 < min_words || !entry.matches_args(argv) {
                    continue;
                }
                let Some(hit) = entry.in_turn(turn) else {
                    continue;
                };
                let better = best.as_ref().is_none_or(|b| {
                    (hit.effect, Reverse(entry.order)) > (b.effect, Reverse(b.entry.order))
                });
                if better {
                    best = Some(hit);
                }
            }
        }
        best
    }
}

/// What argument rules see of one evaluation.
#[derive(Clone, Copy)]
struct Args<'a> {
    argv: Option<Argv<'a>>,
    /// Allow rules of fewer words (program included) are skipped.
    min_words: usize,
}

#[derive(Debug)]
struct KindRules {
    /// Deny and ask rules, compiled case-folded and matched against folded targets.
    restrict: RuleSet,
    /// Allow rules, matched exactly: an allow never widens because of spelling.
    allow: RuleSet,
}

#[derive(Debug)]
struct Cap {
    name: Arc<str>,
    policy: CompiledPolicy,
}

/// An immutable, compiled policy. `Send + Sync`; share it behind an `Arc`.
///
/// Cloning is cheap (the compiled rules are shared); [`with_turn`](Self::with_turn) gives a
/// clone that judges turn-aware rules against one turn's history.
#[derive(Debug, Clone)]
pub struct CompiledPolicy {
    source: Arc<Policy>,
    defaults: [Effect; 11],
    kinds: Arc<[KindRules]>,
    caps: Arc<[Cap]>,
    /// The same policy with every log-only layer enforced, when it has any.
    shadow: Option<Arc<CompiledPolicy>>,
    turn_aware: bool,
    /// The turn turn-aware rules are judged against (none: an empty history).
    turn: Option<Arc<TurnHistory>>,
    defaults_layer: Arc<str>,
    shell_layer: Arc<str>,
    target_layer: Arc<str>,
}

fn compile_pattern(kind: ActionKind, pattern: &str, fold: bool) -> String {
    let p = nfc(pattern);
    let p = fold_platform_separators(&p).into_owned();
    let p = if kind.is_file() {
        // `./secrets/*` means `secrets/*`, and `a//b` means `a/b`, as for targets. A pattern
        // is never resolved further: `..` or `*` in a glob are not path components.
        let mut p = p.as_str();
        while let Some(rest) = p.strip_prefix("./") {
            p = rest;
        }
        let mut s = p.to_owned();
        while s.contains("//") {
            s = s.replace("//", "/");
        }
        s
    } else {
        p
    };
    if fold { fold_case(&p).into_owned() } else { p }
}

/// A `shell_command` pattern of several words: the program's glob and the arguments' globs.
fn argument_words(kind: ActionKind, pattern: &str) -> Option<(&str, Vec<&str>)> {
    if kind != ActionKind::ShellCommand {
        return None;
    }
    let mut words = pattern.split_whitespace();
    let program = words.next()?;
    let args: Vec<&str> = words.collect();
    (!args.is_empty()).then_some((program, args))
}

/// The number of words of a rule's pattern (an argument rule has more than one).
pub(crate) fn pattern_words(pattern: &str) -> usize {
    pattern.split_whitespace().count().max(1)
}

fn build_set(
    policy: &Policy,
    kind: ActionKind,
    effects: &[Effect],
    fold: bool,
) -> Result<RuleSet, PolicyError> {
    let mut regexes = Vec::new();
    let mut entries = Vec::new();
    let mut order = 0usize;
    for layer in &policy.layers {
        let layer_name: Arc<str> = Arc::from(layer.name.as_str());
        for rule in &layer.rules {
            order += 1;
            if !layer.enforce || rule.kind != kind || !effects.contains(&rule.effect) {
                continue;
            }
            let glob_error =
                |what: &'static str, pattern: &str, message: String| PolicyError::Glob {
                    layer: layer.name.clone(),
                    what,
                    pattern: pattern.to_owned(),
                    message,
                };
            let text = compile_pattern(kind, &rule.pattern, fold);
            let mut words = Vec::new();
            let text = match argument_words(kind, &text) {
                Some((program, args)) => {
                    for word in args {
                        let re = glob_regex(word)
                            .map_err(|e| e.kind().to_string())
                            .and_then(|re| {
                                RegexBuilder::new(&re)
                                    .dot_matches_new_line(true)
                                    .build()
                                    .map_err(|e| e.to_string())
                            })
                            .map_err(|message| glob_error("pattern", &rule.pattern, message))?;
                        words.push(re);
                    }
                    program.to_owned()
                }
                None => text,
            };
            let regex = glob_regex(&text)
                .map_err(|e| glob_error("pattern", &rule.pattern, e.kind().to_string()))?;
            let tool = match &rule.tool {
                None => None,
                Some(t) => Some(
                    glob_regex(&nfc(t))
                        .map_err(|e| e.kind().to_string())
                        .and_then(|re| {
                            RegexBuilder::new(&re)
                                .dot_matches_new_line(true)
                                .build()
                                .map_err(|e| e.to_string())
                        })
                        .map_err(|message| glob_error("tool", t, message))?,
                ),
            };
            let after = match &rule.after {
                None => None,
                Some(a) => Some(Matcher::new(a.kind, &a.pattern, None).map_err(|e| match e {
                    PolicyError::Glob { message, .. } => glob_error("after", &a.pattern, message),
                    other => other,
                })?),
            };
            let limit = match &rule.limit {
                None => None,
                Some(l) => Some(CompiledLimit {
                    count: l.count.get(),
                    per: l.per,
                    over: l.over,
                    matcher: Matcher::new(kind, &rule.pattern, rule.tool.as_deref())?,
                }),
            };
            regexes.push(regex);
            entries.push(Entry {
                rule: Arc::new(rule.clone()),
                layer: layer_name.clone(),
                tool,
                order,
                words,
                folded: fold,
                after,
                limit,
            });
        }
    }
    if entries.is_empty() {
        return Ok(RuleSet { set: None, entries });
    }
    let set = RegexSetBuilder::new(&regexes)
        .dot_matches_new_line(true)
        .size_limit(256 << 20)
        .dfa_size_limit(32 << 20)
        .build()
        .map_err(|e| PolicyError::Glob {
            layer: "*".to_owned(),
            what: "pattern",
            pattern: format!("{} {kind} rules", entries.len()),
            message: e.to_string(),
        })?;
    Ok(RuleSet {
        set: Some(set),
        entries,
    })
}

/// A rule's `limit` or `after` that can never mean anything is an error, never ignored.
fn validate(policy: &Policy) -> Result<(), PolicyError> {
    for layer in &policy.layers {
        for (i, rule) in layer.rules.iter().enumerate() {
            let invalid = |message: String| PolicyError::InvalidRule {
                layer: layer.name.clone(),
                index: i,
                pattern: rule.pattern.clone(),
                message,
            };
            if let Some(limit) = &rule.limit {
                if rule.effect != Effect::Allow {
                    return Err(invalid(format!(
                        "`limit` applies to allow rules only (this rule is {})",
                        rule.effect
                    )));
                }
                if limit.over == Effect::Allow {
                    return Err(invalid(
                        "`limit.over` must be ask or deny (allow past the limit is no limit)"
                            .to_owned(),
                    ));
                }
            }
        }
    }
    Ok(())
}

impl CompiledPolicy {
    /// Compile `policy` (and its caps, recursively).
    pub fn new(policy: Policy) -> Result<Self, PolicyError> {
        validate(&policy)?;
        let mut kinds = Vec::with_capacity(ActionKind::ALL.len());
        for kind in ActionKind::ALL {
            kinds.push(KindRules {
                restrict: build_set(&policy, kind, &[Effect::Deny, Effect::Ask], true)?,
                allow: build_set(&policy, kind, &[Effect::Allow], false)?,
            });
        }
        let defaults = ActionKind::ALL.map(|k| policy.defaults.effective(k));
        let caps = policy
            .caps
            .iter()
            .enumerate()
            .map(|(i, cap)| {
                Ok(Cap {
                    name: Arc::from(cap.name.clone().unwrap_or_else(|| format!("cap[{i}]"))),
                    policy: CompiledPolicy::new(cap.clone())?,
                })
            })
            .collect::<Result<Vec<_>, PolicyError>>()?;
        let shadow = if policy.has_log_only_layers() {
            Some(Arc::new(CompiledPolicy::new(policy.all_enforced())?))
        } else {
            None
        };
        Ok(CompiledPolicy {
            turn_aware: policy.is_turn_aware(),
            source: Arc::new(policy),
            defaults,
            kinds: kinds.into(),
            caps: caps.into(),
            shadow,
            turn: None,
            defaults_layer: Arc::from(DEFAULTS_LAYER),
            shell_layer: Arc::from(SHELL_LAYER),
            target_layer: Arc::from(TARGET_LAYER),
        })
    }

    /// The policy this was compiled from.
    pub fn policy(&self) -> &Policy {
        &self.source
    }

    /// Whether any rule (caps included) depends on the turn's history (`after`, `limit`).
    pub fn is_turn_aware(&self) -> bool {
        self.turn_aware
    }

    /// The same compiled policy judging turn-aware rules against `turn` (cheap: the compiled
    /// rules are shared).
    pub fn with_turn(&self, turn: Arc<TurnHistory>) -> CompiledPolicy {
        CompiledPolicy {
            turn: Some(turn),
            ..self.clone()
        }
    }

    /// [`explain`](Self::explain) in `turn`.
    pub fn explain_in_turn(&self, action: &Action, turn: &TurnHistory) -> Verdict {
        self.with_turn(Arc::new(turn.clone())).explain(action)
    }

    /// Attach what the log-only layers would decide, when it differs from `verdict`.
    fn with_would(
        &self,
        mut verdict: Verdict,
        shadow: impl FnOnce(&CompiledPolicy) -> Verdict,
    ) -> Verdict {
        if let Some(s) = &self.shadow {
            let s = match &self.turn {
                Some(t) => shadow(&s.with_turn(t.clone())),
                None => shadow(s),
            };
            if s.effect != verdict.effect {
                verdict.would = Some(Box::new(Would {
                    effect: s.effect,
                    rule: s.rule.as_ref().map(|r| r.pattern.clone()),
                    layer: s.layer.to_string(),
                    reason: s.reason,
                }));
            }
        }
        verdict
    }

    /// The effect of `action`: exactly `explain(action).effect`.
    pub fn check(&self, action: &Action) -> Effect {
        self.explain(action).effect
    }

    /// The verdict for `action`: its effect, the deciding rule and layer, and the reason.
    pub fn explain(&self, action: &Action) -> Verdict {
        self.explain_parts(action.kind, &action.target, action.tool.as_deref())
    }

    /// [`explain`](Self::explain) without building an [`Action`] (the FFI hot path).
    pub fn explain_parts(&self, kind: ActionKind, target: &str, tool: Option<&str>) -> Verdict {
        let verdict = self.explain_parts_own(kind, target, tool);
        self.with_would(verdict, |s| s.explain_parts_own(kind, target, tool))
    }

    fn explain_parts_own(&self, kind: ActionKind, target: &str, tool: Option<&str>) -> Verdict {
        match kind {
            ActionKind::FileRead | ActionKind::FileWrite => {
                // The normalizer rejects NUL bytes in the same pass that checks the path.
                let Ok(path) = normalize_path_lexically(target) else {
                    return self.invalid_target();
                };
                let folded = fold_case(&path);
                let base = basename(&path);
                let n = if base.len() == path.len() { 1 } else { 2 };
                // ASCII case folding keeps byte offsets, so the folded basename is the same
                // tail; otherwise find it again.
                let folded_base = if folded.len() == path.len() {
                    folded.get(path.len() - base.len()..).unwrap_or(&folded)
                } else {
                    basename(&folded)
                };
                if let Some(plain) = undecorated(folded_base) {
                    // A decorated copy (`.env~`): deny and ask rules match the plain
                    // spellings too, as in `explain_path`.
                    let copy = format!("{}{plain}", &folded[..folded.len() - folded_base.len()]);
                    return self.evaluate(
                        kind,
                        &[&path, base][..n],
                        &[&folded, folded_base, &copy, plain],
                        None,
                        tool,
                    );
                }
                self.evaluate(
                    kind,
                    &[&path, base][..n],
                    &[&folded, folded_base][..n],
                    None,
                    tool,
                )
            }
            _ if target.contains('\0') => self.invalid_target(),
            ActionKind::Network => {
                let Ok(t) = normalize_network_target(target) else {
                    return self.invalid_target();
                };
                // Hosts are already lowercase; the folded candidates are the same strings.
                match t.host_port() {
                    Some(hp) => self.evaluate(kind, &[&t.host, &hp], &[&t.host, &hp], None, tool),
                    None => self.evaluate(kind, &[&t.host], &[&t.host], None, tool),
                }
            }
            ActionKind::ShellCommand => {
                self.evaluate_shell(&shell::parse_command_line(target), tool)
            }
            _ => {
                let exact = nfc(target);
                let folded = fold_case(&exact);
                self.evaluate(kind, &[&exact], &[&folded], None, tool)
            }
        }
    }

    /// Evaluate several spellings of one target (for files: the lexical and the
    /// symlink-resolved forms) and return the strictest verdict. Each spelling is normalized
    /// exactly as `explain` would; on a tie the earlier spelling's verdict is kept.
    pub fn explain_forms(&self, kind: ActionKind, targets: &[&str], tool: Option<&str>) -> Verdict {
        let mut verdict: Option<Verdict> = None;
        for target in targets {
            let v = self.explain_parts(kind, target, tool);
            verdict = Some(match verdict {
                Some(prev) => prev.stricter(v),
                None => v,
            });
        }
        verdict.unwrap_or_else(|| self.invalid_target())
    }

    /// Evaluate one file target given in several spellings of the same path (the
    /// workspace-relative and the absolute one): every spelling and its basename are
    /// candidates of one evaluation, so a deny or ask rule written in either spelling applies.
    pub fn explain_path(
        &self,
        kind: ActionKind,
        spellings: &[&str],
        tool: Option<&str>,
    ) -> Verdict {
        let verdict = self.explain_path_own(kind, spellings, tool);
        self.with_would(verdict, |s| s.explain_path_own(kind, spellings, tool))
    }

    fn explain_path_own(
        &self,
        kind: ActionKind,
        spellings: &[&str],
        tool: Option<&str>,
    ) -> Verdict {
        if !kind.is_file() || spellings.is_empty() {
            return self.invalid_target();
        }
        let mut normalized = Vec::with_capacity(spellings.len());
        for spelling in spellings {
            match normalize_path_lexically(spelling) {
                Ok(p) => normalized.push(p),
                Err(_) => return self.invalid_target(),
            }
        }
        let folded: Vec<Cow<'_, str>> = normalized.iter().map(|p| fold_case(p)).collect();
        // A copy of a file under its usual decorations (`.env~`, `id_rsa.bak`, vim's
        // `..env.swp`, emacs' `#.env#`) holds what the file holds: deny and ask rules match
        // its undecorated spellings too (red team 4 F13). Allow rules do not.
        let copies: Vec<String> = folded
            .iter()
            .filter_map(|f| {
                let base = basename(f);
                undecorated(base).map(|plain| format!("{}{plain}", &f[..f.len() - base.len()]))
            })
            .collect();
        let mut exact: Vec<&str> = Vec::with_capacity(normalized.len() * 2);
        let mut fold: Vec<&str> = Vec::with_capacity(normalized.len() * 2);
        for (p, f) in normalized.iter().zip(&folded) {
            exact.push(p);
            fold.push(f);
        }
        for (p, f) in normalized.iter().zip(&folded) {
            let (base, folded_base) = (basename(p), basename(f));
            if !exact.contains(&base) {
                exact.push(base);
            }
            if !fold.contains(&folded_base) {
                fold.push(folded_base);
            }
        }
        for copy in &copies {
            for p in [copy.as_str(), basename(copy)] {
                if !fold.contains(&p) {
                    fold.push(p);
                }
            }
        }
        self.evaluate(kind, &exact, &fold, None, tool)
    }

    /// Evaluate one already-resolved program name (a `shell_command` simple command): rules
    /// match its basename. Argument rules never match without arguments; prefer
    /// [`explain_command`](Self::explain_command).
    pub fn explain_program(&self, program: &str, tool: Option<&str>) -> Verdict {
        let verdict = self.explain_argv(program, None, 0, tool);
        self.with_would(verdict, |s| s.explain_argv(program, None, 0, tool))
    }

    /// Evaluate one simple command: rules match its program's basename, argument rules a
    /// prefix of its arguments too. A command that runs code given in an argument
    /// ([`shell::SimpleCommand::code_arg`]) is allowed only by an allow rule whose words
    /// reach that argument; otherwise it asks at least.
    pub fn explain_command(&self, command: &shell::SimpleCommand, tool: Option<&str>) -> Verdict {
        let verdict = self.explain_command_own(command, tool);
        self.with_would(verdict, |s| s.explain_command_own(command, tool))
    }

    fn explain_command_own(&self, command: &shell::SimpleCommand, tool: Option<&str>) -> Verdict {
        let argv = Argv {
            args: &command.args,
            args_static: &command.args_static,
        };
        let verdict = self.explain_argv(&command.program, Some(argv), 0, tool);
        let Some(at) = command.code_arg else {
            return verdict;
        };
        if verdict.effect != Effect::Allow {
            return verdict;
        }
        let reaches = |v: &Verdict| {
            v.reason == Reason::AllowRule
                && v.rule
                    .as_ref()
                    .is_some_and(|r| pattern_words(&r.pattern) > at + 1)
        };
        if reaches(&verdict) {
            return verdict;
        }
        let narrow = self.explain_argv(&command.program, Some(argv), at + 2, tool);
        if narrow.effect == Effect::Allow && reaches(&narrow) {
            return narrow;
        }
        Verdict::without_rule(
            Effect::Ask,
            self.shell_layer.clone(),
            Reason::UnresolvedShellConstruct,
        )
    }

    fn explain_argv(
        &self,
        program: &str,
        argv: Option<Argv<'_>>,
        min_words: usize,
        tool: Option<&str>,
    ) -> Verdict {
        if program.is_empty() || program.contains('\0') {
            return self.invalid_target();
        }
        let program = fold_platform_separators(program);
        let exact = nfc(basename(&program));
        let folded = fold_case(&exact);
        let args = Args { argv, min_words };
        let turn = self.turn.as_deref();
        // Deny and ask rules match the basename wherever the program lies (`/usr/bin/rm` is
        // `rm`); an allow rule only where the name means the system's program. `./tools/ls`
        // is whatever the command or the agent wrote there, not `ls` (red team 4 F5).
        let allowable: &[&str] = if names_system_program(&program) {
            &[&exact]
        } else {
            &[]
        };
        self.evaluate_with(
            ActionKind::ShellCommand,
            allowable,
            &[&folded],
            args,
            tool,
            turn,
        )
    }

    fn invalid_target(&self) -> Verdict {
        Verdict::without_rule(
            Effect::Deny,
            self.target_layer.clone(),
            Reason::InvalidTarget,
        )
    }

    fn evaluate(
        &self,
        kind: ActionKind,
        exact: &[&str],
        folded: &[&str],
        argv: Option<Argv<'_>>,
        tool: Option<&str>,
    ) -> Verdict {
        let args = Args { argv, min_words: 0 };
        self.evaluate_with(kind, exact, folded, args, tool, self.turn.as_deref())
    }

    /// The one evaluation: deny/ask rules on the folded candidates, then allow rules on the
    /// exact ones, then the default; then every cap, the strictest verdict winning.
    fn evaluate_with(
        &self,
        kind: ActionKind,
        exact: &[&str],
        folded: &[&str],
        args: Args<'_>,
        tool: Option<&str>,
        turn: Option<&TurnHistory>,
    ) -> Verdict {
        let mut verdict = self.evaluate_own(kind, exact, folded, args, tool, turn);
        for cap in self.caps.iter() {
            let capped = cap
                .policy
                .evaluate_with(kind, exact, folded, args, tool, turn);
            if capped.effect > verdict.effect {
                verdict = Verdict {
                    layer: cap.name.clone(),
                    ..capped
                };
            }
        }
        verdict
    }

    fn evaluate_own(
        &self,
        kind: ActionKind,
        exact: &[&str],
        folded: &[&str],
        args: Args<'_>,
        tool: Option<&str>,
        turn: Option<&TurnHistory>,
    ) -> Verdict {
        let Some(rules) = self.kinds.get(kind.index()) else {
            return self.invalid_target();
        };
        let hit = rules
            .restrict
            .strictest_match(folded, args.argv, 0, tool, turn)
            .or_else(|| {
                rules
                    .allow
                    .strictest_match(exact, args.argv, args.min_words, tool, turn)
            });
        match hit {
            Some(hit) => Verdict {
                effect: hit.effect,
                rule: Some(hit.entry.rule.clone()),
                layer: hit.entry.layer.clone(),
                reason: hit.reason,
                condition: hit.condition.map(Box::new),
                would: None,
            },
            None => Verdict::without_rule(
                self.defaults[kind.index()],
                self.defaults_layer.clone(),
                Reason::Default,
            ),
        }
    }

    fn evaluate_shell(&self, parsed: &shell::ParsedCommandLine, tool: Option<&str>) -> Verdict {
        let mut verdict: Option<Verdict> = None;
        for command in &parsed.commands {
            let v = self.explain_command_own(command, tool);
            verdict = Some(match verdict {
                Some(prev) => prev.stricter(v),
                None => v,
            });
        }
        // A redirection is the shell opening a file: judged as that file action.
        for redirect in parsed.redirects.iter().filter(|r| !r.is_standard_stream()) {
            let kind = if redirect.write {
                ActionKind::FileWrite
            } else {
                ActionKind::FileRead
            };
            let v = self.explain_parts_own(kind, &redirect.path, tool);
            verdict = Some(match verdict {
                Some(prev) => prev.stricter(v),
                None => v,
            });
        }
        let unresolved_floor = || {
            Verdict::without_rule(
                Effect::Ask,
                self.shell_layer.clone(),
                Reason::UnresolvedShellConstruct,
            )
        };
        match verdict {
            // Pure shell (`[[ -n x ]]`, `(( i++ ))`, `x=1`): no program runs, nothing to judge.
            None if parsed.unresolved.is_empty() && !parsed.internal.is_empty() => {
                Verdict::without_rule(Effect::Allow, self.shell_layer.clone(), Reason::Default)
            }
            None if parsed.unresolved.is_empty() => self.invalid_target(),
            None => unresolved_floor(),
            Some(v) if !parsed.unresolved.is_empty() && v.effect == Effect::Allow => {
                unresolved_floor()
            }
            Some(v) => v,
        }
    }
}

/// A file name without the decorations editors and people give a copy of it: a trailing
/// `~`, a backup suffix (`.bak`, `.old`, `.orig`, `.save`, `.backup`, `.tmp`), vim's swap
/// name (`.NAME.swp`), emacs' auto-save and lock names (`#NAME#`, `.#NAME`). `None` when
/// the name has none, or nothing would be left.
fn undecorated(name: &str) -> Option<&str> {
    let mut n = name;
    for _ in 0..3 {
        let before = n;
        if let Some(inner) = n.strip_prefix('#').and_then(|r| r.strip_suffix('#')) {
            n = inner;
        } else if let Some(inner) = n.strip_prefix(".#") {
            n = inner;
        } else if let Some(inner) = [".swp", ".swo", ".swn"]
            .iter()
            .find_map(|s| n.strip_suffix(s))
            .and_then(|r| r.strip_prefix('.'))
        {
            n = inner;
        } else if let Some(inner) = n.strip_suffix('~') {
            n = inner;
        } else if let Some(inner) = [".bak", ".old", ".orig", ".save", ".backup", ".tmp"]
            .iter()
            .find_map(|s| n.strip_suffix(s))
        {
            n = inner;
        }
        if n == before || n.is_empty() {
            break;
        }
    }
    (n != name && !n.is_empty()).then_some(n)
}

/// Whether a program word may be judged by an allow rule for its basename: a bare name
/// (found on the PATH the sandbox rebuilds without the writable roots), or an absolute path
/// without `..` outside the temporary directories. A relative path (`./tools/ls`) is a file
/// in the working directory, whatever the command or the agent wrote there (red team 4 F5);
/// an absolute one inside the turn's writable roots is refused the same way by the process
/// checker, which knows the roots.
fn names_system_program(program: &str) -> bool {
    const TEMP_DIRS: &[&str] = &["/tmp/", "/var/tmp/", "/dev/shm/", "/run/user/"];
    if !program.contains('/') {
        return true;
    }
    program.starts_with('/')
        && !program.split('/').any(|c| c == "..")
        && !TEMP_DIRS.iter().any(|d| program.starts_with(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiled_policy_is_send_and_sync() {
        fn is<T: Send + Sync>() {}
        is::<CompiledPolicy>();
    }

    #[test]
    fn a_bad_glob_names_its_layer_and_pattern() {
        let err = Policy::new()
            .layer("project")
            .deny_read("src/[")
            .compile()
            .map(|_| ())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("project") && err.contains("src/["), "{err}");
    }
}
