//! serde straight into JavaScript values: a record's value is what `JSON.parse` makes of its
//! JSON form (integers beyond 2^53 as BigInts, as napi makes them from a JSON number; bytes
//! as arrays of numbers; a non-finite float as `null`), with no JSON in between. Objects get
//! their properties in one `napi_define_properties` each, as own data properties (as
//! `JSON.parse` makes them: a `__proto__` key is a plain property, never the prototype). The
//! names a record repeats on every call (struct field names and unit variants: `&'static str`s
//! of the facade's declarations) are created once per environment and kept by reference
//! ([`Names`]). It renames nothing: field names come camelCased by `turngate_ffi::wire::Camel`.

use std::cell::RefCell;
use std::ptr;

use napi::{Env, Error, Result, Status, sys};
use rustc_hash::FxHashMap;
use serde::ser::{self, Serialize};
use smallvec::SmallVec;

/// `Number.MAX_SAFE_INTEGER`: larger integers become BigInts, as from a JSON number.
const MAX_SAFE: i64 = (1 << 53) - 1;

fn ok(status: sys::napi_status) -> Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(Error::from_status(Status::from(status)))
    }
}

/// One call's napi out-parameter.
fn out(f: impl FnOnce(*mut sys::napi_value) -> sys::napi_status) -> Result<sys::napi_value> {
    let mut value = ptr::null_mut();
    ok(f(&mut value))?;
    Ok(value)
}

/// A JavaScript string (Latin-1 when the text is ASCII: no UTF-8 decoding).
fn string(env: sys::napi_env, s: &str) -> Result<sys::napi_value> {
    let (data, len) = (s.as_ptr().cast(), s.len() as isize);
    // SAFETY: `data`/`len` are a live `&str`; napi copies it.
    out(|v| unsafe {
        if s.is_ascii() {
            sys::napi_create_string_latin1(env, data, len, v)
        } else {
            sys::napi_create_string_utf8(env, data, len, v)
        }
    })
}

/// What one environment keeps to build records fast, created on first use and held in one
/// JavaScript array that a reference keeps alive (Node-API 9 has no references to strings):
/// - each name a record repeats (a unit variant: `"deny"`), by address and length;
/// - each struct's shape (its field names, in order) as a small JavaScript function
///   `(a0, a1, …) => ({"effect": a0, "rule": a1, …})`: V8 builds such an object literal in
///   one allocation with its final layout, where defining the properties one by one through
///   Node-API walks a map transition per property.
///
/// Lives in the environment's instance data ([`crate::hooks::Hooks`]), so it is used on its
/// JavaScript thread only.
pub struct Names {
    env: sys::napi_env,
    array: sys::napi_ref,
    index: RefCell<Index>,
}

#[derive(Default)]
struct Index {
    names: FxHashMap<(usize, usize), u32>,
    shapes: FxHashMap<Box<[&'static str]>, sys::napi_ref>,
    len: u32,
}

impl Names {
    /// The (empty) cache of `env`.
    pub fn new(env: &Env) -> Result<Self> {
        let env = env.raw();
        // SAFETY: `env` is the live environment of the current call.
        let array = out(|v| unsafe { sys::napi_create_array(env, v) })?;
        let mut r = ptr::null_mut();
        ok(unsafe { sys::napi_create_reference(env, array, 1, &mut r) })?;
        Ok(Names {
            env,
            array: r,
            index: RefCell::default(),
        })
    }

    /// The array of names, for one serialization.
    fn array(&self) -> Result<sys::napi_value> {
        // SAFETY: `array` is a live strong reference of this environment.
        out(|v| unsafe { sys::napi_get_reference_value(self.env, self.array, v) })
    }

    fn element(&self, array: sys::napi_value, i: u32) -> Result<sys::napi_value> {
        // SAFETY: `array` is this environment's array, live in the current scope.
        out(|v| unsafe { sys::napi_get_element(self.env, array, i, v) })
    }

    fn push(
        &self,
        index: &mut Index,
        array: sys::napi_value,
        value: sys::napi_value,
    ) -> Result<u32> {
        let i = index.len;
        // SAFETY: as in `element`; `value` is live in the current scope.
        ok(unsafe { sys::napi_set_element(self.env, array, i, value) })?;
        index.len += 1;
        Ok(i)
    }

    fn name(&self, array: sys::napi_value, name: &'static str) -> Result<sys::napi_value> {
        let key = (name.as_ptr() as usize, name.len());
        let Ok(mut index) = self.index.try_borrow_mut() else {
            return string(self.env, name);
        };
        if let Some(&i) = index.names.get(&key) {
            return self.element(array, i);
        }
        let value = string(self.env, name)?;
        let i = self.push(&mut index, array, value)?;
        index.names.insert(key, i);
        Ok(value)
    }

    /// The function that builds an object of these fields, or `None` where a literal cannot
    /// (a `__proto__` field would set the prototype).
    fn shape(&self, fields: &[&'static str]) -> Result<Option<sys::napi_value>> {
        let Ok(mut index) = self.index.try_borrow_mut() else {
            return Ok(None);
        };
        if let Some(&r) = index.shapes.get(fields) {
            // SAFETY: `r` is a live strong reference of this environment.
            return out(|v| unsafe { sys::napi_get_reference_value(self.env, r, v) }).map(Some);
        }
        if fields.contains(&"__proto__") {
            return Ok(None);
        }
        let mut source = String::from("(function (");
        for i in 0..fields.len() {
            source.push_str(&format!("a{i},"));
        }
        source.push_str(") { return {");
        for (i, name) in fields.iter().enumerate() {
            let name = serde_json::to_string(name)
                .map_err(|e| Error::new(Status::GenericFailure, e.to_string()))?;
            source.push_str(&format!("{name}: a{i},"));
        }
        source.push_str("} })");
        let source = string(self.env, &source)?;
        // SAFETY: `source` is live in the current scope; the script only defines a function,
        // which the reference keeps alive.
        let function = out(|v| unsafe { sys::napi_run_script(self.env, source, v) })?;
        let mut r = ptr::null_mut();
        ok(unsafe { sys::napi_create_reference(self.env, function, 1, &mut r) })?;
        index.shapes.insert(fields.into(), r);
        Ok(Some(function))
    }
}

impl Drop for Names {
    fn drop(&mut self) {
        let shapes = std::mem::take(&mut self.index.get_mut().shapes);
        // SAFETY: the references were created in `env`, which is tearing down its instance
        // data (the only owner of `Names`) on its own thread.
        for r in shapes.into_values().chain([self.array]) {
            unsafe { sys::napi_delete_reference(self.env, r) };
        }
    }
}

impl std::fmt::Debug for Names {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Names").finish_non_exhaustive()
    }
}

/// `value` as a JavaScript value (see the module docs).
pub fn to_js(env: &Env, value: &(impl Serialize + ?Sized)) -> Result<sys::napi_value> {
    let names = match crate::hooks::hooks(env) {
        Some(h) => Some((&h.names, h.names.array()?)),
        None => None,
    };
    value.serialize(Ser {
        env: env.raw(),
        names,
    })
}

#[derive(Clone, Copy)]
struct Ser<'a> {
    env: sys::napi_env,
    names: Option<(&'a Names, sys::napi_value)>,
}

impl<'a> Ser<'a> {
    fn name(self, name: &'static str) -> Result<sys::napi_value> {
        match self.names {
            Some((names, array)) => names.name(array, name),
            None => string(self.env, name),
        }
    }

    fn null(self) -> Result<sys::napi_value> {
        // SAFETY: `env` is the live environment of the current call.
        out(|v| unsafe { sys::napi_get_null(self.env, v) })
    }

    fn int(self, n: i64) -> Result<sys::napi_value> {
        // SAFETY: as in `null`.
        out(|v| unsafe {
            if (-MAX_SAFE..=MAX_SAFE).contains(&n) {
                sys::napi_create_int64(self.env, n, v)
            } else {
                sys::napi_create_bigint_int64(self.env, n, v)
            }
        })
    }

    fn object(self, props: &[sys::napi_property_descriptor]) -> Result<sys::napi_value> {
        // SAFETY: as in `null`; `props` hold values of the current scope.
        let obj = out(|v| unsafe { sys::napi_create_object(self.env, v) })?;
        ok(unsafe { sys::napi_define_properties(self.env, obj, props.len(), props.as_ptr()) })?;
        Ok(obj)
    }

    /// `{[variant]: value}`: serde's externally tagged enum form.
    fn tagged(self, variant: &'static str, value: sys::napi_value) -> Result<sys::napi_value> {
        self.object(&[property(self.name(variant)?, value)])
    }

    fn seq(self, len: usize) -> Result<Seq<'a>> {
        // SAFETY: as in `null`.
        let array = out(|v| unsafe { sys::napi_create_array_with_length(self.env, len, v) })?;
        Ok(Seq {
            ser: self,
            array,
            index: 0,
            variant: None,
        })
    }

    fn fields(self, len: usize, variant: Option<&'static str>) -> Fields<'a> {
        Fields {
            ser: self,
            names: SmallVec::with_capacity(len),
            values: SmallVec::with_capacity(len),
            keys: SmallVec::new(),
            variant,
        }
    }
}

/// An own, enumerable, writable, configurable data property (a plain object's).
fn property(name: sys::napi_value, value: sys::napi_value) -> sys::napi_property_descriptor {
    use sys::PropertyAttributes as A;
    sys::napi_property_descriptor {
        utf8name: ptr::null(),
        name,
        method: None,
        getter: None,
        setter: None,
        value,
        attributes: A::writable | A::enumerable | A::configurable,
        data: ptr::null_mut(),
    }
}

macro_rules! ints {
    ($($method:ident($ty:ty)),*) => {
        $(fn $method(self, v: $ty) -> Result<sys::napi_value> {
            self.int(i64::from(v))
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

    ints!(
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32)
    );

    fn serialize_u64(self, v: u64) -> Result<sys::napi_value> {
        match i64::try_from(v) {
            Ok(v) => self.int(v),
            // SAFETY: as in `null`.
            Err(_) => out(|r| unsafe { sys::napi_create_bigint_uint64(self.env, v, r) }),
        }
    }
    fn serialize_bool(self, v: bool) -> Result<sys::napi_value> {
        // SAFETY: as in `null`.
        out(|r| unsafe { sys::napi_get_boolean(self.env, v, r) })
    }
    fn serialize_f32(self, v: f32) -> Result<sys::napi_value> {
        self.serialize_f64(f64::from(v))
    }
    fn serialize_f64(self, v: f64) -> Result<sys::napi_value> {
        if !v.is_finite() {
            return self.null();
        }
        // SAFETY: as in `null`.
        out(|r| unsafe { sys::napi_create_double(self.env, v, r) })
    }
    fn serialize_char(self, v: char) -> Result<sys::napi_value> {
        string(self.env, v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, v: &str) -> Result<sys::napi_value> {
        string(self.env, v)
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<sys::napi_value> {
        use ser::SerializeSeq;
        let mut seq = self.seq(v.len())?;
        for b in v {
            seq.serialize_element(b)?;
        }
        seq.end()
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
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<sys::napi_value> {
        self.name(variant)
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
        self.tagged(variant, value)
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Seq<'a>> {
        self.seq(len.unwrap_or(0))
    }
    fn serialize_tuple(self, len: usize) -> Result<Seq<'a>> {
        self.seq(len)
    }
    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Result<Seq<'a>> {
        self.seq(len)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Seq<'a>> {
        let mut seq = self.seq(len)?;
        seq.variant = Some(variant);
        Ok(seq)
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
        // SAFETY: `array` and `value` are live values of the current scope.
        ok(unsafe { sys::napi_set_element(self.ser.env, self.array, self.index, value) })?;
        self.index += 1;
        Ok(())
    }

    fn finish(self) -> Result<sys::napi_value> {
        match self.variant {
            Some(variant) => self.ser.tagged(variant, self.array),
            None => Ok(self.array),
        }
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

/// An object's properties being collected (a struct or a struct variant by field name, a map
/// by key), the object built at the end.
struct Fields<'a> {
    ser: Ser<'a>,
    names: SmallVec<[&'static str; 8]>,
    keys: SmallVec<[sys::napi_value; 8]>,
    values: SmallVec<[sys::napi_value; 8]>,
    variant: Option<&'static str>,
}

impl Fields<'_> {
    fn field<T: Serialize + ?Sized>(&mut self, name: &'static str, v: &T) -> Result<()> {
        self.names.push(name);
        self.values.push(v.serialize(self.ser)?);
        Ok(())
    }

    fn finish(self) -> Result<sys::napi_value> {
        let ser = self.ser;
        let obj = match ser.names {
            Some((names, _)) if self.keys.is_empty() => {
                match names.shape(&self.names)? {
                    // SAFETY: `function` and the values are live in the current scope.
                    Some(function) => out(|v| unsafe {
                        let mut recv = ptr::null_mut();
                        sys::napi_get_undefined(ser.env, &mut recv);
                        sys::napi_call_function(
                            ser.env,
                            recv,
                            function,
                            self.values.len(),
                            self.values.as_ptr(),
                            v,
                        )
                    })?,
                    None => self.define()?,
                }
            }
            _ => self.define()?,
        };
        match self.variant {
            Some(variant) => ser.tagged(variant, obj),
            None => Ok(obj),
        }
    }

    /// The object with its properties defined one by one.
    fn define(&self) -> Result<sys::napi_value> {
        let keys = if self.keys.is_empty() {
            self.names
                .iter()
                .map(|n| self.ser.name(n))
                .collect::<Result<SmallVec<[_; 8]>>>()?
        } else {
            self.keys.clone()
        };
        let props: SmallVec<[_; 8]> = keys
            .iter()
            .zip(&self.values)
            .map(|(&k, &v)| property(k, v))
            .collect();
        self.ser.object(&props)
    }
}

impl ser::SerializeStruct for Fields<'_> {
    type Ok = sys::napi_value;
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, name: &'static str, v: &T) -> Result<()> {
        self.field(name, v)
    }
    fn end(self) -> Result<sys::napi_value> {
        self.finish()
    }
}

impl ser::SerializeStructVariant for Fields<'_> {
    type Ok = sys::napi_value;
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, name: &'static str, v: &T) -> Result<()> {
        self.field(name, v)
    }
    fn end(self) -> Result<sys::napi_value> {
        self.finish()
    }
}

impl ser::SerializeMap for Fields<'_> {
    type Ok = sys::napi_value;
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<()> {
        self.keys.push(key.serialize(MapKey(self.ser))?);
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

/// A map key: a string, or a number or char written as one (as in JSON).
struct MapKey<'a>(Ser<'a>);

fn not_a_key() -> Error {
    Error::new(Status::InvalidArg, "a map key must be a string or a number")
}

macro_rules! key_as_text {
    ($($method:ident($ty:ty)),*) => {
        $(fn $method(self, v: $ty) -> Result<sys::napi_value> {
            string(self.0.env, &v.to_string())
        })*
    };
}

macro_rules! not_keys {
    ($($method:ident($($ty:ty),*)),*) => {
        $(fn $method(self, $(_: $ty),*) -> Result<sys::napi_value> {
            Err(not_a_key())
        })*
    };
}

impl<'a> ser::Serializer for MapKey<'a> {
    type Ok = sys::napi_value;
    type Error = Error;
    type SerializeSeq = ser::Impossible<sys::napi_value, Error>;
    type SerializeTuple = ser::Impossible<sys::napi_value, Error>;
    type SerializeTupleStruct = ser::Impossible<sys::napi_value, Error>;
    type SerializeTupleVariant = ser::Impossible<sys::napi_value, Error>;
    type SerializeMap = ser::Impossible<sys::napi_value, Error>;
    type SerializeStruct = ser::Impossible<sys::napi_value, Error>;
    type SerializeStructVariant = ser::Impossible<sys::napi_value, Error>;

    key_as_text!(
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_char(char)
    );
    not_keys!(
        serialize_bool(bool),
        serialize_f32(f32),
        serialize_f64(f64),
        serialize_bytes(&[u8]),
        serialize_none(),
        serialize_unit(),
        serialize_unit_struct(&'static str)
    );

    fn serialize_str(self, v: &str) -> Result<sys::napi_value> {
        string(self.0.env, v)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<sys::napi_value> {
        Err(not_a_key())
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<sys::napi_value> {
        self.0.name(variant)
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
        _: &'static str,
        _: &T,
    ) -> Result<sys::napi_value> {
        Err(not_a_key())
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq> {
        Err(not_a_key())
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple> {
        Err(not_a_key())
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct> {
        Err(not_a_key())
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant> {
        Err(not_a_key())
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap> {
        Err(not_a_key())
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct> {
        Err(not_a_key())
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant> {
        Err(not_a_key())
    }
}
