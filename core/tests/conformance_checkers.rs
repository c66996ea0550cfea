//! Runs every `tests/conformance/checkers-*.json` vector file through the checkers.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

use serde_json::Value;
use turngate::check::{NetworkPolicyChecker, ProcessSpawnPlan, SpawnRequest, filter_env};
use turngate::protocol::{
    BackendRequirement, EnvInheritance, NetworkMode, SandboxBackendKind, SandboxMode, TmpPolicy,
    TurnFilesystemSnapshot, TurnNetworkPolicySnapshot, TurnProcessPolicySnapshot,
    TurnSandboxSnapshot,
};
use turngate::{ActionKind, CompiledPolicy, Policy};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/conformance")
}

fn files() -> Vec<(PathBuf, Value)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        if name.starts_with("checkers-") && name.ends_with(".json") {
            let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            out.push((path, v));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(out.len() >= 3, "checker vector files missing");
    out
}

fn policy(v: &Value) -> CompiledPolicy {
    CompiledPolicy::new(Policy::from_json_value(v.clone()).unwrap()).unwrap()
}

fn text(v: &Value) -> OsString {
    match v {
        Value::String(s) => OsString::from(s),
        Value::Object(o) => {
            let hex = o["hex"].as_str().unwrap();
            let bytes = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                .collect();
            OsString::from_vec(bytes)
        }
        other => panic!("bad text {other}"),
    }
}

fn sandbox(cwd: &Path) -> TurnSandboxSnapshot {
    TurnSandboxSnapshot {
        mode: SandboxMode::Unrestricted,
        cwd: cwd.to_path_buf(),
        filesystem: TurnFilesystemSnapshot::default(),
        tmp: TmpPolicy::Host,
        network: TurnNetworkPolicySnapshot {
            mode: NetworkMode::Enabled,
            allowed_domains: vec![],
            denied_domains: vec![],
            allow_localhost: false,
            allow_unix_sockets: false,
            allowed_tcp_ports: vec![],
        },
        backend_requirement: BackendRequirement::Optional,
        backend_preference: SandboxBackendKind::None,
    }
}

fn run_network(suite: &Value) -> usize {
    let defaults = &suite["defaults"];
    let mut failures = Vec::new();
    let vectors = suite["vectors"].as_array().unwrap();
    for v in vectors {
        let mut net = defaults["network"].clone();
        if let Some(o) = v.get("network").and_then(Value::as_object) {
            for (k, val) in o {
                net[k] = val.clone();
            }
        }
        let net: TurnNetworkPolicySnapshot = serde_json::from_value(net).unwrap();
        let compiled = policy(v.get("policy").unwrap_or(&defaults["policy"]));
        let checker = NetworkPolicyChecker::new(&net, &compiled);
        let target = v["target"].as_str().unwrap();
        let got = checker.check(target, None).verdict;
        let expect = &v["expect"];
        let ok = got.effect.as_str() == expect["effect"]
            && expect
                .get("reason")
                .is_none_or(|r| got.reason.as_str() == r);
        if !ok {
            failures.push(format!(
                "{target:?} ({}): got {} {}, want {expect}",
                v["why"],
                got.effect,
                got.reason.as_str()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "network failures:\n{}",
        failures.join("\n")
    );
    vectors.len()
}

fn run_shell(suite: &Value) -> usize {
    let compiled = policy(&suite["policy"]);
    let tmp = tempfile::tempdir().unwrap();
    let sb = sandbox(tmp.path());
    let process = TurnProcessPolicySnapshot {
        shell_enabled: true,
        inherit_stdin: false,
        inherit_session: false,
        env: EnvInheritance::Filtered,
        max_duration_ms: Some(1000),
        denied_commands: vec![],
        allowed_command_families: vec![],
    };
    let mut failures = Vec::new();
    let vectors = suite["vectors"].as_array().unwrap();
    for v in vectors {
        let line = v["line"].as_str().unwrap();
        let expect = &v["expect"];
        let explained = compiled.explain_parts(ActionKind::ShellCommand, line, None);
        let plan = ProcessSpawnPlan::build(
            &sb,
            &process,
            &compiled,
            SpawnRequest {
                command_line: line,
                ..Default::default()
            },
        );
        let parsed = turngate::shell::parse_command_line(line);
        let mut why = Vec::new();
        if explained.effect.as_str() != expect["effect"] {
            why.push(format!("explain gave {}", explained.effect));
        }
        if plan.verdict.effect.as_str() != expect["effect"] {
            why.push(format!(
                "plan gave {} ({})",
                plan.verdict.effect,
                plan.verdict.reason.as_str()
            ));
        }
        if let Some(programs) = expect.get("programs_include").and_then(Value::as_array) {
            for p in programs {
                if !parsed
                    .commands
                    .iter()
                    .any(|c| c.program == p.as_str().unwrap())
                {
                    why.push(format!("program {p} not reported"));
                }
            }
        }
        if let Some(unresolved) = expect.get("unresolved_include").and_then(Value::as_array) {
            if unresolved.is_empty() && !parsed.unresolved.is_empty() {
                why.push("expected nothing unresolved".to_owned());
            }
            for u in unresolved {
                if !parsed.unresolved.contains(&u.as_str().unwrap()) {
                    why.push(format!("unresolved {u} not reported"));
                }
            }
        }
        if !why.is_empty() {
            failures.push(format!(
                "{line:?} ({}): {} — parsed {:?}",
                v["why"],
                why.join("; "),
                parsed
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "shell failures:\n{}",
        failures.join("\n")
    );
    vectors.len()
}

fn run_env(suite: &Value) -> usize {
    let mut failures = Vec::new();
    let vectors = suite["vectors"].as_array().unwrap();
    for v in vectors {
        let name = text(&v["name"]);
        let value = text(&v["value"]);
        let mode = match v["mode"].as_str().unwrap() {
            "all" => EnvInheritance::All,
            "none" => EnvInheritance::None,
            _ => EnvInheritance::Filtered,
        };
        let env = filter_env([(name.clone(), value)], mode, Path::new("/w"), &[]);
        let kept = env.vars.iter().any(|(n, _)| *n == name);
        let reason = env.dropped.first().map(|d| d.reason.as_str());
        let expect = &v["expect"];
        let ok =
            expect["kept"] == kept && expect.get("reason").is_none_or(|r| reason == r.as_str());
        if !ok {
            failures.push(format!(
                "{name:?} ({}): kept={kept} reason={reason:?}",
                v["why"]
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "env failures:\n{}",
        failures.join("\n")
    );
    vectors.len()
}

#[test]
fn checker_conformance_vectors() {
    let mut total = 0;
    for (path, suite) in files() {
        total += match suite["suite"].as_str().unwrap() {
            "checkers_network" => run_network(&suite),
            "checkers_shell" => run_shell(&suite),
            "checkers_env" => run_env(&suite),
            other => panic!("{}: unknown suite {other}", path.display()),
        };
    }
    assert!(total >= 120, "only {total} vectors");
}
