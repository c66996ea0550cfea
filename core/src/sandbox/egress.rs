//! The egress proxy of `network = restricted` (DESIGN §13, ADR 0012).
//!
//! A sandboxed command whose network is restricted runs in a network namespace with loopback
//! only. The namespace's first process creates one listening TCP socket on
//! `127.0.0.1:`[`PROXY_PORT`] inside it and passes the descriptor back to turngate over a
//! socketpair (`SCM_RIGHTS`); turngate accepts on it here, in its own network namespace, and
//! is the only way out. The child's environment points `HTTP(S)_PROXY`/`ALL_PROXY` at it.
//!
//! The proxy speaks HTTP `CONNECT` (tunnels, TLS stays end to end) and absolute-form HTTP
//! (`GET http://host/path`), parsed by hyper. Every tunnel and every request is one decision
//! of an [`EgressDecider`] (the turn's gate): it names the host and port the request asked
//! for, and the decider answers with the checked addresses to connect to, or a refusal that
//! becomes a 403 whose body names the rule and the reason. The proxy never resolves a name
//! itself and connects only to the addresses it was given.
//!
//! It never decides what may be reached; it only carries the decider's answer out.
//!
//! On Windows the proxy compiles but nothing serves it: there is no process runner there
//! (ADR 0021).
#![cfg_attr(windows, allow(dead_code))]

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::header::{HOST, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

/// The proxy's port inside the command's network namespace. The namespace is new for every
/// spawn and holds nothing else, so one fixed port is always free there.
pub const PROXY_PORT: u16 = 3128;

/// The proxy URL the command's environment names.
pub const PROXY_URL: &str = "http://127.0.0.1:3128";

/// The environment the command gets when its traffic goes through the proxy.
pub const PROXY_ENV: &[(&str, &str)] = &[
    ("HTTP_PROXY", PROXY_URL),
    ("HTTPS_PROXY", PROXY_URL),
    ("http_proxy", PROXY_URL),
    ("https_proxy", PROXY_URL),
    ("ALL_PROXY", PROXY_URL),
    ("all_proxy", PROXY_URL),
    ("NO_PROXY", ""),
    ("no_proxy", ""),
];

/// Longest time a client may take to send a request's head (slowloris).
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Largest request head hyper buffers (a larger one is refused with 431).
const MAX_HEAD: usize = 64 * 1024;

/// Most header lines in one request.
const MAX_HEADERS: usize = 100;

/// Most client connections served at once, counting those that became tunnels and their
/// forwarded requests' upstream connections: each holds one permit for its whole life. More
/// wait in the kernel's backlog.
pub const MAX_CONNECTIONS: usize = 256;

/// A tunnel that carried no byte either way for this long is closed.
pub const TUNNEL_IDLE_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// How long the accept loop pauses after a transient accept error (out of descriptors or
/// memory), instead of spinning on it.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Longest time one upstream connect may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The read buffer of a forwarded request's upstream connection.
const UPSTREAM_READ: usize = 256 * 1024;

/// The tunnel's copy buffer, each direction.
const TUNNEL_BUFFER: usize = 256 * 1024;

/// A boxed, sendable future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What the decider says about one connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EgressDecision {
    /// Connect to these addresses (checked, in order), and nothing else.
    Connect(Vec<SocketAddr>),
    /// Refuse; the text names the rule and the reason (the 403's body).
    Refuse(String),
}

/// Decides each connection the proxy is asked to make.
pub trait EgressDecider: Send + Sync {
    /// Decide a connection to `authority` (`host:port` as the command asked for it; the
    /// decider normalizes, checks, asks, audits and resolves).
    fn decide<'a>(&'a self, authority: &'a str) -> BoxFuture<'a, EgressDecision>;
}

/// A decider that refuses everything (a runner given no gate).
#[derive(Debug, Clone, Copy, Default)]
pub struct RefuseAll;

impl EgressDecider for RefuseAll {
    fn decide<'a>(&'a self, authority: &'a str) -> BoxFuture<'a, EgressDecision> {
        Box::pin(async move {
            EgressDecision::Refuse(format!(
                "no gate decides this command's connections; {authority} is refused"
            ))
        })
    }
}

type Body = BoxBody<Bytes, hyper::Error>;

fn text(status: StatusCode, body: String) -> Response<Body> {
    let mut response = Response::new(
        Full::new(Bytes::from(body))
            .map_err(|never| match never {})
            .boxed(),
    );
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

fn refusal(authority: &str, reason: &str) -> String {
    format!("turngate egress proxy: connection to {authority} refused: {reason}\n")
}

/// Serve the proxy on `listener` until the future is dropped. Connections are decided by
/// `decider`; tunnels and upstream connections run as tasks in `tasks`, aborted when it is
/// dropped (the run is over).
pub(crate) async fn serve(
    listener: std::net::TcpListener,
    decider: &dyn EgressDecider,
    tasks: Arc<Mutex<JoinSet<()>>>,
) {
    if listener.set_nonblocking(true).is_err() {
        return;
    }
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut conns = FuturesUnordered::new();
    let mut accepting = true;
    loop {
        // A permit first, then the accept: at most MAX_CONNECTIONS live connections, tunnels
        // included (the permit moves into the tunnel task and is released when it ends).
        let next = async {
            let permit = permits.clone().acquire_owned().await;
            (permit, listener.accept().await)
        };
        tokio::select! {
            (permit, accepted) = next, if accepting => {
                let Ok(permit) = permit else { accepting = false; continue };
                match accepted {
                    Ok((stream, _)) => {
                        let _ = stream.set_nodelay(true);
                        let permit = Arc::new(permit);
                        conns.push(serve_connection(stream, decider, tasks.clone(), permit));
                    }
                    Err(e) if transient(&e) => {
                        drop(permit);
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                    }
                    // The listener itself is broken: serve what is open, accept no more.
                    Err(_) => accepting = false,
                }
            }
            Some(()) = conns.next(), if !conns.is_empty() => {}
            else => return,
        }
    }
}

/// Whether an accept error passes (a resource runs short, or one client gave up before it
/// was accepted) rather than meaning the listener is unusable.
fn transient(e: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(
        e.kind(),
        ErrorKind::ConnectionAborted
            | ErrorKind::ConnectionReset
            | ErrorKind::Interrupted
            | ErrorKind::WouldBlock
            | ErrorKind::OutOfMemory
    ) || matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM | libc::EPROTO)
            | Some(libc::EPERM | libc::ETIMEDOUT | libc::ENETDOWN | libc::EHOSTUNREACH)
    )
}

/// The client connection's stream as hyper gets it on Linux, after the fast path of plain
/// downloads ([`front`]) read from it (what a CONNECT upgrade is downcast to; elsewhere hyper
/// gets the `TcpStream` itself and the tunnel copies).
#[cfg(target_os = "linux")]
type ClientIo = front::Rewind;

/// A permit held for a connection's whole life (its tunnel or upstream tasks hold clones).
type Permit = Arc<OwnedSemaphorePermit>;

async fn serve_connection(
    stream: TcpStream,
    decider: &dyn EgressDecider,
    tasks: Arc<Mutex<JoinSet<()>>>,
    permit: Permit,
) {
    #[cfg(target_os = "linux")]
    let stream = match front::serve(stream, decider).await {
        front::Front::Done => return,
        front::Front::Hyper(rewind) => rewind,
    };
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let tasks = tasks.clone();
        let permit = permit.clone();
        async move { Ok::<_, std::convert::Infallible>(handle(req, decider, tasks, permit).await) }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .max_buf_size(MAX_HEAD)
        .max_headers(MAX_HEADERS)
        .keep_alive(true);
    let _ = builder
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades()
        .await;
}

/// A stream that notes the time of its last byte moved, either way.
struct Active<T> {
    inner: T,
    last: Arc<AtomicU64>,
    start: Instant,
}

impl<T> Active<T> {
    fn touch(&self) {
        let now = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.store(now, Ordering::Relaxed);
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Active<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.touch();
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Active<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.touch();
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Copy both ways until both ends are done, or until nothing moved for `idle`.
async fn tunnel<A, B>(client: A, upstream: B, idle: Duration)
where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    let start = Instant::now();
    let last = Arc::new(AtomicU64::new(0));
    let mut client = Active {
        inner: client,
        last: last.clone(),
        start,
    };
    let mut upstream = Active {
        inner: upstream,
        last: last.clone(),
        start,
    };
    let copy = tokio::io::copy_bidirectional_with_sizes(
        &mut client,
        &mut upstream,
        TUNNEL_BUFFER,
        TUNNEL_BUFFER,
    );
    tokio::select! {
        _ = copy => {}
        () = idle_watchdog(&last, start, idle) => {}
    }
}

/// Wait until nothing moved for `idle` since the last touch of `last` (milliseconds after
/// `start`).
async fn idle_watchdog(last: &AtomicU64, start: Instant, idle: Duration) {
    loop {
        let since = Duration::from_millis(last.load(Ordering::Relaxed));
        let quiet = start.elapsed().saturating_sub(since);
        if quiet >= idle {
            return;
        }
        tokio::time::sleep(idle - quiet).await;
    }
}

/// A tunnel between two TCP sockets that does not copy through this process: each direction
/// `splice`s from one socket into a pipe and from the pipe into the other socket, so a
/// download through the proxy costs the kernel's page moves, not two copies in and out of
/// user space (DESIGN §13's throughput budget); only a burst that can get no pipe (out of
/// descriptors) is copied through a buffer. A forwarded response's body is moved the same
/// way ([`splice::copy`], ADR 0028).
#[cfg(target_os = "linux")]
mod front;

#[cfg(target_os = "linux")]
pub(super) mod splice {
    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::{Duration, Instant};

    use bytes::Bytes;
    use tokio::io::{AsyncWriteExt, Interest};
    use tokio::net::TcpStream;

    /// The pipe's capacity asked for (the kernel's default is 64 KiB; a refusal keeps it).
    const PIPE_SIZE: libc::c_int = 1 << 20;

    /// Most bytes one `splice` call moves.
    const CHUNK: usize = 1 << 20;

    /// The copy buffer of a burst that could get no pipe.
    const FALLBACK_BUFFER: usize = 256 * 1024;

    /// How long a direction keeps its pipe once its source has nothing more for now. A
    /// download drains the socket many times a second and waits a few microseconds for the
    /// next segment: making and closing a pipe (and sizing it) every time cost more than the
    /// bytes' moves. A direction quiet for longer gives its pipe back, so an idle tunnel
    /// holds its two sockets and nothing else (E1).
    pub(super) const PIPE_LINGER: Duration = Duration::from_millis(250);

    #[cfg(test)]
    thread_local! {
        /// Tests: every pipe fails as if out of descriptors (the copy fallback).
        pub(super) static NO_PIPES: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
        /// Tests: the pipes alive on this thread.
        pub(super) static LIVE_PIPES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    /// One direction's pipe.
    struct Pipe {
        read: OwnedFd,
        write: OwnedFd,
    }

    impl Pipe {
        fn new() -> io::Result<Pipe> {
            #[cfg(test)]
            if NO_PIPES.with(std::cell::Cell::get) {
                return Err(io::Error::from_raw_os_error(libc::EMFILE));
            }
            let mut fds = [0 as RawFd; 2];
            // SAFETY: `fds` has room for the two descriptors pipe2 writes.
            if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: both descriptors were just created and nothing else owns them.
            let pipe = unsafe {
                Pipe {
                    read: OwnedFd::from_raw_fd(fds[0]),
                    write: OwnedFd::from_raw_fd(fds[1]),
                }
            };
            // SAFETY: F_SETPIPE_SZ on a pipe this function owns; failure leaves the default.
            unsafe { libc::fcntl(pipe.write.as_raw_fd(), libc::F_SETPIPE_SZ, PIPE_SIZE) };
            #[cfg(test)]
            LIVE_PIPES.with(|n| n.set(n.get() + 1));
            Ok(pipe)
        }
    }

    #[cfg(test)]
    impl Drop for Pipe {
        fn drop(&mut self) {
            LIVE_PIPES.with(|n| n.set(n.get().saturating_sub(1)));
        }
    }

    thread_local! {
        /// Whether this thread blocks SIGPIPE already ([`block_sigpipe`]).
        static SIGPIPE_BLOCKED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    /// Block SIGPIPE on this thread, once. `splice` into a socket has no `MSG_NOSIGNAL`: a
    /// client that hung up (its reset consumed by the other direction's read, then this
    /// direction's write) gets the writing thread a SIGPIPE, whose default action kills the
    /// host process. Rust, Python and Node ignore it, but a C or Swift host may not. Blocked,
    /// the signal stays pending on this (runtime) thread and is taken back after the `EPIPE`
    /// ([`drain_sigpipe`]); other threads and the host's disposition are untouched.
    fn block_sigpipe() {
        if SIGPIPE_BLOCKED.with(std::cell::Cell::get) {
            return;
        }
        // SAFETY: a local signal set; pthread_sigmask changes only this thread's mask.
        let blocked = unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGPIPE);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) == 0
        };
        SIGPIPE_BLOCKED.with(|b| b.set(blocked));
    }

    /// Take back a SIGPIPE that an `EPIPE` left pending on this thread (blocked by
    /// [`block_sigpipe`]), so it is never delivered later.
    fn drain_sigpipe() {
        // SAFETY: local signal sets and a zero timeout: sigtimedwait returns at once, taking
        // SIGPIPE if pending (it is blocked here, as sigtimedwait requires).
        unsafe {
            let mut pending: libc::sigset_t = std::mem::zeroed();
            if libc::sigpending(&mut pending) != 0
                || libc::sigismember(&pending, libc::SIGPIPE) != 1
            {
                return;
            }
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGPIPE);
            let zero = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            libc::sigtimedwait(&set, std::ptr::null_mut(), &zero);
        }
    }

    /// One non-blocking `splice` of up to `len` bytes; `WouldBlock` when `from` has nothing
    /// or `to` has no room. Never raises SIGPIPE in the host ([`block_sigpipe`]).
    fn splice(from: RawFd, to: RawFd, len: usize) -> io::Result<usize> {
        block_sigpipe();
        // SAFETY: plain descriptors and no offsets (sockets and pipes have none).
        let n = unsafe {
            libc::splice(
                from,
                std::ptr::null_mut(),
                to,
                std::ptr::null_mut(),
                len,
                libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
            )
        };
        usize::try_from(n).map_err(|_| {
            let err = io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EPIPE) {
                drain_sigpipe();
            }
            err
        })
    }

    /// How one direction ended.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(super) enum Ended {
        /// `src` sent its end of stream.
        Eof,
        /// The limit's bytes were moved (`src` may have more).
        Limit,
    }

    /// Move what `src` sends to `dst`: until `src`'s end of stream, or until `limit` bytes
    /// were moved when there is one. Returns how it ended and the bytes moved. `dst` is not
    /// shut down here.
    ///
    /// A pipe is held only while bytes are moving: it is made when `src` becomes readable and
    /// closed once `src` had nothing more for [`PIPE_LINGER`], so an idle direction holds no
    /// pipe (the connection cap bounds turngate's descriptors, E1). When no pipe can be had
    /// (out of descriptors), that burst is copied through a buffer instead.
    pub(super) async fn copy(
        src: &TcpStream,
        dst: &TcpStream,
        limit: Option<u64>,
        touch: &(dyn Fn() + Sync),
    ) -> io::Result<(Ended, u64)> {
        let mut buffer: Vec<u8> = Vec::new();
        let mut moved: u64 = 0;
        let mut pipe: Option<Pipe> = None;
        loop {
            if limit == Some(moved) {
                return Ok((Ended::Limit, moved));
            }
            if pipe.is_some() {
                // Keep the pipe across a short wait; a longer quiet gives it back.
                match tokio::time::timeout(PIPE_LINGER, src.readable()).await {
                    Ok(ready) => ready?,
                    Err(_) => {
                        pipe = None;
                        src.readable().await?;
                    }
                }
            } else {
                src.readable().await?;
            }
            if pipe.is_none() {
                pipe = Pipe::new().ok();
            }
            if pipe.is_none() && buffer.is_empty() {
                buffer.resize(FALLBACK_BUFFER, 0);
            }
            loop {
                let want = match limit {
                    Some(limit) => usize::try_from(limit - moved).unwrap_or(usize::MAX),
                    None => usize::MAX,
                };
                if want == 0 {
                    break;
                }
                let read = match &pipe {
                    // The pipe is empty here: `WouldBlock` means `src` has nothing yet.
                    Some(pipe) => src.try_io(Interest::READABLE, || {
                        splice(src.as_raw_fd(), pipe.write.as_raw_fd(), CHUNK.min(want))
                    }),
                    None => {
                        let len = buffer.len().min(want);
                        src.try_read(&mut buffer[..len])
                    }
                };
                let n = match read {
                    Ok(0) => return Ok((Ended::Eof, moved)),
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => return Err(e),
                };
                touch();
                let mut done = 0;
                while done < n {
                    dst.writable().await?;
                    let wrote = match &pipe {
                        Some(pipe) => dst.try_io(Interest::WRITABLE, || {
                            splice(pipe.read.as_raw_fd(), dst.as_raw_fd(), n - done)
                        }),
                        None => dst.try_write(&buffer[done..n]),
                    };
                    match wrote {
                        Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                        Ok(m) => {
                            done += m;
                            touch();
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                        Err(e) => return Err(e),
                    }
                }
                moved += n as u64;
            }
        }
    }

    /// Move everything `src` sends to `dst` until `src`'s end of stream, then shut down
    /// `dst`'s sending side (a half-close passes through, as with a copy).
    async fn one_way(
        src: &TcpStream,
        dst: &TcpStream,
        touch: &(dyn Fn() + Sync),
    ) -> io::Result<()> {
        copy(src, dst, None, touch).await?;
        // SAFETY: shutdown of a socket `dst` owns; its descriptor stays open.
        unsafe { libc::shutdown(dst.as_raw_fd(), libc::SHUT_WR) };
        Ok(())
    }

    /// The CONNECT tunnel between `client` (whose bytes already read past the CONNECT head
    /// are `early`) and `upstream`, until both directions ended, one failed, or nothing moved
    /// for `idle`.
    pub(super) async fn tunnel(
        client: TcpStream,
        early: Bytes,
        mut upstream: TcpStream,
        idle: Duration,
    ) {
        let start = Instant::now();
        let last = AtomicU64::new(0);
        let touch = || {
            let now = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
            last.store(now, Ordering::Relaxed);
        };
        let copy = async {
            if !early.is_empty() {
                upstream.write_all(&early).await?;
                touch();
            }
            tokio::try_join!(
                one_way(&client, &upstream, &touch),
                one_way(&upstream, &client, &touch)
            )
        };
        tokio::select! {
            _ = copy => {}
            () = super::idle_watchdog(&last, start, idle) => {}
        }
    }
}

fn spawn(tasks: &Mutex<JoinSet<()>>, task: impl Future<Output = ()> + Send + 'static) {
    if let Ok(mut set) = tasks.lock() {
        // Finished tasks are reaped here so the set does not grow with the turn.
        while set.try_join_next().is_some() {}
        set.spawn(task);
    }
}

async fn handle(
    mut req: Request<Incoming>,
    decider: &dyn EgressDecider,
    tasks: Arc<Mutex<JoinSet<()>>>,
    permit: Permit,
) -> Response<Body> {
    if req.method() == Method::CONNECT {
        // CONNECT's target is an authority (`host:port`), nothing else.
        let Some(authority) = req
            .uri()
            .authority()
            .map(|a| a.as_str().to_owned())
            .filter(|_| req.uri().scheme().is_none() && req.uri().path_and_query().is_none())
        else {
            return text(
                StatusCode::BAD_REQUEST,
                "turngate egress proxy: CONNECT needs host:port\n".to_owned(),
            );
        };
        let upstream = match open(decider, &authority).await {
            Ok(upstream) => upstream,
            Err(response) => return response,
        };
        let upgrade = hyper::upgrade::on(&mut req);
        spawn(&tasks, async move {
            let _permit = permit;
            if let Ok(upgraded) = upgrade.await {
                // The client's own socket back (with what hyper read past the CONNECT head):
                // the tunnel moves bytes between the two sockets in the kernel.
                #[cfg(target_os = "linux")]
                let upgraded = match upgraded.downcast::<TokioIo<ClientIo>>() {
                    Ok(parts) => {
                        // What hyper read past the head, then what it had not read yet of
                        // the bytes the fast path read before handing the connection over.
                        let (unread, client) = parts.io.into_inner().into_parts();
                        let early = if unread.is_empty() {
                            parts.read_buf
                        } else {
                            let mut early = bytes::BytesMut::from(&parts.read_buf[..]);
                            early.extend_from_slice(&unread);
                            early.freeze()
                        };
                        splice::tunnel(client, early, upstream, TUNNEL_IDLE_TIMEOUT).await;
                        return;
                    }
                    Err(upgraded) => upgraded,
                };
                tunnel(TokioIo::new(upgraded), upstream, TUNNEL_IDLE_TIMEOUT).await;
            }
        });
        return Response::new(http_body_util::Empty::new().map_err(|n| match n {}).boxed());
    }
    forward(req, decider, tasks, permit).await
}

/// Absolute-form HTTP: check the URI's authority (the `Host` header is not trusted), connect
/// to the checked address, and send the request on in origin form with `Host` set from the
/// URI. One upstream connection per request, so every request is decided on its own.
async fn forward(
    req: Request<Incoming>,
    decider: &dyn EgressDecider,
    tasks: Arc<Mutex<JoinSet<()>>>,
    permit: Permit,
) -> Response<Body> {
    let uri = req.uri().clone();
    if uri.scheme_str() != Some("http") {
        return text(
            StatusCode::BAD_REQUEST,
            "turngate egress proxy: only absolute http:// requests and CONNECT are proxied \
             (https goes through CONNECT)\n"
                .to_owned(),
        );
    }
    let Some(authority) = uri.authority() else {
        return text(
            StatusCode::BAD_REQUEST,
            "turngate egress proxy: the request names no host\n".to_owned(),
        );
    };
    let host_port = match authority.port_u16() {
        Some(_) => authority.as_str().to_owned(),
        None => format!("{}:80", authority.as_str()),
    };
    let Ok(host_value) = HeaderValue::from_str(authority.as_str()) else {
        return text(
            StatusCode::BAD_REQUEST,
            "turngate egress proxy: bad host\n".to_owned(),
        );
    };
    let upstream = match open(decider, &host_port).await {
        Ok(upstream) => upstream,
        Err(response) => return response,
    };
    let (mut parts, body) = req.into_parts();
    parts.uri = match uri.path_and_query() {
        Some(pq) => match pq.as_str().parse() {
            Ok(origin) => origin,
            Err(_) => return text(StatusCode::BAD_REQUEST, "bad path\n".to_owned()),
        },
        None => hyper::Uri::from_static("/"),
    };
    for name in [
        "connection",
        "proxy-connection",
        "keep-alive",
        "proxy-authorization",
        "proxy-authenticate",
        "te",
        "trailer",
        "upgrade",
    ] {
        parts.headers.remove(name);
    }
    parts.headers.insert(HOST, host_value);
    let request = Request::from_parts(parts, body);
    // Large reads from upstream: a download is forwarded in few, big frames.
    let (mut sender, conn) = match hyper::client::conn::http1::Builder::new()
        .read_buf_exact_size(Some(UPSTREAM_READ))
        .handshake::<_, Incoming>(TokioIo::new(upstream))
        .await
    {
        Ok(pair) => pair,
        Err(e) => return text(StatusCode::BAD_GATEWAY, format!("upstream: {e}\n")),
    };
    spawn(&tasks, async move {
        let _permit = permit;
        let _ = conn.await;
    });
    match sender.send_request(request).await {
        Ok(response) => response.map(|b| b.boxed()),
        Err(e) => text(StatusCode::BAD_GATEWAY, format!("upstream: {e}\n")),
    }
}

/// Decide `authority` and connect to the first checked address that answers.
async fn open(decider: &dyn EgressDecider, authority: &str) -> Result<TcpStream, Response<Body>> {
    connect(decider, authority)
        .await
        .map_err(|(status, body)| text(status, body))
}

/// Decide `authority` and connect to the first checked address that answers; or the status
/// and text of the answer that says why not.
async fn connect(
    decider: &dyn EgressDecider,
    authority: &str,
) -> Result<TcpStream, (StatusCode, String)> {
    let addrs = match decider.decide(authority).await {
        EgressDecision::Connect(addrs) => addrs,
        EgressDecision::Refuse(reason) => {
            return Err((StatusCode::FORBIDDEN, refusal(authority, &reason)));
        }
    };
    let mut last = String::from("no address");
    for addr in addrs {
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => {
                let _ = stream.set_nodelay(true);
                return Ok(stream);
            }
            Ok(Err(e)) => last = format!("{addr}: {e}"),
            Err(_) => last = format!("{addr}: connect timed out"),
        }
    }
    Err((
        StatusCode::BAD_GATEWAY,
        format!("turngate egress proxy: could not connect to {authority}: {last}\n"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Two connected TCP pairs: (the far client, the proxy's client side) and (the proxy's
    /// upstream side, the far server).
    #[cfg(target_os = "linux")]
    async fn socket_pairs() -> ((TcpStream, TcpStream), (TcpStream, TcpStream)) {
        let mut pairs = Vec::new();
        for _ in 0..2 {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            let addr = listener.local_addr().expect("addr");
            let (near, far) = tokio::join!(TcpStream::connect(addr), listener.accept());
            pairs.push((near.expect("connect"), far.expect("accept").0));
        }
        let (upstream, far_server) = pairs.pop().expect("pair");
        let (far_client, client) = pairs.pop().expect("pair");
        ((far_client, client), (upstream, far_server))
    }

    #[cfg(target_os = "linux")]
    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn the_spliced_tunnel_carries_every_byte_both_ways_early_bytes_first() {
        carries_every_byte_both_ways().await;
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn without_pipes_the_tunnel_copies_every_byte_both_ways() {
        splice::NO_PIPES.with(|no| no.set(true));
        carries_every_byte_both_ways().await;
        splice::NO_PIPES.with(|no| no.set(false));
    }

    #[cfg(target_os = "linux")]
    async fn carries_every_byte_both_ways() {
        let ((mut far_client, client), (upstream, mut far_server)) = socket_pairs().await;
        let task = tokio::spawn(splice::tunnel(
            client,
            Bytes::from_static(b"early:"),
            upstream,
            Duration::from_secs(30),
        ));
        let up = pattern(8 << 20, 7);
        let down = pattern(3 << 20, 91);
        let (client_side, server_side) = tokio::join!(
            async {
                far_client.write_all(&up).await.expect("client write");
                far_client.shutdown().await.expect("client half-close");
                let mut got = Vec::new();
                far_client.read_to_end(&mut got).await.expect("client read");
                got
            },
            async {
                let mut got = Vec::new();
                // The client's half-close reaches the server as end of stream...
                far_server.read_to_end(&mut got).await.expect("server read");
                // ...while the other direction still carries the answer.
                far_server.write_all(&down).await.expect("server write");
                far_server.shutdown().await.expect("server half-close");
                got
            }
        );
        let mut expected = b"early:".to_vec();
        expected.extend_from_slice(&up);
        assert_eq!(server_side.len(), expected.len());
        assert!(server_side == expected, "the upstream got different bytes");
        assert!(client_side == down, "the client got different bytes");
        let ended = tokio::time::timeout(Duration::from_secs(10), task).await;
        assert!(
            ended.is_ok(),
            "the tunnel did not end after both half-closes"
        );
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_spliced_tunnel_keeps_its_pipe_while_bytes_move_and_gives_it_back_when_quiet() {
        let live = || splice::LIVE_PIPES.with(std::cell::Cell::get);
        let ((mut far_client, client), (upstream, mut far_server)) = socket_pairs().await;
        let task = tokio::spawn(splice::tunnel(
            client,
            Bytes::new(),
            upstream,
            Duration::from_secs(60),
        ));
        assert_eq!(live(), 0, "a pipe before any byte");
        for round in 0..2u8 {
            let down = pattern(3 << 20, round);
            let (_, got) = tokio::join!(
                async { far_server.write_all(&down).await.expect("server write") },
                async {
                    let mut got = vec![0u8; down.len()];
                    far_client.read_exact(&mut got).await.expect("client read");
                    got
                }
            );
            assert!(got == down, "round {round}: the client got different bytes");
            // The direction that moved bytes holds its pipe (the quiet one may hold one for a
            // moment too: tokio's readiness has false positives).
            assert!((1..=2).contains(&live()), "round {round}: {} pipes", live());
            tokio::time::sleep(splice::PIPE_LINGER * 4).await;
            assert_eq!(live(), 0, "round {round}: a quiet tunnel kept its pipe");
        }
        drop(far_client);
        drop(far_server);
        let ended = tokio::time::timeout(Duration::from_secs(10), task).await;
        assert!(ended.is_ok(), "the tunnel did not end");
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_quiet_spliced_tunnel_is_closed_after_its_idle_timeout() {
        let ((mut far_client, client), (upstream, _far_server)) = socket_pairs().await;
        let idle = Duration::from_millis(200);
        let ended = tokio::time::timeout(
            Duration::from_secs(10),
            splice::tunnel(client, Bytes::new(), upstream, idle),
        );
        assert!(ended.await.is_ok(), "the idle tunnel was not closed");
        // The tunnel's sockets are gone: the client sees end of stream.
        let mut buf = [0u8; 8];
        assert_eq!(far_client.read(&mut buf).await.ok(), Some(0));
    }

    /// SIGPIPEs delivered to this process (the test's counting handler).
    #[cfg(target_os = "linux")]
    static SIGPIPES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    #[cfg(target_os = "linux")]
    extern "C" fn count_sigpipe(_: libc::c_int) {
        SIGPIPES.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// A host that does not ignore SIGPIPE (C, Swift) must survive a client that is gone:
    /// `splice` into a socket shut for sending fails with `EPIPE`, and the kernel raises
    /// SIGPIPE in the writing thread. Here a counting handler stands for the default action
    /// (which would kill the test process); the tunnel must fail without delivering any.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_splice_into_a_gone_client_raises_no_sigpipe_in_the_host() {
        use std::os::fd::AsRawFd;
        // SAFETY: a handler that only bumps an atomic; the old action is restored below.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        let installed = unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = count_sigpipe as *const () as libc::sighandler_t;
            libc::sigemptyset(&mut act.sa_mask);
            libc::sigaction(libc::SIGPIPE, &act, &mut old)
        };
        assert_eq!(installed, 0, "sigaction");
        // One thread: the splices run on this test's thread, whose mask starts unblocked.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let ended = rt.block_on(async {
            let ((_far_client, client), (upstream, mut far_server)) = socket_pairs().await;
            // The client's socket can send no more (as after a consumed reset).
            // SAFETY: shutdown of a socket this test owns; its descriptor stays open.
            assert_eq!(
                unsafe { libc::shutdown(client.as_raw_fd(), libc::SHUT_WR) },
                0
            );
            far_server
                .write_all(&pattern(1 << 20, 3))
                .await
                .expect("server write");
            tokio::time::timeout(
                Duration::from_secs(10),
                splice::tunnel(client, Bytes::new(), upstream, Duration::from_secs(30)),
            )
            .await
        });
        // Nothing is left pending on this thread to be delivered later.
        // SAFETY: a local signal set filled by sigpending.
        let pending = unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigpending(&mut set);
            libc::sigismember(&set, libc::SIGPIPE)
        };
        // SAFETY: restores the action saved above.
        unsafe { libc::sigaction(libc::SIGPIPE, &old, std::ptr::null_mut()) };
        assert_eq!(pending, 0, "a SIGPIPE was left pending");
        assert!(ended.is_ok(), "the tunnel into a gone client did not end");
        assert_eq!(
            SIGPIPES.load(std::sync::atomic::Ordering::SeqCst),
            0,
            "a SIGPIPE reached the host"
        );
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_reset_upstream_ends_the_spliced_tunnel() {
        let ((_far_client, client), (upstream, far_server)) = socket_pairs().await;
        let task = tokio::spawn(splice::tunnel(
            client,
            Bytes::new(),
            upstream,
            Duration::from_secs(60),
        ));
        // An abortive close (RST) of the server's end.
        use std::os::fd::AsRawFd;
        let linger = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        // SAFETY: SO_LINGER with a valid struct on a socket this test owns.
        let set = unsafe {
            libc::setsockopt(
                far_server.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                (&raw const linger).cast(),
                std::mem::size_of::<libc::linger>() as libc::socklen_t,
            )
        };
        assert_eq!(set, 0, "SO_LINGER");
        drop(far_server);
        let ended = tokio::time::timeout(Duration::from_secs(10), task).await;
        assert!(ended.is_ok(), "a reset upstream left the tunnel open");
    }

    #[tokio::test]
    async fn a_quiet_tunnel_is_closed_after_its_idle_timeout() {
        let (client, mut far_client) = tokio::io::duplex(1024);
        let (upstream, _far_upstream) = tokio::io::duplex(1024);
        let idle = Duration::from_millis(200);
        let ended = tokio::time::timeout(Duration::from_secs(10), tunnel(client, upstream, idle));
        assert!(ended.await.is_ok(), "the idle tunnel was not closed");
        // The client's end sees the tunnel gone.
        let mut buf = [0u8; 8];
        assert_eq!(far_client.read(&mut buf).await.ok(), Some(0));
    }

    #[tokio::test]
    async fn a_tunnel_that_moves_bytes_stays_open_past_the_idle_timeout() {
        let (client, mut far_client) = tokio::io::duplex(1024);
        let (upstream, mut far_upstream) = tokio::io::duplex(1024);
        let idle = Duration::from_millis(300);
        let task = tokio::spawn(tunnel(client, upstream, idle));
        // One byte every 100 ms for 1.2 s: four idle periods, never idle.
        let mut buf = [0u8; 1];
        for _ in 0..12 {
            far_client.write_all(b"x").await.unwrap_or_default();
            assert_eq!(far_upstream.read(&mut buf).await.ok(), Some(1));
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(!task.is_finished(), "a busy tunnel was closed");
        // Then silence: it is closed.
        assert!(
            tokio::time::timeout(Duration::from_secs(10), task)
                .await
                .is_ok()
        );
    }
}
