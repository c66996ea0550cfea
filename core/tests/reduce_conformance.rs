//! Runs every vector of the `reducer*.json` and `scope_hash*.json` conformance suites (see
//! `tests/conformance/README.md`). Bindings run the same files.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests assert by unwrapping

use std::path::{Path, PathBuf};

use serde::Deserialize;
use turngate::Action;
use turngate::approval::ApprovalScope;
use turngate::reduce::{ClientState, ReducerInput, reduce_all};

fn suite_files(prefix: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/conformance");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with(prefix) && name.ends_with(".json")
        })
        .collect();
    files.sort();
    assert!(
        !files.is_empty(),
        "no {prefix}*.json vectors in {}",
        dir.display()
    );
    files
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Suite<V> {
    suite: String,
    version: u32,
    vectors: Vec<V>,
}

fn load<V: for<'de> Deserialize<'de>>(path: &Path, suite: &str) -> Vec<V> {
    let text = std::fs::read_to_string(path).unwrap();
    let s: Suite<V> = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{}: malformed vector file: {e}", path.display()));
    assert_eq!(s.suite, suite, "{}", path.display());
    assert_eq!(s.version, 1, "{}", path.display());
    assert!(!s.vectors.is_empty(), "{}: no vectors", path.display());
    s.vectors
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReducerVector {
    why: String,
    inputs: Vec<ReducerInput>,
    expected: ClientState,
}

#[test]
fn reducer_vectors() {
    let mut count = 0;
    for path in suite_files("reducer") {
        for (i, v) in load::<ReducerVector>(&path, "reducer")
            .into_iter()
            .enumerate()
        {
            assert!(
                !v.why.trim().is_empty(),
                "{} #{i}: every vector needs a why",
                path.display()
            );
            let got = reduce_all(ClientState::default(), &v.inputs);
            assert_eq!(
                got,
                v.expected,
                "{} #{i} ({}):\n got {}\nwant {}",
                path.display(),
                v.why,
                serde_json::to_string_pretty(&got).unwrap(),
                serde_json::to_string_pretty(&v.expected).unwrap()
            );
            // Reducing one input at a time from a serialized state gives the same answer (the
            // state round-trips through JSON, as it does across a binding).
            let stepped = v.inputs.iter().fold(ClientState::default(), |s, input| {
                let s: ClientState =
                    serde_json::from_value(serde_json::to_value(&s).unwrap()).unwrap();
                turngate::reduce::reduce(s, input)
            });
            assert_eq!(stepped, got, "{} #{i}: stepwise", path.display());
            count += 1;
        }
    }
    eprintln!("{count} reducer vectors");
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScopeVector {
    why: String,
    #[serde(default)]
    action: Option<Action>,
    #[serde(default)]
    cwd: Option<String>,
    scope: ApprovalScope,
    scope_hash: String,
}

#[test]
fn scope_hash_vectors() {
    let mut count = 0;
    for path in suite_files("scope_hash") {
        for (i, v) in load::<ScopeVector>(&path, "scope_hash")
            .into_iter()
            .enumerate()
        {
            let at = format!("{} #{i} ({})", path.display(), v.why);
            assert!(!v.why.trim().is_empty(), "{at}: every vector needs a why");
            if let Some(action) = &v.action {
                let scope = ApprovalScope::from_action(action, v.cwd.as_deref())
                    .unwrap_or_else(|e| panic!("{at}: {e}"));
                assert_eq!(scope, v.scope, "{at}: normalized scope");
            }
            assert_eq!(v.scope.scope_hash(), v.scope_hash, "{at}: hash");
            count += 1;
        }
    }
    eprintln!("{count} scope_hash vectors");
}
