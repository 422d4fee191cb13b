/* The C API's super-block form, GGUF's K-quants (tests/ops/test_embedding.py runs this), from C alone: with int8
 * scale and bias codes and float32 supers, mtlinv_qgemv_super has the bits of mtlinv_qgemv given the expanded
 * float32 scales and biases (each super factor times its code, rounded to float32) at bits 4, 5 and 6; a decoder
 * made by mtlinv_decoder_create_super has the logits of the one made from the expanded scales;
 * mtlinv_quant_tile_super puts each super-block's 16 rows side by side; every error names its argument. The
 * supers are not 1, so a path that ignored them would give other bits. Prints one line per case; exit status 0 when
 * every case passes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mtlinv/mtlinv.h>

#include "expect.h"

enum { SUPER = 256, ROWS = 32, TILE = 16 };

static unsigned random_state = 2024u;
static unsigned random_bits(void) {
  random_state = random_state * 1664525u + 1013904223u;
  return random_state >> 8;
}
static float random_value(float scale) { return scale * ((float)random_bits() / 16777216.0f - 0.5f); }

static mtlinv_tensor* upload(const void* data, const int64_t* shape, int ndim, mtlinv_dtype dtype) {
  mtlinv_tensor* t = NULL;
  if (mtlinv_tensor_from_host(data, shape, ndim, dtype, &t) != MTLINV_OK) {
    printf("FAIL: upload: %s\n", mtlinv_last_error());
    exit(1);
  }
  return t;
}

/* One projection W [n, k] in both forms: the super-block form's codes and supers, and the affine form with the
 * expanded float32 scales and biases (at 8 bits for Q6_K's 6-bit codes, as the float32 import widens them: the
 * affine format has no 6-bit group of 16). */
typedef struct {
  mtlinv_quant_linear codes;    /* scales and biases: int8 codes */
  mtlinv_quant_linear expanded; /* scales and biases: float32 */
  mtlinv_tensor* supers;        /* [n, k / 256, 2] */
} projection;

/* q[0 .. count) as one little-endian bit stream of `bits` per value, in count * bits / 32 words (MLX's rows). */
static uint32_t* pack(const uint8_t* q, int64_t count, int bits) {
  uint32_t* words = calloc((size_t)(count * bits / 32), sizeof(uint32_t));
  for (int64_t i = 0; i < count; ++i) {
    const int64_t bit = i * bits;
    words[bit / 32] |= (uint32_t)q[i] << (bit % 32);
    if (bit % 32 + bits > 32) words[bit / 32 + 1] |= (uint32_t)q[i] >> (32 - bit % 32);
  }
  return words;
}

/* Random codes, scale and bias codes in [0, 63] (Q4_K's and Q5_K's 6-bit fields) and factors like a K-quant's
 * (d, -dmin). */
static projection random_projection(int64_t n, int64_t k, int group_size, int bits) {
  const int64_t groups = n * k / group_size, blocks = n * k / SUPER, per = SUPER / group_size;
  const int wide = bits == 6 ? 8 : bits;
  uint8_t* q = malloc((size_t)(n * k));
  int8_t* codes = malloc((size_t)(2 * groups));
  float* expanded = malloc((size_t)(2 * groups) * sizeof(float));
  float* supers = malloc((size_t)(2 * blocks) * sizeof(float));
  uint32_t *wq, *wq_wide;
  const int64_t group_shape[2] = {n, k / group_size}, super_shape[3] = {n, k / SUPER, 2};
  int64_t wq_shape[2] = {n, k * bits / 32};
  projection p;
  for (int64_t i = 0; i < n * k; ++i) q[i] = (uint8_t)(random_bits() % (1u << bits));
  for (int64_t b = 0; b < blocks; ++b) {
    supers[2 * b] = 1e-3f + random_value(1e-3f);
    supers[2 * b + 1] = -1e-3f + random_value(1e-3f);
  }
  for (int64_t g = 0; g < groups; ++g) {
    for (int j = 0; j < 2; ++j) {
      codes[j * groups + g] = (int8_t)(random_bits() % 64);
      expanded[j * groups + g] = supers[2 * (g / per) + j] * (float)codes[j * groups + g];
    }
  }
  wq = pack(q, n * k, bits);
  wq_wide = pack(q, n * k, wide);
  p.codes.wq = upload(wq, wq_shape, 2, MTLINV_UINT32);
  wq_shape[1] = k * wide / 32;
  p.expanded.wq = upload(wq_wide, wq_shape, 2, MTLINV_UINT32);
  p.codes.scales = upload(codes, group_shape, 2, MTLINV_INT8);
  p.codes.biases = upload(codes + groups, group_shape, 2, MTLINV_INT8);
  p.expanded.scales = upload(expanded, group_shape, 2, MTLINV_FLOAT32);
  p.expanded.biases = upload(expanded + groups, group_shape, 2, MTLINV_FLOAT32);
  p.codes.group_size = p.expanded.group_size = group_size;
  p.codes.bits = bits;
  p.expanded.bits = wide;
  p.supers = upload(supers, super_shape, 3, MTLINV_FLOAT32);
  free(q);
  free(wq);
  free(wq_wide);
  free(codes);
  free(expanded);
  free(supers);
  return p;
}

static void free_projection(projection* p) {
  const mtlinv_tensor* owned[6] = {p->codes.wq,       p->codes.scales,    p->codes.biases,
                                   p->expanded.wq,    p->expanded.scales, p->expanded.biases};
  for (int i = 0; i < 6; ++i) mtlinv_tensor_free((mtlinv_tensor*)owned[i]);
  mtlinv_tensor_free(p->supers);
}

/* Whether two tensors hold the same bytes. */
static int same_bits(const mtlinv_tensor* a, const mtlinv_tensor* b) {
  const size_t bytes = mtlinv_tensor_nbytes(a);
  char* ha = malloc(bytes);
  char* hb = malloc(bytes);
  int same = bytes > 0 && bytes == mtlinv_tensor_nbytes(b) && mtlinv_tensor_to_host(a, ha, bytes) == MTLINV_OK &&
             mtlinv_tensor_to_host(b, hb, bytes) == MTLINV_OK && memcmp(ha, hb, bytes) == 0;
  free(ha);
  free(hb);
  return same;
}

/* mtlinv_qgemv_super against mtlinv_qgemv with the expanded scales, m rows of float32 x, at each K-quant's width. */
static void check_qgemv(void) {
  static const int formats[3][2] = {{4, 32}, {5, 32}, {6, 16}}; /* bits, group_size: Q4_K, Q5_K, Q6_K */
  static char name[96];
  const int64_t k = 2 * SUPER, m = 3, x_shape[2] = {m, k};
  float x[3 * 2 * SUPER];
  mtlinv_tensor *xt, *got = NULL, *want = NULL, *unused = NULL;
  mtlinv_dtype dtype = MTLINV_FLOAT32;
  for (int i = 0; i < m * k; ++i) x[i] = random_value(2.0f);
  xt = upload(x, x_shape, 2, MTLINV_FLOAT32);
  /* The canonical kernels, whose arithmetic the float32 import shares (above the limit each form has its own). */
  expect("push_limit", mtlinv_push_limit((int)m), MTLINV_OK, "");
  for (int f = 0; f < 3; ++f) {
    projection p = random_projection(ROWS, k, formats[f][1], formats[f][0]);
    const mtlinv_quant_linear *c = &p.codes, *e = &p.expanded;
    got = want = NULL;
    snprintf(name, sizeof name, "qgemv_super bits=%d group_size=%d", c->bits, c->group_size);
    expect(name, mtlinv_qgemv_super(xt, c->wq, c->scales, c->biases, p.supers, NULL, c->group_size, c->bits, &got),
           MTLINV_OK, "");
    expect("qgemv, expanded", mtlinv_qgemv(xt, e->wq, e->scales, e->biases, NULL, e->group_size, e->bits, &want),
           MTLINV_OK, "");
    snprintf(name, sizeof name, "bits=%d: the super-block form has the expanded scales' bits", c->bits);
    check(name, same_bits(got, want));
    mtlinv_tensor_free(got);
    mtlinv_tensor_free(want);
    if (f == 0) {
      expect("tensor_dtype of codes", mtlinv_tensor_dtype(c->scales, &dtype), MTLINV_OK, "");
      check("codes are MTLINV_INT8", dtype == MTLINV_INT8);
      expect("qgemv_super NULL supers", mtlinv_qgemv_super(xt, c->wq, c->scales, c->biases, NULL, NULL, 32, 4,
                                                           &unused),
             MTLINV_ERROR_INVALID_ARGUMENT, "mtlinv_qgemv_super: supers is NULL");
      expect("qgemv with codes, no supers", mtlinv_qgemv(xt, c->wq, c->scales, c->biases, NULL, 32, 4, &unused),
             MTLINV_ERROR_INVALID_ARGUMENT, "mtlinv_qgemv: scales are MTLINV_INT8 codes (the super-block form); use "
             "mtlinv_qgemv_super");
      expect("qgemv_super with float scales", mtlinv_qgemv_super(xt, c->wq, e->scales, e->biases, p.supers, NULL,
                                                                 32, 4, &unused),
             MTLINV_ERROR_INVALID_ARGUMENT, "supers is given but scales are float32");
      expect("qgemv_super bits=8", mtlinv_qgemv_super(xt, c->wq, c->scales, c->biases, p.supers, NULL, 32, 8,
                                                      &unused),
             MTLINV_ERROR_INVALID_ARGUMENT, "bits=8");
      expect("qgemv_super supers of another shape", mtlinv_qgemv_super(xt, c->wq, c->scales, c->biases, xt, NULL,
                                                                        32, 4, &unused),
             MTLINV_ERROR_INVALID_ARGUMENT, "supers has shape [3, 512]");
      check("a failed qgemv_super leaves *out as it was", unused == NULL);
    }
    free_projection(&p);
  }
  expect("pop_limit", mtlinv_pop_limit(), MTLINV_OK, "");
  mtlinv_tensor_free(xt);
}

/* mtlinv_quant_tile_super in each format: step s of rows 16 t .. 16 t + 15 side by side (4 runs of `bits` words a
 * row), a group's 16 rows side by side, and block s of supers' 16 rows side by side, [N/16, K/256, 16, 2]. */
static void check_tile(void) {
  enum { N = ROWS, K = 2 * SUPER, S = K / SUPER, STEP = 128, MAX_WORDS = N * K * 6 / 32, MAX_GROUPS = N * K / 16 };
  static const int formats[3][2] = {{4, 32}, {5, 32}, {6, 16}};
  static uint32_t wq[MAX_WORDS], wq_tiled[MAX_WORDS];
  static int8_t scales[MAX_GROUPS], biases[MAX_GROUPS], scales_tiled[MAX_GROUPS], biases_tiled[MAX_GROUPS];
  static float supers[N * S * 2], supers_tiled[N * S * 2], float_scales[MAX_GROUPS], float_tiled[MAX_GROUPS];
  static char name[96];
  for (int i = 0; i < MAX_WORDS; ++i) wq[i] = random_bits();
  for (int i = 0; i < MAX_GROUPS; ++i) scales[i] = (int8_t)(i % 64), biases[i] = (int8_t)(i % 61);
  for (int i = 0; i < N * S * 2; ++i) supers[i] = (float)i;
  for (int f = 0; f < 3; ++f) {
    const int bits = formats[f][0], group = formats[f][1], groups = K / group, step_words = STEP * bits / 32;
    int64_t words = 0;
    int placed = 1;
    expect("quant_tiled_words", mtlinv_quant_tiled_words(N, K, group, bits, &words), MTLINV_OK, "");
    snprintf(name, sizeof name, "bits=%d: the tiled words are as many as the row layout's", bits);
    check(name, words == N * K * bits / 32);
    expect("quant_tile_super", mtlinv_quant_tile_super(wq, scales, biases, supers, N, K, group, bits, wq_tiled,
                                                       scales_tiled, biases_tiled, supers_tiled), MTLINV_OK, "");
    for (int t = 0; t < N / TILE; ++t)
      for (int r = 0; r < TILE; ++r) {
        for (int s = 0; s < K / STEP; ++s)
          for (int w = 0; w < step_words; ++w)
            placed &= wq_tiled[((t * (K / STEP) + s) * TILE + r) * step_words + w] ==
                      wq[(t * TILE + r) * (K * bits / 32) + s * step_words + w];
        for (int g = 0; g < groups; ++g)
          placed &= scales_tiled[(t * groups + g) * TILE + r] == scales[(t * TILE + r) * groups + g] &&
                    biases_tiled[(t * groups + g) * TILE + r] == biases[(t * TILE + r) * groups + g];
        for (int s = 0; s < S; ++s)
          for (int j = 0; j < 2; ++j)
            placed &= supers_tiled[((t * S + s) * TILE + r) * 2 + j] == supers[((t * TILE + r) * S + s) * 2 + j];
      }
    snprintf(name, sizeof name, "bits=%d group_size=%d: words, codes and supers in their tiles", bits, group);
    check(name, placed);
  }
  expect("quant_tile_super NULL supers", mtlinv_quant_tile_super(wq, scales, biases, NULL, N, K, 32, 4, wq_tiled,
                                                                 scales_tiled, biases_tiled, supers_tiled),
         MTLINV_ERROR_INVALID_ARGUMENT, "mtlinv_quant_tile_super: supers is NULL");
  expect("quant_tile_super bits=5 at group 16", mtlinv_quant_tile_super(wq, scales, biases, supers, N, K, 16, 5,
                                                                        wq_tiled, scales_tiled, biases_tiled,
                                                                        supers_tiled),
         MTLINV_ERROR_INVALID_ARGUMENT, "bits=5 at group_size=16");
  expect("quant_tile_super K=288", mtlinv_quant_tile_super(wq, scales, biases, supers, N, 288, 32, 4, wq_tiled,
                                                           scales_tiled, biases_tiled, supers_tiled),
         MTLINV_ERROR_INVALID_ARGUMENT, "K a multiple of 256");
  expect("quant_tile float scales at bits=5", mtlinv_quant_tile(wq, float_scales, float_scales, MTLINV_FLOAT32, N, K,
                                                                32, 5, wq_tiled, float_tiled, float_tiled),
         MTLINV_ERROR_INVALID_ARGUMENT, "the tile layout of float scales is built for bits 4 and 8");
}

enum { V = 64, H = SUPER, HQ = 4, HKV = 2, D = 64, F = SUPER, C = 8, M = 3 };

static mtlinv_tensor* vector_of(const float* values, int64_t n) { return upload(values, &n, 1, MTLINV_FLOAT32); }

static mtlinv_tensor* cache(void) {
  const int64_t shape[3] = {HKV, C, D};
  mtlinv_tensor* t = NULL;
  expect("tensor_empty", mtlinv_tensor_empty(shape, 3, MTLINV_FLOAT32, &t), MTLINV_OK, "");
  return t;
}

/* The logits [M, V] of ids from a decoder made by mtlinv_decoder_create_super (supers may be NULL), into logits. */
static void forward(const mtlinv_decoder_config* config, const mtlinv_tensor* embedding,
                    const mtlinv_decoder_layer* layer, const mtlinv_decoder_layer_supers* supers,
                    const mtlinv_tensor* norm, const mtlinv_quant_linear* output, const mtlinv_tensor* output_supers,
                    float* logits) {
  const int64_t ids[M] = {3, 41, 17};
  mtlinv_decoder* decoder = NULL;
  mtlinv_tensor* out = NULL;
  expect("decoder_create_super", mtlinv_decoder_create_super(config, NULL, 0, embedding, layer, NULL, supers, 1,
                                                             norm, output, output_supers, &decoder), MTLINV_OK, "");
  expect("decoder_forward", mtlinv_decoder_forward(decoder, ids, M, 0, &out), MTLINV_OK, "");
  expect("download", mtlinv_tensor_to_host(out, logits, (size_t)(M * V) * sizeof(float)), MTLINV_OK, "");
  mtlinv_tensor_free(out);
  mtlinv_decoder_free(decoder);
}

/* A layer of Q4_K projections but Q5_K's o and Q6_K's down, as a Q4_K_M file mixes them. */
static void check_decoder(void) {
  static float table[V * H], ones[H], with_supers[M * V], expanded[M * V];
  const int64_t table_shape[2] = {V, H};
  mtlinv_decoder_config config = {HQ, 10000.0, 1e-5};
  projection qkv = random_projection((HQ + 2 * HKV) * D, H, 32, 4), o = random_projection(H, HQ * D, 32, 5);
  projection gate_up = random_projection(2 * F, H, 32, 4), down = random_projection(H, F, 16, 6);
  projection output = random_projection(V, H, 32, 4);
  mtlinv_decoder_layer layer;
  mtlinv_decoder_layer_supers supers = {qkv.supers, o.supers, gate_up.supers, down.supers};
  mtlinv_tensor *embedding, *norm;
  mtlinv_decoder* unused = NULL;
  int previous = 0;
  float sum = 0.0f;
  for (int i = 0; i < V * H; ++i) table[i] = random_value(2.0f);
  for (int i = 0; i < H; ++i) ones[i] = 1.0f;
  embedding = upload(table, table_shape, 2, MTLINV_FLOAT32);
  norm = vector_of(ones, H);
  layer.attn_norm = layer.ffn_norm = norm;
  layer.k_cache = cache();
  layer.v_cache = cache();
  expect("set_limit", mtlinv_set_limit(M, &previous), MTLINV_OK, "");

  layer.qkv = qkv.codes, layer.o = o.codes, layer.gate_up = gate_up.codes, layer.down = down.codes;
  forward(&config, embedding, &layer, &supers, norm, &output.codes, output.supers, with_supers);
  layer.qkv = qkv.expanded, layer.o = o.expanded, layer.gate_up = gate_up.expanded, layer.down = down.expanded;
  forward(&config, embedding, &layer, NULL, norm, &output.expanded, NULL, expanded);
  check("the decoder in the super-block form has the expanded scales' logits",
        memcmp(with_supers, expanded, sizeof expanded) == 0);
  for (int i = 0; i < M * V; ++i) sum += expanded[i] * expanded[i];
  check("the logits are not all zero", sum > 0.0f);

  layer.qkv = qkv.codes;
  expect("create_super codes without supers", mtlinv_decoder_create_super(&config, NULL, 0, embedding, &layer, NULL,
                                                                           NULL, 1, norm, &output.expanded, NULL,
                                                                           &unused),
         MTLINV_ERROR_INVALID_ARGUMENT, "layers[0]'s qkv has int8 scale codes but no supers");
  layer.qkv = qkv.codes, layer.o = o.codes, layer.gate_up = gate_up.codes, layer.down = down.codes;
  expect("create_super supers with float scales",
         mtlinv_decoder_create_super(&config, NULL, 0, embedding, &layer, NULL, &supers, 1, norm, &output.expanded,
                                     output.supers, &unused),
         MTLINV_ERROR_INVALID_ARGUMENT, "output has supers with float32 scales");
  layer.o = o.expanded;
  expect("create_super a layer's supers with float scales",
         mtlinv_decoder_create_super(&config, NULL, 0, embedding, &layer, NULL, &supers, 1, norm, &output.codes,
                                     output.supers, &unused),
         MTLINV_ERROR_INVALID_ARGUMENT, "layers[0]'s o has supers with float32 scales");
  check("a failed create_super leaves *out as it was", unused == NULL);
  expect("restore the limit", mtlinv_set_limit(previous, NULL), MTLINV_OK, "");

  free_projection(&qkv);
  free_projection(&o);
  free_projection(&gate_up);
  free_projection(&down);
  free_projection(&output);
  mtlinv_tensor_free(layer.k_cache);
  mtlinv_tensor_free(layer.v_cache);
  mtlinv_tensor_free(embedding);
  mtlinv_tensor_free(norm);
}

int main(void) {
  check_qgemv();
  check_tile();
  check_decoder();
  printf("%s\n", failures ? "FAIL" : "PASS");
  return failures ? 1 : 0;
}
