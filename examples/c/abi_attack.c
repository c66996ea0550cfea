/*
 * An attack on the C ABI's argument handling (bindings/include/turngate.h), kept as a test.
 *
 *   abi_attack DIR    make a fresh workspace under DIR (mkdtemp) and, for every exported tg_*
 *                     function that takes a pointer, call it with valid arguments and then
 *                     with each pointer argument broken in turn.
 *
 * Each break is one call: NULL for each pointer argument (inputs and outs), invalid UTF-8 for
 * each string argument, malformed JSON for each JSON argument, and a JSON record with an
 * unknown field for each record argument. A break must fail with the right status, name the
 * argument in tg_last_error_message(), and leave every out-pointer cleared (NULL, 0, -1, or
 * TG_EFFECT_DENY for an effect); a NULL optional argument must not be refused as NULL. Nothing
 * may panic. It also checks that each tg_*_free accepts NULL, that a failed constructor leaves
 * its handle NULL (and that NULL handle is refused by name), and that the last error's
 * message, code and paths are reset by the next call and belong to the calling thread.
 *
 * Built with -fsanitize=address,undefined by scripts/test-c, so a double free, a use after
 * free or a leak across the boundary fails it too. Exits 0 when every check passes, 1
 * otherwise (each failure is printed).
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_support.h"

static int calls = 0;

/* Member `key` of `json` as JSON text (tg_string_free), or NULL. */
static char *jget(const char *json, const char *key) {
  char *out = NULL;
  if (json) ok(tg_json_get(json, key, &out), key);
  return out;
}

static char *jstr(const char *json, const char *key) {
  char *out = NULL;
  if (json) ok(tg_json_get_string(json, key, &out), key);
  return out;
}

/* ---- the argument model --------------------------------------------------------------------- */

typedef enum {
  A_STR,       /* a required string */
  A_OPT_STR,   /* an optional string (NULL allowed) */
  A_JSON,      /* a required JSON text (any value: malformed JSON is refused) */
  A_OPT_JSON,  /* an optional JSON text */
  A_REC,       /* a required JSON record: malformed JSON and an unknown field are refused */
  A_OPT_REC,   /* an optional JSON record */
  A_TEXT,      /* a required policy text (JSON or TOML): malformed and unknown fields refused */
  A_HANDLE,    /* a required handle */
  A_FN,        /* a required function pointer (valid: non-NULL) */
  A_OPT_PTR,   /* an optional pointer or function pointer (user data, a free function) */
  O_STR,       /* char ** out */
  O_HANDLE,    /* handle ** out */
  O_SIZE,      /* size_t * out */
  O_I32,       /* int32_t * out */
  O_U64,       /* uint64_t * out */
  O_EFFECT,    /* TgEffect * out */
  O_FD,        /* int * out */
} Type;

typedef struct {
  Type type;
  const char *name;      /* the parameter's name in the header, which an error must name */
  const void *valid;     /* a valid value (inputs) */
  const char *malformed; /* for A_TEXT: a text that does not parse */
  const char *unknown;   /* A_TEXT, or a record whose first object is not the one to extend:
                          * the text with an unknown field */
  void (*release)(void *); /* O_HANDLE: releases a handle written on success */
} Arg;

#define MAX_ARGS 7

/* What a call wrapper receives: inputs as their pointer value, outs as a pointer to a Slot. */
typedef TgStatus (*Call)(void *const *a);

typedef struct {
  const char *fn;
  Call call;
  int baseline; /* 1: the valid call must succeed; 0: it may fail (state, unknown ids) */
  Arg args[MAX_ARGS];
} Spec;

typedef union {
  char *s;
  void *h;
  size_t n;
  int32_t i32;
  uint64_t u64;
  TgEffect e;
  int fd;
} Slot;

static int is_out(Type t) { return t >= O_STR; }
static int is_string(Type t) {
  return t == A_STR || t == A_OPT_STR || t == A_JSON || t == A_OPT_JSON || t == A_REC ||
         t == A_OPT_REC || t == A_TEXT;
}
static int is_optional(Type t) {
  return t == A_OPT_STR || t == A_OPT_JSON || t == A_OPT_REC || t == A_OPT_PTR;
}
static int is_json(Type t) { return t == A_JSON || t == A_OPT_JSON; }
static int is_record(Type t) { return t == A_REC || t == A_OPT_REC || t == A_TEXT; }

static int nargs(const Spec *s) {
  int n = 0;
  while (n < MAX_ARGS && s->args[n].name) n++;
  return n;
}

/* Distinct non-zero values an out must not keep after a failure. */
static char sentinel_text[] = "stale";
static int sentinel_handle;
#define STALE_N ((size_t)0x5eed)
#define STALE_I32 ((int32_t)0x5eed)
#define STALE_U64 ((uint64_t)0x5eed)
#define STALE_FD 4242

static void stale(Slot *slot, Type t) {
  switch (t) {
    case O_STR: slot->s = sentinel_text; break;
    case O_HANDLE: slot->h = &sentinel_handle; break;
    case O_SIZE: slot->n = STALE_N; break;
    case O_I32: slot->i32 = STALE_I32; break;
    case O_U64: slot->u64 = STALE_U64; break;
    case O_EFFECT: slot->e = TG_EFFECT_ALLOW; break;
    case O_FD: slot->fd = STALE_FD; break;
    default: break;
  }
}

/* Whether an out was cleared as a failure must clear it. */
static int cleared(const Slot *slot, Type t) {
  switch (t) {
    case O_STR: return slot->s == NULL;
    case O_HANDLE: return slot->h == NULL;
    case O_SIZE: return slot->n == 0;
    case O_I32: return slot->i32 == 0;
    case O_U64: return slot->u64 == 0;
    case O_EFFECT: return slot->e == TG_EFFECT_DENY;
    case O_FD: return slot->fd == -1;
    default: return 1;
  }
}

/* Releases what a successful call wrote. */
static void release(const Arg *arg, Slot *slot) {
  if (arg->type == O_STR && slot->s != sentinel_text) tg_string_free(slot->s);
  if (arg->type == O_HANDLE && slot->h != &sentinel_handle && slot->h && arg->release)
    arg->release(slot->h);
  if (arg->type == O_FD && slot->fd >= 0 && slot->fd != STALE_FD) close(slot->fd);
}

/* A JSON object text with `"zz_unknown_field": 1` added to its first object. */
static char *with_unknown_field(const char *json) {
  const char *brace = strchr(json, '{');
  if (!brace) return NULL;
  const char *rest = brace + 1;
  while (*rest == ' ' || *rest == '\n') rest++;
  return fmt("%.*s\"zz_unknown_field\": 1%s%s", (int)(brace + 1 - json), json,
             *rest == '}' ? "" : ", ", brace + 1);
}

static const char INVALID_UTF8[] = "ok\xff\xfe\xc3\x28";
static const char MALFORMED_JSON[] = "{\"a\": [1, 2";

typedef enum { B_NONE, B_NULL, B_UTF8, B_MALFORMED, B_UNKNOWN } Break;
static const char *break_name[] = {"valid", "NULL", "invalid UTF-8", "malformed JSON",
                                   "an unknown field"};
static int calls_by_break[5];

/* Whether `msg` names the argument `name` as the subject of a JSON failure: as spelled, with
 * spaces for underscores (`change set`), or without a `_json` suffix (`history`). */
static int names(const char *msg, const char *name) {
  char spaced[64], stem[64];
  snprintf(spaced, sizeof spaced, "%s", name);
  for (char *p = spaced; *p; p++)
    if (*p == '_') *p = ' ';
  snprintf(stem, sizeof stem, "%s", name);
  size_t n = strlen(stem);
  if (n > 5 && strcmp(stem + n - 5, "_json") == 0) stem[n - 5] = '\0';
  snprintf(stem + strlen(stem), sizeof stem - strlen(stem), ": ");
  return contains(msg, name) || contains(msg, spaced) || contains(msg, stem);
}

/* One call of `s` with argument `which` broken by `how`; checks the outcome. */
static void attack_one(const Spec *s, int which, Break how) {
  int n = nargs(s);
  Slot slots[MAX_ARGS];
  void *a[MAX_ARGS];
  char *owned = NULL;
  for (int i = 0; i < n; i++) {
    const Arg *arg = &s->args[i];
    memset(&slots[i], 0, sizeof slots[i]);
    if (is_out(arg->type)) {
      stale(&slots[i], arg->type);
      a[i] = &slots[i];
    } else {
      a[i] = (void *)arg->valid;
    }
  }
  const Arg *target = which >= 0 ? &s->args[which] : NULL;
  switch (how) {
    case B_NONE: break;
    case B_NULL: a[which] = NULL; break;
    case B_UTF8: a[which] = (void *)INVALID_UTF8; break;
    case B_MALFORMED:
      a[which] = (void *)(target->malformed ? target->malformed : MALFORMED_JSON);
      break;
    case B_UNKNOWN:
      owned = target->unknown ? fmt("%s", target->unknown) : with_unknown_field(target->valid);
      if (!owned) {
        FAIL("%s: no object in the valid `%s` to add a field to", s->fn, target->name);
        return;
      }
      a[which] = owned;
      break;
  }

  TgStatus st = s->call(a);
  calls++;
  calls_by_break[how]++;
  const char *last = tg_last_error_message();
  CHECK(last != NULL, "%s: tg_last_error_message() is NULL", s->fn);
  const char *msg = last ? last : "(null)";
  const char *what = break_name[how];
  const char *name = target && target->name ? target->name : "";
  char quoted[96];
  snprintf(quoted, sizeof quoted, "`%s`", name);

  CHECK(st != TG_STATUS_PANIC, "%s with %s %s: a panic crossed as a status: %s", s->fn, what,
        name, msg);
  if (how == B_NONE || (how == B_NULL && is_optional(target->type))) {
    if (how == B_NONE && s->baseline)
      CHECK(st == TG_STATUS_OK, "%s with valid arguments: status %d: %s", s->fn, (int)st, msg);
    if (how == B_NULL)
      CHECK(st != TG_STATUS_NULL_ARGUMENT,
            "%s with NULL %s (optional): refused as a NULL argument: %s", s->fn, name, msg);
    if (st == TG_STATUS_OK)
      CHECK(strcmp(msg, "") == 0, "%s succeeded but the last error is '%s'", s->fn, msg);
  } else {
    TgStatus want = how == B_NULL ? TG_STATUS_NULL_ARGUMENT
                  : how == B_UTF8 ? TG_STATUS_UTF8
                  : target->type == A_TEXT ? TG_STATUS_POLICY
                                           : TG_STATUS_INVALID;
    CHECK(st == want, "%s with %s %s: expected status %d, got %d: %s", s->fn, what, name,
          (int)want, (int)st, msg);
    /* NULL and UTF-8 failures quote the argument; JSON failures name it as their subject
     * (a policy text's errors name the policy and its origin). */
    int plain = how == B_NULL || how == B_UTF8;
    const char *named = plain ? quoted : target->type == A_TEXT ? "policy" : name;
    CHECK(plain ? contains(msg, named) : names(msg, named),
          "%s with %s %s: the message does not name %s: %s", s->fn, what, name, named, msg);
    if (how == B_UNKNOWN)
      CHECK(contains(msg, "zz_unknown_field"),
            "%s with %s in %s: the message does not name the field: %s", s->fn, what, name,
            msg);
    CHECK(strcmp(tg_last_error_code(), "") == 0 && strcmp(tg_last_error_paths_json(), "[]") == 0,
          "%s with %s %s: a stale error code '%s' or paths %s", s->fn, what, name,
          tg_last_error_code(), tg_last_error_paths_json());
    for (int i = 0; i < n; i++) {
      if (!is_out(s->args[i].type) || a[i] == NULL) continue;
      CHECK(cleared(&slots[i], s->args[i].type),
            "%s with %s %s: out %s was not cleared on failure", s->fn, what, name,
            s->args[i].name);
    }
  }
  for (int i = 0; i < n; i++)
    if (is_out(s->args[i].type) && a[i] != NULL) release(&s->args[i], &slots[i]);
  free(owned);
}

/* Every break of every pointer argument of `s`. */
static void attack(const Spec *s) {
  attack_one(s, -1, B_NONE);
  for (int i = 0; i < nargs(s); i++) {
    Type t = s->args[i].type;
    attack_one(s, i, B_NULL);
    if (is_string(t)) attack_one(s, i, B_UTF8);
    if (is_json(t) || is_record(t)) attack_one(s, i, B_MALFORMED);
    if (is_record(t)) attack_one(s, i, B_UNKNOWN);
  }
}

/* ---- the call wrappers ---------------------------------------------------------------------- */

#define S(i) ((const char *)a[i])
#define OS(i) ((char **)a[i])
#define POL(i) ((const TgPolicy *)a[i])
#define STO(i) ((const TgStore *)a[i])
#define GAT(i) ((const TgGate *)a[i])
#define APR(i) ((const TgApprover *)a[i])
#define CALL(name, body)                                                                   \
  static TgStatus call_##name(void *const *a) { return body; }

static void free_policy(void *h) { tg_policy_free(h); }
static void free_store(void *h) { tg_store_free(h); }
static void free_approver(void *h) { tg_approver_free(h); }
static void free_gate(void *h) { tg_gate_free(h); }

static int decide_calls = 0, user_data_frees = 0;
static int32_t decide(void *user_data, const char *ask_json, char **out_decision_json) {
  (void)user_data;
  (void)ask_json;
  decide_calls++;
  *out_decision_json = strdup("{\"decision\": \"deny\"}");
  return 0;
}
static void free_user_data(void *user_data) {
  (void)user_data;
  user_data_frees++;
}

CALL(json_array_len, tg_json_array_len(S(0), (size_t *)a[1]))
CALL(json_array_get, tg_json_array_get(S(0), 0, OS(1)))
CALL(json_get, tg_json_get(S(0), S(1), OS(2)))
CALL(json_get_string, tg_json_get_string(S(0), S(1), OS(2)))
CALL(json_equal, tg_json_equal(S(0), S(1), (int32_t *)a[2]))
CALL(approver_builtin, tg_approver_builtin(S(0), (TgApprover **)a[1]))
CALL(approver_from_callback,
     tg_approver_from_callback(a[0] ? decide : NULL, a[1], a[2] ? free_user_data : NULL,
                               (TgApprover **)a[3]))
CALL(check_file, tg_check_file_json(S(0), POL(1), S(2), S(3), S(4), OS(5)))
CALL(check_network, tg_check_network_json(S(0), POL(1), S(2), S(3), OS(4)))
CALL(resolve_and_check_network,
     tg_resolve_and_check_network_json(S(0), POL(1), S(2), S(3), OS(4)))
CALL(plan_spawn, tg_plan_spawn_json(S(0), S(1), POL(2), S(3), OS(4)))
CALL(filter_env, tg_filter_env_json(S(0), S(1), S(2), S(3), OS(4)))
CALL(parse_command_line, tg_parse_command_line_json(S(0), OS(1)))
CALL(evaluate, tg_evaluate_json(S(0), S(1), OS(2)))
CALL(gate_new, tg_gate_new(S(0), S(1), STO(2), APR(3), (TgGate **)a[4]))
CALL(gate_turn_id, tg_gate_turn_id(GAT(0), OS(1)))
CALL(gate_snapshot, tg_gate_snapshot_json(GAT(0), OS(1)))
CALL(gate_evaluate, tg_gate_evaluate_json(GAT(0), S(1), OS(2)))
CALL(gate_authorize, tg_gate_authorize_json(GAT(0), S(1), OS(2)))
CALL(gate_resume, tg_gate_resume_json(GAT(0), S(1), S(2), OS(3)))
CALL(gate_spawn, tg_gate_spawn_json(GAT(0), S(1), OS(2)))
CALL(gate_resume_spawn, tg_gate_resume_spawn_json(GAT(0), S(1), S(2), OS(3)))
CALL(gate_run_approved, tg_gate_run_approved_json(GAT(0), S(1), OS(2)))
CALL(gate_open_read, tg_gate_open_read(GAT(0), S(1), (int *)a[2], OS(3)))
CALL(gate_open_write, tg_gate_open_write(GAT(0), S(1), (int *)a[2], OS(3)))
CALL(gate_resolve_and_check, tg_gate_resolve_and_check_json(GAT(0), S(1), S(2), OS(3)))
CALL(gate_grant_for_turn, tg_gate_grant_for_turn(GAT(0), S(1)))
CALL(policy_from_json, tg_policy_from_json(S(0), S(1), (TgPolicy **)a[2]))
CALL(policy_from_toml, tg_policy_from_toml(S(0), S(1), (TgPolicy **)a[2]))
CALL(policy_from_mode, tg_policy_from_mode(S(0), (TgPolicy **)a[1]))
CALL(policy_tiered, tg_policy_tiered(S(0), S(1), (TgPolicy **)a[2]))
CALL(policy_permissive, tg_policy_permissive((TgPolicy **)a[0]))
CALL(policy_merge, tg_policy_merge(POL(0), POL(1), (TgPolicy **)a[2]))
CALL(policy_contain, tg_policy_contain(POL(0), POL(1), (TgPolicy **)a[2]))
CALL(policy_check, tg_policy_check(POL(0), S(1), S(2), S(3), (TgEffect *)a[4]))
CALL(policy_explain, tg_policy_explain_json(POL(0), S(1), S(2), S(3), OS(4)))
CALL(policy_to_json, tg_policy_to_json(POL(0), OS(1)))
CALL(snapshot_resolve, tg_snapshot_resolve_json(S(0), S(1), S(2), OS(3)))
CALL(snapshot_intersect, tg_snapshot_intersect_json(S(0), S(1), OS(2)))
CALL(snapshot_cap_from_parent, tg_snapshot_cap_from_parent_json(S(0), S(1), OS(2)))
CALL(render_permissions_section, tg_render_permissions_section(S(0), OS(1)))
CALL(map_cli_runtime, tg_map_cli_runtime_json(S(0), S(1), OS(2)))
CALL(probe_platform, tg_probe_platform_json(OS(0)))
CALL(reduce, tg_reduce_json(S(0), S(1), OS(2)))
CALL(reduce_all, tg_reduce_all_json(S(0), S(1), OS(2)))
CALL(scope_from_action, tg_scope_from_action_json(S(0), S(1), S(2), S(3), OS(4)))
CALL(scope_hash, tg_scope_hash(S(0), OS(1)))
CALL(store_open, tg_store_open(S(0), (TgStore **)a[1]))
CALL(store_open_durable, tg_store_open_durable(S(0), S(1), (TgStore **)a[2]))
CALL(store_memory, tg_store_memory((TgStore **)a[0]))
CALL(store_wait_resolved, tg_store_wait_resolved_json(STO(0), S(1), 0, OS(2)))
CALL(store_path, tg_store_path(STO(0), OS(1)))
CALL(store_append, tg_store_append_json(STO(0), S(1), (uint64_t *)a[2]))
CALL(store_replay, tg_store_replay_json(STO(0), S(1), OS(2)))
CALL(store_turns, tg_store_turns_json(STO(0), OS(1)))
CALL(store_pending_approvals, tg_store_pending_approvals_json(STO(0), OS(1)))
CALL(store_approval, tg_store_approval_json(STO(0), S(1), OS(2)))
CALL(store_resolve, tg_store_resolve_json(STO(0), S(1), S(2), S(3), OS(4)))
CALL(store_change_sets, tg_store_change_sets_json(STO(0), OS(1)))
CALL(store_change_set, tg_store_change_set_json(STO(0), S(1), OS(2)))
CALL(store_apply_change_set, tg_store_apply_change_set_json(STO(0), S(1), S(2), OS(3)))
CALL(store_discard_change_set, tg_store_discard_change_set_json(STO(0), S(1), S(2), OS(3)))
CALL(change_set_parse, tg_change_set_parse_json(S(0), OS(1)))
CALL(policy_lint, tg_policy_lint_json(POL(0), OS(1)))
CALL(policy_explain_in_turn,
     tg_policy_explain_in_turn_json(POL(0), S(1), S(2), S(3), S(4), OS(5)))
CALL(policy_replay_events, tg_policy_replay_events_json(POL(0), S(1), S(2), OS(3)))
CALL(store_replay_policy, tg_store_replay_policy_json(STO(0), POL(1), S(2), OS(3)))

/* ---- the fixture ---------------------------------------------------------------------------- */

typedef struct {
  char *ws, *db, *db2, *file, *snapshot, *sandbox, *network, *process, *profile, *context;
  char *policy_json, *cap, *event, *events, *reduce_input, *reduce_inputs, *state, *scope;
  char *scope_hash, *request_a, *request_b, *invocation_read, *invocation_write;
  char *reduce_input_unknown, *reduce_inputs_unknown; /* the unknown field inside the event */
  TgPolicy *policy, *other;
  TgStore *store;
  TgApprover *approver;
  TgGate *gate;
} Fixture;

static const char *POLICY_TOML = "[defaults]\nfile_read = \"allow\"\n";
static const char *POLICY_TOML_UNKNOWN = "zz_unknown_field = 1\n[defaults]\nfile_read = \"allow\"\n";
static const char *POLICY_TOML_MALFORMED = "[defaults\nfile_read = ";
static const char *CHANGE_SET =
    "{\"id\": \"cs-1796128847166-3935-c6b32d92\", \"turn_id\": \"run-1\", \"command\": \"true\", "
    "\"created_at\": \"2026-12-01T12:40:47.254185Z\", \"status\": \"pending\", "
    "\"roots\": [{\"path\": \"/w\", \"layer\": \"0\"}], \"changes\": [], \"exit_code\": 0, "
    "\"upper_digest\": \"f5ddba2ce51bc0a6499c39c995b7bc535589af36fff0a793118a7e543d14c625\"}";

/* A deferred request's id: `make` in the supervised turn, answered by defer_all. */
static char *defer(TgGate *gate) {
  char *out = NULL, *request = NULL, *id = NULL;
  if (ok(tg_gate_authorize_json(gate, "{\"kind\": \"shell_command\", \"target\": \"make\"}", &out),
         "authorize make")) {
    request = jget(out, "request");
    id = jstr(request, "id");
  }
  if (!id) FAIL("no deferral: %s", out ? out : "(null)");
  tg_string_free(out);
  tg_string_free(request);
  return id;
}

static int setup(Fixture *fx, const char *dir) {
  char *tmpl = fmt("%s/abi-attack-XXXXXX", dir);
  if (!mkdtemp(tmpl)) {
    FAIL("mkdtemp %s", tmpl);
    return 0;
  }
  fx->ws = tmpl;
  fx->db = fmt("%s/audit.db", fx->ws);
  fx->db2 = fmt("%s/other.db", fx->ws);
  fx->file = fmt("%s/a.txt", fx->ws);
  FILE *f = fopen(fx->file, "w");
  if (!f || fputs("a\n", f) < 0 || fclose(f) != 0) {
    FAIL("cannot write %s", fx->file);
    return 0;
  }

  char *platform = NULL;
  if (!ok(tg_probe_platform_json(&platform), "probe")) return 0;
  fx->context = fmt("{\"workspace_root\": \"%s\", \"execution_backend\": \"native\", "
                    "\"platform\": %s}",
                    fx->ws, platform);
  tg_string_free(platform);
  if (!ok(tg_snapshot_resolve_json("{\"mode\": \"supervised\"}", fx->context, NULL,
                                   &fx->snapshot),
          "resolve"))
    return 0;
  fx->sandbox = jget(fx->snapshot, "sandbox");
  fx->network = jget(fx->snapshot, "network");
  fx->process = jget(fx->snapshot, "process");
  fx->profile = jget(fx->snapshot, "permission_profile");
  fx->policy_json = jget(fx->profile, "effective_policy");
  if (!ok(tg_snapshot_cap_from_parent_json(fx->snapshot, "parent_turn", &fx->cap), "cap") ||
      !ok(tg_policy_from_json(fx->policy_json, "effective", &fx->policy), "policy") ||
      !ok(tg_policy_from_mode("full_access", &fx->other), "other policy") ||
      !ok(tg_store_open(fx->db, &fx->store), "store") ||
      !ok(tg_approver_builtin("defer_all", &fx->approver), "approver") ||
      !ok(tg_gate_new("turn-attack", fx->snapshot, fx->store, fx->approver, &fx->gate), "gate"))
    return 0;
  fx->request_a = defer(fx->gate);
  fx->request_b = defer(fx->gate);
  if (!fx->request_a || !fx->request_b) return 0;

  if (!ok(tg_store_replay_json(fx->store, "turn-attack", &fx->events), "replay") ||
      !ok(tg_json_array_get(fx->events, 0, &fx->event), "event"))
    return 0;
  fx->reduce_input = fmt("{\"audit_event\": %s}", fx->event);
  fx->reduce_inputs = fmt("[%s]", fx->reduce_input);
  char *event_unknown = with_unknown_field(fx->event);
  fx->reduce_input_unknown = fmt("{\"audit_event\": %s}", event_unknown);
  fx->reduce_inputs_unknown = fmt("[%s]", fx->reduce_input_unknown);
  free(event_unknown);
  if (!ok(tg_reduce_json(NULL, fx->reduce_input, &fx->state), "reduce") ||
      !ok(tg_scope_from_action_json("file_read", fx->file, NULL, NULL, &fx->scope), "scope") ||
      !ok(tg_scope_hash(fx->scope, &fx->scope_hash), "scope hash"))
    return 0;
  fx->invocation_read = fmt("{\"kind\": \"file_read\", \"target\": \"%s\"}", fx->file);
  fx->invocation_write = fmt("{\"target\": \"%s\"}", fx->file);
  return 1;
}

static void teardown(Fixture *fx) {
  tg_gate_free(fx->gate);
  tg_approver_free(fx->approver);
  tg_store_free(fx->store);
  tg_policy_free(fx->policy);
  tg_policy_free(fx->other);
  char *strings[] = {fx->snapshot, fx->sandbox, fx->network, fx->process, fx->profile,
                     fx->policy_json, fx->cap, fx->event, fx->events, fx->state, fx->scope,
                     fx->scope_hash, fx->request_a, fx->request_b};
  for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++) tg_string_free(strings[i]);
  char *mine[] = {fx->db, fx->db2, fx->file, fx->context, fx->reduce_input, fx->reduce_inputs,
                  fx->reduce_input_unknown, fx->reduce_inputs_unknown, fx->invocation_read, fx->invocation_write, fx->ws};
  for (size_t i = 0; i < sizeof mine / sizeof mine[0]; i++) free(mine[i]);
}

/* ---- the attacks ---------------------------------------------------------------------------- */

#define IN(type, name, valid) {type, name, valid, NULL, NULL, NULL}
#define OUT(type, name) {type, name, NULL, NULL, NULL, NULL}
#define OUTH(name, rel) {O_HANDLE, name, NULL, NULL, NULL, rel}
#define TEXT(name, valid, bad, unknown) {A_TEXT, name, valid, bad, unknown, NULL}
#define REC_U(type, name, valid, unknown) {type, name, valid, NULL, unknown, NULL}

static const int nonnull = 1; /* a valid non-NULL marker for function pointers and user data */

static void attack_all(const Fixture *fx) {
  const Spec specs[] = {
      /* plain JSON access */
      {"tg_json_array_len", call_json_array_len, 1,
       {IN(A_JSON, "json", "[1, 2]"), OUT(O_SIZE, "out_len")}},
      {"tg_json_array_get", call_json_array_get, 1,
       {IN(A_JSON, "json", "[1, 2]"), OUT(O_STR, "out_json")}},
      {"tg_json_get", call_json_get, 1,
       {IN(A_JSON, "json", "{\"a\": 1}"), IN(A_STR, "key", "a"), OUT(O_STR, "out_json")}},
      {"tg_json_get_string", call_json_get_string, 1,
       {IN(A_JSON, "json", "{\"a\": \"b\"}"), IN(A_STR, "key", "a"), OUT(O_STR, "out_text")}},
      {"tg_json_equal", call_json_equal, 1,
       {IN(A_JSON, "a", "{\"x\": 1}"), IN(A_JSON, "b", "{\"x\": 1.0}"),
        OUT(O_I32, "out_equal")}},
      /* approvers */
      {"tg_approver_builtin", call_approver_builtin, 1,
       {IN(A_STR, "name", "deny_all"), OUTH("out_approver", free_approver)}},
      {"tg_approver_from_callback", call_approver_from_callback, 1,
       {IN(A_FN, "decide", &nonnull), IN(A_OPT_PTR, "user_data", &nonnull),
        IN(A_OPT_PTR, "free_user_data", &nonnull), OUTH("out_approver", free_approver)}},
      /* checkers */
      {"tg_check_file_json", call_check_file, 1,
       {IN(A_REC, "sandbox", fx->sandbox), IN(A_HANDLE, "policy", fx->policy),
        IN(A_STR, "kind", "file_read"), IN(A_STR, "path", fx->file),
        IN(A_OPT_STR, "tool", "Read"), OUT(O_STR, "out_json")}},
      {"tg_check_network_json", call_check_network, 1,
       {IN(A_REC, "network", fx->network), IN(A_HANDLE, "policy", fx->policy),
        IN(A_STR, "target", "http://127.0.0.1:8080/x"), IN(A_OPT_STR, "tool", "Fetch"),
        OUT(O_STR, "out_json")}},
      {"tg_resolve_and_check_network_json", call_resolve_and_check_network, 1,
       {IN(A_REC, "network", fx->network), IN(A_HANDLE, "policy", fx->policy),
        IN(A_STR, "target", "127.0.0.1:8080"), IN(A_OPT_STR, "tool", "Fetch"),
        OUT(O_STR, "out_json")}},
      {"tg_plan_spawn_json", call_plan_spawn, 1,
       {IN(A_REC, "sandbox", fx->sandbox), IN(A_REC, "process", fx->process),
        IN(A_HANDLE, "policy", fx->policy),
        IN(A_REC, "request", "{\"command_line\": \"ls -l\", \"env\": [[\"PATH\", \"/bin\"]]}"),
        OUT(O_STR, "out_json")}},
      {"tg_filter_env_json", call_filter_env, 1,
       {IN(A_JSON, "env", "[[\"PATH\", \"/usr/bin:/tmp/x\"]]"), IN(A_STR, "mode", "filtered"),
        IN(A_STR, "cwd", fx->ws), IN(A_OPT_JSON, "untrusted_path_roots", "[\"/tmp/x\"]"),
        OUT(O_STR, "out_json")}},
      {"tg_parse_command_line_json", call_parse_command_line, 1,
       {IN(A_STR, "line", "ls | grep x"), OUT(O_STR, "out_json")}},
      {"tg_evaluate_json", call_evaluate, 1,
       {IN(A_REC, "snapshot", fx->snapshot), IN(A_REC, "invocation", fx->invocation_read),
        OUT(O_STR, "out_json")}},
      /* the gate */
      {"tg_gate_new", call_gate_new, 1,
       {IN(A_STR, "turn_id", "turn-attack-2"), IN(A_REC, "snapshot", fx->snapshot),
        IN(A_HANDLE, "store", fx->store), IN(A_HANDLE, "approver", fx->approver),
        OUTH("out_gate", free_gate)}},
      {"tg_gate_turn_id", call_gate_turn_id, 1,
       {IN(A_HANDLE, "gate", fx->gate), OUT(O_STR, "out_text")}},
      {"tg_gate_snapshot_json", call_gate_snapshot, 1,
       {IN(A_HANDLE, "gate", fx->gate), OUT(O_STR, "out_json")}},
      {"tg_gate_evaluate_json", call_gate_evaluate, 1,
       {IN(A_HANDLE, "gate", fx->gate), IN(A_REC, "invocation", fx->invocation_read),
        OUT(O_STR, "out_json")}},
      {"tg_gate_authorize_json", call_gate_authorize, 1,
       {IN(A_HANDLE, "gate", fx->gate), IN(A_REC, "invocation", fx->invocation_read),
        OUT(O_STR, "out_json")}},
      /* The request stays pending: every break fails before deciding, and a NULL decision
       * takes the recorded one, which is still pending (a failure). */
      {"tg_gate_resume_json", call_gate_resume, 0,
       {IN(A_HANDLE, "gate", fx->gate), IN(A_STR, "request_id", fx->request_a),
        IN(A_OPT_REC, "decision", "{\"decision\": \"deny\"}"), OUT(O_STR, "out_json")}},
      {"tg_gate_spawn_json", call_gate_spawn, 1, /* deferred by defer_all: nothing runs */
       {IN(A_HANDLE, "gate", fx->gate), IN(A_REC, "invocation", "{\"target\": \"true\"}"),
        OUT(O_STR, "out_json")}},
      {"tg_gate_resume_spawn_json", call_gate_resume_spawn, 0,
       {IN(A_HANDLE, "gate", fx->gate), IN(A_STR, "request_id", fx->request_a),
        IN(A_REC, "decision", "{\"decision\": \"deny\"}"), OUT(O_STR, "out_json")}},
      {"tg_gate_run_approved_json", call_gate_run_approved, 0, /* pending: refused */
       {IN(A_HANDLE, "gate", fx->gate), IN(A_STR, "request_id", fx->request_a),
        OUT(O_STR, "out_json")}},
      {"tg_gate_open_read", call_gate_open_read, 1,
       {IN(A_HANDLE, "gate", fx->gate), IN(A_REC, "invocation", fx->invocation_read),
        OUT(O_FD, "out_fd"), OUT(O_STR, "out_denial_json")}},
      {"tg_gate_open_write", call_gate_open_write, 1, /* an ask, deferred: a denial */
       {IN(A_HANDLE, "gate", fx->gate), IN(A_REC, "invocation", fx->invocation_write),
        OUT(O_FD, "out_fd"), OUT(O_STR, "out_denial_json")}},
      {"tg_gate_resolve_and_check_json", call_gate_resolve_and_check, 1,
       {IN(A_HANDLE, "gate", fx->gate), IN(A_STR, "url", "http://127.0.0.1:8080/"),
        IN(A_OPT_STR, "tool", "Fetch"), OUT(O_STR, "out_json")}},
      {"tg_gate_grant_for_turn", call_gate_grant_for_turn, 1,
       {IN(A_HANDLE, "gate", fx->gate), IN(A_STR, "scope_hash", fx->scope_hash)}},
      /* policies */
      {"tg_policy_from_json", call_policy_from_json, 1,
       {TEXT("text", fx->policy_json, NULL, NULL), IN(A_OPT_STR, "origin", "p.json"),
        OUTH("out_policy", free_policy)}},
      {"tg_policy_from_toml", call_policy_from_toml, 1,
       {TEXT("text", POLICY_TOML, POLICY_TOML_MALFORMED, POLICY_TOML_UNKNOWN),
        IN(A_OPT_STR, "origin", "p.toml"), OUTH("out_policy", free_policy)}},
      {"tg_policy_from_mode", call_policy_from_mode, 1,
       {IN(A_STR, "mode", "supervised"), OUTH("out_policy", free_policy)}},
      {"tg_policy_tiered", call_policy_tiered, 1,
       {IN(A_OPT_STR, "test_binary", "/bin/true"), IN(A_OPT_STR, "provider_host", "api.x.test"),
        OUTH("out_policy", free_policy)}},
      {"tg_policy_permissive", call_policy_permissive, 1, {OUTH("out_policy", free_policy)}},
      {"tg_policy_merge", call_policy_merge, 1,
       {IN(A_HANDLE, "policy", fx->policy), IN(A_HANDLE, "other", fx->other),
        OUTH("out_policy", free_policy)}},
      {"tg_policy_contain", call_policy_contain, 1,
       {IN(A_HANDLE, "policy", fx->policy), IN(A_HANDLE, "cap", fx->other),
        OUTH("out_policy", free_policy)}},
      {"tg_policy_check", call_policy_check, 1,
       {IN(A_HANDLE, "policy", fx->policy), IN(A_STR, "kind", "file_read"),
        IN(A_STR, "target", fx->file), IN(A_OPT_STR, "tool", "Read"),
        OUT(O_EFFECT, "out_effect")}},
      {"tg_policy_explain_json", call_policy_explain, 1,
       {IN(A_HANDLE, "policy", fx->policy), IN(A_STR, "kind", "file_read"),
        IN(A_STR, "target", fx->file), IN(A_OPT_STR, "tool", "Read"), OUT(O_STR, "out_json")}},
      {"tg_policy_to_json", call_policy_to_json, 1,
       {IN(A_HANDLE, "policy", fx->policy), OUT(O_STR, "out_json")}},
      /* snapshots */
      {"tg_snapshot_resolve_json", call_snapshot_resolve, 1,
       {IN(A_OPT_REC, "selection", "{\"mode\": \"auto_accept_edits\"}"),
        IN(A_REC, "context", fx->context), IN(A_OPT_REC, "cap", fx->cap),
        OUT(O_STR, "out_json")}},
      {"tg_snapshot_intersect_json", call_snapshot_intersect, 1,
       {IN(A_REC, "snapshot", fx->snapshot), IN(A_REC, "cap", fx->cap), OUT(O_STR, "out_json")}},
      {"tg_snapshot_cap_from_parent_json", call_snapshot_cap_from_parent, 1,
       {IN(A_REC, "snapshot", fx->snapshot), IN(A_STR, "origin", "task_policy"),
        OUT(O_STR, "out_json")}},
      {"tg_render_permissions_section", call_render_permissions_section, 1,
       {IN(A_REC, "profile", fx->profile), OUT(O_STR, "out_text")}},
      {"tg_map_cli_runtime_json", call_map_cli_runtime, 1,
       {IN(A_STR, "runtime", "codex"), IN(A_STR, "mode", "supervised"), OUT(O_STR, "out_json")}},
      {"tg_probe_platform_json", call_probe_platform, 1, {OUT(O_STR, "out_json")}},
      /* reducers and scopes */
      {"tg_reduce_json", call_reduce, 1,
       {IN(A_OPT_REC, "state", fx->state), REC_U(A_REC, "input", fx->reduce_input, fx->reduce_input_unknown),
        OUT(O_STR, "out_json")}},
      {"tg_reduce_all_json", call_reduce_all, 1,
       {IN(A_OPT_REC, "state", fx->state), REC_U(A_REC, "inputs", fx->reduce_inputs, fx->reduce_inputs_unknown),
        OUT(O_STR, "out_json")}},
      {"tg_scope_from_action_json", call_scope_from_action, 1,
       {IN(A_STR, "kind", "file_read"), IN(A_STR, "target", "a.txt"),
        IN(A_OPT_STR, "tool", "Read"), IN(A_OPT_STR, "cwd", fx->ws), OUT(O_STR, "out_json")}},
      {"tg_scope_hash", call_scope_hash, 1,
       {IN(A_REC, "scope", fx->scope), OUT(O_STR, "out_hash")}},
      /* the store */
      {"tg_store_open", call_store_open, 1,
       {IN(A_STR, "path", fx->db2), OUTH("out_store", free_store)}},
      {"tg_store_open_durable", call_store_open_durable, 1,
       {IN(A_STR, "path", fx->db2), IN(A_OPT_STR, "durability", "power"),
        OUTH("out_store", free_store)}},
      {"tg_store_memory", call_store_memory, 1, {OUTH("out_store", free_store)}},
      {"tg_store_wait_resolved_json", call_store_wait_resolved, 1, /* timeout 0: pending */
       {IN(A_HANDLE, "store", fx->store), IN(A_STR, "request_id", fx->request_a),
        OUT(O_STR, "out_json")}},
      {"tg_store_path", call_store_path, 1,
       {IN(A_HANDLE, "store", fx->store), OUT(O_STR, "out_path")}},
      {"tg_store_append_json", call_store_append, 1,
       {IN(A_HANDLE, "store", fx->store), IN(A_REC, "event", fx->event), OUT(O_U64, "out_seq")}},
      {"tg_store_replay_json", call_store_replay, 1,
       {IN(A_HANDLE, "store", fx->store), IN(A_STR, "turn_id", "turn-attack"),
        OUT(O_STR, "out_json")}},
      {"tg_store_turns_json", call_store_turns, 1,
       {IN(A_HANDLE, "store", fx->store), OUT(O_STR, "out_json")}},
      {"tg_store_pending_approvals_json", call_store_pending_approvals, 1,
       {IN(A_HANDLE, "store", fx->store), OUT(O_STR, "out_json")}},
      {"tg_store_approval_json", call_store_approval, 1,
       {IN(A_HANDLE, "store", fx->store), IN(A_STR, "request_id", fx->request_a),
        OUT(O_STR, "out_json")}},
      /* request_b only: the valid call and the NULL reason record a resolution */
      {"tg_store_resolve_json", call_store_resolve, 1,
       {IN(A_HANDLE, "store", fx->store), IN(A_STR, "request_id", fx->request_b),
        IN(A_STR, "resolution", "deny"), IN(A_OPT_STR, "reason", "attack"),
        OUT(O_STR, "out_json")}},
      {"tg_store_change_sets_json", call_store_change_sets, 1,
       {IN(A_HANDLE, "store", fx->store), OUT(O_STR, "out_json")}},
      /* no such change set: the valid calls fail with not_found; the breaks fail first */
      {"tg_store_change_set_json", call_store_change_set, 0,
       {IN(A_HANDLE, "store", fx->store), IN(A_STR, "id", "cs-1-1-00000000"),
        OUT(O_STR, "out_json")}},
      {"tg_store_apply_change_set_json", call_store_apply_change_set, 0,
       {IN(A_HANDLE, "store", fx->store), IN(A_STR, "id", "cs-1-1-00000000"),
        IN(A_OPT_REC, "options", "{\"confirm_asks\": false, \"by\": \"c\"}"),
        OUT(O_STR, "out_json")}},
      {"tg_store_discard_change_set_json", call_store_discard_change_set, 0,
       {IN(A_HANDLE, "store", fx->store), IN(A_STR, "id", "cs-1-1-00000000"),
        IN(A_OPT_STR, "by", "c"), OUT(O_STR, "out_json")}},
      {"tg_change_set_parse_json", call_change_set_parse, 1,
       {IN(A_REC, "change_set", CHANGE_SET), OUT(O_STR, "out_json")}},
      /* tooling */
      {"tg_policy_lint_json", call_policy_lint, 1,
       {IN(A_HANDLE, "policy", fx->policy), OUT(O_STR, "out_json")}},
      {"tg_policy_explain_in_turn_json", call_policy_explain_in_turn, 1,
       {IN(A_HANDLE, "policy", fx->policy), IN(A_STR, "kind", "file_read"),
        IN(A_STR, "target", fx->file), IN(A_OPT_STR, "tool", "Read"),
        IN(A_OPT_REC, "history_json", "[{\"kind\": \"file_read\", \"target\": \"/etc/hosts\"}]"),
        OUT(O_STR, "out_json")}},
      {"tg_policy_replay_events_json", call_policy_replay_events, 1,
       {IN(A_HANDLE, "policy", fx->policy), IN(A_REC, "events_json", fx->events),
        IN(A_OPT_REC, "options_json", "{\"turn\": \"turn-attack\"}"), OUT(O_STR, "out_json")}},
      {"tg_store_replay_policy_json", call_store_replay_policy, 1,
       {IN(A_HANDLE, "store", fx->store), IN(A_HANDLE, "policy", fx->other),
        IN(A_OPT_REC, "options_json", "{\"turn\": \"turn-attack\"}"), OUT(O_STR, "out_json")}},
  };
  size_t n = sizeof specs / sizeof specs[0];
  for (size_t i = 0; i < n; i++) attack(&specs[i]);
  printf("  %zu functions, %d calls: %d valid, %d NULL, %d invalid UTF-8, %d malformed JSON, "
         "%d unknown field\n",
         n, calls, calls_by_break[B_NONE], calls_by_break[B_NULL], calls_by_break[B_UTF8],
         calls_by_break[B_MALFORMED], calls_by_break[B_UNKNOWN]);
}

/* Each tg_*_free takes NULL; a failed constructor leaves NULL, which is then refused by name. */
static void test_free_and_failed_constructors(void) {
  tg_string_free(NULL);
  tg_policy_free(NULL);
  tg_store_free(NULL);
  tg_approver_free(NULL);
  tg_gate_free(NULL);
  checks++;

  TgPolicy *policy = (TgPolicy *)&sentinel_handle;
  TgStatus st = tg_policy_from_json("{\"defaults\": {\"file_read\": \"sometimes\"}}", NULL,
                                    &policy);
  CHECK(st == TG_STATUS_POLICY && policy == NULL, "a bad policy: status %d, handle %p", (int)st,
        (void *)policy);
  TgEffect effect = TG_EFFECT_ALLOW;
  st = tg_policy_check(policy, "file_read", "x", NULL, &effect);
  CHECK(st == TG_STATUS_NULL_ARGUMENT && effect == TG_EFFECT_DENY &&
            contains(tg_last_error_message(), "`policy`"),
        "check on a failed policy: status %d, effect %d: %s", (int)st, (int)effect,
        tg_last_error_message());

  TgStore *store = (TgStore *)&sentinel_handle;
  st = tg_store_open("/proc/self/no/such/dir/audit.db", &store);
  CHECK(st == TG_STATUS_STORE && store == NULL, "a store that cannot open: status %d, %p: %s",
        (int)st, (void *)store, tg_last_error_message());
  char *out = sentinel_text;
  st = tg_store_turns_json(store, &out);
  CHECK(st == TG_STATUS_NULL_ARGUMENT && out == NULL && contains(tg_last_error_message(), "`store`"),
        "turns on a failed store: status %d: %s", (int)st, tg_last_error_message());

  TgApprover *approver = (TgApprover *)&sentinel_handle;
  st = tg_approver_builtin("approve_some", &approver);
  CHECK(st == TG_STATUS_INVALID && approver == NULL, "an unknown approver: status %d", (int)st);
  int frees = user_data_frees;
  approver = (TgApprover *)&sentinel_handle;
  st = tg_approver_from_callback(NULL, (void *)&nonnull, free_user_data, &approver);
  CHECK(st == TG_STATUS_NULL_ARGUMENT && approver == NULL && user_data_frees == frees,
        "a callback approver without decide: status %d, freed user data %d times", (int)st,
        user_data_frees - frees);
  st = tg_approver_from_callback(decide, (void *)&nonnull, free_user_data, NULL);
  CHECK(st == TG_STATUS_NULL_ARGUMENT && user_data_frees == frees,
        "a callback approver without out: status %d, freed user data %d times", (int)st,
        user_data_frees - frees);

  TgGate *gate = (TgGate *)&sentinel_handle;
  st = tg_gate_new("t", "{\"not\": \"a snapshot\"}", store, approver, &gate);
  CHECK(st != TG_STATUS_OK && gate == NULL, "a gate from nothing: status %d", (int)st);
  out = sentinel_text;
  st = tg_gate_authorize_json(gate, "{\"kind\": \"file_read\", \"target\": \"x\"}", &out);
  CHECK(st == TG_STATUS_NULL_ARGUMENT && out == NULL && contains(tg_last_error_message(), "`gate`"),
        "authorize on a failed gate: status %d: %s", (int)st, tg_last_error_message());
  printf("  the frees take NULL; failed constructors leave NULL, refused by name\n");
}

/* The last error's message, code and paths belong to the last call only. */
static void test_last_error_resets(const Fixture *fx) {
  char *out = sentinel_text;
  TgStatus st = tg_store_change_set_json(fx->store, "../x", &out);
  CHECK(st == TG_STATUS_CHANGES && strcmp(tg_last_error_code(), "bad_id") == 0 && out == NULL,
        "a bad change set id: status %d code '%s'", (int)st, tg_last_error_code());
  size_t n = STALE_N;
  st = tg_json_array_len("[1]", &n);
  CHECK(st == TG_STATUS_OK && n == 1 && strcmp(tg_last_error_message(), "") == 0 &&
            strcmp(tg_last_error_code(), "") == 0 && strcmp(tg_last_error_paths_json(), "[]") == 0,
        "after a success: message '%s', code '%s', paths %s", tg_last_error_message(),
        tg_last_error_code(), tg_last_error_paths_json());
  /* An index past the end, and the largest index, are refused without a result. */
  out = sentinel_text;
  st = tg_json_array_get("[1]", SIZE_MAX, &out);
  CHECK(st == TG_STATUS_INVALID && out == NULL && contains(tg_last_error_message(), "out of range"),
        "index SIZE_MAX: status %d: %s", (int)st, tg_last_error_message());
  /* An unknown request id is an error at once, even with no timeout (not a wait forever):
   * TG_STATUS_APPROVAL, as for every unknown request (TgStatus). */
  alarm(20);
  out = sentinel_text;
  st = tg_store_wait_resolved_json(fx->store, "apr_no_such_request", -1, &out);
  alarm(0);
  CHECK(st == TG_STATUS_APPROVAL && out == NULL && contains(tg_last_error_message(), "apr_no_such_request"),
        "waiting on an unknown request: status %d: %s", (int)st, tg_last_error_message());
  printf("  the last error resets; an unknown wait fails at once\n");
}

/* The last error is the calling thread's: a failure on another thread does not show here. */
static void *fail_elsewhere(void *unused) {
  (void)unused;
  char *out = sentinel_text;
  TgStatus st = tg_json_get("{", "a", &out);
  int seen = st == TG_STATUS_INVALID && out == NULL && contains(tg_last_error_message(), "json");
  return seen ? (void *)&sentinel_handle : NULL;
}

static void test_last_error_is_per_thread(void) {
  size_t n = STALE_N;
  ok(tg_json_array_len("[]", &n), "tg_json_array_len");
  pthread_t thread;
  void *seen = NULL;
  if (pthread_create(&thread, NULL, fail_elsewhere, NULL) != 0 || pthread_join(thread, &seen) != 0) {
    FAIL("no thread");
    return;
  }
  CHECK(seen == &sentinel_handle, "the other thread did not see its own failure");
  CHECK(strcmp(tg_last_error_message(), "") == 0,
        "another thread's failure shows on this one: '%s'", tg_last_error_message());
  printf("  the last error is per thread\n");
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  printf("turngate %s: the C ABI under attack\n", tg_version());
  Fixture fx = {0};
  if (setup(&fx, argv[1])) {
    attack_all(&fx);
    test_free_and_failed_constructors();
    test_last_error_resets(&fx);
    test_last_error_is_per_thread();
  }
  teardown(&fx);
  CHECK(decide_calls == 0, "the callback was called %d times", decide_calls);
  CHECK(user_data_frees > 0, "no callback approver released its user data");
  printf("abi_attack: %d checks over %d calls, %d failures\n", checks, calls, failures);
  return failures == 0 ? 0 : 1;
}
