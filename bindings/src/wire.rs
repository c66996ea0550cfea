//! The records' JSON forms for the languages whose idiomatic case is camelCase (Node): the
//! serde form of a record with every **struct field name** camelCased (`tool_result` →
//! `toolResult`) and every map key kept. Protocol objects inside a record (`serde_json::Value`,
//! a request, a sandbox report) serialize as maps, so they keep their protocol (snake_case)
//! names, exactly as their schemas spell them. A record field added in the facade reaches the
//! language with no per-language code.

use serde::ser::{self, Serialize};
use serde_json::{Map, Value};

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
    value
        .serialize(CamelSerializer)
        .map_err(|e| TurnGateError::invalid(what, e))
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

type Error = serde_json::Error;

struct CamelSerializer;

fn key_string(key: Value) -> String {
    match key {
        Value::String(s) => s,
        other => other.to_string(),
    }
}

impl ser::Serializer for CamelSerializer {
    type Ok = Value;
    type Error = Error;
    type SerializeSeq = Seq;
    type SerializeTuple = Seq;
    type SerializeTupleStruct = Seq;
    type SerializeTupleVariant = Variant<Seq>;
    type SerializeMap = Obj;
    type SerializeStruct = Obj;
    type SerializeStructVariant = Variant<Obj>;

    fn serialize_bool(self, v: bool) -> Result<Value, Error> {
        Ok(Value::Bool(v))
    }
    fn serialize_i8(self, v: i8) -> Result<Value, Error> {
        Ok(v.into())
    }
    fn serialize_i16(self, v: i16) -> Result<Value, Error> {
        Ok(v.into())
    }
    fn serialize_i32(self, v: i32) -> Result<Value, Error> {
        Ok(v.into())
    }
    fn serialize_i64(self, v: i64) -> Result<Value, Error> {
        Ok(v.into())
    }
    fn serialize_u8(self, v: u8) -> Result<Value, Error> {
        Ok(v.into())
    }
    fn serialize_u16(self, v: u16) -> Result<Value, Error> {
        Ok(v.into())
    }
    fn serialize_u32(self, v: u32) -> Result<Value, Error> {
        Ok(v.into())
    }
    fn serialize_u64(self, v: u64) -> Result<Value, Error> {
        Ok(v.into())
    }
    fn serialize_f32(self, v: f32) -> Result<Value, Error> {
        serde_json::to_value(v)
    }
    fn serialize_f64(self, v: f64) -> Result<Value, Error> {
        serde_json::to_value(v)
    }
    fn serialize_char(self, v: char) -> Result<Value, Error> {
        Ok(Value::String(v.to_string()))
    }
    fn serialize_str(self, v: &str) -> Result<Value, Error> {
        Ok(Value::String(v.to_owned()))
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<Value, Error> {
        Ok(Value::Array(v.iter().map(|b| Value::from(*b)).collect()))
    }
    fn serialize_none(self) -> Result<Value, Error> {
        Ok(Value::Null)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result<Value, Error> {
        v.serialize(self)
    }
    fn serialize_unit(self) -> Result<Value, Error> {
        Ok(Value::Null)
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<Value, Error> {
        Ok(Value::Null)
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<Value, Error> {
        Ok(Value::String(variant.to_owned()))
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        v: &T,
    ) -> Result<Value, Error> {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        v: &T,
    ) -> Result<Value, Error> {
        let mut map = Map::new();
        map.insert(variant.to_owned(), v.serialize(CamelSerializer)?);
        Ok(Value::Object(map))
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Seq, Error> {
        Ok(Seq(Vec::with_capacity(len.unwrap_or(0))))
    }
    fn serialize_tuple(self, len: usize) -> Result<Seq, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Result<Seq, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Variant<Seq>, Error> {
        Ok(Variant(variant, Seq(Vec::with_capacity(len))))
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Obj, Error> {
        Ok(Obj::new(false))
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Obj, Error> {
        Ok(Obj::new(true))
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Variant<Obj>, Error> {
        Ok(Variant(variant, Obj::new(true)))
    }
}

struct Seq(Vec<Value>);

impl Seq {
    fn push<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        self.0.push(v.serialize(CamelSerializer)?);
        Ok(())
    }
}

/// The three sequence forms are one array.
macro_rules! seq_impl {
    ($trait:ident, $method:ident) => {
        impl ser::$trait for Seq {
            type Ok = Value;
            type Error = Error;
            fn $method<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
                self.push(v)
            }
            fn end(self) -> Result<Value, Error> {
                Ok(Value::Array(self.0))
            }
        }
    };
}

seq_impl!(SerializeSeq, serialize_element);
seq_impl!(SerializeTuple, serialize_element);
seq_impl!(SerializeTupleStruct, serialize_field);

/// An object: a struct's (field names camelCased) or a map's (keys kept).
struct Obj {
    map: Map<String, Value>,
    fields: bool,
    key: Option<String>,
}

impl Obj {
    fn new(fields: bool) -> Self {
        Obj {
            map: Map::new(),
            fields,
            key: None,
        }
    }

    fn field<T: Serialize + ?Sized>(&mut self, name: &str, v: &T) -> Result<(), Error> {
        let name = if self.fields {
            camel(name)
        } else {
            name.to_owned()
        };
        self.map.insert(name, v.serialize(CamelSerializer)?);
        Ok(())
    }
}

impl ser::SerializeMap for Obj {
    type Ok = Value;
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        self.key = Some(key_string(key.serialize(CamelSerializer)?));
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        let key = self
            .key
            .take()
            .ok_or_else(|| ser::Error::custom("a map value without its key"))?;
        self.map.insert(key, v.serialize(CamelSerializer)?);
        Ok(())
    }
    fn end(self) -> Result<Value, Error> {
        Ok(Value::Object(self.map))
    }
}

impl ser::SerializeStruct for Obj {
    type Ok = Value;
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        name: &'static str,
        v: &T,
    ) -> Result<(), Error> {
        self.field(name, v)
    }
    fn end(self) -> Result<Value, Error> {
        Ok(Value::Object(self.map))
    }
}

/// An externally tagged variant: `{variant: content}`.
struct Variant<C>(&'static str, C);

impl<C> Variant<C> {
    fn wrap(variant: &str, content: Value) -> Value {
        let mut map = Map::new();
        map.insert(variant.to_owned(), content);
        Value::Object(map)
    }
}

impl ser::SerializeTupleVariant for Variant<Seq> {
    type Ok = Value;
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        self.1.push(v)
    }
    fn end(self) -> Result<Value, Error> {
        Ok(Self::wrap(self.0, Value::Array(self.1.0)))
    }
}

impl ser::SerializeStructVariant for Variant<Obj> {
    type Ok = Value;
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        name: &'static str,
        v: &T,
    ) -> Result<(), Error> {
        self.1.field(name, v)
    }
    fn end(self) -> Result<Value, Error> {
        Ok(Self::wrap(self.0, Value::Object(self.1.map)))
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
