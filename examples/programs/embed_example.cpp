// mtlinv embedded in a C++ program, without Python: set the limit, run gemv and sdpa on a batch, and check that
// one row (one query) has the bits it has when computed alone. Exit status 0 when both checks pass.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include <mtlinv/mtlinv.hpp>

namespace {

mtlinv::Tensor upload(const std::vector<float>& values, const mtlinv::Shape& shape) {
  mtlinv::Tensor t = mtlinv::Tensor::empty(shape, mtlinv::DType::f32);
  t.upload(values.data(), values.size() * sizeof(float));
  return t;
}

std::vector<float> download(const mtlinv::Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  t.download(out.data(), out.size() * sizeof(float));
  return out;
}

std::vector<float> random_values(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

}  // namespace

int main() {
  try {
    std::mt19937 rng(7);
    const auto& caps = mtlinv::active_backend().caps();
    std::printf("device: %s (%s)\n", caps.backend.c_str(), caps.name.c_str());
    const int previous = mtlinv::set_limit(8);
    std::printf("limit: %d (was %d)\n", mtlinv::get_limit(), previous);

    // gemv: 8 rows at once vs row 5 alone.
    const int64_t M = 8, K = 1000, N = 96, row = 5;
    std::vector<float> x = random_values(M * K, rng), w = random_values(N * K, rng);
    mtlinv::Tensor y = mtlinv::gemv(upload(x, {M, K}), upload(w, {N, K}), nullptr, true);
    std::vector<float> x_row(x.begin() + row * K, x.begin() + (row + 1) * K);
    mtlinv::Tensor y_row = mtlinv::gemv(upload(x_row, {1, K}), upload(w, {N, K}), nullptr, true);
    const bool gemv_ok = same_bits(download(y).data() + row * N, download(y_row).data(), N);
    std::printf("gemv: row %lld of M=%lld %s the row alone\n", static_cast<long long>(row),
                static_cast<long long>(M), gemv_ok ? "has the bits of" : "DIFFERS from");

    // sdpa: a causal block of 8 queries over 300 keys vs its last query alone over the same 300 keys.
    const int64_t Hq = 2, Hkv = 1, Lq = 8, C = 300, D = 64;
    std::vector<float> q = random_values(Hq * Lq * D, rng), k = random_values(Hkv * C * D, rng),
                       v = random_values(Hkv * C * D, rng);
    mtlinv::Tensor tk = upload(k, {1, Hkv, C, D}), tv = upload(v, {1, Hkv, C, D});
    mtlinv::SdpaOptions causal;
    mtlinv::Tensor o = mtlinv::sdpa(upload(q, {1, Hq, Lq, D}), tk, tv, causal);
    std::vector<float> q_last;
    for (int64_t h = 0; h < Hq; ++h) {
      q_last.insert(q_last.end(), q.begin() + (h * Lq + Lq - 1) * D, q.begin() + (h * Lq + Lq) * D);
    }
    mtlinv::Tensor o_last = mtlinv::sdpa(upload(q_last, {1, Hq, 1, D}), tk, tv, causal);
    std::vector<float> block = download(o), alone = download(o_last);
    bool sdpa_ok = true;
    for (int64_t h = 0; h < Hq; ++h) {
      sdpa_ok &= same_bits(block.data() + (h * Lq + Lq - 1) * D, alone.data() + h * D, D);
    }
    std::printf("sdpa: query %lld of a causal block of %lld %s the query alone\n", static_cast<long long>(Lq - 1),
                static_cast<long long>(Lq), sdpa_ok ? "has the bits of" : "DIFFERS from");

    // A clear error, not a crash, for bad input.
    try {
      mtlinv::gemv(upload(x, {M, K}), upload(w, {K, N}), nullptr, true);
      std::printf("expected an error for mismatched K\n");
      return 1;
    } catch (const mtlinv::InvalidArgument& e) {
      std::printf("bad input: %s\n", e.what());
    }
    std::printf("%s\n", gemv_ok && sdpa_ok ? "PASS" : "FAIL");
    return gemv_ok && sdpa_ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
