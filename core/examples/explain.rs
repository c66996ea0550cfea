//! Explain how a policy decides one action.
//!
//! ```text
//! cargo run -p turngate --example explain -- [--policy FILE] [--mode MODE] KIND TARGET
//! ```
//! Without `--policy`/`--mode` it uses `Policy::default()`. Exits 0 for allow, 2 for ask,
//! 3 for deny and 1 for bad input.

use std::process::ExitCode;

use turngate::{ActionKind, Effect, PermissionMode, Policy};

fn run() -> Result<Effect, String> {
    let mut args = std::env::args().skip(1);
    let mut policy: Option<Policy> = None;
    let mut mode: Option<PermissionMode> = None;
    let mut positional = Vec::new();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--policy" => {
                let file = args.next().ok_or("--policy needs a file")?;
                policy = Some(Policy::from_path(&file).map_err(|e| e.to_string())?);
            }
            "--mode" => {
                let m = args.next().ok_or("--mode needs a mode")?;
                mode = Some(
                    m.parse()
                        .map_err(|e: turngate::PolicyError| e.to_string())?,
                );
            }
            _ => positional.push(arg),
        }
    }
    let [kind, target] = positional.as_slice() else {
        return Err("usage: explain [--policy FILE] [--mode MODE] KIND TARGET".into());
    };
    let kind: ActionKind = kind
        .parse()
        .map_err(|e: turngate::PolicyError| e.to_string())?;
    let policy = match (mode, policy) {
        (Some(m), Some(p)) => m.policy().merge(p),
        (Some(m), None) => m.policy(),
        (None, Some(p)) => p,
        (None, None) => Policy::default(),
    };
    let compiled = policy.compile().map_err(|e| e.to_string())?;
    let verdict = compiled.explain_parts(kind, target, None);
    let rule = verdict.rule.as_ref().map_or("(none)".to_owned(), |r| {
        format!("{} {} {}", r.kind, r.effect, r.pattern)
    });
    println!(
        "{}  layer={} rule={} reason={}",
        verdict.effect,
        verdict.layer,
        rule,
        verdict.reason.as_str()
    );
    Ok(verdict.effect)
}

fn main() -> ExitCode {
    match run() {
        Ok(Effect::Allow) => ExitCode::from(0),
        Ok(Effect::Ask) => ExitCode::from(2),
        Ok(Effect::Deny) => ExitCode::from(3),
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(1)
        }
    }
}
