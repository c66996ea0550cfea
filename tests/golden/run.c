/* The golden calls through the C ABI: one JSON line per call (tests/golden/README.md). The
 * calls file is read with the ABI's own JSON helpers; results are printed as the ABI wrote
 * them. C has no batch check: `policy.check_batch` is one tg_policy_check per action. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "turngate.h"

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  if (s && fread(s, 1, (size_t)n, f) != (size_t)n) { free(s); s = NULL; }
  if (s) s[n] = 0;
  fclose(f);
  return s;
}

/* `text` with every `from` replaced by `to` (malloc'd). */
static char *replace(const char *text, const char *from, const char *to) {
  size_t n = 0, lf = strlen(from), lt = strlen(to);
  for (const char *p = strstr(text, from); p; p = strstr(p + lf, from)) n++;
  char *out = malloc(strlen(text) + n * lt + 1), *o = out;
  for (const char *p = text;;) {
    const char *q = strstr(p, from);
    if (!q) { strcpy(o, p); break; }
    memcpy(o, p, (size_t)(q - p)); o += q - p;
    memcpy(o, to, lt); o += lt;
    p = q + lf;
  }
  return out;
}

static void print_json_string(const char *s) {
  putchar('"');
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') printf("\\%c", *p);
    else if (*p == '\n') printf("\\n");
    else if (*p < 0x20) printf("\\u%04x", *p);
    else putchar(*p);
  }
  putchar('"');
}

static char *get(const char *json, const char *key) { /* member as JSON text, NULL if absent */
  char *out = NULL;
  if (tg_json_get(json, key, &out) != TG_STATUS_OK) return NULL;
  if (out && strcmp(out, "null") == 0) { tg_string_free(out); return NULL; }
  return out;
}

static char *str(const char *json, const char *key) { /* member as text, NULL if absent */
  char *out = NULL;
  if (tg_json_get_string(json, key, &out) != TG_STATUS_OK) return NULL;
  return out;
}

static const char *error_type(enum TgStatus s) {
  switch (s) {
    case TG_STATUS_POLICY: return "Policy";
    case TG_STATUS_SNAPSHOT: return "Snapshot";
    case TG_STATUS_STORE: return "Store";
    case TG_STATUS_SANDBOX_UNAVAILABLE: return "SandboxUnavailable";
    case TG_STATUS_APPROVAL: return "Approval";
    case TG_STATUS_RUN: return "Run";
    case TG_STATUS_CHANGES: return "Changes";
    default: return "InvalidInput";
  }
}

/* The scripted approver: `user_data` is the answer; every ask is kept in `asks`. */
static char asks[1 << 20];
static int32_t decide(void *user_data, const char *ask_json, char **out_decision_json) {
  size_t used = strlen(asks);
  snprintf(asks + used, sizeof asks - used, "%s%s", used > 1 ? "," : "", ask_json);
  *out_decision_json = strdup((const char *)user_data);
  return 0;
}

static enum TgStatus policy_of(const char *spec, TgPolicy **out) {
  char *mode = str(spec, "mode"), *json = get(spec, "json"), *tiered = get(spec, "tiered");
  enum TgStatus s = tiered ? tg_policy_tiered(NULL, NULL, out)
                    : mode ? tg_policy_from_mode(mode, out)
                           : tg_policy_from_json(json, NULL, out);
  tg_string_free(mode);
  tg_string_free(json);
  tg_string_free(tiered);
  return s;
}

static enum TgStatus gate_of(const char *args, const char *tmp, size_t i, TgGate **out) {
  char *approver = str(args, "approver"), *sel = get(args, "selection"), *ctx = get(args, "context");
  const char *answer = strcmp(approver, "deny") == 0 ? "{\"decision\": \"deny\", \"reason\": \"the golden approver said no\"}"
                       : strcmp(approver, "defer") == 0 ? "{\"decision\": \"defer\"}" : "{\"decision\": \"approve\"}";
  char *snap = NULL, path[4096];
  TgStore *store = NULL;
  TgApprover *a = NULL;
  snprintf(path, sizeof path, "%s/%zu.db", tmp, i);
  enum TgStatus s = tg_snapshot_resolve_json(sel, ctx, NULL, &snap);
  if (s == TG_STATUS_OK) s = tg_store_open(path, &store);
  if (s == TG_STATUS_OK) s = tg_approver_from_callback(decide, (void *)answer, NULL, &a);
  if (s == TG_STATUS_OK) s = tg_gate_new("golden", snap, store, a, out);
  tg_approver_free(a);
  tg_store_free(store);
  tg_string_free(snap);
  tg_string_free(approver);
  tg_string_free(sel);
  tg_string_free(ctx);
  return s;
}

/* Appends the bytes of `text` to `out` as a JSON array of numbers. */
static void append_bytes(char *out, const char *text) {
  strcat(out, "[");
  for (const unsigned char *p = (const unsigned char *)text; *p; p++)
    sprintf(out + strlen(out), "%s%u", p == (const unsigned char *)text ? "" : ",", *p);
  strcat(out, "]");
}

/* The filtered environment C writes (names and values as UTF-8 strings) with each name and
   value as the array of its bytes, the serde form of bytes the other drivers print. */
static char *env_bytes(const char *env) {
  char *vars = get(env, "vars"), *dropped = get(env, "dropped");
  size_t n = 0;
  tg_json_array_len(vars, &n);
  char *out = calloc(1, 5 * strlen(env) + strlen(dropped) + 64);
  strcat(out, "{\"vars\":[");
  for (size_t k = 0; k < n; k++) {
    char *v = NULL;
    tg_json_array_get(vars, k, &v);
    char *name = str(v, "name"), *value = str(v, "value");
    strcat(out, k ? ",{\"name\":" : "{\"name\":");
    append_bytes(out, name);
    strcat(out, ",\"value\":");
    append_bytes(out, value);
    strcat(out, "}");
    tg_string_free(name);
    tg_string_free(value);
    tg_string_free(v);
  }
  sprintf(out + strlen(out), "],\"dropped\":%s}", dropped);
  tg_string_free(vars);
  tg_string_free(dropped);
  return out;
}

/* Runs one call; on success `*out` is the result's JSON text (malloc'd). */
static enum TgStatus run(const char *call, const char *a, const char *tmp, size_t i, char **out) {
  enum TgStatus s = TG_STATUS_OK;
  char *kind = str(a, "kind"), *target = str(a, "target"), *tool = str(a, "tool");
  if (strncmp(call, "policy.", 7) == 0) {
    char *spec = get(a, "policy");
    TgPolicy *p = NULL;
    s = policy_of(spec, &p);
    if (s == TG_STATUS_OK && strcmp(call, "policy.explain") == 0) {
      s = tg_policy_explain_json(p, kind, target, tool, out);
    } else if (s == TG_STATUS_OK && strcmp(call, "policy.check") == 0) {
      TgEffect e;
      s = tg_policy_check(p, kind, target, tool, &e);
      if (s == TG_STATUS_OK) { *out = malloc(16); snprintf(*out, 16, "\"%s\"", tg_effect_name(e)); }
    } else if (s == TG_STATUS_OK) { /* policy.check_batch */
      char *actions = get(a, "actions");
      size_t n = 0;
      tg_json_array_len(actions, &n);
      *out = calloc(1, 16 * n + 3);
      strcat(*out, "[");
      for (size_t k = 0; k < n && s == TG_STATUS_OK; k++) {
        char *act = NULL;
        tg_json_array_get(actions, k, &act);
        char *ak = str(act, "kind"), *at = str(act, "target"), *tt = str(act, "tool");
        TgEffect e;
        s = tg_policy_check(p, ak, at, tt, &e);
        if (s == TG_STATUS_OK) sprintf(*out + strlen(*out), "%s\"%s\"", k ? "," : "", tg_effect_name(e));
        tg_string_free(ak); tg_string_free(at); tg_string_free(tt); tg_string_free(act);
      }
      strcat(*out, "]");
      tg_string_free(actions);
    }
    tg_policy_free(p);
    tg_string_free(spec);
  } else if (strcmp(call, "snapshot.resolve") == 0) {
    char *sel = get(a, "selection"), *ctx = get(a, "context");
    s = tg_snapshot_resolve_json(sel, ctx, NULL, out);
    tg_string_free(sel);
    tg_string_free(ctx);
  } else if (strcmp(call, "command.parse") == 0) {
    char *line = str(a, "line");
    s = tg_parse_command_line_json(line, out);
    tg_string_free(line);
  } else if (strcmp(call, "env.filter") == 0) {
    char *vars = get(a, "vars"), *mode = str(a, "mode"), *cwd = str(a, "cwd");
    char *roots = get(a, "untrusted_path_roots"), *env = NULL;
    s = tg_filter_env_json(vars, mode, cwd, roots, &env);
    if (s == TG_STATUS_OK) *out = env_bytes(env);
    tg_string_free(env);
    tg_string_free(vars);
    tg_string_free(mode);
    tg_string_free(cwd);
    tg_string_free(roots);
  } else if (strncmp(call, "gate.", 5) == 0) {
    TgGate *g = NULL;
    char *inv = get(a, "invocation");
    asks[0] = 0;
    s = gate_of(a, tmp, i, &g);
    if (s == TG_STATUS_OK && strcmp(call, "gate.evaluate") == 0) {
      s = tg_gate_evaluate_json(g, inv, out);
    } else if (s == TG_STATUS_OK) {
      char *auth = NULL;
      s = tg_gate_authorize_json(g, inv, &auth);
      if (s == TG_STATUS_OK) {
        size_t n = strlen(auth) + strlen(asks) + 64;
        *out = malloc(n);
        snprintf(*out, n, "{\"authorization\":%s,\"asks\":[%s]}", auth, asks);
      }
      tg_string_free(auth);
    }
    tg_gate_free(g);
    tg_string_free(inv);
  } else if (strcmp(call, "reduce_all") == 0) {
    char *inputs = get(a, "inputs");
    s = tg_reduce_all_json(NULL, inputs, out);
    tg_string_free(inputs);
  } else if (strcmp(call, "scope.from_action") == 0) {
    char *cwd = str(a, "cwd");
    s = tg_scope_from_action_json(kind, target, tool, cwd, out);
    tg_string_free(cwd);
  } else if (strcmp(call, "scope.hash") == 0) {
    char *scope = get(a, "scope"), *hash = NULL;
    s = tg_scope_hash(scope, &hash);
    if (s == TG_STATUS_OK) { *out = malloc(strlen(hash) + 3); sprintf(*out, "\"%s\"", hash); }
    tg_string_free(hash);
    tg_string_free(scope);
  } else if (strcmp(call, "changes.parse") == 0) {
    char *set = get(a, "change_set");
    s = tg_change_set_parse_json(set, out);
    tg_string_free(set);
  } else if (strcmp(call, "changes.show") == 0) {
    char *id = str(a, "id"), db[4096];
    TgStore *st = NULL;
    snprintf(db, sizeof db, "%s/%zu.db", tmp, i);
    s = tg_store_open(db, &st);
    if (s == TG_STATUS_OK) s = tg_store_change_set_json(st, id, out);
    tg_store_free(st);
    tg_string_free(id);
  } else {
    fprintf(stderr, "unknown call %s\n", call);
    exit(2);
  }
  tg_string_free(kind);
  tg_string_free(target);
  tg_string_free(tool);
  return s;
}

int main(int argc, char **argv) {
  const char *ws = getenv("GOLDEN_WS"), *tmp = getenv("GOLDEN_TMP");
  char *doc = argc > 1 ? slurp(argv[1]) : NULL;
  if (!doc || !ws || !tmp) { fprintf(stderr, "usage: GOLDEN_WS=.. GOLDEN_TMP=.. run CALLS.json\n"); return 2; }
  char *calls = get(doc, "calls");
  size_t n = 0;
  tg_json_array_len(calls, &n);
  for (size_t i = 0; i < n; i++) {
    char *c = NULL;
    tg_json_array_get(calls, i, &c);
    char *name = get(c, "name"), *call = str(c, "call"), *raw = get(c, "args");
    char *args = replace(raw, "$WS", ws), *out = NULL;
    enum TgStatus s = run(call, args, tmp, i, &out);
    printf("{\"name\":%s,", name);
    if (s == TG_STATUS_OK) {
      printf("\"result\":%s}\n", out);
    } else {
      printf("\"error\":{\"type\":\"%s\",\"message\":", error_type(s));
      print_json_string(tg_last_error_message());
      printf("}}\n");
    }
    free(out);
    free(args);
    tg_string_free(raw);
    tg_string_free(call);
    tg_string_free(name);
    tg_string_free(c);
  }
  tg_string_free(calls);
  free(doc);
  return 0;
}
