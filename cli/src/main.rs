//! `turngate`: the main job for a person at a terminal. Every decision it prints or enforces
//! comes from the core crate; this binary only parses arguments and renders results.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use std::sync::Arc;

use clap::{Args, Parser, Subcommand};
use turngate::audit::AuditStore;
use turngate::gate::Gate;
use turngate::protocol::{TurnPermissionProfileSelection, TurnPermissionProfileSource};
use turngate::snapshot::{ResolveContext, resolve};
use turngate::{ActionKind, Effect, PermissionMode, Policy};

mod changes;
mod check;
mod mcp;
#[cfg(unix)]
mod serve;
mod session;
mod tooling;

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
    /// Resolve the turn, check the command and run it under the sandbox. Exits with the
    /// command's status, or 126 when it is denied.
    Run(RunArgs),
    /// Print a turn's timeline rows (default: the latest turn), through the shared reducer.
    Audit(AuditArgs),
    /// Show and resolve durable pending approvals.
    #[command(subcommand)]
    Approvals(ApprovalsCommand),
    /// Review the change sets of `run --review`: list, show (with diffs), apply or discard.
    #[command(subcommand)]
    Changes(ChangesCommand),
    /// Run a TOML file of cases (`[[case]] kind, target, expect, rule?, layer?, mode?,
    /// policy?, history?`). Exits 1 when any case fails.
    Test {
        /// The test file.
        file: PathBuf,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Report rules that can never take effect, and deny/ask argument rules. Exits 1 with
    /// --strict when there is any finding.
    Lint {
        /// The policy file (.json or .toml).
        policy: PathBuf,
        /// Lint the policy merged over this mode's policy.
        #[arg(long)]
        mode: Option<String>,
        /// Exit 1 on any finding.
        #[arg(long)]
        strict: bool,
        /// Print the findings as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Re-decide every recorded decision under a candidate policy and list the ones that
    /// flip (before -> after, rule, layer). Exits 0 with no flips, 4 with flips.
    Replay(ReplayCliArgs),
    /// MCP servers under the gate and the sandbox.
    #[command(subcommand)]
    Mcp(mcp::McpCommand),
    /// Serve the Turns API (JSON-RPC 2.0) over stdio, a Unix socket and HTTP + WebSocket, with
    /// approval links, a webhook per opened request and the approval console (Unix only).
    #[cfg(unix)]
    Serve(serve::ServeArgs),
}

#[derive(Debug, Args)]
struct ReplayCliArgs {
    /// The candidate policy file (.json or .toml).
    #[arg(long, value_name = "FILE")]
    policy: PathBuf,
    /// Merge the candidate over this mode's policy.
    #[arg(long)]
    mode: Option<String>,
    #[command(flatten)]
    store: StoreArgs,
    /// Only this turn.
    #[arg(long)]
    turn: Option<String>,
    /// Only decisions at or after this RFC 3339 time.
    #[arg(long, value_name = "TIME")]
    since: Option<String>,
    /// The workspace the decisions were made in (so `src/*` matches recorded absolute paths).
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct StoreArgs {
    /// The SQLite store (default: $XDG_STATE_HOME/turngate/audit.db or
    /// ~/.local/state/turngate/audit.db).
    #[arg(long, value_name = "FILE")]
    store: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct RunArgs {
    #[command(flatten)]
    profile: ProfileArgs,
    #[command(flatten)]
    store: StoreArgs,
    /// Allow connecting to HOST or HOST:PORT for this turn (repeatable): a policy allow rule
    /// and an allowed domain of the snapshot. Under `--net restricted` the sandboxed command
    /// reaches it through the egress proxy; a loopback or private address must be named
    /// exactly (`127.0.0.1:8080`, `localhost:8080`).
    #[arg(long = "allow-net", value_name = "HOST[:PORT]")]
    allow_net: Vec<String>,
    /// The turn's network mode, overriding the mode's: enabled, restricted (through the
    /// egress proxy, allowed hosts only, others ask) or disabled.
    #[arg(long = "net", value_enum, value_name = "MODE")]
    net: Option<NetChoice>,
    /// Who answers asks: tty (default on a terminal), allow, deny (default otherwise), defer.
    #[arg(long, value_enum)]
    approver: Option<session::ApproverChoice>,
    /// The turn id recorded in the audit log (default: a fresh one).
    #[arg(long)]
    turn: Option<String>,
    /// Write the sandbox report (backend, namespaces, masks, degradations) as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    sandbox_report: Option<PathBuf>,
    /// Hold the command's writes for review (Linux): the writable roots are overlays, the
    /// workspace is untouched, and the writes become a change set (`turngate changes`).
    /// Refused where overlayfs in a user namespace is unavailable.
    #[arg(long)]
    review: bool,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<String>,
}

/// `--net`: the turn's network mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum NetChoice {
    /// Unconfined network.
    Enabled,
    /// Allowed hosts only, through the egress proxy; other hosts ask.
    Restricted,
    /// No network.
    Disabled,
}

impl NetChoice {
    fn mode(self) -> turngate::protocol::NetworkMode {
        use turngate::protocol::NetworkMode;
        match self {
            NetChoice::Enabled => NetworkMode::Enabled,
            NetChoice::Restricted => NetworkMode::Restricted,
            NetChoice::Disabled => NetworkMode::Disabled,
        }
    }
}

#[derive(Debug, Args)]
struct AuditArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// The turn (default: the latest).
    #[arg(long)]
    turn: Option<String>,
    /// Print the rows as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Subcommand)]
enum ChangesCommand {
    /// List the change sets (pending, applied and discarded).
    List {
        #[command(flatten)]
        store: StoreArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show one change set: every change, with a unified diff for text files.
    Show {
        /// The change set id.
        id: String,
        #[command(flatten)]
        store: StoreArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Apply a change set to the workspace: re-checked against the file policy, refused with
    /// the list of paths changed in the workspace since the run. Applies once.
    Apply {
        /// The change set id.
        id: String,
        /// Also apply paths the file policy asks about (denied paths are always refused).
        #[arg(long)]
        confirm_asks: bool,
        /// Who applies it, recorded as `person:NAME`.
        #[arg(long, value_name = "NAME")]
        by: Option<String>,
        #[command(flatten)]
        store: StoreArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Discard a change set; the workspace is left as it is.
    Discard {
        /// The change set id.
        id: String,
        /// Who discards it, recorded as `person:NAME`.
        #[arg(long, value_name = "NAME")]
        by: Option<String>,
        #[command(flatten)]
        store: StoreArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
enum ApprovalsCommand {
    /// List pending approval requests.
    List {
        #[command(flatten)]
        store: StoreArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Resolve a request: allow_once, allow_for_turn, deny, cancelled or expired. The first
    /// resolution wins.
    Resolve {
        /// The request id.
        id: String,
        /// The resolution.
        resolution: String,
        /// The reviewer's own words, recorded verbatim in the audit rows.
        #[arg(long, value_name = "TEXT")]
        reason: Option<String>,
        /// Who resolves it, recorded as `person:NAME`.
        #[arg(long, value_name = "NAME")]
        by: Option<String>,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Run a deferred command whose waiting `run` is gone: exactly the command shown,
    /// re-checked, under the snapshot (sandbox) it was requested under; --mode, --policy and
    /// --workspace can only narrow it. An allow_once approval runs once.
    Resume {
        /// The request id.
        id: String,
        #[command(flatten)]
        profile: ProfileArgs,
        #[command(flatten)]
        store: StoreArgs,
    },
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
    /// Accept `/`, HOME or an ancestor of HOME as a restricted mode's workspace (refused by
    /// default: a workspace is a project, not a home; the builtin-secrets rules still apply).
    #[arg(long)]
    allow_home_workspace: bool,
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
    resolve_turn_with(profile, cwd, &[], None)
}

fn resolve_turn_with(
    profile: &ProfileArgs,
    cwd: Option<&Path>,
    allow_net: &[String],
    net: Option<NetChoice>,
) -> Result<turngate::protocol::TurnExecutionSecuritySnapshot, CliError> {
    resolve_turn_full(profile, cwd, allow_net, net, &[])
}

/// [`resolve_turn_with`], with `read_roots` as the context's app read roots (directories the
/// command may read besides the workspace).
fn resolve_turn_full(
    profile: &ProfileArgs,
    cwd: Option<&Path>,
    allow_net: &[String],
    net: Option<NetChoice>,
    read_roots: &[PathBuf],
) -> Result<turngate::protocol::TurnExecutionSecuritySnapshot, CliError> {
    let mode = match &profile.mode {
        Some(m) => Some(m.parse::<PermissionMode>()?),
        None => None,
    };
    let policy = match &profile.policy {
        Some(file) => Some(Policy::from_path(file)?),
        None => None,
    };
    // `--allow-net` hosts go in as the context's allowed domains: the resolver adds them to
    // the snapshot's allow-list and as allow rules (DESIGN §13).
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
    context.allow_home_workspace = profile.allow_home_workspace;
    context.network_mode = net.map(NetChoice::mode);
    context.allowed_domains = allow_net.to_vec();
    context.app_read_roots.extend(read_roots.iter().cloned());
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

fn gate_for(
    profile: &ProfileArgs,
    allow_net: &[String],
    net: Option<NetChoice>,
    store: &Arc<turngate::audit::SqliteAuditStore>,
    approver: Option<session::ApproverChoice>,
    turn: Option<&str>,
) -> Result<Gate, CliError> {
    let snapshot = resolve_turn_with(profile, None, allow_net, net)?;
    let turn = turn.map_or_else(
        || {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis());
            format!("run-{now}-{}", std::process::id())
        },
        str::to_owned,
    );
    Ok(Gate::new(
        turn,
        snapshot,
        store.clone(),
        session::approver(approver),
    )?)
}

fn run_run(args: &RunArgs) -> Result<u8, CliError> {
    let store = session::open_store(args.store.store.as_ref())?;
    let gate = gate_for(
        &args.profile,
        &args.allow_net,
        args.net,
        &store,
        args.approver,
        args.turn.as_deref(),
    )?;
    let changes = args
        .review
        .then(|| session::store_path(args.store.store.as_ref()))
        .transpose()?
        .map(|db| turngate::changes::ChangeStore::beside(&db));
    session::run(
        &gate,
        store.as_ref(),
        &args.command,
        args.sandbox_report.as_deref(),
        changes.as_ref(),
    )
}

fn run_resume(id: &str, profile: &ProfileArgs, store: &Option<PathBuf>) -> Result<u8, CliError> {
    let store_path = session::store_path(store.as_ref())?;
    let store = session::open_existing_store(store.as_ref())?;
    let turn = store
        .approval(id)?
        .map(|a| a.request.turn_id)
        .ok_or_else(|| CliError(format!("no approval request `{id}` in the store")))?;
    let gate = gate_for(
        profile,
        &[],
        None,
        &store,
        Some(session::ApproverChoice::Deny),
        Some(&turn),
    )?;
    session::resume(&gate, id, &store_path)
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
        Command::Run(args) => run_run(args),
        Command::Audit(args) => session::open_existing_store(args.store.store.as_ref())
            .and_then(|store| session::audit(store.as_ref(), args.turn.as_deref(), args.json)),
        Command::Approvals(ApprovalsCommand::List { store, json }) => {
            session::open_existing_store(store.store.as_ref())
                .and_then(|store| session::list(store.as_ref(), *json))
        }
        Command::Approvals(ApprovalsCommand::Resolve {
            id,
            resolution,
            reason,
            by,
            store,
        }) => session::open_existing_store(store.store.as_ref()).and_then(|store| {
            session::resolve(
                store.as_ref(),
                id,
                resolution,
                reason.as_deref(),
                by.as_deref(),
            )
        }),
        Command::Approvals(ApprovalsCommand::Resume { id, profile, store }) => {
            run_resume(id, profile, &store.store)
        }
        Command::Changes(command) => changes::run(command),
        Command::Mcp(command) => mcp::run(command),
        #[cfg(unix)]
        Command::Serve(args) => serve::run(args),
        Command::Test { file, json } => tooling::run_test(file, *json),
        Command::Lint {
            policy,
            mode,
            strict,
            json,
        } => tooling::run_lint(policy, mode.as_deref(), *strict, *json),
        Command::Replay(args) => tooling::run_replay(&tooling::ReplayArgs {
            policy: &args.policy,
            mode: args.mode.as_deref(),
            store: args.store.store.as_ref(),
            turn: args.turn.as_deref(),
            since: args.since.as_deref(),
            workspace: args.workspace.as_deref(),
            json: args.json,
        }),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(CliError(message)) => {
            eprintln!("turngate: error: {message}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}
