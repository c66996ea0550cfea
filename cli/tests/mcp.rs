//! End to end through `turngate mcp wrap`: a real MCP server (a small stdlib Python server,
//! `fixtures/mcp_server.py`) run under the sandbox, driven over its stdio by this test as the
//! client. Each attack asserts what the client got, what the server saw (it logs every
//! message it receives to stderr, which the wrap forwards), and what the audit log recorded.
//! The official SDKs' end-to-end tests are in `tests/mcp/` (run by `scripts/test-mcp`).

#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(target_os = "linux")]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

mod common;
use common::test_user;

const SERVER: &str = include_str!("fixtures/mcp_server.py");
const PYTHON: &str = "/usr/bin/python3";
const WAIT: Duration = Duration::from_secs(30);

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_turngate")
}

struct Wrap {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Arc<Mutex<String>>,
    stderr_done: Option<std::thread::JoinHandle<()>>,
    ws: tempfile::TempDir,
    state: tempfile::TempDir,
    notifications: Vec<Value>,
}

/// What a wrap session left: its exit status, the audit events it recorded, and its whole
/// stderr (the server's lines included), read to its end.
struct Finished {
    status: Option<i32>,
    events: Vec<Value>,
    stderr: String,
}

impl Finished {
    /// The server received a `tools/call` of `tool` (with `needle` in it, when given).
    fn server_saw_call(&self, tool: &str, needle: Option<&str>) -> bool {
        self.stderr.lines().any(|l| {
            l.strip_prefix("SERVER-SAW ")
                .filter(|j| needle.is_none_or(|n| j.contains(n)))
                .and_then(|j| serde_json::from_str::<Value>(j).ok())
                .is_some_and(|m| m["method"] == "tools/call" && m["params"]["name"] == tool)
        })
    }

    fn events_for(&self, target: &str) -> Vec<&Value> {
        self.events
            .iter()
            .filter(|e| e["target"] == target)
            .collect()
    }
}

fn policy_allowing_the_server(dir: &Path) -> PathBuf {
    let p = dir.join("policy.json");
    std::fs::write(
        &p,
        json!({"layers": [{"name": "mcp-test", "rules": [
            {"kind": "shell_command", "effect": "allow", "pattern": "python3"}]}]})
        .to_string(),
    )
    .unwrap();
    p
}

impl Wrap {
    fn start(mode: &str, approver: &str, extra: &[&str], env: &[(&str, &str)]) -> Wrap {
        Self::start_as(None, mode, approver, extra, env)
    }

    /// [`Wrap::start`], run as `ids` (uid, gid) through `setpriv` when given.
    fn start_as(
        ids: Option<(u32, u32)>,
        mode: &str,
        approver: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Wrap {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("server.py"), SERVER).unwrap();
        let policy = policy_allowing_the_server(state.path());
        let mut cmd = match ids {
            Some((uid, gid)) => {
                for path in [
                    ws.path().to_path_buf(),
                    ws.path().join("server.py"),
                    state.path().to_path_buf(),
                    policy.clone(),
                ] {
                    std::os::unix::fs::chown(&path, Some(uid), Some(gid)).unwrap();
                }
                let mut cmd = Command::new("setpriv");
                cmd.arg(format!("--reuid={uid}"))
                    .arg(format!("--regid={gid}"))
                    .arg("--clear-groups")
                    .arg("--")
                    .arg(bin());
                cmd
            }
            None => Command::new(bin()),
        };
        cmd.args([
            "mcp",
            "wrap",
            "--name",
            "fx",
            "--mode",
            mode,
            "--approver",
            approver,
        ])
        .arg("--workspace")
        .arg(ws.path())
        .arg("--store")
        .arg(state.path().join("audit.db"))
        .arg("--policy")
        .arg(&policy)
        .args(extra)
        .arg("--")
        .arg(PYTHON)
        .arg(ws.path().join("server.py"))
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = stderr.clone();
        let mut err = child.stderr.take().unwrap();
        let stderr_done = std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Wrap {
            stdin: child.stdin.take(),
            child,
            lines,
            stderr,
            stderr_done: Some(stderr_done),
            ws,
            state,
            notifications: Vec::new(),
        }
    }

    fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn send(&mut self, v: Value) {
        self.send_raw(&v.to_string());
    }

    fn recv(&self) -> Value {
        match self.lines.recv_timeout(WAIT) {
            Ok(line) => serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}")),
            Err(RecvTimeoutError::Timeout) => {
                panic!("no message in {WAIT:?}; stderr:\n{}", self.stderr())
            }
            Err(RecvTimeoutError::Disconnected) => {
                panic!("the wrap closed its stdout; stderr:\n{}", self.stderr())
            }
        }
    }

    /// The response to `id`, keeping the notifications that came before it.
    fn response(&mut self, id: &Value) -> Value {
        loop {
            let m = self.recv();
            if m.get("id") == Some(id) && m.get("method").is_none() {
                return m;
            }
            assert!(
                m.get("id").is_none(),
                "a response to an id the client never sent reached it: {m}"
            );
            self.notifications.push(m);
        }
    }

    fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.response(&json!(id))
    }

    fn call(&mut self, id: u64, tool: &str, args: Value) -> Value {
        self.request(id, "tools/call", json!({"name": tool, "arguments": args}))
    }

    fn initialize(&mut self) {
        let r = self.request(
            1,
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "test", "version": "1"}}),
        );
        assert!(r.get("result").is_some(), "{r}");
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    }

    fn list(&mut self, id: u64) -> Value {
        let r = self.request(id, "tools/list", json!({}));
        assert!(r["result"]["tools"].is_array(), "{r}");
        r
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Close the client's side (unless the wrap is gone already), wait for the wrap to exit
    /// and read its stderr to the end.
    fn finish(mut self) -> Finished {
        drop(self.stdin.take());
        let status = wait_timeout(&mut self.child, WAIT);
        if let Some(t) = self.stderr_done.take() {
            t.join().unwrap();
        }
        Finished {
            status,
            events: events(&self.state.path().join("audit.db")),
            stderr: self.stderr(),
        }
    }
}

fn wait_timeout(child: &mut Child, limit: Duration) -> Option<i32> {
    let start = std::time::Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("the wrap did not exit in {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every audit event of the store's turns, as JSON.
fn events(store: &Path) -> Vec<Value> {
    use turngate::audit::AuditStore;
    let store = turngate::audit::SqliteAuditStore::open_existing(store).unwrap();
    let mut all = Vec::new();
    for turn in store.turns().unwrap() {
        for e in store.replay(&turn).unwrap() {
            all.push(serde_json::to_value(&e).unwrap());
        }
    }
    all
}

fn refused_text(r: &Value) -> String {
    assert_eq!(
        r["result"]["isError"],
        json!(true),
        "not a refused call: {r}"
    );
    r["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn python_available() -> bool {
    Path::new(PYTHON).exists()
}

#[test]
fn a_read_tool_runs_and_a_write_tool_asks_and_is_denied_without_reaching_the_server() {
    if !python_available() {
        eprintln!("skipped: no {PYTHON}");
        return;
    }
    let mut w = Wrap::start("auto_accept_edits", "deny", &[], &[]);
    w.initialize();
    w.list(2);
    let r = w.call(3, "echo", json!({"text": "hello"}));
    assert_eq!(r["result"]["content"][0]["text"], "hello", "{r}");
    let target = w.ws.path().join("out.txt");
    let r = w.call(4, "write", json!({"path": target, "content": "x"}));
    let text = refused_text(&r);
    assert!(text.contains("Permission denied by turngate"), "{text}");
    assert!(!target.exists(), "a denied write reached the disk");
    let f = w.finish();
    assert!(
        !f.server_saw_call("write", None),
        "the server saw a denied call"
    );
    assert!(f.server_saw_call("echo", None));
    let echo = f.events_for("fx/echo");
    assert!(
        echo.iter().any(|e| e["action_kind"] == "mcp_read"
            && e["kind"] == "decision_allowed"
            && e["tool_name"] == "echo"),
        "{:#?}",
        f.events
    );
    let write = f.events_for("fx/write");
    assert!(
        write
            .iter()
            .any(|e| e["action_kind"] == "mcp_write_or_unknown"
                && e["kind"] == "approval_requested"
                && e["tool_name"] == "write"),
        "{:#?}",
        f.events
    );
    assert!(
        write.iter().any(|e| e["kind"] == "decision_denied"),
        "{:#?}",
        f.events
    );
}

#[test]
fn a_changed_description_asks_again_with_tool_definition_changed() {
    if !python_available() {
        return;
    }
    let mut w = Wrap::start("auto_accept_edits", "deny", &[], &[("MODE", "change")]);
    w.initialize();
    w.list(2);
    let r = w.call(3, "echo", json!({"text": "before"}));
    assert_eq!(r["result"]["content"][0]["text"], "before", "{r}");
    w.list(4);
    let r = w.call(5, "echo", json!({"text": "after"}));
    refused_text(&r);
    let f = w.finish();
    assert!(f.server_saw_call("echo", Some("before")));
    assert!(
        !f.server_saw_call("echo", Some("after")),
        "the changed tool ran"
    );
    let asked: Vec<_> = f
        .events_for("fx/echo")
        .into_iter()
        .filter(|e| e["kind"] == "approval_requested")
        .collect();
    assert_eq!(asked.len(), 1, "{:#?}", f.events);
    assert_eq!(
        asked[0]["reason"], "tool_definition_changed",
        "{:#?}",
        f.events
    );
    assert_eq!(
        asked[0]["action_kind"], "mcp_write_or_unknown",
        "{:#?}",
        f.events
    );
}

#[test]
fn a_tool_that_drops_its_read_only_hint_is_no_longer_a_read() {
    if !python_available() {
        return;
    }
    let mut w = Wrap::start("auto_accept_edits", "deny", &[], &[("MODE", "annotations")]);
    w.initialize();
    w.list(2);
    w.list(3);
    let r = w.call(4, "echo", json!({"text": "x"}));
    refused_text(&r);
    let f = w.finish();
    assert!(!f.server_saw_call("echo", None));
    let asked: Vec<_> = f
        .events_for("fx/echo")
        .into_iter()
        .filter(|e| e["kind"] == "approval_requested")
        .collect();
    assert_eq!(
        asked[0]["reason"], "tool_definition_changed",
        "{:#?}",
        f.events
    );
}

#[test]
fn a_tool_the_last_listing_did_not_name_is_write_or_unknown() {
    if !python_available() {
        return;
    }
    let mut w = Wrap::start("auto_accept_edits", "deny", &[], &[]);
    w.initialize();
    // Before any listing, even the read-only `echo` is unknown.
    let r = w.call(2, "echo", json!({"text": "unlisted"}));
    refused_text(&r);
    w.list(3);
    let r = w.call(4, "ghost", json!({}));
    refused_text(&r);
    let f = w.finish();
    assert!(!f.server_saw_call("ghost", None) && !f.server_saw_call("echo", None));
    for target in ["fx/echo", "fx/ghost"] {
        let first = f.events_for(target)[0];
        assert_eq!(
            first["action_kind"], "mcp_write_or_unknown",
            "{:#?}",
            f.events
        );
    }
}

#[test]
fn protocol_attacks_are_refused_before_the_server() {
    if !python_available() {
        return;
    }
    let mut w = Wrap::start(
        "auto_accept_edits",
        "allow",
        &["--max-message-bytes", "1048576"],
        &[],
    );
    // A request before initialize.
    let r = w.call(1, "write", json!({"path": "early.txt"}));
    assert_eq!(r["error"]["code"], -32002, "{r}");
    w.initialize();
    w.list(2);
    // A batch carrying a tools/call.
    w.send_raw(
        &json!([{"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                 "params": {"name": "write", "arguments": {"path": "batched.txt"}}}])
        .to_string(),
    );
    let r = w.recv();
    assert_eq!(r[0]["id"], 3, "{r}");
    assert_eq!(r[0]["error"]["code"], -32600, "{r}");
    // Names that could alias another target.
    for (id, name) in [(4, "../write"), (5, "fx/write"), (6, ".."), (7, "wr*te")] {
        let r = w.call(id, name, json!({"path": "aliased.txt"}));
        let text = refused_text(&r);
        assert!(text.contains("not a valid MCP tool name"), "{name}: {text}");
    }
    // Not JSON, a duplicate member, an id in flight twice.
    w.send_raw("{\"jsonrpc\": \"2.0\", \"id\": 8, \"method\": ");
    assert_eq!(w.recv()["error"]["code"], -32700);
    w.send_raw(r#"{"jsonrpc":"2.0","id":9,"method":"ping","method":"tools/call","params":{"name":"write","arguments":{"path":"dup.txt"}}}"#);
    assert_eq!(w.recv()["error"]["code"], -32600);
    // A line over the limit is refused, and the session goes on.
    let big = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"tools/call\",\"params\":{{\"name\":\"write\",\"arguments\":{{\"path\":\"big.txt\",\"content\":\"{}\"}}}}}}",
        "y".repeat(2 << 20)
    );
    w.send_raw(&big);
    let r = w.recv();
    assert_eq!(r["error"]["code"], -32600, "{r}");
    let r = w.request(11, "ping", json!({}));
    assert!(r.get("result").is_some(), "{r}");
    for f in [
        "early.txt",
        "batched.txt",
        "aliased.txt",
        "dup.txt",
        "big.txt",
    ] {
        assert!(!w.ws.path().join(f).exists(), "{f} was written");
    }
    let f = w.finish();
    assert!(
        !f.server_saw_call("write", None),
        "a refused write reached the server"
    );
    assert_eq!(f.status, Some(0), "{}", f.stderr);
}

#[test]
fn a_response_to_an_id_nobody_sent_is_dropped_and_notifications_pass() {
    if !python_available() {
        return;
    }
    let mut w = Wrap::start("auto_accept_edits", "deny", &[], &[]);
    w.initialize();
    w.list(2);
    // `response` panics on a response to an id the client did not send.
    let r = w.call(3, "stray", json!({}));
    assert_eq!(r["result"]["content"][0]["text"], "stray done", "{r}");
    let r = w.call(4, "chatty", json!({}));
    assert_eq!(r["result"]["content"][0]["text"], "chatty done", "{r}");
    let notes: Vec<_> = w
        .notifications
        .iter()
        .filter(|n| n["method"] == "notifications/message")
        .collect();
    assert_eq!(notes.len(), 3, "{:?}", w.notifications);
    let f = w.finish();
    assert!(f.stderr.contains("never sent"), "{}", f.stderr);
}

#[test]
fn the_server_exiting_mid_call_is_an_error_not_a_hang() {
    if !python_available() {
        return;
    }
    let mut w = Wrap::start("auto_accept_edits", "deny", &[], &[]);
    w.initialize();
    w.list(2);
    let r = w.call(3, "die", json!({}));
    assert_eq!(r["error"]["code"], -32603, "{r}");
    let status = wait_timeout(&mut w.child, WAIT);
    assert_eq!(status, Some(3), "the wrap exits with the server's status");
}

#[test]
fn a_server_line_over_the_limit_fails_the_waiting_call() {
    if !python_available() {
        return;
    }
    let mut w = Wrap::start(
        "auto_accept_edits",
        "deny",
        &["--max-message-bytes", "1048576"],
        &[],
    );
    w.initialize();
    w.list(2);
    let r = w.call(3, "huge", json!({}));
    assert_eq!(r["error"]["code"], -32603, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("longer than"),
        "{r}"
    );
    wait_timeout(&mut w.child, WAIT);
}

#[test]
fn the_server_cannot_read_outside_its_sandbox_even_when_asked() {
    if !python_available() {
        return;
    }
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "TOPSECRET").unwrap();
    let report = outside.path().join("report.json");
    let report_arg = report.to_str().unwrap().to_owned();
    let mut w = Wrap::start(
        "auto_accept_edits",
        "allow",
        &["--sandbox-report", &report_arg],
        &[],
    );
    w.initialize();
    w.list(2);
    // `where` does not say it is a path: the value is a guessed one, whose ask the approver
    // allows, so only the sandbox stands in the way.
    let r = w.call(3, "peek", json!({"where": secret}));
    let text = r["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(text.starts_with("peek failed"), "{r}");
    // A file inside the workspace is readable.
    std::fs::write(w.ws.path().join("inside.txt"), "fine").unwrap();
    let r = w.call(4, "peek", json!({"where": w.ws.path().join("inside.txt")}));
    assert_eq!(r["result"]["content"][0]["text"], "CONTENT fine", "{r}");
    // A path argument outside the roots is refused by the file checker first.
    let r = w.call(
        5,
        "write",
        json!({"path": outside.path().join("planted.txt")}),
    );
    let text = refused_text(&r);
    assert!(
        text.contains("outside_roots") || text.contains("outside"),
        "{text}"
    );
    assert!(!outside.path().join("planted.txt").exists());
    let f = w.finish();
    assert!(
        f.server_saw_call("peek", Some("secret.txt")),
        "this call was meant to reach the server"
    );
    assert!(!f.server_saw_call("write", None));
    // The server ran sandboxed, and the report says with what.
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_ne!(report["status"], "unavailable", "{report}");
    println!("sandbox report: {report}");
}

#[test]
fn a_refused_server_command_does_not_start_and_says_why() {
    if !python_available() {
        return;
    }
    let ws = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("server.py"), SERVER).unwrap();
    // No policy allowing python3: supervised asks, and the deny approver refuses.
    let out = Command::new(bin())
        .args([
            "mcp",
            "wrap",
            "--name",
            "fx",
            "--approver",
            "deny",
            "--workspace",
        ])
        .arg(ws.path())
        .arg("--store")
        .arg(state.path().join("audit.db"))
        .arg("--")
        .arg(PYTHON)
        .arg(ws.path().join("server.py"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(126), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("server's command was refused"), "{stderr}");
    assert!(!stderr.contains("SERVER-SAW"), "{stderr}");
}

#[test]
fn a_read_root_that_is_the_stores_directory_refuses_the_server() {
    // Red team F4: with `--read DIR` and the store in DIR, the server read the whole audit
    // log (earlier arguments and approvals). The store's directory cannot be hidden when it
    // is the root itself, so the server does not start.
    if !python_available() {
        return;
    }
    let ws = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("server.py"), SERVER).unwrap();
    let policy = policy_allowing_the_server(ws.path());
    let out = Command::new(bin())
        .args(["mcp", "wrap", "--name", "fx", "--mode", "auto_accept_edits"])
        .args(["--approver", "allow", "--workspace"])
        .arg(ws.path())
        .arg("--policy")
        .arg(&policy)
        .arg("--read")
        .arg(state.path())
        .arg("--store")
        .arg(state.path().join("audit.db"))
        .arg("--")
        .arg(PYTHON)
        .arg(ws.path().join("server.py"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("audit store") && stderr.contains(&state.path().display().to_string()),
        "{stderr}"
    );
}

#[test]
fn a_deferred_call_waits_for_its_resolution_while_the_session_goes_on() {
    if !python_available() {
        return;
    }
    let mut w = Wrap::start("auto_accept_edits", "defer", &[], &[]);
    w.initialize();
    w.list(2);
    let target = w.ws.path().join("deferred.txt");
    w.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                  "params": {"name": "write", "arguments": {"path": target, "content": "ok"}}}));
    // The session answers other requests while the call waits for a person.
    let r = w.request(4, "ping", json!({}));
    assert!(r.get("result").is_some(), "{r}");
    let store = w.state.path().join("audit.db");
    let start = std::time::Instant::now();
    let request_id = loop {
        let out = Command::new(bin())
            .args(["approvals", "list", "--json", "--store"])
            .arg(&store)
            .output()
            .unwrap();
        let pending: Value = serde_json::from_slice(&out.stdout).unwrap_or(json!([]));
        if let Some(id) = pending[0]["request"]["id"].as_str() {
            break id.to_owned();
        }
        assert!(start.elapsed() < WAIT, "no pending request");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(!target.exists(), "the call ran before it was approved");
    let out = Command::new(bin())
        .args(["approvals", "resolve", &request_id, "allow_once", "--store"])
        .arg(&store)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let r = w.response(&json!(3));
    assert_eq!(r["result"]["isError"], json!(false), "{r}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "ok");
    let f = w.finish();
    assert_eq!(
        f.events_for("fx/write")
            .iter()
            .filter(|e| e["kind"] == "approval_requested")
            .count(),
        1
    );
}

#[test]
fn a_second_request_with_an_id_in_flight_is_refused() {
    if !python_available() {
        return;
    }
    let mut w = Wrap::start("auto_accept_edits", "defer", &[], &[]);
    w.initialize();
    w.list(2);
    // The first call waits for a person; a tools/list under the same id must not be taken
    // for its answer (nor its answer for a listing).
    w.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                  "params": {"name": "write", "arguments": {"path": "x.txt"}}}));
    let r = w.request(3, "tools/list", json!({}));
    assert_eq!(r["error"]["code"], -32600, "{r}");
    drop(w.stdin.take());
    let f = w.finish();
    assert!(!f.server_saw_call("write", None));
}

#[test]
fn an_unprivileged_user_gets_the_same_decisions_and_the_same_sandbox() {
    use std::os::unix::fs::PermissionsExt;
    if !python_available() {
        return;
    }
    let ids = test_user();
    // Readable by anyone, so only the sandbox stands between the server and the file.
    let outside = tempfile::tempdir().unwrap();
    std::fs::set_permissions(outside.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "TOPSECRET").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();
    // The approver allows the ask of the guessed path in `where`: the sandbox must refuse it.
    let mut w = Wrap::start_as(Some(ids), "auto_accept_edits", "allow", &[], &[]);
    w.initialize();
    w.list(2);
    let r = w.call(3, "echo", json!({"text": "hi"}));
    assert_eq!(r["result"]["content"][0]["text"], "hi", "{r}");
    let r = w.call(4, "peek", json!({"where": secret}));
    let text = r["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(text.starts_with("peek failed"), "{r}");
    let target = outside.path().join("out.txt");
    refused_text(&w.call(5, "write", json!({"path": target})));
    assert!(!target.exists());
    let f = w.finish();
    assert!(f.server_saw_call("peek", None) && !f.server_saw_call("write", None));
}

#[test]
fn a_call_without_an_id_or_with_a_near_miss_method_never_reaches_the_server() {
    if !python_available() {
        return;
    }
    // The approver allows: only the proxy's framing rules stand between these and the server.
    let mut w = Wrap::start("auto_accept_edits", "allow", &[], &[]);
    w.initialize();
    w.list(2);
    // A tools/call sent as a notification (red team F1).
    w.send(json!({"jsonrpc": "2.0", "method": "tools/call",
                  "params": {"name": "write", "arguments": {"path": "notified.txt", "content": "x"}}}));
    // Near-miss spellings a lenient server would route to tools/call (F2).
    for (id, method) in [(3, "tools/call "), (4, "Tools/Call"), (5, "\ttools/CALL")] {
        let r = w.request(
            id,
            method,
            json!({"name": "write", "arguments": {"path": format!("nearmiss{id}.txt"), "content": "x"}}),
        );
        assert_eq!(r["error"]["code"], -32601, "{method:?}: {r}");
    }
    // The control: the same call, decided (allowed) and run.
    let r = w.call(6, "write", json!({"path": "decided.txt", "content": "x"}));
    assert!(r.get("result").is_some(), "{r}");
    assert!(w.ws.path().join("decided.txt").exists());
    for f in [
        "notified.txt",
        "nearmiss3.txt",
        "nearmiss4.txt",
        "nearmiss5.txt",
    ] {
        assert!(!w.ws.path().join(f).exists(), "{f} was written");
    }
    let f = w.finish();
    assert!(
        !f.server_saw_call("write", Some("notified")),
        "{}",
        f.stderr
    );
    assert!(
        !f.stderr
            .lines()
            .any(|l| l.starts_with("SERVER-SAW ") && l.contains("nearmiss")),
        "{}",
        f.stderr
    );
    assert!(f.stderr.contains("sent without an id"), "{}", f.stderr);
}

#[test]
fn a_path_argument_that_is_not_a_plain_path_asks_and_is_denied() {
    if !python_available() {
        return;
    }
    let mut w = Wrap::start("auto_accept_edits", "deny", &[], &[]);
    w.initialize();
    w.list(2);
    std::fs::write(w.ws.path().join("plain.txt"), "plain").unwrap();
    let r = w.call(
        3,
        "peek",
        json!({"where": "plain.txt", "path": "plain.txt"}),
    );
    assert!(
        r["result"]["isError"] != true,
        "the control read is refused: {r}"
    );
    let attacks = [
        json!("x://../../../../../../../etc/passwd"),
        json!("s3://bucket/../../../../etc/passwd"),
        json!("file:/etc/passwd"),
        json!("FILE:/etc/passwd"),
        json!(" /etc/passwd"),
        json!("~root/.bashrc"),
        json!({"value": "/etc/passwd"}),
    ];
    for (i, a) in attacks.iter().enumerate() {
        let r = w.call(
            10 + i as u64,
            "peek",
            json!({"where": "plain.txt", "path": a}),
        );
        let text = refused_text(&r);
        assert!(
            text.contains("Permission denied by turngate"),
            "{a}: {text}"
        );
    }
    // An argument whose name says nothing, holding a path outside the roots.
    let r = w.call(
        30,
        "peek",
        json!({"where": "plain.txt", "target": "/etc/passwd"}),
    );
    let text = refused_text(&r);
    assert!(text.contains("Permission denied by turngate"), "{text}");
    let f = w.finish();
    assert!(
        !f.stderr
            .lines()
            .any(|l| l.starts_with("SERVER-SAW ") && l.contains("passwd")),
        "{}",
        f.stderr
    );
    assert!(
        !f.stderr
            .lines()
            .any(|l| l.starts_with("SERVER-SAW ") && l.contains("bashrc")),
        "{}",
        f.stderr
    );
}

#[test]
fn deferred_calls_are_capped_per_session_and_the_session_still_answers() {
    if !python_available() {
        return;
    }
    let mut w = Wrap::start("auto_accept_edits", "defer", &[], &[]);
    w.initialize();
    w.list(2);
    let cap = 8u64;
    for i in 0..cap {
        w.send(
            json!({"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call",
                      "params": {"name": "write", "arguments": {"path": format!("d{i}.txt")}}}),
        );
    }
    // The sync point: once ping is answered, the calls before it have been read.
    let r = w.request(5, "ping", json!({}));
    assert!(r.get("result").is_some(), "{r}");
    let store = w.state.path().join("audit.db");
    let pending = || -> usize {
        let out = Command::new(bin())
            .args(["approvals", "list", "--json", "--store"])
            .arg(&store)
            .output()
            .unwrap();
        serde_json::from_slice::<Value>(&out.stdout)
            .ok()
            .and_then(|v| v.as_array().map(Vec::len))
            .unwrap_or(0)
    };
    let start = std::time::Instant::now();
    while pending() < cap as usize {
        assert!(start.elapsed() < WAIT, "the calls were not deferred");
        std::thread::sleep(Duration::from_millis(100));
    }
    // One more: refused at once, naming the cap, its request not left pending.
    let r = w.call(99, "write", json!({"path": "one_too_many.txt"}));
    let text = refused_text(&r);
    assert!(text.contains("too many pending approvals"), "{text}");
    assert_eq!(pending(), cap as usize);
    let r = w.request(6, "ping", json!({}));
    assert!(r.get("result").is_some(), "{r}");
    let f = w.finish();
    assert!(!f.server_saw_call("write", None));
}

#[test]
fn server_requests_for_capabilities_the_client_did_not_declare_are_refused() {
    if !python_available() {
        return;
    }
    let mut w = Wrap::start("auto_accept_edits", "deny", &[], &[]);
    // The client declares no capabilities.
    w.initialize();
    w.list(2);
    // `response` panics on any request from the server reaching the client.
    let r = w.call(3, "asker", json!({}));
    assert_eq!(r["result"]["content"][0]["text"], "asker done", "{r}");
    let r = w.request(4, "ping", json!({}));
    assert!(r.get("result").is_some(), "{r}");
    let f = w.finish();
    for sid in ["s1", "s2", "s3"] {
        assert!(
            f.stderr.lines().any(|l| l.starts_with("SERVER-SAW ")
                && l.contains(&format!("\"id\":\"{sid}\""))
                && l.contains("-32601")),
            "{sid}: {}",
            f.stderr
        );
    }
    assert!(
        f.stderr
            .contains("did not declare the `sampling` capability")
    );
}

#[test]
fn a_grant_for_the_tool_does_not_answer_a_later_calls_argument_ask() {
    if !python_available() {
        return;
    }
    // Supervised: every workspace write asks on its own (the file checker), as does the tool.
    let mut w = Wrap::start("supervised", "defer", &[], &[]);
    w.initialize();
    w.list(2);
    let store = w.state.path().join("audit.db");
    let pending = || -> Vec<String> {
        let out = Command::new(bin())
            .args(["approvals", "list", "--json", "--store"])
            .arg(&store)
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(json!([]));
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|p| p["request"]["id"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let wait_for_one = || {
        let start = std::time::Instant::now();
        loop {
            let p = pending();
            if let Some(id) = p.first() {
                break id.clone();
            }
            assert!(start.elapsed() < WAIT, "no pending request");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    w.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                  "params": {"name": "write", "arguments": {"path": "a.txt", "content": "a"}}}));
    let first = wait_for_one();
    let out = Command::new(bin())
        .args(["approvals", "resolve", &first, "allow_for_turn", "--store"])
        .arg(&store)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    // Allowed and forwarded (the supervised sandbox's read-only workspace then refuses it).
    let r = w.response(&json!(3));
    assert!(
        !r.to_string().contains("Permission denied by turngate"),
        "{r}"
    );
    // Another path, whose file check asks: a fresh request, the call waits.
    w.send(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                  "params": {"name": "write", "arguments": {"path": "b.txt", "content": "b"}}}));
    let second = wait_for_one();
    assert_ne!(first, second);
    assert!(
        !w.ws.path().join("b.txt").exists(),
        "the grant answered the argument's ask"
    );
    let f = w.finish();
    assert!(f.server_saw_call("write", Some("a.txt")));
    assert!(!f.server_saw_call("write", Some("b.txt")));
}
