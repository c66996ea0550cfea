//! `turngate`: the main job for a person at a terminal. Every decision it prints or enforces
//! comes from the core crate; this binary only parses arguments and renders results.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use turngate::protocol::{TurnPermissionProfileSelection, TurnPermissionProfileSource};
use turngate::snapshot::{ResolveContext, resolve};
use turngate::{ActionKind, Effect, PermissionMode, Policy};

mod check;

/// Exit status for a usage error or bad input.
const EXIT_USAGE: u8 = 1;

#[derive(Debug, Parser)]
#[command(
    name = "turngate",
    version,
    about = "Permission and sandboxing for AI agents' tool calls"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the verdict for one action: effect, rule, layer and reason. Exits 0 allow, 2 ask, 3 deny.
    Check(CheckArgs),
    /// Print the turn's resolved execution security snapshot, with the probed enforcement status.
    Snapshot(SnapshotArgs),
    /// Print the JSON Schemas of the policy file and the protocol types.
    Schema(SchemaArgs),
}

/// How the turn's profile is selected.
#[derive(Debug, Args)]
struct ProfileArgs {
    /// Permission mode: full_access, auto_accept_edits or supervised. Without it (and without
    /// --policy) the defaulted full-access profile applies.
    #[arg(long)]
    mode: Option<String>,
    /// A policy file (.json or .toml), merged over the mode's policy.
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// The workspace root (default: the current directory).
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct CheckArgs {
    /// The action kind's wire name (file_read, file_write, shell_command, network, ...).
    kind: String,
    /// The target: a path, a command line, a URL or host:port, server/tool, or a name.
    target: String,
    #[command(flatten)]
    profile: ProfileArgs,
    /// The working directory relative paths and commands are resolved against.
    #[arg(long, value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// The tool name, for rules that filter on it.
    #[arg(long)]
    tool: Option<String>,
    /// Print one JSON object instead of a line of text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct SnapshotArgs {
    #[command(flatten)]
    profile: ProfileArgs,
    /// Print JSON (the default is also JSON, pretty-printed; this flag prints it compact).
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct SchemaArgs {
    /// One type's name (e.g. Policy, TurnExecutionSecuritySnapshot); all when omitted.
    type_name: Option<String>,
}

/// A failure to report in one line, with exit status 1.
#[derive(Debug)]
struct CliError(String);

impl<E: std::fmt::Display> From<E> for CliError {
    fn from(e: E) -> Self {
        CliError(e.to_string())
    }
}

fn workspace_root(dir: Option<&Path>) -> Result<PathBuf, CliError> {
    let dir = match dir {
        Some(d) => d.to_path_buf(),
        None => std::env::current_dir().map_err(|e| CliError(format!("current directory: {e}")))?,
    };
    std::fs::canonicalize(&dir).map_err(|e| CliError(format!("workspace {}: {e}", dir.display())))
}

/// Resolve the turn's snapshot from the command line's profile arguments, on this platform.
fn resolve_turn(
    profile: &ProfileArgs,
    cwd: Option<&Path>,
) -> Result<turngate::protocol::TurnExecutionSecuritySnapshot, CliError> {
    let mode = match &profile.mode {
        Some(m) => Some(m.parse::<PermissionMode>()?),
        None => None,
    };
    let policy = match &profile.policy {
        Some(file) => Some(Policy::from_path(file)?),
        None => None,
    };
    let selection =
        (mode.is_some() || policy.is_some()).then_some(TurnPermissionProfileSelection {
            mode,
            source: Some(TurnPermissionProfileSource::Composer),
            policy,
        });
    let mut context = ResolveContext::new(
        workspace_root(profile.workspace.as_deref())?,
        turngate::probe::probe_platform(),
    );
    if let Some(cwd) = cwd {
        context.cwd = Some(
            std::fs::canonicalize(cwd)
                .map_err(|e| CliError(format!("cwd {}: {e}", cwd.display())))?,
        );
    }
    Ok(resolve(selection.as_ref(), &context, None)?)
}

fn run_check(args: &CheckArgs) -> Result<u8, CliError> {
    let kind: ActionKind = args.kind.parse()?;
    let snapshot = resolve_turn(&args.profile, args.cwd.as_deref())?;
    let outcome = check::check(&snapshot, kind, &args.target, args.tool.as_deref())?;
    if args.json {
        println!("{}", serde_json::to_string(&outcome.to_json())?);
    } else {
        println!("{}", outcome.to_line());
    }
    Ok(match outcome.verdict.effect {
        Effect::Allow => 0,
        Effect::Ask => 2,
        Effect::Deny => 3,
    })
}

fn run_snapshot(args: &SnapshotArgs) -> Result<u8, CliError> {
    let snapshot = resolve_turn(&args.profile, None)?;
    let text = if args.json {
        serde_json::to_string(&snapshot)?
    } else {
        serde_json::to_string_pretty(&snapshot)?
    };
    println!("{text}");
    Ok(0)
}

fn run_schema(args: &SchemaArgs) -> Result<u8, CliError> {
    match &args.type_name {
        Some(name) => {
            let schema = turngate::schema::get(name).ok_or_else(|| {
                let known: Vec<_> = turngate::schema::all()
                    .into_iter()
                    .map(|(n, _)| n)
                    .collect();
                CliError(format!(
                    "unknown schema `{name}` (known: {})",
                    known.join(", ")
                ))
            })?;
            println!("{}", serde_json::to_string_pretty(&schema)?);
        }
        None => {
            let all: serde_json::Map<String, serde_json::Value> = turngate::schema::all()
                .into_iter()
                .map(|(n, s)| (n.to_owned(), s))
                .collect();
            println!("{}", serde_json::to_string_pretty(&all)?);
        }
    }
    Ok(0)
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_USAGE } else { 0 };
            // clap renders its own message (usage, help or version).
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let result = match &cli.command {
        Command::Check(args) => run_check(args),
        Command::Snapshot(args) => run_snapshot(args),
        Command::Schema(args) => run_schema(args),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(CliError(message)) => {
            eprintln!("turngate: error: {message}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}
