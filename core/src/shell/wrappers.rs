//! Programs that run other programs: shells with `-c`, wrappers (`env`, `sudo`, `timeout`,
//! `xargs`, ...), `find -exec`, and builtins that defeat static analysis (`eval`, `source`).
//!
//! Each wrapper's options are skipped by a table of the options that take a value. An option
//! the table does not know is reported as `unknown_wrapper_option` (it might take a value,
//! and then the program would be misidentified), so the line asks instead of guessing.

use super::{ParsedCommandLine, SimpleCommand, Word, is_assignment, is_injection_variable};

/// How to skip one wrapper's options.
struct Spec {
    names: &'static [&'static str],
    /// Short (`-u`) and long (`--user`) options that take a value.
    value: &'static [&'static str],
    /// Options whose value is a command line run by a shell.
    string: &'static [&'static str],
    /// Options that take no value.
    flags: &'static [&'static str],
    /// Positional arguments before the program (`timeout DURATION`, `chroot DIR`).
    positionals: usize,
    /// `-5` style numeric options (nice).
    numeric: bool,
    /// Long options may carry `=value` and are otherwise flags (firejail, valgrind).
    any_long: bool,
}

const fn spec(names: &'static [&'static str]) -> Spec {
    Spec {
        names,
        value: &[],
        string: &[],
        flags: &[],
        positionals: 0,
        numeric: false,
        any_long: false,
    }
}

const SPECS: &[Spec] = &[
    Spec {
        value: &["-u", "--unset", "-C", "--chdir"],
        string: &["-S", "--split-string"],
        flags: &[
            "-i",
            "--ignore-environment",
            "-0",
            "--null",
            "-v",
            "--debug",
            "--block-signal",
            "--default-signal",
            "--ignore-signal",
            "--list-signal-handling",
        ],
        ..spec(&["env"])
    },
    Spec {
        flags: &["-p", "-v", "-V"],
        ..spec(&["command"])
    },
    spec(&[
        "builtin",
        "nohup",
        "coproc",
        "busybox",
        "toybox",
        "catchsegv",
        "rlwrap",
    ]),
    Spec {
        value: &["-a"],
        flags: &["-c", "-l"],
        ..spec(&["exec"])
    },
    Spec {
        value: &["-n", "--adjustment"],
        numeric: true,
        ..spec(&["nice"])
    },
    Spec {
        value: &["-s", "--signal", "-k", "--kill-after"],
        flags: &["-v", "--verbose", "--preserve-status", "--foreground"],
        positionals: 1,
        ..spec(&["timeout", "gtimeout"])
    },
    Spec {
        value: &["-f", "--format", "-o", "--output"],
        flags: &[
            "-p",
            "-a",
            "--append",
            "-v",
            "--verbose",
            "-q",
            "--quiet",
            "--portability",
        ],
        ..spec(&["time"])
    },
    Spec {
        value: &["-i", "--input", "-o", "--output", "-e", "--error"],
        ..spec(&["stdbuf"])
    },
    Spec {
        value: &[
            "-a",
            "--arg-file",
            "-d",
            "--delimiter",
            "-E",
            "-I",
            "-L",
            "--max-lines",
            "-n",
            "--max-args",
            "-P",
            "--max-procs",
            "-s",
            "--max-chars",
            "--process-slot-var",
        ],
        flags: &[
            "-0",
            "--null",
            "-o",
            "--open-tty",
            "-p",
            "--interactive",
            "-r",
            "--no-run-if-empty",
            "-t",
            "--verbose",
            "-x",
            "--exit",
            "-i",
            "-l",
            "-e",
            "--replace",
            "--eof",
        ],
        ..spec(&["xargs"])
    },
    Spec {
        value: &[
            "-u",
            "--user",
            "-g",
            "--group",
            "-C",
            "--close-from",
            "-D",
            "--chdir",
            "-h",
            "--host",
            "-p",
            "--prompt",
            "-r",
            "--role",
            "-t",
            "--type",
            "-T",
            "--command-timeout",
            "-U",
            "--other-user",
        ],
        flags: &[
            "-A",
            "--askpass",
            "-b",
            "--background",
            "-E",
            "--preserve-env",
            "-e",
            "--edit",
            "-H",
            "--set-home",
            "-i",
            "--login",
            "-K",
            "--remove-timestamp",
            "-k",
            "--reset-timestamp",
            "-l",
            "--list",
            "-n",
            "--non-interactive",
            "-P",
            "--preserve-groups",
            "-S",
            "--stdin",
            "-s",
            "--shell",
            "-B",
            "--bell",
            "-N",
            "--no-update",
        ],
        ..spec(&["sudo"])
    },
    Spec {
        value: &["-u", "-C"],
        flags: &["-n", "-s", "-L"],
        ..spec(&["doas"])
    },
    Spec {
        value: &[
            "-o",
            "--output",
            "-e",
            "-p",
            "--attach",
            "-s",
            "--string-limit",
            "-u",
            "--user",
            "-E",
            "--env",
            "-a",
            "-b",
            "-I",
            "-O",
            "-P",
            "-S",
            "-X",
            "-U",
        ],
        flags: &[
            "-f",
            "--follow-forks",
            "-F",
            "-c",
            "-C",
            "-d",
            "-D",
            "-h",
            "-i",
            "-k",
            "-q",
            "-r",
            "-t",
            "-T",
            "-v",
            "-V",
            "-w",
            "-x",
            "-y",
            "-z",
            "-Z",
            "-n",
            "-Y",
            "--summary",
        ],
        ..spec(&["strace", "ltrace"])
    },
    Spec {
        value: &["--userspec", "--groups"],
        flags: &["--skip-chdir"],
        positionals: 1,
        ..spec(&["chroot"])
    },
    Spec {
        flags: &["-c", "--ctty", "-f", "--fork", "-w", "--wait"],
        ..spec(&["setsid"])
    },
    Spec {
        value: &[
            "-c",
            "--class",
            "-n",
            "--classdata",
            "-p",
            "--pid",
            "-P",
            "--pgid",
            "-u",
            "--uid",
        ],
        flags: &["-t", "--ignore"],
        ..spec(&["ionice"])
    },
    Spec {
        flags: &[
            "-a", "-b", "-d", "-e", "-f", "-i", "-o", "-r", "-m", "-v", "-R", "-p",
        ],
        positionals: 1,
        ..spec(&["chrt"])
    },
    Spec {
        flags: &["-a", "--all-tasks", "-c", "--cpu-list"],
        positionals: 1,
        ..spec(&["taskset"])
    },
    Spec {
        value: &["-t", "-w"],
        flags: &["-d", "-i", "-m", "-s", "-u"],
        ..spec(&["caffeinate"])
    },
    Spec {
        flags: &["-p"],
        ..spec(&["unbuffer"])
    },
    Spec {
        value: &["-l", "--lib", "-s", "-i", "--faked"],
        flags: &["-u", "--unknown-is-real"],
        ..spec(&["fakeroot"])
    },
    Spec {
        value: &["-f"],
        flags: &["-q"],
        ..spec(&["proxychains", "proxychains4", "torsocks", "tsocks"])
    },
    Spec {
        value: &[
            "-t", "--target", "-S", "--setuid", "-G", "--setgid", "--wd", "-w", "--wdns",
        ],
        any_long: true,
        flags: &[
            "-m",
            "-u",
            "-i",
            "-n",
            "-p",
            "-U",
            "-C",
            "-T",
            "-r",
            "-a",
            "--all",
            "-f",
            "--fork",
            "--mount-proc",
            "--map-root-user",
            "--preserve-credentials",
        ],
        ..spec(&["nsenter", "unshare"])
    },
    Spec {
        any_long: true,
        ..spec(&["firejail", "valgrind", "systemd-run", "bwrap"])
    },
    Spec {
        value: &["-w", "--timeout", "-E", "--conflict-exit-code"],
        string: &["-c", "--command"],
        flags: &[
            "-s",
            "--shared",
            "-x",
            "--exclusive",
            "-e",
            "-u",
            "--unlock",
            "-n",
            "--nb",
            "--nonblock",
            "-o",
            "--close",
            "-F",
            "--no-fork",
            "--verbose",
        ],
        positionals: 1,
        ..spec(&["flock"])
    },
];

/// Shells whose `-c` string is parsed recursively.
const SHELLS: &[&str] = &[
    "sh", "bash", "zsh", "dash", "ksh", "ksh93", "mksh", "ash", "yash", "posh", "rbash", "fish",
    "tcsh", "csh", "rzsh", "pdksh", "oksh", "lksh", "hush", "elvish", "nu",
];

fn basename(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

/// Follow what `program` runs in turn (its arguments are `rest`).
pub(super) fn follow(program: &str, rest: Vec<Word>, depth: usize, out: &mut ParsedCommandLine) {
    let name = basename(program);
    if SHELLS.contains(&name) {
        return shell(rest, depth, out);
    }
    match name {
        "eval" => {
            out.unresolved("eval");
            join_and_parse(&rest, depth, out);
            return;
        }
        "source" | "." => return out.unresolved("source"),
        "alias" => return out.unresolved("alias"),
        "hash" if rest.iter().any(|w| w.text.as_deref() == Some("-p")) => {
            return out.unresolved("hash_path");
        }
        "enable" => return out.unresolved("enable_builtin"),
        "trap" => {
            if let Some(first) = rest.first() {
                match &first.text {
                    Some(t) if t != "-" && !t.starts_with('-') => {
                        super::parse_into(t, depth + 1, out)
                    }
                    Some(_) => {}
                    None => out.unresolved("dynamic_shell_string"),
                }
            }
            return;
        }
        "export" | "declare" | "typeset" | "local" | "readonly" => {
            for w in &rest {
                if let Some(t) = &w.text
                    && is_assignment(t)
                    && is_injection_variable(
                        t.split('=').next().unwrap_or("").trim_end_matches('+'),
                    )
                {
                    out.unresolved("environment_injection");
                }
            }
            return;
        }
        "find" => return find(&rest, depth, out),
        "su" | "runuser" | "sg" | "script" => return su_like(&rest, depth, out),
        "watch" => return watch(&rest, depth, out),
        "git" => return git(&rest, out),
        "rg" | "tar" | "gtar" | "bsdtar" => {
            let runs = rest.iter().any(|w| {
                w.text.as_deref().is_some_and(|t| {
                    t.starts_with("--pre")
                        || t.starts_with("--to-command")
                        || t.starts_with("--use-compress-program")
                        || t.starts_with("--checkpoint-action")
                        || t.starts_with("--info-script")
                        || t.starts_with("--new-volume-script")
                        || t.starts_with("--rsh-command")
                        || t == "-I"
                        || t == "-F"
                })
            });
            if runs {
                out.unresolved("program_runs_commands");
            }
            return;
        }
        _ => {}
    }
    if let Some(spec) = SPECS.iter().find(|s| s.names.contains(&name)) {
        wrapper(name, spec, rest, depth, out);
    }
}

fn join_and_parse(rest: &[Word], depth: usize, out: &mut ParsedCommandLine) {
    let mut joined = Vec::with_capacity(rest.len());
    for w in rest {
        match &w.text {
            Some(t) => joined.push(t.as_str()),
            None => return out.unresolved("dynamic_shell_string"),
        }
    }
    if !joined.is_empty() {
        super::parse_into(&joined.join(" "), depth + 1, out);
    }
}

fn shell(rest: Vec<Word>, depth: usize, out: &mut ParsedCommandLine) {
    let mut have_c = false;
    let mut reads_stdin = false;
    let mut i = 0;
    while let Some(w) = rest.get(i) {
        let Some(t) = w.text.as_deref() else {
            if have_c {
                return out.unresolved("dynamic_shell_string");
            }
            // A dynamic script name: the shell runs unknown code.
            return out.unresolved("dynamic_shell_string");
        };
        if t == "--" || t == "-" {
            i += 1;
            break;
        }
        if t.starts_with("--") {
            if matches!(t, "--rcfile" | "--init-file") {
                i += 1;
            }
            if t == "--command" {
                have_c = true;
            }
            i += 1;
            continue;
        }
        if (t.starts_with('-') || t.starts_with('+')) && t.len() > 1 {
            for c in t.chars().skip(1) {
                match c {
                    'c' if t.starts_with('-') => have_c = true,
                    's' => reads_stdin = true,
                    'o' | 'O' => i += 1,
                    _ => {}
                }
            }
            i += 1;
            continue;
        }
        break;
    }
    match rest.get(i) {
        Some(w) if have_c => match &w.text {
            Some(t) => super::parse_into(t, depth + 1, out),
            None => out.unresolved("dynamic_shell_string"),
        },
        None if have_c => out.unresolved("parse_error"),
        Some(_) if !reads_stdin => {}
        _ => out.unresolved("shell_reads_stdin"),
    }
}

fn wrapper(name: &str, spec: &Spec, rest: Vec<Word>, depth: usize, out: &mut ParsedCommandLine) {
    let mut positionals = spec.positionals;
    let mut i = 0;
    let mut options_done = false;
    let mut shell_flag = false;
    while let Some(w) = rest.get(i) {
        let Some(t) = w.text.as_deref() else {
            return out.unresolved("dynamic_command_name");
        };
        if !options_done && t == "--" {
            options_done = true;
            i += 1;
            continue;
        }
        if !options_done && t.starts_with('-') && t.len() > 1 {
            if name == "env" && t == "-" {
                i += 1;
                continue;
            }
            if let Some(long) = t.strip_prefix("--") {
                let (opt, inline) = match long.split_once('=') {
                    Some((o, v)) => (o, Some(v)),
                    None => (long, None),
                };
                let opt = format!("--{opt}");
                if spec.string.contains(&opt.as_str()) {
                    let value = match inline {
                        Some(v) => Some(v.to_owned()),
                        None => {
                            i += 1;
                            rest.get(i).and_then(|w| w.text.clone())
                        }
                    };
                    match value {
                        Some(v) => super::parse_into(&v, depth + 1, out),
                        None => out.unresolved("dynamic_shell_string"),
                    }
                } else if spec.value.contains(&opt.as_str()) {
                    if inline.is_none() {
                        i += 1;
                    }
                } else if spec.flags.contains(&opt.as_str()) || spec.any_long {
                } else {
                    out.unresolved("unknown_wrapper_option");
                }
                i += 1;
                continue;
            }
            if spec.numeric && t[1..].bytes().all(|b| b.is_ascii_digit()) {
                i += 1;
                continue;
            }
            // A cluster of short options: `-nE`, `-u root`, `-uroot`.
            let cluster = &t[1..];
            for (pos, c) in cluster.char_indices() {
                let opt = format!("-{c}");
                let attached = &cluster[pos + c.len_utf8()..];
                if spec.string.contains(&opt.as_str()) {
                    let value = if attached.is_empty() {
                        i += 1;
                        rest.get(i).and_then(|w| w.text.clone())
                    } else {
                        Some(attached.to_owned())
                    };
                    match value {
                        Some(v) => super::parse_into(&v, depth + 1, out),
                        None => out.unresolved("dynamic_shell_string"),
                    }
                    break;
                }
                if spec.value.contains(&opt.as_str()) {
                    if attached.is_empty() {
                        i += 1;
                    }
                    break;
                }
                if spec.flags.contains(&opt.as_str()) {
                    if matches!(c, 's' | 'i') && matches!(name, "sudo" | "doas") {
                        shell_flag = true;
                    }
                    continue;
                }
                out.unresolved("unknown_wrapper_option");
                break;
            }
            i += 1;
            continue;
        }
        if name == "env" && is_assignment(t) {
            if is_injection_variable(t.split('=').next().unwrap_or("").trim_end_matches('+')) {
                out.unresolved("environment_injection");
            }
            i += 1;
            continue;
        }
        if positionals > 0 {
            positionals -= 1;
            i += 1;
            continue;
        }
        break;
    }
    let command: Vec<Word> = rest.into_iter().skip(i).collect();
    if command.is_empty() {
        if shell_flag {
            out.unresolved("shell_reads_stdin");
        }
        if name == "xargs" {
            out.commands.push(SimpleCommand {
                program: "echo".to_owned(),
                args: Vec::new(),
            });
        }
        return;
    }
    super::simple_command(command, depth + 1, out);
}

fn find(rest: &[Word], depth: usize, out: &mut ParsedCommandLine) {
    let mut i = 0;
    while let Some(w) = rest.get(i) {
        match w.text.as_deref() {
            Some("-exec" | "-execdir" | "-ok" | "-okdir") => {
                let mut command = Vec::new();
                i += 1;
                while let Some(w) = rest.get(i) {
                    if matches!(w.text.as_deref(), Some(";" | "+")) {
                        break;
                    }
                    command.push(w.clone());
                    i += 1;
                }
                if command.is_empty() {
                    out.unresolved("parse_error");
                } else {
                    super::simple_command(command, depth + 1, out);
                }
            }
            Some("-delete") => out.commands.push(SimpleCommand {
                program: "rm".to_owned(),
                args: rest.iter().map(Word::value).collect(),
            }),
            Some(t) if t.starts_with("-fprint") || t == "-fls" => {
                out.unresolved("find_writes_file");
            }
            _ => {}
        }
        i += 1;
    }
}

fn su_like(rest: &[Word], depth: usize, out: &mut ParsedCommandLine) {
    let mut i = 0;
    while let Some(w) = rest.get(i) {
        match w.text.as_deref() {
            Some("-c" | "--command") => {
                return match rest.get(i + 1).and_then(|w| w.text.as_deref()) {
                    Some(cmd) => super::parse_into(cmd, depth + 1, out),
                    None => out.unresolved("dynamic_shell_string"),
                };
            }
            Some(t) if t.starts_with("--command=") => {
                return super::parse_into(&t["--command=".len()..], depth + 1, out);
            }
            None => return out.unresolved("dynamic_shell_string"),
            _ => {}
        }
        i += 1;
    }
    out.unresolved("shell_reads_stdin");
}

fn watch(rest: &[Word], depth: usize, out: &mut ParsedCommandLine) {
    let mut i = 0;
    while let Some(t) = rest.get(i).and_then(|w| w.text.as_deref()) {
        if !t.starts_with('-') {
            break;
        }
        if matches!(t, "-n" | "--interval" | "-q" | "--equexit") {
            i += 1;
        }
        i += 1;
    }
    join_and_parse(&rest[i.min(rest.len())..], depth, out);
}

fn git(rest: &[Word], out: &mut ParsedCommandLine) {
    for w in rest {
        let Some(t) = w.text.as_deref() else { continue };
        if t == "-c"
            || t.starts_with("--config-env")
            || t.starts_with("--exec-path=")
            || t.starts_with("--upload-pack")
            || t.starts_with("--receive-pack")
            || t.starts_with("--exec=")
            || t == "-u"
        {
            return out.unresolved("git_config_override");
        }
    }
}
