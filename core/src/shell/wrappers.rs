//! Programs that run other programs: shells with `-c`, wrappers (`env`, `sudo`, `timeout`,
//! `xargs`, ...), `find -exec`, and builtins that defeat static analysis (`eval`, `source`).
//!
//! Each wrapper's options are skipped by a table of the options that take a value. An option
//! the table does not know is reported as `unknown_wrapper_option` (it might take a value,
//! and then the program would be misidentified), so the line asks instead of guessing. The
//! dynamic loader (`ld-linux-x86-64.so.2 PROGRAM`, any `ld-*.so*`) is a wrapper too.

use super::{
    ParsedCommandLine, SimpleCommand, Word, basename, builtins, is_assignment,
    is_injection_variable,
};

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
    /// Long options the table does not know are accepted in the `--opt=value` form (the
    /// value cannot be the next word then); without `=` they are unknown.
    any_long: bool,
    /// Options that take two values (`bwrap --bind SRC DEST`).
    pairs: &'static [&'static str],
    /// Short options whose value, if any, is attached (`prlimit -n1024`).
    attached: &'static [&'static str],
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
        pairs: &[],
        attached: &[],
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
            "-t", "--target", "-S", "--setuid", "-G", "--setgid", "-W", "--wdns",
        ],
        // `-m[FILE]`, `--mount[=FILE]`: the value is optional, so only ever attached.
        attached: &["-m", "-u", "-i", "-n", "-p", "-C", "-U", "-T", "-r", "-w"],
        flags: &[
            "-a",
            "--all",
            "--mount",
            "--uts",
            "--ipc",
            "--net",
            "--pid",
            "--cgroup",
            "--user",
            "--time",
            "--root",
            "--wd",
            "-F",
            "--no-fork",
            "--preserve-credentials",
            "-Z",
            "--follow-context",
            "-c",
            "--join-cgroup",
            "-e",
            "--env",
            "--keep-caps",
        ],
        any_long: true,
        ..spec(&["nsenter"])
    },
    Spec {
        value: &[
            "--propagation",
            "--setgroups",
            "--map-user",
            "--map-group",
            "--map-users",
            "--map-groups",
            "-R",
            "--root",
            "-w",
            "--wd",
            "-S",
            "--setuid",
            "-G",
            "--setgid",
            "--monotonic",
            "--boottime",
            "-l",
            "--load-interp",
        ],
        attached: &["-m", "-u", "-i", "-n", "-p", "-U", "-C", "-T"],
        flags: &[
            "--mount",
            "--uts",
            "--ipc",
            "--net",
            "--pid",
            "--user",
            "--cgroup",
            "--time",
            "-f",
            "--fork",
            "-r",
            "--map-root-user",
            "-c",
            "--map-current-user",
            "--map-auto",
            "--kill-child",
            "--mount-proc",
            "--keep-caps",
        ],
        any_long: true,
        ..spec(&["unshare"])
    },
    Spec {
        any_long: true,
        ..spec(&["firejail", "valgrind"])
    },
    Spec {
        value: &[
            "-u",
            "--unit",
            "-p",
            "--property",
            "--description",
            "--slice",
            "--uid",
            "--gid",
            "--nice",
            "-E",
            "--setenv",
            "-M",
            "--machine",
            "-H",
            "--host",
            "--service-type",
            "--working-directory",
            "--on-active",
            "--on-boot",
            "--on-startup",
            "--on-unit-active",
            "--on-unit-inactive",
            "--on-calendar",
            "--timer-property",
            "--path-property",
            "--socket-property",
            "-C",
            "--capsule",
        ],
        flags: &[
            "--user",
            "--system",
            "--scope",
            "-r",
            "--remain-after-exit",
            "--send-sighup",
            "-t",
            "--pty",
            "-P",
            "--pipe",
            "--wait",
            "-q",
            "--quiet",
            "-G",
            "--collect",
            "--no-block",
            "--no-ask-password",
            "-d",
            "--same-dir",
            "--expand-environment",
            "-v",
            "--verbose",
        ],
        any_long: true,
        ..spec(&["systemd-run"])
    },
    Spec {
        value: &[
            "--dev",
            "--proc",
            "--tmpfs",
            "--dir",
            "--remount-ro",
            "--chdir",
            "--uid",
            "--gid",
            "--hostname",
            "--unsetenv",
            "--lock-file",
            "--sync-fd",
            "--seccomp",
            "--add-seccomp-fd",
            "--exec-label",
            "--file-label",
            "--cap-add",
            "--cap-drop",
            "--args",
            "--userns",
            "--userns2",
            "--pidns",
            "--info-fd",
            "--json-status-fd",
            "--block-fd",
            "--userns-block-fd",
            "--perms",
            "--size",
            "--mqueue",
            "--overlay-src",
            "--tmp-overlay",
            "--ro-overlay",
            "--argv0",
            "--level-prefix",
        ],
        pairs: &[
            "--bind",
            "--ro-bind",
            "--dev-bind",
            "--bind-try",
            "--ro-bind-try",
            "--dev-bind-try",
            "--symlink",
            "--setenv",
            "--chmod",
            "--file",
            "--bind-data",
            "--ro-bind-data",
            "--bind-fd",
            "--ro-bind-fd",
            "--overlay",
        ],
        flags: &[
            "--unshare-all",
            "--share-net",
            "--unshare-user",
            "--unshare-user-try",
            "--unshare-ipc",
            "--unshare-pid",
            "--unshare-net",
            "--unshare-uts",
            "--unshare-cgroup",
            "--unshare-cgroup-try",
            "--die-with-parent",
            "--new-session",
            "--as-pid-1",
            "--clearenv",
            "--disable-userns",
            "--assert-userns-disabled",
        ],
        ..spec(&["bwrap"])
    },
    Spec {
        value: &[
            "--reuid",
            "--regid",
            "--ruid",
            "--euid",
            "--rgid",
            "--egid",
            "--groups",
            "--inh-caps",
            "--ambient-caps",
            "--bounding-set",
            "--securebits",
            "--selinux-label",
            "--apparmor-profile",
            "--landlock-access",
            "--landlock-rule",
            "--pdeathsig",
            "--ptracer",
            "--rlimit",
        ],
        flags: &[
            "-d",
            "--dump",
            "--clear-groups",
            "--keep-groups",
            "--init-groups",
            "--no-new-privs",
            "--nnp",
            "--reset-env",
        ],
        any_long: true,
        ..spec(&["setpriv"])
    },
    Spec {
        value: &["-p", "--pid", "-o", "--output"],
        attached: &[
            "-c", "-d", "-e", "-f", "-i", "-l", "-m", "-n", "-q", "-r", "-s", "-t", "-u", "-v",
            "-x", "-y",
        ],
        flags: &[
            "--as",
            "--core",
            "--cpu",
            "--data",
            "--fsize",
            "--locks",
            "--memlock",
            "--msgqueue",
            "--nice",
            "--nofile",
            "--nproc",
            "--rss",
            "--rtprio",
            "--rttime",
            "--sigpending",
            "--stack",
            "--noheadings",
            "--raw",
            "--verbose",
        ],
        any_long: true,
        ..spec(&["prlimit"])
    },
    Spec {
        value: &["-u", "--user"],
        flags: &["--disable-internal-agent", "--keep-cwd"],
        ..spec(&["pkexec"])
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

/// Whether `name` is the dynamic loader (`ld-linux-x86-64.so.2`, `ld-musl-x86_64.so.1`,
/// `ld.so`, `ld64.so.2`, `ld-2.31.so`): it runs the program named by its first operand.
fn is_dynamic_loader(name: &str) -> bool {
    (name.starts_with("ld-") || name.starts_with("ld.so") || name.starts_with("ld64.so"))
        && name.contains(".so")
}

/// Follow what `program` runs in turn (its arguments are `rest`). Returns the index into
/// `rest` of the argument that carries code the program runs itself (`find -exec`, the
/// command of `xargs`, `git submodule foreach`), for [`SimpleCommand::code_arg`].
pub(super) fn follow(
    program: &str,
    rest: Vec<Word>,
    depth: usize,
    out: &mut ParsedCommandLine,
) -> Option<usize> {
    // Case-insensitive file systems run `SUDO` as sudo: match the folded name.
    let folded = basename(program).to_ascii_lowercase();
    let name = folded.as_str();
    if SHELLS.contains(&name) {
        shell(rest, depth, out);
        return None;
    }
    if is_dynamic_loader(name) {
        loader(rest, depth, out);
        return None;
    }
    if builtins::builtin(name, &rest, depth, out) {
        return None;
    }
    match name {
        "eval" => {
            out.unresolved("eval");
            join_and_parse(&rest, depth, out);
            return None;
        }
        "source" | "." => out.unresolved("source"),
        "alias" => out.unresolved("alias"),
        "hash" if rest.iter().any(|w| w.text.as_deref() == Some("-p")) => {
            out.unresolved("hash_path");
        }
        "enable" => out.unresolved("enable_builtin"),
        "trap" => trap(&rest, depth, out),
        "find" => return find(&rest, depth, out),
        "su" | "runuser" | "sg" | "script" => su_like(name, &rest, depth, out),
        "watch" => watch(&rest, depth, out),
        "parallel" | "sem" => parallel(&rest, depth, out),
        "git" => return git(&rest, depth, out),
        "rg" | "tar" | "gtar" | "bsdtar" => {
            if runs_commands(name, &rest) {
                out.unresolved("program_runs_commands");
            }
        }
        _ if option_runs_program(name, &rest) => out.unresolved("program_runs_commands"),
        _ => {
            if let Some(spec) = SPECS.iter().find(|s| s.names.contains(&name)) {
                return wrapper(name, spec, rest, depth, out);
            }
        }
    }
    None
}

/// Options that name a program for the tool to run (red team 4 F6), as (long option, the
/// shortest prefix getopt_long would take for it, short option). A long option is matched
/// as any prefix from that length, a short one anywhere in a cluster; a word that is not
/// static counts as one (it could be the option).
const PROGRAM_OPTIONS: &[(&[&str], &[(&str, usize)], &[char])] = &[
    (&["sort", "gsort"], &[("compress-program", 3)], &[]),
    (&["split", "gsplit"], &[("filter", 2)], &[]),
    (&["install", "ginstall"], &[("strip-program", 6)], &[]),
    (&["sdiff", "diff3"], &[("diff-program", 2)], &[]),
    (&["wget"], &[("use-askpass", 2), ("execute", 2)], &['e']),
    (&["man"], &[("pager", 2), ("html", 2)], &['P', 'H']),
    (&["cpio"], &[("rsh-command", 2)], &[]),
    (&["rpm"], &[("eval", 2), ("pipe", 2)], &['E']),
    (&["tcpdump"], &[], &['z']),
    (&["dpkg"], &[("pre-invoke", 3), ("post-invoke", 3)], &[]),
];

/// Whether `name`'s arguments name a program for it to run ([`PROGRAM_OPTIONS`]).
fn option_runs_program(name: &str, rest: &[Word]) -> bool {
    let Some((_, longs, shorts)) = PROGRAM_OPTIONS.iter().find(|(n, _, _)| n.contains(&name))
    else {
        return false;
    };
    for w in rest {
        let Some(t) = w.text.as_deref() else {
            return true;
        };
        if t == "--" {
            return false;
        }
        if let Some(long) = t.strip_prefix("--") {
            let opt = long.split('=').next().unwrap_or(long);
            if longs
                .iter()
                .any(|(full, min)| opt.len() >= *min && full.starts_with(opt))
            {
                return true;
            }
        } else if let Some(cluster) = t.strip_prefix('-')
            && cluster.chars().any(|c| shorts.contains(&c))
        {
            return true;
        }
    }
    false
}

/// `rg --pre`, and the tar options that run a program (`-I`, `--to-command`, ...), also
/// inside a cluster (`-xIf`, old-style `xIf`). tar accepts long options abbreviated
/// (`--to-c=CMD`), so a long option is matched as a prefix of each option that runs one.
fn runs_commands(name: &str, rest: &[Word]) -> bool {
    const TAR: &[&str] = &[
        "to-command",
        "use-compress-program",
        "checkpoint-action",
        "info-script",
        "new-volume-script",
        "rsh-command",
        "rmt-command",
    ];
    rest.iter().enumerate().any(|(i, w)| {
        w.text.as_deref().is_none_or(|t| {
            if name == "rg" {
                return t.starts_with("--pre");
            }
            if let Some(long) = t.strip_prefix("--") {
                let opt = long.split('=').next().unwrap_or(long);
                return !opt.is_empty() && TAR.iter().any(|full| full.starts_with(opt));
            }
            let cluster = t.starts_with('-') || i == 0;
            cluster && t.contains(['I', 'F'])
        })
    })
}

/// `trap [-lp] [--] HANDLER SIGNAL...`: the handler is a command line.
fn trap(rest: &[Word], depth: usize, out: &mut ParsedCommandLine) {
    let i = match rest.first().and_then(|w| w.text.as_deref()) {
        Some("--") => 1,
        // `-l` and `-p` list; `-P` prints; nothing runs.
        Some(t) if t.starts_with('-') && t.len() > 1 => return,
        _ => 0,
    };
    match rest.get(i) {
        // A lone `-` (or a signal number alone) resets the handlers.
        Some(w) if w.text.as_deref() == Some("-") => {}
        Some(w) => match &w.text {
            Some(t) => super::parse_into(t, depth + 1, out),
            None => out.unresolved("dynamic_shell_string"),
        },
        None => {}
    }
}

/// The dynamic loader: `[--preload L] [--library-path P] [--argv0 A] ... PROGRAM ARGS`.
fn loader(rest: Vec<Word>, depth: usize, out: &mut ParsedCommandLine) {
    let mut i = 0;
    while let Some(w) = rest.get(i) {
        let Some(t) = w.text.as_deref() else {
            return out.unresolved("dynamic_command_name");
        };
        match t.split('=').next().unwrap_or(t) {
            "--" => {
                i += 1;
                break;
            }
            "--preload" | "--library-path" | "--audit" => {
                out.unresolved("environment_injection");
                if !t.contains('=') {
                    i += 1;
                }
            }
            "--argv0" | "--inhibit-rpath" | "--glibc-hwcaps-prefix" | "--glibc-hwcaps-mask" => {
                if !t.contains('=') {
                    i += 1;
                }
            }
            "--list" | "--verify" | "--inhibit-cache" | "--list-tunables"
            | "--list-diagnostics" | "--help" | "--version" => {}
            o if o.starts_with('-') => out.unresolved("unknown_wrapper_option"),
            _ => break,
        }
        i += 1;
    }
    let command: Vec<Word> = rest.into_iter().skip(i).collect();
    if !command.is_empty() {
        super::simple_command(command, depth + 1, out);
    }
}

/// GNU parallel: `parallel [OPTIONS] [COMMAND] ::: VALUES`. The command (with the values
/// appended or put in place of `{}`) runs through a shell; without a command, each value is a
/// command line; without `:::` the commands or values come from stdin.
fn parallel(rest: &[Word], depth: usize, out: &mut ParsedCommandLine) {
    const VALUE: &[&str] = &[
        "-j",
        "--jobs",
        "-P",
        "-n",
        "--max-args",
        "-N",
        "-L",
        "--max-lines",
        "-s",
        "-d",
        "--delimiter",
        "-E",
        "-I",
        "--colsep",
        "-C",
        "--joblog",
        "--results",
        "--tmpdir",
        "--timeout",
        "--retries",
        "--delay",
        "--memfree",
        "--load",
        "--nice",
        "--halt",
        "--tagstring",
        "--jobslot",
    ];
    const FLAGS: &[&str] = &[
        "-k",
        "--keep-order",
        "-q",
        "--quote",
        "-0",
        "--null",
        "-X",
        "-m",
        "-u",
        "--ungroup",
        "--line-buffer",
        "--tag",
        "--bar",
        "--progress",
        "--eta",
        "-v",
        "--verbose",
        "--dry-run",
        "--will-cite",
        "--group",
        "-r",
        "--no-run-if-empty",
        "--lb",
    ];
    let mut i = 0;
    while let Some(w) = rest.get(i) {
        let Some(t) = w.text.as_deref() else {
            return out.unresolved("dynamic_command_name");
        };
        if t.starts_with(":::") || t == "--" || !t.starts_with('-') {
            if t == "--" {
                i += 1;
            }
            break;
        }
        let opt = t.split('=').next().unwrap_or(t);
        if VALUE.contains(&opt) {
            if !t.contains('=') && (t.len() == 2 || t.starts_with("--")) {
                i += 1;
            }
        } else if !FLAGS.contains(&opt) {
            out.unresolved("unknown_wrapper_option");
        }
        i += 1;
    }
    let rest = &rest[i.min(rest.len())..];
    let separator = rest
        .iter()
        .position(|w| w.text.as_deref().is_some_and(|t| t.starts_with(":::")));
    let command = &rest[..separator.unwrap_or(rest.len())];
    match separator {
        None => out.unresolved("shell_reads_stdin"),
        Some(s) if rest.get(s).and_then(|w| w.text.as_deref()) != Some(":::") => {
            // `::::` reads the values from files.
            if command.is_empty() {
                out.unresolved("shell_reads_stdin");
            }
        }
        Some(s) if command.is_empty() => {
            for value in &rest[s + 1..] {
                match &value.text {
                    Some(t) if t.starts_with(":::") => break,
                    Some(t) => super::parse_into(t, depth + 1, out),
                    None => out.unresolved("dynamic_shell_string"),
                }
            }
        }
        Some(_) => {}
    }
    if !command.is_empty() {
        if command
            .first()
            .and_then(|w| w.text.as_deref())
            .is_some_and(|t| t.contains('{'))
        {
            out.unresolved("dynamic_command_name");
        }
        join_and_parse(command, depth, out);
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

/// A script operand the shell reads from a stream, not from a file that exists before it runs
/// (`/dev/stdin`, `/dev/fd/0`, `/proc/self/fd/0`, however spelled: `//dev/./stdin`). A
/// relative path is judged by any `dev` or `proc` component (it may climb to the root).
fn is_stream(path: &str) -> bool {
    if path == "-" {
        return true;
    }
    if !path.starts_with('/') {
        return path.split('/').any(|p| p == "dev" || p == "proc");
    }
    let first = path.split('/').find(|p| !p.is_empty() && *p != ".");
    matches!(first, Some("dev" | "proc" | ".."))
}

fn shell(rest: Vec<Word>, depth: usize, out: &mut ParsedCommandLine) {
    let mut have_c = false;
    let mut reads_stdin = false;
    let mut i = 0;
    while let Some(w) = rest.get(i) {
        let Some(t) = w.text.as_deref() else {
            // A dynamic `-c` string or script name: the shell runs unknown code.
            return out.unresolved("dynamic_shell_string");
        };
        if t == "--" || t == "-" {
            if t == "-" {
                reads_stdin = true;
            }
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
        Some(w) if !reads_stdin => match w.text.as_deref() {
            Some(script) if is_stream(script) => out.unresolved("script_from_stream"),
            Some(_) => {}
            None => out.unresolved("dynamic_shell_string"),
        },
        _ => out.unresolved("shell_reads_stdin"),
    }
}

/// Skip a wrapper's options and follow the command it runs. For `xargs`, returns the index of
/// that command (it runs with arguments read at run time).
fn wrapper(
    name: &str,
    spec: &Spec,
    rest: Vec<Word>,
    depth: usize,
    out: &mut ParsedCommandLine,
) -> Option<usize> {
    let mut positionals = spec.positionals;
    let mut i = 0;
    let mut options_done = false;
    let mut shell_flag = false;
    while let Some(w) = rest.get(i) {
        let Some(t) = w.text.as_deref() else {
            out.unresolved("dynamic_command_name");
            return None;
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
                } else if spec.pairs.contains(&opt.as_str()) {
                    i += if inline.is_none() { 2 } else { 1 };
                } else if spec.flags.contains(&opt.as_str()) || (spec.any_long && inline.is_some())
                {
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
                if spec.attached.contains(&opt.as_str()) {
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
                args_static: Vec::new(),
                code_arg: None,
            });
        }
        return None;
    }
    super::simple_command(command, depth + 1, out);
    (name == "xargs").then_some(i)
}

/// `find`: `-exec`/`-execdir`/`-ok`/`-okdir` commands are followed, `-delete` is an `rm`.
/// Returns the index of the first `-exec`-like word.
fn find(rest: &[Word], depth: usize, out: &mut ParsedCommandLine) -> Option<usize> {
    let mut code_arg = None;
    let mut i = 0;
    while let Some(w) = rest.get(i) {
        match w.text.as_deref() {
            Some("-exec" | "-execdir" | "-ok" | "-okdir") => {
                code_arg = code_arg.or(Some(i));
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
                args_static: rest.iter().map(Word::is_static).collect(),
                code_arg: None,
            }),
            Some(t) if t.starts_with("-fprint") || t == "-fls" => {
                out.unresolved("find_writes_file");
            }
            None => code_arg = code_arg.or(Some(i)),
            _ => {}
        }
        i += 1;
    }
    code_arg
}

/// `su`, `runuser`, `sg`, `script`: a `-c` string is a command line; `-s SHELL` names the
/// program that runs it; `runuser -u USER [--] COMMAND` runs a command directly.
fn su_like(name: &str, rest: &[Word], depth: usize, out: &mut ParsedCommandLine) {
    let mut i = 0;
    let mut user_given = false;
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
            Some("-s" | "--shell") if name != "script" => {
                i += 1;
                shell_option(rest.get(i), depth, out);
            }
            Some(t) if t.starts_with("--shell=") && name != "script" => {
                shell_option(
                    Some(&Word::literal(t["--shell=".len()..].to_owned())),
                    depth,
                    out,
                );
            }
            Some("-u" | "--user") if name == "runuser" => {
                user_given = true;
                i += 1;
            }
            Some("-g" | "--group" | "-G" | "--supp-group" | "-w" | "--whitelist-environment")
                if name != "script" =>
            {
                i += 1;
            }
            Some("--") if name == "runuser" && user_given => {
                let command: Vec<Word> = rest[i + 1..].to_vec();
                return match command.is_empty() {
                    true => out.unresolved("shell_reads_stdin"),
                    false => super::simple_command(command, depth + 1, out),
                };
            }
            Some(t) if name == "runuser" && user_given && !t.starts_with('-') => {
                return super::simple_command(rest[i..].to_vec(), depth + 1, out);
            }
            None => return out.unresolved("dynamic_shell_string"),
            _ => {}
        }
        i += 1;
    }
    out.unresolved("shell_reads_stdin");
}

/// `su -s SHELL`: the program su runs instead of the user's shell.
fn shell_option(word: Option<&Word>, depth: usize, out: &mut ParsedCommandLine) {
    match word {
        Some(w)
            if w.text
                .as_deref()
                .is_some_and(|t| SHELLS.contains(&basename(t))) => {}
        Some(w) if w.text.is_some() => super::simple_command(vec![w.clone()], depth + 1, out),
        _ => out.unresolved("dynamic_command_name"),
    }
}

/// `watch [OPTIONS] COMMAND...`: the words are joined into a shell line.
fn watch(rest: &[Word], depth: usize, out: &mut ParsedCommandLine) {
    let mut i = 0;
    while let Some(t) = rest.get(i).and_then(|w| w.text.as_deref()) {
        if !t.starts_with('-') {
            break;
        }
        if t == "--" {
            i += 1;
            break;
        }
        if matches!(t, "--interval" | "--equexit" | "--differences") {
            i += 1;
        } else if !t.starts_with("--") {
            // A cluster ending in `n` or `q` takes the next word as its value (`-tn 1`).
            if t.ends_with(['n', 'q']) {
                i += 1;
            }
        }
        i += 1;
    }
    join_and_parse(&rest[i.min(rest.len())..], depth, out);
}

/// git: global options that run programs are unresolved; subcommands that run a command line
/// (`submodule foreach`, `rebase --exec`, `bisect run`, `filter-branch`, `difftool -x`,
/// `grep -O`) are followed where they can be and return the index of the code.
fn git(rest: &[Word], depth: usize, out: &mut ParsedCommandLine) -> Option<usize> {
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
            out.unresolved("git_config_override");
            return None;
        }
    }
    // Skip the global options to the subcommand.
    let mut i = 0;
    while let Some(t) = rest.get(i).and_then(|w| w.text.as_deref()) {
        if !t.starts_with('-') {
            break;
        }
        if matches!(t, "-C" | "--git-dir" | "--work-tree" | "--namespace") {
            i += 1;
        }
        i += 1;
    }
    let sub = rest.get(i).and_then(|w| w.text.as_deref())?;
    let after = &rest[i + 1..];
    let at = |j: usize| Some(i + 1 + j);
    match sub {
        "submodule" => {
            let j = after
                .iter()
                .position(|w| w.text.as_deref() == Some("foreach"))?;
            let command: Vec<Word> = after[j + 1..]
                .iter()
                .skip_while(|w| w.text.as_deref().is_some_and(|t| t.starts_with('-')))
                .cloned()
                .collect();
            join_and_parse(&command, depth, out);
            at(j)
        }
        "rebase" => {
            let j = after.iter().position(|w| {
                w.text
                    .as_deref()
                    .is_some_and(|t| t == "-x" || t.starts_with("--exec") || (t.starts_with("-x")))
            })?;
            let t = after[j].text.as_deref().unwrap_or("");
            let cmd = match t.strip_prefix("--exec=").or_else(|| t.strip_prefix("-x")) {
                Some(c) if !c.is_empty() => Some(c.to_owned()),
                _ => after.get(j + 1).and_then(|w| w.text.clone()),
            };
            match cmd {
                Some(c) => super::parse_into(&c, depth + 1, out),
                None => out.unresolved("dynamic_shell_string"),
            }
            at(j)
        }
        "bisect" => {
            let j = after
                .iter()
                .position(|w| w.text.as_deref() == Some("run"))?;
            let command = after[j + 1..].to_vec();
            if !command.is_empty() {
                super::simple_command(command, depth + 1, out);
            }
            at(j)
        }
        "filter-branch" => Some(i),
        "difftool" | "mergetool" => after
            .iter()
            .position(|w| {
                w.text.as_deref().is_some_and(|t| {
                    t == "-x" || t.starts_with("--extcmd") || t.starts_with("--tool")
                })
            })
            .and_then(at),
        "grep" => after
            .iter()
            .position(|w| {
                w.text
                    .as_deref()
                    .is_some_and(|t| t.starts_with("-O") || t.starts_with("--open-files-in-pager"))
            })
            .and_then(at),
        _ => None,
    }
}
