//! `--notify-webhook URL`: one JSON POST per opened request, retried with backoff.
//!
//! A webhook only tells someone that a request is waiting: nothing it answers, and no
//! failure, resolves anything. The request stays pending (and expires as any other) whether
//! the POST got through or not. Only `http://` URLs are spoken (no TLS here): point it at ntfy
//! or a local relay; the payload shapes are below.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;

use crate::serve::OpenedRequest;

/// The JSON a webhook receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebhookFormat {
    /// `{request, approve_url, deny_url, expires_at}` (the opened request as is).
    Raw,
    /// An ntfy JSON publish: `{topic, title, message, actions: [view approve, view deny]}`
    /// (post it to the ntfy server's root URL; the topic is the URL's path).
    Ntfy,
    /// A Slack incoming webhook: `{text}` with the action and the two links.
    Slack,
}

impl WebhookFormat {
    /// Parse `raw`, `ntfy` or `slack`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "raw" => Some(WebhookFormat::Raw),
            "ntfy" => Some(WebhookFormat::Ntfy),
            "slack" => Some(WebhookFormat::Slack),
            _ => None,
        }
    }
}

/// Where and how to POST.
#[derive(Debug, Clone)]
pub struct Webhook {
    url: url::Url,
    format: WebhookFormat,
    /// Delivery attempts per request (at least 1).
    pub attempts: u32,
    /// The first retry's delay; each later one doubles, up to 60 s.
    pub base_delay: Duration,
}

/// The webhook URL cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("webhook URL `{url}`: {why}")]
pub struct WebhookUrlError {
    url: String,
    why: String,
}

impl Webhook {
    /// A webhook for `url` (must be `http://host[:port]/path`).
    pub fn new(url: &str, format: WebhookFormat) -> Result<Self, WebhookUrlError> {
        let err = |why: &str| WebhookUrlError {
            url: url.to_owned(),
            why: why.to_owned(),
        };
        let parsed = url::Url::parse(url).map_err(|e| err(&e.to_string()))?;
        if parsed.scheme() != "http" {
            return Err(err(
                "only http:// is supported (no TLS in turngate serve); use a local relay",
            ));
        }
        if parsed.host_str().is_none() {
            return Err(err("no host"));
        }
        Ok(Webhook {
            url: parsed,
            format,
            attempts: 8,
            base_delay: Duration::from_millis(500),
        })
    }

    /// The body for `opened`.
    pub fn payload(&self, opened: &OpenedRequest) -> serde_json::Value {
        let r = &opened.request;
        let what = format!(
            "{} wants {} on {}",
            crate::display::for_terminal(&r.tool_name),
            r.action_kind,
            crate::display::for_terminal(&r.details.target)
        );
        match self.format {
            WebhookFormat::Raw => serde_json::to_value(opened).unwrap_or_default(),
            WebhookFormat::Ntfy => {
                let topic = self.url.path().trim_start_matches('/').to_owned();
                let mut actions = Vec::new();
                for (label, url) in [("Approve", &opened.approve_url), ("Deny", &opened.deny_url)] {
                    if let Some(url) = url {
                        actions.push(
                            serde_json::json!({"action": "view", "label": label, "url": url}),
                        );
                    }
                }
                serde_json::json!({
                    "topic": topic,
                    "title": format!("turngate: approval {}", r.id),
                    "message": what,
                    "actions": actions,
                })
            }
            WebhookFormat::Slack => {
                let mut text = format!("turngate approval `{}`: {what}", r.id);
                if let Some(url) = &opened.approve_url {
                    text.push_str(&format!("\n<{url}|Review and approve>"));
                }
                if let Some(url) = &opened.deny_url {
                    text.push_str(&format!("\n<{url}|Review and deny>"));
                }
                serde_json::json!({ "text": text })
            }
        }
    }

    fn post_url(&self) -> String {
        match self.format {
            // ntfy's JSON publishing goes to the server's root.
            WebhookFormat::Ntfy => {
                let mut root = self.url.clone();
                root.set_path("/");
                root.to_string()
            }
            _ => self.url.to_string(),
        }
    }

    /// Deliver `opened`: up to `attempts` POSTs until one gets a 2xx. Returns the number of
    /// attempts made and whether one succeeded. Never resolves anything.
    pub async fn deliver(&self, opened: &OpenedRequest) -> (u32, bool) {
        let body = serde_json::to_vec(&self.payload(opened)).unwrap_or_default();
        let mut delay = self.base_delay;
        let attempts = self.attempts.max(1);
        for attempt in 1..=attempts {
            match self.post_once(&body, &opened.request.id).await {
                Ok(status) if (200..300).contains(&status) => return (attempt, true),
                Ok(status) => eprintln!(
                    "turngate serve: webhook attempt {attempt}/{attempts} for {}: HTTP {status}",
                    opened.request.id
                ),
                Err(e) => eprintln!(
                    "turngate serve: webhook attempt {attempt}/{attempts} for {}: {e}",
                    opened.request.id
                ),
            }
            if attempt < attempts {
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(60));
            }
        }
        (attempts, false)
    }

    async fn post_once(&self, body: &[u8], request_id: &str) -> Result<u16, String> {
        let url = url::Url::parse(&self.post_url()).map_err(|e| e.to_string())?;
        let host = url.host_str().ok_or("no host")?.to_owned();
        let port = url.port_or_known_default().unwrap_or(80);
        let connect = tokio::net::TcpStream::connect((host.trim_matches(['[', ']']), port));
        let stream = tokio::time::timeout(Duration::from_secs(10), connect)
            .await
            .map_err(|_| "connect timed out".to_owned())?
            .map_err(|e| format!("connect: {e}"))?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| format!("handshake: {e}"))?;
        let driver = tokio::spawn(conn);
        let mut path = url.path().to_owned();
        if let Some(q) = url.query() {
            path.push('?');
            path.push_str(q);
        }
        let authority = match url.port() {
            Some(p) => format!("{host}:{p}"),
            None => host.clone(),
        };
        let req = Request::post(path)
            .header("host", authority)
            .header("content-type", "application/json")
            .header("user-agent", "turngate-serve")
            .header("x-turngate-request-id", request_id)
            .body(Full::new(Bytes::copy_from_slice(body)))
            .map_err(|e| e.to_string())?;
        let result = tokio::time::timeout(Duration::from_secs(10), async {
            let resp = sender
                .send_request(req)
                .await
                .map_err(|e| format!("send: {e}"))?;
            let status = resp.status().as_u16();
            let _ = resp.into_body().collect().await;
            Ok::<u16, String>(status)
        })
        .await
        .map_err(|_| "timed out".to_owned())?;
        driver.abort();
        result
    }
}
