//! MCP servers under the gate (DESIGN §16): what `turngate mcp wrap` decides on the wire.
//!
//! A wrapped server's `tools/list` answers pin each tool's definition (its hash, on first
//! sight in the session); a `tools/call` becomes an `mcp_read` action only when the tool says
//! `annotations.readOnlyHint: true` *and* its definition is the one first seen, else
//! `mcp_write_or_unknown`, with target `SERVER/tool` and tool `tool`. A changed definition asks
//! again (`tool_definition_changed`), a tool the last listing did not name is unknown, and every
//! argument whose name or schema `format` says it is a path or a URL is also checked with the
//! file or network checker: the strictest verdict wins. The gate records every call.
//!
//! This module never starts the server (the gate's sandboxed spawn does) and never trusts a
//! message it could not parse: the proxy forwards what it parsed, re-serialized, so the server
//! and the client see exactly the message that was judged.

mod args;
mod jsonrpc;
mod proxy;
mod tools;

pub use args::{ArgTarget, ArgTargets, Unjudgeable, argument_targets};
pub use proxy::{McpProxy, ProxyEnd, ProxyOptions};
pub use tools::{ToolClass, ToolRegistry, definition_hash, valid_name};
