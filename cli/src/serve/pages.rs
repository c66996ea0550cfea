//! The HTML `turngate serve` shows: the approval page of a link, its result, and the console.
//! Every value is escaped; the pages work on a phone-sized screen.

use turngate::audit::StoredApproval;
use turngate::serve::LinkDecision;

/// `s` for HTML: first every character that could hide or reorder text shown escaped (as on a
/// terminal: `\r`, bidirectional overrides, zero-width characters, ...; what the button
/// approves must be what the page shows), then HTML-escaped.
fn esc(s: &str) -> String {
    let s = turngate::display::for_terminal(s);
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

const HEAD: &str = r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
 body { font: 16px system-ui, sans-serif; margin: 0; padding: 1rem; max-width: 40rem; word-wrap: break-word }
 h1 { font-size: 1.3rem }
 code, pre { background: #f3f3f3; padding: .1rem .3rem; border-radius: 4px; white-space: pre-wrap; word-break: break-all }
 dl { display: grid; grid-template-columns: max-content 1fr; gap: .3rem .8rem }
 dt { color: #555 }
 dd { margin: 0; min-width: 0 }
 button { font-size: 1.1rem; padding: .8rem 1.2rem; width: 100%; margin-top: 1rem; border-radius: 8px; border: 0 }
 .approve { background: #1a7f37; color: #fff }
 .deny { background: #b42318; color: #fff }
 .prompt { border: 1px solid #c80; padding: .6rem; margin: .4rem 0; border-radius: 6px }
 .prompt button { width: auto; margin-right: .4rem; font-size: 1rem; padding: .5rem .8rem; background: #eee }
 .row { padding: .2rem 0; border-bottom: 1px solid #eee }
</style>"#;

/// A page with a title and one sentence.
pub fn message(title: &str, text: &str) -> String {
    format!(
        "{HEAD}<title>turngate: {t}</title></head><body><h1 id=\"title\">{t}</h1><p id=\"message\">{m}</p></body></html>",
        t = esc(title),
        m = esc(text)
    )
}

/// The page of an approval link: exactly the stored action that runs if it is approved, and
/// one button that POSTs the decision. Opening it (a GET) changes nothing.
pub fn approval(stored: &StoredApproval, decision: LinkDecision, token: &str) -> String {
    let r = &stored.request;
    let mut rows = vec![
        ("Tool", esc(&r.tool_name)),
        (
            "Action",
            format!("<code>{}</code>", esc(stored.action.kind.as_str())),
        ),
        (
            "Target",
            format!("<code id=\"target\">{}</code>", esc(&stored.action.target)),
        ),
    ];
    if stored.action.target != r.details.target {
        rows.push((
            "Shown as",
            format!("<code>{}</code>", esc(&r.details.target)),
        ));
    }
    for line in &r.details.lines {
        rows.push((
            "",
            format!(
                "<b>{}</b>: <code>{}</code>",
                esc(&line.label),
                esc(&line.value)
            ),
        ));
    }
    if let Some(s) = &r.summary {
        rows.push(("Summary", esc(s)));
    }
    rows.push(("Why asked", esc(r.reason.as_str())));
    rows.push(("Turn", format!("<code>{}</code>", esc(&r.turn_id))));
    rows.push(("Request", format!("<code>{}</code>", esc(&r.id))));
    let dl: String = rows
        .into_iter()
        .map(|(k, v)| format!("<dt>{}</dt><dd>{v}</dd>", esc(k)))
        .collect();
    let (label, class, verb) = match decision {
        LinkDecision::Approve => ("Approve once", "approve", "approve"),
        LinkDecision::Deny => ("Deny", "deny", "deny"),
    };
    format!(
        "{HEAD}<title>turngate: {verb} {id}?</title></head><body>\
         <h1 id=\"title\">{verb_cap} this action?</h1>\
         <dl>{dl}</dl>\
         <form method=\"post\">\
         <input type=\"hidden\" name=\"token\" value=\"{token}\">\
         <input type=\"hidden\" name=\"action\" value=\"{verb}\">\
         <button type=\"submit\" id=\"decide\" class=\"{class}\">{label}</button>\
         </form></body></html>",
        id = esc(&r.id),
        verb_cap = if verb == "approve" { "Approve" } else { "Deny" },
        token = esc(token),
    )
}

/// The console: the turns' pending prompts and timeline as the shared reducers project every
/// notification (`console/state`), refreshed on each WebSocket notification, answered through
/// `turn/permission/request/respond` on the same socket.
pub fn console() -> String {
    format!(
        "{HEAD}<title>turngate approvals</title></head><body>
<h1>turngate approvals</h1>
<p id=\"status\">connecting…</p>
<h2>Pending approvals</h2><div id=\"prompts\"><p id=\"no-prompts\">None.</p></div>
<h2>Timeline</h2><div id=\"timeline\"></div>
<script>{CONSOLE_JS}</script></body></html>"
    )
}

const CONSOLE_JS: &str = r#"
// As turngate's display::for_terminal: characters that hide or reorder text are shown escaped.
const shown = (s) => String(s).replace(/[\\\u0000-\u0008\u000a-\u001f\u007f-\u009f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/g, (c) =>
  c === '\\' ? '\\\\' : c === '\n' ? '\\n' : c === '\r' ? '\\r' : c.charCodeAt(0) < 0x100 ? '\\x' + c.charCodeAt(0).toString(16).padStart(2, '0') : '\\u{' + c.charCodeAt(0).toString(16).padStart(4, '0') + '}')
const esc = (s) => shown(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c])
const LABELS = { allow_once: 'Allow once', allow_for_turn: 'Allow for turn', deny: 'Deny' }
const token = new URLSearchParams(location.search).get('access_token') || ''
const ws = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/ws?access_token=' + encodeURIComponent(token))
let next = 1
const calls = new Map()
function call(method, params) {
  const id = next++
  ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }))
  return new Promise((resolve) => calls.set(id, resolve))
}
window.respond = async (id, resolution) => { await call('turn/permission/request/respond', { request_id: id, resolution }); refresh() }
function render(s) {
  const prompts = s.state.prompts.map((p) =>
    '<div class="prompt" data-request-id="' + esc(p.id) + '"><b>' + esc(p.tool_name) + '</b> wants <code>' +
    esc(p.action_kind) + '</code> on <code>' + esc(p.details.target ?? '') + '</code> (' + esc(p.reason) + ')<br>' +
    p.allowed_resolutions.filter((r) => LABELS[r]).map((r) =>
      '<button data-resolution="' + r + '" onclick="respond(\'' + esc(p.id) + '\', \'' + r + '\')">' + LABELS[r] + '</button>').join('') +
    '</div>').join('')
  document.getElementById('prompts').innerHTML = prompts || '<p id="no-prompts">None.</p>'
  document.getElementById('timeline').innerHTML = s.state.timeline.map((r) =>
    '<div class="row" data-kind="' + esc(r.kind) + '">' + esc(r.turn_id) + ' #' + esc(r.seq) + '. ' + esc(r.title) + (r.cached_approval_used ? ' (cached approval)' : '') + '</div>').join('')
}
async function refresh() { render(await call('console/state', {})) }
ws.onopen = () => { document.getElementById('status').textContent = 'connected'; refresh() }
ws.onclose = () => { document.getElementById('status').textContent = 'disconnected' }
ws.onmessage = (m) => {
  const msg = JSON.parse(m.data)
  if (msg.id !== undefined && calls.has(msg.id)) { calls.get(msg.id)(msg.result); calls.delete(msg.id) }
  else if (msg.method) refresh()
}
"#;
