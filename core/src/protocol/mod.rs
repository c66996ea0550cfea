//! Protocol types that clients see, with the seed's names and snake_case JSON.
//!
//! These are plain data. Resolving them is `snapshot`'s job; enforcing them is the checkers'
//! and the sandbox's.

mod sandbox;

pub use sandbox::*;
