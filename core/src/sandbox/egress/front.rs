//! The proxy's fast path for a plain download (ADR 0028).
//!
//! A client connection's request heads are read here first and parsed by `httparse` (the
//! parser hyper itself uses). A bodiless `GET` or `HEAD` in absolute form over HTTP/1.1 is
//! served here: decided, forwarded to the checked address with `Connection: close`, the
//! upstream response head parsed by `httparse`, and its body `splice`d from socket to socket
//! without passing through this process (as a CONNECT tunnel is). Anything else (a request
//! with a body, `CONNECT`, HTTP/1.0, a head that does not parse or is too large) is handed,
//! with the bytes already read, to hyper for the rest of the connection, which answers it as
//! before.
//!
//! Each request on a kept-alive connection is parsed and decided on its own. A response is
//! framed by its `Content-Length` (exactly that many bytes are moved, and the connection can
//! serve another request) or by the upstream's close (the client's connection is closed
//! after it); `Content-Length` with `Transfer-Encoding`, or differing lengths, are refused
//! (502), never guessed at.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::{Buf, Bytes, BytesMut};
use hyper::StatusCode;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use super::splice::{self, Ended};
use super::{
    EgressDecider, HEADER_TIMEOUT, MAX_HEAD, MAX_HEADERS, TUNNEL_IDLE_TIMEOUT, idle_watchdog,
};

/// Largest upstream response head read here (a larger one is a 502).
const MAX_RESPONSE_HEAD: usize = 256 * 1024;

/// Most header lines in one upstream response head.
const MAX_RESPONSE_HEADERS: usize = 200;

/// Headers that describe one hop, not the message: never forwarded either way.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "upgrade",
];

/// The client's socket with the bytes already read from it put back in front: what hyper
/// gets when the fast path hands a connection over.
pub(crate) struct Rewind {
    pre: Bytes,
    stream: TcpStream,
}

impl Rewind {
    /// The bytes not yet read back, and the socket.
    pub(super) fn into_parts(self) -> (Bytes, TcpStream) {
        (self.pre, self.stream)
    }
}

impl AsyncRead for Rewind {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if !self.pre.is_empty() {
            let n = self.pre.len().min(buf.remaining());
            let chunk = self.pre.split_to(n);
            buf.put_slice(&chunk);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Rewind {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// What the fast path left of a connection.
pub(super) enum Front {
    /// Served and closed (or the client went away, or was too slow).
    Done,
    /// Hyper serves the rest.
    Hyper(Rewind),
}

/// Serve `stream`'s plain downloads; hand it to hyper at the first request that is not one.
pub(super) async fn serve(stream: TcpStream, decider: &dyn EgressDecider) -> Front {
    let mut buf = BytesMut::with_capacity(8 * 1024);
    loop {
        let head = match tokio::time::timeout(HEADER_TIMEOUT, read_head(&stream, &mut buf)).await {
            // Slowloris, end of stream or a socket error: nothing more to serve.
            Err(_) | Ok(Err(_)) => return Front::Done,
            Ok(Ok(Some(len))) => len,
            Ok(Ok(None)) => return hand_over(buf, stream),
        };
        let Some(request) = Plain::parse(&buf[..head]) else {
            return hand_over(buf, stream);
        };
        buf.advance(head);
        match forward(&stream, &request, decider).await {
            Ok(true) => {}
            Ok(false) | Err(_) => return Front::Done,
        }
    }
}

fn hand_over(buf: BytesMut, stream: TcpStream) -> Front {
    Front::Hyper(Rewind {
        pre: buf.freeze(),
        stream,
    })
}

/// Read until `buf` holds a whole request head: its length, or `None` when it does not
/// parse or grows past [`MAX_HEAD`] (hyper answers those). End of stream is an error.
async fn read_head(stream: &TcpStream, buf: &mut BytesMut) -> io::Result<Option<usize>> {
    loop {
        if !buf.is_empty() {
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            match httparse::Request::new(&mut headers).parse(buf) {
                Ok(httparse::Status::Complete(len)) => return Ok(Some(len)),
                Ok(httparse::Status::Partial) => {}
                Err(_) => return Ok(None),
            }
        }
        if buf.len() >= MAX_HEAD {
            return Ok(None);
        }
        read_some(stream, buf).await?;
    }
}

/// One read into `buf`'s spare room; end of stream is `UnexpectedEof`.
async fn read_some(stream: &TcpStream, buf: &mut BytesMut) -> io::Result<()> {
    buf.reserve(16 * 1024);
    loop {
        stream.readable().await?;
        match stream.try_read_buf(buf) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
}

/// Write all of `bytes`.
async fn send(stream: &TcpStream, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        stream.writable().await?;
        match stream.try_write(bytes) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A request the fast path serves: a bodiless `GET` or `HEAD` in absolute `http://` form,
/// HTTP/1.1.
#[derive(Debug)]
struct Plain {
    method: &'static str,
    uri: hyper::Uri,
    /// The end-to-end headers, as sent (`Host` and hop-by-hop ones left out).
    headers: Vec<(String, Vec<u8>)>,
    /// The client asked to close after this response.
    close: bool,
}

impl Plain {
    /// `None` for anything that is not a plain download (hyper serves it).
    fn parse(head: &[u8]) -> Option<Plain> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        if !matches!(req.parse(head), Ok(httparse::Status::Complete(_))) {
            return None;
        }
        if req.version != Some(1) {
            return None;
        }
        let method = match req.method? {
            "GET" => "GET",
            "HEAD" => "HEAD",
            _ => return None,
        };
        let uri: hyper::Uri = req.path?.parse().ok()?;
        if uri.scheme_str() != Some("http") || uri.authority().is_none() {
            return None;
        }
        let mut close = false;
        let mut kept = Vec::new();
        for header in req.headers.iter() {
            let name = header.name.to_ascii_lowercase();
            match name.as_str() {
                // A body, or a change of protocol: hyper's.
                "content-length" | "transfer-encoding" | "upgrade" | "expect" => return None,
                "connection" | "proxy-connection" => {
                    let value = std::str::from_utf8(header.value).ok()?;
                    if value
                        .split(',')
                        .any(|token| token.trim().eq_ignore_ascii_case("close"))
                    {
                        close = true;
                    }
                }
                "host" => {}
                _ if HOP_BY_HOP.contains(&name.as_str()) => {}
                _ => kept.push((name, header.value.to_vec())),
            }
        }
        Some(Plain {
            method,
            uri,
            headers: kept,
            close,
        })
    }

    /// The request head sent upstream: origin form, `Host` from the URI, one request per
    /// upstream connection.
    fn upstream_head(&self, authority: &str) -> Vec<u8> {
        let origin = self.uri.path_and_query().map_or("/", |pq| pq.as_str());
        let mut out = Vec::with_capacity(512);
        for part in [
            self.method,
            " ",
            origin,
            " HTTP/1.1\r\nhost: ",
            authority,
            "\r\n",
        ] {
            out.extend_from_slice(part.as_bytes());
        }
        for (name, value) in &self.headers {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"connection: close\r\n\r\n");
        out
    }
}

/// A text answer of the proxy's own (a refusal, a bad gateway).
async fn answer(stream: &TcpStream, status: StatusCode, body: &str, close: bool) -> io::Result<()> {
    let head = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\n{}\r\n",
        status.as_str(),
        status.canonical_reason().unwrap_or(""),
        body.len(),
        if close { "connection: close\r\n" } else { "" },
    );
    let mut out = head.into_bytes();
    out.extend_from_slice(body.as_bytes());
    send(stream, &out).await
}

/// How an upstream response's body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// Exactly this many bytes.
    Length(u64),
    /// At the upstream's end of stream.
    Close,
}

/// An upstream response head, parsed.
#[derive(Debug)]
struct Head {
    status: u16,
    reason: String,
    /// End-to-end headers (hop-by-hop ones left out).
    headers: Vec<(String, Vec<u8>)>,
    framing: Framing,
}

/// Why an upstream response head is not forwarded.
#[derive(Debug, PartialEq, Eq)]
enum BadHead {
    /// Not a whole head yet.
    Partial,
    /// Refused (the 502's text).
    Refused(&'static str),
}

impl Head {
    /// Parse `buf`'s response head (to a `HEAD` request when `head_request`): the head and
    /// its length.
    fn parse(buf: &[u8], head_request: bool) -> Result<(Head, usize), BadHead> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_RESPONSE_HEADERS];
        let mut res = httparse::Response::new(&mut headers);
        let len = match res.parse(buf) {
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) => return Err(BadHead::Partial),
            Err(_) => {
                return Err(BadHead::Refused(
                    "the upstream's response head does not parse",
                ));
            }
        };
        let status = res.code.ok_or(BadHead::Partial)?;
        let mut lengths: Vec<&[u8]> = Vec::new();
        let mut chunked = false;
        let mut kept = Vec::new();
        for header in res.headers.iter() {
            let name = header.name.to_ascii_lowercase();
            if name == "content-length" {
                lengths.push(header.value);
            } else if name == "transfer-encoding" {
                chunked = true;
            }
            if !HOP_BY_HOP.contains(&name.as_str()) {
                kept.push((name, header.value.to_vec()));
            }
        }
        if chunked && !lengths.is_empty() {
            return Err(BadHead::Refused(
                "the upstream's response has both Content-Length and Transfer-Encoding",
            ));
        }
        let length = content_length(&lengths)?;
        let framing = if head_request || status == 204 || status == 304 {
            Framing::Length(0)
        } else if chunked {
            // Passed on as it came; its end is the upstream's close (it was asked to).
            Framing::Close
        } else {
            length.map_or(Framing::Close, Framing::Length)
        };
        Ok((
            Head {
                status,
                reason: res.reason.unwrap_or("").to_owned(),
                headers: kept,
                framing,
            },
            len,
        ))
    }

    /// The head sent to the client.
    fn client_head(&self, close: bool) -> Vec<u8> {
        let mut out = Vec::with_capacity(512);
        out.extend_from_slice(format!("HTTP/1.1 {} {}\r\n", self.status, self.reason).as_bytes());
        for (name, value) in &self.headers {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        }
        if close {
            out.extend_from_slice(b"connection: close\r\n");
        }
        out.extend_from_slice(b"\r\n");
        out
    }
}

/// The one length all `Content-Length` values agree on (a list of equal values is one),
/// `None` without any; differing or malformed values are refused.
fn content_length(values: &[&[u8]]) -> Result<Option<u64>, BadHead> {
    let mut length = None;
    for value in values {
        let text = std::str::from_utf8(value).map_err(|_| BadHead::Refused(BAD_LENGTH))?;
        for part in text.split(',') {
            let part = part.trim_matches([' ', '\t']);
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(BadHead::Refused(BAD_LENGTH));
            }
            let n: u64 = part.parse().map_err(|_| BadHead::Refused(BAD_LENGTH))?;
            if length.is_some_and(|l| l != n) {
                return Err(BadHead::Refused(BAD_LENGTH));
            }
            length = Some(n);
        }
    }
    Ok(length)
}

const BAD_LENGTH: &str = "the upstream's Content-Length is malformed or ambiguous";

/// Until `client` hangs up (what it sends meanwhile is discarded: its connection is closing).
async fn gone(client: &TcpStream) {
    let mut scratch = [0u8; 4096];
    loop {
        if client.readable().await.is_err() {
            return;
        }
        match client.try_read(&mut scratch) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => return,
        }
    }
}

/// Serve one plain request on `client`: whether the connection may serve another.
async fn forward(client: &TcpStream, req: &Plain, decider: &dyn EgressDecider) -> io::Result<bool> {
    let Some(authority) = req.uri.authority() else {
        return Ok(false);
    };
    let host_port = match authority.port_u16() {
        Some(_) => authority.as_str().to_owned(),
        None => format!("{}:80", authority.as_str()),
    };
    let upstream = match super::connect(decider, &host_port).await {
        Ok(upstream) => upstream,
        Err((status, body)) => {
            answer(client, status, &body, req.close).await?;
            return Ok(!req.close);
        }
    };
    let bad_gateway = |why: &str| format!("turngate egress proxy: upstream {host_port}: {why}\n");
    if send(&upstream, &req.upstream_head(authority.as_str()))
        .await
        .is_err()
    {
        answer(
            client,
            StatusCode::BAD_GATEWAY,
            &bad_gateway("the request could not be sent"),
            true,
        )
        .await?;
        return Ok(false);
    }
    let head_request = req.method == "HEAD";
    let mut buf = BytesMut::with_capacity(16 * 1024);
    let read = tokio::time::timeout(TUNNEL_IDLE_TIMEOUT, async {
        loop {
            match Head::parse(&buf, head_request) {
                // Interim responses (we never ask for 100-continue) are not passed on.
                Ok((head, len)) if (100..200).contains(&head.status) && head.status != 101 => {
                    buf.advance(len);
                }
                Ok((head, _)) if head.status == 101 => {
                    return Err("the upstream switched protocols unasked");
                }
                Ok(parsed) => return Ok(parsed),
                Err(BadHead::Refused(why)) => return Err(why),
                Err(BadHead::Partial) => {}
            }
            if buf.len() >= MAX_RESPONSE_HEAD {
                return Err("the upstream's response head is too large");
            }
            if read_some(&upstream, &mut buf).await.is_err() {
                return Err("the upstream closed before a whole response head");
            }
        }
    })
    .await;
    let (head, len) = match read {
        Ok(Ok(parsed)) => parsed,
        Ok(Err(why)) => {
            answer(client, StatusCode::BAD_GATEWAY, &bad_gateway(why), true).await?;
            return Ok(false);
        }
        Err(_) => {
            answer(
                client,
                StatusCode::GATEWAY_TIMEOUT,
                &bad_gateway("no response"),
                true,
            )
            .await?;
            return Ok(false);
        }
    };
    buf.advance(len);
    let keep = !req.close && matches!(head.framing, Framing::Length(_));
    let mut out = head.client_head(!keep);
    // The body bytes read with the head go with it (no more than the body's length).
    let early = match head.framing {
        Framing::Length(n) => buf.len().min(usize::try_from(n).unwrap_or(usize::MAX)),
        Framing::Close => buf.len(),
    };
    out.extend_from_slice(&buf[..early]);
    send(client, &out).await?;
    let remaining = match head.framing {
        Framing::Length(n) => Some(n - early as u64),
        Framing::Close => None,
    };
    if remaining == Some(0) {
        return Ok(keep);
    }
    let start = Instant::now();
    let last = AtomicU64::new(0);
    let touch = || {
        let now = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
        last.store(now, Ordering::Relaxed);
    };
    let close_delimited = head.framing == Framing::Close;
    tokio::select! {
        // A close-delimited body ends the client's connection anyway: a client that hangs up
        // ends it now, not when an upstream that ignored `Connection: close` goes quiet.
        () = gone(client), if close_delimited => Ok(false),
        moved = splice::copy(&upstream, client, remaining, &touch) => match moved? {
            // The whole length: the connection serves the next request.
            (Ended::Limit, _) => Ok(keep),
            // Close-delimited, or an upstream that sent less than it said: the client's
            // connection ends here (a short body is seen as one).
            (Ended::Eof, _) => Ok(false),
        },
        () = idle_watchdog(&last, start, TUNNEL_IDLE_TIMEOUT) => Ok(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::egress::{BoxFuture, EgressDecision};
    use std::net::SocketAddr;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Allows the hosts it maps (to their test server), refuses the rest; notes every ask.
    struct Decider {
        allowed: Vec<(String, SocketAddr)>,
        asked: Mutex<Vec<String>>,
    }

    impl EgressDecider for Decider {
        fn decide<'a>(&'a self, authority: &'a str) -> BoxFuture<'a, EgressDecision> {
            Box::pin(async move {
                if let Ok(mut asked) = self.asked.lock() {
                    asked.push(authority.to_owned());
                }
                match self.allowed.iter().find(|(a, _)| a == authority) {
                    Some((_, addr)) => EgressDecision::Connect(vec![*addr]),
                    None => EgressDecision::Refuse("not allowed (test)".to_owned()),
                }
            })
        }
    }

    /// A server that answers every connection's request head with `response`, then closes;
    /// it counts its connections.
    async fn upstream(response: Vec<u8>) -> (SocketAddr, Arc<AtomicU64>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let seen = Arc::new(AtomicU64::new(0));
        let count = seen.clone();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                let response = response.clone();
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") {
                        if s.read(&mut byte).await.unwrap_or(0) == 0 {
                            return;
                        }
                        head.push(byte[0]);
                    }
                    let _ = s.write_all(&response).await;
                    let _ = s.shutdown().await;
                });
            }
        });
        (addr, seen)
    }

    /// A connected pair: the far client, and the proxy's side served by [`serve`].
    async fn client(decider: Arc<Decider>) -> (TcpStream, tokio::task::JoinHandle<bool>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (far, near) = tokio::join!(TcpStream::connect(addr), listener.accept());
        let near = near.expect("accept").0;
        let task =
            tokio::spawn(
                async move { matches!(serve(near, decider.as_ref()).await, Front::Hyper(_)) },
            );
        (far.expect("connect"), task)
    }

    /// Read one response: status, body (by its Content-Length, or to the end of stream).
    async fn response(s: &mut TcpStream) -> (u16, Vec<u8>, bool) {
        let mut buf = Vec::new();
        let (status, length, close, len) = loop {
            let mut chunk = [0u8; 4096];
            let n = s.read(&mut chunk).await.expect("read");
            assert!(n > 0, "closed before a head: {buf:?}");
            buf.extend_from_slice(&chunk[..n]);
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut res = httparse::Response::new(&mut headers);
            if let Ok(httparse::Status::Complete(len)) = res.parse(&buf) {
                let find = |name: &str| {
                    res.headers
                        .iter()
                        .find(|h| h.name.eq_ignore_ascii_case(name))
                        .map(|h| String::from_utf8_lossy(h.value).into_owned())
                };
                let length = find("content-length").map(|v| v.parse::<usize>().expect("cl"));
                let close = find("connection").is_some_and(|v| v == "close");
                break (res.code.expect("code"), length, close, len);
            }
        };
        let mut body = buf.split_off(len);
        match length {
            Some(length) => {
                while body.len() < length {
                    // No further than this body: the next response may follow at once.
                    let mut chunk = vec![0u8; (length - body.len()).min(1 << 16)];
                    let n = s.read(&mut chunk).await.expect("read");
                    if n == 0 {
                        break;
                    }
                    body.extend_from_slice(&chunk[..n]);
                }
            }
            None => {
                s.read_to_end(&mut body).await.expect("read");
            }
        }
        (status, body, close)
    }

    fn pattern(len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(17).wrapping_add(3))
            .collect()
    }

    fn ok_with(body: &[u8], length: usize) -> Vec<u8> {
        let mut out = format!("HTTP/1.1 200 OK\r\ncontent-length: {length}\r\n\r\n").into_bytes();
        out.extend_from_slice(body);
        out
    }

    #[tokio::test]
    async fn a_body_larger_than_any_buffer_arrives_exactly_and_the_next_request_is_decided_on_its_own()
     {
        let body = pattern(9 << 20);
        let (allowed, _) = upstream(ok_with(&body, body.len())).await;
        let (other, other_seen) = upstream(ok_with(b"other", 5)).await;
        let a = format!("127.0.0.1:{}", allowed.port());
        let decider = Arc::new(Decider {
            allowed: vec![(a.clone(), allowed)],
            asked: Mutex::new(Vec::new()),
        });
        let (mut far, task) = client(decider.clone()).await;
        let b = format!("127.0.0.1:{}", other.port());
        // Both requests sent at once: the second waits, unread, while the first is served.
        let requests = format!(
            "GET http://{a}/big HTTP/1.1\r\nhost: {b}\r\n\r\nGET http://{b}/x HTTP/1.1\r\nhost: {a}\r\n\r\n"
        );
        far.write_all(requests.as_bytes()).await.expect("write");
        let (status, got, close) = response(&mut far).await;
        assert_eq!((status, close), (200, false));
        assert_eq!(got.len(), body.len());
        assert!(got == body, "the body differs");
        let (status, got, _) = response(&mut far).await;
        assert_eq!(status, 403);
        assert!(
            String::from_utf8_lossy(&got).contains(&format!("connection to {b} refused")),
            "{}",
            String::from_utf8_lossy(&got)
        );
        assert_eq!(
            other_seen.load(Ordering::SeqCst),
            0,
            "the refused host was reached"
        );
        assert_eq!(*decider.asked.lock().expect("lock"), vec![a, b]);
        drop(far);
        assert!(
            !task.await.expect("task"),
            "a plain download was handed to hyper"
        );
    }

    #[tokio::test]
    async fn a_lying_content_length_ends_the_connection_and_never_leaks_a_byte_past_it() {
        // Says 1 MiB, sends 100 KiB and closes: the client gets the 100 KiB, then the end.
        let short = pattern(100 << 10);
        let (liar, _) = upstream(ok_with(&short, 1 << 20)).await;
        // Says 10 bytes, sends 10 and a smuggled response after them.
        let mut long = ok_with(b"0123456789", 10);
        long.extend_from_slice(b"HTTP/1.1 200 OK\r\ncontent-length: 8\r\n\r\nsmuggled");
        let (over, _) = upstream(long).await;
        let (l, o) = (
            format!("127.0.0.1:{}", liar.port()),
            format!("127.0.0.1:{}", over.port()),
        );
        let decider = Arc::new(Decider {
            allowed: vec![(l.clone(), liar), (o.clone(), over)],
            asked: Mutex::new(Vec::new()),
        });

        let (mut far, _task) = client(decider.clone()).await;
        far.write_all(format!("GET http://{o}/ HTTP/1.1\r\n\r\n").as_bytes())
            .await
            .expect("write");
        let (status, got, _) = response(&mut far).await;
        assert_eq!((status, got.as_slice()), (200, &b"0123456789"[..]));
        // The connection is still usable, and nothing of the extra bytes is on it.
        far.write_all(format!("GET http://{l}/ HTTP/1.1\r\n\r\n").as_bytes())
            .await
            .expect("write");
        let mut rest = Vec::new();
        tokio::time::timeout(Duration::from_secs(20), far.read_to_end(&mut rest))
            .await
            .expect("the short body left the connection open")
            .expect("read");
        let text = String::from_utf8_lossy(&rest);
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text:.200}");
        assert!(!text.contains("smuggled"));
        let head_len = rest
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("head")
            + 4;
        assert!(rest[head_len..] == short[..], "the short body differs");
    }

    #[tokio::test]
    async fn a_client_that_hangs_up_ends_a_close_delimited_body_the_upstream_keeps_open() {
        // A chunked body, and an upstream that never closes.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            if let Ok((mut s, _)) = listener.accept().await {
                let mut head = [0u8; 1024];
                let _ = s.read(&mut head).await;
                let _ = s
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n",
                    )
                    .await;
                tokio::time::sleep(Duration::from_secs(60)).await;
            }
        });
        let h = format!("127.0.0.1:{}", addr.port());
        let decider = Arc::new(Decider {
            allowed: vec![(h.clone(), addr)],
            asked: Mutex::new(Vec::new()),
        });
        let (mut far, task) = client(decider).await;
        far.write_all(format!("GET http://{h}/ HTTP/1.1\r\n\r\n").as_bytes())
            .await
            .expect("write");
        let mut got = vec![0u8; 16];
        let n = far.read(&mut got).await.expect("read");
        assert!(got[..n].starts_with(b"HTTP/1.1 200"), "{:?}", &got[..n]);
        drop(far);
        let ended = tokio::time::timeout(Duration::from_secs(10), task).await;
        assert!(
            ended.is_ok(),
            "the proxy kept serving a client that hung up"
        );
    }

    #[tokio::test]
    async fn content_length_with_transfer_encoding_is_a_502() {
        let (both, _) = upstream(
            b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n"
                .to_vec(),
        )
        .await;
        let h = format!("127.0.0.1:{}", both.port());
        let decider = Arc::new(Decider {
            allowed: vec![(h.clone(), both)],
            asked: Mutex::new(Vec::new()),
        });
        let (mut far, _task) = client(decider).await;
        far.write_all(format!("GET http://{h}/ HTTP/1.1\r\n\r\n").as_bytes())
            .await
            .expect("write");
        let (status, body, close) = response(&mut far).await;
        assert_eq!(
            (status, close),
            (502, true),
            "{}",
            String::from_utf8_lossy(&body)
        );
    }

    #[tokio::test]
    async fn a_request_with_a_body_goes_to_hyper_with_every_byte_read() {
        let decider = Arc::new(Decider {
            allowed: Vec::new(),
            asked: Mutex::new(Vec::new()),
        });
        let (mut far, task) = client(decider.clone()).await;
        let post = b"POST http://h/ HTTP/1.1\r\ncontent-length: 3\r\n\r\nabc";
        far.write_all(post).await.expect("write");
        assert!(task.await.expect("task"), "not handed to hyper");
        assert!(
            decider.asked.lock().expect("lock").is_empty(),
            "decided before hyper"
        );
    }

    #[test]
    fn content_lengths_are_one_number_or_refused() {
        let cl = |values: &[&str]| {
            content_length(&values.iter().map(|v| v.as_bytes()).collect::<Vec<_>>())
        };
        assert_eq!(cl(&[]), Ok(None));
        assert_eq!(cl(&["42"]), Ok(Some(42)));
        assert_eq!(cl(&["42, 42", "42"]), Ok(Some(42)));
        for bad in [
            "42, 43",
            "+42",
            "-1",
            "",
            "4 2",
            "0x10",
            "99999999999999999999",
        ] {
            assert!(cl(&[bad]).is_err(), "{bad:?}");
        }
        assert!(cl(&["1", "2"]).is_err());
    }

    #[test]
    fn response_framing_follows_the_rules() {
        let parse =
            |head: &[u8], head_request| Head::parse(head, head_request).map(|(h, _)| h.framing);
        assert_eq!(
            parse(b"HTTP/1.1 200 OK\r\ncontent-length: 7\r\n\r\n", false),
            Ok(Framing::Length(7))
        );
        assert_eq!(
            parse(b"HTTP/1.1 200 OK\r\ncontent-length: 7\r\n\r\n", true),
            Ok(Framing::Length(0))
        );
        assert_eq!(
            parse(b"HTTP/1.1 204 No Content\r\n\r\n", false),
            Ok(Framing::Length(0))
        );
        assert_eq!(
            parse(
                b"HTTP/1.1 304 Not Modified\r\ncontent-length: 9\r\n\r\n",
                false
            ),
            Ok(Framing::Length(0))
        );
        assert_eq!(parse(b"HTTP/1.1 200 OK\r\n\r\n", false), Ok(Framing::Close));
        assert_eq!(
            parse(
                b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n",
                false
            ),
            Ok(Framing::Close)
        );
        assert!(matches!(
            parse(
                b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-length: 3\r\n\r\n",
                false
            ),
            Err(BadHead::Refused(_))
        ));
        assert_eq!(parse(b"HTTP/1.1 200 OK\r\n", false), Err(BadHead::Partial));
        // Hop-by-hop headers are not passed on.
        let (head, _) = Head::parse(
            b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nKeep-Alive: 5\r\nX-A: 1\r\ncontent-length: 0\r\n\r\n",
            false,
        )
        .expect("head");
        let names: Vec<&str> = head.headers.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["x-a", "content-length"]);
    }

    #[test]
    fn only_bodiless_absolute_get_and_head_over_http_1_1_take_the_fast_path() {
        let plain = |head: &str| Plain::parse(head.as_bytes());
        let get = plain("GET http://h:81/p?q HTTP/1.1\r\nHost: evil\r\nProxy-Authorization: x\r\nX-A: 1\r\n\r\n")
            .expect("plain");
        assert_eq!(get.headers, vec![("x-a".to_owned(), b"1".to_vec())]);
        assert!(!get.close);
        let up = String::from_utf8(get.upstream_head("h:81")).expect("utf8");
        assert_eq!(
            up,
            "GET /p?q HTTP/1.1\r\nhost: h:81\r\nx-a: 1\r\nconnection: close\r\n\r\n"
        );
        assert!(
            plain("HEAD http://h/ HTTP/1.1\r\nConnection: Close\r\n\r\n")
                .expect("head")
                .close
        );
        for other in [
            "POST http://h/ HTTP/1.1\r\n\r\n",
            "GET http://h/ HTTP/1.0\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: h\r\n\r\n",
            "GET https://h/ HTTP/1.1\r\n\r\n",
            "CONNECT h:443 HTTP/1.1\r\n\r\n",
            "GET http://h/ HTTP/1.1\r\ncontent-length: 0\r\n\r\n",
            "GET http://h/ HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n",
            "GET http://h/ HTTP/1.1\r\nUpgrade: websocket\r\n\r\n",
            "GET http://h/ HTTP/1.1\r\nExpect: 100-continue\r\n\r\n",
        ] {
            assert!(plain(other).is_none(), "{other}");
        }
    }
}
