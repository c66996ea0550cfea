//! The checked-in JSON Schema of the policy file format must match the one the code generates.
//! Regenerate with `TURNGATE_BLESS=1 cargo test --test schema_policy`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use turngate::Policy;

#[test]
fn policy_schema_is_fresh() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../schemas/Policy.schema.json");
    let generated = serde_json::to_string_pretty(&Policy::json_schema()).expect("schema") + "\n";
    if std::env::var_os("TURNGATE_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write schema");
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "{} is stale; regenerate with TURNGATE_BLESS=1 cargo test --test schema_policy",
        path.display()
    );
}

#[test]
fn policy_schema_rejects_unknown_fields_and_kinds() {
    let schema = Policy::json_schema();
    assert_eq!(schema["additionalProperties"], false, "{schema}");
    let text = schema.to_string();
    for kind in turngate::ActionKind::ALL {
        assert!(
            text.contains(&format!("\"{kind}\"")),
            "schema lacks kind {kind}"
        );
    }
}
