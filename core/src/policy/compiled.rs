//! The compiled policy: globs built once into per-kind, per-effect glob sets, evaluated by the
//! one function [`CompiledPolicy::explain`]. `check` is `explain(..).effect`.

use std::sync::Arc;

use globset::{Candidate, GlobBuilder, GlobMatcher, GlobSet, GlobSetBuilder};

use crate::action::{Action, ActionKind, Effect};
use crate::error::PolicyError;
use crate::policy::normalize::{
    InvalidTarget, basename, fold_case, fold_platform_separators, nfc, normalize_network_target,
    normalize_path_lexically,
};
use crate::policy::{Policy, Rule};
use crate::shell;
use crate::verdict::{DEFAULTS_LAYER, Reason, Verdict};

/// The layer name reported when the shell parser, not a rule, raised a verdict to ask.
pub const SHELL_LAYER: &str = "shell";
/// The layer name reported when a target could not be normalized.
pub const TARGET_LAYER: &str = "target";

#[derive(Debug)]
struct Entry {
    rule: Arc<Rule>,
    layer: Arc<str>,
    tool: Option<GlobMatcher>,
    /// Position in the policy (layer order, then rule order); the lowest match decides.
    order: usize,
}

/// All rules of one kind and one effect.
#[derive(Debug)]
struct RuleSet {
    globs: GlobSet,
    entries: Vec<Entry>,
    /// Deny and ask sets are compiled case-folded and matched against folded targets.
    folded: bool,
}

impl RuleSet {
    fn empty(folded: bool) -> Self {
        RuleSet {
            globs: GlobSet::empty(),
            entries: Vec::new(),
            folded,
        }
    }

    /// The first (lowest-order) entry matching any candidate, honouring tool filters.
    fn first_match(&self, candidates: &[Candidate<'_>], tool: Option<&str>) -> Option<&Entry> {
        if self.entries.is_empty() {
            return None;
        }
        let mut best: Option<&Entry> = None;
        let mut hits = Vec::new();
        for candidate in candidates {
            if !self.globs.is_match_candidate(candidate) {
                continue;
            }
            self.globs.matches_candidate_into(candidate, &mut hits);
            for &i in &hits {
                let Some(entry) = self.entries.get(i) else {
                    continue;
                };
                let tool_ok = match (&entry.tool, tool) {
                    (None, _) => true,
                    (Some(m), Some(t)) => m.is_match(nfc(t).as_ref()),
                    (Some(_), None) => false,
                };
                if tool_ok && best.is_none_or(|b| entry.order < b.order) {
                    best = Some(entry);
                }
            }
        }
        best
    }
}

#[derive(Debug)]
struct KindRules {
    deny: RuleSet,
    ask: RuleSet,
    allow: RuleSet,
}

#[derive(Debug)]
struct Cap {
    name: Arc<str>,
    policy: CompiledPolicy,
}

/// An immutable, compiled policy. `Send + Sync`; share it behind an `Arc`.
#[derive(Debug)]
pub struct CompiledPolicy {
    source: Policy,
    defaults: [Effect; 11],
    kinds: Vec<KindRules>,
    caps: Vec<Cap>,
    defaults_layer: Arc<str>,
    shell_layer: Arc<str>,
    target_layer: Arc<str>,
}

/// One spelling of a target, ready for matching: exact candidates for allow rules and folded
/// candidates for deny/ask rules.
struct Form {
    exact: Vec<String>,
    folded: Vec<String>,
}

impl Form {
    fn new(candidates: Vec<String>) -> Form {
        let folded = candidates
            .iter()
            .map(|c| fold_case(c).into_owned())
            .collect();
        Form {
            exact: candidates,
            folded,
        }
    }
}

fn compile_pattern(kind: ActionKind, pattern: &str, fold: bool) -> String {
    let p = nfc(pattern);
    let p = fold_platform_separators(&p).into_owned();
    let p = if kind.is_file() {
        // `./secrets/*` means `secrets/*`; a pattern is never resolved further than that,
        // because `..` or `*` in a glob are not path components.
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

fn build_set(
    policy: &Policy,
    kind: ActionKind,
    effect: Effect,
    fold: bool,
) -> Result<RuleSet, PolicyError> {
    let mut builder = GlobSetBuilder::new();
    let mut entries = Vec::new();
    let mut order = 0usize;
    for layer in &policy.layers {
        let layer_name: Arc<str> = Arc::from(layer.name.as_str());
        for rule in &layer.rules {
            order += 1;
            if rule.kind != kind || rule.effect != effect {
                continue;
            }
            let text = compile_pattern(kind, &rule.pattern, fold);
            let glob = GlobBuilder::new(&text)
                .literal_separator(false)
                .backslash_escape(!cfg!(windows))
                .build()
                .map_err(|e| PolicyError::Glob {
                    layer: layer.name.clone(),
                    what: "pattern",
                    pattern: rule.pattern.clone(),
                    message: e.kind().to_string(),
                })?;
            let tool = match &rule.tool {
                None => None,
                Some(t) => Some(
                    GlobBuilder::new(&nfc(t))
                        .literal_separator(false)
                        .build()
                        .map_err(|e| PolicyError::Glob {
                            layer: layer.name.clone(),
                            what: "tool",
                            pattern: t.clone(),
                            message: e.kind().to_string(),
                        })?
                        .compile_matcher(),
                ),
            };
            builder.add(glob);
            entries.push(Entry {
                rule: Arc::new(rule.clone()),
                layer: layer_name.clone(),
                tool,
                order,
            });
        }
    }
    if entries.is_empty() {
        return Ok(RuleSet::empty(fold));
    }
    let globs = builder.build().map_err(|e| PolicyError::Glob {
        layer: "*".to_owned(),
        what: "pattern",
        pattern: String::new(),
        message: e.to_string(),
    })?;
    Ok(RuleSet {
        globs,
        entries,
        folded: fold,
    })
}

impl CompiledPolicy {
    /// Compile `policy` (and its caps, recursively).
    pub fn new(policy: Policy) -> Result<Self, PolicyError> {
        let mut kinds = Vec::with_capacity(ActionKind::ALL.len());
        for kind in ActionKind::ALL {
            kinds.push(KindRules {
                deny: build_set(&policy, kind, Effect::Deny, true)?,
                ask: build_set(&policy, kind, Effect::Ask, true)?,
                allow: build_set(&policy, kind, Effect::Allow, false)?,
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
        Ok(CompiledPolicy {
            source: policy,
            defaults,
            kinds,
            caps,
            defaults_layer: Arc::from(DEFAULTS_LAYER),
            shell_layer: Arc::from(SHELL_LAYER),
            target_layer: Arc::from(TARGET_LAYER),
        })
    }

    /// The policy this was compiled from.
    pub fn policy(&self) -> &Policy {
        &self.source
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
        match self.forms(kind, target) {
            Ok(Targets::Forms(forms)) => self.evaluate(kind, &forms, tool),
            Ok(Targets::Shell(parsed)) => self.evaluate_shell(&parsed, tool),
            Err(_) => self.invalid_target(),
        }
    }

    /// Evaluate several spellings of one target (for files: the lexical and the
    /// symlink-resolved forms, each as given to the policy) and return the strictest verdict.
    /// Checkers call this; each spelling is normalized exactly as `explain` would.
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

    /// Evaluate one already-resolved program name (a `shell_command` simple command).
    pub fn explain_program(&self, program: &str, tool: Option<&str>) -> Verdict {
        let program = fold_platform_separators(program);
        let forms = [Form::new(vec![basename(&program).to_owned()])];
        self.evaluate(ActionKind::ShellCommand, &forms, tool)
    }

    fn invalid_target(&self) -> Verdict {
        Verdict::without_rule(
            Effect::Deny,
            self.target_layer.clone(),
            Reason::InvalidTarget,
        )
    }

    fn forms(&self, kind: ActionKind, target: &str) -> Result<Targets, InvalidTarget> {
        if target.contains('\0') {
            return Err(InvalidTarget("NUL byte in target"));
        }
        Ok(match kind {
            ActionKind::FileRead | ActionKind::FileWrite => {
                let path = normalize_path_lexically(target)?;
                let base = basename(&path);
                let candidates = if base.len() == path.len() {
                    vec![path.to_string()]
                } else {
                    vec![path.to_string(), base.to_owned()]
                };
                Targets::Forms(vec![Form::new(candidates)])
            }
            ActionKind::Network => {
                let t = normalize_network_target(target)?;
                let mut candidates = vec![t.host.clone()];
                candidates.extend(t.host_port());
                Targets::Forms(vec![Form::new(candidates)])
            }
            ActionKind::ShellCommand => Targets::Shell(shell::parse_command_line(target)),
            _ => Targets::Forms(vec![Form::new(vec![nfc(target).into_owned()])]),
        })
    }

    fn evaluate(&self, kind: ActionKind, forms: &[Form], tool: Option<&str>) -> Verdict {
        let mut verdict: Option<Verdict> = None;
        for form in forms {
            let v = self.evaluate_form(kind, form, tool);
            verdict = Some(match verdict {
                Some(prev) => prev.stricter(v),
                None => v,
            });
        }
        let mut verdict = verdict.unwrap_or_else(|| self.invalid_target());
        for cap in &self.caps {
            let capped = cap.policy.evaluate(kind, forms, tool);
            if capped.effect > verdict.effect {
                verdict = Verdict {
                    layer: cap.name.clone(),
                    ..capped
                };
            }
        }
        verdict
    }

    fn evaluate_form(&self, kind: ActionKind, form: &Form, tool: Option<&str>) -> Verdict {
        let Some(rules) = self.kinds.get(kind.index()) else {
            return self.invalid_target();
        };
        for (set, effect, reason) in [
            (&rules.deny, Effect::Deny, Reason::DenyRule),
            (&rules.ask, Effect::Ask, Reason::AskRule),
            (&rules.allow, Effect::Allow, Reason::AllowRule),
        ] {
            let texts = if set.folded {
                &form.folded
            } else {
                &form.exact
            };
            if set.entries.is_empty() {
                continue;
            }
            let candidates: Vec<Candidate<'_>> = texts.iter().map(Candidate::new).collect();
            if let Some(entry) = set.first_match(&candidates, tool) {
                return Verdict {
                    effect,
                    rule: Some(entry.rule.clone()),
                    layer: entry.layer.clone(),
                    reason,
                };
            }
        }
        let effect = self.defaults[kind.index()];
        Verdict::without_rule(effect, self.defaults_layer.clone(), Reason::Default)
    }

    fn evaluate_shell(&self, parsed: &shell::ParsedCommandLine, tool: Option<&str>) -> Verdict {
        let mut verdict: Option<Verdict> = None;
        for command in &parsed.commands {
            let v = self.explain_program(&command.program, tool);
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
            None if parsed.unresolved.is_empty() => self.invalid_target(),
            None => unresolved_floor(),
            Some(v) if !parsed.unresolved.is_empty() && v.effect == Effect::Allow => {
                unresolved_floor()
            }
            Some(v) => v,
        }
    }
}

enum Targets {
    Forms(Vec<Form>),
    Shell(shell::ParsedCommandLine),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiled_policy_is_send_and_sync() {
        fn is<T: Send + Sync>() {}
        is::<CompiledPolicy>();
    }
}
