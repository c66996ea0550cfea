//! The checked-in JSON Schemas under `schemas/` must equal the generated ones.
//! Regenerate with `TURNGATE_BLESS=1 cargo test -p turngate --test snapshot_schema`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

fn schema_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../schemas")
}

#[test]
fn checked_in_schemas_are_current() {
    let bless = std::env::var_os("TURNGATE_BLESS").is_some();
    let dir = schema_dir();
    if bless {
        std::fs::create_dir_all(&dir).unwrap();
    }
    let mut stale = Vec::new();
    for (name, schema) in turngate::schema::all() {
        let path = dir.join(format!("{name}.schema.json"));
        let text = serde_json::to_string_pretty(&schema).unwrap() + "\n";
        if bless {
            std::fs::write(&path, &text).unwrap();
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "stale or missing schemas (run with TURNGATE_BLESS=1 to regenerate):\n{}",
        stale.join("\n")
    );
}

#[test]
fn schemas_name_their_type_and_use_snake_case_fields() {
    for (name, schema) in turngate::schema::all() {
        assert_eq!(schema["title"], name, "{name}: schema title");
        if let Some(props) = schema["properties"].as_object() {
            for key in props.keys() {
                assert!(
                    key.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                    "{name}: field `{key}` is not snake_case"
                );
            }
        }
    }
    let snapshot = turngate::schema::get("TurnExecutionSecuritySnapshot").unwrap();
    for field in [
        "permission_profile",
        "sandbox",
        "network",
        "process",
        "approval",
        "backend",
        "enforcement",
        "parent_cap",
    ] {
        assert!(
            snapshot["properties"].get(field).is_some(),
            "snapshot field {field}"
        );
    }
    assert!(turngate::schema::get("NoSuchType").is_none());
}
