//! The JSON Schemas of the facade's records, as they serialize (what a binding hands its
//! caller), in one document: `{"roots": {LanguageName: {"$ref": ...}}, "$defs": {...}}`.
//! `scripts/gen-python-types` renders the Python TypedDicts from it.
//! `cargo run -q -p turngate-ffi --example record_schemas`

use schemars::generate::SchemaSettings;
use serde_json::{Map, Value};
use turngate_ffi::approver::ApprovalAskRecord;
use turngate_ffi::changes::ChangeSetSummaryRecord;
use turngate_ffi::check::{
    EvaluationRecord, FileCheckRecord, InvocationRecord, NetworkCheckRecord,
    NetworkResolutionRecord, ParsedCommandLineRecord,
};
use turngate_ffi::gate::{AuthorizationRecord, DenialRecord, SpawnRecord};
use turngate_ffi::policy::{ActionRecord, RuleRecord, VerdictRecord};
use turngate_ffi::tools::ToolOutcomeRecord;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The serialize contract: a field is required when it is always written, so `required`
    // says which keys a caller can count on.
    let mut generator = SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator();
    let roots = [
        ("Action", generator.subschema_for::<ActionRecord>()),
        (
            "ApprovalAsk",
            generator.subschema_for::<ApprovalAskRecord>(),
        ),
        (
            "Authorization",
            generator.subschema_for::<AuthorizationRecord>(),
        ),
        (
            "Change",
            generator.subschema_for::<turngate::changes::Change>(),
        ),
        (
            "ChangeSet",
            generator.subschema_for::<turngate::changes::ChangeSet>(),
        ),
        (
            "ChangeSetSummary",
            generator.subschema_for::<ChangeSetSummaryRecord>(),
        ),
        ("Denial", generator.subschema_for::<DenialRecord>()),
        ("Evaluation", generator.subschema_for::<EvaluationRecord>()),
        ("FileCheck", generator.subschema_for::<FileCheckRecord>()),
        ("Invocation", generator.subschema_for::<InvocationRecord>()),
        (
            "NetworkCheck",
            generator.subschema_for::<NetworkCheckRecord>(),
        ),
        (
            "NetworkResolution",
            generator.subschema_for::<NetworkResolutionRecord>(),
        ),
        (
            "ParsedCommandLine",
            generator.subschema_for::<ParsedCommandLineRecord>(),
        ),
        ("Rule", generator.subschema_for::<RuleRecord>()),
        ("SpawnResult", generator.subschema_for::<SpawnRecord>()),
        (
            "ToolOutcome",
            generator.subschema_for::<ToolOutcomeRecord>(),
        ),
        ("Verdict", generator.subschema_for::<VerdictRecord>()),
    ];
    let roots: Map<String, Value> = roots
        .into_iter()
        .map(|(name, schema)| (name.to_owned(), schema.to_value()))
        .collect();
    let defs: Map<String, Value> = generator.take_definitions(true).into_iter().collect();
    let mut doc = Map::new();
    doc.insert("roots".to_owned(), Value::Object(roots));
    doc.insert("$defs".to_owned(), Value::Object(defs));
    println!("{}", serde_json::to_string_pretty(&Value::Object(doc))?);
    Ok(())
}
