/*
 * The gate through the C ABI, end to end (bindings/include/turngate.h).
 *
 *   gate_test DIR     make a fresh workspace under DIR (mkdtemp), resolve snapshots for it,
 *                     and drive the checkers, the store, a C approver callback and the gate:
 *                     authorize, asks answered by the callback, sandboxed spawns, race-free
 *                     opens, resume of a deferral, and the audit rows left behind.
 *
 * Exits 0 when every check passes, 1 otherwise (each failure is printed). Everything decided
 * here is decided by turngate; the program only builds JSON inputs and reads JSON outputs with
 * the ABI's tg_json_* accessors.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_support.h"

/* ---- small helpers -------------------------------------------------------------------------- */

/* `s` as a JSON string literal (quoted, escaped), malloc'd. */
static char *json_str(const char *s) {
  size_t n = 2;
  for (const char *p = s; *p; p++)
    n += (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20) ? 6 : 1;
  char *out = malloc(n + 1), *o = out;
  if (!out) abort();
  *o++ = '"';
  for (const char *p = s; *p; p++) {
    if (*p == '"' || *p == '\\') {
      *o++ = '\\';
      *o++ = *p;
    } else if ((unsigned char)*p < 0x20) {
      o += sprintf(o, "\\u%04x", (unsigned)(unsigned char)*p);
    } else {
      *o++ = *p;
    }
  }
  *o++ = '"';
  *o = '\0';
  return out;
}

/* String member `key` of `json`, or NULL when missing/null. Free with tg_string_free. */
static char *jstr(const char *json, const char *key) {
  char *out = NULL;
  if (json) ok(tg_json_get_string(json, key, &out), key);
  return out;
}

/* Member `key` of `json` as JSON text, or NULL when missing. Free with tg_string_free. */
static char *jget(const char *json, const char *key) {
  char *out = NULL;
  if (json) ok(tg_json_get(json, key, &out), key);
  return out;
}

/* String member `inner` of object member `outer` of `json`. Free with tg_string_free. */
static char *jstr2(const char *json, const char *outer, const char *inner) {
  char *o = jget(json, outer);
  char *s = o && strcmp(o, "null") != 0 ? jstr(o, inner) : NULL;
  tg_string_free(o);
  return s;
}

static int same(const char *a, const char *b) {
  if (a == NULL || b == NULL) return a == b;
  return strcmp(a, b) == 0;
}


static const char *show(const char *s) { return s ? s : "(null)"; }

static int exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

static char *read_text(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char buf[4096];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  return fmt("%s", buf);
}

/* An invocation {"kind", "target", "tool"} as JSON (kind may be NULL to leave it out). */
static char *invocation(const char *kind, const char *target) {
  char *t = json_str(target);
  char *inv = kind ? fmt("{\"kind\": \"%s\", \"target\": %s, \"tool\": \"c_test\"}", kind, t)
                   : fmt("{\"target\": %s, \"tool\": \"c_test\"}", t);
  free(t);
  return inv;
}

/* ---- the approver callback ------------------------------------------------------------------ */

/* What the callback answers, set by the test before each gate call (the gate call returns only
 * after the callback has, so the worker thread sees these writes and the test sees its). */
typedef struct {
  atomic_int calls;           /* asks seen */
  atomic_int frees;           /* times free_reviewer ran */
  atomic_int off_main_thread; /* asks seen on a thread other than the test's */
  const char *answer;         /* JSON to answer (strdup'd for turngate to free), or NULL */
  int32_t status;             /* the return value */
  pthread_t main_thread;
  char last_ask[16384];        /* the last ask's JSON */
  TgGate *reenter;            /* when set: call tg_gate_authorize_json from inside the callback */
  atomic_int reenter_status;
} Reviewer;

static int32_t decide(void *user_data, const char *ask_json, char **out_decision_json) {
  Reviewer *r = user_data;
  atomic_fetch_add(&r->calls, 1);
  if (!pthread_equal(pthread_self(), r->main_thread)) atomic_fetch_add(&r->off_main_thread, 1);
  snprintf(r->last_ask, sizeof r->last_ask, "%s", ask_json);
  if (r->reenter) {
    char *out = NULL;
    TgStatus st = tg_gate_authorize_json(r->reenter, "{\"kind\": \"file_read\", \"target\": \"x\"}",
                                         &out);
    atomic_store(&r->reenter_status, (int)st);
    tg_string_free(out);
  }
  if (r->answer) *out_decision_json = strdup(r->answer);
  return r->status;
}

static void free_reviewer(void *user_data) {
  Reviewer *r = user_data;
  atomic_fetch_add(&r->frees, 1);
}

static void answer(Reviewer *r, const char *json, int32_t status) {
  r->answer = json;
  r->status = status;
}

/* ---- the test ------------------------------------------------------------------------------- */

typedef struct {
  char *ws;      /* the workspace (the turn's only writable root) */
  char *outside; /* a directory outside every root */
  char *db;      /* the audit store */
  char *snap_supervised;
  char *snap_edits;
} Fixture;

static char *resolve_snapshot(const char *ws, const char *mode) {
  char *platform = NULL, *snapshot = NULL;
  if (!ok(tg_probe_platform_json(&platform), "tg_probe_platform_json")) return NULL;
  char *w = json_str(ws);
  char *context = fmt(
      "{\"workspace_root\": %s, \"execution_backend\": \"native\", \"platform\": %s}", w,
      platform);
  char *selection = fmt("{\"mode\": \"%s\"}", mode);
  ok(tg_snapshot_resolve_json(selection, context, NULL, &snapshot), "tg_snapshot_resolve_json");
  free(w);
  free(context);
  free(selection);
  tg_string_free(platform);
  return snapshot;
}

/* The checkers over the parts of a resolved snapshot and its effective policy. */
static void test_checkers(const Fixture *fx) {
  const char *snap = fx->snap_edits;
  char *profile = jget(snap, "permission_profile");
  char *policy_json = jget(profile, "effective_policy");
  char *sandbox = jget(snap, "sandbox");
  char *network = jget(snap, "network");
  char *process = jget(snap, "process");
  TgPolicy *policy = NULL;
  if (!ok(tg_policy_from_json(policy_json, "effective_policy", &policy), "effective policy"))
    goto done;

  char *outside_file = fmt("%s/x.txt", fx->outside), *inside_file = fmt("%s/x.txt", fx->ws);
  char *out = NULL;
  if (ok(tg_check_file_json(sandbox, policy, "file_write", outside_file, NULL, &out),
         "tg_check_file_json")) {
    char *effect = jstr2(out, "verdict", "effect"), *reason = jstr2(out, "verdict", "reason");
    CHECK(same(effect, "deny") && same(reason, "outside_roots"),
          "check_file outside: expected deny outside_roots, got %s", out);
    tg_string_free(effect);
    tg_string_free(reason);
  }
  tg_string_free(out);
  if (ok(tg_check_file_json(sandbox, policy, "file_write", inside_file, NULL, &out),
         "tg_check_file_json")) {
    char *effect = jstr2(out, "verdict", "effect"), *root = jstr(out, "root");
    CHECK(same(effect, "allow") && root != NULL,
          "check_file inside: expected allow under a root, got %s", out);
    tg_string_free(effect);
    tg_string_free(root);
  }
  tg_string_free(out);
  TgStatus st = tg_check_file_json(sandbox, policy, "network", inside_file, NULL, &out);
  CHECK(st == TG_STATUS_INVALID && out == NULL && contains(tg_last_error_message(), "file_read"),
        "check_file with kind network: expected TG_STATUS_INVALID, got %d: %s", (int)st,
        tg_last_error_message());

  if (ok(tg_check_network_json(network, policy, "http://169.254.169.254/latest/meta-data", NULL,
                               &out),
         "tg_check_network_json")) {
    char *effect = jstr2(out, "verdict", "effect"), *class = jstr(out, "address_class");
    char *host_port = jstr(out, "host_port");
    CHECK(same(effect, "deny") && same(class, "metadata") && same(host_port, "169.254.169.254:80"),
          "check_network metadata: expected deny/metadata/169.254.169.254:80, got %s", out);
    tg_string_free(effect);
    tg_string_free(class);
    tg_string_free(host_port);
  }
  tg_string_free(out);

  const char *request =
      "{\"command_line\": \"ls -la | grep x\", \"timeout_ms\": 5000, \"tool\": \"Bash\", "
      "\"env\": [[\"PATH\", \"/usr/bin:/bin\"], {\"name\": \"AWS_SECRET_ACCESS_KEY\", "
      "\"value\": \"abc\"}]}";
  if (ok(tg_plan_spawn_json(sandbox, process, policy, request, &out), "tg_plan_spawn_json")) {
    char *env = jget(out, "env"), *dropped = jget(env, "dropped"), *vars = jget(env, "vars");
    char *commands = jget(out, "commands"), *required = jget(out, "sandbox_required");
    size_t n = 0;
    ok(tg_json_array_len(commands, &n), "commands");
    CHECK(n == 2 && contains(dropped, "AWS_SECRET_ACCESS_KEY") && !contains(vars, "abc") &&
              same(required, "true"),
          "plan_spawn: expected 2 commands, the secret dropped, a sandbox, got %s", out);
    tg_string_free(env);
    tg_string_free(dropped);
    tg_string_free(vars);
    tg_string_free(commands);
    tg_string_free(required);
  }
  tg_string_free(out);

  /* The filtered environment: each kept variable {"name", "value"} (the shape of every
     language), taken in either form; a byte that is not UTF-8 arrives as U+FFFD. */
  if (ok(tg_filter_env_json("[{\"name\": \"LANG\", \"value\": \"C\"}, [\"GITHUB_TOKEN\", \"x\"]]",
                            "filtered", "/w", NULL, &out),
         "tg_filter_env_json")) {
    char *vars = jget(out, "vars"), *dropped = jget(out, "dropped"), *first = NULL;
    int32_t equal = 0;
    size_t n = 0;
    ok(tg_json_array_len(vars, &n), "vars");
    ok(tg_json_array_get(vars, 0, &first), "vars[0]");
    ok(tg_json_equal(first, "{\"name\": \"LANG\", \"value\": \"C\"}", &equal), "vars[0]");
    CHECK(equal == 1 && contains(dropped, "\"secret_name\"") && !contains(vars, "GITHUB_TOKEN"),
          "filter_env: expected LANG kept as {name, value}, the token dropped, got %s", out);
    tg_string_free(vars);
    tg_string_free(dropped);
    tg_string_free(first);
  }
  tg_string_free(out);
  TgStatus env_st = tg_filter_env_json("[{\"name\": \"A\", \"valu\": \"b\"}]", "all", "/w", NULL, &out);
  CHECK(env_st == TG_STATUS_INVALID && out == NULL && contains(tg_last_error_message(), "env:"),
        "filter_env with a misspelt field: expected TG_STATUS_INVALID naming env, got %d: %s",
        (int)env_st, tg_last_error_message());

  if (ok(tg_parse_command_line_json("ls | grep x; echo $(whoami)", &out),
         "tg_parse_command_line_json")) {
    char *programs = jget(out, "programs"), *unresolved = jget(out, "unresolved");
    char *plain = jget(out, "plain");
    CHECK(contains(programs, "\"grep\"") && contains(programs, "\"whoami\"") &&
              contains(unresolved, "command_substitution") && same(plain, "false"),
          "parse_command_line: got %s", out);
    tg_string_free(programs);
    tg_string_free(unresolved);
    tg_string_free(plain);
  }
  tg_string_free(out);

  char *inv = invocation("file_write", outside_file);
  if (ok(tg_evaluate_json(snap, inv, &out), "tg_evaluate_json")) {
    char *reason = jstr2(out, "verdict", "reason");
    CHECK(same(reason, "outside_roots"), "evaluate outside: got %s", out);
    tg_string_free(reason);
  }
  tg_string_free(out);
  free(inv);
  free(outside_file);
  free(inside_file);
  printf("  checkers: file, network, spawn plan, shell parse, evaluate\n");

done:
  tg_policy_free(policy);
  tg_string_free(profile);
  tg_string_free(policy_json);
  tg_string_free(sandbox);
  tg_string_free(network);
  tg_string_free(process);
}

/* Authorizes `kind target` on `gate`; returns the authorization JSON (tg_string_free it). */
static char *authorize(TgGate *gate, const char *kind, const char *target) {
  char *inv = invocation(kind, target), *out = NULL;
  ok(tg_gate_authorize_json(gate, inv, &out), "tg_gate_authorize_json");
  free(inv);
  return out;
}

/* A write inside the workspace is allowed and a write outside denied, neither asking. */
static void test_authorize(const Fixture *fx, TgGate *edits, Reviewer *rev) {
  answer(rev, "{\"decision\": \"approve\"}", 0);
  int before = atomic_load(&rev->calls);
  char *inside = fmt("%s/notes.txt", fx->ws), *outside = fmt("%s/notes.txt", fx->outside);

  char *out = authorize(edits, "file_write", inside);
  char *outcome = jstr(out, "outcome"), *target = jstr(out, "target");
  CHECK(same(outcome, "allowed") && contains(target, "notes.txt"),
        "write inside: expected allowed, got %s", show(out));
  printf("  %-22s -> %s\n", "write inside", show(outcome));
  tg_string_free(outcome);
  tg_string_free(target);
  tg_string_free(out);

  out = authorize(edits, "file_write", outside);
  outcome = jstr(out, "outcome");
  char *reason = jstr(out, "reason"), *code = jstr2(out, "verdict", "reason");
  char *tool_result = jstr(out, "tool_result");
  CHECK(same(outcome, "denied") && same(code, "outside_roots") &&
            contains(reason, "outside_roots") && tool_result != NULL,
        "write outside: expected denied with outside_roots, got %s", show(out));
  printf("  %-22s -> %s: %s\n", "write outside", show(outcome), show(reason));
  tg_string_free(outcome);
  tg_string_free(reason);
  tg_string_free(code);
  tg_string_free(tool_result);
  tg_string_free(out);

  CHECK(atomic_load(&rev->calls) == before,
        "the approver was called %d times for an allow and a deny",
        atomic_load(&rev->calls) - before);
  free(inside);
  free(outside);
}

/* One ask in the supervised turn answered `json` with `status`; returns the authorization. */
static char *ask(TgGate *supervised, Reviewer *rev, const char *json, int32_t status) {
  answer(rev, json, status);
  int before = atomic_load(&rev->calls);
  char *out = authorize(supervised, "shell_command", "make");
  CHECK(atomic_load(&rev->calls) == before + 1, "the ask reached the callback %d times",
        atomic_load(&rev->calls) - before);
  return out;
}

static void expect_denied(const char *what, char *out, const char *reason_part) {
  char *outcome = jstr(out, "outcome"), *reason = jstr(out, "reason");
  CHECK(same(outcome, "denied") && contains(reason, reason_part),
        "%s: expected denied with a reason containing '%s', got %s", what, reason_part,
        show(out));
  printf("  %-22s -> %s: %s\n", what, show(outcome), show(reason));
  tg_string_free(outcome);
  tg_string_free(reason);
  tg_string_free(out);
}

/* Asks reach the C callback; whatever it answers, a non-decision is a denial with a reason. */
static void test_asks(const Fixture *fx, TgGate *supervised, TgStore *store, Reviewer *rev) {
  char *out = ask(supervised, rev, "{\"decision\": \"deny\", \"reason\": \"not today\"}", 0);
  char *request = jget(rev->last_ask, "request"), *action = jget(rev->last_ask, "action");
  char *turn = jstr(request, "turn_id");
  char *kind = jstr(action, "kind"), *effect = jstr2(rev->last_ask, "verdict", "effect");
  CHECK(same(turn, "turn-supervised") && same(kind, "shell_command") && same(effect, "ask"),
        "the ask: expected turn-supervised, shell_command, ask; got %s", rev->last_ask);
  CHECK(atomic_load(&rev->off_main_thread) == atomic_load(&rev->calls),
        "the callback ran on the calling thread");
  tg_string_free(turn);
  tg_string_free(request);
  tg_string_free(action);
  tg_string_free(kind);
  tg_string_free(effect);
  expect_denied("callback deny", out, "not today");

  out = ask(supervised, rev, "{\"decision\": \"approve\"}", 0);
  char *outcome = jstr(out, "outcome"), *verdict = jstr2(out, "verdict", "effect");
  CHECK(same(outcome, "allowed") && same(verdict, "ask"),
        "callback approve: expected allowed on an ask verdict, got %s", show(out));
  printf("  %-22s -> %s\n", "callback approve", show(outcome));
  tg_string_free(outcome);
  tg_string_free(verdict);
  tg_string_free(out);

  expect_denied("callback garbage", ask(supervised, rev, "this is not json", 0), "not a decision");
  expect_denied("callback unknown", ask(supervised, rev, "{\"decision\": \"maybe\"}", 0), "maybe");
  expect_denied("callback failure", ask(supervised, rev, "reviewer offline", 3),
                "reviewer offline");
  expect_denied("callback no answer", ask(supervised, rev, NULL, 0), "no decision");

  /* An approval is re-checked: a modified action outside the roots is still denied. */
  char *escape = fmt("%s/evil", fx->outside), *e = json_str(escape);
  char *modified = fmt("{\"decision\": \"approve\", \"modified\": "
                       "{\"kind\": \"file_write\", \"target\": %s}}", e);
  expect_denied("approve modified", ask(supervised, rev, modified, 0), "outside_roots");
  free(escape);
  free(e);
  free(modified);

  /* A blocking gate call from inside the callback refuses instead of stalling. */
  rev->reenter = supervised;
  expect_denied("callback re-entering", ask(supervised, rev, "{\"decision\": \"deny\"}", 0),
                "denied by the approver");
  rev->reenter = NULL;
  CHECK(atomic_load(&rev->reenter_status) == TG_STATUS_INVALID,
        "tg_gate_authorize_json inside the callback: expected TG_STATUS_INVALID, got %d",
        atomic_load(&rev->reenter_status));

  /* Defer, then resume: the request is persisted and decided later, re-checked. */
  out = ask(supervised, rev, "{\"decision\": \"defer\"}", 0);
  outcome = jstr(out, "outcome");
  char *id = jstr2(out, "request", "id");
  CHECK(same(outcome, "deferred") && id != NULL, "defer: expected deferred with an id, got %s",
        show(out));
  printf("  %-22s -> %s: %s\n", "callback defer", show(outcome), show(id));
  tg_string_free(outcome);
  tg_string_free(out);
  if (id) {
    char *pending = NULL, *stored = NULL;
    ok(tg_store_pending_approvals_json(store, &pending), "tg_store_pending_approvals_json");
    ok(tg_store_approval_json(store, id, &stored), "tg_store_approval_json");
    CHECK(contains(pending, id) && stored != NULL, "the deferral is not pending in the store");
    tg_string_free(pending);
    tg_string_free(stored);

    if (ok(tg_gate_resume_json(supervised, id, "{\"decision\": \"approve\"}", &out),
           "tg_gate_resume_json")) {
      outcome = jstr(out, "outcome");
      CHECK(same(outcome, "allowed"), "resume approve: expected allowed, got %s", out);
      printf("  %-22s -> %s\n", "resume approve", show(outcome));
      tg_string_free(outcome);
    }
    tg_string_free(out);
    ok(tg_store_pending_approvals_json(store, &pending), "tg_store_pending_approvals_json");
    CHECK(!contains(pending, id), "the resumed request is still pending: %s", show(pending));
    tg_string_free(pending);

    /* The resume spent the allow_once approval: a second resume is refused (already_used). */
    TgStatus st = tg_gate_resume_json(supervised, id, "{\"decision\": \"deny\"}", &out);
    CHECK(st == TG_STATUS_APPROVAL && out == NULL &&
              contains(tg_last_error_message(), "already_used"),
          "a second resume of a spent allow_once: expected TG_STATUS_APPROVAL already_used, got %d: %s",
          (int)st, tg_last_error_message());
    printf("  %-22s -> status %d: %s\n", "resume again", (int)st, tg_last_error_message());
    /* Spent is spent through every entry point: resume_spawn and run_approved refuse too. */
    st = tg_gate_resume_spawn_json(supervised, id, "{\"decision\": \"approve\"}", &out);
    CHECK(st == TG_STATUS_APPROVAL && out == NULL &&
              contains(tg_last_error_message(), "already_used"),
          "resume_spawn of a spent allow_once: expected TG_STATUS_APPROVAL already_used, got %d: %s",
          (int)st, tg_last_error_message());
    printf("  %-22s -> status %d: %s\n", "resume_spawn again", (int)st, tg_last_error_message());
    st = tg_gate_run_approved_json(supervised, id, &out);
    CHECK(st == TG_STATUS_APPROVAL && out == NULL &&
              contains(tg_last_error_message(), "already_used"),
          "run_approved of a spent allow_once: expected TG_STATUS_APPROVAL already_used, got %d: %s",
          (int)st, tg_last_error_message());
    /* A command line is not a request id: nothing runs. */
    st = tg_gate_run_approved_json(supervised, "touch /tmp/turngate-c-never", &out);
    CHECK(st == TG_STATUS_APPROVAL && out == NULL && access("/tmp/turngate-c-never", F_OK) != 0,
          "run_approved of a command line: expected TG_STATUS_APPROVAL and no file, got %d: %s",
          (int)st, tg_last_error_message());
    printf("  %-22s -> status %d: %s\n", "run_approved line", (int)st, tg_last_error_message());
    st =
        tg_gate_resume_json(supervised, "apr_unknown", "{\"decision\": \"approve\"}", &out);
    CHECK(st == TG_STATUS_APPROVAL && out == NULL &&
              contains(tg_last_error_message(), "apr_unknown"),
          "resume of an unknown request: expected TG_STATUS_APPROVAL naming it, got %d: %s",
          (int)st, tg_last_error_message());
    printf("  %-22s -> status %d: %s\n", "resume unknown", (int)st, tg_last_error_message());
    st = tg_gate_resume_json(supervised, id, "{\"decision\": \"perhaps\"}", &out);
    CHECK(st == TG_STATUS_INVALID && contains(tg_last_error_message(), "perhaps"),
          "resume with a bad decision: expected TG_STATUS_INVALID naming it, got %d: %s", (int)st,
          tg_last_error_message());
  }
  tg_string_free(id);
}

/* Spawn under the sandbox: inside is written, the escape is refused by the kernel. */
static void test_spawn(const Fixture *fx, TgGate *edits, Reviewer *rev) {
  answer(rev, "{\"decision\": \"approve\"}", 0);
  char *inside = fmt("%s/inside", fx->ws), *escaped = fmt("%s/escaped", fx->outside);
  char *line = fmt("touch %s", inside);
  char *inv = invocation(NULL, line), *out = NULL;
  if (ok(tg_gate_spawn_json(edits, inv, &out), "tg_gate_spawn_json")) {
    char *outcome = jstr(out, "outcome"), *code = jget(out, "exit_code");
    char *backend = jstr2(out, "sandbox", "backend");
    CHECK(same(outcome, "ran") && same(code, "0") && exists(inside) && backend != NULL,
          "spawn inside: expected ran, exit 0, the file, a sandbox; got %s", out);
    printf("  spawn %-16s -> %s, exit %s, sandbox %s\n", "touch inside", show(outcome),
           show(code), show(backend));
    tg_string_free(outcome);
    tg_string_free(code);
    tg_string_free(backend);
  }
  tg_string_free(out);
  free(line);
  free(inv);

  line = fmt("touch %s", escaped);
  inv = invocation("shell_command", line);
  if (ok(tg_gate_spawn_json(edits, inv, &out), "tg_gate_spawn_json")) {
    char *outcome = jstr(out, "outcome"), *code = jget(out, "exit_code");
    char *err = jstr(out, "stderr");
    CHECK(same(outcome, "ran") && code != NULL && !same(code, "0") && !exists(escaped),
          "spawn escape: expected ran with a failure and no file, got %s", out);
    printf("  spawn %-16s -> %s, exit %s, stderr: %s", "touch outside", show(outcome),
           show(code), show(err));
    tg_string_free(outcome);
    tg_string_free(code);
    tg_string_free(err);
  }
  tg_string_free(out);
  free(line);
  free(inv);

  /* A denied command never runs. */
  answer(rev, "{\"decision\": \"deny\", \"reason\": \"no touching\"}", 0);
  char *never = fmt("%s/never", fx->ws);
  line = fmt("touch %s", never);
  inv = invocation(NULL, line);
  if (ok(tg_gate_spawn_json(edits, inv, &out), "tg_gate_spawn_json")) {
    char *outcome = jstr(out, "outcome"), *tool_result = jstr(out, "tool_result");
    CHECK(same(outcome, "denied") && contains(tool_result, "no touching") && !exists(never),
          "spawn denied: expected denied, nothing run; got %s", out);
    printf("  spawn %-16s -> %s\n", "touch (denied)", show(outcome));
    tg_string_free(outcome);
    tg_string_free(tool_result);
  }
  tg_string_free(out);
  free(line);
  free(inv);

  TgStatus st = tg_gate_spawn_json(edits, "{\"kind\": \"file_read\", \"target\": \"ls\"}", &out);
  CHECK(st == TG_STATUS_INVALID && contains(tg_last_error_message(), "shell_command"),
        "spawn with kind file_read: expected TG_STATUS_INVALID, got %d", (int)st);
  free(never);
  free(inside);
  free(escaped);
}

/* Race-free opens: a descriptor inside, a denial outside. */
static void test_open(const Fixture *fx, TgGate *edits) {
  char *path = fmt("%s/out.txt", fx->ws), *outside = fmt("%s/out.txt", fx->outside);
  const char *text = "written through a turngate descriptor\n";
  char *inv = invocation(NULL, path), *denial = NULL;
  int fd = -2;
  if (ok(tg_gate_open_write(edits, inv, &fd, &denial), "tg_gate_open_write")) {
    CHECK(fd >= 0 && denial == NULL, "open_write inside: expected a descriptor, got %d %s", fd,
          show(denial));
    if (fd >= 0) {
      ssize_t n = write(fd, text, strlen(text));
      CHECK(n == (ssize_t)strlen(text), "write: %s", strerror(errno));
      close(fd);
    }
  }
  tg_string_free(denial);
  char *on_disk = read_text(path);
  CHECK(same(on_disk, text), "the file holds '%s'", show(on_disk));
  free(on_disk);
  printf("  %-22s -> fd, %zu bytes on disk\n", "open_write inside", strlen(text));

  fd = -2;
  if (ok(tg_gate_open_read(edits, inv, &fd, &denial), "tg_gate_open_read")) {
    char buf[128] = {0};
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    CHECK(n >= 0 && same(buf, text), "open_read inside: read '%s'", buf);
    if (fd >= 0) close(fd);
  }
  tg_string_free(denial);
  free(inv);

  inv = invocation("file_write", outside);
  fd = -2;
  if (ok(tg_gate_open_write(edits, inv, &fd, &denial), "tg_gate_open_write")) {
    char *outcome = jstr(denial, "tool_result"), *reason = jstr(denial, "reason");
    CHECK(fd == -1 && contains(outcome, "Permission denied") && contains(reason, "outside_roots") &&
              !exists(outside),
          "open_write outside: expected -1 and a denial, got %d %s", fd, show(denial));
    printf("  %-22s -> fd %d: %s\n", "open_write outside", fd, show(reason));
    tg_string_free(outcome);
    tg_string_free(reason);
  }
  tg_string_free(denial);
  free(inv);

  inv = invocation("file_write", path);
  TgStatus st = tg_gate_open_read(edits, inv, &fd, &denial);
  CHECK(st == TG_STATUS_INVALID && fd == -1 && denial == NULL,
        "open_read with kind file_write: expected TG_STATUS_INVALID, got %d", (int)st);
  free(inv);
  free(path);
  free(outside);
}

/* Argument errors name the argument and clear the out pointers. */
static void test_errors(TgGate *gate) {
  char *out = (char *)"stale";
  TgStatus st = tg_gate_authorize_json(gate, NULL, &out);
  CHECK(st == TG_STATUS_NULL_ARGUMENT && out == NULL &&
            contains(tg_last_error_message(), "invocation"),
        "NULL invocation: got %d: %s", (int)st, tg_last_error_message());
  st = tg_gate_authorize_json(gate, "{\"kind\": \"file_write\"}", &out);
  CHECK(st == TG_STATUS_INVALID && contains(tg_last_error_message(), "target"),
        "invocation without target: got %d: %s", (int)st, tg_last_error_message());
  st = tg_gate_authorize_json(
      gate, "{\"kind\": \"file_write\", \"target\": \"x\", \"tool_name\": \"y\"}", &out);
  CHECK(st == TG_STATUS_INVALID && contains(tg_last_error_message(), "tool_name"),
        "invocation with an unknown field: got %d: %s", (int)st, tg_last_error_message());
  st = tg_gate_authorize_json(gate, "{\"kind\": \"file_wrote\", \"target\": \"x\"}", &out);
  CHECK(st == TG_STATUS_POLICY && contains(tg_last_error_message(), "file_wrote"),
        "unknown kind: got %d: %s", (int)st, tg_last_error_message());
  st = tg_gate_authorize_json(NULL, "{}", &out);
  CHECK(st == TG_STATUS_NULL_ARGUMENT && contains(tg_last_error_message(), "gate"),
        "NULL gate: got %d", (int)st);

  TgApprover *a = (TgApprover *)&st;
  st = tg_approver_builtin("approve_some", &a);
  CHECK(st == TG_STATUS_INVALID && a == NULL && contains(tg_last_error_message(), "approve_some"),
        "unknown builtin approver: got %d", (int)st);
  Reviewer unused = {0};
  a = (TgApprover *)&st;
  st = tg_approver_from_callback(NULL, &unused, free_reviewer, &a);
  CHECK(st == TG_STATUS_NULL_ARGUMENT && a == NULL && atomic_load(&unused.frees) == 0 &&
            contains(tg_last_error_message(), "decide"),
        "NULL callback: got %d, frees %d", (int)st, atomic_load(&unused.frees));
}

/* The audit rows the calls above left in the store. */
static void test_store(TgStore *store) {
  char *turns = NULL;
  ok(tg_store_turns_json(store, &turns), "tg_store_turns_json");
  CHECK(contains(turns, "\"turn-edits\"") && contains(turns, "\"turn-supervised\""),
        "turns: got %s", show(turns));
  tg_string_free(turns);

  const char *want[][2] = {
      {"turn-edits", "decision_allowed"},        {"turn-edits", "decision_denied"},
      {"turn-supervised", "approval_requested"}, {"turn-supervised", "approval_resolved"},
      {"turn-supervised", "decision_denied"},    {"turn-supervised", "profile_selected"},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    char *events = NULL;
    size_t n = 0, found = 0;
    if (!ok(tg_store_replay_json(store, want[i][0], &events), "tg_store_replay_json")) continue;
    ok(tg_json_array_len(events, &n), "events");
    for (size_t j = 0; j < n; j++) {
      char *event = NULL;
      if (!ok(tg_json_array_get(events, j, &event), "event")) continue;
      char *kind = jstr(event, "kind");
      found += same(kind, want[i][1]);
      tg_string_free(kind);
      tg_string_free(event);
    }
    CHECK(found > 0, "%s: no %s row among %zu events", want[i][0], want[i][1], n);
    if (i == 0 || i == 2) printf("  replay %-15s -> %zu audit rows\n", want[i][0], n);
    tg_string_free(events);
  }
  /* Replay under candidates: full access would have allowed every recorded ask and deny of
   * the policy; supervised flips at least as much as it denies. */
  TgPolicy *candidate = NULL;
  char *report = NULL;
  if (ok(tg_policy_from_mode("full_access", &candidate), "tg_policy_from_mode") &&
      ok(tg_store_replay_policy_json(store, candidate, "{\"turn\": \"turn-supervised\"}", &report),
         "tg_store_replay_policy_json")) {
    char *flips = NULL;
    size_t n = 0;
    ok(tg_json_get(report, "flips", &flips), "flips");
    ok(tg_json_array_len(flips, &n), "flips");
    CHECK(n > 0, "replay under full_access flips nothing: %s", report);
    printf("  replay full_access    -> %zu decisions of turn-supervised flip\n", n);
    tg_string_free(flips);
  }
  tg_string_free(report);
  tg_policy_free(candidate);
}

/* ---- reviewable writes ---------------------------------------------------------------------- */

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  if (!f || fputs(text, f) < 0 || fclose(f) != 0) FAIL("cannot write %s", path);
}

/* A status and the last error's code: 1 when `st` is `want` with code `code`. */
static int refused(TgStatus st, TgStatus want, const char *code) {
  return st == want && same(tg_last_error_code(), code);
}

/* A reviewed spawn of `line` in `ws`: the change set's id (tg_string_free), or NULL. Sets
 * *unavailable when this machine cannot review (nothing ran). */
static char *reviewed_spawn(TgGate *gate, const char *ws, const char *line, int *unavailable) {
  char *t = json_str(line), *w = json_str(ws);
  char *inv = fmt("{\"target\": %s, \"cwd\": %s, \"review\": true}", t, w);
  char *out = NULL, *id = NULL;
  TgStatus st = tg_gate_spawn_json(gate, inv, &out);
  if (refused(st, TG_STATUS_CHANGES, "unavailable")) {
    *unavailable = 1;
  } else if (ok(st, "tg_gate_spawn_json (review)")) {
    char *outcome = jstr(out, "outcome"), *code = jget(out, "exit_code");
    id = jstr2(out, "change_set", "id");
    CHECK(same(outcome, "ran") && same(code, "0") && id != NULL,
          "reviewed spawn: expected ran, exit 0, a change set; got %s", out);
    tg_string_free(outcome);
    tg_string_free(code);
  }
  tg_string_free(out);
  free(inv);
  free(t);
  free(w);
  return id;
}

/* `sh -c 'echo new > a.txt; rm b.txt'` under review: the workspace is untouched, the change set
 * lists exactly those changes, apply makes them once, a discarded run leaves the workspace as
 * it was, a conflict is refused naming the path, and ids from elsewhere are refused. */
static void test_review(const char *base) {
  char *ws = fmt("%s/rws", base), *state = fmt("%s/rstate", base), *other_dir = fmt("%s/rother", base);
  char *db = fmt("%s/audit.db", state), *other_db = fmt("%s/audit.db", other_dir);
  char *a = fmt("%s/a.txt", ws), *b = fmt("%s/b.txt", ws), *c = fmt("%s/c.txt", ws);
  char *d = fmt("%s/d.txt", ws), *ran = fmt("%s/ran.txt", ws), *inside_db = fmt("%s/audit.db", ws);
  if (mkdir(ws, 0700) != 0 || mkdir(state, 0700) != 0 || mkdir(other_dir, 0700) != 0) {
    FAIL("mkdir review dirs");
    return;
  }
  write_text(b, "b\n");
  char *snap = resolve_snapshot(ws, "auto_accept_edits");
  TgStore *store = NULL, *other = NULL, *inside = NULL;
  TgApprover *approve_all = NULL;
  TgGate *gate = NULL, *exposed = NULL;
  char *id = NULL, *out = NULL;
  int unavailable = 0;
  if (!snap || !ok(tg_store_open(db, &store), "tg_store_open") ||
      !ok(tg_approver_builtin("approve_all", &approve_all), "tg_approver_builtin") ||
      !ok(tg_gate_new("turn-review", snap, store, approve_all, &gate), "tg_gate_new"))
    goto done;

  id = reviewed_spawn(gate, ws, "sh -c 'echo new > a.txt; rm b.txt'", &unavailable);
  if (unavailable) {
    CHECK(!exists(a) && exists(b), "a refused review ran the command");
    printf("  review                 -> skipped: unavailable here: %s\n", tg_last_error_message());
    goto done;
  }
  if (!id) goto done;
  CHECK(!exists(a) && exists(b), "review: the workspace changed before apply");
  if (ok(tg_store_change_set_json(store, id, &out), "tg_store_change_set_json")) {
    char *changes = jget(out, "changes"), *first = NULL, *second = NULL;
    size_t n = 0;
    ok(tg_json_array_len(changes, &n), "changes");
    if (n == 2) {
      ok(tg_json_array_get(changes, 0, &first), "change 0");
      ok(tg_json_array_get(changes, 1, &second), "change 1");
    }
    char *p0 = jstr(first, "path"), *k0 = jstr(first, "kind"), *p1 = jstr(second, "path"),
         *k1 = jstr(second, "kind");
    CHECK(n == 2 && same(p0, "a.txt") && same(k0, "added") && same(p1, "b.txt") &&
              same(k1, "deleted"),
          "change set: expected a.txt added and b.txt deleted, got %s", out);
    printf("  review                 -> %s: %s %s, %s %s\n", id, show(k0), show(p0), show(k1),
           show(p1));
    tg_string_free(p0);
    tg_string_free(k0);
    tg_string_free(p1);
    tg_string_free(k1);
    tg_string_free(first);
    tg_string_free(second);
    tg_string_free(changes);
  }
  tg_string_free(out);
  out = NULL;
  size_t listed = 0;
  if (ok(tg_store_change_sets_json(store, &out), "tg_store_change_sets_json"))
    ok(tg_json_array_len(out, &listed), "change sets");
  CHECK(listed == 1, "change sets: expected 1, got %s", show(out));
  tg_string_free(out);
  out = NULL;

  if (ok(tg_store_apply_change_set_json(store, id, "{\"by\": \"person:ana\"}", &out),
         "tg_store_apply_change_set_json")) {
    char *status = jstr(out, "status"), *text = read_text(a);
    CHECK(same(status, "applied") && same(text, "new\n") && !exists(b),
          "apply: expected applied, a.txt = new, b.txt gone; got %s", out);
    tg_string_free(status);
    free(text);
  }
  tg_string_free(out);
  out = NULL;
  TgStatus st = tg_store_apply_change_set_json(store, id, NULL, &out);
  CHECK(refused(st, TG_STATUS_CHANGES, "not_pending") && out == NULL,
        "apply twice: expected TG_STATUS_CHANGES not_pending, got %d %s: %s", (int)st,
        tg_last_error_code(), tg_last_error_message());
  printf("  %-22s -> status %d (%s)\n", "apply again", (int)st, tg_last_error_code());
  tg_string_free(id);

  /* A second run, discarded: the workspace is left as it was; apply after discard refuses. */
  write_text(b, "b\n");
  id = reviewed_spawn(gate, ws, "sh -c 'echo two > c.txt; rm b.txt'", &unavailable);
  if (id && ok(tg_store_discard_change_set_json(store, id, "person:ana", &out),
               "tg_store_discard_change_set_json")) {
    char *status = jstr(out, "status");
    CHECK(same(status, "discarded") && !exists(c) && exists(b),
          "discard: expected discarded and the workspace untouched, got %s", out);
    tg_string_free(status);
    tg_string_free(out);
    out = NULL;
    st = tg_store_apply_change_set_json(store, id, NULL, &out);
    CHECK(refused(st, TG_STATUS_CHANGES, "not_pending") && !exists(c),
          "apply after discard: got %d %s", (int)st, tg_last_error_code());
  }
  tg_string_free(id);

  /* A third run whose deletion conflicts with an edit made after it. */
  id = reviewed_spawn(gate, ws, "sh -c 'echo three > d.txt; rm b.txt'", &unavailable);
  if (id) {
    write_text(b, "edited meanwhile\n");
    st = tg_store_apply_change_set_json(store, id, NULL, &out);
    /* Copied: the borrowed text lasts only until the next tg_ call on this thread. */
    char *paths = fmt("%s", tg_last_error_paths_json());
    char *want = json_str(b), *want_paths = fmt("[%s]", want);
    int equal = 0;
    ok(tg_json_equal(paths, want_paths, &equal), "paths");
    CHECK(st == TG_STATUS_CHANGES && equal && !exists(d),
          "conflict: expected TG_STATUS_CHANGES naming [%s], got %d %s", b, (int)st, paths);
    free(paths);
    st = tg_store_apply_change_set_json(store, id, NULL, &out);
    CHECK(refused(st, TG_STATUS_CHANGES, "conflicts") && contains(tg_last_error_message(), "b.txt"),
          "conflict: expected code conflicts and b.txt in the message, got %s: %s",
          tg_last_error_code(), tg_last_error_message());
    printf("  %-22s -> status %d (%s) %s\n", "apply a conflict", (int)st, tg_last_error_code(),
           tg_last_error_paths_json());
    free(want);
    free(want_paths);

    /* Ids from another store, or paths, are refused. */
    if (ok(tg_store_open(other_db, &other), "tg_store_open other")) {
      st = tg_store_apply_change_set_json(other, id, NULL, &out);
      CHECK(refused(st, TG_STATUS_CHANGES, "not_found"), "other store: got %d %s", (int)st,
            tg_last_error_code());
    }
    const char *bad[] = {"../rstate/changes", "../../etc/passwd", "cs-1/../../x", ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
      st = tg_store_apply_change_set_json(store, bad[i], NULL, &out);
      CHECK(refused(st, TG_STATUS_CHANGES, "bad_id"), "id %s: got %d %s", bad[i], (int)st,
            tg_last_error_code());
      st = tg_store_change_set_json(store, bad[i], &out);
      CHECK(refused(st, TG_STATUS_CHANGES, "bad_id"), "show %s: got %d", bad[i], (int)st);
    }
    st = tg_store_apply_change_set_json(store, id, "{\"confirm\": true}", &out);
    CHECK(st == TG_STATUS_INVALID, "unknown apply option: got %d", (int)st);
    CHECK(!exists(d), "a refused apply wrote d.txt");
  }

  /* The store's directory is the workspace: refused, nothing runs. */
  if (ok(tg_store_open(inside_db, &inside), "tg_store_open inside") &&
      ok(tg_gate_new("turn-exposed", snap, inside, approve_all, &exposed), "tg_gate_new")) {
    char *w = json_str(ws);
    char *inv = fmt("{\"target\": \"touch ran.txt\", \"cwd\": %s, \"review\": true}", w);
    st = tg_gate_spawn_json(exposed, inv, &out);
    CHECK(st == TG_STATUS_RUN && out == NULL && !exists(ran),
          "store in the workspace: expected TG_STATUS_RUN and nothing run, got %d: %s", (int)st,
          tg_last_error_message());
    free(inv);
    free(w);
  }

done:
  tg_string_free(id);
  tg_gate_free(gate);
  tg_gate_free(exposed);
  tg_approver_free(approve_all);
  tg_store_free(store);
  tg_store_free(other);
  tg_store_free(inside);
  tg_string_free(snap);
  free(ws);
  free(state);
  free(other_dir);
  free(db);
  free(other_db);
  free(a);
  free(b);
  free(c);
  free(d);
  free(ran);
  free(inside_db);
}

/* An in-memory store; durability names; a deferred write waited for, answered through the
 * store, resumed with the recorded decision (NULL) once. */
static void test_memory_and_wait(const Fixture *fx) {
  TgStore *bad = NULL, *mem = NULL;
  TgStatus st = tg_store_open_durable(fx->db, "fsync", &bad);
  CHECK(st == TG_STATUS_INVALID && bad == NULL && contains(tg_last_error_message(), "fsync"),
        "durability fsync: status %d, %s", st, tg_last_error_message());
  st = tg_store_open_durable(":memory:", "power", &bad);
  CHECK(st == TG_STATUS_INVALID && bad == NULL, "a power-durable memory store was opened");
  TgApprover *defer = NULL;
  TgGate *gate = NULL;
  if (!ok(tg_store_memory(&mem), "tg_store_memory") ||
      !ok(tg_approver_builtin("defer_all", &defer), "tg_approver_builtin") ||
      !ok(tg_gate_new("turn-wait", fx->snap_supervised, mem, defer, &gate), "tg_gate_new")) {
    tg_approver_free(defer);
    tg_store_free(mem);
    return;
  }
  char *path = NULL;
  if (ok(tg_store_path(mem, &path), "tg_store_path"))
    CHECK(same(path, ":memory:"), "memory store path: %s", path);
  tg_string_free(path);
  char *out = authorize(gate, "file_write", "notes.txt");
  char *id = jstr2(out, "request", "id");
  CHECK(id != NULL, "expected a deferred write, got %s", show(out));
  tg_string_free(out);
  if (id) {
    char *waited = NULL, *res = NULL, *auth = NULL;
    if (ok(tg_store_wait_resolved_json(mem, id, 10, &waited), "tg_store_wait_resolved_json")) {
      char *r = jstr2(waited, "resolution", "resolution");
      CHECK(r == NULL, "a pending request came back resolved as %s", r);
      tg_string_free(r);
    }
    tg_string_free(waited);
    waited = NULL;
    st = tg_gate_resume_json(gate, id, NULL, &auth);
    CHECK(st == TG_STATUS_APPROVAL && auth == NULL, "a pending request resumed: %d", st);
    if (ok(tg_store_resolve_json(mem, id, "allow_once", "person", &res), "tg_store_resolve_json") &&
        ok(tg_store_wait_resolved_json(mem, id, -1, &waited), "tg_store_wait_resolved_json")) {
      char *r = jstr2(waited, "resolution", "resolution");
      CHECK(same(r, "allow_once"), "waited: %s", waited);
      tg_string_free(r);
    }
    if (ok(tg_gate_resume_json(gate, id, NULL, &auth), "tg_gate_resume_json (recorded)")) {
      char *outcome = jstr(auth, "outcome");
      CHECK(same(outcome, "allowed"), "the recorded allow resumed as %s", show(auth));
      tg_string_free(outcome);
    }
    tg_string_free(auth);
    auth = NULL;
    st = tg_gate_resume_json(gate, id, NULL, &auth);
    CHECK(st != TG_STATUS_OK && auth == NULL, "a spent allow_once resumed twice");
    tg_string_free(res);
    tg_string_free(waited);
    tg_string_free(id);
  }
  tg_gate_free(gate);
  tg_approver_free(defer);
  tg_store_free(mem);
}

static int run(const char *parent) {
  printf("turngate %s: the gate through the C ABI\n", tg_version());
  Fixture fx = {0};
  char *base = fmt("%s/turngate-c-XXXXXX", parent);
  if (!mkdtemp(base)) {
    perror(base);
    return 1;
  }
  fx.ws = fmt("%s/ws", base);
  fx.outside = fmt("%s/outside", base);
  fx.db = fmt("%s/audit.db", base);
  if (mkdir(fx.ws, 0700) != 0 || mkdir(fx.outside, 0700) != 0) {
    perror("mkdir");
    return 1;
  }
  fx.snap_supervised = resolve_snapshot(fx.ws, "supervised");
  fx.snap_edits = resolve_snapshot(fx.ws, "auto_accept_edits");
  if (!fx.snap_supervised || !fx.snap_edits) return 1;

  test_checkers(&fx);

  TgStore *store = NULL;
  if (!ok(tg_store_open(fx.db, &store), "tg_store_open")) return 1;
  Reviewer *rev = calloc(1, sizeof *rev);
  if (!rev) abort();
  rev->main_thread = pthread_self();
  TgApprover *approver = NULL;
  if (!ok(tg_approver_from_callback(decide, rev, free_reviewer, &approver),
          "tg_approver_from_callback"))
    return 1;
  TgGate *supervised = NULL, *edits = NULL;
  ok(tg_gate_new("turn-supervised", fx.snap_supervised, store, approver, &supervised),
     "tg_gate_new");
  ok(tg_gate_new("turn-edits", fx.snap_edits, store, approver, &edits), "tg_gate_new");
  tg_approver_free(approver); /* the gates hold their own references */
  CHECK(atomic_load(&rev->frees) == 0, "user_data was released while gates hold it");
  if (!supervised || !edits) return 1;

  test_authorize(&fx, edits, rev);
  test_asks(&fx, supervised, store, rev);
  test_spawn(&fx, edits, rev);
  test_open(&fx, edits);
  test_errors(edits);

  /* A built-in approver answers without a callback. */
  TgApprover *approve_all = NULL;
  TgGate *builtin = NULL;
  if (ok(tg_approver_builtin("approve_all", &approve_all), "tg_approver_builtin") &&
      ok(tg_gate_new("turn-builtin", fx.snap_supervised, store, approve_all, &builtin),
         "tg_gate_new")) {
    int before = atomic_load(&rev->calls);
    char *out = authorize(builtin, "shell_command", "make");
    char *outcome = jstr(out, "outcome");
    CHECK(same(outcome, "allowed") && atomic_load(&rev->calls) == before,
          "approve_all: expected allowed without the callback, got %s", show(out));
    tg_string_free(outcome);
    tg_string_free(out);
  }
  tg_gate_free(builtin);
  tg_approver_free(approve_all);

  /* resolve_and_check: the metadata address is refused before any connection. */
  char *net = NULL;
  if (ok(tg_gate_resolve_and_check_json(supervised, "http://169.254.169.254/", NULL, &net),
         "tg_gate_resolve_and_check_json")) {
    char *check = jget(net, "check");
    char *effect = jstr2(check, "verdict", "effect"), *addrs = jget(net, "addrs");
    tg_string_free(check);
    CHECK(same(effect, "deny") && same(addrs, "[]"), "resolve_and_check metadata: got %s", net);
    tg_string_free(effect);
    tg_string_free(addrs);
  }
  tg_string_free(net);

  test_store(store);
  test_memory_and_wait(&fx);
  test_review(base);

  tg_gate_free(supervised);
  CHECK(atomic_load(&rev->frees) == 0, "user_data was released while a gate holds it");
  tg_gate_free(edits);
  CHECK(atomic_load(&rev->frees) == 1, "user_data was released %d times, expected once",
        atomic_load(&rev->frees));
  tg_store_free(store);
  free(rev);
  tg_string_free(fx.snap_supervised);
  tg_string_free(fx.snap_edits);
  free(fx.ws);
  free(fx.outside);
  free(fx.db);
  free(base);
  return failures != 0;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR   (a fresh workspace is made under DIR)\n", argv[0]);
    return 2;
  }
  run(argv[1]);
  printf("%d passed, %d failed\n", passed, failures);
  return failures == 0 ? 0 : 1;
}
