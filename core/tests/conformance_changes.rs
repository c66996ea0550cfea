//! Runs the `changes_serde` vectors (`tests/conformance/changes_serde.json`): a `ChangeSet`
//! as JSON parses and serializes back unchanged, and a malformed one is refused with a message
//! naming what was wrong. Bindings pass change sets as this JSON; every language's suite runs
//! the same file through its `parse_change_set`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use serde_json::Value;
use turngate::changes::ChangeSet;

#[test]
fn change_set_vectors() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/conformance/changes_serde.json");
    let suite: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(suite["suite"], "changes_serde");
    let vectors = suite["vectors"].as_array().unwrap();
    assert!(!vectors.is_empty());
    for v in vectors {
        let why = v["why"].as_str().unwrap();
        let parsed = serde_json::from_value::<ChangeSet>(v["change_set"].clone());
        match v.get("expect_error").and_then(Value::as_str) {
            Some(needle) => {
                let err = parsed.expect_err(why).to_string();
                assert!(
                    err.contains(needle),
                    "{why}: `{err}` does not name `{needle}`"
                );
            }
            None => {
                let set = parsed.unwrap_or_else(|e| panic!("{why}: {e}"));
                assert_eq!(
                    serde_json::to_value(&set).unwrap(),
                    v["change_set"],
                    "{why}"
                );
            }
        }
    }
}
