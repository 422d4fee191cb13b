/* The C API's model path, from C alone (tests/ops/test_embedding.py runs this): quantise weights on the host
 * (mtlinv_quantize, checked on MLX's hand example and round-tripped), build a small decoder (mtlinv_decoder_create;
 * mtlinv_decoder_create_ext with Qwen 2's bias, Qwen 3's norms and a RoPE table),
 * and check that a forward of M positions gives each position the bits of M forwards of one position under a limit
 * of M; then every error path: status and message naming the argument, never a crash. Prints one line per case;
 * exit status 0 when every case passes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mtlinv/mtlinv.h>

#include "expect.h"

/* MLX's hand example: 0..15 twice in one group of 32 at 4 bits has scale -1, bias 15 and q = 15 - w. */
static void check_quantize(void) {
  float w[32], back[32];
  uint32_t wq[4];
  float scale = 0, bias = 0;
  int64_t words = 0;
  for (int i = 0; i < 32; ++i) w[i] = (float)(i % 16);
  expect("quant_row_words", mtlinv_quant_row_words(32, 32, 4, &words), MTLINV_OK, "");
  check("a 4-bit row of 32 values is 4 words", words == 4);
  expect("quantize", mtlinv_quantize(w, MTLINV_FLOAT32, 1, 32, 32, 4, wq, &scale, &bias), MTLINV_OK, "");
  check("quantize: MLX's words, scale and bias",
        wq[0] == 0x89ABCDEFu && wq[1] == 0x01234567u && wq[2] == 0x89ABCDEFu && wq[3] == 0x01234567u &&
            scale == -1.0f && bias == 15.0f);
  expect("dequantize", mtlinv_dequantize(wq, &scale, &bias, MTLINV_FLOAT32, 1, 32, 32, 4, back), MTLINV_OK, "");
  check("dequantize gives w back", memcmp(back, w, sizeof w) == 0);
  memset(back, 0, sizeof back);
  expect("dequantize_float32", mtlinv_dequantize_float32(wq, &scale, &bias, MTLINV_FLOAT32, 1, 32, 32, 4, back),
         MTLINV_OK, "");
  check("dequantize_float32 gives w back", memcmp(back, w, sizeof w) == 0);

  expect("quantize bits=7", mtlinv_quantize(w, MTLINV_FLOAT32, 1, 32, 32, 7, wq, &scale, &bias),
         MTLINV_ERROR_INVALID_ARGUMENT, "bits=7 is not supported");
  expect("quantize group_size=24", mtlinv_quantize(w, MTLINV_FLOAT32, 1, 32, 24, 4, wq, &scale, &bias),
         MTLINV_ERROR_INVALID_ARGUMENT, "group_size=24 is not supported");
  expect("quantize K=32, group_size=64", mtlinv_quantize(w, MTLINV_FLOAT32, 1, 32, 64, 4, wq, &scale, &bias),
         MTLINV_ERROR_INVALID_ARGUMENT, "K=32 is not a multiple of group_size=64");
  expect("quantize uint32 w", mtlinv_quantize(w, MTLINV_UINT32, 1, 32, 32, 4, wq, &scale, &bias),
         MTLINV_ERROR_DTYPE, "dtype uint32 is not supported");
  expect("quantize NULL wq", mtlinv_quantize(w, MTLINV_FLOAT32, 1, 32, 32, 4, NULL, &scale, &bias),
         MTLINV_ERROR_INVALID_ARGUMENT, "quantize: wq is NULL");
  w[5] = 1.0f / 0.0f;
  expect("quantize inf", mtlinv_quantize(w, MTLINV_FLOAT32, 1, 32, 32, 4, wq, &scale, &bias),
         MTLINV_ERROR_INVALID_ARGUMENT, "w contains inf or NaN");
  w[5] = 3.0e38f;
  w[6] = -3.0e38f;
  expect("quantize overflowing range", mtlinv_quantize(w, MTLINV_FLOAT32, 1, 32, 32, 4, wq, &scale, &bias),
         MTLINV_ERROR_INVALID_ARGUMENT, "max - min overflows float32");
  expect("dequantize NULL out", mtlinv_dequantize(wq, &scale, &bias, MTLINV_FLOAT32, 1, 32, 32, 4, NULL),
         MTLINV_ERROR_INVALID_ARGUMENT, "dequantize: out is NULL");
  expect("quant_row_words NULL", mtlinv_quant_row_words(32, 32, 4, NULL), MTLINV_ERROR_INVALID_ARGUMENT,
         "words is NULL");
}

enum { V = 64, H = 128, HQ = 2, HKV = 1, D = 64, F = 128, C = 16, GROUP = 32, BITS = 4, M = 4 };

static unsigned random_state = 12345u;
static float random_value(float scale) {
  random_state = random_state * 1664525u + 1013904223u;
  return scale * ((float)(random_state >> 8) / 16777216.0f - 0.5f);
}

static mtlinv_tensor* upload(const void* data, int64_t rows, int64_t cols, mtlinv_dtype dtype) {
  const int64_t shape[2] = {rows, cols};
  mtlinv_tensor* t = NULL;
  if (mtlinv_tensor_from_host(data, shape, 2, dtype, &t) != MTLINV_OK) {
    printf("FAIL: upload: %s\n", mtlinv_last_error());
    exit(1);
  }
  return t;
}

/* A random weight [n, k] quantized with mtlinv_quantize and uploaded; the handles are released by free_linear. */
static mtlinv_quant_linear random_linear(int64_t n, int64_t k) {
  float* w = malloc((size_t)(n * k) * sizeof(float));
  uint32_t* wq = malloc((size_t)(n * k * BITS / 32) * sizeof(uint32_t));
  float* scales = malloc((size_t)(n * k / GROUP) * sizeof(float));
  float* biases = malloc((size_t)(n * k / GROUP) * sizeof(float));
  mtlinv_quant_linear l;
  for (int64_t i = 0; i < n * k; ++i) w[i] = random_value(0.2f);
  if (mtlinv_quantize(w, MTLINV_FLOAT32, n, k, GROUP, BITS, wq, scales, biases) != MTLINV_OK) {
    printf("FAIL: quantize: %s\n", mtlinv_last_error());
    exit(1);
  }
  l.wq = upload(wq, n, k * BITS / 32, MTLINV_UINT32);
  l.scales = upload(scales, n, k / GROUP, MTLINV_FLOAT32);
  l.biases = upload(biases, n, k / GROUP, MTLINV_FLOAT32);
  l.group_size = GROUP;
  l.bits = BITS;
  free(w);
  free(wq);
  free(scales);
  free(biases);
  return l;
}

static void free_linear(mtlinv_quant_linear* l) {
  mtlinv_tensor_free((mtlinv_tensor*)l->wq);
  mtlinv_tensor_free((mtlinv_tensor*)l->scales);
  mtlinv_tensor_free((mtlinv_tensor*)l->biases);
}

static mtlinv_tensor* cache(void) {
  const int64_t shape[3] = {HKV, C, D};
  mtlinv_tensor* t = NULL;
  expect("tensor_empty", mtlinv_tensor_empty(shape, 3, MTLINV_FLOAT32, &t), MTLINV_OK, "");
  return t;
}

static mtlinv_tensor* vector_of(const float* values, int64_t n) {
  mtlinv_tensor* t = NULL;
  expect("tensor_from_host", mtlinv_tensor_from_host(values, &n, 1, MTLINV_FLOAT32, &t), MTLINV_OK, "");
  return t;
}

/* Whether each of the M positions of ids, run alone (after the ones before it), has the bits of its row of
 * logits_all, the positions' logits from one call. */
static int each_position_alone(mtlinv_decoder* decoder, const int64_t* ids, const float* logits_all) {
  static float logits_one[V];
  mtlinv_tensor* one = NULL;
  int same = 1;
  for (int i = 0; i < M; ++i) {
    expect("decoder_forward 1", mtlinv_decoder_forward(decoder, &ids[i], 1, i, &one), MTLINV_OK, "");
    expect("download", mtlinv_tensor_to_host(one, logits_one, sizeof logits_one), MTLINV_OK, "");
    same &= memcmp(logits_one, logits_all + i * V, sizeof logits_one) == 0;
    mtlinv_tensor_free(one);
  }
  return same;
}

/* mtlinv_decoder_create_ext: without extras or a table, the plain decoder's bits (plain: its logits of ids); with
 * Qwen 2's bias, Qwen 3's norms and a RoPE table, other logits, each position still with the bits it has alone;
 * and its checks. */
static void check_decoder_ext(const mtlinv_decoder_config* config, const mtlinv_tensor* embedding,
                              const mtlinv_decoder_layer* layer, const mtlinv_tensor* norm,
                              const mtlinv_quant_linear* output, const int64_t* ids, const float* plain) {
  static float bias[(HQ + 2 * HKV) * D], weights[D], freqs[D / 2], logits_all[M * V];
  mtlinv_decoder_layer_extras extras = {NULL, NULL, NULL};
  mtlinv_decoder *ext = NULL, *unused = NULL;
  mtlinv_tensor* all = NULL;
  int previous = 0;
  for (int i = 0; i < (HQ + 2 * HKV) * D; ++i) bias[i] = random_value(1.0f);
  for (int i = 0; i < D; ++i) weights[i] = 1.0f + random_value(0.2f);
  freqs[0] = 1.0f;
  for (int j = 1; j < D / 2; ++j) freqs[j] = freqs[j - 1] * 0.75f;
  expect("set_limit", mtlinv_set_limit(M, &previous), MTLINV_OK, "");

  expect("create_ext plain", mtlinv_decoder_create_ext(config, NULL, 0, embedding, layer, &extras, 1, norm, output,
                                                       &ext), MTLINV_OK, "");
  expect("forward plain", mtlinv_decoder_forward(ext, ids, M, 0, &all), MTLINV_OK, "");
  expect("download", mtlinv_tensor_to_host(all, logits_all, sizeof logits_all), MTLINV_OK, "");
  check("create_ext without extras has create's bits", memcmp(logits_all, plain, sizeof logits_all) == 0);
  mtlinv_tensor_free(all);
  mtlinv_decoder_free(ext);

  extras.qkv_bias = vector_of(bias, (HQ + 2 * HKV) * D);
  extras.q_norm = vector_of(weights, D);
  extras.k_norm = extras.q_norm;
  expect("create_ext", mtlinv_decoder_create_ext(config, freqs, D / 2, embedding, layer, &extras, 1, norm, output,
                                                 &ext), MTLINV_OK, "");
  expect("forward ext M", mtlinv_decoder_forward(ext, ids, M, 0, &all), MTLINV_OK, "");
  expect("download", mtlinv_tensor_to_host(all, logits_all, sizeof logits_all), MTLINV_OK, "");
  check("the extras change the logits", memcmp(logits_all, plain, sizeof logits_all) != 0);
  check("with the extras, each position of a call of M has the bits of the position alone",
        each_position_alone(ext, ids, logits_all));
  expect("create_ext NULL rope_freqs", mtlinv_decoder_create_ext(config, NULL, D / 2, embedding, layer, &extras, 1,
                                                                 norm, output, &unused),
         MTLINV_ERROR_INVALID_ARGUMENT, "mtlinv_decoder_create_ext: rope_freqs is NULL");
  expect("create_ext rope_freqs with n_rope_freqs 0", mtlinv_decoder_create_ext(config, freqs, 0, embedding, layer,
                                                                                &extras, 1, norm, output, &unused),
         MTLINV_ERROR_INVALID_ARGUMENT, "rope_freqs is given with n_rope_freqs=0; pass NULL for no table");
  freqs[3] = 2.0f;
  expect("create_ext frequency above 1", mtlinv_decoder_create_ext(config, freqs, D / 2, embedding, layer, &extras,
                                                                   1, norm, output, &unused),
         MTLINV_ERROR_INVALID_ARGUMENT, "rope_freqs[3]=2 is outside (0, 1]");
  extras.k_norm = NULL;
  expect("create_ext q_norm alone", mtlinv_decoder_create_ext(config, NULL, 0, embedding, layer, &extras, 1, norm,
                                                              output, &unused),
         MTLINV_ERROR_INVALID_ARGUMENT, "layers[0] has q_norm without k_norm");
  check("a failed create_ext leaves *out as it was", unused == NULL);
  expect("restore the limit", mtlinv_set_limit(previous, NULL), MTLINV_OK, "");
  mtlinv_tensor_free(all);
  mtlinv_tensor_free((mtlinv_tensor*)extras.qkv_bias);
  mtlinv_tensor_free((mtlinv_tensor*)extras.q_norm);
  mtlinv_decoder_free(ext);
}

static void check_decoder(void) {
  static float table[V * H], ones[H];
  mtlinv_decoder_config config = {HQ, 10000.0, 1e-5};
  mtlinv_decoder_layer layer;
  mtlinv_quant_linear output;
  mtlinv_tensor *embedding, *norm, *all = NULL, *one = NULL;
  mtlinv_decoder *decoder = NULL, *unused = NULL;
  const int64_t ids[M] = {5, 17, 42, 63};
  static float logits_all[M * V];
  int previous = 0;
  for (int i = 0; i < V * H; ++i) table[i] = random_value(2.0f);
  for (int i = 0; i < H; ++i) ones[i] = 1.0f;
  embedding = upload(table, V, H, MTLINV_FLOAT32);
  norm = upload(ones, 1, H, MTLINV_FLOAT32);
  {
    mtlinv_tensor* flat = NULL;
    const int64_t shape[1] = {H};
    expect("tensor_reshape", mtlinv_tensor_reshape(norm, shape, 1, &flat), MTLINV_OK, "");
    mtlinv_tensor_free(norm);
    norm = flat;
  }
  layer.attn_norm = norm;
  layer.ffn_norm = norm;
  layer.qkv = random_linear((HQ + 2 * HKV) * D, H);
  layer.o = random_linear(H, HQ * D);
  layer.gate_up = random_linear(2 * F, H);
  layer.down = random_linear(H, F);
  layer.k_cache = cache();
  layer.v_cache = cache();
  output = random_linear(V, H);

  expect("decoder_create", mtlinv_decoder_create(&config, embedding, &layer, 1, norm, &output, &decoder), MTLINV_OK,
         "");
  check("decoder_capacity", mtlinv_decoder_capacity(decoder) == C && mtlinv_decoder_capacity(NULL) == -1);
  /* M positions in one call vs one at a time, under a limit of M: the same bits, row for row. */
  expect("set_limit", mtlinv_set_limit(M, &previous), MTLINV_OK, "");
  expect("decoder_forward M", mtlinv_decoder_forward(decoder, ids, M, 0, &all), MTLINV_OK, "");
  check("logits are [M, V]", mtlinv_tensor_ndim(all) == 2 && mtlinv_tensor_dim(all, 0) == M &&
                                 mtlinv_tensor_dim(all, 1) == V);
  expect("download", mtlinv_tensor_to_host(all, logits_all, sizeof logits_all), MTLINV_OK, "");
  check("each position of a call of M has the bits of the position alone",
        each_position_alone(decoder, ids, logits_all));
  {
    float sum = 0.0f;
    for (int i = 0; i < M * V; ++i) sum += logits_all[i] * logits_all[i];
    check("the logits are not all zero", sum > 0.0f);
  }
  expect("restore the limit", mtlinv_set_limit(previous, NULL), MTLINV_OK, "");

  {
    const int64_t bad_id = V;
    expect("forward id out of range", mtlinv_decoder_forward(decoder, &bad_id, 1, 0, &one),
           MTLINV_ERROR_INVALID_ARGUMENT, "ids[0]=64 is outside [0, 64)");
  }
  expect("forward no ids", mtlinv_decoder_forward(decoder, ids, 0, 0, &one), MTLINV_ERROR_INVALID_ARGUMENT,
         "0 tokens at position 0");
  expect("forward past the caches", mtlinv_decoder_forward(decoder, ids, M, C - 1, &one),
         MTLINV_ERROR_INVALID_ARGUMENT, "do not fit the cache capacity");
  expect("forward NULL decoder", mtlinv_decoder_forward(NULL, ids, 1, 0, &one), MTLINV_ERROR_INVALID_ARGUMENT,
         "mtlinv_decoder_forward: decoder is NULL");
  expect("forward NULL logits", mtlinv_decoder_forward(decoder, ids, 1, 0, NULL), MTLINV_ERROR_INVALID_ARGUMENT,
         "logits is NULL");
  expect("create NULL config", mtlinv_decoder_create(NULL, embedding, &layer, 1, norm, &output, &unused),
         MTLINV_ERROR_INVALID_ARGUMENT, "config is NULL");
  {
    mtlinv_decoder_layer missing = layer;
    missing.v_cache = NULL;
    expect("create NULL cache", mtlinv_decoder_create(&config, embedding, &missing, 1, norm, &output, &unused),
           MTLINV_ERROR_INVALID_ARGUMENT, "layers[0].v_cache is NULL");
  }
  {
    mtlinv_decoder_config odd = config;
    odd.n_heads = 0;
    expect("create n_heads=0", mtlinv_decoder_create(&odd, embedding, &layer, 1, norm, &output, &unused),
           MTLINV_ERROR_INVALID_ARGUMENT, "n_heads=0 must be positive");
  }
  check("a failed create leaves *out as it was", unused == NULL);
  check_decoder_ext(&config, embedding, &layer, norm, &output, ids, logits_all);

  mtlinv_decoder_free(decoder);
  mtlinv_decoder_free(NULL);
  mtlinv_tensor_free(all);
  free_linear(&layer.qkv);
  free_linear(&layer.o);
  free_linear(&layer.gate_up);
  free_linear(&layer.down);
  free_linear(&output);
  mtlinv_tensor_free(layer.k_cache);
  mtlinv_tensor_free(layer.v_cache);
  mtlinv_tensor_free(embedding);
  mtlinv_tensor_free(norm);
}

int main(void) {
  char expected[32];
  snprintf(expected, sizeof expected, "%d.%d.%d", MTLINV_VERSION_MAJOR, MTLINV_VERSION_MINOR, MTLINV_VERSION_PATCH);
  check("mtlinv_version is the header's", mtlinv_version() == MTLINV_VERSION &&
                                              strcmp(mtlinv_version_string(), expected) == 0);
  check_quantize();
  check_decoder();
  printf("%s\n", failures ? "FAIL" : "PASS");
  return failures ? 1 : 0;
}
