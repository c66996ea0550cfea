//! Shell command lines to simple commands: what programs a command line would run.
//!
//! This module decides nothing; it reports every simple command it can resolve statically and
//! every construct it cannot (`unresolved`), so the policy can make the latter ask at least.

/// One simple command, with quoting removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimpleCommand {
    /// The program as written, unquoted (`/usr/bin/rm`, `rm`).
    pub program: String,
    /// The arguments, unquoted.
    pub args: Vec<String>,
}

/// What a command line would run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParsedCommandLine {
    /// Every simple command found, including those nested in wrappers and `sh -c` strings.
    pub commands: Vec<SimpleCommand>,
    /// Constructs that cannot be resolved statically, by name (`command_substitution`, ...).
    pub unresolved: Vec<&'static str>,
}

/// Characters after which a plain whitespace split no longer describes what a shell would do.
fn is_plain_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"_./-=:,+@%^".contains(&b)
}

/// Parse a command line.
///
/// This conservative parser resolves only plain lines (words of safe characters separated by
/// spaces or tabs). Anything else, any quoting, operator, expansion or redirection, is
/// reported as `unresolved`, so it can never be allowed without asking.
pub fn parse_command_line(line: &str) -> ParsedCommandLine {
    let mut parsed = ParsedCommandLine::default();
    let plain = line
        .bytes()
        .all(|b| b == b' ' || b == b'\t' || is_plain_word_byte(b));
    let mut words = line.split([' ', '\t']).filter(|w| !w.is_empty());
    if !plain {
        parsed.unresolved.push("complex_command_line");
        return parsed;
    }
    // Leading `NAME=value` assignments set the environment; the program follows them.
    let program = words.by_ref().find(|w| !is_assignment(w));
    if let Some(program) = program {
        parsed.commands.push(SimpleCommand {
            program: program.to_owned(),
            args: words.map(str::to_owned).collect(),
        });
    }
    parsed
}

fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                && !name.as_bytes()[0].is_ascii_digit()
        }
        None => false,
    }
}
