//! Where bash evaluates data as code: arithmetic contexts, array subscripts, prompt expansion,
//! and the builtins that take a variable name or a code string.
//!
//! Bash evaluates a variable's value as an arithmetic expression wherever an arithmetic
//! context names the variable (`$((x))`, `(( x ))`, `${a[x]}`, `${s:x}`, `${!x}`, `let x`,
//! `[[ x -eq 1 ]]`, `a[x]=1`), and an expression may hold `a[$(cmd)]`, which runs `cmd`. So a
//! line that both carries data it does not fix (a value holding `$` or a backquote, a dynamic
//! value, a glob, or data read at run time by `read`, `mapfile`, `printf -v`, `getopts`) and
//! reads a variable in an arithmetic context is unresolved. Unresolved whatever the data:
//! a variable subscript in `(( ))` or `$(( ))`, a name argument whose subscript holds code
//! (`test -v 'a[$(cmd)]'`, `printf -v`, `read`, `declare`, `unset`) or is not static, prompt
//! expansion (`${x@P}`), `compgen -C`, a `compgen -W` word list holding an expansion, and a
//! `mapfile -C` callback.
//!
//! This module decides nothing: it reports into the [`ParsedCommandLine`].

use super::{ParsedCommandLine, Word, is_injection_variable};

/// Whether an arithmetic expression reads a variable: a name (a word starting with a letter
/// or `_`) or an expansion. Numbers in any base (`0x1f`, `16#ff`) are not names.
pub(super) fn reads_variable(expr: &str) -> bool {
    let b = expr.as_bytes();
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        if c == b'$' || c == b'`' || c.is_ascii_alphabetic() || c == b'_' {
            return true;
        }
        if c.is_ascii_digit() {
            while b
                .get(i)
                .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, b'#' | b'_' | b'@'))
            {
                i += 1;
            }
            continue;
        }
        i += 1;
    }
    false
}

/// Whether text bash evaluates as arithmetic holds a command substitution (quoted, so the
/// parser saw a string: `'$(cmd)'` in a subscript still runs). `$((` nests arithmetic.
fn holds_code(expr: &str) -> bool {
    expr.contains('`')
        || expr
            .match_indices("$(")
            .any(|(i, _)| expr.as_bytes().get(i + 2) != Some(&b'('))
}

/// An array element `[SUB]=VALUE` of a compound assignment: the subscript is arithmetic for an
/// indexed array.
pub(super) fn array_element(element: &str, out: &mut ParsedCommandLine) {
    if let Some(rest) = element.strip_prefix('[')
        && let Some(close) = rest.find("]=")
    {
        subscript(&rest[..close], out);
    }
}

/// A subscript (`a[SUB]`, `${a[SUB]}`) evaluated as arithmetic.
fn subscript(index: &str, out: &mut ParsedCommandLine) {
    if holds_code(index) {
        out.unresolved("arithmetic_code");
    }
    if index != "@" && index != "*" && reads_variable(index) {
        out.arithmetic_reads_variable = true;
    }
}

/// Whether some `[...]` in `expr` reads a variable.
fn has_variable_subscript(expr: &str) -> bool {
    let mut rest = expr;
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        let close = after.find(']').unwrap_or(after.len());
        if reads_variable(&after[..close]) {
            return true;
        }
        rest = &after[close..];
    }
    false
}

/// An arithmetic expression (the text inside `$(( ))`, `(( ))`, a `for (( ))` clause, a
/// `let` argument).
pub(super) fn arithmetic(expr: &str, out: &mut ParsedCommandLine) {
    if holds_code(expr) {
        out.unresolved("arithmetic_code");
    }
    if has_variable_subscript(expr) {
        out.unresolved("arithmetic_subscript");
    }
    if reads_variable(expr) {
        out.arithmetic_reads_variable = true;
    }
}

/// The text of `$(( ))`, `$[ ]` or `(( ))` without its delimiters.
pub(super) fn arithmetic_body(text: &str) -> &str {
    let t = text.trim();
    t.strip_prefix("$((")
        .and_then(|t| t.strip_suffix("))"))
        .or_else(|| t.strip_prefix("((").and_then(|t| t.strip_suffix("))")))
        .or_else(|| t.strip_prefix("$[").and_then(|t| t.strip_suffix(']')))
        .unwrap_or(t)
}

/// A parameter expansion `${...}`: prompt expansion runs the value's command substitutions;
/// a subscript, a substring offset and an indirection evaluate data.
pub(super) fn expansion(text: &str, out: &mut ParsedCommandLine) {
    let Some(body) = text.strip_prefix("${").and_then(|t| t.strip_suffix('}')) else {
        return;
    };
    let (indirect, body) = match body.strip_prefix('!') {
        Some(b) if !b.is_empty() => (true, b),
        _ => (false, body),
    };
    let body = match body.strip_prefix('#') {
        Some(b) if !b.is_empty() => b,
        _ => body,
    };
    let mut name_len = body
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
        .count();
    if name_len == 0 {
        name_len = body.chars().next().map_or(0, char::len_utf8);
    }
    let mut rest = body.get(name_len..).unwrap_or("");
    if let Some(r) = rest.strip_prefix('[') {
        let close = r.find(']').unwrap_or(r.len());
        subscript(&r[..close], out);
        rest = r.get(close + 1..).unwrap_or("");
    }
    if indirect && !rest.starts_with(['*', '@']) {
        // `${!x}` expands the variable named by x's value, subscript and all.
        out.arithmetic_reads_variable = true;
    }
    if let Some(op) = rest.strip_prefix('@') {
        if op.starts_with('P') {
            out.unresolved("prompt_expansion");
        }
    } else if let Some(r) = rest.strip_prefix(':')
        && !r.starts_with(['-', '=', '?', '+'])
    {
        if holds_code(r) {
            out.unresolved("arithmetic_code");
        }
        if reads_variable(r) {
            out.arithmetic_reads_variable = true;
        }
    }
}

/// A `[[ ... ]]` or `[ ... ]` test: `-v` evaluates a subscript, and the arithmetic operators
/// of `[[` evaluate their operands.
pub(super) fn test_expression(text: &str, out: &mut ParsedCommandLine) {
    let double = text.starts_with("[[");
    let inner = text
        .strip_prefix("[[")
        .and_then(|t| t.strip_suffix("]]"))
        .or_else(|| text.strip_prefix('[').and_then(|t| t.strip_suffix(']')))
        .unwrap_or(text);
    if inner.contains('[') && (inner.contains("$(") || inner.contains('`')) {
        out.unresolved("arithmetic_subscript");
    }
    if has_variable_subscript(inner) {
        out.arithmetic_reads_variable = true;
    }
    let arithmetic_op = ["-eq", "-ne", "-lt", "-le", "-gt", "-ge"]
        .iter()
        .any(|op| inner.split_whitespace().any(|w| w == *op));
    if double && arithmetic_op {
        out.arithmetic_reads_variable = true;
    }
    let words: Vec<&str> = inner.split_whitespace().collect();
    for pair in words.windows(2) {
        if pair[0] == "-v" && pair[1].contains(['$', '`']) {
            // `[ -v "$n" ]`: a name computed at run time may carry a subscript.
            out.unresolved("dynamic_variable_name");
        }
    }
}

/// A builtin's variable-name argument (`test -v NAME`, `printf -v NAME`, `read NAME`,
/// `unset NAME`, `declare NAME`): bash evaluates a subscript in it.
pub(super) fn name_argument(word: &Word, out: &mut ParsedCommandLine) {
    match word.text.as_deref() {
        None => out.unresolved("dynamic_variable_name"),
        Some(t) => subscript_of_name(t, out),
    }
}

/// A builtin's argument naming the variable it assigns (`printf -v`, `read`, `mapfile`,
/// `getopts`): besides its subscript, a name that redirects programs (`PATH`, `HOME`,
/// `BASH_CMDS`, ...) is an injection, as `NAME=value` is (red team 4 F10).
fn assigned_name(word: &Word, out: &mut ParsedCommandLine) {
    name_argument(word, out);
    if let Some(t) = word.text.as_deref() {
        assigned_name_text(t, out);
    }
}

fn assigned_name_text(name: &str, out: &mut ParsedCommandLine) {
    if is_injection_variable(name.split('[').next().unwrap_or(name)) {
        out.unresolved("environment_injection");
    }
}

fn subscript_of_name(name: &str, out: &mut ParsedCommandLine) {
    if let Some(open) = name.find('[') {
        let subscript = &name[open..];
        if subscript.contains(['$', '`']) {
            out.unresolved("subscript_evaluates");
        } else if reads_variable(subscript.trim_matches(['[', ']'])) {
            out.arithmetic_reads_variable = true;
        }
    }
}

/// One argument of `declare`, `typeset`, `local`, `export` or `readonly`.
pub(super) enum DeclArg {
    /// `-i`, `+x`, ...
    Flags(String),
    /// `NAME` (or a word whose value is not static).
    Name(Word),
    /// `NAME=VALUE`, `NAME[SUB]=VALUE`.
    Assign { name: String, value: Word },
}

impl DeclArg {
    /// Classify a word (quoted or not): `'a[$(x)]=1'` is an assignment as much as `a=1` is.
    pub(super) fn of(word: Word) -> DeclArg {
        match word.text.as_deref() {
            Some(t) if t.starts_with(['-', '+']) => DeclArg::Flags(t.to_owned()),
            Some(t) => match t.split_once('=') {
                Some((name, value)) => DeclArg::Assign {
                    name: name.trim_end_matches('+').to_owned(),
                    value: Word::literal(value.to_owned()),
                },
                None => DeclArg::Name(word),
            },
            None => DeclArg::Name(word),
        }
    }
}

/// `declare` and its kin: subscripts in names, `-i` values (arithmetic), `-n` values (names),
/// and injection variables however they are quoted.
pub(super) fn declaration(args: Vec<DeclArg>, out: &mut ParsedCommandLine) {
    let mut flags = String::new();
    for arg in args {
        match arg {
            DeclArg::Flags(f) => {
                let f = f.trim_start_matches(['-', '+']);
                if f.contains(['i', 'n']) {
                    // An integer variable evaluates every value later assigned to it; a
                    // nameref expands the name it is later given, subscript and all.
                    out.arithmetic_reads_variable = true;
                }
                flags.push_str(f);
            }
            DeclArg::Name(w) => {
                if w.text.is_none() {
                    out.unresolved("dynamic_declaration");
                }
                name_argument(&w, out);
            }
            DeclArg::Assign { name, value } => {
                subscript_of_name(&name, out);
                let base = name.split('[').next().unwrap_or(&name);
                if is_injection_variable(base) {
                    out.unresolved("environment_injection");
                }
                stored_value(&value, out);
                if flags.contains('i') {
                    match value.text.as_deref() {
                        Some(v) => arithmetic(v, out),
                        None => out.arithmetic_reads_variable = true,
                    }
                }
                if flags.contains('n') {
                    name_argument(&value, out);
                }
            }
        }
    }
}

/// A value stored in a variable: data the line does not fix when it is not static, globs, or
/// holds `$`, a backquote or a subscript.
pub(super) fn stored_value(value: &Word, out: &mut ParsedCommandLine) {
    let fixed = !value.globby
        && value
            .text
            .as_deref()
            .is_some_and(|t| !t.contains(['$', '`', '[']));
    if !fixed {
        out.stores_data = true;
    }
}

/// The builtins that evaluate an argument; true when `program` is one of them (it was
/// handled).
pub(super) fn builtin(
    program: &str,
    rest: &[Word],
    depth: usize,
    out: &mut ParsedCommandLine,
) -> bool {
    let text = |i: usize| rest.get(i).and_then(|w| w.text.as_deref());
    match program {
        "test" | "[" => {
            for (i, w) in rest.iter().enumerate() {
                if w.text.as_deref() == Some("-v")
                    && let Some(name) = rest.get(i + 1)
                {
                    name_argument(name, out);
                }
            }
        }
        "printf" => {
            for (i, w) in rest.iter().enumerate() {
                match w.text.as_deref() {
                    Some("-v") => {
                        out.stores_data = true;
                        match rest.get(i + 1) {
                            Some(name) => assigned_name(name, out),
                            None => out.unresolved("parse_error"),
                        }
                        break;
                    }
                    // `-vNAME`, attached.
                    Some(t) if t.starts_with("-v") => {
                        out.stores_data = true;
                        subscript_of_name(&t[2..], out);
                        assigned_name_text(&t[2..], out);
                        break;
                    }
                    Some(t) if t.starts_with('-') && t != "--" => {}
                    _ => break,
                }
            }
        }
        "read" => {
            out.stores_data = true;
            let mut i = 0;
            while let Some(w) = rest.get(i) {
                match w.text.as_deref() {
                    Some(t) if t.starts_with('-') && t.len() > 1 => {
                        // `-a NAME` names an array; `-d -i -n -N -p -t -u` take a value.
                        if let Some(pos) = t[1..].find(['a', 'd', 'i', 'n', 'N', 'p', 't', 'u']) {
                            let c = t.as_bytes()[pos + 1];
                            let attached = &t[pos + 2..];
                            if c == b'a' {
                                match attached {
                                    "" => {
                                        if let Some(name) = rest.get(i + 1) {
                                            assigned_name(name, out);
                                        }
                                    }
                                    a => {
                                        subscript_of_name(a, out);
                                        assigned_name_text(a, out);
                                    }
                                }
                            }
                            if attached.is_empty() {
                                i += 1;
                            }
                        }
                    }
                    _ => assigned_name(w, out),
                }
                i += 1;
            }
        }
        "mapfile" | "readarray" => {
            out.stores_data = true;
            let mut i = 0;
            while let Some(w) = rest.get(i) {
                match w.text.as_deref() {
                    Some(t) if t.starts_with('-') && t.len() > 1 => {
                        if let Some(pos) = t[1..].find(['C', 'c', 'd', 'n', 'O', 's', 'u']) {
                            let c = t.as_bytes()[pos + 1];
                            let attached = &t[pos + 2..];
                            if c == b'C' {
                                out.unresolved("mapfile_callback");
                                let callback = if attached.is_empty() {
                                    text(i + 1).map(str::to_owned)
                                } else {
                                    Some(attached.to_owned())
                                };
                                if let Some(cb) = callback {
                                    super::parse_into(&cb, depth + 1, out);
                                }
                            }
                            if attached.is_empty() {
                                i += 1;
                            }
                        }
                    }
                    _ => assigned_name(w, out),
                }
                i += 1;
            }
        }
        "let" => {
            for w in rest {
                match w.text.as_deref() {
                    Some(t) if !w.globby => arithmetic(t, out),
                    _ => out.unresolved("dynamic_arithmetic"),
                }
                if w.text.as_deref().is_some_and(|t| t.contains(['$', '`'])) {
                    out.unresolved("arithmetic_code");
                }
            }
        }
        "declare" | "typeset" | "local" | "export" | "readonly" => {
            declaration(rest.iter().cloned().map(DeclArg::of).collect(), out);
        }
        "unset" => {
            for w in rest {
                if !w.text.as_deref().is_some_and(|t| t.starts_with('-')) {
                    name_argument(w, out);
                }
            }
        }
        "compgen" | "complete" => {
            for (i, w) in rest.iter().enumerate() {
                let Some(t) = w.text.as_deref() else {
                    out.unresolved("dynamic_completion");
                    continue;
                };
                if !t.starts_with('-') {
                    continue;
                }
                if t[1..].contains('C') {
                    out.unresolved("completion_command");
                    if let Some(cmd) = text(i + 1) {
                        super::parse_into(cmd, depth + 1, out);
                    }
                }
                if t[1..].contains('W') {
                    // The word list is expanded when completion runs.
                    match text(i + 1) {
                        Some(words) if !words.contains(['$', '`']) => {}
                        _ => out.unresolved("completion_word_list"),
                    }
                }
            }
        }
        "getopts" => {
            out.stores_data = true;
            if let Some(name) = rest.get(1) {
                assigned_name(name, out);
            }
        }
        "wait" => {
            for (i, w) in rest.iter().enumerate() {
                match w.text.as_deref() {
                    Some("-p") => {
                        if let Some(name) = rest.get(i + 1) {
                            assigned_name(name, out);
                        }
                    }
                    Some(t) if t.starts_with("-p") => {
                        subscript_of_name(&t[2..], out);
                        assigned_name_text(&t[2..], out);
                    }
                    _ => {}
                }
            }
        }
        "set" => {
            // `set -- ARGS` replaces the positional parameters with data.
            if rest
                .iter()
                .any(|w| !w.text.as_deref().is_some_and(|t| t.starts_with(['-', '+'])))
            {
                out.stores_data = true;
            }
        }
        _ => return false,
    }
    true
}

#[cfg(test)]
mod tests {
    use super::reads_variable;

    #[test]
    fn numbers_are_not_variables() {
        for e in ["1+2", "0x1f * 16#ff", "2#101 << 3", " 10 % 3 "] {
            assert!(!reads_variable(e), "{e}");
        }
        for e in ["x", "i++", "1+$y", "a[0]", "_n", "`id`"] {
            assert!(reads_variable(e), "{e}");
        }
    }
}
