//! Shell command lines to simple commands: what programs a command line would run.
//!
//! This module decides nothing; it reports every simple command it can resolve statically and
//! every construct it cannot (`unresolved`), so the policy can make the latter ask at least.
//!
//! Plain lines (words of safe characters separated by blanks) take a fast path without a
//! parser. Everything else is parsed with tree-sitter-bash and walked completely: pipelines,
//! lists, subshells, compound statements, functions, `if`/`while`/`for`/`case`, redirections,
//! command and process substitutions. Quoting is resolved (`\rm`, `'r'm`, `"rm"` and
//! `$'\x72m'` are all `rm`). `sh -c`/`bash -lc` strings are parsed recursively, wrappers
//! (`env`, `sudo`, `timeout`, `xargs`, ...) are unwrapped, and `find -exec` commands are
//! reported. `find -delete` is reported as a synthetic `rm` command (with the `find` arguments
//! as its arguments), so a policy that denies or asks for `rm` also covers it.
//!
//! Code hidden in data is reported as unresolved: prompt expansion, arithmetic contexts that
//! read variables on a line that stores data it does not fix, subscripts that evaluate code,
//! builtins that run a string (`trap`, `mapfile -C`, `compgen -C`), scripts read from a
//! stream (`bash /dev/stdin`). Programs that run code given in their own arguments (`sed` with
//! `e`, `ssh -o ProxyCommand=`, `find -exec`, `xargs`, ...) are marked with the argument that
//! carries it ([`SimpleCommand::code_arg`]), so only an argument rule can allow them. Pure
//! shell (`[[ -n x ]]`, `(( i++ ))`, `x=1`) runs no program and is reported in `internal`.
//!
//! File redirections are reported too (`> f`, `>> f`, `&> f`, `>| f`, `>& f` write `f`;
//! `< f` reads it), wherever they appear: on a command, a compound statement or inside a
//! `sh -c` string. A redirection whose target is not static (an expansion, a glob, `~`) is
//! unresolved, and so is a relative target on a line that changes directory first.

mod builtins;
mod programs;
mod wrappers;

use tree_sitter::{Node, Parser};

/// One simple command, with quoting removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimpleCommand {
    /// The program as written, unquoted (`/usr/bin/rm`, `rm`).
    pub program: String,
    /// The arguments, unquoted (an argument that cannot be resolved statically keeps its
    /// source text).
    pub args: Vec<String>,
    /// Per argument: true when bash passes exactly `args[i]` (no expansion, no glob).
    pub args_static: Vec<bool>,
    /// The index into `args` of the first argument that makes the program run code it was
    /// given (`sed` with `e`, `ssh -o ProxyCommand=`, `find -exec`, the command of `xargs`).
    pub code_arg: Option<usize>,
}

/// What a command line would run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParsedCommandLine {
    /// Every simple command found, including those nested in wrappers and `sh -c` strings.
    pub commands: Vec<SimpleCommand>,
    /// Constructs that cannot be resolved statically, by name (`command_substitution`, ...).
    pub unresolved: Vec<&'static str>,
    /// True when the line took the fast path: plain words, no quoting, operators or
    /// expansions, so `commands[0]` is exactly what an `execve` of the words would run.
    pub plain: bool,
    /// Every file redirection with a static target, in source order.
    pub redirects: Vec<Redirect>,
    /// Shell-internal constructs that run no program (`test`, `arithmetic`, `assignment`,
    /// `declaration`, `unset`): a line of only these has nothing for a rule to judge.
    pub internal: Vec<&'static str>,
    /// The line stores data it does not fix in a variable (see [`builtins`]).
    stores_data: bool,
    /// The line reads a variable in an arithmetic context.
    arithmetic_reads_variable: bool,
}

/// A file the shell itself opens for a redirection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    /// The target, unquoted, as written (relative to the command's working directory).
    pub path: String,
    /// True for an output redirection (the shell creates or writes the file), false for `<`.
    pub write: bool,
}

impl Redirect {
    /// True for the standard streams and the null device (`/dev/null`, `/dev/stdout`,
    /// `/dev/stderr`, `/dev/stdin`, `/dev/tty`, `/dev/fd/N`): a redirection to one of them
    /// reads or writes no file.
    pub fn is_standard_stream(&self) -> bool {
        match self.path.as_str() {
            "/dev/null" | "/dev/stdout" | "/dev/stderr" | "/dev/stdin" | "/dev/tty" => true,
            p => p
                .strip_prefix("/dev/fd/")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())),
        }
    }
}

impl ParsedCommandLine {
    fn unresolved(&mut self, what: &'static str) {
        if !self.unresolved.contains(&what) {
            self.unresolved.push(what);
        }
    }

    fn internal(&mut self, what: &'static str) {
        if !self.internal.contains(&what) {
            self.internal.push(what);
        }
    }
}

/// Longest command line parsed; longer ones are reported as `too_long`.
pub const MAX_LINE_LEN: usize = 256 * 1024;
/// Deepest nesting of `sh -c` strings, wrappers and syntax followed.
const MAX_DEPTH: usize = 64;

/// Characters after which a plain whitespace split no longer describes what a shell would do.
fn is_plain_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"_./-=:,+@%".contains(&b)
}

/// Bash reserved words: a plain line starting with one is not a simple command.
const RESERVED: &[&str] = &[
    "if", "then", "else", "elif", "fi", "case", "esac", "for", "select", "while", "until", "do",
    "done", "in", "function", "time", "coproc", "{", "}", "!", "[[", "]]",
];

/// Names whose assignment changes which program runs or injects code into it: the env
/// checker's injection names, and those that are harmless inherited but not when the line
/// itself sets them ([`LINE_INJECTION_NAMES`]).
pub fn is_injection_variable(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    crate::check::env::injection_reason(name).is_some()
        || LINE_INJECTION_NAMES.contains(&upper.as_str())
}

/// Variables a command inherits as a matter of course (so the env checker keeps them), but
/// whose value *set by the line* points a program at configuration the command may have
/// written, and configuration can run programs: `HOME=. git status` reads `./.gitconfig`
/// with its `core.fsmonitor` (red team 4 F7). Also bash's own tables, whose assignment
/// replaces what a command name runs (`BASH_CMDS[ls]=/bin/sh`, F9). Build flags (`CC`,
/// `RUSTFLAGS`, `MAKEFLAGS`) are not listed: a build tool runs the workspace's code anyway.
pub const LINE_INJECTION_NAMES: &[&str] = &[
    "HOME",
    "XDG_CONFIG_HOME",
    "XDG_CONFIG_DIRS",
    "XDG_DATA_HOME",
    "XDG_DATA_DIRS",
    "GIT_DIR",
    "GIT_COMMON_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM",
    "TAR_OPTIONS",
    "WGETRC",
    "CURL_HOME",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "GOROOT",
    "GOTOOLCHAIN",
    "SHELL",
    "ENV",
    "ZDOTDIR",
    "INPUTRC",
    "PIP_CONFIG_FILE",
    "PYTHONUSERBASE",
    "PYTHONHOME",
    "NODE_PATH",
    "PERL5OPT",
    "PERL5LIB",
    "PERLLIB",
    "RUBYOPT",
    "RUBYLIB",
    "GEM_HOME",
    "GEM_PATH",
    "BUNDLE_GEMFILE",
    "VIMINIT",
    "EXINIT",
    "MYVIMRC",
    "LESSKEY",
    "SYSTEMD_PAGER",
    "SYSTEMD_EDITOR",
    "GNUPGHOME",
    "DOCKER_CONFIG",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "BOTO_CONFIG",
    "SSH_ASKPASS",
    "SUDO_ASKPASS",
    "GIT_ASKPASS",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_EXEC_PATH",
    "GIT_EXTERNAL_DIFF",
    "GIT_PROXY_COMMAND",
    "GIT_CONFIG",
    "BASH_CMDS",
    "BASH_ALIASES",
    "BASH_LOADABLES_PATH",
    "BASH_XTRACEFD",
    "EXECIGNORE",
    "CDPATH",
];

/// Parse a command line.
///
/// Never panics: unparseable input, parser failures and over-long or over-deep input are
/// reported in `unresolved`.
pub fn parse_command_line(line: &str) -> ParsedCommandLine {
    let mut parsed = ParsedCommandLine::default();
    parse_into(line, 0, &mut parsed);
    if reads_line_as_data(line) {
        parsed.unresolved("line_as_data");
    }
    if parsed.stores_data && parsed.arithmetic_reads_variable {
        parsed.unresolved("variable_in_arithmetic");
    }
    parsed.plain = parsed.unresolved.is_empty() && is_plain_line(line);
    // A relative target is judged against the command's working directory; a line that
    // changes directory first would write somewhere else.
    let changes_dir = parsed.commands.iter().any(|c| {
        matches!(
            c.program.rsplit('/').next().unwrap_or(&c.program),
            "cd" | "pushd" | "popd"
        )
    });
    if changes_dir && parsed.redirects.iter().any(|r| !r.path.starts_with('/')) {
        parsed.unresolved("directory_change_before_redirect");
    }
    parsed
}

/// Bash's variables whose value is the command line itself, comments included: a line that
/// names one can cut any text out of itself (`${BASH_EXECUTION_STRING##*#}`) and hand it to
/// arithmetic, which runs the command substitutions of a subscript (red team 4 F1). The data
/// is the line's own, so no word of it looks like stored data. Named anywhere, even in a
/// string, it is unresolved: a name can reach `${!name}` or `declare -n`.
fn reads_line_as_data(line: &str) -> bool {
    ["BASH_EXECUTION_STRING", "BASH_COMMAND"]
        .iter()
        .any(|name| line.contains(name))
}

fn basename(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

fn is_plain_line(line: &str) -> bool {
    line.bytes()
        .all(|b| b == b' ' || b == b'\t' || is_plain_word_byte(b))
}

fn parse_into(line: &str, depth: usize, out: &mut ParsedCommandLine) {
    if depth > MAX_DEPTH {
        out.unresolved("nesting_too_deep");
        return;
    }
    if line.len() > MAX_LINE_LEN {
        out.unresolved("too_long");
        return;
    }
    if line.contains('\0') {
        out.unresolved("nul_byte");
        return;
    }
    if is_plain_line(line) {
        let words: Vec<Word> = line
            .split([' ', '\t'])
            .filter(|w| !w.is_empty())
            .map(|w| Word::literal(w.to_owned()))
            .collect();
        let first_program = words
            .iter()
            .find(|w| !w.text.as_deref().is_some_and(is_assignment))
            .and_then(|w| w.text.as_deref());
        if !first_program.is_some_and(|p| RESERVED.contains(&p)) {
            simple_command(words, depth, out);
            return;
        }
    }
    if continuation_inside_word(line) {
        out.unresolved("line_continuation_in_word");
    }
    let mut parser = Parser::new();
    if parser
        .set_language(&tree_sitter_bash::LANGUAGE.into())
        .is_err()
    {
        out.unresolved("parser_unavailable");
        return;
    }
    let Some(tree) = parser.parse(line, None) else {
        out.unresolved("parse_error");
        return;
    };
    let mut walker = Walker {
        src: line.as_bytes(),
        depth,
        out,
    };
    walker.walk(tree.root_node(), 0);
}

/// A backslash-newline with a non-blank on both sides (`r\\<newline>m`): bash joins the word,
/// tree-sitter splits it, so the program could be misread.
fn continuation_inside_word(line: &str) -> bool {
    let b = line.as_bytes();
    b.windows(2).enumerate().any(|(i, w)| {
        w == b"\\\n"
            && i > 0
            && !matches!(b[i - 1], b' ' | b'\t' | b'\n')
            && b.get(i + 2)
                .is_some_and(|c| !matches!(c, b' ' | b'\t' | b'\n'))
    })
}

/// One word of a simple command: its static value when it has one.
#[derive(Debug, Clone)]
pub(crate) struct Word {
    /// The value after quote removal, or `None` when it depends on an expansion.
    pub(crate) text: Option<String>,
    /// The source text (reported as an argument when `text` is `None`).
    pub(crate) raw: String,
    /// True when an unquoted glob or brace character appears (pathname expansion could
    /// change the word).
    pub(crate) globby: bool,
}

impl Word {
    pub(crate) fn literal(text: String) -> Word {
        Word {
            raw: text.clone(),
            text: Some(text),
            globby: false,
        }
    }

    fn value(&self) -> String {
        self.text.clone().unwrap_or_else(|| self.raw.clone())
    }

    fn is_static(&self) -> bool {
        self.text.is_some() && !self.globby
    }
}

struct Walker<'s, 'o> {
    src: &'s [u8],
    depth: usize,
    out: &'o mut ParsedCommandLine,
}

impl Walker<'_, '_> {
    fn text(&self, node: Node<'_>) -> &str {
        std::str::from_utf8(self.src.get(node.byte_range()).unwrap_or_default()).unwrap_or("")
    }

    fn walk(&mut self, node: Node<'_>, level: usize) {
        if level > 512 {
            self.out.unresolved("nesting_too_deep");
            return;
        }
        if node.is_error() || node.is_missing() {
            self.out.unresolved("parse_error");
        }
        if node.is_named() && node.child_count() == 0 {
            self.opaque_leaf(node);
        }
        match node.kind() {
            "command" => self.command(node),
            "command_substitution" => self.out.unresolved("command_substitution"),
            "process_substitution" => self.out.unresolved("process_substitution"),
            "variable_assignment" => self.assignment(node),
            "file_redirect" => self.redirect(node),
            "arithmetic_expansion" => {
                let t = self.text(node).to_owned();
                if t.contains('[') && (t.contains("$(") || t.contains('`')) {
                    self.out.unresolved("arithmetic_subscript");
                }
                builtins::arithmetic(builtins::arithmetic_body(&t), self.out);
            }
            "test_command" => {
                let t = self.text(node).to_owned();
                if t.starts_with("((") {
                    builtins::arithmetic(builtins::arithmetic_body(&t), self.out);
                    self.out.internal("arithmetic");
                } else {
                    builtins::test_expression(&t, self.out);
                    self.out.internal("test");
                }
            }
            "compound_statement" if self.text(node).starts_with("((") => {
                let t = self.text(node).to_owned();
                builtins::arithmetic(builtins::arithmetic_body(&t), self.out);
                self.out.internal("arithmetic");
            }
            "c_style_for_statement" => {
                for field in ["initializer", "condition", "update"] {
                    let mut cursor = node.walk();
                    for part in node.children_by_field_name(field, &mut cursor) {
                        let t = self.text(part).to_owned();
                        builtins::arithmetic(&t, self.out);
                    }
                }
            }
            "expansion" => {
                let t = self.text(node).to_owned();
                builtins::expansion(&t, self.out);
            }
            "array" => {
                let mut cursor = node.walk();
                let elements: Vec<Node<'_>> = node.named_children(&mut cursor).collect();
                for element in elements {
                    let t = self.text(element).to_owned();
                    builtins::array_element(&t, self.out);
                }
            }
            "for_statement" | "select_statement" => {
                let mut cursor = node.walk();
                let values: Vec<Node<'_>> =
                    node.children_by_field_name("value", &mut cursor).collect();
                for value in values {
                    let w = self.word(value);
                    builtins::stored_value(&w, self.out);
                }
            }
            "declaration_command" | "unset_command" => self.declaration(node),
            "heredoc_body" => {
                let t = self.text(node);
                if t.contains("$(") || t.contains('`') {
                    self.out.unresolved("command_substitution");
                }
            }
            _ => {}
        }
        let mut cursor = node.walk();
        for child in node.children(&mut cursor) {
            self.walk(child, level + 1);
        }
    }

    /// A leaf whose text bash may still expand. tree-sitter gives some operands as opaque
    /// text: the pattern of `${v#PAT}`, `${v%PAT}`, `${v^PAT}`, `${v,PAT}` (and their doubled
    /// forms) and the regex of `[[ x =~ RE ]]`. Bash expands them, command substitutions
    /// included, so a substitution in such a leaf is reported as one (red team 4 F0). Single
    /// quotes, `$'…'` and comments are never expanded; a here-document body is judged apart.
    fn opaque_leaf(&mut self, node: Node<'_>) {
        if matches!(
            node.kind(),
            "comment"
                | "raw_string"
                | "ansi_c_string"
                | "heredoc_body"
                | "heredoc_content"
                | "heredoc_start"
                | "heredoc_end"
        ) {
            return;
        }
        let t = self.text(node);
        let (substitution, process, expansion) = (
            t.contains("$(") || t.contains('`'),
            t.contains("<(") || t.contains(">("),
            t.contains("${"),
        );
        if substitution {
            self.out.unresolved("command_substitution");
        }
        if process {
            self.out.unresolved("process_substitution");
        }
        if expansion && matches!(node.kind(), "regex" | "extglob_pattern") {
            // A nested `${…}` the walker cannot see (`${x@P}` in a pattern).
            self.out.unresolved("opaque_expansion");
        }
    }

    fn assignment(&mut self, node: Node<'_>) {
        if let Some(name) = node.child_by_field_name("name") {
            if name.kind() == "subscript"
                && let Some(index) = name.child_by_field_name("index")
            {
                let t = self.text(index).to_owned();
                builtins::arithmetic(&t, self.out);
            }
            let name = name
                .child_by_field_name("name")
                .map_or_else(|| self.text(name), |n| self.text(n));
            if is_injection_variable(name) {
                self.out.unresolved("environment_injection");
            }
        }
        if let Some(value) = node.child_by_field_name("value") {
            let w = self.word(value);
            builtins::stored_value(&w, self.out);
        }
        self.out.internal("assignment");
    }

    /// `declare`, `typeset`, `local`, `export`, `readonly` and `unset`: their own nodes, not
    /// commands, but builtins judged like any command (by the keyword's rule).
    fn declaration(&mut self, node: Node<'_>) {
        let keyword = node
            .child(0)
            .map(|k| self.text(k).to_owned())
            .unwrap_or_default();
        let mut args = Vec::new();
        let mut words = Vec::new();
        let mut cursor = node.walk();
        let children: Vec<Node<'_>> = node.named_children(&mut cursor).collect();
        for child in children {
            if child.kind() == "variable_assignment" {
                let name = child
                    .child_by_field_name("name")
                    .map(|n| self.text(n).to_owned())
                    .unwrap_or_default();
                let value = match child.child_by_field_name("value") {
                    Some(v) => self.word(v),
                    None => Word::literal(String::new()),
                };
                words.push(Word {
                    text: value.text.as_ref().map(|v| format!("{name}={v}")),
                    raw: self.text(child).to_owned(),
                    globby: value.globby,
                });
                args.push(builtins::DeclArg::Assign { name, value });
            } else {
                let w = self.word(child);
                words.push(w.clone());
                args.push(builtins::DeclArg::of(w));
            }
        }
        if keyword == "unset" {
            for w in &words {
                if !w.text.as_deref().is_some_and(|t| t.starts_with('-')) {
                    builtins::name_argument(w, self.out);
                }
            }
        } else {
            builtins::declaration(args, self.out);
        }
        if keyword.is_empty() {
            return self.out.unresolved("parse_error");
        }
        self.out.commands.push(SimpleCommand {
            program: keyword,
            args: words.iter().map(Word::value).collect(),
            args_static: words.iter().map(Word::is_static).collect(),
            code_arg: None,
        });
    }

    /// A `file_redirect`: `[N]op destination`. Duplications and closes (`>&2`, `<&0`, `>&-`)
    /// open no file.
    fn redirect(&mut self, node: Node<'_>) {
        let mut op = "";
        let mut cursor = node.walk();
        for child in node.children(&mut cursor) {
            if !child.is_named() && child.kind().contains(['<', '>']) {
                op = child.kind();
                break;
            }
        }
        let Some(dest) = node.child_by_field_name("destination") else {
            return;
        };
        let duplicates = matches!(op, ">&" | "<&" | ">&-" | "<&-");
        if duplicates && (dest.kind() == "number" || self.text(dest) == "-") {
            return;
        }
        let word = self.word(dest);
        match word.text {
            Some(path) if !word.globby && !path.is_empty() => {
                let write = !matches!(op, "<" | "<&");
                self.out.redirects.push(Redirect { path, write });
            }
            _ => self.out.unresolved("dynamic_redirect_target"),
        }
    }

    fn command(&mut self, node: Node<'_>) {
        let mut words = Vec::new();
        let mut cursor = node.walk();
        for (i, child) in node.children(&mut cursor).enumerate() {
            let field = node.field_name_for_child(i as u32);
            match field {
                Some("name") => {
                    let inner = child.named_child(0).unwrap_or(child);
                    words.push(self.word(inner));
                }
                Some("argument") => words.push(self.word(child)),
                _ => {}
            }
        }
        if words.is_empty() {
            return;
        }
        simple_command(words, self.depth, self.out);
    }

    /// The static value of a word-like node.
    fn word(&mut self, node: Node<'_>) -> Word {
        let raw = self.text(node).to_owned();
        let mut globby = false;
        let text = self.value(node, &mut globby);
        // Quoted code (`'a[$(cmd)]'`) or file names from a glob can reach a variable as
        // positional parameters.
        if globby || text.as_deref().is_some_and(|t| t.contains(['$', '`'])) {
            self.out.stores_data = true;
        }
        Word { text, raw, globby }
    }

    fn value(&mut self, node: Node<'_>, globby: &mut bool) -> Option<String> {
        let raw = self.text(node);
        match node.kind() {
            "word" | "number" | "variable_name" => {
                if raw.bytes().any(|b| b"*?[{".contains(&b)) {
                    *globby = true;
                }
                if raw.starts_with('~') {
                    // Tilde expansion depends on the environment.
                    *globby = true;
                }
                unescape_word(raw)
            }
            "raw_string" => raw
                .strip_prefix('\'')
                .and_then(|r| r.strip_suffix('\''))
                .map(str::to_owned),
            "string" => {
                unescape_double_quoted(raw.strip_prefix('"').and_then(|r| r.strip_suffix('"'))?)
            }
            "translated_string" => {
                unescape_double_quoted(raw.strip_prefix("$\"").and_then(|r| r.strip_suffix('"'))?)
            }
            "ansi_c_string" => {
                decode_ansi_c(raw.strip_prefix("$'").and_then(|r| r.strip_suffix('\''))?)
            }
            "concatenation" => {
                let mut s = String::new();
                let mut cursor = node.walk();
                let mut ok = true;
                for child in node.children(&mut cursor) {
                    match self.value(child, globby) {
                        Some(v) => s.push_str(&v),
                        None => ok = false,
                    }
                }
                ok.then_some(s)
            }
            "brace_expression" => {
                *globby = true;
                Some(raw.to_owned())
            }
            _ => None,
        }
    }
}

/// Remove backslash quoting from an unquoted word. A backslash-newline (line continuation
/// inside a word) is not resolved.
fn unescape_word(raw: &str) -> Option<String> {
    if !raw.contains('\\') {
        return Some(raw.to_owned());
    }
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('\n') | None => return None,
                Some(n) => out.push(n),
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

/// The value of `"..."` content, or `None` when it holds an expansion.
fn unescape_double_quoted(inner: &str) -> Option<String> {
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(n @ ('$' | '`' | '"' | '\\')) => out.push(n),
                Some('\n') | None => return None,
                Some(n) => {
                    out.push('\\');
                    out.push(n);
                }
            },
            '$' | '`' => return None,
            c => out.push(c),
        }
    }
    Some(out)
}

/// Decode the body of `$'...'`. Unknown escapes yield `None`.
fn decode_ansi_c(inner: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(inner.len());
    let mut chars = inner.chars().peekable();
    let take_digits = |chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
                       radix: u32,
                       max: usize|
     -> Option<u32> {
        let mut v = 0u32;
        let mut n = 0;
        while n < max {
            match chars.peek().and_then(|c| c.to_digit(radix)) {
                Some(d) => {
                    v = v.checked_mul(radix)?.checked_add(d)?;
                    chars.next();
                    n += 1;
                }
                None => break,
            }
        }
        (n > 0).then_some(v)
    };
    while let Some(c) = chars.next() {
        if c != '\\' {
            let mut buf = [0u8; 4];
            bytes.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            continue;
        }
        let e = chars.next()?;
        let b: u32 = match e {
            'a' => 7,
            'b' => 8,
            'e' | 'E' => 0x1b,
            'f' => 0xc,
            'n' => 10,
            'r' => 13,
            't' => 9,
            'v' => 0xb,
            '\\' => 92,
            '\'' => 39,
            '"' => 34,
            '?' => 63,
            '0'..='7' => {
                let mut v = e.to_digit(8)?;
                for _ in 0..2 {
                    match chars.peek().and_then(|c| c.to_digit(8)) {
                        Some(d) => {
                            v = v * 8 + d;
                            chars.next();
                        }
                        None => break,
                    }
                }
                v & 0xff
            }
            'x' => take_digits(&mut chars, 16, 2)?,
            'u' | 'U' => {
                let max = if e == 'u' { 4 } else { 8 };
                let v = take_digits(&mut chars, 16, max)?;
                let ch = char::from_u32(v)?;
                let mut buf = [0u8; 4];
                bytes.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                continue;
            }
            _ => return None,
        };
        if b == 0 {
            // Bash truncates the string at a NUL; refuse to guess.
            return None;
        }
        bytes.push(u8::try_from(b).ok()?);
    }
    String::from_utf8(bytes).ok()
}

/// Whether a plain word is a `NAME=value` assignment (so a direct exec of the words would be
/// wrong: a shell would set the variable instead).
pub fn is_assignment_word(word: &str) -> bool {
    is_assignment(word)
}

pub(crate) fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            let name = name.strip_suffix('+').unwrap_or(name);
            !name.is_empty()
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                && !name.as_bytes()[0].is_ascii_digit()
        }
        None => false,
    }
}

/// Report one simple command (and what it runs in turn).
fn simple_command(words: Vec<Word>, depth: usize, out: &mut ParsedCommandLine) {
    if depth > MAX_DEPTH {
        out.unresolved("nesting_too_deep");
        return;
    }
    let mut iter = words.into_iter().peekable();
    let mut assigned = false;
    // Leading `NAME=value` assignments set the environment; the program follows them.
    while let Some(w) = iter.peek() {
        match w.text.as_deref() {
            Some(t) if is_assignment(t) => {
                let name = t.split_once('=').map(|(n, _)| n).unwrap_or(t);
                if is_injection_variable(name.trim_end_matches('+')) {
                    out.unresolved("environment_injection");
                }
                assigned = true;
                iter.next();
            }
            _ => break,
        }
    }
    let Some(program) = iter.next() else {
        if assigned {
            out.internal("assignment");
        }
        return;
    };
    let rest: Vec<Word> = iter.collect();
    let Some(name) = program.text.clone() else {
        out.unresolved("dynamic_command_name");
        return;
    };
    if program.globby {
        out.unresolved("glob_in_command_name");
    }
    if name.is_empty() {
        out.unresolved("dynamic_command_name");
        return;
    }
    let index = out.commands.len();
    out.commands.push(SimpleCommand {
        program: name.clone(),
        args: rest.iter().map(Word::value).collect(),
        args_static: rest.iter().map(Word::is_static).collect(),
        code_arg: None,
    });
    let code_arg = programs::code_argument(&name, &rest, depth, out);
    let code_arg = wrappers::follow(&name, rest, depth, out).or(code_arg);
    if let Some(command) = out.commands.get_mut(index) {
        command.code_arg = code_arg;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn programs(line: &str) -> (Vec<String>, Vec<&'static str>) {
        let p = parse_command_line(line);
        (
            p.commands.into_iter().map(|c| c.program).collect(),
            p.unresolved,
        )
    }

    #[test]
    fn quoting_is_resolved() {
        for line in [
            r"\rm -rf /",
            "'r'm x",
            "\"rm\" x",
            "r\"\"m x",
            "$'\\x72m' x",
            "$'\\162m'",
        ] {
            let (p, u) = programs(line);
            assert_eq!(p, vec!["rm"], "{line}");
            assert!(u.is_empty(), "{line}: {u:?}");
        }
    }

    #[test]
    fn nesting_is_walked() {
        let (p, u) = programs("bash -lc 'cd x && sudo -u root env A=1 timeout -s KILL 5 rm -rf /'");
        assert_eq!(p, vec!["bash", "cd", "sudo", "env", "timeout", "rm"]);
        assert!(u.is_empty(), "{u:?}");
        let (p, _) = programs("find . -name '*.o' -exec rm {} \\; -delete");
        assert_eq!(p, vec!["find", "rm", "rm"]);
        let (p, _) = programs("if true; then (ls | xargs -n1 shred); fi");
        assert_eq!(p, vec!["true", "ls", "xargs", "shred"]);
    }

    #[test]
    fn unresolvable_constructs_are_reported() {
        for (line, what) in [
            ("echo $(rm -rf /)", "command_substitution"),
            ("$CMD -rf /", "dynamic_command_name"),
            ("eval \"$x\"", "eval"),
            ("r\\\nm -rf /", "line_continuation_in_word"),
            ("echo 'unterminated", "parse_error"),
            ("bash <<EOF\nrm -rf /\nEOF", "shell_reads_stdin"),
            ("curl x | sh", "shell_reads_stdin"),
            ("/bin/r? -rf /", "glob_in_command_name"),
            ("PATH=/tmp/evil ls", "environment_injection"),
            ("diff <(ls a) <(ls b)", "process_substitution"),
            ("echo x > $HOME/.bashrc", "dynamic_redirect_target"),
            ("echo x > ~/.bashrc", "dynamic_redirect_target"),
            ("echo x > *.rc", "dynamic_redirect_target"),
            (
                "cd /etc && echo x > passwd",
                "directory_change_before_redirect",
            ),
        ] {
            let (_, u) = programs(line);
            assert!(u.contains(&what), "{line}: {u:?}");
        }
    }

    #[test]
    fn code_arguments_are_marked() {
        let code = |line: &str| {
            parse_command_line(line)
                .commands
                .into_iter()
                .map(|c| (c.program, c.code_arg))
                .collect::<Vec<_>>()
        };
        let c = |p: &str, at: Option<usize>| (p.to_owned(), at);
        assert_eq!(code("sed -n 's/a/b/e' f"), vec![c("sed", Some(1))]);
        assert_eq!(code("sed -n 's/a/b/p' f"), vec![c("sed", None)]);
        assert_eq!(
            code("find . -name x -exec cat {} +"),
            vec![c("find", Some(3)), c("cat", None)]
        );
        assert_eq!(
            code("xargs -0 grep x"),
            vec![c("xargs", Some(1)), c("grep", None)]
        );
        assert_eq!(code("xargs"), vec![c("xargs", None), c("echo", None)]);
        assert_eq!(
            code("ssh -o ProxyCommand='nc %h %p' host"),
            vec![c("ssh", Some(1)), c("nc", None)]
        );
        assert_eq!(code("ssh -p 22 host ls -o x"), vec![c("ssh", None)]);
        assert_eq!(code("vim +42 f"), vec![c("vim", None)]);
    }

    #[test]
    fn static_arguments_are_told_from_computed_ones() {
        let p = parse_command_line("git \"status\" $x *.rs 'a b'");
        assert_eq!(p.commands[0].args_static, vec![true, false, false, true]);
    }

    #[test]
    fn pure_shell_is_internal_and_runs_nothing() {
        for (line, what) in [
            ("[[ -n x ]]", "test"),
            ("(( i++ ))", "arithmetic"),
            ("x=1", "assignment"),
            ("x=1; y=$x", "assignment"),
        ] {
            let p = parse_command_line(line);
            assert!(p.commands.is_empty(), "{line}: {:?}", p.commands);
            assert!(p.unresolved.is_empty(), "{line}: {:?}", p.unresolved);
            assert!(p.internal.contains(&what), "{line}: {:?}", p.internal);
        }
        for line in ["", "   ", "# only a comment"] {
            assert!(parse_command_line(line).internal.is_empty(), "{line:?}");
        }
    }

    #[test]
    fn stored_data_and_arithmetic_reads_meet_only_together() {
        let u = |line: &str| parse_command_line(line).unresolved;
        assert!(u("x='a[$(id)]'; echo $((x))").contains(&"variable_in_arithmetic"));
        assert!(u("echo $((x))").is_empty());
        assert!(u("x='a[$(id)]'; echo $x").is_empty());
        assert!(u("read x; echo ${x:x}").contains(&"variable_in_arithmetic"));
    }

    #[test]
    fn file_redirections_are_reported_and_duplications_are_not() {
        let r = |line: &str| {
            parse_command_line(line)
                .redirects
                .into_iter()
                .map(|r| (r.path, r.write))
                .collect::<Vec<_>>()
        };
        let w = |p: &str| (p.to_owned(), true);
        assert_eq!(r("echo a > f"), vec![w("f")]);
        assert_eq!(r("echo a >> 'f g' 2>&1"), vec![w("f g")]);
        assert_eq!(r("cat < in >&2"), vec![("in".to_owned(), false)]);
        assert_eq!(
            r("ls &> out; x >| y; z >& o"),
            vec![w("out"), w("y"), w("o")]
        );
        assert_eq!(
            r("echo > 2"),
            vec![w("2")],
            "only >&N duplicates a descriptor"
        );
        assert_eq!(r("cmd 1>&- 2>/dev/null"), vec![w("/dev/null")]);
        assert_eq!(r("{ echo; } > g"), vec![w("g")]);
        assert_eq!(r("while true; do :; done > w"), vec![w("w")]);
        assert_eq!(
            r("bash -c 'echo x >> /etc/profile'"),
            vec![w("/etc/profile")]
        );
        assert_eq!(r("cat <<EOF\nhi\nEOF"), vec![]);
        assert_eq!(r("cat <<< hi"), vec![]);
        assert!(
            parse_command_line("echo 2>/dev/null").redirects[0].is_standard_stream()
                && !parse_command_line("echo > /dev/sda").redirects[0].is_standard_stream()
        );
    }
}
