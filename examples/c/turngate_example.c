/*
 * A small C program over the turngate C ABI (bindings/include/turngate.h).
 *
 *   turngate_example demo                   load a TOML policy, check a few actions, show errors
 *   turngate_example vectors DIR            run the conformance vectors of DIR/policy.json,
 *                                           DIR/scope_hash.json and DIR/reducer.json
 *
 * Exits 0 when every check passes, 1 otherwise (each failure is printed). The program reads
 * the vector files itself and calls tg_policy_* / tg_scope_hash / tg_reduce_all_json per
 * vector; the tg_json_* functions only give it JSON access.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "turngate.h"

static int failures = 0;
static int passed = 0;
static int skipped = 0;

#define FAIL(...)                                                                          \
  do {                                                                                     \
    fprintf(stderr, "FAIL: " __VA_ARGS__);                                                 \
    fputc('\n', stderr);                                                                   \
    failures++;                                                                            \
  } while (0)

/* A call that must succeed; on failure it reports the status and message and returns 0. */
static int ok(TgStatus status, const char *what) {
  if (status == TG_STATUS_OK) return 1;
  FAIL("%s: status %d: %s", what, (int)status, tg_last_error_message());
  return 0;
}

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    return NULL;
  }
  if (fseek(f, 0, SEEK_END) != 0) {
    fclose(f);
    return NULL;
  }
  long n = ftell(f);
  rewind(f);
  char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    fclose(f);
    return NULL;
  }
  buf[n] = '\0';
  fclose(f);
  return buf;
}

/* String member `key` of `json`, or NULL when missing/null. Caller frees with tg_string_free. */
static char *get_string(const char *json, const char *key) {
  char *out = NULL;
  ok(tg_json_get_string(json, key, &out), key);
  return out;
}

static int same(const char *a, const char *b) {
  if (a == NULL || b == NULL) return a == b;
  return strcmp(a, b) == 0;
}

/* ---- demo ----------------------------------------------------------------------------------- */

static const char *DEMO_POLICY =
    "[defaults]\n"
    "file_read = \"allow\"\n"
    "file_write = \"ask\"\n"
    "shell_command = \"ask\"\n"
    "\n"
    "[[layers]]\n"
    "name = \"project\"\n"
    "\n"
    "[[layers.rules]]\n"
    "kind = \"file_read\"\n"
    "effect = \"deny\"\n"
    "pattern = \"secrets/*\"\n"
    "\n"
    "[[layers.rules]]\n"
    "kind = \"shell_command\"\n"
    "effect = \"allow\"\n"
    "pattern = \"ls\"\n";

static void expect_effect(const TgPolicy *p, const char *kind, const char *target,
                          TgEffect want) {
  TgEffect got;
  if (!ok(tg_policy_check(p, kind, target, NULL, &got), "tg_policy_check")) return;
  printf("  %-14s %-28s -> %s\n", kind, target, tg_effect_name(got));
  if (got != want)
    FAIL("%s %s: expected %s, got %s", kind, target, tg_effect_name(want), tg_effect_name(got));
  else
    passed++;
}

static int demo(void) {
  printf("turngate %s\n", tg_version());
  TgPolicy *policy = NULL;
  if (!ok(tg_policy_from_toml(DEMO_POLICY, "demo.toml", &policy), "tg_policy_from_toml"))
    return 1;

  expect_effect(policy, "file_read", "src/main.rs", TG_EFFECT_ALLOW);
  expect_effect(policy, "file_read", "secrets/key.txt", TG_EFFECT_DENY);
  expect_effect(policy, "file_write", "src/main.rs", TG_EFFECT_ASK);
  expect_effect(policy, "shell_command", "ls -la", TG_EFFECT_ALLOW);
  expect_effect(policy, "shell_command", "/bin/ls -la; rm -rf /", TG_EFFECT_ASK);
  expect_effect(policy, "network", "example.com:443", TG_EFFECT_DENY); /* network left out */

  char *verdict = NULL;
  if (ok(tg_policy_explain_json(policy, "file_read", "secrets/key.txt", NULL, &verdict),
         "tg_policy_explain_json")) {
    printf("  explain: %s\n", verdict);
    char *layer = get_string(verdict, "layer");
    char *rule_json = NULL;
    ok(tg_json_get(verdict, "rule", &rule_json), "rule");
    char *rule = rule_json ? get_string(rule_json, "pattern") : NULL;
    tg_string_free(rule_json);
    if (!same(layer, "project") || !same(rule, "secrets/*"))
      FAIL("explain: expected layer project, rule secrets/*, got %s", verdict);
    else
      passed++;
    tg_string_free(layer);
    tg_string_free(rule);
  }
  tg_string_free(verdict);

  /* Errors: a status and a message naming the bad input; the out pointer is cleared. */
  TgEffect effect;
  TgStatus st = tg_policy_check(policy, "file_reed", "x", NULL, &effect);
  printf("  unknown kind -> status %d: %s\n", (int)st, tg_last_error_message());
  if (st != TG_STATUS_POLICY || !strstr(tg_last_error_message(), "file_reed"))
    FAIL("unknown kind: expected TG_STATUS_POLICY naming file_reed");
  else
    passed++;

  TgPolicy *bad = (TgPolicy *)&effect; /* must be overwritten with NULL */
  st = tg_policy_from_json("{\"layers\": [{\"name\": \"p\", \"rules\": [{\"kind\": \"file_read\", "
                           "\"effect\": \"maybe\", \"pattern\": \"x\"}]}]}",
                           "bad.json", &bad);
  printf("  bad effect -> status %d: %s\n", (int)st, tg_last_error_message());
  if (st != TG_STATUS_POLICY || bad != NULL || !strstr(tg_last_error_message(), "maybe"))
    FAIL("bad policy: expected TG_STATUS_POLICY naming `maybe` and a NULL policy");
  else
    passed++;

  st = tg_policy_check(policy, NULL, "x", NULL, &effect);
  if (st != TG_STATUS_NULL_ARGUMENT || !strstr(tg_last_error_message(), "kind"))
    FAIL("NULL kind: expected TG_STATUS_NULL_ARGUMENT naming kind, got %d", (int)st);
  else
    passed++;

  /* A successful call clears the thread's last error. */
  if (ok(tg_policy_check(policy, "file_read", "a", NULL, &effect), "check") &&
      strcmp(tg_last_error_message(), "") != 0)
    FAIL("the last error was not cleared by a successful call");

  tg_policy_free(policy);
  tg_policy_free(NULL); /* a no-op */
  tg_string_free(NULL);
  return failures != 0;
}

/* ---- conformance vectors -------------------------------------------------------------------- */

/* A builtin name (`default`, `permissive`, a mode) or a policy object, compiled. */
static TgPolicy *policy_of(const char *json) {
  TgPolicy *p = NULL;
  char *name = NULL;
  if (json[0] == '"') {
    /* A JSON string: wrap it in an object to read it unquoted. */
    size_t n = strlen(json) + 16;
    char *obj = malloc(n);
    if (!obj) return NULL;
    snprintf(obj, n, "{\"n\": %s}", json);
    name = get_string(obj, "n");
    free(obj);
  }
  if (name == NULL) {
    ok(tg_policy_from_json(json, "vector", &p), "tg_policy_from_json");
  } else if (strcmp(name, "default") == 0) {
    ok(tg_policy_tiered(NULL, NULL, &p), "tg_policy_tiered");
  } else if (strcmp(name, "permissive") == 0) {
    ok(tg_policy_permissive(&p), "tg_policy_permissive");
  } else {
    ok(tg_policy_from_mode(name, &p), "tg_policy_from_mode");
  }
  tg_string_free(name);
  return p;
}

/* Replaces *acc by combine(*acc, each item of the list member `key` of `vector`). */
static int fold(TgPolicy **acc, const char *vector, const char *key,
                TgStatus (*combine)(const TgPolicy *, const TgPolicy *, TgPolicy **)) {
  char *list = NULL;
  if (!ok(tg_json_get(vector, key, &list), key)) return 0;
  if (list == NULL) return 1;
  size_t n = 0;
  int good = ok(tg_json_array_len(list, &n), key);
  for (size_t i = 0; good && i < n; i++) {
    char *item = NULL;
    good = ok(tg_json_array_get(list, i, &item), key);
    TgPolicy *other = good ? policy_of(item) : NULL;
    TgPolicy *next = NULL;
    good = other && ok(combine(*acc, other, &next), key);
    if (good) {
      tg_policy_free(*acc);
      *acc = next;
    }
    tg_policy_free(other);
    tg_string_free(item);
  }
  tg_string_free(list);
  return good;
}

static TgPolicy *build(const char *vector) {
  char *builtin = NULL, *policy = NULL;
  ok(tg_json_get(vector, "builtin", &builtin), "builtin");
  ok(tg_json_get(vector, "policy", &policy), "policy");
  TgPolicy *p = NULL;
  if (builtin && policy) {
    TgPolicy *base = policy_of(builtin), *over = policy_of(policy);
    if (base && over) ok(tg_policy_merge(base, over, &p), "merge");
    tg_policy_free(base);
    tg_policy_free(over);
  } else if (builtin || policy) {
    p = policy_of(builtin ? builtin : policy);
  } else {
    FAIL("vector has neither builtin nor policy");
  }
  tg_string_free(builtin);
  tg_string_free(policy);
  if (p && (!fold(&p, vector, "merge", tg_policy_merge) ||
            !fold(&p, vector, "contain", tg_policy_contain))) {
    tg_policy_free(p);
    p = NULL;
  }
  return p;
}

static void run_policy_vector(const char *vector, size_t index) {
  char *why = get_string(vector, "why");
  char *action = NULL, *expect = NULL;
  ok(tg_json_get(vector, "action", &action), "action");
  ok(tg_json_get(vector, "expect", &expect), "expect");
  char *target = NULL;
  if (action && tg_json_get_string(action, "target", &target) == TG_STATUS_UTF8) {
    /* A C string cannot carry a NUL byte, so a target with one cannot cross this ABI. */
    printf("  skipped policy[%zu] (%s): the target holds a NUL byte, which a C string cannot "
           "carry\n",
           index, why ? why : "");
    skipped++;
    tg_string_free(action);
    tg_string_free(expect);
    tg_string_free(why);
    return;
  }
  TgPolicy *p = build(vector);
  if (p && action && expect) {
    char *kind = get_string(action, "kind");
    char *tool = get_string(action, "tool");
    char *verdict = NULL;
    TgEffect effect;
    if (ok(tg_policy_explain_json(p, kind, target, tool, &verdict), "explain") &&
        ok(tg_policy_check(p, kind, target, tool, &effect), "check")) {
      static const char *fields[] = {"effect", "layer", "rule", "reason"};
      int good = 1;
      for (size_t f = 0; f < 4; f++) {
        char *want = get_string(expect, fields[f]);
        char *got = NULL;
        if (f == 2) { /* the verdict's rule is a Rule object; the vectors name its pattern */
          char *rule = NULL;
          ok(tg_json_get(verdict, "rule", &rule), "rule");
          if (rule && strcmp(rule, "null") != 0) got = get_string(rule, "pattern");
          tg_string_free(rule);
        } else {
          got = get_string(verdict, fields[f]);
        }
        if (!same(want, got)) {
          FAIL("policy[%zu] (%s): %s: expected %s, got %s", index, why ? why : "", fields[f],
               want ? want : "null", got ? got : "null");
          good = 0;
        }
        if (f == 0 && !same(got, tg_effect_name(effect))) {
          FAIL("policy[%zu]: check says %s but explain says %s", index, tg_effect_name(effect),
               got ? got : "null");
          good = 0;
        }
        tg_string_free(want);
        tg_string_free(got);
      }
      passed += good;
    }
    tg_string_free(verdict);
    tg_string_free(kind);
    tg_string_free(tool);
  } else {
    FAIL("policy[%zu] (%s): could not build the vector", index, why ? why : "");
  }
  tg_string_free(target);
  tg_policy_free(p);
  tg_string_free(action);
  tg_string_free(expect);
  tg_string_free(why);
}

static void run_scope_hash_vector(const char *vector, size_t index) {
  char *scope = NULL, *action = NULL;
  char *want = get_string(vector, "scope_hash");
  ok(tg_json_get(vector, "scope", &scope), "scope");
  ok(tg_json_get(vector, "action", &action), "action");
  int good = 1;
  if (action) {
    char *kind = get_string(action, "kind"), *target = get_string(action, "target");
    char *tool = get_string(action, "tool"), *cwd = get_string(vector, "cwd");
    char *got = NULL;
    int equal = 0;
    if (ok(tg_scope_from_action_json(kind, target, tool, cwd, &got), "scope_from_action") &&
        ok(tg_json_equal(got, scope, &equal), "json_equal") && !equal) {
      FAIL("scope_hash[%zu]: scope of the action: expected %s, got %s", index, scope, got);
      good = 0;
    }
    tg_string_free(got);
    tg_string_free(kind);
    tg_string_free(target);
    tg_string_free(tool);
    tg_string_free(cwd);
  }
  char *hash = NULL;
  if (scope && ok(tg_scope_hash(scope, &hash), "scope_hash") && !same(hash, want)) {
    FAIL("scope_hash[%zu]: expected %s, got %s", index, want, hash);
    good = 0;
  }
  passed += good && hash != NULL;
  tg_string_free(hash);
  tg_string_free(want);
  tg_string_free(scope);
  tg_string_free(action);
}

static void run_reducer_vector(const char *vector, size_t index) {
  char *inputs = NULL, *expected = NULL, *state = NULL;
  int equal = 0;
  ok(tg_json_get(vector, "inputs", &inputs), "inputs");
  ok(tg_json_get(vector, "expected", &expected), "expected");
  if (inputs && expected && ok(tg_reduce_all_json(NULL, inputs, &state), "reduce_all") &&
      ok(tg_json_equal(state, expected, &equal), "json_equal")) {
    if (equal)
      passed++;
    else
      FAIL("reducer[%zu]: expected %s\n  got %s", index, expected, state);
  }
  tg_string_free(state);
  tg_string_free(inputs);
  tg_string_free(expected);
}

/* ---- tooling suites (as core/tests/conformance_tooling.rs) -------------------------------- */

/* Two JSON texts (NULL for a missing member) are equal; a missing member equals null. */
static int json_same(const char *a, const char *b) {
  if (a == NULL && b == NULL) return 1;
  if (a == NULL) return strcmp(b, "null") == 0;
  if (b == NULL) return strcmp(a, "null") == 0;
  int equal = 0;
  return ok(tg_json_equal(a, b, &equal), "json_equal") && equal;
}

/* The vector's policy: `policy_toml` text, or as the policy suite builds it. */
static TgPolicy *build_tooling(const char *vector) {
  char *toml = get_string(vector, "policy_toml");
  TgPolicy *p = NULL;
  if (toml) {
    ok(tg_policy_from_toml(toml, "vector", &p), "tg_policy_from_toml");
  } else {
    p = build(vector);
  }
  tg_string_free(toml);
  return p;
}

static void run_policy_turn_vector(const char *vector, size_t index) {
  char *why = get_string(vector, "why");
  char *action = NULL, *expect = NULL, *history = NULL, *verdict = NULL;
  ok(tg_json_get(vector, "action", &action), "action");
  ok(tg_json_get(vector, "expect", &expect), "expect");
  ok(tg_json_get(vector, "history", &history), "history");
  TgPolicy *p = build_tooling(vector);
  if (p && action && expect) {
    char *kind = get_string(action, "kind"), *target = get_string(action, "target");
    char *tool = get_string(action, "tool");
    if (ok(tg_policy_explain_in_turn_json(p, kind, target, tool, history, &verdict), "explain_in_turn")) {
      int good = 1;
      static const char *fields[] = {"effect", "layer", "reason"};
      for (size_t f = 0; f < 3; f++) {
        char *want = get_string(expect, fields[f]), *got = get_string(verdict, fields[f]);
        if (!same(want, got)) good = 0;
        tg_string_free(want);
        tg_string_free(got);
      }
      char *rule = NULL, *got_pattern = NULL, *want_pattern = get_string(expect, "rule");
      ok(tg_json_get(verdict, "rule", &rule), "rule");
      if (rule && strcmp(rule, "null") != 0) got_pattern = get_string(rule, "pattern");
      if (!same(want_pattern, got_pattern)) good = 0;
      static const char *objects[] = {"condition", "would"};
      for (size_t f = 0; f < 2; f++) {
        char *want = NULL, *got = NULL;
        ok(tg_json_get(expect, objects[f], &want), objects[f]);
        ok(tg_json_get(verdict, objects[f], &got), objects[f]);
        if (!json_same(want, got)) good = 0;
        tg_string_free(want);
        tg_string_free(got);
      }
      if (good)
        passed++;
      else
        FAIL("policy_turn[%zu] (%s): expected %s\n  got %s", index, why ? why : "", expect, verdict);
      tg_string_free(rule);
      tg_string_free(got_pattern);
      tg_string_free(want_pattern);
    }
    tg_string_free(kind);
    tg_string_free(target);
    tg_string_free(tool);
  } else {
    FAIL("policy_turn[%zu] (%s): could not build the vector", index, why ? why : "");
  }
  tg_policy_free(p);
  tg_string_free(verdict);
  tg_string_free(history);
  tg_string_free(action);
  tg_string_free(expect);
  tg_string_free(why);
}

static void run_policy_lint_vector(const char *vector, size_t index) {
  char *expect = NULL, *findings = NULL;
  ok(tg_json_get(vector, "expect", &expect), "expect");
  TgPolicy *p = build_tooling(vector);
  size_t n = 0, want_n = 0;
  if (p && expect && ok(tg_policy_lint_json(p, &findings), "lint") &&
      ok(tg_json_array_len(findings, &n), "findings") && ok(tg_json_array_len(expect, &want_n), "expect")) {
    int good = n == want_n;
    for (size_t i = 0; good && i < n; i++) {
      char *got = NULL, *want = NULL;
      ok(tg_json_array_get(findings, i, &got), "finding");
      ok(tg_json_array_get(expect, i, &want), "expected finding");
      char *gc = get_string(got, "code"), *gp = get_string(got, "path");
      char *wc = get_string(want, "code"), *wp = get_string(want, "path");
      good = same(gc, wc) && same(gp, wp);
      tg_string_free(gc);
      tg_string_free(gp);
      tg_string_free(wc);
      tg_string_free(wp);
      tg_string_free(got);
      tg_string_free(want);
    }
    if (good)
      passed++;
    else
      FAIL("policy_lint[%zu]: expected %s\n  got %s", index, expect, findings);
  } else {
    FAIL("policy_lint[%zu]: could not run the vector", index);
  }
  tg_policy_free(p);
  tg_string_free(findings);
  tg_string_free(expect);
}

static void run_replay_vector(const char *vector, size_t index) {
  char *expect = NULL, *events = NULL, *options = NULL, *report = NULL;
  ok(tg_json_get(vector, "expect", &expect), "expect");
  ok(tg_json_get(vector, "events", &events), "events");
  ok(tg_json_get(vector, "options", &options), "options");
  TgPolicy *p = build_tooling(vector);
  if (p && expect && events && ok(tg_policy_replay_events_json(p, events, options, &report), "replay")) {
    if (json_same(expect, report))
      passed++;
    else
      FAIL("replay[%zu]: expected %s\n  got %s", index, expect, report);
  } else {
    FAIL("replay[%zu]: could not run the vector", index);
  }
  tg_policy_free(p);
  tg_string_free(report);
  tg_string_free(options);
  tg_string_free(events);
  tg_string_free(expect);
}

/* ---- suite changes_serde (as core/tests/conformance_changes.rs) --------------------------- */

static void run_changes_serde_vector(const char *vector, size_t index) {
  char *set = NULL, *needle = get_string(vector, "expect_error"), *out = NULL;
  ok(tg_json_get(vector, "change_set", &set), "change_set");
  TgStatus st = set ? tg_change_set_parse_json(set, &out) : TG_STATUS_NULL_ARGUMENT;
  if (needle == NULL) {
    if (st == TG_STATUS_OK && json_same(set, out))
      passed++;
    else
      FAIL("changes_serde[%zu]: expected %s\n  got status %d: %s %s", index, set, (int)st,
           out ? out : "", tg_last_error_message());
  } else if (st == TG_STATUS_INVALID && strstr(tg_last_error_message(), needle) != NULL) {
    passed++;
  } else {
    FAIL("changes_serde[%zu]: expected TG_STATUS_INVALID naming `%s`, got status %d: %s",
         index, needle, (int)st, tg_last_error_message());
  }
  tg_string_free(out);
  tg_string_free(needle);
  tg_string_free(set);
}

static void run_file(const char *dir, const char *name, const char *suite,
                     void (*run)(const char *, size_t)) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  char *doc = read_file(path);
  if (!doc) {
    FAIL("cannot read %s", path);
    return;
  }
  char *got_suite = get_string(doc, "suite");
  char *vectors = NULL;
  size_t n = 0;
  if (!same(got_suite, suite)) {
    FAIL("%s: suite is %s, expected %s", path, got_suite ? got_suite : "null", suite);
  } else if (ok(tg_json_get(doc, "vectors", &vectors), "vectors") && vectors &&
             ok(tg_json_array_len(vectors, &n), "vectors")) {
    int before_pass = passed, before_fail = failures, before_skip = skipped;
    for (size_t i = 0; i < n; i++) {
      char *vector = NULL;
      if (ok(tg_json_array_get(vectors, i, &vector), "vector")) run(vector, i);
      tg_string_free(vector);
    }
    printf("%-18s %zu vectors: %d passed, %d failed, %d skipped\n", name, n,
           passed - before_pass, failures - before_fail, skipped - before_skip);
    if (n == 0) FAIL("%s has no vectors", path);
  }
  tg_string_free(vectors);
  tg_string_free(got_suite);
  free(doc);
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "demo") == 0) {
    demo();
  } else if (argc == 3 && strcmp(argv[1], "vectors") == 0) {
    run_file(argv[2], "policy.json", "policy", run_policy_vector);
    run_file(argv[2], "scope_hash.json", "scope_hash", run_scope_hash_vector);
    run_file(argv[2], "reducer.json", "reducer", run_reducer_vector);
    run_file(argv[2], "policy_turn.json", "policy_turn", run_policy_turn_vector);
    run_file(argv[2], "policy_lint.json", "policy_lint", run_policy_lint_vector);
    run_file(argv[2], "replay.json", "replay", run_replay_vector);
    run_file(argv[2], "changes_serde.json", "changes_serde", run_changes_serde_vector);
  } else {
    fprintf(stderr, "usage: %s demo | vectors DIR\n", argv[0]);
    return 2;
  }
  printf("%d passed, %d failed, %d skipped\n", passed, failures, skipped);
  return failures == 0 ? 0 : 1;
}
