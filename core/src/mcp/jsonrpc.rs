//! JSON-RPC 2.0 messages as MCP's stdio transport carries them: one JSON object per line
//! (the transport forbids embedded newlines), parsed strictly and re-serialized from what was
//! parsed.

use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value, json};

/// JSON-RPC error codes used by the proxy.
pub const PARSE_ERROR: i64 = -32700;
/// The message is not a valid request.
pub const INVALID_REQUEST: i64 = -32600;
/// The method does not exist (or is not forwarded).
pub const METHOD_NOT_FOUND: i64 = -32601;
/// The parameters are not valid.
pub const INVALID_PARAMS: i64 = -32602;
/// The proxy failed internally (the gate could not decide, the server is gone).
pub const INTERNAL_ERROR: i64 = -32603;
/// A request before the session was initialized.
pub const NOT_INITIALIZED: i64 = -32002;

/// One message, classified.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A request: it expects a response with the same id.
    Request {
        /// A string or a number.
        id: Value,
        /// The method.
        method: String,
        /// The params, when present.
        params: Option<Value>,
    },
    /// A notification: no response.
    Notification {
        /// The method.
        method: String,
        /// The params, when present.
        params: Option<Value>,
    },
    /// A response to a request of the other side.
    Response {
        /// The id of the request it answers.
        id: Value,
        /// `Ok(result)` or `Err(error)`.
        body: Result<Value, Value>,
    },
}

/// Why a line is not a message.
#[derive(Debug, Clone, PartialEq)]
pub enum ParseError {
    /// Not JSON at all (or a duplicate top-level member).
    Json(String),
    /// A JSON array: a batch.
    Batch(Vec<Value>),
    /// JSON, but not a JSON-RPC 2.0 message; the id when one could be read.
    Invalid {
        /// The id, when the message carried a usable one.
        id: Option<Value>,
        /// What is wrong.
        why: String,
    },
}

/// Present-or-absent: `"id": null` is `Some(Null)`, a missing id is `None`.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// The wire form. A repeated top-level member is a parse error (serde's derive refuses
/// duplicate fields), so two readers can never see two different methods or ids.
#[derive(Deserialize)]
struct Wire {
    jsonrpc: Value,
    #[serde(default, deserialize_with = "present")]
    id: Option<Value>,
    #[serde(default)]
    method: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    params: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    result: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    error: Option<Value>,
}

/// The largest integer every JSON reader holds exactly (2^53 − 1, JavaScript's
/// `Number.MAX_SAFE_INTEGER`).
const MAX_SAFE_ID: i64 = (1 << 53) - 1;

/// A string, or an integer that a JavaScript peer reads as the same number. Two ids beyond
/// 2^53 can be distinct here and one number there, so the proxy's attribution and the
/// peer's would differ: such an id is refused, in both directions.
fn usable_id(id: &Value) -> bool {
    id.is_string()
        || id
            .as_i64()
            .is_some_and(|n| (-MAX_SAFE_ID..=MAX_SAFE_ID).contains(&n))
}

/// Parse one line.
pub fn parse(line: &[u8]) -> Result<Message, ParseError> {
    let first = line.iter().find(|b| !b.is_ascii_whitespace());
    if first == Some(&b'[') {
        return match serde_json::from_slice::<Vec<Value>>(line) {
            Ok(items) => Err(ParseError::Batch(items)),
            Err(e) => Err(ParseError::Json(e.to_string())),
        };
    }
    let wire: Wire = match serde_json::from_slice(line) {
        Ok(w) => w,
        Err(e) if e.is_data() => {
            // JSON, but not the shape of a message: answer with its id when it has one.
            let id = serde_json::from_slice::<Value>(line)
                .ok()
                .and_then(|v| v.get("id").cloned())
                .filter(usable_id);
            return Err(ParseError::Invalid {
                id,
                why: e.to_string(),
            });
        }
        Err(e) => return Err(ParseError::Json(e.to_string())),
    };
    let invalid = |id: &Option<Value>, why: &str| ParseError::Invalid {
        id: id.clone().filter(usable_id),
        why: why.to_owned(),
    };
    if wire.jsonrpc != Value::String("2.0".to_owned()) {
        return Err(invalid(&wire.id, "`jsonrpc` must be \"2.0\""));
    }
    if let Some(p) = &wire.params
        && !(p.is_object() || p.is_array())
    {
        return Err(invalid(&wire.id, "`params` must be an object or an array"));
    }
    match (wire.method, wire.result, wire.error) {
        (Some(Value::String(method)), None, None) => match wire.id {
            None => Ok(Message::Notification {
                method,
                params: wire.params,
            }),
            Some(id) if usable_id(&id) => Ok(Message::Request {
                id,
                method,
                params: wire.params,
            }),
            Some(_) => Err(invalid(
                &None,
                "a request id must be a string or an integer within ±(2^53 − 1)",
            )),
        },
        (Some(_), None, None) => Err(invalid(&wire.id, "`method` must be a string")),
        (None, Some(result), None) if wire.params.is_none() => match wire.id {
            Some(id) if usable_id(&id) => Ok(Message::Response {
                id,
                body: Ok(result),
            }),
            _ => Err(invalid(
                &None,
                "a response needs a string id or an integer id within ±(2^53 − 1)",
            )),
        },
        (None, None, Some(error)) if wire.params.is_none() => match wire.id {
            Some(id) if usable_id(&id) => Ok(Message::Response {
                id,
                body: Err(error),
            }),
            _ => Err(invalid(
                &None,
                "a response needs a string id or an integer id within ±(2^53 − 1)",
            )),
        },
        _ => Err(invalid(
            &wire.id,
            "a message is a request, a notification or a response (exactly one of `method`, `result`, `error`)",
        )),
    }
}

impl Message {
    /// The message as one line of JSON (no newline), built from what was parsed.
    pub fn to_line(&self) -> String {
        let mut m = Map::new();
        m.insert("jsonrpc".to_owned(), Value::String("2.0".to_owned()));
        match self {
            Message::Request { id, method, params } => {
                m.insert("id".to_owned(), id.clone());
                m.insert("method".to_owned(), Value::String(method.clone()));
                if let Some(p) = params {
                    m.insert("params".to_owned(), p.clone());
                }
            }
            Message::Notification { method, params } => {
                m.insert("method".to_owned(), Value::String(method.clone()));
                if let Some(p) = params {
                    m.insert("params".to_owned(), p.clone());
                }
            }
            Message::Response { id, body } => {
                m.insert("id".to_owned(), id.clone());
                match body {
                    Ok(r) => m.insert("result".to_owned(), r.clone()),
                    Err(e) => m.insert("error".to_owned(), e.clone()),
                };
            }
        }
        Value::Object(m).to_string()
    }
}

/// The key a request id is tracked under: its JSON text, so `1` and `"1"` differ.
pub fn id_key(id: &Value) -> String {
    id.to_string()
}

/// An error response (`id` null when the request's id is unknown).
pub fn error_line(id: Option<&Value>, code: i64, message: &str) -> String {
    json!({
        "jsonrpc": "2.0",
        "id": id.cloned().unwrap_or(Value::Null),
        "error": {"code": code, "message": message},
    })
    .to_string()
}

/// An error response as a value (for a batch's answer).
pub fn error_value(id: Option<&Value>, code: i64, message: &str) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id.cloned().unwrap_or(Value::Null),
        "error": {"code": code, "message": message},
    })
}

/// A `tools/call` result that did not run: `isError` with `text` as its content.
pub fn tool_error_line(id: &Value, text: &str) -> String {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "result": {"content": [{"type": "text", "text": text}], "isError": true},
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_notifications_and_responses_are_told_apart() {
        let r = parse(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#);
        assert!(matches!(r, Ok(Message::Request { .. })));
        let n = parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        assert!(matches!(n, Ok(Message::Notification { .. })));
        let s = parse(br#"{"jsonrpc":"2.0","id":"a","result":{}}"#);
        assert!(matches!(s, Ok(Message::Response { body: Ok(_), .. })));
        let e = parse(br#"{"jsonrpc":"2.0","id":2,"error":{"code":1,"message":"x"}}"#);
        assert!(matches!(e, Ok(Message::Response { body: Err(_), .. })));
    }

    #[test]
    fn a_duplicate_member_is_refused_not_resolved_one_way() {
        let r = parse(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call"}"#);
        assert!(r.is_err(), "{r:?}");
    }

    #[test]
    fn batches_and_malformed_messages_are_refused() {
        assert!(matches!(
            parse(br#"[{"jsonrpc":"2.0","id":1,"method":"tools/call"}]"#),
            Err(ParseError::Batch(items)) if items.len() == 1
        ));
        assert!(matches!(parse(b"{not json"), Err(ParseError::Json(_))));
        assert!(matches!(
            parse(br#"{"jsonrpc":"1.0","id":1,"method":"x"}"#),
            Err(ParseError::Invalid { id: Some(_), .. })
        ));
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":{"a":1},"method":"x"}"#),
            Err(ParseError::Invalid { id: None, .. })
        ));
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":1,"method":"x","result":1}"#),
            Err(ParseError::Invalid { .. })
        ));
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":1,"method":"x","params":3}"#),
            Err(ParseError::Invalid { .. })
        ));
    }

    #[test]
    fn ids_a_javascript_peer_would_round_are_refused_both_ways() {
        // 2^53 + 1 and 2^53 are one number to JavaScript: distinct here, the same there.
        for id in [
            "9007199254740993",
            "9007199254740992",
            "-9007199254740992",
            "18446744073709551615",
        ] {
            let request = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call"}}"#);
            assert!(
                matches!(
                    parse(request.as_bytes()),
                    Err(ParseError::Invalid { id: None, .. })
                ),
                "request id {id}"
            );
            let response = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#);
            assert!(
                matches!(
                    parse(response.as_bytes()),
                    Err(ParseError::Invalid { id: None, .. })
                ),
                "response id {id}"
            );
        }
        for id in ["9007199254740991", "-9007199254740991", "0"] {
            let request = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call"}}"#);
            assert!(
                matches!(parse(request.as_bytes()), Ok(Message::Request { .. })),
                "{id}"
            );
        }
        // A float is not an integer id, whatever its value.
        assert!(parse(br#"{"jsonrpc":"2.0","id":1.0,"method":"x"}"#).is_err());
    }

    #[test]
    fn a_message_is_forwarded_as_parsed() {
        let m = parse(
            br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"a"},"extra":1}"#,
        )
        .expect("parses");
        let line = m.to_line();
        assert!(!line.contains("extra"), "{line}");
        assert_eq!(parse(line.as_bytes()).expect("round trip"), m);
    }
}
