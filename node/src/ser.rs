//! serde straight into JavaScript values, for the per-call paths (`explain`, `planSpawn`,
//! `filterEnv`): a record's value is what `JSON.parse` makes of its JSON form (integers beyond
//! 2^53 as BigInts, as napi makes them from a JSON number; a non-finite float as `null`), with
//! no JSON in between, but for bytes a record serializes as bytes (`serialize_bytes`, an
//! environment's raw names and values), which are a `Buffer`, Node's bytes (a `Vec<u8>` that
//! serializes as a sequence stays an array of numbers). It renames nothing: field names come
//! camelCased by `turngate_ffi::wire::Camel`.
//!
//! A struct is built by a small JavaScript function per shape (its field names, in order),
//! `(a0, a1, …) => ({"effect": a0, "rule": a1, …})`, compiled once per environment
//! ([`Shapes`]) and called with the field values: V8 builds such a literal in one allocation
//! with its final layout, where defining properties one by one through Node-API walks a map
//! transition per property (about 4× the cost for a `Verdict`). Values are only ever
//! arguments, never code. A map (protocol objects, dynamic keys) gets its properties in one
//! `napi_define_properties`, as own data properties (a `__proto__` key is a plain property, as
//! from `JSON.parse`; a struct field of that name takes the same path).

use std::cell::RefCell;
use std::ptr;

use napi::{Env, Error, Result, Status, sys};
use rustc_hash::FxHashMap;
use serde::ser::{self, Serialize};
use smallvec::SmallVec;

/// `Number.MAX_SAFE_INTEGER`: larger integers become BigInts, as from a JSON number.
const MAX_SAFE: i64 = (1 << 53) - 1;

type Values = SmallVec<[sys::napi_value; 8]>;

fn ok(status: sys::napi_status) -> Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(Error::from_status(Status::from(status)))
    }
}

/// One napi call's out-parameter. Every call here is made on the environment of the current
/// callback with values live in its scope.
fn out(f: impl FnOnce(*mut sys::napi_value) -> sys::napi_status) -> Result<sys::napi_value> {
    let mut value = ptr::null_mut();
    ok(f(&mut value))?;
    Ok(value)
}

/// A JavaScript string (Latin-1 when the text is ASCII: no UTF-8 decoding).
fn string(env: sys::napi_env, s: &str) -> Result<sys::napi_value> {
    let (data, len) = (s.as_ptr().cast(), s.len() as isize);
    // SAFETY: `data`/`len` are a live `&str`, which napi copies.
    out(|v| unsafe {
        if s.is_ascii() {
            sys::napi_create_string_latin1(env, data, len, v)
        } else {
            sys::napi_create_string_utf8(env, data, len, v)
        }
    })
}

/// The struct shapes one environment has built, each as its function held by a reference.
/// Lives in the environment's instance data ([`crate::hooks::Hooks`]), so it is used on its
/// JavaScript thread only, and its references are deleted with it.
pub struct Shapes {
    env: sys::napi_env,
    functions: RefCell<FxHashMap<Box<[&'static str]>, sys::napi_ref>>,
}

impl Shapes {
    /// The (empty) shapes of `env`.
    pub fn new(env: &Env) -> Self {
        Shapes {
            env: env.raw(),
            functions: RefCell::default(),
        }
    }

    /// The function that builds a struct of these fields (`None` for a `__proto__` field,
    /// which a literal would take as the prototype).
    fn get(&self, fields: &[&'static str]) -> Result<Option<sys::napi_value>> {
        let env = self.env;
        let Ok(mut functions) = self.functions.try_borrow_mut() else {
            return Ok(None);
        };
        if let Some(&r) = functions.get(fields) {
            // SAFETY: `r` is a live strong reference of this environment.
            return out(|v| unsafe { sys::napi_get_reference_value(env, r, v) }).map(Some);
        }
        if fields.contains(&"__proto__") {
            return Ok(None);
        }
        let args: Vec<String> = (0..fields.len()).map(|i| format!("a{i}")).collect();
        let mut props = Vec::with_capacity(fields.len());
        for (name, arg) in fields.iter().zip(&args) {
            let name = serde_json::to_string(name).map_err(<Error as ser::Error>::custom)?;
            props.push(format!("{name}: {arg}"));
        }
        let source = format!(
            "(function ({}) {{ return {{ {} }} }})",
            args.join(", "),
            props.join(", ")
        );
        let source = string(env, &source)?;
        // SAFETY: the script only evaluates to a function, which the reference keeps alive.
        let function = out(|v| unsafe { sys::napi_run_script(env, source, v) })?;
        let mut r = ptr::null_mut();
        ok(unsafe { sys::napi_create_reference(env, function, 1, &mut r) })?;
        functions.insert(fields.into(), r);
        Ok(Some(function))
    }
}

opaque_debug!(Shapes);

impl Drop for Shapes {
    fn drop(&mut self) {
        for (_, r) in self.functions.get_mut().drain() {
            // SAFETY: each reference was created in `env`, which is tearing down its instance
            // data (the only owner of `Shapes`) on its own thread.
            unsafe { sys::napi_delete_reference(self.env, r) };
        }
    }
}

/// `value` as a JavaScript value (see the module docs).
pub fn to_js(env: &Env, value: &(impl Serialize + ?Sized)) -> Result<sys::napi_value> {
    let shapes = crate::hooks::hooks(env).map(|h| &h.shapes);
    value.serialize(Ser {
        env: env.raw(),
        shapes,
    })
}

#[derive(Clone, Copy)]
struct Ser<'a> {
    env: sys::napi_env,
    shapes: Option<&'a Shapes>,
}

impl<'a> Ser<'a> {
    fn int(self, n: i64) -> Result<sys::napi_value> {
        // SAFETY (every `unsafe` of `Ser`): see `out`.
        out(|v| unsafe {
            if (-MAX_SAFE..=MAX_SAFE).contains(&n) {
                sys::napi_create_int64(self.env, n, v)
            } else {
                sys::napi_create_bigint_int64(self.env, n, v)
            }
        })
    }

    fn null(self) -> Result<sys::napi_value> {
        out(|v| unsafe { sys::napi_get_null(self.env, v) })
    }

    /// A plain object of these own data properties.
    fn object(
        self,
        keys: &[sys::napi_value],
        values: &[sys::napi_value],
    ) -> Result<sys::napi_value> {
        use sys::PropertyAttributes as A;
        let props: SmallVec<[_; 8]> = (keys.iter().zip(values))
            .map(|(&name, &value)| sys::napi_property_descriptor {
                utf8name: ptr::null(),
                name,
                method: None,
                getter: None,
                setter: None,
                value,
                attributes: A::writable | A::enumerable | A::configurable,
                data: ptr::null_mut(),
            })
            .collect();
        let obj = out(|v| unsafe { sys::napi_create_object(self.env, v) })?;
        ok(unsafe { sys::napi_define_properties(self.env, obj, props.len(), props.as_ptr()) })?;
        Ok(obj)
    }

    /// `{[variant]: value}` (serde's externally tagged enum form), or `value` alone.
    fn tagged(
        self,
        variant: Option<&'static str>,
        value: sys::napi_value,
    ) -> Result<sys::napi_value> {
        match variant {
            Some(variant) => self.object(&[string(self.env, variant)?], &[value]),
            None => Ok(value),
        }
    }

    fn seq(self, len: usize, variant: Option<&'static str>) -> Result<Seq<'a>> {
        let array = out(|v| unsafe { sys::napi_create_array_with_length(self.env, len, v) })?;
        Ok(Seq {
            ser: self,
            array,
            index: 0,
            variant,
        })
    }

    fn fields(self, len: usize, variant: Option<&'static str>) -> Fields<'a> {
        Fields {
            ser: self,
            names: SmallVec::with_capacity(len),
            keys: Values::new(),
            values: Values::with_capacity(len),
            variant,
        }
    }
}

macro_rules! forward {
    ($($method:ident($ty:ty) => $via:ident($as:ty)),* $(,)?) => {
        $(fn $method(self, v: $ty) -> Result<sys::napi_value> {
            self.$via(<$as>::from(v))
        })*
    };
}

impl<'a> ser::Serializer for Ser<'a> {
    type Ok = sys::napi_value;
    type Error = Error;
    type SerializeSeq = Seq<'a>;
    type SerializeTuple = Seq<'a>;
    type SerializeTupleStruct = Seq<'a>;
    type SerializeTupleVariant = Seq<'a>;
    type SerializeMap = Fields<'a>;
    type SerializeStruct = Fields<'a>;
    type SerializeStructVariant = Fields<'a>;

    forward!(
        serialize_i8(i8) => int(i64),
        serialize_i16(i16) => int(i64),
        serialize_i32(i32) => int(i64),
        serialize_i64(i64) => int(i64),
        serialize_u8(u8) => int(i64),
        serialize_u16(u16) => int(i64),
        serialize_u32(u32) => int(i64),
        serialize_f32(f32) => serialize_f64(f64),
    );

    fn serialize_u64(self, v: u64) -> Result<sys::napi_value> {
        match i64::try_from(v) {
            Ok(v) => self.int(v),
            Err(_) => out(|r| unsafe { sys::napi_create_bigint_uint64(self.env, v, r) }),
        }
    }
    fn serialize_f64(self, v: f64) -> Result<sys::napi_value> {
        if !v.is_finite() {
            return self.null();
        }
        out(|r| unsafe { sys::napi_create_double(self.env, v, r) })
    }
    fn serialize_bool(self, v: bool) -> Result<sys::napi_value> {
        out(|r| unsafe { sys::napi_get_boolean(self.env, v, r) })
    }
    fn serialize_char(self, v: char) -> Result<sys::napi_value> {
        string(self.env, v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, v: &str) -> Result<sys::napi_value> {
        string(self.env, v)
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<sys::napi_value> {
        let mut data = ptr::null_mut();
        // SAFETY: `v` is live for the call, and napi copies its `len` bytes.
        out(|r| unsafe {
            sys::napi_create_buffer_copy(self.env, v.len(), v.as_ptr().cast(), &mut data, r)
        })
    }
    fn serialize_none(self) -> Result<sys::napi_value> {
        self.null()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result<sys::napi_value> {
        v.serialize(self)
    }
    fn serialize_unit(self) -> Result<sys::napi_value> {
        self.null()
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<sys::napi_value> {
        self.null()
    }
    fn serialize_unit_variant(self, _: &str, _: u32, variant: &str) -> Result<sys::napi_value> {
        string(self.env, variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        v: &T,
    ) -> Result<sys::napi_value> {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        v: &T,
    ) -> Result<sys::napi_value> {
        let value = v.serialize(self)?;
        self.tagged(Some(variant), value)
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Seq<'a>> {
        self.seq(len.unwrap_or(0), None)
    }
    fn serialize_tuple(self, len: usize) -> Result<Seq<'a>> {
        self.seq(len, None)
    }
    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Result<Seq<'a>> {
        self.seq(len, None)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Seq<'a>> {
        self.seq(len, Some(variant))
    }
    fn serialize_map(self, len: Option<usize>) -> Result<Fields<'a>> {
        Ok(self.fields(len.unwrap_or(0), None))
    }
    fn serialize_struct(self, _: &'static str, len: usize) -> Result<Fields<'a>> {
        Ok(self.fields(len, None))
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Fields<'a>> {
        Ok(self.fields(len, Some(variant)))
    }
}

/// An array being filled (the elements of a sequence, a tuple or a tuple variant).
struct Seq<'a> {
    ser: Ser<'a>,
    array: sys::napi_value,
    index: u32,
    variant: Option<&'static str>,
}

impl Seq<'_> {
    fn push<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<()> {
        let value = v.serialize(self.ser)?;
        ok(unsafe { sys::napi_set_element(self.ser.env, self.array, self.index, value) })?;
        self.index += 1;
        Ok(())
    }

    fn finish(self) -> Result<sys::napi_value> {
        self.ser.tagged(self.variant, self.array)
    }
}

macro_rules! elements {
    ($($trait:ident::$method:ident),*) => {
        $(impl ser::$trait for Seq<'_> {
            type Ok = sys::napi_value;
            type Error = Error;
            fn $method<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<()> {
                self.push(v)
            }
            fn end(self) -> Result<sys::napi_value> {
                self.finish()
            }
        })*
    };
}

elements!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

/// An object's properties being collected (a struct's by field name, a map's by key), the
/// object built at the end.
struct Fields<'a> {
    ser: Ser<'a>,
    names: SmallVec<[&'static str; 8]>,
    keys: Values,
    values: Values,
    variant: Option<&'static str>,
}

impl Fields<'_> {
    fn finish(self) -> Result<sys::napi_value> {
        let (ser, values) = (self.ser, &self.values);
        let shape = match ser.shapes {
            Some(shapes) if self.keys.is_empty() => shapes.get(&self.names)?,
            _ => None,
        };
        let obj = match shape {
            Some(function) => out(|v| unsafe {
                let mut recv = ptr::null_mut();
                sys::napi_get_undefined(ser.env, &mut recv);
                sys::napi_call_function(ser.env, recv, function, values.len(), values.as_ptr(), v)
            })?,
            None if self.keys.is_empty() => {
                let keys =
                    (self.names.iter().map(|n| string(ser.env, n))).collect::<Result<Values>>()?;
                ser.object(&keys, values)?
            }
            None => ser.object(&self.keys, values)?,
        };
        ser.tagged(self.variant, obj)
    }
}

macro_rules! struct_fields {
    ($($trait:ident),*) => {
        $(impl ser::$trait for Fields<'_> {
            type Ok = sys::napi_value;
            type Error = Error;
            fn serialize_field<T: Serialize + ?Sized>(&mut self, name: &'static str, v: &T) -> Result<()> {
                self.names.push(name);
                self.values.push(v.serialize(self.ser)?);
                Ok(())
            }
            fn end(self) -> Result<sys::napi_value> {
                self.finish()
            }
        })*
    };
}

struct_fields!(SerializeStruct, SerializeStructVariant);

impl ser::SerializeMap for Fields<'_> {
    type Ok = sys::napi_value;
    type Error = Error;
    /// A key as JSON writes it: a string, or a number as its text.
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<()> {
        let key = match serde_json::to_value(key).map_err(<Error as ser::Error>::custom)? {
            serde_json::Value::String(s) => s,
            serde_json::Value::Number(n) => n.to_string(),
            _ => {
                return Err(Error::new(
                    Status::InvalidArg,
                    "a map key must be a string or a number",
                ));
            }
        };
        self.keys.push(string(self.ser.env, &key)?);
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<()> {
        self.values.push(v.serialize(self.ser)?);
        Ok(())
    }
    fn end(self) -> Result<sys::napi_value> {
        self.finish()
    }
}
