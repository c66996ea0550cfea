//! The records' JSON forms for the languages whose idiomatic case is camelCase (Node): the
//! serde form of a record with every **struct field name** camelCased (`tool_result` →
//! `toolResult`) and every map key kept. Protocol objects inside a record (`serde_json::Value`,
//! a request, a sandbox report) serialize as maps, so they keep their protocol (snake_case)
//! names, exactly as their schemas spell them. A record field added in the facade reaches the
//! language with no per-language code.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError};

use serde::ser::{self, Serialize};
use serde_json::Value;

use crate::TurnGateError;

/// `snake_case` to `camelCase` (`tool_result` → `toolResult`; a name without `_` is kept).
pub fn camel(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper = false;
    for c in name.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// `camelCase` to `snake_case` (`itemId` → `item_id`; a lowercase name is kept).
pub fn snake(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// A record's JSON form with camelCase field names (see the module docs).
pub fn to_camel_value<T: Serialize + ?Sized>(
    what: &str,
    value: &T,
) -> Result<Value, TurnGateError> {
    serde_json::to_value(Camel(value)).map_err(|e| TurnGateError::invalid(what, e))
}

/// An options record from a camelCase object: its top-level keys snake_cased, then deserialized
/// like any other JSON form (unknown fields refused). Options records are flat, and a nested
/// protocol object keeps its own names.
pub fn from_camel_value<T: serde::de::DeserializeOwned>(
    what: &str,
    value: Value,
) -> Result<T, TurnGateError> {
    let value = match value {
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (snake(&k), v)).collect()),
        other => other,
    };
    crate::convert::from_value(what, value)
}

/// `value` with every struct field name camelCased, for any serde serializer: a binding
/// serializes `Camel(&record)` straight into its runtime's values (napi's `Env::to_js_value`)
/// with no JSON in between, or into JSON with [`to_camel_value`]. Map keys and variant names
/// are kept, so protocol objects keep their names.
#[derive(Debug, Clone, Copy)]
pub struct Camel<'a, T: ?Sized>(pub &'a T);

impl<T: Serialize + ?Sized> Serialize for Camel<'_, T> {
    fn serialize<S: ser::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(CamelSer(s))
    }
}

/// A field name in camelCase, as serde wants it (`&'static str`): each distinct name is
/// converted and kept once (they are the facade's field names, a fixed set).
fn camel_static(name: &'static str) -> &'static str {
    if !name.contains('_') {
        return name;
    }
    static NAMES: OnceLock<Mutex<HashMap<&'static str, &'static str>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    names
        .entry(name)
        .or_insert_with(|| Box::leak(camel(name).into_boxed_str()))
}

/// The serializer (and each compound serializer) of [`Camel`]: the inner one, with struct field
/// names camelCased and every nested value wrapped again.
struct CamelSer<S>(S);

macro_rules! forward {
    ($($method:ident($ty:ty)),* $(,)?) => {
        $(fn $method(self, v: $ty) -> Result<S::Ok, S::Error> {
            self.0.$method(v)
        })*
    };
}

impl<S: ser::Serializer> ser::Serializer for CamelSer<S> {
    type Ok = S::Ok;
    type Error = S::Error;
    type SerializeSeq = CamelSer<S::SerializeSeq>;
    type SerializeTuple = CamelSer<S::SerializeTuple>;
    type SerializeTupleStruct = CamelSer<S::SerializeTupleStruct>;
    type SerializeTupleVariant = CamelSer<S::SerializeTupleVariant>;
    type SerializeMap = CamelSer<S::SerializeMap>;
    type SerializeStruct = CamelSer<S::SerializeStruct>;
    type SerializeStructVariant = CamelSer<S::SerializeStructVariant>;

    forward!(
        serialize_bool(bool),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_f32(f32),
        serialize_f64(f64),
        serialize_char(char),
        serialize_str(&str),
        serialize_bytes(&[u8]),
        serialize_unit_struct(&'static str),
    );
    fn serialize_none(self) -> Result<S::Ok, S::Error> {
        self.0.serialize_none()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result<S::Ok, S::Error> {
        self.0.serialize_some(&Camel(v))
    }
    fn serialize_unit(self) -> Result<S::Ok, S::Error> {
        self.0.serialize_unit()
    }
    fn serialize_unit_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
    ) -> Result<S::Ok, S::Error> {
        self.0.serialize_unit_variant(name, index, variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        v: &T,
    ) -> Result<S::Ok, S::Error> {
        self.0.serialize_newtype_struct(name, &Camel(v))
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        v: &T,
    ) -> Result<S::Ok, S::Error> {
        self.0
            .serialize_newtype_variant(name, index, variant, &Camel(v))
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Self::SerializeSeq, S::Error> {
        self.0.serialize_seq(len).map(CamelSer)
    }
    fn serialize_tuple(self, len: usize) -> Result<Self::SerializeTuple, S::Error> {
        self.0.serialize_tuple(len).map(CamelSer)
    }
    fn serialize_tuple_struct(
        self,
        name: &'static str,
        len: usize,
    ) -> Result<Self::SerializeTupleStruct, S::Error> {
        self.0.serialize_tuple_struct(name, len).map(CamelSer)
    }
    fn serialize_tuple_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Self::SerializeTupleVariant, S::Error> {
        self.0
            .serialize_tuple_variant(name, index, variant, len)
            .map(CamelSer)
    }
    fn serialize_map(self, len: Option<usize>) -> Result<Self::SerializeMap, S::Error> {
        self.0.serialize_map(len).map(CamelSer)
    }
    fn serialize_struct(
        self,
        name: &'static str,
        len: usize,
    ) -> Result<Self::SerializeStruct, S::Error> {
        self.0.serialize_struct(name, len).map(CamelSer)
    }
    fn serialize_struct_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Self::SerializeStructVariant, S::Error> {
        self.0
            .serialize_struct_variant(name, index, variant, len)
            .map(CamelSer)
    }
    fn is_human_readable(&self) -> bool {
        self.0.is_human_readable()
    }
}

/// The sequence forms: each element wrapped.
macro_rules! camel_elements {
    ($($trait:ident::$method:ident),* $(,)?) => {
        $(impl<S: ser::$trait> ser::$trait for CamelSer<S> {
            type Ok = S::Ok;
            type Error = S::Error;
            fn $method<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), S::Error> {
                self.0.$method(&Camel(v))
            }
            fn end(self) -> Result<S::Ok, S::Error> {
                self.0.end()
            }
        })*
    };
}

camel_elements!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field,
);

/// The struct forms: each field name camelCased, each value wrapped.
macro_rules! camel_fields {
    ($($trait:ident),* $(,)?) => {
        $(impl<S: ser::$trait> ser::$trait for CamelSer<S> {
            type Ok = S::Ok;
            type Error = S::Error;
            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                name: &'static str,
                v: &T,
            ) -> Result<(), S::Error> {
                self.0.serialize_field(camel_static(name), &Camel(v))
            }
            fn skip_field(&mut self, name: &'static str) -> Result<(), S::Error> {
                self.0.skip_field(camel_static(name))
            }
            fn end(self) -> Result<S::Ok, S::Error> {
                self.0.end()
            }
        })*
    };
}

camel_fields!(SerializeStruct, SerializeStructVariant);

/// A map: keys kept, values wrapped.
impl<S: ser::SerializeMap> ser::SerializeMap for CamelSer<S> {
    type Ok = S::Ok;
    type Error = S::Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), S::Error> {
        self.0.serialize_key(key)
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), S::Error> {
        self.0.serialize_value(&Camel(v))
    }
    fn end(self) -> Result<S::Ok, S::Error> {
        self.0.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_fields_are_camel_cased_and_protocol_maps_keep_their_keys() {
        let a = crate::AuthorizationRecord::Deferred {
            request: serde_json::json!({"turn_id": "t1", "scope_hash": "ab"}),
            reason: "pending".into(),
            tool_result: "text".into(),
        };
        let v = to_camel_value("a", &a).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "outcome": "deferred",
                "request": {"turn_id": "t1", "scope_hash": "ab"},
                "reason": "pending",
                "toolResult": "text",
            })
        );
    }

    #[test]
    fn nested_and_tagged_records_are_camel_cased_at_every_depth() {
        let ran = crate::gate::SpawnRecord::Ran(crate::gate::ProcessOutcomeRecord {
            pid: 7,
            exit_code: Some(0),
            signal: None,
            timed_out: false,
            duration_ms: 3,
            stdout: b"out".to_vec(),
            stderr: Vec::new(),
            stdout_truncated: false,
            stderr_truncated: true,
            sandbox: Some(
                serde_json::json!({"backend": "nono", "fs_rules": [{"read_only": true}]}),
            ),
            change_set: Some(crate::changes::ChangeSetSummaryRecord {
                id: "cs".into(),
                status: "pending".into(),
                summary: "1 added".into(),
                added: vec!["a".into()],
                modified: Vec::new(),
                deleted: Vec::new(),
                mode_changed: vec!["m".into()],
                unsupported: Vec::new(),
            }),
        });
        let v = to_camel_value("r", &ran).unwrap();
        assert_eq!(v["outcome"], "ran");
        assert_eq!(v["exitCode"], 0);
        assert_eq!(v["stdout"], "out");
        assert_eq!(v["stderrTruncated"], true);
        assert_eq!(v["changeSet"]["modeChanged"], serde_json::json!(["m"]));
        // A protocol object inside keeps its snake_case names at every depth.
        assert_eq!(v["sandbox"]["fs_rules"][0]["read_only"], true);
        assert!(v.get("exit_code").is_none() && v["changeSet"].get("mode_changed").is_none());
    }

    #[test]
    fn options_come_in_camel_cased_and_unknown_fields_fail() {
        let inv: crate::InvocationRecord = from_camel_value(
            "invocation",
            serde_json::json!({"kind": "file_read", "target": "a", "itemId": "i1"}),
        )
        .unwrap();
        assert_eq!(inv.item_id.as_deref(), Some("i1"));
        let bad = from_camel_value::<crate::InvocationRecord>(
            "invocation",
            serde_json::json!({"kind": "file_read", "target": "a", "itemID": "i1"}),
        );
        assert!(bad.is_err());
    }
}
