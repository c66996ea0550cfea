//! The policy file format's JSON Schema is strict. (Its checked-in copy,
//! `schemas/Policy.schema.json`, is verified with every other schema by `snapshot_schema`.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use turngate::Policy;

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
