//! Protocol types that clients see, with the seed's names and snake_case JSON.
//!
//! These are plain data. Resolving them is `snapshot`'s job; enforcing them is the checkers'
//! and the sandbox's.

mod cap;
mod platform;
mod profile;
mod runtime;
mod sandbox;
mod security;

pub use cap::*;
pub use platform::*;
pub use profile::*;
pub use runtime::*;
pub use sandbox::*;
pub use security::*;
