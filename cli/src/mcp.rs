//! `turngate mcp wrap`: an MCP server on stdio, run under the turn's sandbox, with every
//! `tools/call` decided by the gate first (DESIGN §16). The decisions live in the core's
//! `mcp` module; this file wires stdin/stdout, the server's pipes and the approver.

use std::io::BufReader;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};
use turngate::ActionKind;
use turngate::approval::{ApproveAll, Approver, DeferAll, DenyAll, StdinApprover};
use turngate::audit::AuditStore;
use turngate::gate::{Gate, SpawnResult, ToolInvocation};
use turngate::mcp::{McpProxy, ProxyEnd, ProxyOptions, valid_name};
use turngate::sandbox::StdioPipes;

use crate::session::{self, ApproverChoice};
use crate::{CliError, NetChoice, ProfileArgs, StoreArgs};

/// How long a server may take to exit after its client went away, before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(3);

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Run an MCP server (stdio) under the turn's sandbox and speak MCP on this process's
    /// stdio: every `tools/call` is decided first (mcp_read for an unchanged read-only tool,
    /// else mcp_write_or_unknown; path and URL arguments checked too), denials come back as
    /// `isError` tool results, asks go to the approver, and every call is audited.
    Wrap(WrapArgs),
}

#[derive(Debug, Args)]
pub struct WrapArgs {
    /// The server's name: tool calls are judged as `NAME/tool` (default: the program's file
    /// name). 1 to 128 of A-Z a-z 0-9 _ - .
    #[arg(long)]
    name: Option<String>,
    #[command(flatten)]
    profile: ProfileArgs,
    #[command(flatten)]
    store: StoreArgs,
    /// A directory the server may read besides the workspace (repeatable): where its own
    /// code lives (`node_modules`, a virtualenv) when that is outside the system directories.
    #[arg(long = "read", value_name = "DIR")]
    read: Vec<PathBuf>,
    /// Allow connecting to HOST or HOST:PORT for this turn (repeatable), as `turngate run`.
    #[arg(long = "allow-net", value_name = "HOST[:PORT]")]
    allow_net: Vec<String>,
    /// The turn's network mode, overriding the mode's: enabled, restricted or disabled.
    #[arg(long = "net", value_enum, value_name = "MODE")]
    net: Option<NetChoice>,
    /// Who answers asks: tty (prompts on /dev/tty: stdin is the MCP channel), allow, deny
    /// (the default), or defer (wait until `turngate approvals resolve` answers).
    #[arg(long, value_enum)]
    approver: Option<ApproverChoice>,
    /// The turn id recorded in the audit log (default: a fresh one).
    #[arg(long)]
    turn: Option<String>,
    /// Write the server's sandbox report (backend, namespaces, masks, degradations) as JSON
    /// to FILE when it exits.
    #[arg(long, value_name = "FILE")]
    sandbox_report: Option<PathBuf>,
    /// The longest JSON-RPC message accepted from either side, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 64 << 20)]
    max_message_bytes: usize,
    /// The server's command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<String>,
}

pub fn run(command: &McpCommand) -> Result<u8, CliError> {
    match command {
        McpCommand::Wrap(args) => wrap(args),
    }
}

fn server_name(args: &WrapArgs) -> Result<String, CliError> {
    let name = match &args.name {
        Some(n) => n.clone(),
        None => args
            .command
            .first()
            .and_then(|p| std::path::Path::new(p).file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
    };
    if valid_name(&name) {
        Ok(name)
    } else {
        Err(CliError(format!(
            "the server name `{}` is not valid: use --name with 1 to 128 of A-Z a-z 0-9 _ - .",
            name.escape_default()
        )))
    }
}

/// The approver. stdin carries MCP, so `tty` prompts on the controlling terminal, and
/// without a choice asks are denied.
fn approver(choice: Option<ApproverChoice>) -> Result<Arc<dyn Approver>, CliError> {
    Ok(match choice.unwrap_or(ApproverChoice::Deny) {
        ApproverChoice::Tty => {
            let open = || {
                std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open("/dev/tty")
            };
            let tty = open().map_err(|e| {
                CliError(format!(
                    "--approver tty needs a terminal (/dev/tty: {e}); stdin is the MCP channel"
                ))
            })?;
            let out = tty
                .try_clone()
                .map_err(|e| CliError(format!("/dev/tty: {e}")))?;
            Arc::new(StdinApprover::with_io(
                Box::new(BufReader::new(tty)),
                Box::new(out),
            ))
        }
        ApproverChoice::Allow => Arc::new(ApproveAll),
        ApproverChoice::Deny => Arc::new(DenyAll),
        ApproverChoice::Defer => Arc::new(DeferAll),
    })
}

fn wrap(args: &WrapArgs) -> Result<u8, CliError> {
    let name = server_name(args)?;
    // A wrapped server is confined by default: without --mode (and without --policy) the
    // turn is supervised (read-only sandbox, MCP reads allowed, everything else asks).
    let profile = ProfileArgs {
        mode: Some(
            args.profile
                .mode
                .clone()
                .unwrap_or_else(|| "supervised".to_owned()),
        ),
        policy: args.profile.policy.clone(),
        workspace: args.profile.workspace.clone(),
        allow_home_workspace: args.profile.allow_home_workspace,
    };
    let mut read_roots = Vec::new();
    for dir in &args.read {
        read_roots.push(
            std::fs::canonicalize(dir)
                .map_err(|e| CliError(format!("--read {}: {e}", dir.display())))?,
        );
    }
    let store = session::open_store(args.store.store.as_ref())?;
    let snapshot =
        crate::resolve_turn_full(&profile, None, &args.allow_net, args.net, &read_roots)?;
    let turn = args.turn.clone().unwrap_or_else(|| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        format!("mcp-{name}-{now}-{}", std::process::id())
    });
    let gate = Gate::new(turn, snapshot, store.clone(), approver(args.approver)?)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError(format!("async runtime: {e}")))?;
    let mut options = ProxyOptions::new(name);
    options.max_line = args.max_message_bytes;
    let store: Arc<dyn AuditStore> = store;
    let result = rt.block_on(serve(
        &gate,
        store,
        options,
        &args.command,
        args.sandbox_report.as_deref(),
    ));
    // The client's stdin reader may be blocked in a read: do not wait for it.
    rt.shutdown_background();
    result
}

/// The server's stdin and stdout: the child's ends, and this process's (write, read) ends.
#[cfg(unix)]
fn server_pipes() -> Result<
    (
        StdioPipes,
        tokio::net::unix::pipe::Sender,
        tokio::net::unix::pipe::Receiver,
    ),
    CliError,
> {
    let (child, to_server, from_server) =
        StdioPipes::new().map_err(|e| CliError(format!("pipes for the server: {e}")))?;
    let to_server = tokio::net::unix::pipe::Sender::from_owned_fd(to_server)
        .map_err(|e| CliError(format!("the server's stdin: {e}")))?;
    let from_server = tokio::net::unix::pipe::Receiver::from_owned_fd(from_server)
        .map_err(|e| CliError(format!("the server's stdout: {e}")))?;
    Ok((child, to_server, from_server))
}

/// Refused on Windows: turngate cannot run a command there yet (ADR 0021).
#[cfg(windows)]
fn server_pipes() -> Result<(StdioPipes, tokio::io::Sink, tokio::io::Empty), CliError> {
    Err(CliError(
        "turngate mcp wrap cannot start a server on Windows: turngate has no process runner \
         there yet; nothing was run"
            .into(),
    ))
}

async fn serve(
    gate: &Gate,
    store: Arc<dyn AuditStore>,
    options: ProxyOptions,
    command: &[String],
    report: Option<&std::path::Path>,
) -> Result<u8, CliError> {
    let (child, to_server, from_server) = server_pipes()?;
    let inv = ToolInvocation::new(ActionKind::ShellCommand, session::command_line(command))
        .with_tool("turngate mcp wrap");
    let spawn = gate.spawn_server(&inv, child);
    tokio::pin!(spawn);
    let mut proxy = McpProxy::new(gate, Some(store), options);
    let proxy_run = proxy.run(
        tokio::io::stdin(),
        tokio::io::stdout(),
        from_server,
        to_server,
    );
    tokio::pin!(proxy_run);
    let mut spawned = None;
    let end = loop {
        tokio::select! {
            r = &mut spawn, if spawned.is_none() => spawned = Some(r),
            end = &mut proxy_run => break end,
        }
    };
    if let Ok(ProxyEnd::ServerBroke(why)) = &end {
        eprintln!("turngate mcp: {why}; stopping the server");
    }
    let spawned = match spawned {
        Some(r) => r,
        None => match tokio::time::timeout(EXIT_GRACE, &mut spawn).await {
            Ok(r) => r,
            // Dropping the spawn kills the server's process group (and its namespace).
            Err(_) => {
                eprintln!("turngate mcp: the server did not exit after its client left; killed it");
                return Ok(1);
            }
        },
    };
    if let Err(e) = &end {
        eprintln!("turngate mcp: the client's side failed: {e}");
    }
    match spawned? {
        SpawnResult::Ran(outcome) => session::finish(&outcome, report),
        SpawnResult::Denied(denial) => Ok(session::denied(&format!(
            "the server's command was refused: {}",
            denial.reason
        ))),
        SpawnResult::Deferred(request) => Err(CliError(format!(
            "starting the server asks (approval request {}), and a wrapped server does not \
             wait for it: allow its program in the policy, or resolve the request and start \
             again",
            request.id
        ))),
    }
}
