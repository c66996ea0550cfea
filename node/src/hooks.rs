//! The package's JavaScript hooks: functions `index.js` registers once per Node environment
//! (worker) at load, and the addon calls back into. Not part of the public API.

use napi::Env;
use napi::bindgen_prelude::{FnArgs, Function, FunctionRef, Promise, Unknown};
use serde_json::Value;

use crate::ser::Shapes;

/// `(code, message, details) => Error`: builds an instance of the package's error classes.
pub type MakeError = FunctionRef<FnArgs<(&'static str, String, Value)>, Unknown<'static>>;

/// `(fn) => async (ask) => decision`: normalizes a JavaScript approver's answers (a decision
/// object, as `turngate_ffi::approver::decision_from_value` reads it) and turns its exceptions
/// and rejections into denials.
pub type WrapApprover = FunctionRef<
    Function<'static, Unknown<'static>, Unknown<'static>>,
    Function<'static, Value, Promise<Value>>,
>;

/// The hooks of one environment.
pub struct Hooks {
    /// The error factory (see [`crate::error::js_error`]).
    pub make_error: MakeError,
    /// The approver normalizer (see [`crate::approver`]).
    pub wrap_approver: WrapApprover,
    /// The record shapes built so far (see [`crate::ser`]).
    pub shapes: Shapes,
}

/// Registers the hooks of this environment. Called once by `index.js`.
#[napi_derive::napi(skip_typescript)]
pub fn set_hooks(env: Env, make_error: MakeError, wrap_approver: WrapApprover) -> napi::Result<()> {
    env.set_instance_data(
        Hooks {
            make_error,
            wrap_approver,
            shapes: Shapes::new(&env),
        },
        (),
        |_| {},
    )
}

/// The registered hooks of this environment.
pub fn hooks(env: &Env) -> Option<&'static Hooks> {
    env.get_instance_data::<Hooks>().ok().flatten().map(|h| &*h)
}

opaque_debug!(Hooks);
