/* The C API's error paths (tests/ops/test_embedding.py runs this): each bad call must return its status with a message
 * naming the argument, never crash or succeed silently; and the limit's scopes (mtlinv_push_limit) belong to the
 * thread that opens them. `api_errors` checks the calls; `api_errors env N` checks that the library took its limit
 * from MTLINV_BATCH_INVARIANT_LIMIT=N, and `api_errors bad-env` that an invalid value is every limit call's error.
 * Prints one line per case; exit status 0 when every case passes. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mtlinv/mtlinv.h>

#include "expect.h"

static void* read_limit(void* out) {
  *(int*)out = mtlinv_get_limit();
  return NULL;
}

/* The limit another thread sees now. */
static int limit_of_another_thread(void) {
  int limit = -2;
  pthread_t thread;
  if (pthread_create(&thread, NULL, read_limit, &limit) != 0 || pthread_join(thread, NULL) != 0) return -3;
  return limit;
}

/* mtlinv_push_limit/mtlinv_pop_limit: scopes of the calling thread, nested, restoring what it saw before; the
 * process value (mtlinv_set_limit) stays the other threads' and comes back when the scopes end. */
static void check_limit_scopes(void) {
  int previous = -1;
  expect("set_limit 2", mtlinv_set_limit(2, &previous), MTLINV_OK, "");
  expect("push_limit 8", mtlinv_push_limit(8), MTLINV_OK, "");
  expect("push_limit 0", mtlinv_push_limit(0), MTLINV_OK, "");
  check("innermost scope on this thread, the process value on another",
        mtlinv_get_limit() == 0 && limit_of_another_thread() == 2);
  expect("pop_limit", mtlinv_pop_limit(), MTLINV_OK, "");
  check("pop_limit restores the outer scope", mtlinv_get_limit() == 8);
  expect("set_limit 5 inside a scope", mtlinv_set_limit(5, &previous), MTLINV_OK, "");
  check("set_limit inside a scope sets the process value, which the scope hides",
        previous == 2 && mtlinv_get_limit() == 8 && limit_of_another_thread() == 5);
  expect("push_limit -1", mtlinv_push_limit(-1), MTLINV_ERROR_INVALID_ARGUMENT,
         "push_limit: limit must be in [0, 2^30], got -1");
  expect("pop_limit", mtlinv_pop_limit(), MTLINV_OK, "");
  check("the process value once the scopes end", mtlinv_get_limit() == 5);
  expect("pop_limit with no scope open", mtlinv_pop_limit(), MTLINV_ERROR_INVALID_ARGUMENT,
         "pop_limit: no limit scope is open on this thread");
  expect("set_limit 0", mtlinv_set_limit(0, NULL), MTLINV_OK, "");
}

/* mtlinv_quant_tile against the tile layout written out (N = 16, K = 160: two steps, the second partial; 4 bits,
 * groups of 32), and its errors. */
static void check_quant_tile(void) {
  enum { N = 16, K = 160, BITS = 4, GROUP = 32, ROW_WORDS = K * BITS / 32, GROUPS = K / GROUP, STEP_WORDS = 16 };
  static uint32_t wq[N * ROW_WORDS], wq_tiled[N * 2 * STEP_WORDS];
  static uint16_t scales[N * GROUPS], biases[N * GROUPS], scales_tiled[N * GROUPS], biases_tiled[N * GROUPS];
  for (int i = 0; i < N * ROW_WORDS; ++i) wq[i] = 1000u + (uint32_t)i;
  for (int i = 0; i < N * GROUPS; ++i) {
    scales[i] = (uint16_t)i;
    biases[i] = (uint16_t)(500 + i);
  }
  int64_t words = 0;
  expect("quant_tiled_words", mtlinv_quant_tiled_words(N, K, GROUP, BITS, &words), MTLINV_OK, "");
  expect("quant_tile", mtlinv_quant_tile(wq, scales, biases, MTLINV_BFLOAT16, N, K, GROUP, BITS, wq_tiled,
                                         scales_tiled, biases_tiled), MTLINV_OK, "");
  int wrong = words != N * 2 * STEP_WORDS;
  for (int step = 0; step < 2; ++step) {
    for (int row = 0; row < N; ++row) {
      for (int w = 0; w < STEP_WORDS; ++w) {
        const int word = step * STEP_WORDS + w;
        const uint32_t want = word < ROW_WORDS ? wq[row * ROW_WORDS + word] : 0u;
        wrong += wq_tiled[(step * N + row) * STEP_WORDS + w] != want;
      }
    }
  }
  for (int group = 0; group < GROUPS; ++group) {
    for (int row = 0; row < N; ++row) {
      wrong += scales_tiled[group * N + row] != scales[row * GROUPS + group];
      wrong += biases_tiled[group * N + row] != biases[row * GROUPS + group];
    }
  }
  printf("%s: quant_tile layout: %lld words, %d wrong\n", wrong ? "FAIL" : "ok", (long long)words, wrong);
  failures += wrong != 0;
  expect("quant_tile bits=3", mtlinv_quant_tiled_words(N, K, GROUP, 3, &words), MTLINV_ERROR_INVALID_ARGUMENT,
         "quant_tile: bits=3 at group_size=");
  expect("quant_tiled_words K=48 at group 16", mtlinv_quant_tiled_words(N, 48, 16, 8, &words),
         MTLINV_ERROR_INVALID_ARGUMENT, "quant_tile: K=48 is not a multiple of 32");
  expect("quant_tiled_words K=2^60", mtlinv_quant_tiled_words(N, (int64_t)1 << 60, GROUP, BITS, &words),
         MTLINV_ERROR_INVALID_ARGUMENT, "quant_tile: N=16 and K=1152921504606846976 make a weight too large");
  expect("quant_tile N=24", mtlinv_quant_tile(wq, scales, biases, MTLINV_FLOAT16, 24, K, GROUP, BITS, wq_tiled,
                                              scales_tiled, biases_tiled), MTLINV_ERROR_INVALID_ARGUMENT,
         "quant_tile: N=24 is not a positive multiple of 16");
  expect("quant_tile scale_dtype", mtlinv_quant_tile(wq, scales, biases, MTLINV_INT32, N, K, GROUP, BITS, wq_tiled,
                                                     scales_tiled, biases_tiled), MTLINV_ERROR_DTYPE,
         "mtlinv_quant_tile: scale_dtype=4 is not");
  expect("quant_tile biases_tiled NULL", mtlinv_quant_tile(wq, scales, biases, MTLINV_FLOAT16, N, K, GROUP, BITS,
                                                           wq_tiled, scales_tiled, NULL), MTLINV_ERROR_INVALID_ARGUMENT,
         "quant_tile: biases_tiled is NULL");
}

/* mtlinv_tile_weights against the dense layout written out (N = 16, K = 64: two blocks of 32), and its errors. */
static void check_tile_weights(void) {
  enum { N = 16, K = 64, BLOCK = 32 };
  static uint16_t w[N * K], w_tiled[N * 2 * BLOCK];
  for (int i = 0; i < N * K; ++i) w[i] = (uint16_t)(1 + i);
  int64_t elements = 0;
  expect("tiled_weight_elements", mtlinv_tiled_weight_elements(N, K, &elements), MTLINV_OK, "");
  expect("tile_weights", mtlinv_tile_weights(w, MTLINV_BFLOAT16, N, K, w_tiled), MTLINV_OK, "");
  int wrong = elements != N * 2 * BLOCK;
  for (int block = 0; block < 2; ++block) {
    for (int row = 0; row < N; ++row) {
      for (int i = 0; i < BLOCK; ++i) {
        wrong += w_tiled[(block * N + row) * BLOCK + i] != w[row * K + block * BLOCK + i];
      }
    }
  }
  printf("%s: tile_weights layout: %lld elements, %d wrong\n", wrong ? "FAIL" : "ok", (long long)elements, wrong);
  failures += wrong != 0;
  expect("tile_weights N=8", mtlinv_tile_weights(w, MTLINV_FLOAT16, 8, K, w_tiled), MTLINV_ERROR_INVALID_ARGUMENT,
         "tile_weights: N=8 is not a positive multiple of 16");
  expect("tile_weights K=40", mtlinv_tile_weights(w, MTLINV_FLOAT16, N, 40, w_tiled), MTLINV_ERROR_INVALID_ARGUMENT,
         "tile_weights: K=40 is not a positive multiple of 32 (the layout's shape must give K)");
  expect("tiled_weight_elements K=2^60", mtlinv_tiled_weight_elements(N, (int64_t)1 << 60, &elements),
         MTLINV_ERROR_INVALID_ARGUMENT, "tile_weights: N=16 and K=1152921504606846976 make a weight too large");
  expect("tile_weights float32", mtlinv_tile_weights(w, MTLINV_FLOAT32, N, K, w_tiled), MTLINV_ERROR_DTYPE,
         "mtlinv_tile_weights: dtype=0 is not MTLINV_FLOAT16 or MTLINV_BFLOAT16");
  expect("tile_weights w_tiled NULL", mtlinv_tile_weights(w, MTLINV_FLOAT16, N, K, NULL),
         MTLINV_ERROR_INVALID_ARGUMENT, "tile_weights: w_tiled is NULL");
}

static int check_calls(void) {
  char small[4];
  expect("device_name into 4 bytes", mtlinv_device_name(small, sizeof small), MTLINV_ERROR_INVALID_ARGUMENT,
         "buf has 4 bytes but the name needs");
  char name[256];
  expect("device_name", mtlinv_device_name(name, sizeof name), MTLINV_OK, "");

  mtlinv_tensor* t = NULL;
  const int64_t shape[2] = {2, -2};
  expect("from_host ndim=9", mtlinv_tensor_from_host(NULL, shape, 9, MTLINV_FLOAT32, &t),
         MTLINV_ERROR_INVALID_ARGUMENT, "mtlinv_tensor_from_host: ndim=9 must be in [0, 8]");
  expect("from_host shape NULL", mtlinv_tensor_from_host(NULL, NULL, 2, MTLINV_FLOAT32, &t),
         MTLINV_ERROR_INVALID_ARGUMENT, "mtlinv_tensor_from_host: shape is NULL");
  expect("from_host negative dim", mtlinv_tensor_from_host(NULL, shape, 2, MTLINV_FLOAT32, &t),
         MTLINV_ERROR_INVALID_ARGUMENT, "mtlinv_tensor_from_host: shape [2, -2] has dimension -2, which is negative");
  const int64_t two[2] = {2, 2};
  expect("from_host data NULL", mtlinv_tensor_from_host(NULL, two, 2, MTLINV_FLOAT32, &t),
         MTLINV_ERROR_INVALID_ARGUMENT, "mtlinv_tensor_from_host: data is NULL");
  /* A dimension past the kernels' 32 bits is the shape's error, found before an allocation fails on its size. */
  const int64_t huge[2] = {(int64_t)1 << 33, 1};
  expect("from_host [2^33, 1]", mtlinv_tensor_from_host(NULL, huge, 2, MTLINV_FLOAT32, &t),
         MTLINV_ERROR_INVALID_ARGUMENT,
         "mtlinv_tensor_from_host: shape [8589934592, 1] has dimension 8589934592, beyond the kernels' 2^32 - 1");
  const int64_t past[2] = {(int64_t)1 << 32, 0};
  expect("from_host [2^32, 0]", mtlinv_tensor_from_host(NULL, past, 2, MTLINV_FLOAT32, &t),
         MTLINV_ERROR_INVALID_ARGUMENT, "has dimension 4294967296, beyond the kernels' 2^32 - 1");
  if (t != NULL) {
    printf("FAIL: a failed call wrote *out\n");
    ++failures;
  }
  const int64_t widest[2] = {((int64_t)1 << 32) - 1, 0};
  mtlinv_tensor* widest_tensor = NULL;
  expect("from_host [2^32 - 1, 0]", mtlinv_tensor_from_host(NULL, widest, 2, MTLINV_FLOAT32, &widest_tensor),
         MTLINV_OK, "");
  mtlinv_tensor_free(widest_tensor);

  const int64_t empty_shape[1] = {0};
  mtlinv_tensor* empty = NULL;
  expect("from_host of zero bytes", mtlinv_tensor_from_host(NULL, empty_shape, 1, MTLINV_FLOAT32, &empty), MTLINV_OK,
         "");
  expect("to_host of zero bytes", mtlinv_tensor_to_host(empty, NULL, 0), MTLINV_OK, "");
  expect("to_host data NULL", mtlinv_tensor_to_host(empty, NULL, 4), MTLINV_ERROR_INVALID_ARGUMENT,
         "mtlinv_tensor_to_host: data is NULL");

  static float values[1 * 1 * 4 * 64];
  const int64_t qkv_shape[4] = {1, 1, 4, 64};
  mtlinv_tensor *q = NULL, *out = NULL;
  expect("from_host q", mtlinv_tensor_from_host(values, qkv_shape, 4, MTLINV_FLOAT32, &q), MTLINV_OK, "");
  expect("gemv w NULL", mtlinv_gemv(q, NULL, NULL, 1, &out), MTLINV_ERROR_INVALID_ARGUMENT, "mtlinv_gemv: w is NULL");
  expect("qgemv biases NULL", mtlinv_qgemv(q, q, q, NULL, NULL, 64, 4, &out), MTLINV_ERROR_INVALID_ARGUMENT,
         "mtlinv_qgemv: biases is NULL");
  expect("sdpa v NULL", mtlinv_sdpa(q, q, NULL, 1, -1, 0.0f, &out), MTLINV_ERROR_INVALID_ARGUMENT,
         "mtlinv_sdpa: v is NULL");
  expect("sdpa scale NaN", mtlinv_sdpa(q, q, q, 1, -1, nanf(""), &out), MTLINV_ERROR_INVALID_ARGUMENT,
         "mtlinv_sdpa: scale is nan, not a finite number");
  expect("sdpa scale -inf", mtlinv_sdpa(q, q, q, 1, -1, -INFINITY, &out), MTLINV_ERROR_INVALID_ARGUMENT,
         "mtlinv_sdpa: scale is -inf, not a finite number");
  expect("sdpa default scale", mtlinv_sdpa(q, q, q, 1, -1, 0.0f, &out), MTLINV_OK, "");
  mtlinv_tensor_free(out);
  mtlinv_tensor_free(q);
  mtlinv_tensor_free(empty);
  check_quant_tile();
  check_tile_weights();
  check_limit_scopes();
  return failures;
}

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "env") == 0) {
    const int want = atoi(argv[2]);
    const int got = mtlinv_get_limit();
    printf("%s: limit %d from MTLINV_BATCH_INVARIANT_LIMIT=%s\n", got == want ? "ok" : "FAIL", got, argv[2]);
    return got == want ? 0 : 1;
  }
  if (argc == 2 && strcmp(argv[1], "bad-env") == 0) {
    if (mtlinv_get_limit() != -1) {
      printf("FAIL: get_limit took an invalid MTLINV_BATCH_INVARIANT_LIMIT\n");
      return 1;
    }
    expect("set_limit under a bad variable", mtlinv_set_limit(2, NULL), MTLINV_ERROR_INVALID_ARGUMENT,
           "MTLINV_BATCH_INVARIANT_LIMIT='");
    expect("push_limit under a bad variable", mtlinv_push_limit(2), MTLINV_ERROR_INVALID_ARGUMENT,
           "MTLINV_BATCH_INVARIANT_LIMIT='");
    return failures != 0;
  }
  return check_calls() != 0;
}
