/* The C test programs' checks: each prints "ok: ..." or "FAIL: ..." and counts its failures in `failures`. */
#pragma once

#include <stdio.h>
#include <string.h>

#include <mtlinv/mtlinv.h>

static int failures = 0;

/* The call returned `want` and the message holds `text`. */
static void expect(const char* name, mtlinv_status got, mtlinv_status want, const char* text) {
  const char* message = mtlinv_last_error();
  if (got == want && strstr(message, text) != NULL) {
    printf("ok: %s: %s\n", name, message);
  } else {
    printf("FAIL: %s: status %d (want %d), message '%s' (want '%s')\n", name, (int)got, (int)want, message, text);
    ++failures;
  }
}

static void check(const char* name, int passed) {
  printf("%s: %s\n", passed ? "ok" : "FAIL", name);
  failures += !passed;
}
