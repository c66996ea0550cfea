//! The process spawn plan: what a shell command would run, whether it may, and exactly how to
//! run it (argv, cwd, filtered environment, clamped timeout, stdin and session).
//!
//! [`ProcessSpawnPlan::build`] enforces, in order: shell enablement; per-simple-command policy
//! verdicts (strictest wins, unresolvable constructs ask at least); denied commands and allowed
//! command families; the cwd and every redirection's file through the [`FilePolicyChecker`];
//! environment filtering; the timeout cap; and whether a native sandbox is required. It never
//! spawns anything: a process runner consumes the plan's public fields.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use regex::{RegexSet, RegexSetBuilder};

use crate::action::{ActionKind, Effect};
use crate::check::env::{DroppedVar, filter_env};
use crate::check::file::{FilePolicyChecker, FileRoots};
use crate::policy::CompiledPolicy;
use crate::policy::glob::glob_regex;
use crate::protocol::{
    BackendRequirement, SandboxMode, TurnProcessPolicySnapshot, TurnSandboxSnapshot,
};
use crate::shell::{self, SimpleCommand};
use crate::verdict::{Reason, Verdict};

/// The layer reported when the process policy (not a policy rule) decided.
pub const PROCESS_LAYER: &str = "sandbox.process";
/// The layer reported when an unresolvable shell construct raised the verdict to ask.
pub const SHELL_LAYER: &str = "shell";

/// What the caller wants to run.
#[derive(Debug, Clone, Default)]
pub struct SpawnRequest<'a> {
    /// The command line, as the model wrote it.
    pub command_line: &'a str,
    /// The working directory (relative to the sandbox cwd); `None` for the sandbox cwd.
    pub cwd: Option<&'a Path>,
    /// The environment the child would inherit (usually the current process's).
    pub env: Vec<(OsString, OsString)>,
    /// The requested timeout in milliseconds; clamped to the snapshot's maximum.
    pub timeout_ms: Option<u64>,
    /// The tool name, for rules that filter on it.
    pub tool: Option<&'a str>,
}

/// One simple command of the line and its verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandVerdict {
    /// The command (program and arguments, quoting removed).
    pub command: SimpleCommand,
    /// The strictest of the policy's, the denied list's and the families' answers.
    pub verdict: Verdict,
}

/// One file the shell would open for a redirection, and the file checker's verdict on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedirectVerdict {
    /// The redirection as written.
    pub redirect: shell::Redirect,
    /// The path judged (the target joined to the plan's cwd).
    pub path: PathBuf,
    /// The file checker's verdict (`file_write`, or `file_read` for `<`).
    pub verdict: Verdict,
}

/// A checked plan to run one command line. Run it only when `verdict.effect` is allow (or
/// ask and approved), with exactly these fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessSpawnPlan {
    /// The verdict for the whole line: the strictest of every step.
    pub verdict: Verdict,
    /// What to execute: the words themselves for a plain line, else `[bash, "-c", line]`
    /// (the same grammar the parser used). Empty when the shell is disabled.
    pub argv: Vec<String>,
    /// The resolved working directory.
    pub cwd: PathBuf,
    /// The filtered environment (PATH rebuilt, PWD set to `cwd`). Run with exactly this
    /// environment (clear the inherited one first).
    pub env: Vec<(OsString, OsString)>,
    /// Variables that were dropped and why.
    pub dropped_env: Vec<DroppedVar>,
    /// The wall-clock limit; on expiry the runner kills the whole process tree.
    pub timeout: Option<Duration>,
    /// Whether the child inherits stdin (otherwise it gets `/dev/null`).
    pub inherit_stdin: bool,
    /// Whether the child gets its own session (`setsid`), so the tree can be killed.
    pub new_session: bool,
    /// Whether the runner must wrap the child in the native sandbox.
    pub sandbox_required: bool,
    /// Every simple command found, with its verdict.
    pub commands: Vec<CommandVerdict>,
    /// Every file redirection (standard streams and `/dev/null` excepted), with its verdict.
    pub redirects: Vec<RedirectVerdict>,
    /// The constructs that could not be resolved statically.
    pub unresolved: Vec<&'static str>,
}

impl ProcessSpawnPlan {
    /// True when the plan may run without asking.
    pub fn is_allowed(&self) -> bool {
        self.verdict.effect == Effect::Allow
    }

    /// The part of the line that set a deny or ask verdict, in words (`` command `rm` ``,
    /// `` the redirection that writes `/etc/profile` ``, `not statically resolvable: eval`);
    /// `None` for an allow, or when the verdict came from the line as a whole (the shell
    /// disabled, an invalid line, the cwd).
    pub fn decided_by(&self) -> Option<String> {
        if self.verdict.effect == Effect::Allow {
            return None;
        }
        let same = |v: &Verdict| v.effect == self.verdict.effect && v.reason == self.verdict.reason;
        if let Some(c) = self.commands.iter().find(|c| same(&c.verdict)) {
            let code = c
                .command
                .code_arg
                .and_then(|i| c.command.args.get(i))
                .filter(|_| c.verdict.reason == Reason::UnresolvedShellConstruct);
            return Some(match code {
                Some(arg) => format!(
                    "command `{}`, which runs code given in `{arg}`",
                    c.command.program
                ),
                None => format!("command `{}`", c.command.program),
            });
        }
        if let Some(r) = self.redirects.iter().find(|r| same(&r.verdict)) {
            let what = if r.redirect.write { "writes" } else { "reads" };
            return Some(format!(
                "the redirection that {what} `{}`",
                r.path.display()
            ));
        }
        if self.verdict.reason == Reason::UnresolvedShellConstruct && !self.unresolved.is_empty() {
            return Some(format!(
                "not statically resolvable: {}",
                self.unresolved.join(", ")
            ));
        }
        None
    }

    /// Build the plan for `request` from the turn's snapshot parts and policy.
    pub fn build(
        sandbox: &TurnSandboxSnapshot,
        process: &TurnProcessPolicySnapshot,
        policy: &CompiledPolicy,
        request: SpawnRequest<'_>,
    ) -> ProcessSpawnPlan {
        Self::build_with_roots(sandbox, process, policy, &FileRoots::new(sandbox), request)
    }

    /// [`build`](Self::build) over the turn's roots canonicalized once ([`FileRoots`]).
    pub fn build_with_roots(
        sandbox: &TurnSandboxSnapshot,
        process: &TurnProcessPolicySnapshot,
        policy: &CompiledPolicy,
        roots: &FileRoots,
        request: SpawnRequest<'_>,
    ) -> ProcessSpawnPlan {
        let layer: Arc<str> = Arc::from(PROCESS_LAYER);
        let mut plan = ProcessSpawnPlan {
            verdict: Verdict::without_rule(Effect::Deny, layer.clone(), Reason::ShellDisabled),
            argv: Vec::new(),
            cwd: sandbox.cwd.clone(),
            env: Vec::new(),
            dropped_env: Vec::new(),
            timeout: None,
            inherit_stdin: process.inherit_stdin,
            new_session: !process.inherit_session,
            sandbox_required: sandbox.mode != SandboxMode::Unrestricted
                || sandbox.backend_requirement == BackendRequirement::Required,
            commands: Vec::new(),
            redirects: Vec::new(),
            unresolved: Vec::new(),
        };
        // 1. Shell enablement.
        if !process.shell_enabled {
            return plan;
        }
        let line = request.command_line;
        if line.trim().is_empty() || line.contains('\0') {
            plan.verdict = Verdict::without_rule(Effect::Deny, layer, Reason::InvalidTarget);
            return plan;
        }
        // 2 and 3. Every simple command: policy, denied commands, families.
        let parsed = shell::parse_command_line(line);
        let denied = compile_globs(&process.denied_commands);
        let families = if process.allowed_command_families.is_empty() {
            Ok(RegexSet::empty())
        } else {
            compile_globs(&process.allowed_command_families)
        };
        let mut verdict: Option<Verdict> = None;
        // The writable roots, and the workspace even in a read-only mode (a file written
        // there by an approved edit is still the agent's).
        let mut writable = roots.writable_paths();
        writable.extend(roots.workspace_root().map(Path::to_path_buf));
        let start_dir = request.cwd.unwrap_or(sandbox.cwd.as_path());
        for command in &parsed.commands {
            let base = basename(&command.program).to_lowercase();
            let mut v = policy.explain_command(command, request.tool);
            // An allow rule names a program, not whatever file of that name the command or
            // the agent wrote in a writable root (red team 4 F5): such a path asks.
            if v.reason == Reason::AllowRule && command.program.contains('/') {
                let path = start_dir.join(&command.program);
                if writable.iter().any(|root| path.starts_with(root)) {
                    v = Verdict::without_rule(Effect::Ask, layer.clone(), Reason::Default);
                }
            }
            let denied_hit = match &denied {
                Ok(set) => set.is_match(&base),
                Err(()) => true,
            };
            if denied_hit {
                v = Verdict::without_rule(Effect::Deny, layer.clone(), Reason::DeniedCommand);
            } else if !process.allowed_command_families.is_empty() {
                let in_family = families.as_ref().is_ok_and(|set| set.is_match(&base));
                if !in_family {
                    v = v.stricter(Verdict::without_rule(
                        Effect::Ask,
                        layer.clone(),
                        Reason::NotInCommandFamily,
                    ));
                }
            }
            verdict = Some(match verdict {
                Some(prev) => prev.stricter(v.clone()),
                None => v.clone(),
            });
            plan.commands.push(CommandVerdict {
                command: command.clone(),
                verdict: v,
            });
        }
        let floor = Verdict::without_rule(
            Effect::Ask,
            Arc::from(SHELL_LAYER),
            Reason::UnresolvedShellConstruct,
        );
        let mut verdict = match verdict {
            // Pure shell (`[[ -n x ]]`, `(( i++ ))`, `x=1`): no program runs.
            None if parsed.unresolved.is_empty() && !parsed.internal.is_empty() => {
                Verdict::without_rule(Effect::Allow, Arc::from(SHELL_LAYER), Reason::Default)
            }
            None if parsed.unresolved.is_empty() => {
                Verdict::without_rule(Effect::Deny, layer.clone(), Reason::InvalidTarget)
            }
            None => floor,
            Some(v) if !parsed.unresolved.is_empty() && v.effect == Effect::Allow => floor,
            Some(v) => v,
        };
        plan.unresolved = parsed.unresolved.clone();
        // 4. The cwd must pass the file checker (as a read of a directory).
        let files = FilePolicyChecker::with_roots(sandbox, policy, roots);
        let cwd_request = request.cwd.unwrap_or(sandbox.cwd.as_path());
        let cwd = files.check(ActionKind::FileRead, cwd_request, request.tool);
        match &cwd.resolved {
            Some(resolved) if resolved.is_dir() => plan.cwd = resolved.clone(),
            _ => {
                plan.verdict = match cwd.verdict.effect {
                    Effect::Deny => cwd.verdict,
                    _ => Verdict::without_rule(Effect::Deny, layer, Reason::IoError),
                };
                return plan;
            }
        }
        verdict = verdict.stricter(cwd.verdict);
        // 4b. Every file the shell opens for a redirection, relative to that cwd, is judged
        // exactly as the file tool would judge it (roots, read-only roots, symlinks, rules).
        for redirect in parsed.redirects.iter().filter(|r| !r.is_standard_stream()) {
            let kind = if redirect.write {
                ActionKind::FileWrite
            } else {
                ActionKind::FileRead
            };
            let path = plan.cwd.join(&redirect.path);
            let check = files.check(kind, &path, request.tool);
            verdict = verdict.stricter(check.verdict.clone());
            plan.redirects.push(RedirectVerdict {
                redirect: redirect.clone(),
                path,
                verdict: check.verdict,
            });
        }
        // 5. Environment filtering.
        let untrusted: Vec<PathBuf> = roots.writable_paths();
        let env = filter_env(request.env, process.env, &plan.cwd, &untrusted);
        plan.env = env.vars;
        plan.dropped_env = env.dropped;
        // 6. Timeout cap.
        plan.timeout = match (request.timeout_ms, process.max_duration_ms) {
            (Some(r), Some(m)) => Some(r.min(m)),
            (r, m) => r.or(m),
        }
        .map(Duration::from_millis);
        // The argv: the plain words, or the line through bash.
        let plain_words: Vec<&str> = line.split([' ', '\t']).filter(|w| !w.is_empty()).collect();
        plan.argv = if parsed.plain
            && plain_words
                .first()
                .is_some_and(|w| !shell::is_assignment_word(w))
        {
            plain_words.into_iter().map(str::to_owned).collect()
        } else {
            let shell = if Path::new("/bin/bash").exists() {
                "/bin/bash"
            } else {
                "/bin/sh"
            };
            vec![shell.to_owned(), "-c".to_owned(), line.to_owned()]
        };
        plan.verdict = verdict;
        plan
    }
}

fn basename(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

/// Compile program globs, case-folded (`?` is one character, as in policy rules). `Err` when
/// any pattern is invalid (the caller fails closed for deny lists and ignores grants).
fn compile_globs(patterns: &[String]) -> Result<RegexSet, ()> {
    if patterns.is_empty() {
        return Ok(RegexSet::empty());
    }
    let regexes = patterns
        .iter()
        .map(|p| glob_regex(&p.to_lowercase()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| ())?;
    RegexSetBuilder::new(regexes)
        .dot_matches_new_line(true)
        .build()
        .map_err(|_| ())
}
