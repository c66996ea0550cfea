//! HTTP for `turngate serve`: `POST /rpc`, `GET /ws` (JSON-RPC over WebSocket), the console at
//! `/`, and the approval links `GET|POST /approvals/{id}`.
//!
//! Every route needs the bearer token (`Authorization: Bearer …`, or `?access_token=…` where
//! a browser cannot send headers: `GET /` and `GET /ws` only), except the approval links,
//! whose signed token is the capability. On a loopback listener `Host` must be one of its own
//! names (DNS rebinding), and a browser request from another origin is refused everywhere. A GET never resolves anything (link
//! previews fetch GETs): only the page's form POST does.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HOST, HeaderValue, ORIGIN};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use turngate::serve::{LinkDecision, LinkError, Serve, ServeError};

use super::{pages, rpc};

type Body = Full<Bytes>;

/// Connections served at once; more wait in the kernel's backlog (red team 5: 1,100
/// half-sent requests used up every descriptor).
const MAX_CONNECTIONS: usize = 256;
/// A request head not complete by then closes its connection.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// Who may call: the bearer token, and, on a loopback listener, the names a browser on this
/// machine uses for it (anything else in `Host` is DNS rebinding).
#[derive(Clone)]
struct Guard {
    token: Arc<String>,
    /// `Host` values accepted (`127.0.0.1:P`, `localhost:P`, `[::1]:P`, and the host of
    /// `--approval-url`, which a tunnel may pass through); `None` on a non-loopback listener
    /// started with `--allow-remote`.
    hosts: Option<Arc<Vec<String>>>,
    /// The origin of `--approval-url` (`https://phone.example`): a phone's browser posts the
    /// approval form from there, through a tunnel.
    link_origin: Option<Arc<String>>,
}

pub async fn serve_http(
    serve: Serve,
    listener: tokio::net::TcpListener,
    token: Arc<String>,
    approval_url: Option<String>,
) {
    let base = approval_url.and_then(|u| url::Url::parse(&u).ok());
    let link_host = base.as_ref().and_then(|u| {
        u.host_str().map(|h| match u.port() {
            Some(p) => format!("{h}:{p}"),
            None => h.to_owned(),
        })
    });
    let link_origin = base
        .as_ref()
        .map(|u| u.origin().ascii_serialization())
        .filter(|o| o != "null")
        .map(Arc::new);
    let hosts = listener.local_addr().ok().and_then(|a| {
        a.ip().is_loopback().then(|| {
            let port = a.port();
            let mut names = vec![
                format!("127.0.0.1:{port}"),
                format!("localhost:{port}"),
                format!("[::1]:{port}"),
                a.to_string(),
            ];
            names.extend(link_host.clone());
            Arc::new(names)
        })
    });
    let guard = Guard {
        token,
        hosts,
        link_origin,
    };
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return;
        };
        let Ok((stream, _)) = listener.accept().await else {
            // Out of descriptors, most likely: do not spin.
            drop(permit);
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let serve = serve.clone();
        let guard = guard.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let svc = hyper::service::service_fn(move |req| {
                let serve = serve.clone();
                let guard = guard.clone();
                async move { Ok::<_, Infallible>(route(serve, &guard, req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEAD_TIMEOUT)
                .serve_connection(TokioIo::new(stream), svc)
                .with_upgrades()
                .await;
        });
    }
}

/// `Host` is one of the listener's own names (loopback listeners only).
fn host_allowed(req: &Request<Incoming>, guard: &Guard) -> bool {
    let Some(hosts) = &guard.hosts else {
        return true;
    };
    req.headers()
        .get(HOST)
        .and_then(|h| h.to_str().ok())
        .is_some_and(|h| hosts.iter().any(|a| a.eq_ignore_ascii_case(h)))
}

/// A browser's cross-site request carries its page's `Origin`: only this server's own
/// origin may call (red team 5: a page elsewhere that knew the token ran a command). A
/// request without `Origin` (curl, the clients) is not a browser's cross-site one.
fn same_origin(req: &Request<Incoming>, guard: &Guard) -> bool {
    let Some(origin) = req.headers().get(ORIGIN) else {
        return true;
    };
    let Ok(origin) = origin.to_str() else {
        return false;
    };
    if guard
        .link_origin
        .as_deref()
        .is_some_and(|o| o.eq_ignore_ascii_case(origin))
    {
        return true;
    }
    let host = req.headers().get(HOST).and_then(|h| h.to_str().ok());
    host.is_some_and(|h| {
        origin
            .strip_prefix("http://")
            .is_some_and(|rest| rest.eq_ignore_ascii_case(h))
    })
}

/// Constant-time equality (the length is not secret: tokens have a fixed length).
fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn query(req: &Request<Incoming>) -> HashMap<String, String> {
    req.uri()
        .query()
        .map(|q| {
            url::form_urlencoded::parse(q.as_bytes())
                .into_owned()
                .collect()
        })
        .unwrap_or_default()
}

/// The bearer token in `Authorization`; in the query only for what a browser opens without
/// headers (the console page and its WebSocket), never for `POST /rpc`.
fn authorized(req: &Request<Incoming>, token: &str) -> bool {
    let header = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if let Some(given) = header {
        return ct_eq(given.trim().as_bytes(), token.as_bytes());
    }
    let browser_route = req.method() == Method::GET && matches!(req.uri().path(), "/" | "/ws");
    browser_route
        && query(req)
            .get("access_token")
            .is_some_and(|given| ct_eq(given.as_bytes(), token.as_bytes()))
}

fn response(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Response<Body> {
    let mut resp = Response::new(Full::new(body.into()));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(content_type) {
        h.insert(CONTENT_TYPE, v);
    }
    h.insert("cache-control", HeaderValue::from_static("no-store"));
    h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    resp
}

fn html(status: StatusCode, body: String) -> Response<Body> {
    let mut resp = response(status, "text/html; charset=utf-8", body);
    resp.headers_mut().insert(
        "content-security-policy",
        HeaderValue::from_static(
            "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; \
             connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    resp
}

fn text(status: StatusCode, body: &str) -> Response<Body> {
    response(status, "text/plain; charset=utf-8", body.to_owned())
}

async fn body_bytes(req: Request<Incoming>, limit: usize) -> Result<Bytes, Response<Body>> {
    match Limited::new(req.into_body(), limit).collect().await {
        Ok(b) => Ok(b.to_bytes()),
        Err(_) => Err(text(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request body too large",
        )),
    }
}

async fn route(serve: Serve, guard: &Guard, req: Request<Incoming>) -> Response<Body> {
    let path = req.uri().path().to_owned();
    if !host_allowed(&req, guard) {
        return text(
            StatusCode::MISDIRECTED_REQUEST,
            "unknown Host for this server",
        );
    }
    if let Some(id) = path.strip_prefix("/approvals/") {
        // The link's token is the capability whoever holds it: no Origin check here (the
        // page's form posts with `Origin: null` under its no-referrer policy).
        let id = id.to_owned();
        return approval(serve, req, &id).await;
    }
    if !same_origin(&req, guard) {
        return text(StatusCode::FORBIDDEN, "cross-origin requests are refused");
    }
    if !authorized(&req, &guard.token) {
        let mut resp = text(StatusCode::UNAUTHORIZED, "bearer token required");
        resp.headers_mut()
            .insert("www-authenticate", HeaderValue::from_static("Bearer"));
        return resp;
    }
    match (req.method(), path.as_str()) {
        (&Method::GET, "/") => html(StatusCode::OK, pages::console()),
        (&Method::POST, "/rpc") => {
            let body = match body_bytes(req, rpc::MAX_REQUEST).await {
                Ok(b) => b,
                Err(resp) => return resp,
            };
            match rpc::handle(&serve, &body).await {
                Some(v) => response(StatusCode::OK, "application/json", v.to_string()),
                None => response(StatusCode::NO_CONTENT, "application/json", Bytes::new()),
            }
        }
        (&Method::GET, "/ws") => websocket(serve, req),
        _ => text(StatusCode::NOT_FOUND, "not found"),
    }
}

fn websocket(serve: Serve, mut req: Request<Incoming>) -> Response<Body> {
    let key = req
        .headers()
        .get("sec-websocket-key")
        .map(|k| tokio_tungstenite::tungstenite::handshake::derive_accept_key(k.as_bytes()));
    let upgrade = req
        .headers()
        .get("upgrade")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    let Some(accept) = key.filter(|_| upgrade) else {
        return text(StatusCode::BAD_REQUEST, "expected a WebSocket upgrade");
    };
    let on_upgrade = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        let Ok(upgraded) = on_upgrade.await else {
            return;
        };
        let config = WebSocketConfig::default()
            .max_message_size(Some(rpc::MAX_REQUEST))
            .max_frame_size(Some(rpc::MAX_REQUEST));
        let ws = tokio_tungstenite::WebSocketStream::from_raw_socket(
            TokioIo::new(upgraded),
            Role::Server,
            Some(config),
        )
        .await;
        ws_client(serve, ws).await;
    });
    let mut resp = Response::new(Full::new(Bytes::new()));
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = resp.headers_mut();
    h.insert("upgrade", HeaderValue::from_static("websocket"));
    h.insert("connection", HeaderValue::from_static("Upgrade"));
    if let Ok(v) = HeaderValue::from_str(&accept) {
        h.insert("sec-websocket-accept", v);
    }
    resp
}

async fn ws_client<S>(serve: Serve, ws: tokio_tungstenite::WebSocketStream<S>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sink, mut stream) = ws.split();
    let (tx, mut rx) = mpsc::unbounded_channel::<Message>();
    let writer = tokio::spawn(async move {
        while let Some(m) = rx.recv().await {
            if sink.send(m).await.is_err() {
                break;
            }
        }
    });
    let mut notes = serve.subscribe();
    let note_tx = tx.clone();
    let notes_task = tokio::spawn(async move {
        while let Some(n) = notes.recv().await {
            if note_tx
                .send(Message::text(n.to_json().to_string()))
                .is_err()
            {
                break;
            }
        }
    });
    let mut inflight = tokio::task::JoinSet::new();
    while let Some(msg) = stream.next().await {
        let data = match msg {
            Ok(Message::Text(t)) => Bytes::copy_from_slice(t.as_bytes()),
            Ok(Message::Binary(b)) => b,
            Ok(Message::Ping(p)) => {
                let _ = tx.send(Message::Pong(p));
                continue;
            }
            Ok(Message::Close(_)) | Err(_) => break,
            Ok(_) => continue,
        };
        let serve = serve.clone();
        let tx = tx.clone();
        inflight.spawn(async move {
            if let Some(resp) = rpc::handle(&serve, &data).await {
                let _ = tx.send(Message::text(resp.to_string()));
            }
        });
        while inflight.try_join_next().is_some() {}
    }
    // The client left: its waiting requests are dropped; their approvals stay pending.
    inflight.abort_all();
    notes_task.abort();
    drop(tx);
    let _ = writer.await;
}

async fn approval(serve: Serve, req: Request<Incoming>, id: &str) -> Response<Body> {
    match *req.method() {
        Method::GET => {
            let q = query(&req);
            let token = q.get("token").cloned().unwrap_or_default();
            let Some(decision) = q.get("action").and_then(|a| LinkDecision::parse(a)) else {
                return html(
                    StatusCode::BAD_REQUEST,
                    pages::message("Invalid link", "This approval link is not valid."),
                );
            };
            match serve.link_view(id, &token, decision) {
                Ok(stored) => html(StatusCode::OK, pages::approval(&stored, decision, &token)),
                Err(e) => link_error(&e),
            }
        }
        Method::POST => {
            let body = match body_bytes(req, 16 * 1024).await {
                Ok(b) => b,
                Err(resp) => return resp,
            };
            let form: HashMap<String, String> =
                url::form_urlencoded::parse(&body).into_owned().collect();
            let token = form.get("token").cloned().unwrap_or_default();
            let Some(decision) = form.get("action").and_then(|a| LinkDecision::parse(a)) else {
                return html(
                    StatusCode::BAD_REQUEST,
                    pages::message("Invalid link", "This approval link is not valid."),
                );
            };
            match serve.link_resolve(id, &token, decision) {
                Ok(recorded) => html(
                    StatusCode::OK,
                    pages::message(
                        "Done",
                        &format!("Request {id} is resolved as {}.", recorded.resolution),
                    ),
                ),
                Err(e) => link_error(&e),
            }
        }
        _ => {
            let mut resp = text(StatusCode::METHOD_NOT_ALLOWED, "GET shows, POST resolves");
            resp.headers_mut()
                .insert("allow", HeaderValue::from_static("GET, POST"));
            resp
        }
    }
}

fn link_error(e: &ServeError) -> Response<Body> {
    match e {
        ServeError::Link(LinkError::Expired) => html(
            StatusCode::GONE,
            pages::message(
                "Expired",
                "This approval link has expired; the request resolved as expired (denied).",
            ),
        ),
        ServeError::AlreadyResolved { resolution, .. } => html(
            StatusCode::CONFLICT,
            pages::message(
                "Already resolved",
                &format!(
                    "This request was already resolved as {resolution}; the link cannot be used again."
                ),
            ),
        ),
        ServeError::Link(_) | ServeError::UnknownRequest(_) | ServeError::LinksDisabled => html(
            StatusCode::FORBIDDEN,
            pages::message("Invalid link", "This approval link is not valid."),
        ),
        other => html(
            StatusCode::INTERNAL_SERVER_ERROR,
            pages::message("Error", &other.to_string()),
        ),
    }
}
