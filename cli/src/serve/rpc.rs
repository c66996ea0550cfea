//! JSON-RPC 2.0 framing and dispatch for `turngate serve`: parse one request, call the core's
//! [`Serve`], shape the result. Nothing here decides a permission.

use std::path::PathBuf;

use serde::Deserialize;
use serde_json::{Value, json};
use turngate::approval::ApprovalResolution;
use turngate::gate::ToolInvocation;
use turngate::protocol::{TurnPermissionProfileSelection, TurnPermissionProfileSource};
use turngate::serve::{Serve, ServeError};
use turngate::snapshot::{ResolveContext, resolve};
use turngate::{ActionKind, PermissionMode, Policy};

/// The largest request line (or WebSocket message, or HTTP body) accepted: 1 MiB.
pub const MAX_REQUEST: usize = 1 << 20;

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
/// Server errors (the JSON-RPC range -32000..-32099).
pub const UNKNOWN_TURN: i64 = -32001;
pub const UNKNOWN_REQUEST: i64 = -32002;
pub const REFUSED: i64 = -32003;
pub const SERVER_ERROR: i64 = -32000;

#[derive(Debug)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
        }
    }
}

impl From<ServeError> for RpcError {
    fn from(e: ServeError) -> Self {
        let code = match &e {
            ServeError::UnknownTurn(_) => UNKNOWN_TURN,
            ServeError::UnknownRequest(_) => UNKNOWN_REQUEST,
            ServeError::BadTurnId(_) => INVALID_PARAMS,
            ServeError::DuplicateTurn(_)
            | ServeError::ResolutionNotAllowed { .. }
            | ServeError::ScopeChanged { .. }
            | ServeError::AlreadyResolved { .. }
            | ServeError::Link(_)
            | ServeError::LinksDisabled => REFUSED,
            _ => SERVER_ERROR,
        };
        RpcError::new(code, e.to_string())
    }
}

/// The error response for `id`.
pub fn error_response(id: Value, e: &RpcError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": e.code, "message": e.message}})
}

fn params<T: for<'de> Deserialize<'de>>(p: Value) -> Result<T, RpcError> {
    let p = if p.is_null() { json!({}) } else { p };
    serde_json::from_value(p)
        .map_err(|e| RpcError::new(INVALID_PARAMS, format!("invalid params: {e}")))
}

fn to_json<T: serde::Serialize>(v: &T) -> Result<Value, RpcError> {
    serde_json::to_value(v).map_err(|e| RpcError::new(INTERNAL_ERROR, e.to_string()))
}

/// One line (or message, or body): the response to send, if any (a notification gets none;
/// a parse error or an invalid request always gets one, with id null when unknown).
pub async fn handle(serve: &Serve, text: &[u8]) -> Option<Value> {
    let value: Value = match serde_json::from_slice(text) {
        Ok(v) => v,
        Err(e) => {
            return Some(error_response(
                Value::Null,
                &RpcError::new(PARSE_ERROR, format!("parse error: {e}")),
            ));
        }
    };
    let Value::Object(mut obj) = value else {
        let why = if value.is_array() {
            "batches are not supported: send one request per line"
        } else {
            "a request is a JSON object"
        };
        return Some(error_response(
            Value::Null,
            &RpcError::new(INVALID_REQUEST, why),
        ));
    };
    let id = obj.remove("id");
    let id_ok = matches!(
        &id,
        None | Some(Value::String(_) | Value::Number(_) | Value::Null)
    );
    let reply_id = if id_ok {
        id.clone().unwrap_or(Value::Null)
    } else {
        Value::Null
    };
    if !id_ok || obj.get("jsonrpc") != Some(&json!("2.0")) {
        return Some(error_response(
            reply_id,
            &RpcError::new(
                INVALID_REQUEST,
                "invalid request: needs \"jsonrpc\": \"2.0\", a string method and a string or number id",
            ),
        ));
    }
    let Some(Value::String(method)) = obj.remove("method") else {
        return Some(error_response(
            reply_id,
            &RpcError::new(INVALID_REQUEST, "invalid request: no method"),
        ));
    };
    let p = obj.remove("params").unwrap_or(Value::Null);
    if !(p.is_object() || p.is_null()) {
        return Some(error_response(
            reply_id,
            &RpcError::new(INVALID_PARAMS, "params must be an object"),
        ));
    }
    let result = dispatch(serve, &method, p).await;
    let id = id?;
    Some(match result {
        Ok(v) => json!({"jsonrpc": "2.0", "id": id, "result": v}),
        Err(e) => error_response(id, &e),
    })
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileParams {
    #[serde(default)]
    mode: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StartParams {
    #[serde(default)]
    turn_id: Option<String>,
    #[serde(default)]
    profile: Option<ProfileParams>,
    workspace: PathBuf,
    #[serde(default)]
    project_roots: Vec<PathBuf>,
    #[serde(default)]
    policy: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AuthorizeParams {
    turn_id: String,
    kind: String,
    target: String,
    #[serde(default)]
    tool: Option<String>,
    #[serde(default)]
    tool_call_id: Option<String>,
    #[serde(default)]
    item_id: Option<String>,
    #[serde(default)]
    cwd: Option<PathBuf>,
    #[serde(default)]
    wait: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RespondParams {
    request_id: String,
    resolution: String,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    decider: Option<String>,
    /// The scope the responder was shown; refused when the request's differs.
    #[serde(default)]
    scope_hash: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TurnParams {
    turn_id: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListParams {
    #[serde(default)]
    turn_id: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NoParams {}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpawnParams {
    turn_id: String,
    command_line: String,
}

fn invalid(e: impl std::fmt::Display) -> RpcError {
    RpcError::new(INVALID_PARAMS, e.to_string())
}

fn snapshot_for(
    p: &StartParams,
) -> Result<turngate::protocol::TurnExecutionSecuritySnapshot, RpcError> {
    let mode = match p.profile.as_ref().and_then(|p| p.mode.as_deref()) {
        Some(m) => Some(m.parse::<PermissionMode>().map_err(invalid)?),
        None => None,
    };
    let policy = match &p.policy {
        Some(v) => Some(Policy::from_json_value(v.clone()).map_err(invalid)?),
        None => None,
    };
    let selection =
        (mode.is_some() || policy.is_some()).then_some(TurnPermissionProfileSelection {
            mode,
            source: Some(TurnPermissionProfileSource::Composer),
            policy,
        });
    let workspace = std::fs::canonicalize(&p.workspace)
        .map_err(|e| invalid(format!("workspace {}: {e}", p.workspace.display())))?;
    let mut context = ResolveContext::new(workspace, turngate::probe::probe_platform());
    for root in &p.project_roots {
        context.project_roots.push(
            std::fs::canonicalize(root)
                .map_err(|e| invalid(format!("project root {}: {e}", root.display())))?,
        );
    }
    resolve(selection.as_ref(), &context, None).map_err(invalid)
}

async fn dispatch(serve: &Serve, method: &str, p: Value) -> Result<Value, RpcError> {
    match method {
        "turn/start" => {
            let p: StartParams = params(p)?;
            let snapshot = snapshot_for(&p)?;
            let gate = serve.start_turn(p.turn_id.clone(), snapshot)?;
            Ok(json!({"turn_id": gate.turn_id(), "snapshot": to_json(gate.snapshot())?}))
        }
        "turn/action/authorize" => {
            let p: AuthorizeParams = params(p)?;
            let kind: ActionKind = p.kind.parse().map_err(invalid)?;
            let mut inv = ToolInvocation::new(kind, p.target);
            inv.tool_name = p.tool;
            inv.tool_id = p.tool_call_id;
            inv.item_id = p.item_id;
            inv.cwd = p.cwd;
            let (auth, opened) = serve
                .authorize(&p.turn_id, &inv, p.wait.unwrap_or(true))
                .await?;
            let record = turngate_ffi::gate::authorization(auth)
                .map_err(|e| RpcError::new(INTERNAL_ERROR, e.to_string()))?;
            let mut v = to_json(&record)?;
            if let (Some(o), Some(obj)) = (opened, v.as_object_mut()) {
                obj.insert("request_id".to_owned(), json!(o.request.id));
                if let Some(u) = o.approve_url {
                    obj.insert("approve_url".to_owned(), json!(u));
                }
                if let Some(u) = o.deny_url {
                    obj.insert("deny_url".to_owned(), json!(u));
                }
            }
            Ok(v)
        }
        "turn/permission/request/respond" => {
            let p: RespondParams = params(p)?;
            let resolution: ApprovalResolution = p.resolution.parse().map_err(invalid)?;
            let (recorded, applied) = serve.respond(
                &p.request_id,
                resolution,
                p.reason,
                p.decider,
                p.scope_hash.as_deref(),
            )?;
            Ok(json!({"resolution": recorded.resolution, "applied": applied}))
        }
        "turn/permission/requests/list" => {
            let p: ListParams = params(p)?;
            let pending = serve.pending(p.turn_id.as_deref())?;
            Ok(json!({"requests": to_json(&pending)?}))
        }
        "turn/events" => {
            let p: TurnParams = params(p)?;
            Ok(json!({"events": to_json(&serve.events(&p.turn_id)?)?}))
        }
        "turn/spawn" => {
            let p: SpawnParams = params(p)?;
            let result = serve.spawn(&p.turn_id, &p.command_line).await?;
            let record = turngate_ffi::gate::spawn_record(result)
                .map_err(|e| RpcError::new(INTERNAL_ERROR, e.to_string()))?;
            to_json(&record)
        }
        "turn/end" => {
            let p: TurnParams = params(p)?;
            Ok(json!({"cancelled": serve.end_turn(&p.turn_id)?}))
        }
        "console/state" => {
            let _: NoParams = params(p)?;
            Ok(json!({"turns": serve.turn_ids(), "state": to_json(&serve.client_state())?}))
        }
        other => Err(RpcError::new(
            METHOD_NOT_FOUND,
            format!("method not found: {other}"),
        )),
    }
}
