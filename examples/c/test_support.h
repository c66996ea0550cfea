/*
 * What the C test programs (gate_test.c, abi_attack.c) share: counting checks, reporting
 * failures, and small string helpers. Header-only (static functions), included by each test
 * program; turngate_example.c, the user-facing example, stays self-contained.
 */
#ifndef TURNGATE_TEST_SUPPORT_H
#define TURNGATE_TEST_SUPPORT_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "turngate.h"

static int failures = 0; /* failed checks and failed calls */
static int checks = 0;   /* checks made */
static int passed = 0;   /* checks that held */

#define FAIL(...)                                                                          \
  do {                                                                                     \
    fprintf(stderr, "FAIL: " __VA_ARGS__);                                                 \
    fputc('\n', stderr);                                                                   \
    failures++;                                                                            \
  } while (0)

/* Counts a check; reports one that does not hold. */
#define CHECK(cond, ...)                                                                   \
  do {                                                                                     \
    checks++;                                                                              \
    if (cond)                                                                              \
      passed++;                                                                            \
    else                                                                                   \
      FAIL(__VA_ARGS__);                                                                   \
  } while (0)

/* A call that must succeed; on failure it reports the status and message and returns 0. */
static int ok(TgStatus status, const char *what) {
  if (status == TG_STATUS_OK) return 1;
  FAIL("%s: status %d: %s", what, (int)status, tg_last_error_message());
  return 0;
}

/* printf into a new malloc'd string. */
static char *fmt(const char *format, ...) {
  va_list ap;
  va_start(ap, format);
  int n = vsnprintf(NULL, 0, format, ap);
  va_end(ap);
  if (n < 0) abort();
  char *s = malloc((size_t)n + 1);
  if (!s) abort();
  va_start(ap, format);
  vsnprintf(s, (size_t)n + 1, format, ap);
  va_end(ap);
  return s;
}

static int contains(const char *haystack, const char *needle) {
  return haystack != NULL && strstr(haystack, needle) != NULL;
}

#endif
