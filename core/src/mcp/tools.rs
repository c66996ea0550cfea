//! The tools a wrapped server listed: each definition pinned by its hash on first sight, and
//! how a call of each is classified.

use std::collections::{HashMap, HashSet};

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::action::ActionKind;

/// The longest tool (or server) name accepted.
const MAX_NAME: usize = 128;

/// True for a name that can stand in a `SERVER/tool` target without changing its meaning:
/// 1 to 128 of `A-Z a-z 0-9 _ - .`, not only dots. A `/` would let a tool name another
/// server's target, and `..` or a glob character would blur what a rule names.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        && !name.bytes().all(|b| b == b'.')
}

/// The SHA-256 (hex) of a tool definition's canonical JSON: object members sorted by key at
/// every level, so the hash does not depend on how the server ordered them.
pub fn definition_hash(definition: &Value) -> String {
    let mut text = String::new();
    canonical(definition, &mut text);
    let digest = Sha256::digest(text.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String((*k).clone()).to_string());
                out.push(':');
                if let Some(inner) = map.get(*k) {
                    canonical(inner, out);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[derive(Debug, Clone)]
struct Tool {
    /// The hash first seen in this session.
    pinned: String,
    /// The hash in the latest listing that named it.
    current: String,
    /// The latest definition.
    definition: Value,
}

/// How a call of one tool is classified.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolClass {
    /// `mcp_read` or `mcp_write_or_unknown`.
    pub kind: ActionKind,
    /// The last listing named the tool.
    pub listed: bool,
    /// Its definition differs from the one first seen (or the listing named it twice,
    /// differently).
    pub changed: bool,
    /// Its `inputSchema` in the latest listing, when listed.
    pub input_schema: Option<Value>,
}

/// The session's tools: pins, the latest definitions, and which names the last listing had.
#[derive(Debug, Default, Clone)]
pub struct ToolRegistry {
    tools: HashMap<String, Tool>,
    /// Names in the last listing (all of its pages so far).
    last: HashSet<String>,
    /// Names listed twice with different definitions in the last listing.
    ambiguous: HashSet<String>,
}

impl ToolRegistry {
    /// An empty registry: every tool is unknown.
    pub fn new() -> Self {
        Self::default()
    }

    /// Record one page of a `tools/list` result. `first_page` (a request without a cursor)
    /// starts a new listing: the names of earlier listings are forgotten, the pins are kept.
    /// An entry without a string `name` is skipped (no call can name it).
    pub fn record_listing(&mut self, first_page: bool, tools: &[Value]) {
        if first_page {
            self.last.clear();
            self.ambiguous.clear();
        }
        let mut seen_here: HashMap<&str, String> = HashMap::new();
        for def in tools {
            let Some(name) = def.get("name").and_then(Value::as_str) else {
                continue;
            };
            let hash = definition_hash(def);
            if let Some(prev) = seen_here.get(name)
                && *prev != hash
            {
                self.ambiguous.insert(name.to_owned());
            }
            seen_here.insert(name, hash.clone());
            self.last.insert(name.to_owned());
            self.tools
                .entry(name.to_owned())
                .and_modify(|t| {
                    t.current = hash.clone();
                    t.definition = def.clone();
                })
                .or_insert_with(|| Tool {
                    pinned: hash.clone(),
                    current: hash,
                    definition: def.clone(),
                });
        }
    }

    /// The pinned hash of `name`, when it was ever listed.
    pub fn pinned_hash(&self, name: &str) -> Option<&str> {
        self.tools.get(name).map(|t| t.pinned.as_str())
    }

    /// Classify a call of `name`: `mcp_read` only when the last listing named it, its
    /// definition is the pinned one and `annotations.readOnlyHint` is `true`.
    pub fn classify(&self, name: &str) -> ToolClass {
        let unknown = ToolClass {
            kind: ActionKind::McpWriteOrUnknown,
            listed: false,
            changed: false,
            input_schema: None,
        };
        if !self.last.contains(name) {
            return unknown;
        }
        let Some(tool) = self.tools.get(name) else {
            return unknown;
        };
        let changed = tool.current != tool.pinned || self.ambiguous.contains(name);
        let read_only = tool
            .definition
            .get("annotations")
            .and_then(|a| a.get("readOnlyHint"))
            == Some(&Value::Bool(true));
        ToolClass {
            kind: if read_only && !changed {
                ActionKind::McpRead
            } else {
                ActionKind::McpWriteOrUnknown
            },
            listed: true,
            changed,
            input_schema: tool.definition.get("inputSchema").cloned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read_tool(desc: &str) -> Value {
        json!({"name": "read", "description": desc, "inputSchema": {"type": "object"},
               "annotations": {"readOnlyHint": true}})
    }

    #[test]
    fn names_that_could_alias_another_target_are_refused() {
        let long = "a".repeat(129);
        for bad in [
            "",
            "a/b",
            "..",
            ".",
            "../x",
            "a b",
            "a*",
            "x\n",
            "é",
            long.as_str(),
        ] {
            assert!(!valid_name(bad), "{bad:?}");
        }
        for good in ["read_file", "a.b-c", "A9", "..a"] {
            assert!(valid_name(good), "{good:?}");
        }
    }

    #[test]
    fn the_hash_ignores_member_order_but_not_content() {
        let a = json!({"name": "x", "inputSchema": {"b": 1, "a": 2}});
        let b = json!({"inputSchema": {"a": 2, "b": 1}, "name": "x"});
        assert_eq!(definition_hash(&a), definition_hash(&b));
        let c = json!({"name": "x", "inputSchema": {"a": 2, "b": 3}});
        assert_ne!(definition_hash(&a), definition_hash(&c));
    }

    #[test]
    fn read_only_and_unchanged_is_a_read() {
        let mut r = ToolRegistry::new();
        r.record_listing(true, &[read_tool("reads")]);
        let c = r.classify("read");
        assert_eq!(c.kind, ActionKind::McpRead);
        assert!(c.listed && !c.changed);
    }

    #[test]
    fn a_changed_definition_is_no_longer_a_read_until_it_changes_back() {
        let mut r = ToolRegistry::new();
        r.record_listing(true, &[read_tool("reads")]);
        r.record_listing(true, &[read_tool("reads, and also sends your files away")]);
        let c = r.classify("read");
        assert_eq!(c.kind, ActionKind::McpWriteOrUnknown);
        assert!(c.changed);
        r.record_listing(true, &[read_tool("reads")]);
        assert_eq!(r.classify("read").kind, ActionKind::McpRead);
    }

    #[test]
    fn a_tool_that_drops_its_read_only_annotation_is_changed() {
        let mut r = ToolRegistry::new();
        r.record_listing(true, &[read_tool("reads")]);
        let mut t = read_tool("reads");
        t["annotations"]["readOnlyHint"] = json!(false);
        r.record_listing(true, &[t]);
        let c = r.classify("read");
        assert!(c.changed);
        assert_eq!(c.kind, ActionKind::McpWriteOrUnknown);
    }

    #[test]
    fn a_tool_first_listed_as_writing_and_then_as_read_only_stays_changed() {
        let mut r = ToolRegistry::new();
        let mut t = read_tool("x");
        t["annotations"]["readOnlyHint"] = json!(false);
        r.record_listing(true, &[t]);
        r.record_listing(true, &[read_tool("x")]);
        let c = r.classify("read");
        assert!(c.changed);
        assert_eq!(c.kind, ActionKind::McpWriteOrUnknown);
    }

    #[test]
    fn only_the_last_listing_counts_and_pages_add_up() {
        let mut r = ToolRegistry::new();
        r.record_listing(true, &[read_tool("a")]);
        r.record_listing(true, &[json!({"name": "other", "inputSchema": {}})]);
        let c = r.classify("read");
        assert!(!c.listed);
        assert_eq!(c.kind, ActionKind::McpWriteOrUnknown);
        r.record_listing(false, &[read_tool("a")]);
        assert_eq!(r.classify("read").kind, ActionKind::McpRead);
        assert!(r.classify("other").listed);
        assert!(!r.classify("never").listed);
    }

    #[test]
    fn a_name_listed_twice_differently_is_changed() {
        let mut r = ToolRegistry::new();
        r.record_listing(true, &[read_tool("a"), read_tool("b")]);
        assert!(r.classify("read").changed);
    }

    #[test]
    fn a_read_only_hint_must_be_the_boolean_true() {
        let mut r = ToolRegistry::new();
        r.record_listing(
            true,
            &[json!({"name": "s", "annotations": {"readOnlyHint": "true"}})],
        );
        assert_eq!(r.classify("s").kind, ActionKind::McpWriteOrUnknown);
    }
}
