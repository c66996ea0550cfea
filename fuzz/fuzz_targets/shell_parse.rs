//! The shell parser and the policy's shell evaluation never panic, and a line with an
//! unresolved construct is never allowed.
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
    }
});
