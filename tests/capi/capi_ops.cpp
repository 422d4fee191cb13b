// The C API's ops beyond gemv, qgemv, sdpa and rms_norm (tests/ops/test_embedding.py runs this): each must give
// the bits of the C++ op it wraps (the ops' own accuracy is tests/ops/test_decoder_ops.py's), in-place writes
// included, and every bad call its status with a message naming the argument. Prints one line per case; exit status
// 0 when every case passes.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <mtlinv/mtlinv.h>
#include <mtlinv/mtlinv.hpp>

namespace {

int failures = 0;

void check(const std::string& name, bool passed) {
  std::printf("%s: %s\n", passed ? "ok" : "FAIL", name.c_str());
  failures += !passed;
}

void expect(const std::string& name, mtlinv_status got, mtlinv_status want, const char* text) {
  const std::string message = mtlinv_last_error();
  const bool passed = got == want && message.find(text) != std::string::npos;
  std::printf("%s: %s: status %d (want %d): %s\n", passed ? "ok" : "FAIL", name.c_str(), static_cast<int>(got),
              static_cast<int>(want), message.c_str());
  failures += !passed;
}

// One input as both APIs hold it: a C handle and a C++ tensor with the same values.
struct Input {
  mtlinv_tensor* c = nullptr;
  mtlinv::Tensor cpp;
};

Input input(const mtlinv::Shape& shape, std::mt19937& rng) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = normal(rng);
  Input in;
  if (mtlinv_tensor_from_host(v.data(), shape.data(), static_cast<int>(shape.size()), MTLINV_FLOAT32, &in.c) !=
      MTLINV_OK) {
    throw std::runtime_error(mtlinv_last_error());
  }
  in.cpp = mtlinv::Tensor::empty(shape, mtlinv::DType::f32);
  in.cpp.upload(v.data(), v.size() * sizeof(float));
  return in;
}

std::vector<unsigned char> bytes_of(const mtlinv::Tensor& t) {
  std::vector<unsigned char> b(t.nbytes());
  t.download(b.data(), b.size());
  return b;
}

// The C op's result (status OK) has the C++ op's shape and bits; a new result is freed, an in-place one kept. `got`
// by reference: read here, after the call in the same argument list has written it.
void same(const std::string& name, mtlinv_status status, mtlinv_tensor* const& got, const mtlinv::Tensor& want,
          bool in_place = false) {
  expect(name, status, MTLINV_OK, "");
  if (status != MTLINV_OK) return;
  std::vector<unsigned char> b(mtlinv_tensor_nbytes(got));
  mtlinv_tensor_to_host(got, b.data(), b.size());
  bool shape_ok = mtlinv_tensor_ndim(got) == want.ndim();
  for (int i = 0; shape_ok && i < want.ndim(); ++i) shape_ok = mtlinv_tensor_dim(got, i) == want.shape[i];
  check(name + ": the C++ op's shape and bits", shape_ok && b == bytes_of(want));
  if (!in_place) mtlinv_tensor_free(got);
}

void free_all(std::initializer_list<Input*> inputs) {
  for (Input* in : inputs) mtlinv_tensor_free(in->c);
}

void check_elementwise(std::mt19937& rng) {
  Input a = input({3, 64}, rng), b = input({3, 64}, rng), w = input({64}, rng), x2 = input({3, 128}, rng);
  mtlinv_tensor* out = nullptr;
  same("add", mtlinv_add(a.c, b.c, &out), out, mtlinv::add(a.cpp, b.cpp));
  same("swiglu", mtlinv_swiglu(a.c, b.c, &out), out, mtlinv::swiglu(a.cpp, b.cpp));
  same("swiglu_halves", mtlinv_swiglu_halves(x2.c, &out), out, mtlinv::swiglu_halves(x2.cpp));
  mtlinv_tensor* sum = nullptr;
  const auto [s, y] = mtlinv::add_rms_norm(a.cpp, b.cpp, w.cpp, 1e-5);
  const mtlinv_status status = mtlinv_add_rms_norm(a.c, b.c, w.c, 1e-5f, &sum, &out);
  same("add_rms_norm: sum", status, sum, s);
  same("add_rms_norm: out", status, out, y);
  Input k = input({64, 32}, rng);
  same("matmul", mtlinv_matmul(a.c, k.c, &out), out, mtlinv::gemv(a.cpp, k.cpp, nullptr, false));

  expect("add: NULL b", mtlinv_add(a.c, nullptr, &out), MTLINV_ERROR_INVALID_ARGUMENT, "mtlinv_add: b is NULL");
  expect("add: shapes differ", mtlinv_add(a.c, x2.c, &out), MTLINV_ERROR_INVALID_ARGUMENT, "add");
  expect("swiglu: NULL out", mtlinv_swiglu(a.c, b.c, nullptr), MTLINV_ERROR_INVALID_ARGUMENT, "out is NULL");
  expect("add_rms_norm: NULL sum", mtlinv_add_rms_norm(a.c, b.c, w.c, 1e-5f, nullptr, &out),
         MTLINV_ERROR_INVALID_ARGUMENT, "sum is NULL");
  expect("matmul: K differs", mtlinv_matmul(a.c, a.c, &out), MTLINV_ERROR_INVALID_ARGUMENT, "matmul");
  free_all({&a, &b, &w, &x2, &k});
}

void check_heads(std::mt19937& rng) {
  const int64_t L = 3, Hq = 2, Hkv = 1, D = 64, C = 8;
  Input x = input({L, Hq, D}, rng), qkv = input({L, Hq + 2 * Hkv, D}, rng), heads = input({Hq, L, D}, rng);
  mtlinv_tensor* out = nullptr;
  same("rope_heads", mtlinv_rope_heads(x.c, 2, 10000.0, &out), out, [&] {
    mtlinv::Tensor y = mtlinv::Tensor::empty({Hq, L, D}, mtlinv::DType::f32);
    mtlinv::write_heads(x.cpp, y, 0, 2, true, 10000.0);
    return y;
  }());
  same("heads_to_rows", mtlinv_heads_to_rows(heads.c, &out), out, mtlinv::heads_to_rows(heads.cpp));

  // In place: the C API's caches and the C++ API's, written the same way, end with the same bits.
  Input k_c = input({Hkv, C, D}, rng), v_c = input({Hkv, C, D}, rng), dst = input({Hq, C, D}, rng);
  const mtlinv::Tensor q = mtlinv::qkv_to_heads(qkv.cpp, Hq, k_c.cpp, v_c.cpp, 4, 4, 500000.0);
  same("qkv_to_heads: queries", mtlinv_qkv_to_heads(qkv.c, Hq, k_c.c, v_c.c, 4, 4, 500000.0, &out), out, q);
  same("qkv_to_heads: k_dst", MTLINV_OK, k_c.c, k_c.cpp, true);
  same("qkv_to_heads: v_dst", MTLINV_OK, v_c.c, v_c.cpp, true);
  // With a frequency table (a scaled RoPE's), and Qwen 3's per-head norms.
  std::vector<float> freqs(D / 2);
  for (size_t j = 0; j < freqs.size(); ++j) freqs[j] = std::pow(0.5f, static_cast<float>(j) / 4);
  Input k_f = input({Hkv, C, D}, rng), v_f = input({Hkv, C, D}, rng), wq = input({D}, rng), wk = input({D}, rng);
  const mtlinv::Tensor table = mtlinv::rope_freqs("test", "freqs", freqs);
  const mtlinv::Tensor qf = mtlinv::qkv_to_heads(qkv.cpp, Hq, k_f.cpp, v_f.cpp, 4, 4, 1.0, &table);
  same("qkv_to_heads_freqs: queries",
       mtlinv_qkv_to_heads_freqs(qkv.c, Hq, k_f.c, v_f.c, 4, 4, freqs.data(), freqs.size(), &out), out, qf);
  same("qkv_to_heads_freqs: k_dst", MTLINV_OK, k_f.c, k_f.cpp, true);
  same("qkv_to_heads_freqs: v_dst", MTLINV_OK, v_f.c, v_f.cpp, true);
  expect("qkv_to_heads_freqs: NULL freqs", mtlinv_qkv_to_heads_freqs(qkv.c, Hq, k_f.c, v_f.c, 0, 0, nullptr, 32, &out),
         MTLINV_ERROR_INVALID_ARGUMENT, "freqs is NULL");
  expect("qkv_to_heads_freqs: too few", mtlinv_qkv_to_heads_freqs(qkv.c, Hq, k_f.c, v_f.c, 0, 0, freqs.data(), 3, &out),
         MTLINV_ERROR_INVALID_ARGUMENT, "freqs must be [D / 2] = [32]");
  same("qk_rms_norm", mtlinv_qk_rms_norm(qkv.c, Hq, Hkv, wq.c, wk.c, 1e-6f, &out), out,
       mtlinv::qk_rms_norm(qkv.cpp, Hq, Hkv, wq.cpp, wk.cpp, 1e-6f));
  mtlinv::write_heads(x.cpp, dst.cpp, 5, 5, true, 10000.0);
  expect("write_heads", mtlinv_write_heads(x.c, dst.c, 5, 5, 1, 10000.0), MTLINV_OK, "");
  same("write_heads: dst", MTLINV_OK, dst.c, dst.cpp, true);

  Input odd = input({2, 2, 3}, rng), flat = input({4, 4}, rng);
  expect("rope_heads: odd D", mtlinv_rope_heads(odd.c, 0, 10000.0, &out), MTLINV_ERROR_INVALID_ARGUMENT,
         "x must be [L, H, D] with an even D, got [2, 2, 3]");
  expect("write_heads: base 0", mtlinv_write_heads(x.c, dst.c, 0, 0, 1, 0.0), MTLINV_ERROR_INVALID_ARGUMENT,
         "base");
  expect("write_heads: past the cache", mtlinv_write_heads(x.c, dst.c, C - 1, 0, 0, 10000.0),
         MTLINV_ERROR_INVALID_ARGUMENT, "write_heads");
  expect("qkv_to_heads: NULL v_dst", mtlinv_qkv_to_heads(qkv.c, Hq, k_c.c, nullptr, 0, 0, 1e4, &out),
         MTLINV_ERROR_INVALID_ARGUMENT, "v_dst is NULL");
  expect("heads_to_rows: 2-d x", mtlinv_heads_to_rows(flat.c, &out), MTLINV_ERROR_INVALID_ARGUMENT, "heads_to_rows");
  free_all({&x, &qkv, &heads, &k_c, &v_c, &dst, &odd, &flat, &k_f, &v_f, &wq, &wk});
}

void check_attention_and_embedding(std::mt19937& rng) {
  Input q = input({2, 3, 64}, rng), k = input({1, 10, 64}, rng), v = input({1, 10, 64}, rng);
  mtlinv_tensor* out = nullptr;
  mtlinv::SdpaOptions rows;
  rows.rows_out = true;
  rows.has_kv_len = true;
  rows.kv_len = 7;
  same("sdpa_rows", mtlinv_sdpa_rows(q.c, k.c, v.c, 1, 7, 0.0f, &out), out, mtlinv::sdpa(q.cpp, k.cpp, v.cpp, rows));
  expect("sdpa_rows: NaN scale", mtlinv_sdpa_rows(q.c, k.c, v.c, 1, -1, std::nanf(""), &out),
         MTLINV_ERROR_INVALID_ARGUMENT, "mtlinv_sdpa_rows: scale is nan");

  Input table = input({16, 64}, rng);
  const int64_t ids[] = {3, 0, 15, 3};
  same("embedding", mtlinv_embedding(table.c, ids, 4, &out), out,
       mtlinv::embedding(table.cpp, std::vector<int64_t>(ids, ids + 4)));
  const int64_t bad[] = {1, 16};
  expect("embedding: id past V", mtlinv_embedding(table.c, bad, 2, &out), MTLINV_ERROR_INVALID_ARGUMENT,
         "ids[1]=16 is outside [0, 16)");
  expect("embedding: NULL ids", mtlinv_embedding(table.c, nullptr, 2, &out), MTLINV_ERROR_INVALID_ARGUMENT,
         "ids is NULL");
  free_all({&q, &k, &v, &table});
}

void check_tensors() {
  const int64_t shape[] = {2, 3};
  mtlinv_tensor* t = nullptr;
  mtlinv_tensor* view = nullptr;
  mtlinv_dtype dtype = MTLINV_FLOAT32;
  expect("tensor_empty", mtlinv_tensor_empty(shape, 2, MTLINV_BFLOAT16, &t), MTLINV_OK, "");
  expect("tensor_dtype", mtlinv_tensor_dtype(t, &dtype), MTLINV_OK, "");
  check("tensor_dtype is the one made", dtype == MTLINV_BFLOAT16 && mtlinv_tensor_nbytes(t) == 12);
  const int64_t flat[] = {6};
  expect("tensor_reshape", mtlinv_tensor_reshape(t, flat, 1, &view), MTLINV_OK, "");
  check("the view has the new shape", mtlinv_tensor_ndim(view) == 1 && mtlinv_tensor_dim(view, 0) == 6);
  const int64_t five[] = {5};
  expect("tensor_reshape: 5 of 6 elements", mtlinv_tensor_reshape(t, five, 1, &view), MTLINV_ERROR_INVALID_ARGUMENT,
         "");
  const int64_t negative[] = {2, -3};
  expect("tensor_empty: negative dimension", mtlinv_tensor_empty(negative, 2, MTLINV_FLOAT32, &t),
         MTLINV_ERROR_INVALID_ARGUMENT, "has dimension -3");
  expect("tensor_empty: ndim 9", mtlinv_tensor_empty(shape, 9, MTLINV_FLOAT32, &t), MTLINV_ERROR_INVALID_ARGUMENT,
         "ndim=9");
  expect("tensor_empty: bad dtype", mtlinv_tensor_empty(shape, 2, static_cast<mtlinv_dtype>(42), &t),
         MTLINV_ERROR_DTYPE, "42");
  expect("tensor_dtype: NULL", mtlinv_tensor_dtype(nullptr, &dtype), MTLINV_ERROR_INVALID_ARGUMENT, "t is NULL");
  mtlinv_tensor_free(view);
  mtlinv_tensor_free(t);
}

}  // namespace

int main() {
  try {
    std::mt19937 rng(11);
    check_tensors();
    check_elementwise(rng);
    check_heads(rng);
    check_attention_and_embedding(rng);
  } catch (const std::exception& e) {
    std::printf("FAIL: exception: %s\n", e.what());
    return 2;
  }
  std::printf("%s\n", failures ? "FAIL" : "PASS");
  return failures ? 1 : 0;
}
