//! The policy file format: JSON and TOML with the same structure, strict (unknown fields and
//! kinds are errors naming the field path, line and column), and a JSON Schema.

use std::path::Path;

use crate::error::PolicyError;
use crate::policy::Policy;

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

fn field_path(path: &serde_path_to_error::Path) -> String {
    let s = path.to_string();
    if s.is_empty() { ".".to_owned() } else { s }
}

impl Policy {
    /// Parse a policy from JSON text. `origin` (a file name) is quoted in errors.
    pub fn from_json_str(text: &str, origin: Option<&str>) -> Result<Policy, PolicyError> {
        let mut de = serde_json::Deserializer::from_str(text);
        let policy: Policy = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let path = field_path(e.path());
            let inner = e.into_inner();
            PolicyError::Parse {
                format: "json",
                origin: origin.map(str::to_owned),
                path,
                line: Some(inner.line()),
                column: Some(inner.column()),
                message: strip_position(&inner.to_string()),
            }
        })?;
        de.end().map_err(|e| PolicyError::Parse {
            format: "json",
            origin: origin.map(str::to_owned),
            path: ".".to_owned(),
            line: Some(e.line()),
            column: Some(e.column()),
            message: strip_position(&e.to_string()),
        })?;
        Ok(policy)
    }

    /// Parse a policy from TOML text. `origin` (a file name) is quoted in errors.
    pub fn from_toml_str(text: &str, origin: Option<&str>) -> Result<Policy, PolicyError> {
        parse_toml(text, origin)
    }

    /// Parse a policy from an already-parsed JSON value (a Python dict, a JS object).
    pub fn from_json_value(value: serde_json::Value) -> Result<Policy, PolicyError> {
        serde_path_to_error::deserialize(value).map_err(|e| PolicyError::Parse {
            format: "json",
            origin: None,
            path: field_path(e.path()),
            line: None,
            column: None,
            message: e.into_inner().to_string(),
        })
    }

    /// Read a policy file; the format follows the extension (`.json` or `.toml`).
    pub fn from_path(path: impl AsRef<Path>) -> Result<Policy, PolicyError> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Io {
            path: shown.clone(),
            source,
        })?;
        match path.extension().and_then(|e| e.to_str()) {
            Some("json") => Policy::from_json_str(&text, Some(&shown)),
            Some("toml") => Policy::from_toml_str(&text, Some(&shown)),
            _ => Err(PolicyError::UnknownFormat(shown)),
        }
    }

    /// The policy as pretty JSON in the file format.
    pub fn to_json_string(&self) -> String {
        // Serializing plain data with string keys cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// The policy as TOML in the file format.
    pub fn to_toml_string(&self) -> Result<String, PolicyError> {
        toml::to_string_pretty(self).map_err(|e| PolicyError::Parse {
            format: "toml",
            origin: None,
            path: ".".to_owned(),
            line: None,
            column: None,
            message: e.to_string(),
        })
    }

    /// The JSON Schema of the policy file format.
    pub fn json_schema() -> serde_json::Value {
        serde_json::to_value(schemars::schema_for!(Policy)).unwrap_or_default()
    }
}

/// Parse TOML text strictly into `T`: errors name the field path, line and column.
pub(crate) fn parse_toml<T: serde::de::DeserializeOwned>(
    text: &str,
    origin: Option<&str>,
) -> Result<T, PolicyError> {
    let de = toml::Deserializer::parse(text).map_err(|e| toml_error(text, origin, ".", &e))?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = field_path(e.path());
        toml_error(text, origin, &path, e.inner())
    })
}

/// serde_json appends " at line L column C"; the error carries those separately.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_owned(),
        None => message.to_owned(),
    }
}

fn toml_error(text: &str, origin: Option<&str>, path: &str, e: &toml::de::Error) -> PolicyError {
    let (line, column) = match e.span() {
        Some(span) => {
            let (l, c) = line_col(text, span.start);
            (Some(l), Some(c))
        }
        None => (None, None),
    };
    PolicyError::Parse {
        format: "toml",
        origin: origin.map(str::to_owned),
        path: path.to_owned(),
        line,
        column,
        message: e.message().to_owned(),
    }
}
