//! Programs that run code given in their own arguments: a `sed` script with `e` (or `w`),
//! `ssh -o ProxyCommand=`, `scp -S`, `rsync -e`, `gdb -ex`, an `awk` program that calls
//! `system` or a pipe, `zip -TT`, `vim -c` and `less +!`.
//!
//! [`code_argument`] only finds the first argument that carries such code; it decides
//! nothing. The policy makes a command with a code argument ask unless an argument rule
//! allows the program with the words up to that argument explicitly. An argument whose value
//! is not static where code may stand counts as code. Where the code is itself a command line
//! run by a shell (`ProxyCommand`, `rsync -e`, `zip -TT`), it is parsed too, so a deny rule on
//! the program it names still applies.

use super::{ParsedCommandLine, Word, basename};

/// The index into `args` of the first argument that makes `program` run code, if any.
pub(super) fn code_argument(
    program: &str,
    args: &[Word],
    depth: usize,
    out: &mut ParsedCommandLine,
) -> Option<usize> {
    // Case-insensitive file systems run `SED` as sed: match the folded name.
    let name = basename(program).to_ascii_lowercase();
    match name.as_str() {
        "sed" | "gsed" => sed(args),
        name @ ("ssh" | "slogin" | "scp" | "sftp") => ssh(name, args, depth, out),
        "rsync" => rsync(args, depth, out),
        "gdb" | "cgdb" => gdb(args),
        "awk" | "gawk" | "mawk" | "nawk" => awk(args),
        "zip" => zip(args, depth, out),
        // ex (and vim -e) reads Ex commands from stdin.
        "ex" => Some(0),
        "vim" | "vi" | "nvim" | "gvim" | "view" | "vimdiff" | "nvi" => vim(args),
        "less" | "more" | "most" => less(args),
        _ => None,
    }
}

/// Whether `given` is `full` or an abbreviation of it that getopt_long would accept (at
/// least `min` characters).
fn abbreviates(given: &str, full: &str, min: usize) -> bool {
    given.len() >= min.min(full.len()) && full.starts_with(given)
}

/// The value of an option at `args[i]` that takes one: attached (`-oX`, `--opt=X`) or the
/// next word. Returns the value's word index and its text (`None` when not static).
fn option_value(args: &[Word], i: usize, attached: &str) -> (usize, Option<String>) {
    if attached.is_empty() {
        (i + 1, args.get(i + 1).and_then(|w| w.text.clone()))
    } else {
        (i, Some(attached.to_owned()))
    }
}

fn sed(args: &[Word]) -> Option<usize> {
    if args.iter().any(|w| w.text.as_deref() == Some("--sandbox")) {
        // GNU sed refuses `e`, `r` and `w` in sandbox mode.
        return None;
    }
    let mut script_given = false;
    let mut i = 0;
    while let Some(w) = args.get(i) {
        let Some(t) = w.text.as_deref() else {
            return Some(i);
        };
        if t == "--" {
            if !script_given && args.get(i + 1).is_some() {
                return script_at(args, i + 1);
            }
            return None;
        }
        if let Some(long) = t.strip_prefix("--") {
            let (opt, inline) = match long.split_once('=') {
                Some((o, v)) => (o, Some(v)),
                None => (long, None),
            };
            const LONG_FLAGS: &[&str] = &[
                "quiet",
                "silent",
                "debug",
                "posix",
                "regexp-extended",
                "separate",
                "unbuffered",
                "null-data",
                "zero-terminated",
                "follow-symlinks",
                "in-place",
                "binary",
                "help",
                "version",
            ];
            let opt = if abbreviates(opt, "expression", 1) {
                "expression"
            } else if abbreviates(opt, "file", 2) {
                "file"
            } else if abbreviates(opt, "line-length", 1) {
                "line-length"
            } else if LONG_FLAGS.contains(&opt) {
                opt
            } else {
                // An abbreviation or an option this table does not know: it could take the
                // script as its value.
                return Some(i);
            };
            match opt {
                "expression" => {
                    let (at, value) = match inline {
                        Some(v) => (i, Some(v.to_owned())),
                        None => (i + 1, args.get(i + 1).and_then(|w| w.text.clone())),
                    };
                    match value {
                        Some(s) if !sed_script_runs(&s) => {}
                        _ => return Some(at),
                    }
                    script_given = true;
                    i = at;
                }
                "file" => return Some(i),
                "line-length" if inline.is_none() => i += 1,
                _ => {}
            }
        } else if t.starts_with('-') && t.len() > 1 {
            for (pos, c) in t.char_indices().skip(1) {
                let attached = &t[pos + c.len_utf8()..];
                match c {
                    'e' => {
                        let (at, value) = option_value(args, i, attached);
                        match value {
                            Some(s) if !sed_script_runs(&s) => {}
                            _ => return Some(at),
                        }
                        script_given = true;
                        i = at;
                        break;
                    }
                    'f' => return Some(i),
                    'l' => {
                        if attached.is_empty() {
                            i += 1;
                        }
                        break;
                    }
                    // `-i[SUFFIX]`: the suffix is attached or absent.
                    'i' => break,
                    _ => {}
                }
            }
        } else if !script_given {
            return script_at(args, i);
        }
        i += 1;
    }
    None
}

fn script_at(args: &[Word], i: usize) -> Option<usize> {
    match args.get(i).and_then(|w| w.text.as_deref()) {
        Some(s) if !sed_script_runs(s) => None,
        _ => Some(i),
    }
}

/// Whether a sed script may run a command or write a file: the `e` command, the `e` or `w`
/// flag of `s`, the `w`/`W` commands, or anything this scanner does not know.
pub(super) fn sed_script_runs(script: &str) -> bool {
    let b: Vec<char> = script.chars().collect();
    let n = b.len();
    let mut i = 0;
    // Skip past the closing `delim` of a regex or replacement starting at `i`.
    let skip_delimited = |mut i: usize, delim: char| -> Option<usize> {
        while i < n {
            match b[i] {
                '\\' => i += 2,
                c if c == delim => return Some(i + 1),
                _ => i += 1,
            }
        }
        None
    };
    let to_line_end = |mut i: usize| -> usize {
        while i < n && b[i] != '\n' {
            if b[i] == '\\' {
                i += 1;
            }
            i += 1;
        }
        i
    };
    loop {
        while i < n && (b[i].is_whitespace() || b[i] == ';') {
            i += 1;
        }
        if i >= n {
            return false;
        }
        // Addresses: numbers, `$`, `/re/`, `\cREc`, ranges, steps and negation.
        loop {
            let Some(&c) = b.get(i) else { return false };
            match c {
                '0'..='9' | '$' | ',' | '~' | '+' | '!' | ' ' | '\t' => i += 1,
                '/' => match skip_delimited(i + 1, '/') {
                    Some(j) => {
                        i = j;
                        while matches!(b.get(i), Some('I' | 'M')) {
                            i += 1;
                        }
                    }
                    None => return true,
                },
                '\\' => match b.get(i + 1) {
                    Some(&d) => match skip_delimited(i + 2, d) {
                        Some(j) => i = j,
                        None => return true,
                    },
                    None => return true,
                },
                _ => break,
            }
        }
        let c = b[i];
        i += 1;
        match c {
            '{' | '}' | '=' | 'd' | 'D' | 'g' | 'G' | 'h' | 'H' | 'n' | 'N' | 'p' | 'P' | 'x'
            | 'z' | 'F' => {}
            'l' | 'L' | 'q' | 'Q' => {
                while matches!(b.get(i), Some(c) if c.is_ascii_digit() || *c == ' ') {
                    i += 1;
                }
            }
            'b' | 't' | 'T' | ':' => {
                while i < n && b[i] != ';' && b[i] != '\n' {
                    i += 1;
                }
            }
            '#' | 'a' | 'i' | 'c' | 'r' | 'R' => i = to_line_end(i),
            's' => {
                let Some(&d) = b.get(i) else { return true };
                let Some(j) = skip_delimited(i + 1, d).and_then(|j| skip_delimited(j, d)) else {
                    return true;
                };
                i = j;
                while i < n && !matches!(b[i], ';' | '\n' | '}') {
                    if matches!(b[i], 'e' | 'w' | 'W') {
                        return true;
                    }
                    i += 1;
                }
            }
            'y' => {
                let Some(&d) = b.get(i) else { return true };
                match skip_delimited(i + 1, d).and_then(|j| skip_delimited(j, d)) {
                    Some(j) => i = j,
                    None => return true,
                }
            }
            _ => return true,
        }
    }
}

/// ssh-family options: `-o Key=value` keys that run a local command (or load code), `-F`
/// (a config file can hold them), `-I`/`-S` where they name a program or library.
fn ssh(program: &str, args: &[Word], depth: usize, out: &mut ParsedCommandLine) -> Option<usize> {
    let value_opts = match program {
        "scp" => "cDFiJloPSX",
        "sftp" => "BbcDFiJloPRSs",
        _ => "BbcDEeFIiJLlmOopQRSWw",
    };
    const CODE_KEYS: &[&str] = &[
        "proxycommand",
        "localcommand",
        "permitlocalcommand",
        "knownhostscommand",
        "match",
        "include",
        "pkcs11provider",
        "securitykeyprovider",
    ];
    // ssh parses options after the host too, and scp and sftp take them anywhere (getopt
    // permutes); only ssh's remote command, after the host, runs elsewhere.
    let mut host_seen = false;
    let mut i = 0;
    while let Some(w) = args.get(i) {
        let Some(t) = w.text.as_deref() else {
            return Some(i);
        };
        if t == "--" && program != "scp" && program != "sftp" {
            return None;
        }
        if !t.starts_with('-') || t.len() < 2 {
            if matches!(program, "ssh" | "slogin") && host_seen {
                return None;
            }
            host_seen = true;
            i += 1;
            continue;
        }
        for (pos, c) in t.char_indices().skip(1) {
            if !value_opts.contains(c) {
                continue;
            }
            let attached = &t[pos + c.len_utf8()..];
            let (at, value) = option_value(args, i, attached);
            match c {
                'o' => {
                    let Some(v) = value else { return Some(at) };
                    let (key, rest) = v
                        .split_once(['=', ' ', '\t'])
                        .map_or((v.as_str(), ""), |(k, r)| (k, r));
                    if CODE_KEYS.contains(&key.to_ascii_lowercase().as_str()) {
                        if key.eq_ignore_ascii_case("proxycommand") {
                            super::parse_into(rest.trim_start_matches(['=', ' ']), depth + 1, out);
                        }
                        return Some(at);
                    }
                }
                'F' | 'I' => return Some(at),
                // scp -S and sftp -S name the ssh program; sftp -s an sftp server path.
                'S' if program != "ssh" && program != "slogin" => return Some(at),
                's' if value.as_deref().is_some_and(|v| v.contains('/')) => return Some(at),
                // sftp -b: a batch file may hold `!command` lines.
                'b' if program == "sftp" => return Some(at),
                _ => {}
            }
            i = at;
            break;
        }
        i += 1;
    }
    None
}

fn rsync(args: &[Word], depth: usize, out: &mut ParsedCommandLine) -> Option<usize> {
    for (i, w) in args.iter().enumerate() {
        let Some(t) = w.text.as_deref() else {
            return Some(i);
        };
        if let Some(cmd) = t.strip_prefix("--rsh=") {
            super::parse_into(cmd, depth + 1, out);
            return Some(i);
        }
        if t == "--rsh" {
            if let Some(cmd) = args.get(i + 1).and_then(|w| w.text.as_deref()) {
                super::parse_into(cmd, depth + 1, out);
            }
            return Some(i + 1);
        }
        if t.starts_with('-') && !t.starts_with("--") {
            if let Some(pos) = t.find('e') {
                let attached = &t[pos + 1..];
                let (at, value) = option_value(args, i, attached);
                if let Some(cmd) = value {
                    super::parse_into(&cmd, depth + 1, out);
                }
                return Some(at);
            }
        }
    }
    None
}

fn gdb(args: &[Word]) -> Option<usize> {
    args.iter().position(|w| {
        w.text.as_deref().is_none_or(|t| {
            let name = t.split('=').next().unwrap_or(t);
            let name = name.strip_prefix("--").or_else(|| name.strip_prefix('-'));
            name.is_some_and(|n| {
                matches!(n, "ex" | "iex" | "x" | "ix")
                    || [
                        "eval-command",
                        "init-eval-command",
                        "command",
                        "init-command",
                    ]
                    .iter()
                    .any(|full| abbreviates(n, full, 2))
            })
        })
    })
}

/// An awk program may run commands (`system`, pipes, `@load`), and `-f`/`-E`/`-i`/`-l`
/// bring code from files.
fn awk(args: &[Word]) -> Option<usize> {
    let runs = |p: &str| {
        p.contains("system") || p.contains('|') || p.contains("@load") || p.contains("@include")
    };
    // Which word is the program depends on options this scanner may misread (`--as x=1`),
    // so every argument is looked at.
    for (i, w) in args.iter().enumerate() {
        let Some(t) = w.text.as_deref() else {
            return Some(i);
        };
        if let Some(long) = t.strip_prefix("--") {
            let opt = long.split('=').next().unwrap_or(long);
            if ["file", "exec", "include", "load", "source"]
                .iter()
                .any(|full| abbreviates(opt, full, 2))
            {
                return Some(i);
            }
        } else if t.starts_with('-') && t.len() > 1 && !t.contains(['=', ' ']) {
            if t[1..].contains(['f', 'E', 'i', 'l', 'e']) {
                return Some(i);
            }
        } else if runs(t) {
            return Some(i);
        }
    }
    None
}

fn zip(args: &[Word], depth: usize, out: &mut ParsedCommandLine) -> Option<usize> {
    for (i, w) in args.iter().enumerate() {
        let Some(t) = w.text.as_deref() else {
            continue;
        };
        let long = t
            .strip_prefix("--")
            .map(|l| l.split_once('=').unwrap_or((l, "")));
        let cmd = match long {
            Some((opt, value)) if abbreviates(opt, "unzip-command", 3) => {
                if t.contains('=') {
                    Some(value.to_owned())
                } else {
                    args.get(i + 1).and_then(|w| w.text.clone())
                }
            }
            Some(_) => continue,
            None if t == "-TT" => args.get(i + 1).and_then(|w| w.text.clone()),
            None => match t.strip_prefix("-TT") {
                Some(c) => Some(c.to_owned()),
                None => continue,
            },
        };
        if let Some(cmd) = cmd {
            super::parse_into(&cmd, depth + 1, out);
        }
        return Some(i);
    }
    None
}

/// vim runs Ex commands from `-c`, `--cmd` and `+cmd`, and scripts from `-S`, `-u` and `-s`.
fn vim(args: &[Word]) -> Option<usize> {
    args.iter().position(|w| match w.text.as_deref() {
        None => true,
        Some(t) => {
            matches!(t, "-c" | "--cmd" | "-S" | "-u" | "-s" | "-U")
                || (t.starts_with('-')
                    && !t.starts_with("--")
                    && t[1..].contains(['c', 'S', 's', 'e', 'E', 'u', 'U']))
                || (t.starts_with('+')
                    && t.len() > 1
                    && !t[1..].bytes().all(|b| b.is_ascii_digit()))
        }
    })
}

/// less runs a shell command from an initial `+!cmd` or `+|cmd` command.
fn less(args: &[Word]) -> Option<usize> {
    args.iter().position(|w| match w.text.as_deref() {
        None => false,
        Some(t) => {
            (t.starts_with('+') && t.contains(['!', '|']))
                || t.starts_with("--lesskey")
                || t == "-k"
        }
    })
}

#[cfg(test)]
mod tests {
    use super::sed_script_runs;

    #[test]
    fn sed_scripts_that_run_or_write_are_found() {
        for s in [
            "s/x/id/e",
            "1e id",
            "e",
            "s|a|b|w /tmp/x",
            "w out",
            "/x/W f",
            "s/a/b/ge",
            "k",
        ] {
            assert!(sed_script_runs(s), "{s}");
        }
        for s in [
            "s/x/y/g",
            "1,5p",
            "/^#/d",
            "s/e/w/",
            "s/a\\/e/b/2",
            "y/abc/xyz/",
            "$!N; P; D",
            "/start/,/end/{s/a/b/;p}",
            "a text with e and w",
            "s,x,y,I",
        ] {
            assert!(!sed_script_runs(s), "{s}");
        }
    }
}
