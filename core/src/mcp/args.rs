//! Which arguments of a tool call name a file or a URL, so the file and network checkers can
//! judge them too.
//!
//! An argument is a path when its name says so (`path`, `file`, `dir`, `source`, ... or a name
//! ending in `path`, `file`, `dir`, ...) or its schema's `format` is `path`; it is a URL when
//! its name says so (`url`, `uri`, `href`, ...) or its `format` is `uri`/`url`/`iri`. In such an
//! argument an `http`/`https` value is checked as a URL and a `file:` URI as a path; a URL
//! argument of another scheme is checked as a URL (and refused by the network checker). A
//! path argument that is not a plain path (another scheme such as `memory://x` or `x:y`, a
//! `file:` URI that names no local path, leading or trailing whitespace, `~user`, a number,
//! boolean or object) cannot be judged: it is [`Unjudgeable`] and the call asks. Arrays and
//! nested objects are walked. In an argument whose name names no target, a value that looks
//! like a path (`/`, `~`, `./`, `../`, `file:`, `a/../b`) is judged as a *guessed* path (a deny of it is
//! an ask); other text (a file's `content` saying `the file /etc/passwd`) is never a target.

use std::path::Path;

use serde_json::Value;

use crate::action::ActionKind;

/// The most targets checked for one call; more is an ask (never a silent skip).
pub const MAX_TARGETS: usize = 256;
/// How deep nested arguments are walked; deeper is an ask.
const MAX_DEPTH: usize = 16;

const PATH_NAMES: &[&str] = &[
    "path",
    "paths",
    "file",
    "files",
    "filename",
    "filenames",
    "filepath",
    "filepaths",
    "dir",
    "dirs",
    "directory",
    "directories",
    "folder",
    "folders",
    "source",
    "sources",
    "destination",
    "dest",
    "src",
    "dst",
    "root",
    "roots",
    "cwd",
    "workdir",
];
const PATH_SUFFIXES: &[&str] = &[
    "path",
    "paths",
    "file",
    "files",
    "dir",
    "directory",
    "folder",
    "filename",
];
const URL_NAMES: &[&str] = &[
    "url", "urls", "uri", "uris", "href", "link", "links", "endpoint",
];
const URL_SUFFIXES: &[&str] = &["url", "urls", "uri", "uris"];
const URL_FORMATS: &[&str] = &["uri", "uri-reference", "iri", "iri-reference", "url"];

/// One argument value to check: a file action or a network action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgTarget {
    /// `file_read`, `file_write` or `network`.
    pub kind: ActionKind,
    /// The path or URL.
    pub target: String,
    /// Where it was in the arguments (`path`, `paths[1]`, `edits[0].file`).
    pub argument: String,
    /// Its argument's name names no target; the value only looks like a path (`/x`, `~/x`,
    /// `./x`, `../x`, `file:x`). A deny of a guessed target is an ask.
    pub guessed: bool,
}

/// An argument where a path is expected that cannot be judged as one (another scheme, a
/// leading space, `~user`, a number or an object): the call asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unjudgeable {
    /// Where it was in the arguments.
    pub argument: String,
    /// Why it cannot be judged.
    pub why: String,
}

/// The targets among a call's arguments, and the arguments that cannot be judged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArgTargets {
    /// The file and network actions to check.
    pub targets: Vec<ArgTarget>,
    /// Arguments that ask on their own.
    pub unjudgeable: Vec<Unjudgeable>,
}

/// Too many targets or too deep arguments: the call asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooComplex(pub String);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Hint {
    None,
    Path,
    Url,
}

fn normalized(name: &str) -> String {
    name.chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect()
}

fn hint_for(name: &str, schema: Option<&Value>) -> Hint {
    let format = schema
        .and_then(|s| s.get("format"))
        .and_then(Value::as_str)
        .map(str::to_ascii_lowercase);
    if let Some(f) = format.as_deref() {
        if URL_FORMATS.contains(&f) {
            return Hint::Url;
        }
        if f == "path" || f == "file-path" {
            return Hint::Path;
        }
    }
    let n = normalized(name);
    if URL_NAMES.iter().any(|u| normalized(u) == n) || URL_SUFFIXES.iter().any(|s| n.ends_with(s)) {
        return Hint::Url;
    }
    if PATH_NAMES.iter().any(|p| normalized(p) == n)
        || PATH_SUFFIXES.iter().any(|s| n.ends_with(&normalized(s)))
    {
        return Hint::Path;
    }
    Hint::None
}

struct Walk<'a> {
    file_kind: ActionKind,
    home: Option<&'a Path>,
    out: Vec<ArgTarget>,
    unjudgeable: Vec<Unjudgeable>,
}

/// The scheme of `s` when it starts with one per RFC 3986 (`ALPHA *( ALPHA / DIGIT / "+" /
/// "-" / "." ) ":"`), `file:/x` and `x:` included.
fn uri_scheme(s: &str) -> Option<&str> {
    let (scheme, _) = s.split_once(':')?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
    .then_some(scheme)
}

/// A string in an argument whose name names no target that looks like a path anyway: it
/// starts with `/`, `~`, `./`, `../` or `file:`, or climbs with `/../`.
fn looks_like_path(s: &str) -> bool {
    let t = s.trim_start();
    t.starts_with('/')
        || t.starts_with('~')
        || t.starts_with("./")
        || t.starts_with("../")
        || t.contains("/../")
        || t.ends_with("/..")
        || t.get(..5).is_some_and(|p| p.eq_ignore_ascii_case("file:"))
}

impl Walk<'_> {
    fn push(&mut self, kind: ActionKind, target: String, argument: &str) -> Result<(), TooComplex> {
        if self.out.len() >= MAX_TARGETS {
            return Err(TooComplex(format!(
                "more than {MAX_TARGETS} path or URL arguments"
            )));
        }
        self.out.push(ArgTarget {
            kind,
            target,
            argument: argument.to_owned(),
            guessed: false,
        });
        Ok(())
    }

    /// An argument the checkers cannot judge as given: the call asks.
    fn unjudgeable(&mut self, argument: &str, why: String) {
        self.unjudgeable.push(Unjudgeable {
            argument: argument.to_owned(),
            why,
        });
    }

    fn string(&mut self, s: &str, hint: Hint, argument: &str) -> Result<(), TooComplex> {
        let guessed = hint == Hint::None && looks_like_path(s);
        if hint == Hint::None && !guessed {
            return Ok(());
        }
        let before = self.out.len();
        self.judged_string(s, if guessed { Hint::Path } else { hint }, argument)?;
        if guessed {
            for t in &mut self.out[before..] {
                t.guessed = true;
            }
        }
        Ok(())
    }

    fn judged_string(&mut self, s: &str, hint: Hint, argument: &str) -> Result<(), TooComplex> {
        if s.trim() != s {
            self.unjudgeable(
                argument,
                format!(
                    "`{}` has leading or trailing whitespace; a server that trims it would use \
                     another path than the one checked",
                    s.escape_default()
                ),
            );
            return Ok(());
        }
        if hint == Hint::Path && s.contains('\\') {
            self.unjudgeable(
                argument,
                format!(
                    "`{}` holds a backslash, which a server may read as a separator",
                    s.escape_default()
                ),
            );
            return Ok(());
        }
        if let Some(scheme) = uri_scheme(s) {
            let scheme = scheme.to_ascii_lowercase();
            if scheme == "http" || scheme == "https" {
                return self.push(ActionKind::Network, s.to_owned(), argument);
            }
            if scheme == "file" {
                match url::Url::parse(s).ok().and_then(|u| u.to_file_path().ok()) {
                    Some(p) => {
                        self.push(self.file_kind, p.to_string_lossy().into_owned(), argument)?
                    }
                    None => self.unjudgeable(
                        argument,
                        format!("`{}` is not a local file URI", s.escape_default()),
                    ),
                }
                return Ok(());
            }
            if hint == Hint::Url {
                // A URL of a scheme the network checker refuses: checked, and refused.
                return self.push(ActionKind::Network, s.to_owned(), argument);
            }
            // A path argument of another scheme (`x://../../etc/passwd`, `s3://b/..`): what
            // the server makes of it is unknown, so it cannot be judged as a path.
            self.unjudgeable(
                argument,
                format!(
                    "`{}` names a `{scheme}:` resource where a path is expected; it cannot be \
                     checked as a file",
                    s.escape_default()
                ),
            );
            return Ok(());
        }
        match hint {
            Hint::Path => {
                if s.starts_with('~') && s != "~" && !s.starts_with("~/") {
                    self.unjudgeable(
                        argument,
                        format!(
                            "`{}` names another user's home directory, which is not checked",
                            s.escape_default()
                        ),
                    );
                    return Ok(());
                }
                self.push(self.file_kind, s.to_owned(), argument)?;
                // Servers expand `~`; the checker judges the expanded form too.
                if let Some(home) = self.home
                    && (s == "~" || s.starts_with("~/"))
                {
                    let expanded = home.join(s.trim_start_matches('~').trim_start_matches('/'));
                    self.push(
                        self.file_kind,
                        expanded.to_string_lossy().into_owned(),
                        argument,
                    )?;
                }
                Ok(())
            }
            Hint::Url => self.push(ActionKind::Network, s.to_owned(), argument),
            Hint::None => Ok(()),
        }
    }

    fn value(
        &mut self,
        v: &Value,
        schema: Option<&Value>,
        hint: Hint,
        argument: &str,
        depth: usize,
    ) -> Result<(), TooComplex> {
        if depth > MAX_DEPTH {
            return Err(TooComplex(format!(
                "arguments nested deeper than {MAX_DEPTH} levels"
            )));
        }
        match v {
            Value::String(s) => self.string(s, hint, argument),
            Value::Array(items) => {
                let item_schema = schema.and_then(|s| s.get("items"));
                let item_hint = match (hint, item_schema) {
                    (Hint::None, Some(s)) => hint_for("", Some(s)),
                    (h, _) => h,
                };
                for (i, item) in items.iter().enumerate() {
                    self.value(
                        item,
                        item_schema,
                        item_hint,
                        &format!("{argument}[{i}]"),
                        depth + 1,
                    )?;
                }
                Ok(())
            }
            Value::Object(_) | Value::Number(_) | Value::Bool(_) if hint == Hint::Path => {
                self.unjudgeable(
                    argument,
                    format!("a path is expected here, not {}", kind_of(v)),
                );
                Ok(())
            }
            Value::Object(map) => {
                let props = schema.and_then(|s| s.get("properties"));
                for (key, inner) in map {
                    let inner_schema = props.and_then(|p| p.get(key));
                    let name = if argument.is_empty() {
                        key.clone()
                    } else {
                        format!("{argument}.{key}")
                    };
                    self.value(
                        inner,
                        inner_schema,
                        hint_for(key, inner_schema),
                        &name,
                        depth + 1,
                    )?;
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Object(_) => "an object",
        Value::Number(_) => "a number",
        Value::Bool(_) => "a boolean",
        Value::Array(_) => "an array",
        Value::String(_) => "a string",
        Value::Null => "null",
    }
}

/// The file and network actions hidden in a call's `arguments`, judged against the tool's
/// `inputSchema` when it has one. `read_only` (an `mcp_read`) makes paths `file_read`,
/// otherwise `file_write` (the stricter check). `home` expands a leading `~`.
pub fn argument_targets(
    arguments: &Value,
    input_schema: Option<&Value>,
    read_only: bool,
    home: Option<&Path>,
) -> Result<ArgTargets, TooComplex> {
    let mut walk = Walk {
        file_kind: if read_only {
            ActionKind::FileRead
        } else {
            ActionKind::FileWrite
        },
        home,
        out: Vec::new(),
        unjudgeable: Vec::new(),
    };
    walk.value(arguments, input_schema, Hint::None, "", 0)?;
    Ok(ArgTargets {
        targets: walk.out,
        unjudgeable: walk.unjudgeable,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn targets(args: Value, schema: Value, read_only: bool) -> Vec<(ActionKind, String, String)> {
        argument_targets(&args, Some(&schema), read_only, Some(Path::new("/home/u")))
            .expect("not too complex")
            .targets
            .into_iter()
            .map(|t| (t.kind, t.target, t.argument))
            .collect()
    }

    #[test]
    fn path_arguments_by_name_are_file_actions_of_the_call_kind() {
        let got = targets(json!({"path": "/etc/passwd", "tail": 3}), json!({}), true);
        assert_eq!(
            got,
            vec![(ActionKind::FileRead, "/etc/passwd".into(), "path".into())]
        );
        let got = targets(json!({"source": "a", "destination": "b"}), json!({}), false);
        assert_eq!(got.len(), 2);
        assert!(got.iter().all(|t| t.0 == ActionKind::FileWrite));
        let got = targets(json!({"outputFilePath": "x"}), json!({}), false);
        assert_eq!(got[0].0, ActionKind::FileWrite);
    }

    #[test]
    fn arrays_and_nested_objects_are_walked() {
        let got = targets(
            json!({"paths": ["a", "b"], "opts": {"config_file": "c"}}),
            json!({}),
            true,
        );
        let mut args: Vec<&str> = got.iter().map(|t| t.2.as_str()).collect();
        args.sort_unstable();
        assert_eq!(args, ["opts.config_file", "paths[0]", "paths[1]"]);
    }

    #[test]
    fn the_schema_format_marks_urls_and_paths() {
        let schema = json!({"properties": {"q": {"type": "string", "format": "uri"},
                                           "w": {"type": "string", "format": "path"}}});
        let got = targets(
            json!({"q": "https://evil.example/x", "w": "notes"}),
            schema,
            true,
        );
        assert_eq!(
            got,
            vec![
                (
                    ActionKind::Network,
                    "https://evil.example/x".into(),
                    "q".into()
                ),
                (ActionKind::FileRead, "notes".into(), "w".into()),
            ]
        );
    }

    #[test]
    fn a_path_argument_holding_a_url_is_judged_as_what_it_names() {
        let got = targets(
            json!({"path": "file:///etc/shadow", "file": "http://10.0.0.1/"}),
            json!({}),
            true,
        );
        assert!(got.contains(&(ActionKind::FileRead, "/etc/shadow".into(), "path".into())));
        assert!(got.contains(&(
            ActionKind::Network,
            "http://10.0.0.1/".into(),
            "file".into()
        )));
        // Text in an argument that names no target is never a target.
        assert!(targets(json!({"message": "http://10.0.0.1/"}), json!({}), true).is_empty());
    }

    #[test]
    fn a_tilde_is_also_judged_expanded() {
        let got = targets(json!({"path": "~/.aws/credentials"}), json!({}), true);
        assert!(
            got.iter().any(|t| t.1 == "/home/u/.aws/credentials"),
            "{got:?}"
        );
        assert!(got.iter().any(|t| t.1 == "~/.aws/credentials"), "{got:?}");
    }

    fn unjudged(args: Value) -> Vec<String> {
        argument_targets(&args, None, true, Some(Path::new("/home/u")))
            .expect("not too complex")
            .unjudgeable
            .into_iter()
            .map(|u| u.argument)
            .collect()
    }

    #[test]
    fn a_path_argument_that_is_not_a_plain_path_is_never_skipped() {
        // The red team's fail-opens: none may pass as "no target".
        for v in [
            json!("x://../../../../../../../etc/passwd"),
            json!("s3://bucket/../../../../etc/passwd"),
            json!("memory:notes"),
            json!(" /etc/passwd"),
            json!("/etc/passwd "),
            json!("~root/.bashrc"),
            json!("\\\\?\\/etc/passwd"),
            json!("file://remotehost/etc/passwd"),
            json!({"value": "/etc/passwd"}),
            json!(7),
            json!(true),
        ] {
            assert_eq!(unjudged(json!({"path": v})), ["path"], "{v}");
            assert!(
                targets(json!({"path": v}), json!({}), true).is_empty(),
                "{v}"
            );
        }
        // Null is an argument not given.
        assert!(unjudged(json!({"path": null})).is_empty());
    }

    #[test]
    fn every_form_of_file_uri_is_judged_as_its_path() {
        for u in [
            "file:/etc/passwd",
            "FILE:/etc/passwd",
            "file:///etc/passwd",
            "file://localhost/etc/passwd",
        ] {
            let got = targets(json!({"path": u}), json!({}), true);
            assert_eq!(
                got,
                vec![(ActionKind::FileRead, "/etc/passwd".into(), "path".into())],
                "{u}"
            );
        }
    }

    #[test]
    fn an_unhinted_value_that_looks_like_a_path_is_a_guessed_target() {
        for (key, v) in [
            ("target", "/etc/passwd"),
            ("location", "../../etc/passwd"),
            ("input", "./x"),
            ("input", "a/../../etc/passwd"),
            ("q", "~/.ssh/id_rsa"),
            ("q", "file:/etc/passwd"),
        ] {
            let got = argument_targets(&json!({ key: v }), None, true, None).expect("simple");
            assert!(
                !got.targets.is_empty() && got.targets.iter().all(|t| t.guessed),
                "{key}={v}: {got:?}"
            );
        }
        let got = argument_targets(&json!({"target": "~root/x"}), None, true, None).expect("ok");
        assert_eq!(got.unjudgeable.len(), 1);
        // A hinted path is not a guess.
        let got = argument_targets(&json!({"path": "/x"}), None, true, None).expect("ok");
        assert!(!got.targets[0].guessed);
    }

    #[test]
    fn plain_text_is_not_a_target_and_other_schemes_in_url_fields_are_checked() {
        assert!(targets(json!({"content": "the file /etc/passwd"}), json!({}), false).is_empty());
        let got = targets(json!({"url": "ftp://x/y"}), json!({}), true);
        assert_eq!(got[0].0, ActionKind::Network);
    }

    #[test]
    fn too_many_targets_or_too_deep_is_too_complex() {
        let many: Vec<String> = (0..=MAX_TARGETS).map(|i| format!("f{i}")).collect();
        assert!(argument_targets(&json!({"paths": many}), None, true, None).is_err());
        let mut deep = json!("x");
        for _ in 0..20 {
            deep = json!({"a": deep});
        }
        assert!(argument_targets(&deep, None, true, None).is_err());
    }
}
