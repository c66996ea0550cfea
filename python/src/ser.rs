//! serde straight into Python objects, for every record and JSON value that leaves the facade:
//! the value is what `json.loads` makes of its JSON form as `serde_json` writes it (dict, list,
//! str, int, float, bool, None; keys in serialization order; a non-finite float as None; bytes
//! as a list of ints; a map key that is a number or bool as its text), with no
//! `serde_json::Value` in between.
//!
//! Struct field names and enum variant names are `&'static str`s: each is made once per thread
//! as an interned Python string and reused, so a `Verdict` costs its dicts and its value
//! strings, not a fresh key string per field per call (ADR 0029).

use std::cell::RefCell;
use std::fmt::Display;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use rustc_hash::FxHashMap;
use serde::ser::{self, Serialize};

/// A serialization failure: a Python error, or a value JSON cannot carry (a non-string map
/// key that `serde_json` would refuse too).
pub(crate) enum Error {
    Py(PyErr),
    Msg(String),
}

impl From<PyErr> for Error {
    fn from(e: PyErr) -> Self {
        Error::Py(e)
    }
}

impl From<std::convert::Infallible> for Error {
    fn from(e: std::convert::Infallible) -> Self {
        match e {}
    }
}

impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Py(e) => write!(f, "{e}"),
            Error::Msg(m) => f.write_str(m),
        }
    }
}

impl Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

impl std::error::Error for Error {}

impl ser::Error for Error {
    fn custom<T: Display>(msg: T) -> Self {
        Error::Msg(msg.to_string())
    }
}

type Result<T> = std::result::Result<T, Error>;

thread_local! {
    /// This thread's Python strings of `&'static str` names, by address and length.
    static NAMES: RefCell<FxHashMap<(usize, usize), Py<PyString>>> = RefCell::default();
}

/// The interned Python string of a field or variant name, made once per thread. A re-entrant
/// call (a finalizer run by an allocation here that serializes again) makes a fresh one.
fn name<'py>(py: Python<'py>, s: &'static str) -> Bound<'py, PyString> {
    let key = (s.as_ptr() as usize, s.len());
    NAMES
        .try_with(|names| {
            let Ok(mut names) = names.try_borrow_mut() else {
                return PyString::intern(py, s);
            };
            names
                .entry(key)
                .or_insert_with(|| PyString::intern(py, s).unbind())
                .bind(py)
                .clone()
        })
        .unwrap_or_else(|_| PyString::intern(py, s))
}

/// `value` as Python objects.
pub(crate) fn to_py<'py, T: Serialize + ?Sized>(
    py: Python<'py>,
    value: &T,
) -> Result<Bound<'py, PyAny>> {
    value.serialize(Ser(py))
}

#[derive(Clone, Copy)]
struct Ser<'py>(Python<'py>);

/// A one-key dict `{variant: value}` (serde's externally tagged enum form).
fn tagged<'py>(
    py: Python<'py>,
    variant: &'static str,
    value: Bound<'py, PyAny>,
) -> Result<Bound<'py, PyAny>> {
    let d = PyDict::new(py);
    d.set_item(name(py, variant), value)?;
    Ok(d.into_any())
}

impl<'py> ser::Serializer for Ser<'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = Error;
    type SerializeSeq = Seq<'py>;
    type SerializeTuple = Seq<'py>;
    type SerializeTupleStruct = Seq<'py>;
    type SerializeTupleVariant = Seq<'py>;
    type SerializeMap = Map<'py>;
    type SerializeStruct = Map<'py>;
    type SerializeStructVariant = Map<'py>;

    fn serialize_bool(self, v: bool) -> Result<Self::Ok> {
        Ok(v.into_pyobject(self.0)?.to_owned().into_any())
    }
    fn serialize_i8(self, v: i8) -> Result<Self::Ok> {
        self.serialize_i64(v.into())
    }
    fn serialize_i16(self, v: i16) -> Result<Self::Ok> {
        self.serialize_i64(v.into())
    }
    fn serialize_i32(self, v: i32) -> Result<Self::Ok> {
        self.serialize_i64(v.into())
    }
    fn serialize_i64(self, v: i64) -> Result<Self::Ok> {
        Ok(v.into_pyobject(self.0)?.into_any())
    }
    fn serialize_i128(self, v: i128) -> Result<Self::Ok> {
        Ok(v.into_pyobject(self.0)?.into_any())
    }
    fn serialize_u8(self, v: u8) -> Result<Self::Ok> {
        self.serialize_u64(v.into())
    }
    fn serialize_u16(self, v: u16) -> Result<Self::Ok> {
        self.serialize_u64(v.into())
    }
    fn serialize_u32(self, v: u32) -> Result<Self::Ok> {
        self.serialize_u64(v.into())
    }
    fn serialize_u64(self, v: u64) -> Result<Self::Ok> {
        Ok(v.into_pyobject(self.0)?.into_any())
    }
    fn serialize_u128(self, v: u128) -> Result<Self::Ok> {
        Ok(v.into_pyobject(self.0)?.into_any())
    }
    fn serialize_f32(self, v: f32) -> Result<Self::Ok> {
        self.serialize_f64(v.into())
    }
    fn serialize_f64(self, v: f64) -> Result<Self::Ok> {
        if v.is_finite() {
            Ok(v.into_pyobject(self.0)?.into_any())
        } else {
            self.serialize_unit()
        }
    }
    fn serialize_char(self, v: char) -> Result<Self::Ok> {
        self.serialize_str(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, v: &str) -> Result<Self::Ok> {
        Ok(PyString::new(self.0, v).into_any())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<Self::Ok> {
        Ok(PyList::new(self.0, v)?.into_any())
    }
    fn serialize_none(self) -> Result<Self::Ok> {
        self.serialize_unit()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<Self::Ok> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<Self::Ok> {
        Ok(self.0.None().into_bound(self.0))
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<Self::Ok> {
        self.serialize_unit()
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<Self::Ok> {
        Ok(name(self.0, variant).into_any())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<Self::Ok> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<Self::Ok> {
        tagged(self.0, variant, value.serialize(self)?)
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Seq<'py>> {
        Ok(Seq {
            list: PyList::empty(self.0),
            variant: None,
        })
    }
    fn serialize_tuple(self, len: usize) -> Result<Seq<'py>> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _name: &'static str, len: usize) -> Result<Seq<'py>> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Seq<'py>> {
        Ok(Seq {
            list: PyList::empty(self.0),
            variant: Some(variant),
        })
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Map<'py>> {
        Ok(Map {
            dict: PyDict::new(self.0),
            key: None,
            variant: None,
        })
    }
    fn serialize_struct(self, _name: &'static str, len: usize) -> Result<Map<'py>> {
        self.serialize_map(Some(len))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Map<'py>> {
        Ok(Map {
            dict: PyDict::new(self.0),
            key: None,
            variant: Some(variant),
        })
    }
}

/// A list being built; a tuple variant's is wrapped as `{variant: [...]}` at the end.
pub(crate) struct Seq<'py> {
    list: Bound<'py, PyList>,
    variant: Option<&'static str>,
}

impl<'py> Seq<'py> {
    fn push<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        let item = value.serialize(Ser(self.list.py()))?;
        Ok(self.list.append(item)?)
    }
    fn finish(self) -> Result<Bound<'py, PyAny>> {
        match self.variant {
            None => Ok(self.list.into_any()),
            Some(v) => tagged(self.list.py(), v, self.list.into_any()),
        }
    }
}

macro_rules! seq_impl {
    ($trait:ident, $method:ident) => {
        impl<'py> ser::$trait for Seq<'py> {
            type Ok = Bound<'py, PyAny>;
            type Error = Error;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
                self.push(value)
            }
            fn end(self) -> Result<Self::Ok> {
                self.finish()
            }
        }
    };
}
seq_impl!(SerializeSeq, serialize_element);
seq_impl!(SerializeTuple, serialize_element);
seq_impl!(SerializeTupleStruct, serialize_field);
seq_impl!(SerializeTupleVariant, serialize_field);

/// A dict being built; a struct variant's is wrapped as `{variant: {...}}` at the end.
pub(crate) struct Map<'py> {
    dict: Bound<'py, PyDict>,
    key: Option<Bound<'py, PyAny>>,
    variant: Option<&'static str>,
}

impl<'py> Map<'py> {
    fn field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<()> {
        let py = self.dict.py();
        Ok(self
            .dict
            .set_item(name(py, key), value.serialize(Ser(py))?)?)
    }
    fn finish(self) -> Result<Bound<'py, PyAny>> {
        match self.variant {
            None => Ok(self.dict.into_any()),
            Some(v) => tagged(self.dict.py(), v, self.dict.into_any()),
        }
    }
}

impl<'py> ser::SerializeMap for Map<'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<()> {
        // A key as JSON writes it: a string, or a number or bool as its text.
        let text = match serde_json::to_value(key).map_err(|e| Error::Msg(e.to_string()))? {
            serde_json::Value::String(s) => s,
            serde_json::Value::Number(n) => n.to_string(),
            serde_json::Value::Bool(b) => b.to_string(),
            _ => return Err(Error::Msg("key must be a string".to_owned())),
        };
        self.key = Some(PyString::new(self.dict.py(), &text).into_any());
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        let key = self
            .key
            .take()
            .ok_or_else(|| Error::Msg("a map value without a key".to_owned()))?;
        Ok(self
            .dict
            .set_item(key, value.serialize(Ser(self.dict.py()))?)?)
    }
    fn end(self) -> Result<Self::Ok> {
        self.finish()
    }
}

macro_rules! struct_impl {
    ($($trait:ident),*) => {
        $(impl<'py> ser::$trait for Map<'py> {
            type Ok = Bound<'py, PyAny>;
            type Error = Error;
            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> Result<()> {
                self.field(key, value)
            }
            fn end(self) -> Result<Self::Ok> {
                self.finish()
            }
        })*
    };
}
struct_impl!(SerializeStruct, SerializeStructVariant);
