//! `turngate serve` end to end (DESIGN §15): a real server process, real clients on its
//! stdio, its Unix socket and its HTTP port, and the attacks on each boundary.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_turngate")
}

const TIMEOUT: Duration = Duration::from_secs(30);

/// One line-delimited JSON-RPC client: every line read lands in a channel; responses are
/// matched by id and notifications kept in order.
struct Client {
    writer: Box<dyn Write + Send>,
    rx: mpsc::Receiver<Value>,
    notes: Vec<Value>,
    responses: Vec<Value>,
    next: u64,
}

impl Client {
    fn new(reader: impl Read + Send + 'static, writer: impl Write + Send + 'static) -> Client {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(reader).lines() {
                let Ok(line) = line else { break };
                match serde_json::from_str::<Value>(&line) {
                    Ok(v) => {
                        if tx.send(v).is_err() {
                            break;
                        }
                    }
                    Err(e) => panic!("server wrote a line that is not JSON ({e}): {line}"),
                }
            }
        });
        Client {
            writer: Box::new(writer),
            rx,
            notes: Vec::new(),
            responses: Vec::new(),
            next: 1,
        }
    }

    fn socket(path: &Path) -> Client {
        let deadline = Instant::now() + TIMEOUT;
        let stream = loop {
            match UnixStream::connect(path) {
                Ok(s) => break s,
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                Err(e) => panic!("connect {}: {e}", path.display()),
            }
        };
        let reader = stream.try_clone().unwrap_or_else(|e| panic!("{e}"));
        Client::new(reader, stream)
    }

    fn send_raw(&mut self, line: &[u8]) {
        self.writer
            .write_all(line)
            .unwrap_or_else(|e| panic!("write: {e}"));
        self.writer
            .write_all(b"\n")
            .unwrap_or_else(|e| panic!("write: {e}"));
        self.writer.flush().unwrap_or_else(|e| panic!("flush: {e}"));
    }

    fn send(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next;
        self.next += 1;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_raw(line.to_string().as_bytes());
        id
    }

    fn pump(&mut self, until: Instant) -> bool {
        let left = until.saturating_duration_since(Instant::now());
        match self.rx.recv_timeout(left.max(Duration::from_millis(1))) {
            Ok(v) => {
                if v.get("method").is_some() && v.get("id").is_none() {
                    self.notes.push(v);
                } else {
                    self.responses.push(v);
                }
                true
            }
            Err(_) => false,
        }
    }

    /// The response to `id` (result or error object).
    fn response(&mut self, id: u64) -> Value {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(i) = self.responses.iter().position(|r| r["id"] == json!(id)) {
                return self.responses.remove(i);
            }
            assert!(self.pump(deadline), "no response to request {id}");
        }
    }

    /// The response without an id (a parse error or invalid request).
    fn null_response(&mut self) -> Value {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(i) = self.responses.iter().position(|r| r["id"].is_null()) {
                return self.responses.remove(i);
            }
            assert!(self.pump(deadline), "no id-less response");
        }
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params);
        let r = self.response(id);
        assert!(r.get("error").is_none(), "{method} failed: {r}");
        r["result"].clone()
    }

    fn call_err(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params);
        let r = self.response(id);
        assert!(r.get("result").is_none(), "{method} should fail: {r}");
        r["error"].clone()
    }

    /// The first notification `method` whose params satisfy `pred` (kept notifications first).
    fn note(&mut self, method: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + TIMEOUT;
        let mut seen = 0;
        loop {
            while seen < self.notes.len() {
                let n = &self.notes[seen];
                if n["method"] == method && pred(&n["params"]) {
                    return self.notes.remove(seen)["params"].clone();
                }
                seen += 1;
            }
            assert!(self.pump(deadline), "no {method} notification");
        }
    }

    /// Read for `d`, keeping what arrives.
    fn drain_for(&mut self, d: Duration) {
        let until = Instant::now() + d;
        while self.pump(until) {}
    }
}

struct Server {
    child: Child,
    dir: PathBuf,
    http: Option<u16>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Start `turngate serve` on `dir` (state, store and socket inside it) with `extra` args;
/// `http`: also on a free loopback port with approval links under it.
fn start(dir: &Path, http: bool, extra: &[&str]) -> (Server, Client) {
    let mut cmd = Command::new(bin());
    cmd.arg("serve")
        .arg("--state-dir")
        .arg(dir.join("state"))
        .arg("--store")
        .arg(dir.join("audit.db"))
        .arg("--socket")
        .arg(dir.join("serve.sock"));
    let port = http.then(free_port);
    if let Some(port) = port {
        cmd.arg("--http")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--approval-url")
            .arg(format!("http://127.0.0.1:{port}"));
    }
    cmd.args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn serve: {e}"));
    let stdin = child.stdin.take().unwrap_or_else(|| panic!("stdin"));
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("stdout"));
    let client = Client::new(stdout, stdin);
    let server = Server {
        child,
        dir: dir.to_path_buf(),
        http: port,
    };
    // The socket exists once the server is up (HTTP binds right after).
    let sock = dir.join("serve.sock");
    let deadline = Instant::now() + TIMEOUT;
    while !sock.exists() {
        assert!(
            Instant::now() < deadline,
            "the server never bound its socket"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    if let Some(port) = port {
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "the server never bound its HTTP port"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    (server, client)
}

fn workspace(dir: &Path) -> PathBuf {
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap_or_else(|e| panic!("{e}"));
    ws
}

fn start_turn(c: &mut Client, dir: &Path, turn: &str) -> Value {
    c.call(
        "turn/start",
        json!({"turn_id": turn, "profile": {"mode": "supervised"}, "workspace": workspace(dir)}),
    )
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"))
}

/// The issue's first "done when": stdio client A asks, socket client B answers
/// `allow_for_turn`, A is allowed, A's second matching call is allowed from the grant with no
/// prompt, `resolved` reaches both, `turn/events` replays it all.
#[test]
fn stdio_ask_answered_from_a_second_client_then_cached_for_the_turn() {
    let dir = tmp();
    let (server, mut a) = start(dir.path(), false, &[]);
    let mut b = Client::socket(&server.dir.join("serve.sock"));
    let started = start_turn(&mut a, dir.path(), "t1");
    assert_eq!(started["turn_id"], "t1");
    assert_eq!(
        started["snapshot"]["permission_profile"]["mode"],
        "supervised"
    );

    let ask = a.send(
        "turn/action/authorize",
        json!({"turn_id": "t1", "kind": "shell_command", "target": "git status", "tool": "bash"}),
    );
    let opened = b.note("turn/permission/request/opened", |p| {
        p["request"]["turn_id"] == "t1"
    });
    let request_id = opened["request"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(request_id.starts_with("apr_"), "{opened}");
    assert_eq!(opened["request"]["details"]["target"], "git status");
    // A also sees it; listing shows it pending.
    a.note("turn/permission/request/opened", |p| {
        p["request"]["id"] == request_id.as_str()
    });
    let listed = b.call("turn/permission/requests/list", json!({"turn_id": "t1"}));
    assert_eq!(listed["requests"][0]["request"]["id"], request_id.as_str());

    let r = b.call(
        "turn/permission/request/respond",
        json!({"request_id": request_id, "resolution": "allow_for_turn", "decider": "bob"}),
    );
    assert_eq!(r, json!({"resolution": "allow_for_turn", "applied": true}));

    let allowed = a.response(ask);
    assert_eq!(allowed["result"]["outcome"], "allowed", "{allowed}");
    assert_eq!(allowed["result"]["cached_approval"], false);
    for c in [&mut a, &mut b] {
        let res = c.note("turn/permission/request/resolved", |p| {
            p["request_id"] == request_id.as_str()
        });
        assert_eq!(res["resolution"], "allow_for_turn");
    }

    // The same action again: allowed from the grant, no prompt.
    let again = a.call(
        "turn/action/authorize",
        json!({"turn_id": "t1", "kind": "shell_command", "target": "git status", "tool": "bash"}),
    );
    assert_eq!(again["outcome"], "allowed");
    assert_eq!(again["cached_approval"], true);
    b.drain_for(Duration::from_millis(300));
    assert!(
        !b.notes
            .iter()
            .any(|n| n["method"] == "turn/permission/request/opened"),
        "the cached grant prompted again: {:?}",
        b.notes
    );
    b.drain_for(Duration::from_millis(900));
    assert!(
        !b.notes
            .iter()
            .any(|n| n["method"] == "turn/permission/request/resolved"),
        "resolved was published twice: {:?}",
        b.notes
    );
    // A different command still asks (the grant is for that exact scope).
    let other = a.call(
        "turn/action/authorize",
        json!({"turn_id": "t1", "kind": "shell_command", "target": "git push", "wait": false}),
    );
    assert_eq!(other["outcome"], "deferred", "{other}");

    // Respond twice: idempotent. Unknown id: an error, not a crash.
    let twice = b.call(
        "turn/permission/request/respond",
        json!({"request_id": request_id, "resolution": "deny"}),
    );
    assert_eq!(
        twice,
        json!({"resolution": "allow_for_turn", "applied": false})
    );
    let unknown = b.call_err(
        "turn/permission/request/respond",
        json!({"request_id": "apr_nope", "resolution": "deny"}),
    );
    assert_eq!(unknown["code"], -32002);

    let events = a.call("turn/events", json!({"turn_id": "t1"}));
    let kinds: Vec<(String, String)> = events["events"]
        .as_array()
        .unwrap_or(&Vec::new())
        .iter()
        .map(|e| {
            (
                e["kind"].as_str().unwrap_or_default().to_owned(),
                e["decision"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let want = [
        ("profile_selected", ""),
        ("approval_requested", "ask"),
        ("approval_resolved", "allow_for_turn"),
        ("decision_allowed", "allow_for_turn"),
        ("decision_allowed", "allow_for_turn"),
        ("approval_requested", "ask"),
    ];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(k, d)| ((*k).to_owned(), (*d).to_owned()))
        .collect();
    assert_eq!(kinds, want, "{events}");
    assert_eq!(events["events"][4]["cached_approval_used"], true);
    assert_eq!(events["events"][3]["decider"], "person:bob");
    // The events were also live notifications.
    a.note("turn/event", |p| p["event"]["kind"] == "approval_resolved");
}

#[test]
fn turn_end_cancels_pending_and_unknown_turns_are_errors() {
    let dir = tmp();
    let (_server, mut a) = start(dir.path(), false, &[]);
    start_turn(&mut a, dir.path(), "t2");
    let dup = a.call_err(
        "turn/start",
        json!({"turn_id": "t2", "workspace": workspace(dir.path())}),
    );
    assert_eq!(dup["code"], -32003);
    let bad = a.call_err(
        "turn/start",
        json!({"turn_id": "../x", "workspace": workspace(dir.path())}),
    );
    assert_eq!(bad["code"], -32602);
    let waiting = a.send(
        "turn/action/authorize",
        json!({"turn_id": "t2", "kind": "shell_command", "target": "make"}),
    );
    let opened = a.note("turn/permission/request/opened", |_| true);
    let id = opened["request"]["id"].clone();
    let ended = a.call("turn/end", json!({"turn_id": "t2"}));
    assert_eq!(ended["cancelled"], json!([id.clone()]));
    let res = a.note("turn/permission/request/resolved", |p| {
        p["request_id"] == id
    });
    assert_eq!(res["resolution"], "cancelled");
    let denied = a.response(waiting);
    assert_eq!(denied["result"]["outcome"], "denied", "{denied}");
    // The turn is gone.
    let gone = a.call_err(
        "turn/action/authorize",
        json!({"turn_id": "t2", "kind": "shell_command", "target": "make"}),
    );
    assert_eq!(gone["code"], -32001);
    assert_eq!(
        a.call_err("turn/end", json!({"turn_id": "t2"}))["code"],
        -32001
    );
    // Respond to the cancelled request: the recorded outcome, not applied.
    let late = a.call(
        "turn/permission/request/respond",
        json!({"request_id": id, "resolution": "allow_once"}),
    );
    assert_eq!(late, json!({"resolution": "cancelled", "applied": false}));
}

#[test]
fn bad_input_gets_standard_errors_and_the_server_keeps_serving() {
    let dir = tmp();
    let (server, mut a) = start(dir.path(), false, &[]);
    a.send_raw(b"this is not json");
    assert_eq!(a.null_response()["error"]["code"], -32700);
    a.send_raw(b"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"turn/events\"}]");
    assert_eq!(a.null_response()["error"]["code"], -32600);
    a.send_raw(b"{\"jsonrpc\":\"1.0\",\"id\":7,\"method\":\"turn/events\"}");
    assert_eq!(a.response(7)["error"]["code"], -32600);
    a.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":{\"x\":1},\"method\":\"turn/events\"}");
    assert_eq!(a.null_response()["error"]["code"], -32600);
    // A 3 MiB line: refused, and the next line still works.
    let mut huge = b"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"".to_vec();
    huge.extend(std::iter::repeat_n(b'a', 3 << 20));
    huge.extend(b"\"}");
    a.send_raw(&huge);
    assert_eq!(a.null_response()["error"]["code"], -32600);
    assert_eq!(a.call_err("no/such", json!({}))["code"], -32601);
    // Unknown fields, wrong types, an unknown kind or resolution: invalid params.
    for (method, params) in [
        ("turn/events", json!({"turn_id": "t", "extra": 1})),
        ("turn/events", json!({"turn_id": 5})),
        (
            "turn/action/authorize",
            json!({"turn_id": "t", "kind": "teleport", "target": "x"}),
        ),
        (
            "turn/permission/request/respond",
            json!({"request_id": "apr_x", "resolution": "yes"}),
        ),
        ("turn/start", json!({"workspace": "/nonexistent/really"})),
    ] {
        assert_eq!(
            a.call_err(method, params.clone())["code"],
            -32602,
            "{method} {params}"
        );
    }
    a.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"turn/events\",\"params\":[1]}");
    assert_eq!(a.response(11)["error"]["code"], -32602);
    // A notification (no id) gets no answer; the server still serves.
    a.send_raw(b"{\"jsonrpc\":\"2.0\",\"method\":\"turn/end\",\"params\":{\"turn_id\":\"none\"}}");
    let events = a.call("turn/events", json!({"turn_id": "none"}));
    assert_eq!(events["events"], json!([]));
    // Binary garbage.
    a.send_raw(&[0xff, 0xfe, 0x00, 0x01]);
    assert_eq!(a.null_response()["error"]["code"], -32700);
    assert!(
        a.responses.is_empty(),
        "unexpected answers: {:?}",
        a.responses
    );
    drop(server);
}

#[test]
fn the_socket_is_0600_and_a_second_server_on_it_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tmp();
    let (server, _a) = start(dir.path(), false, &[]);
    let sock = server.dir.join("serve.sock");
    let mode = std::fs::metadata(&sock)
        .map(|m| m.permissions().mode() & 0o777)
        .unwrap_or(0);
    assert_eq!(mode, 0o600, "socket mode {mode:o}");
    let state_mode = std::fs::metadata(server.dir.join("state"))
        .map(|m| m.permissions().mode() & 0o777)
        .unwrap_or(0);
    assert_eq!(state_mode, 0o700);
    let out = Command::new(bin())
        .args(["serve", "--no-stdio", "--socket"])
        .arg(&sock)
        .arg("--state-dir")
        .arg(dir.path().join("state2"))
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("another server"),
        "{out:?}"
    );
}

/// kill -9 with a request pending (and its asker waiting), start again on the same state
/// dir and store: the request is still pending and answerable, the turn is still there.
#[test]
fn kill_9_and_restart_keeps_the_request_pending_and_answerable() {
    let dir = tmp();
    let (mut server, mut a) = start(dir.path(), false, &[]);
    start_turn(&mut a, dir.path(), "t3");
    a.send(
        "turn/action/authorize",
        json!({"turn_id": "t3", "kind": "shell_command", "target": "cargo publish"}),
    );
    let opened = a.note("turn/permission/request/opened", |_| true);
    let id = opened["request"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    server.child.kill().unwrap_or_else(|e| panic!("kill: {e}"));
    let _ = server.child.wait();
    drop(server);

    let (_server, mut a) = start(dir.path(), false, &[]);
    let listed = a.call("turn/permission/requests/list", json!({}));
    let ids: Vec<&str> = listed["requests"]
        .as_array()
        .map(|v| {
            v.iter()
                .filter_map(|r| r["request"]["id"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(ids, vec![id.as_str()], "{listed}");
    let r = a.call(
        "turn/permission/request/respond",
        json!({"request_id": id, "resolution": "allow_for_turn"}),
    );
    assert_eq!(r, json!({"resolution": "allow_for_turn", "applied": true}));
    let res = a.note("turn/permission/request/resolved", |p| {
        p["request_id"] == id.as_str()
    });
    assert_eq!(res["resolution"], "allow_for_turn");
    // The turn was restored, with the grant: the same action is allowed without a prompt.
    let again = a.call(
        "turn/action/authorize",
        json!({"turn_id": "t3", "kind": "shell_command", "target": "cargo publish"}),
    );
    assert_eq!(again["outcome"], "allowed", "{again}");
    assert_eq!(again["cached_approval"], true);
    assert_eq!(
        a.call("turn/permission/requests/list", json!({}))["requests"],
        json!([])
    );
}

// ---- HTTP: bearer, approval links, expiry, webhook -------------------------------------

struct HttpResponse {
    status: u16,
    headers: String,
    body: String,
}

fn http(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> HttpResponse {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap_or_else(|e| panic!("{e}"));
    s.set_read_timeout(Some(TIMEOUT))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nconnection: close\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes())
        .unwrap_or_else(|e| panic!("{e}"));
    s.write_all(body).unwrap_or_else(|e| panic!("{e}"));
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    HttpResponse {
        status,
        headers: head.to_ascii_lowercase(),
        body: body.to_owned(),
    }
}

fn path_of(url: &str) -> String {
    url.splitn(4, '/')
        .nth(3)
        .map(|p| format!("/{p}"))
        .unwrap_or_default()
}

fn query_param(url: &str, name: &str) -> String {
    url.split(['?', '&'])
        .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
        .unwrap_or_default()
        .to_owned()
}

fn form(token: &str, action: &str) -> Vec<u8> {
    format!("token={token}&action={action}").into_bytes()
}

const FORM: (&str, &str) = ("content-type", "application/x-www-form-urlencoded");

#[test]
fn http_needs_the_bearer_token_except_on_approval_links() {
    let dir = tmp();
    let (server, _a) = start(dir.path(), true, &[]);
    let port = server.http.unwrap_or_default();
    let token = std::fs::read_to_string(dir.path().join("state/token")).unwrap_or_default();
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("state/token"))
            .map(|m| m.permissions().mode() & 0o777)
            .unwrap_or(0);
        assert_eq!(mode, 0o600);
    }
    let body = br#"{"jsonrpc":"2.0","id":1,"method":"turn/events","params":{"turn_id":"x"}}"#;
    assert_eq!(http(port, "POST", "/rpc", &[], body).status, 401);
    assert_eq!(
        http(
            port,
            "POST",
            "/rpc",
            &[("authorization", "Bearer nope")],
            body
        )
        .status,
        401
    );
    let wrong_len = format!("Bearer {}x", token);
    assert_eq!(
        http(port, "POST", "/rpc", &[("authorization", &wrong_len)], body).status,
        401
    );
    assert_eq!(http(port, "GET", "/", &[], b"").status, 401);
    assert_eq!(http(port, "GET", "/ws", &[], b"").status, 401);
    assert_eq!(
        http(port, "GET", "/?access_token=nope", &[], b"").status,
        401
    );
    let bearer = format!("Bearer {token}");
    let ok = http(port, "POST", "/rpc", &[("authorization", &bearer)], body);
    assert_eq!(ok.status, 200);
    let v: Value = serde_json::from_str(&ok.body).unwrap_or_default();
    assert_eq!(v["result"]["events"], json!([]));
    let page = http(port, "GET", &format!("/?access_token={token}"), &[], b"");
    assert_eq!(page.status, 200);
    assert!(page.body.contains("turngate approvals"));
    // A remote bind without --allow-remote is refused.
    let out = Command::new(bin())
        .args(["serve", "--no-stdio", "--http", "0.0.0.0:0", "--state-dir"])
        .arg(dir.path().join("state3"))
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--allow-remote"),
        "{out:?}"
    );
}

/// One raw HTTP/1.1 request with exactly `head_lines` as its headers; the status code.
fn raw_status(port: u16, request_line: &str, head_lines: &[String], body: &[u8]) -> u16 {
    raw_request(port, request_line, head_lines, body)
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// One raw HTTP/1.1 request with exactly `head_lines` as its headers; the whole response.
fn raw_request(port: u16, request_line: &str, head_lines: &[String], body: &[u8]) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap_or_else(|e| panic!("{e}"));
    s.set_read_timeout(Some(TIMEOUT))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut req = format!(
        "{request_line}\r\nconnection: close\r\ncontent-length: {}\r\n",
        body.len()
    );
    for h in head_lines {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes())
        .unwrap_or_else(|e| panic!("{e}"));
    s.write_all(body).unwrap_or_else(|e| panic!("{e}"));
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn a_browser_elsewhere_cannot_call_the_api_even_with_the_token() {
    // Red team 5: a page on another origin that knew the token (it is in the console's URL)
    // POSTed to `/rpc?access_token=…` with `no-cors` and ran a command; a foreign Host
    // (DNS rebinding) was accepted too.
    let dir = tmp();
    let (server, _a) = start(dir.path(), true, &[]);
    let port = server.http.unwrap_or_default();
    let token = std::fs::read_to_string(dir.path().join("state/token")).unwrap_or_default();
    let body = br#"{"jsonrpc":"2.0","id":1,"method":"turn/events","params":{"turn_id":"x"}}"#;
    let host = format!("host: 127.0.0.1:{port}");
    let bearer = format!("authorization: Bearer {token}");
    // The token in the query is for the console page and its WebSocket only.
    let rpc_query = format!("POST /rpc?access_token={token} HTTP/1.1");
    assert_eq!(
        raw_status(port, &rpc_query, std::slice::from_ref(&host), body),
        401
    );
    // Another origin, even with the bearer token.
    for origin in [
        "origin: http://evil.example",
        "origin: null",
        "origin: https://127.0.0.1:1",
    ] {
        let status = raw_status(
            port,
            "POST /rpc HTTP/1.1",
            &[host.clone(), bearer.clone(), origin.to_owned()],
            body,
        );
        assert_eq!(status, 403, "{origin}");
    }
    let ws = format!("GET /ws?access_token={token} HTTP/1.1");
    let upgrade = [
        host.clone(),
        "origin: http://evil.example".to_owned(),
        "upgrade: websocket".to_owned(),
        "sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==".to_owned(),
        "sec-websocket-version: 13".to_owned(),
    ];
    assert_eq!(raw_status(port, &ws, &upgrade, b""), 403);
    // A name this loopback listener does not have: DNS rebinding.
    let rebound = format!("host: evil.example:{port}");
    assert_eq!(
        raw_status(port, "POST /rpc HTTP/1.1", &[rebound, bearer.clone()], body),
        421
    );
    // The server's own origin, and no Origin at all (a client), still work.
    let own = format!("origin: http://127.0.0.1:{port}");
    assert_eq!(
        raw_status(
            port,
            "POST /rpc HTTP/1.1",
            &[host.clone(), bearer.clone(), own],
            body
        ),
        200
    );
    assert_eq!(
        raw_status(port, "POST /rpc HTTP/1.1", &[host, bearer], body),
        200
    );
}

#[test]
fn approval_links_show_on_get_resolve_on_post_once_and_refuse_forgeries() {
    let dir = tmp();
    let (server, mut a) = start(dir.path(), true, &[]);
    let port = server.http.unwrap_or_default();
    start_turn(&mut a, dir.path(), "t4");
    let wait_a = a.send(
        "turn/action/authorize",
        json!({"turn_id": "t4", "kind": "shell_command", "target": "echo '<b>x</b>' \"&\""}),
    );
    let oa = a.note("turn/permission/request/opened", |_| true);
    let b = a.call(
        "turn/action/authorize",
        json!({"turn_id": "t4", "kind": "shell_command", "target": "make install", "wait": false}),
    );
    assert_eq!(b["outcome"], "deferred");
    let approve_a = oa["approve_url"].as_str().unwrap_or_default().to_owned();
    let deny_a = oa["deny_url"].as_str().unwrap_or_default().to_owned();
    let id_a = oa["request"]["id"].as_str().unwrap_or_default().to_owned();
    let id_b = b["request_id"].as_str().unwrap_or_default().to_owned();
    let approve_b = b["approve_url"].as_str().unwrap_or_default().to_owned();
    assert!(
        approve_a.starts_with(&format!("http://127.0.0.1:{port}/approvals/{id_a}?")),
        "{approve_a}"
    );
    let tok_a = query_param(&approve_a, "token");
    let tok_deny_a = query_param(&deny_a, "token");
    let tok_b = query_param(&approve_b, "token");

    // GET shows exactly the action (escaped), and changes nothing — twice.
    for _ in 0..2 {
        let page = http(port, "GET", &path_of(&approve_a), &[], b"");
        assert_eq!(page.status, 200, "{}", page.body);
        assert!(
            page.body
                .contains("echo &#39;&lt;b&gt;x&lt;/b&gt;&#39; &quot;&amp;&quot;"),
            "{}",
            page.body
        );
        assert!(!page.body.contains("<b>x</b>"));
        assert!(page.body.contains("name=\"viewport\""));
        assert!(page.headers.contains("referrer-policy: no-referrer"));
        assert!(page.headers.contains("cache-control: no-store"));
    }
    let pending = a.call("turn/permission/requests/list", json!({"turn_id": "t4"}));
    assert_eq!(pending["requests"].as_array().map(Vec::len), Some(2));
    // Other methods do not resolve either.
    assert_eq!(
        http(
            port,
            "PUT",
            &path_of(&approve_a),
            &[FORM],
            &form(&tok_a, "approve")
        )
        .status,
        405
    );

    // Forged, modified, cross-request and cross-decision tokens.
    let forged = format!(
        "{}.{}",
        tok_a.split('.').next().unwrap_or_default(),
        "0".repeat(64)
    );
    let stretched = format!(
        "99999999999.{}",
        tok_a.split('.').nth(1).unwrap_or_default()
    );
    for (id, token, action) in [
        (id_a.as_str(), forged.as_str(), "approve"),
        (id_a.as_str(), stretched.as_str(), "approve"),
        (id_a.as_str(), tok_b.as_str(), "approve"),
        (id_b.as_str(), tok_a.as_str(), "approve"),
        (id_a.as_str(), tok_deny_a.as_str(), "approve"),
        (id_a.as_str(), "", "approve"),
        (id_a.as_str(), tok_a.as_str(), "allow_for_turn"),
        ("apr_doesnotexist", tok_a.as_str(), "approve"),
    ] {
        let path = format!("/approvals/{id}");
        let post = http(port, "POST", &path, &[FORM], &form(token, action));
        assert!(
            matches!(post.status, 400 | 403),
            "{id} {token} {action}: {} {}",
            post.status,
            post.body
        );
        let get = http(
            port,
            "GET",
            &format!("{path}?action={action}&token={token}"),
            &[],
            b"",
        );
        assert!(
            matches!(get.status, 400 | 403),
            "{id} {token} {action}: {}",
            get.status
        );
    }
    assert_eq!(
        a.call("turn/permission/requests/list", json!({"turn_id": "t4"}))["requests"]
            .as_array()
            .map(Vec::len),
        Some(2),
        "a refused link resolved something"
    );

    // The real POST approves once; the waiting authorize gets allowed.
    let post = http(
        port,
        "POST",
        &format!("/approvals/{id_a}"),
        &[FORM],
        &form(&tok_a, "approve"),
    );
    assert_eq!(post.status, 200, "{}", post.body);
    assert!(post.body.contains("allow_once"));
    let allowed = a.response(wait_a);
    assert_eq!(allowed["result"]["outcome"], "allowed", "{allowed}");
    let res = a.note("turn/permission/request/resolved", |p| {
        p["request_id"] == id_a.as_str()
    });
    assert_eq!(res["resolution"], "allow_once");
    // Second use, and the deny link after: refused, nothing changes.
    let again = http(
        port,
        "POST",
        &format!("/approvals/{id_a}"),
        &[FORM],
        &form(&tok_a, "approve"),
    );
    assert_eq!(again.status, 409, "{}", again.body);
    let deny_after = http(
        port,
        "POST",
        &format!("/approvals/{id_a}"),
        &[FORM],
        &form(&tok_deny_a, "deny"),
    );
    assert_eq!(deny_after.status, 409);
    assert_eq!(
        http(port, "GET", &path_of(&approve_a), &[], b"").status,
        409
    );
    // The deny link of B denies it.
    let deny_b = query_param(b["deny_url"].as_str().unwrap_or_default(), "token");
    let post = http(
        port,
        "POST",
        &format!("/approvals/{id_b}"),
        &[FORM],
        &form(&deny_b, "deny"),
    );
    assert_eq!(post.status, 200);
    let res = a.note("turn/permission/request/resolved", |p| {
        p["request_id"] == id_b.as_str()
    });
    assert_eq!(res["resolution"], "deny");
}

#[test]
fn an_expired_link_resolves_expired_and_the_waiting_call_is_denied() {
    let dir = tmp();
    let (server, mut a) = start(dir.path(), true, &["--approval-ttl", "1"]);
    let port = server.http.unwrap_or_default();
    start_turn(&mut a, dir.path(), "t5");
    // One request expires by itself (the timer) ...
    let waiting = a.send(
        "turn/action/authorize",
        json!({"turn_id": "t5", "kind": "shell_command", "target": "deploy"}),
    );
    let o = a.note("turn/permission/request/opened", |_| true);
    let id = o["request"]["id"].as_str().unwrap_or_default().to_owned();
    let approve = o["approve_url"].as_str().unwrap_or_default().to_owned();
    let res = a.note("turn/permission/request/resolved", |p| {
        p["request_id"] == id.as_str()
    });
    assert_eq!(res["resolution"], "expired");
    assert_eq!(res["source"], "timeout");
    assert_eq!(a.response(waiting)["result"]["outcome"], "denied");
    // ... and its link, used after, is refused as expired (a deny), never an approval.
    let tok = query_param(&approve, "token");
    let post = http(
        port,
        "POST",
        &format!("/approvals/{id}"),
        &[FORM],
        &form(&tok, "approve"),
    );
    assert_eq!(post.status, 410, "{}", post.body);
    let r = a.call(
        "turn/permission/request/respond",
        json!({"request_id": id, "resolution": "allow_once"}),
    );
    assert_eq!(r, json!({"resolution": "expired", "applied": false}));
}

/// The webhook receiver drops the first two connections (down), then answers 200: exactly one
/// POST per opened request arrives, and nothing is approved by any of it.
#[test]
fn the_webhook_gets_one_post_per_request_after_two_failed_attempts() {
    let receiver = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let port = receiver.local_addr().map(|a| a.port()).unwrap_or_default();
    let (tx, rx) = mpsc::channel::<(String, Value)>();
    std::thread::spawn(move || {
        let mut n = 0;
        for stream in receiver.incoming() {
            let Ok(mut s) = stream else { continue };
            n += 1;
            if n <= 2 {
                drop(s); // down: the connection is closed unanswered
                continue;
            }
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            let body = loop {
                let Ok(k) = s.read(&mut chunk) else {
                    break None;
                };
                if k == 0 {
                    break None;
                }
                buf.extend_from_slice(&chunk[..k]);
                let text = String::from_utf8_lossy(&buf).into_owned();
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let len = head
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                        })
                        .unwrap_or(0);
                    if body.len() >= len {
                        break Some((head.to_owned(), body.to_owned()));
                    }
                }
            };
            let _ =
                s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
            if let Some((head, body)) = body {
                let _ = tx.send((head, serde_json::from_str(&body).unwrap_or_default()));
            }
        }
    });
    let dir = tmp();
    let hook = format!("http://127.0.0.1:{port}/hook");
    let (_server, mut a) = start(
        dir.path(),
        true,
        &["--notify-webhook", &hook, "--notify-retry-ms", "100"],
    );
    start_turn(&mut a, dir.path(), "t6");
    let r1 = a.call(
        "turn/action/authorize",
        json!({"turn_id": "t6", "kind": "shell_command", "target": "terraform apply", "wait": false}),
    );
    let (head, got) = rx
        .recv_timeout(TIMEOUT)
        .unwrap_or_else(|e| panic!("no webhook POST: {e}"));
    assert!(head.starts_with("POST /hook "), "{head}");
    assert_eq!(got["request"]["id"], r1["request_id"]);
    assert_eq!(got["approve_url"], r1["approve_url"]);
    assert_eq!(got["deny_url"], r1["deny_url"]);
    let r2 = a.call(
        "turn/action/authorize",
        json!({"turn_id": "t6", "kind": "shell_command", "target": "terraform destroy", "wait": false}),
    );
    let (_, got2) = rx
        .recv_timeout(TIMEOUT)
        .unwrap_or_else(|e| panic!("no second POST: {e}"));
    assert_eq!(got2["request"]["id"], r2["request_id"]);
    // Exactly one each, and the requests are still pending: a webhook never approves.
    assert!(
        rx.recv_timeout(Duration::from_millis(800)).is_err(),
        "a duplicate POST"
    );
    let pending = a.call("turn/permission/requests/list", json!({"turn_id": "t6"}));
    assert_eq!(pending["requests"].as_array().map(Vec::len), Some(2));
}

#[test]
fn a_failing_webhook_never_approves() {
    let dir = tmp();
    // Nothing listens on this port.
    let hook = format!("http://127.0.0.1:{}/hook", free_port());
    let (_server, mut a) = start(
        dir.path(),
        false,
        &[
            "--notify-webhook",
            &hook,
            "--notify-retry-ms",
            "50",
            "--notify-attempts",
            "3",
        ],
    );
    start_turn(&mut a, dir.path(), "t7");
    let r = a.call(
        "turn/action/authorize",
        json!({"turn_id": "t7", "kind": "shell_command", "target": "shutdown", "wait": false}),
    );
    std::thread::sleep(Duration::from_millis(600));
    let pending = a.call("turn/permission/requests/list", json!({"turn_id": "t7"}));
    assert_eq!(pending["requests"][0]["request"]["id"], r["request_id"]);
}

#[test]
fn a_respond_for_a_scope_that_changed_is_refused() {
    let dir = tmp();
    let (_server, mut a) = start(dir.path(), false, &[]);
    start_turn(&mut a, dir.path(), "t8");
    let r = a.call(
        "turn/action/authorize",
        json!({"turn_id": "t8", "kind": "shell_command", "target": "npm publish", "wait": false}),
    );
    let id = r["request_id"].clone();
    let scope = r["request"]["scope_hash"].clone();
    let err = a.call_err(
        "turn/permission/request/respond",
        json!({"request_id": id, "resolution": "allow_once", "scope_hash": "0".repeat(64)}),
    );
    assert_eq!(err["code"], -32003);
    let ok = a.call(
        "turn/permission/request/respond",
        json!({"request_id": id, "resolution": "allow_once", "scope_hash": scope}),
    );
    assert_eq!(ok, json!({"resolution": "allow_once", "applied": true}));
}

/// A client that disconnects while its authorize waits: the request stays pending (durable),
/// and another client can still answer it.
#[test]
fn a_client_that_disconnects_leaves_its_request_pending() {
    let dir = tmp();
    let (server, mut a) = start(dir.path(), false, &[]);
    start_turn(&mut a, dir.path(), "t9");
    {
        let mut b = Client::socket(&server.dir.join("serve.sock"));
        b.send(
            "turn/action/authorize",
            json!({"turn_id": "t9", "kind": "shell_command", "target": "make release"}),
        );
        b.note("turn/permission/request/opened", |_| true);
    } // b hangs up here
    std::thread::sleep(Duration::from_millis(300));
    let pending = a.call("turn/permission/requests/list", json!({"turn_id": "t9"}));
    let id = pending["requests"][0]["request"]["id"].clone();
    assert!(id.is_string(), "{pending}");
    let r = a.call(
        "turn/permission/request/respond",
        json!({"request_id": id, "resolution": "allow_once"}),
    );
    assert_eq!(r, json!({"resolution": "allow_once", "applied": true}));
}

/// `turn/spawn`: the command asks, is approved once from another client, and runs under the
/// turn's sandbox exactly as shown.
#[test]
fn turn_spawn_waits_for_the_approval_then_runs_the_command() {
    let dir = tmp();
    let (server, mut a) = start(dir.path(), false, &[]);
    let mut b = Client::socket(&server.dir.join("serve.sock"));
    start_turn(&mut a, dir.path(), "t10");
    let spawn = a.send(
        "turn/spawn",
        json!({"turn_id": "t10", "command_line": "echo served"}),
    );
    let o = b.note("turn/permission/request/opened", |_| true);
    assert_eq!(o["request"]["details"]["target"], "echo served");
    b.call(
        "turn/permission/request/respond",
        json!({"request_id": o["request"]["id"], "resolution": "allow_once"}),
    );
    let ran = a.response(spawn);
    assert_eq!(ran["result"]["outcome"], "ran", "{ran}");
    assert_eq!(ran["result"]["exit_code"], 0, "{ran}");
    assert_eq!(ran["result"]["stdout"], "served\n", "{ran}");
    // A denied spawn does not run.
    let spawn = a.send(
        "turn/spawn",
        json!({"turn_id": "t10", "command_line": "echo nope"}),
    );
    let o = b.note("turn/permission/request/opened", |_| true);
    b.call(
        "turn/permission/request/respond",
        json!({"request_id": o["request"]["id"], "resolution": "deny"}),
    );
    let denied = a.response(spawn);
    assert_eq!(denied["result"]["outcome"], "denied", "{denied}");
}

/// A request resolved by another process on the same store (`turngate approvals resolve`)
/// wakes the waiting authorize too.
#[test]
fn a_resolution_from_another_process_on_the_store_reaches_the_waiting_call() {
    let dir = tmp();
    let (_server, mut a) = start(dir.path(), false, &[]);
    start_turn(&mut a, dir.path(), "t11");
    let waiting = a.send(
        "turn/action/authorize",
        json!({"turn_id": "t11", "kind": "shell_command", "target": "make docs"}),
    );
    let o = a.note("turn/permission/request/opened", |_| true);
    let id = o["request"]["id"].as_str().unwrap_or_default().to_owned();
    let out = Command::new(bin())
        .args(["approvals", "resolve", &id, "allow_once", "--store"])
        .arg(dir.path().join("audit.db"))
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.status.success(), "{out:?}");
    let allowed = a.response(waiting);
    assert_eq!(allowed["result"]["outcome"], "allowed", "{allowed}");
    // Clients are told, once.
    let res = a.note("turn/permission/request/resolved", |p| {
        p["request_id"] == id.as_str()
    });
    assert_eq!(res["resolution"], "allow_once");
    a.drain_for(Duration::from_millis(1200));
    assert!(
        !a.notes
            .iter()
            .any(|n| n["method"] == "turn/permission/request/resolved"),
        "resolved twice: {:?}",
        a.notes
    );
}

/// `--watch-store`: a `turngate run --approver defer` on the same store is announced to the
/// server's clients (with links), answered through the server, and the run goes ahead.
#[test]
fn watch_store_announces_another_processs_deferred_request() {
    let dir = tmp();
    let (_server, mut a) = start(dir.path(), true, &["--watch-store"]);
    let ws = workspace(dir.path());
    let run = Command::new(bin())
        .args([
            "run",
            "--mode",
            "supervised",
            "--approver",
            "defer",
            "--store",
        ])
        .arg(dir.path().join("audit.db"))
        .arg("--workspace")
        .arg(&ws)
        .args(["--", "echo", "from-run"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let o = a.note("turn/permission/request/opened", |p| {
        p["request"]["details"]["target"] == "echo from-run"
    });
    assert!(o["approve_url"].is_string(), "{o}");
    let r = a.call(
        "turn/permission/request/respond",
        json!({"request_id": o["request"]["id"], "resolution": "allow_once"}),
    );
    assert_eq!(r["applied"], true);
    let out = run.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "from-run\n");
}

/// A turn file that cannot be restored (garbage, or naming another turn) does not keep the
/// server down: it is not live, the others are; a turn whose workspace vanished fails closed.
#[test]
fn a_turn_that_cannot_be_restored_is_skipped_not_fatal() {
    let dir = tmp();
    let (mut server, mut a) = start(dir.path(), false, &[]);
    start_turn(&mut a, dir.path(), "ok");
    let gone = dir.path().join("gone");
    std::fs::create_dir_all(&gone).unwrap_or_else(|e| panic!("{e}"));
    a.call(
        "turn/start",
        json!({"turn_id": "gone", "profile": {"mode": "supervised"}, "workspace": gone}),
    );
    server.child.kill().unwrap_or_else(|e| panic!("{e}"));
    let _ = server.child.wait();
    drop(server);
    std::fs::remove_dir_all(&gone).unwrap_or_else(|e| panic!("{e}"));
    let turns = dir.path().join("state/turns");
    std::fs::write(turns.join("junk.json"), b"{not json").unwrap_or_else(|e| panic!("{e}"));
    let ok = std::fs::read_to_string(turns.join("ok.json")).unwrap_or_default();
    std::fs::write(turns.join("other.json"), ok).unwrap_or_else(|e| panic!("{e}"));

    let (_server, mut a) = start(dir.path(), false, &[]);
    let r = a.call(
        "turn/action/authorize",
        json!({"turn_id": "ok", "kind": "shell_command", "target": "ls", "wait": false}),
    );
    assert_eq!(r["outcome"], "deferred");
    // The turn whose workspace vanished is restored, and fails closed: its calls are denied.
    let denied = a.call(
        "turn/action/authorize",
        json!({"turn_id": "gone", "kind": "shell_command", "target": "ls", "wait": false}),
    );
    assert_eq!(denied["outcome"], "denied", "{denied}");
    // The file that named another turn was not restored under either name.
    let e = a.call_err(
        "turn/action/authorize",
        json!({"turn_id": "other", "kind": "shell_command", "target": "ls", "wait": false}),
    );
    assert_eq!(e["code"], -32001);
}

/// A command run by `turn/spawn` inherits none of the server's descriptors (its socket,
/// its HTTP listener, its clients' connections, the store): only stdin, stdout and stderr.
#[test]
fn a_spawned_command_inherits_no_server_descriptor() {
    let dir = tmp();
    let (server, mut a) = start(dir.path(), true, &[]);
    let mut b = Client::socket(&server.dir.join("serve.sock"));
    start_turn(&mut a, dir.path(), "t12");
    let spawn = a.send(
        "turn/spawn",
        json!({"turn_id": "t12", "command_line": PROBE_FDS}),
    );
    let o = b.note("turn/permission/request/opened", |_| true);
    b.call(
        "turn/permission/request/respond",
        json!({"request_id": o["request"]["id"], "resolution": "allow_once"}),
    );
    let ran = a.response(spawn);
    assert_eq!(ran["result"]["exit_code"], 0, "{ran}");
    let open = ran["result"]["stdout"]
        .as_str()
        .unwrap_or_default()
        .trim()
        .to_owned();
    assert_eq!(
        open, "[]",
        "descriptors open in the command besides 0-2: {open}"
    );
}

/// Prints the descriptors from 3 up that are open (fstat succeeds).
const PROBE_FDS: &str = "/usr/bin/python3 -c 'import os\nopen_fds = []\nfor f in range(3, 4096):\n    try:\n        os.fstat(f)\n        open_fds.append(f)\n    except OSError:\n        pass\nprint(open_fds)'";

#[test]
fn a_remote_bind_with_allow_remote_prints_a_warning() {
    let dir = tmp();
    let mut child = Command::new(bin())
        .args([
            "serve",
            "--no-stdio",
            "--allow-remote",
            "--http",
            "0.0.0.0:0",
            "--state-dir",
        ])
        .arg(dir.path().join("state"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let stderr = child.stderr.take().unwrap_or_else(|| panic!("stderr"));
    let mut warned = false;
    for line in BufReader::new(stderr).lines() {
        let line = line.unwrap_or_default();
        if line.contains("WARNING") && line.contains("reachable from other machines") {
            warned = true;
        }
        if line.contains("http listening on") {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(warned, "no warning for a non-loopback bind");
}

/// `turn/start` with a policy: its rules apply to the turn (an allow runs without asking, a
/// deny is denied without a prompt), and a malformed policy is invalid params.
#[test]
fn turn_start_takes_a_policy() {
    let dir = tmp();
    let (_server, mut a) = start(dir.path(), false, &[]);
    let policy = json!({"layers": [{"name": "team", "rules": [
        {"kind": "shell_command", "effect": "allow", "pattern": "git status"},
        {"kind": "shell_command", "effect": "deny", "pattern": "curl"},
    ]}]});
    a.call(
        "turn/start",
        json!({"turn_id": "p1", "profile": {"mode": "supervised"}, "workspace": workspace(dir.path()), "policy": policy}),
    );
    let ok = a.call(
        "turn/action/authorize",
        json!({"turn_id": "p1", "kind": "shell_command", "target": "git status"}),
    );
    assert_eq!(ok["outcome"], "allowed", "{ok}");
    let no = a.call(
        "turn/action/authorize",
        json!({"turn_id": "p1", "kind": "shell_command", "target": "curl example.com"}),
    );
    assert_eq!(no["outcome"], "denied", "{no}");
    a.drain_for(Duration::from_millis(200));
    assert!(
        !a.notes
            .iter()
            .any(|n| n["method"] == "turn/permission/request/opened")
    );
    let bad = a.call_err(
        "turn/start",
        json!({"turn_id": "p2", "workspace": workspace(dir.path()), "policy": {"layers": [{"name": "x", "rules": [{"kind": "nope"}]}]}}),
    );
    assert_eq!(bad["code"], -32602);
}

/// The approval page shows what would hide or reorder text escaped (a carriage return, a
/// right-to-left override): what the button approves is what the page shows.
#[test]
fn the_approval_page_shows_hidden_characters_escaped() {
    let dir = tmp();
    let (server, mut a) = start(dir.path(), true, &[]);
    let port = server.http.unwrap_or_default();
    start_turn(&mut a, dir.path(), "t13");
    let target = "echo hi #\r\u{202e}git status";
    let r = a.call(
        "turn/action/authorize",
        json!({"turn_id": "t13", "kind": "shell_command", "target": target, "wait": false}),
    );
    assert_eq!(r["outcome"], "deferred", "{r}");
    let page = http(
        port,
        "GET",
        &path_of(r["approve_url"].as_str().unwrap_or_default()),
        &[],
        b"",
    );
    assert_eq!(page.status, 200);
    assert!(
        page.body.contains(r"echo hi #\r\u{202e}git status"),
        "{}",
        page.body
    );
    assert!(
        !page.body.contains('\u{202e}') && !page.body.contains('\r'),
        "{}",
        page.body
    );
}

#[test]
fn a_turn_whose_roots_hold_the_state_dir_is_refused() {
    // Red team 5: with `--state-dir` in the workspace, a sandboxed command read the token and
    // rewrote the turn's grants and snapshot, which a restart trusted.
    let dir = tmp();
    let (_server, mut a) = start(dir.path(), false, &[]);
    let r = a.call_err(
        "turn/start",
        json!({"turn_id": "t1", "profile": {"mode": "auto_accept_edits"}, "workspace": dir.path()}),
    );
    let message = r["message"].as_str().unwrap_or_default().to_owned();
    assert!(message.contains("state dir lies in the turn's root"), "{r}");
    // A workspace beside it is fine.
    let ok = start_turn(&mut a, dir.path(), "t2");
    assert_eq!(ok["turn_id"], "t2", "{ok}");
}

#[test]
fn a_state_dir_made_by_another_user_is_refused() {
    // Red team 5: another user made the state dir first, with a token of its own, and used
    // that token to run a command as the server's user.
    let dir = tmp();
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::chown(&state, Some(65534), Some(65534)).unwrap_or_else(|e| panic!("{e}"));
    let out = Command::new(bin())
        .args(["serve", "--no-stdio", "--socket"])
        .arg(dir.path().join("s.sock"))
        .arg("--state-dir")
        .arg(&state)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("not a directory owned by this user"),
        "{stderr}"
    );
    assert!(!state.join("token").exists());
}

#[test]
fn approval_links_through_a_tunnel_keep_working_from_the_links_own_origin() {
    // A phone opens `--approval-url`'s host through a tunnel: that Host and that Origin are
    // the links' own; any other origin is still refused.
    let dir = tmp();
    let port = free_port();
    let mut child = Command::new(bin())
        .args([
            "serve",
            "--no-stdio",
            "--http",
            &format!("127.0.0.1:{port}"),
        ])
        .args(["--approval-url", "https://phone.example"])
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .stdin(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let deadline = Instant::now() + TIMEOUT;
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "serve never bound its port");
        std::thread::sleep(Duration::from_millis(20));
    }
    let get = "GET /approvals/nope?action=approve&token=x HTTP/1.1";
    let tunnel = [
        "host: phone.example".to_owned(),
        "origin: https://phone.example".to_owned(),
    ];
    // The page answers (an invalid link here: 403 "Invalid link"), not the guard.
    let answer = raw_request(port, get, &tunnel, b"");
    assert!(
        answer.contains("Invalid link") && !answer.contains("cross-origin"),
        "the tunnel's request was refused by the guard: {answer}"
    );
    // The API behind the same tunnel still refuses another origin.
    let evil = [
        "host: phone.example".to_owned(),
        "origin: https://evil.example".to_owned(),
    ];
    assert!(
        raw_request(port, "GET / HTTP/1.1", &evil, b"")
            .contains("cross-origin requests are refused")
    );
    let rebound = ["host: evil.example".to_owned()];
    assert_eq!(raw_status(port, get, &rebound, b""), 421);
    let _ = child.kill();
    let _ = child.wait();
}
