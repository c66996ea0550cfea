//! `turngate serve`: the Turns API out of process (DESIGN §15). JSON-RPC 2.0 over stdio, a
//! Unix socket and HTTP + WebSocket, all at once, many clients; approval links and the
//! console over HTTP; a webhook per opened request. The decisions are the core's
//! (`turngate::serve`); this module carries bytes.

mod http;
mod pages;
mod rpc;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use turngate::audit::SqliteAuditStore;
use turngate::serve::webhook::{Webhook, WebhookFormat};
use turngate::serve::{Notification, Serve, ServeOptions};

use crate::CliError;

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Where turns, pending expiries, the link key and the HTTP bearer token are kept (0700;
    /// default: $XDG_STATE_HOME/turngate/serve or ~/.local/state/turngate/serve).
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// The SQLite store (default: STATE_DIR/audit.db).
    #[arg(long, value_name = "FILE")]
    store: Option<PathBuf>,
    /// Also listen on this Unix socket (created 0600).
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Also listen for HTTP (POST /rpc, GET /ws, the console at /, approval links) here.
    /// Needs the bearer token (STATE_DIR/token) except on approval links.
    #[arg(long, value_name = "ADDR:PORT")]
    http: Option<SocketAddr>,
    /// Allow --http on a non-loopback address.
    #[arg(long)]
    allow_remote: bool,
    /// Give every opened request approve/deny links under this base URL (how a phone reaches
    /// this server's --http, e.g. through a tunnel).
    #[arg(long, value_name = "BASE")]
    approval_url: Option<String>,
    /// Seconds a request (and its links) stays answerable; then it resolves `expired`.
    #[arg(long, value_name = "SECS", default_value_t = 600)]
    approval_ttl: u64,
    /// POST each opened request here as JSON (http:// only), retried with backoff.
    #[arg(long, value_name = "URL")]
    notify_webhook: Option<String>,
    /// The webhook's payload: raw ({request, approve_url, deny_url}), ntfy or slack.
    #[arg(long, value_name = "FORMAT", default_value = "raw")]
    notify_format: String,
    /// Delivery attempts per request.
    #[arg(long, value_name = "N", default_value_t = 8)]
    notify_attempts: u32,
    /// The first retry's delay in milliseconds (doubling after each failure).
    #[arg(long, value_name = "MS", default_value_t = 500)]
    notify_retry_ms: u64,
    /// Also announce the requests other processes defer into the store (`turngate run` or
    /// `mcp wrap` with `--approver defer`): `opened`, links, the webhook, and this server's
    /// --approval-ttl expiry.
    #[arg(long)]
    watch_store: bool,
    /// Do not read requests from stdin (serve only the socket and HTTP).
    #[arg(long)]
    no_stdio: bool,
}

fn default_state_dir() -> Result<PathBuf, CliError> {
    let store = crate::session::default_store()?;
    Ok(store
        .parent()
        .map_or_else(|| PathBuf::from("serve"), |p| p.join("serve")))
}

pub fn run(args: &ServeArgs) -> Result<u8, CliError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CliError(format!("async runtime: {e}")))?;
    rt.block_on(main(args))
}

async fn main(args: &ServeArgs) -> Result<u8, CliError> {
    let state_dir = match &args.state_dir {
        Some(d) => d.clone(),
        None => default_state_dir()?,
    };
    turngate::serve::private_dir(&state_dir)
        .map_err(|e| CliError(format!("state dir {}: {e}", state_dir.display())))?;
    let store_path = args
        .store
        .clone()
        .unwrap_or_else(|| state_dir.join("audit.db"));
    let store = SqliteAuditStore::open(&store_path)
        .map_err(|e| CliError(format!("store {}: {e}", store_path.display())))?;
    if let Some(addr) = args.http {
        if !addr.ip().is_loopback() && !args.allow_remote {
            return Err(CliError(format!(
                "--http {addr} is not a loopback address; pass --allow-remote to expose the API \
                 (bearer token required) and approval links beyond this machine"
            )));
        }
    }
    if let Some(base) = &args.approval_url {
        url_ok(base)?;
        if args.http.is_none() {
            eprintln!(
                "turngate serve: warning: --approval-url without --http: the links point at \
                 {base}, and only this server's --http can open them"
            );
        }
    }
    let webhook = match &args.notify_webhook {
        Some(url) => {
            let format = WebhookFormat::parse(&args.notify_format).ok_or_else(|| {
                CliError(format!(
                    "--notify-format `{}`: expected raw, ntfy or slack",
                    args.notify_format
                ))
            })?;
            let mut w = Webhook::new(url, format)?;
            w.attempts = args.notify_attempts.max(1);
            w.base_delay = Duration::from_millis(args.notify_retry_ms);
            Some(w)
        }
        None => None,
    };
    let serve = Serve::open(
        Arc::new(store),
        ServeOptions {
            state_dir: state_dir.clone(),
            approval_url: args.approval_url.clone(),
            approval_ttl: Duration::from_secs(args.approval_ttl.max(1)),
        },
    )?;
    if let Some(w) = webhook {
        spawn_webhook(&serve, w);
    }
    serve.watch_store(Duration::from_millis(500), args.watch_store);
    let mut tasks = JoinSet::new();
    if let Some(path) = &args.socket {
        let listener = bind_socket(path)?;
        eprintln!("turngate serve: socket {}", path.display());
        let serve = serve.clone();
        tasks.spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((stream, _)) => {
                        let serve = serve.clone();
                        tokio::spawn(async move {
                            let (r, w) = stream.into_split();
                            serve_lines(&serve, r, w).await;
                        });
                    }
                    Err(e) => eprintln!("turngate serve: socket accept: {e}"),
                }
            }
        });
    }
    if let Some(addr) = args.http {
        let token = turngate::serve::link::load_or_create_secret(&state_dir.join("token"), 32)
            .map_err(|e| CliError(format!("bearer token: {e}")))?;
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| CliError(format!("--http {addr}: {e}")))?;
        let bound = listener.local_addr().map_err(|e| CliError(e.to_string()))?;
        if !bound.ip().is_loopback() {
            eprintln!(
                "turngate serve: WARNING: listening on {bound}, reachable from other machines; \
                 the API needs the bearer token, approval links carry their own capability"
            );
        }
        eprintln!("turngate serve: http listening on {bound}");
        eprintln!(
            "turngate serve: console at http://{bound}/?access_token=<token in {}>",
            state_dir.join("token").display()
        );
        let serve = serve.clone();
        tasks.spawn(http::serve_http(
            serve,
            listener,
            Arc::new(token),
            args.approval_url.clone(),
        ));
    }
    let others = !tasks.is_empty();
    if !args.no_stdio {
        serve_lines(&serve, tokio::io::stdin(), tokio::io::stdout()).await;
        if !others {
            return Ok(0);
        }
    } else if !others {
        return Err(CliError(
            "--no-stdio without --socket or --http leaves nothing to serve".to_owned(),
        ));
    }
    // Until interrupted.
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = tasks.join_next() => {}
    }
    if let Some(path) = &args.socket {
        let _ = std::fs::remove_file(path);
    }
    Ok(0)
}

fn url_ok(base: &str) -> Result<(), CliError> {
    let parsed =
        url::Url::parse(base).map_err(|e| CliError(format!("--approval-url {base}: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.query().is_some() {
        return Err(CliError(format!(
            "--approval-url {base}: expected http(s)://host[:port][/prefix] without a query"
        )));
    }
    Ok(())
}

fn spawn_webhook(serve: &Serve, webhook: Webhook) {
    let mut rx = serve.subscribe();
    let webhook = Arc::new(webhook);
    tokio::spawn(async move {
        while let Some(n) = rx.recv().await {
            if let Notification::Opened(opened) = n {
                let webhook = webhook.clone();
                tokio::spawn(async move {
                    let (attempts, ok) = webhook.deliver(&opened).await;
                    if !ok {
                        eprintln!(
                            "turngate serve: webhook for {} failed after {attempts} attempts; the \
                             request stays pending",
                            opened.request.id
                        );
                    }
                });
            }
        }
    });
}

/// Bind the Unix socket at `path` with mode 0600 from the start: bound under a temporary name
/// in the same directory, chmodded, then renamed into place. A live socket there is an error
/// (another server); a stale one is replaced.
fn bind_socket(path: &Path) -> Result<tokio::net::UnixListener, CliError> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            return Err(CliError(format!(
                "--socket {}: exists and is not a socket",
                path.display()
            )));
        }
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(CliError(format!(
                "--socket {}: another server is listening there",
                path.display()
            )));
        }
        std::fs::remove_file(path)
            .map_err(|e| CliError(format!("--socket {}: {e}", path.display())))?;
    }
    let tmp = path.with_file_name(format!(
        ".{}.{}.tmp",
        path.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("turngate.sock"),
        std::process::id()
    ));
    let _ = std::fs::remove_file(&tmp);
    let listener = tokio::net::UnixListener::bind(&tmp)
        .map_err(|e| CliError(format!("--socket {}: {e}", path.display())))?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            CliError(format!("--socket {}: {e}", path.display()))
        })?;
    Ok(listener)
}

/// Read one line of at most [`rpc::MAX_REQUEST`] bytes. `Ok(None)` at end of input;
/// `Ok(Some(Err(())))` for a line that was too long (read and dropped to its end).
async fn next_line<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    buf: &mut Vec<u8>,
) -> std::io::Result<Option<Result<(), ()>>> {
    buf.clear();
    let mut too_long = false;
    loop {
        let chunk = reader.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(if buf.is_empty() && !too_long {
                None
            } else if too_long {
                Some(Err(()))
            } else {
                Some(Ok(()))
            });
        }
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        if !too_long {
            if buf.len() + take > rpc::MAX_REQUEST + 1 {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(&chunk[..take]);
            }
        }
        reader.consume(take);
        if done {
            return Ok(Some(if too_long { Err(()) } else { Ok(()) }));
        }
    }
}

/// One line-delimited client (stdio or a socket connection): every request runs as its own
/// task (an authorize may wait for a person); responses and notifications share the writer.
/// When the client goes away its unfinished requests are dropped: their approvals stay
/// pending in the store.
pub async fn serve_lines<R, W>(serve: &Serve, reader: R, mut writer: W)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let write_task = tokio::spawn(async move {
        while let Some(mut line) = rx.recv().await {
            line.push('\n');
            if writer.write_all(line.as_bytes()).await.is_err() || writer.flush().await.is_err() {
                break;
            }
        }
    });
    let mut notes = serve.subscribe();
    let note_tx = tx.clone();
    let note_task = tokio::spawn(async move {
        while let Some(n) = notes.recv().await {
            if note_tx.send(n.to_json().to_string()).is_err() {
                break;
            }
        }
    });
    let mut reader = BufReader::new(reader);
    let mut buf = Vec::new();
    let mut inflight = JoinSet::new();
    loop {
        match next_line(&mut reader, &mut buf).await {
            Ok(Some(Ok(()))) => {
                let text = buf.trim_ascii();
                if text.is_empty() {
                    continue;
                }
                let text = text.to_vec();
                let serve = serve.clone();
                let tx = tx.clone();
                inflight.spawn(async move {
                    if let Some(resp) = rpc::handle(&serve, &text).await {
                        let _ = tx.send(resp.to_string());
                    }
                });
            }
            Ok(Some(Err(()))) => {
                let e = rpc::RpcError::new(
                    rpc::INVALID_REQUEST,
                    format!("request longer than {} bytes", rpc::MAX_REQUEST),
                );
                let _ = tx.send(rpc::error_response(serde_json::Value::Null, &e).to_string());
            }
            Ok(None) | Err(_) => break,
        }
        while inflight.try_join_next().is_some() {}
    }
    // Let quick requests finish and answer; whatever still waits (for a person) is dropped,
    // and its request stays pending in the store.
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        while inflight.join_next().await.is_some() {}
    })
    .await;
    inflight.abort_all();
    note_task.abort();
    drop(tx);
    let _ = tokio::time::timeout(Duration::from_secs(2), write_task).await;
}
