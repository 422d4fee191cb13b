#include "quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "errors.h"

namespace mtlinv {

namespace {

// MLX's lower bound on the step of a group, so that a constant group does not divide by zero.
constexpr float kEps = 1e-7f;

uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// float32 -> float16, round to nearest even (the conversion of NumPy's astype and of F16C; a NaN stays a quiet NaN
// with its payload's top bits).
uint16_t to_half(float value) {
  uint32_t u = float_bits(value);
  const uint32_t sign = (u >> 16) & 0x8000u;
  u &= 0x7FFFFFFFu;
  if (u > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u | ((u >> 13) & 0x3FFu));
  if (u >= 0x47800000u) return static_cast<uint16_t>(sign | 0x7C00u);  // 2^16 and up (and infinity): infinity
  if (u < 0x38800000u) {
    // Below float16's smallest normal: adding 0.5 (whose ulp, 2^-24, is float16's subnormal step) rounds the value
    // to that step in the FPU's own round-to-nearest-even; the low bits are then the subnormal.
    const float magic = 0.5f;
    return static_cast<uint16_t>(sign | (float_bits(bits_float(u) + magic) - float_bits(magic)));
  }
  const uint32_t odd = (u >> 13) & 1u;
  u += (static_cast<uint32_t>(15 - 127) << 23) + 0xFFFu + odd;  // rebias the exponent and round half to even
  return static_cast<uint16_t>(sign | (u >> 13));  // a carry past 65504 gives infinity (0x7C00)
}

float from_half(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu, mantissa = h & 0x3FFu;
  if (exponent == 0x1F) return bits_float(sign | 0x7F800000u | (mantissa << 13));
  if (exponent == 0) {
    // Subnormal or zero: mantissa * 2^-24, exact in float32.
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return sign ? -magnitude : magnitude;
  }
  return bits_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

// float32 -> bfloat16, round to nearest even (ml_dtypes' conversion); a NaN stays a quiet NaN.
uint16_t to_bfloat(float value) {
  const uint32_t u = float_bits(value);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

float from_bfloat(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }

// Element i of a float array of dtype, as float32 (exact), and the store of a float32 in dtype (rounded once).
float load(const void* data, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::f16: return from_half(static_cast<const uint16_t*>(data)[i]);
    case DType::bf16: return from_bfloat(static_cast<const uint16_t*>(data)[i]);
    default: return static_cast<const float*>(data)[i];
  }
}

// Elements [first, first + count) of a float array of dtype, as float32, into out.
void widen(const void* data, DType dtype, int64_t first, int64_t count, float* out) {
  if (dtype == DType::f32) {
    std::memcpy(out, static_cast<const float*>(data) + first, static_cast<size_t>(count) * sizeof(float));
    return;
  }
  for (int64_t i = 0; i < count; ++i) out[i] = load(data, dtype, first + i);
}

void store(void* data, DType dtype, int64_t i, float value) {
  switch (dtype) {
    case DType::f16: static_cast<uint16_t*>(data)[i] = to_half(value); break;
    case DType::bf16: static_cast<uint16_t*>(data)[i] = to_bfloat(value); break;
    default: static_cast<float*>(data)[i] = value;
  }
}

// count float32 values, each rounded once to dtype, into elements [first, first + count) of out.
void narrow(const float* values, int64_t count, DType dtype, void* out, int64_t first) {
  if (dtype == DType::f32) {
    std::memcpy(static_cast<float*>(out) + first, values, static_cast<size_t>(count) * sizeof(float));
    return;
  }
  for (int64_t i = 0; i < count; ++i) store(out, dtype, first + i, values[i]);
}

// `value` rounded to dtype and back: what a store and a load give.
float round_to(DType dtype, float value) {
  switch (dtype) {
    case DType::f16: return from_half(to_half(value));
    case DType::bf16: return from_bfloat(to_bfloat(value));
    default: return value;
  }
}

void check_float_dtype(const char* fn, DType dtype) {
  if (!is_float(dtype)) {
    throw DTypeError(fn, ": dtype ", dtype_name(dtype), " is not supported; use float32, float16 or bfloat16");
  }
}

struct NamedPointer {
  const char* name;
  const void* pointer;
};

// The memory a call of `rows` rows reads and writes, named in the order of its arguments; a call of no rows touches
// none, and may pass NULL.
void require_pointers(const char* fn, int64_t rows, std::initializer_list<NamedPointer> pointers) {
  if (rows == 0) return;
  for (const NamedPointer& p : pointers) {
    if (p.pointer == nullptr) throw InvalidArgument(fn, ": ", p.name, " is NULL");
  }
}

bool one_of(int value, std::initializer_list<int> allowed) {
  for (int a : allowed) {
    if (value == a) return true;
  }
  return false;
}

void check_bits(const char* fn, int bits) {
  if (!one_of(bits, {2, 3, 4, 5, 6, 8})) {
    throw InvalidArgument(fn, ": bits=", bits, " is not supported; use one of (2, 3, 4, 5, 6, 8)");
  }
}

// Words of a packed row of K values (K a positive multiple of 32), after the size checks.
int64_t packed_words(const char* fn, int64_t rows, int64_t k, int bits) {
  if (rows < 0) throw InvalidArgument(fn, ": rows=", rows, " is negative");
  if (k < 0 || k % 32 != 0) throw InvalidArgument(fn, ": K=", k, " is not a multiple of 32");
  // Every size below is at most 4 rows K bytes (float32 elements).
  if (rows > 0 && k > INT64_MAX / 4 / rows) {
    throw InvalidArgument(fn, ": rows=", rows, " and K=", k, " make a weight too large to address");
  }
  return k * bits / 32;
}

// The `bits` bytes that 8 consecutive values fill in the stream, for every supported width.
void pack_octet(const uint8_t* q, int bits, uint8_t* bytes) {
  uint64_t chunk = 0;
  for (int j = 0; j < 8; ++j) chunk |= static_cast<uint64_t>(q[j]) << (j * bits);
  for (int b = 0; b < bits; ++b) bytes[b] = static_cast<uint8_t>(chunk >> (8 * b));
}

void unpack_octet(const uint8_t* bytes, int bits, uint8_t* q) {
  uint64_t chunk = 0;
  for (int b = 0; b < bits; ++b) chunk |= static_cast<uint64_t>(bytes[b]) << (8 * b);
  const uint64_t mask = (uint64_t{1} << bits) - 1;
  for (int j = 0; j < 8; ++j) q[j] = static_cast<uint8_t>((chunk >> (j * bits)) & mask);
}

// One packed row's bytes <-> its words, little-endian whatever the host's byte order.
void bytes_to_words(const uint8_t* bytes, int64_t words, uint32_t* out) {
  for (int64_t i = 0; i < words; ++i) {
    const uint8_t* b = bytes + 4 * i;
    out[i] = b[0] | (uint32_t{b[1]} << 8) | (uint32_t{b[2]} << 16) | (uint32_t{b[3]} << 24);
  }
}

void words_to_bytes(const uint32_t* words, int64_t count, uint8_t* bytes) {
  for (int64_t i = 0; i < count; ++i) {
    for (int b = 0; b < 4; ++b) bytes[4 * i + b] = static_cast<uint8_t>(words[i] >> (8 * b));
  }
}

void pack_row(const uint8_t* q, int64_t k, int bits, std::vector<uint8_t>& bytes, uint32_t* wq) {
  for (int64_t o = 0; o < k / 8; ++o) pack_octet(q + 8 * o, bits, bytes.data() + o * bits);
  bytes_to_words(bytes.data(), k * bits / 32, wq);
}

void unpack_row(const uint32_t* wq, int64_t k, int bits, std::vector<uint8_t>& bytes, uint8_t* q) {
  words_to_bytes(wq, k * bits / 32, bytes.data());
  for (int64_t o = 0; o < k / 8; ++o) unpack_octet(bytes.data() + o * bits, bits, q + 8 * o);
}

// One group's scale and bias in float32, before rounding to the dtype. The step (max - min) / n_bins is signed so
// that the group's extreme of largest magnitude (`edge`) maps to q = 0; the step is then re-derived as edge / q0 so
// that edge itself is reproduced exactly (bias = edge). When edge rounds to q0 == 0 (an all-zero group, or one whose
// values are below half the minimal step) the bias stays 0 and the step is kept. A constant group beyond ~3e31
// overflows to q0 = -inf, giving scale = -0.0, as in MLX.
void group_params(float w_max, float w_min, float n_bins, float& scale, float& bias) {
  const bool min_is_edge = std::fabs(w_min) > std::fabs(w_max);
  float step = std::fmax((w_max - w_min) / n_bins, kEps);
  if (!min_is_edge) step = -step;
  const float edge = min_is_edge ? w_min : w_max;
  const float q0 = std::nearbyint(edge / step);
  if (q0 != 0.0f) {
    scale = edge / q0;
    bias = edge;
  } else {
    scale = step;
    bias = 0.0f;
  }
}

}  // namespace

void check_quant_params(const char* fn, int group_size, int bits) {
  check_bits(fn, bits);
  if (!one_of(group_size, {16, 32, 64, 128})) {
    throw InvalidArgument(fn, ": group_size=", group_size, " is not supported; use one of (16, 32, 64, 128)");
  }
}

int64_t quant_row_words(const char* fn, int64_t rows, int64_t k, int group_size, int bits) {
  check_quant_params(fn, group_size, bits);
  if (k < 0 || k % group_size != 0) {
    throw InvalidArgument(fn, ": K=", k, " is not a multiple of group_size=", group_size);
  }
  return packed_words(fn, rows, k, bits);
}

namespace {

// The checks of a call on quantised weights: the format, the float dtype, the memory; returns the words of a row.
int64_t check_quant_call(const char* fn, DType dtype, int64_t rows, int64_t k, int group_size, int bits,
                         std::initializer_list<NamedPointer> pointers) {
  const int64_t words = quant_row_words(fn, rows, k, group_size, bits);
  check_float_dtype(fn, dtype);
  require_pointers(fn, rows, pointers);
  return words;
}

// Dequantisation's walk over the weight, a row of codes unpacked at a time: group_fn(first, q, scale, bias) for each
// group, `first` the index of its first element in the weight.
template <typename GroupFn>
void for_each_group(const char* fn, const uint32_t* wq, const void* scales, const void* biases, DType dtype,
                    int64_t rows, int64_t k, int group_size, int bits, const void* out, GroupFn group_fn) {
  const int64_t words = check_quant_call(fn, dtype, rows, k, group_size, bits,
                                         {{"wq", wq}, {"scales", scales}, {"biases", biases}, {"out", out}});
  if (rows == 0) return;
  const int64_t groups = k / group_size;
  std::vector<uint8_t> q(static_cast<size_t>(k)), bytes(static_cast<size_t>(words * 4));
  for (int64_t row = 0; row < rows; ++row) {
    unpack_row(wq + row * words, k, bits, bytes, q.data());
    for (int64_t g = 0; g < groups; ++g) {
      group_fn(row * k + g * group_size, q.data() + g * group_size, load(scales, dtype, row * groups + g),
               load(biases, dtype, row * groups + g));
    }
  }
}

}  // namespace

void quantize(const void* w, DType dtype, int64_t rows, int64_t k, int group_size, int bits, uint32_t* wq,
              void* scales, void* biases) {
  const char* fn = "quantize";
  const int64_t words = check_quant_call(fn, dtype, rows, k, group_size, bits,
                                         {{"w", w}, {"wq", wq}, {"scales", scales}, {"biases", biases}});
  if (rows == 0) return;
  const float n_bins = static_cast<float>((1 << bits) - 1);
  const int64_t groups = k / group_size;
  // A row at a time, widened to float32 first, so that the loops over a group are plain float arithmetic the
  // compiler vectorises (each operation still rounded once, as IEEE division and nearbyint are lane by lane).
  std::vector<float> row_values(static_cast<size_t>(k));
  std::vector<uint8_t> q(static_cast<size_t>(k)), bytes(static_cast<size_t>(k * bits / 8));
  for (int64_t row = 0; row < rows; ++row) {
    widen(w, dtype, row * k, k, row_values.data());
    for (int64_t g = 0; g < groups; ++g) {
      const float* group = row_values.data() + g * group_size;
      float w_max = -INFINITY, w_min = INFINITY;
      bool finite = true;
      for (int i = 0; i < group_size; ++i) {
        finite &= std::isfinite(group[i]);
        w_max = std::fmax(w_max, group[i]);
        w_min = std::fmin(w_min, group[i]);
      }
      if (!finite) {
        const int i = static_cast<int>(std::find_if(group, group + group_size, [](float v) {
                                         return !std::isfinite(v);
                                       }) - group);
        throw InvalidArgument(fn, ": w contains inf or NaN (", group[i], " at row ", row, ", column ",
                              g * group_size + i, ")");
      }
      if (std::isinf(w_max - w_min)) {
        throw InvalidArgument(fn, ": a group's range max - min overflows float32 (row ", row, ", group ", g, ": ",
                              w_min, " .. ", w_max, ")");
      }
      float scale, bias;
      group_params(w_max, w_min, n_bins, scale, bias);
      uint8_t* group_q = q.data() + g * group_size;
      for (int i = 0; i < group_size; ++i) {
        // fmax also maps NaN to 0: a zero scale (the overflowed constant group above) gives 0/0 here, and MLX's
        // float-to-integer conversion turns that NaN into q = 0, i.e. the constant itself.
        const float v = std::nearbyint((group[i] - bias) / scale);
        group_q[i] = static_cast<uint8_t>(std::fmin(std::fmax(v, 0.0f), n_bins));
      }
      store(scales, dtype, row * groups + g, scale);
      store(biases, dtype, row * groups + g, bias);
    }
    pack_row(q.data(), k, bits, bytes, wq + row * words);
  }
}

void dequantize(const uint32_t* wq, const void* scales, const void* biases, DType dtype, int64_t rows, int64_t k,
                int group_size, int bits, void* out) {
  std::vector<float> group_out;  // sized once the checks have passed
  for_each_group("dequantize", wq, scales, biases, dtype, rows, k, group_size, bits, out,
                 [&](int64_t first, const uint8_t* q, float scale, float bias) {
    // As in MLX the product is rounded to the dtype before the bias is added (so a float16 group spanning more than
    // float16's range overflows to inf exactly as there). Each operation in float32 and one rounding to
    // float16/bfloat16 gives MLX's 16-bit arithmetic's bits: the product of a (<= 11-bit) scale and an 8-bit q is
    // exact in float32, and for the sum float32's 24 bits are at least 2p + 2 for p = 11 and p = 8.
    group_out.resize(static_cast<size_t>(group_size));
    for (int i = 0; i < group_size; ++i) group_out[i] = static_cast<float>(q[i]) * scale;
    if (dtype != DType::f32) {
      for (int i = 0; i < group_size; ++i) group_out[i] = round_to(dtype, group_out[i]);
    }
    for (int i = 0; i < group_size; ++i) group_out[i] += bias;
    narrow(group_out.data(), group_size, dtype, out, first);
  });
}

void dequantize_float32(const uint32_t* wq, const void* scales, const void* biases, DType dtype, int64_t rows,
                        int64_t k, int group_size, int bits, float* out) {
  for_each_group("dequantize_float32", wq, scales, biases, dtype, rows, k, group_size, bits, out,
                 [&](int64_t first, const uint8_t* q, float scale, float bias) {
    // Two roundings: -ffp-contract=off keeps the product and the sum apart.
    for (int i = 0; i < group_size; ++i) out[first + i] = static_cast<float>(q[i]) * scale + bias;
  });
}

void pack_bits(const uint8_t* q, int64_t rows, int64_t k, int bits, uint32_t* wq) {
  const char* fn = "pack";
  check_bits(fn, bits);
  const int64_t words = packed_words(fn, rows, k, bits);
  require_pointers(fn, rows, {{"q", q}, {"wq", wq}});
  if (rows == 0) return;
  for (int64_t i = 0; i < rows * k; ++i) {
    if (q[i] >> bits) {
      throw InvalidArgument(fn, ": values must lie in [0, ", (1 << bits) - 1, "] for bits=", bits, "; q[",
                            i / k, ", ", i % k, "] is ", int{q[i]});
    }
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(words * 4));
  for (int64_t row = 0; row < rows; ++row) pack_row(q + row * k, k, bits, bytes, wq + row * words);
}

void unpack_bits(const uint32_t* wq, int64_t rows, int64_t k, int bits, uint8_t* q) {
  const char* fn = "unpack";
  check_bits(fn, bits);
  const int64_t words = packed_words(fn, rows, k, bits);
  require_pointers(fn, rows, {{"wq", wq}, {"q", q}});
  if (rows == 0) return;
  std::vector<uint8_t> bytes(static_cast<size_t>(words * 4));
  for (int64_t row = 0; row < rows; ++row) unpack_row(wq + row * words, k, bits, bytes, q + row * k);
}

}  // namespace mtlinv
