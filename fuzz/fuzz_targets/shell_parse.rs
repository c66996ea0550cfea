//! The shell parser and the policy's shell evaluation never panic, a line with an unresolved
//! construct is never allowed, and neither is a command that runs code given in an argument
//! (no rule of the permissive policy reaches that argument).
//!
//! Seeds and a dictionary of the constructs the parser resolves:
//! `cargo +nightly fuzz run shell_parse fuzz/seeds/shell_parse -- -dict=fuzz/dict/shell.dict`
//! (`core/tests/adversarial_checkers.rs` replays the seeds in every test run).
#![no_main]

use libfuzzer_sys::fuzz_target;
use turngate::{ActionKind, CompiledPolicy, Effect, Policy};

fuzz_target!(|data: &[u8]| {
    let Ok(line) = std::str::from_utf8(data) else { return };
    let parsed = turngate::shell::parse_command_line(line);
    let policy = CompiledPolicy::new(Policy::permissive()).ok();
    if let Some(policy) = policy {
        let v = policy.explain_parts(ActionKind::ShellCommand, line, None);
        if !parsed.unresolved.is_empty() {
            assert_ne!(v.effect, Effect::Allow, "unresolved construct allowed: {line:?}");
        }
        if parsed.commands.iter().any(|c| c.code_arg.is_some()) {
            assert_ne!(v.effect, Effect::Allow, "code argument allowed: {line:?}");
        }
        for c in &parsed.commands {
            assert_eq!(c.args.len(), c.args_static.len(), "{line:?}");
        }
    }
});
