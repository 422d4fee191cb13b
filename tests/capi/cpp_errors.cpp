// The C++ API's error paths (tests/ops/test_embedding.py runs this): tensors without memory, mismatched strides, copies
// of the wrong size, dimension indices out of range and a decoder's bad tokens or shared caches must throw
// mtlinv::InvalidArgument naming what was wrong, never crash; and the limit's scopes (mtlinv::LimitScope) and the
// backend's (mtlinv::BackendScope) belong to the thread that opens them. Prints one line per case; exit status 0 when
// every case passes.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include <mtlinv/mtlinv.hpp>

namespace {

int failures = 0;

void expect_invalid(const char* name, const std::function<void()>& call, const char* text) {
  try {
    call();
    std::printf("FAIL: %s: no error\n", name);
    ++failures;
  } catch (const mtlinv::InvalidArgument& e) {
    const bool ok = std::strstr(e.what(), text) != nullptr;
    std::printf("%s: %s: %s\n", ok ? "ok" : "FAIL", name, e.what());
    failures += ok ? 0 : 1;
  }
}

void check(const char* name, bool passed) {
  std::printf("%s: %s\n", passed ? "ok" : "FAIL", name);
  failures += passed ? 0 : 1;
}

int limit_of_another_thread() {
  int limit = -1;
  std::thread([&] { limit = mtlinv::get_limit(); }).join();
  return limit;
}

// mtlinv::LimitScope: a guard of the calling thread, nested, restoring what the thread saw; the process value stays
// the other threads' and comes back when the guards end. Two threads in scopes 0 and 8 never see each other's.
void check_limit_scopes() {
  mtlinv::set_limit(2);
  {
    const mtlinv::LimitScope outer(8);
    {
      const mtlinv::LimitScope inner(0);
      check("innermost scope on this thread, the process value on another",
            mtlinv::get_limit() == 0 && limit_of_another_thread() == 2);
    }
    check("the end of a scope restores the outer one", mtlinv::get_limit() == 8);
    expect_invalid("LimitScope(-1)", [] { const mtlinv::LimitScope bad(-1); },
                   "LimitScope: limit must be in [0, 2^30], got -1");
    check("a scope that failed to open changes nothing", mtlinv::get_limit() == 8);
    check("set_limit inside a scope sets the process value, which the scope hides",
          mtlinv::set_limit(5) == 2 && mtlinv::get_limit() == 8 && limit_of_another_thread() == 5);
  }
  check("the process value once the scopes end", mtlinv::get_limit() == 5);
  std::atomic<int> wrong{0};
  const auto race = [&wrong](int limit) {
    return std::thread([&wrong, limit] {
      int mine = 0;
      for (int i = 0; i < 100000; ++i) {
        const mtlinv::LimitScope scope(limit);
        mine += mtlinv::get_limit() != limit;
      }
      wrong += mine;
    });
  };
  std::thread a = race(0), b = race(8);
  a.join();
  b.join();
  check("two threads in scopes 0 and 8 each see their own", wrong == 0 && mtlinv::get_limit() == 5);
  mtlinv::set_limit(0);
}

// A backend that counts the dispatches it is given and runs them on the process's backend.
struct CountingBackend : mtlinv::Backend {
  mtlinv::Backend& inner = mtlinv::active_backend();
  std::atomic<int> dispatches{0};
  const mtlinv::DeviceCaps& caps() const override { return inner.caps(); }
  mtlinv::StoragePtr allocate(size_t bytes) override { return inner.allocate(bytes); }
  mtlinv::StoragePtr wrap_host(void* host, size_t bytes) override { return inner.wrap_host(host, bytes); }
  void upload(mtlinv::Storage& dst, size_t offset, const void* src, size_t bytes) override {
    inner.upload(dst, offset, src, bytes);
  }
  void download(const mtlinv::Storage& src, size_t offset, void* dst, size_t bytes) override {
    inner.download(src, offset, dst, bytes);
  }
  bool has_kernel(mtlinv::KernelId id) const override { return inner.has_kernel(id); }
  void dispatch(const mtlinv::Dispatch& d) override {
    ++dispatches;
    inner.dispatch(d);
  }
  void synchronize() override { inner.synchronize(); }
};

// mtlinv::BackendScope: the calling thread's ops run on the scope's backend, another thread's on the process's;
// and an op's `out` is the result's memory, checked against the result's shape.
void check_backend_scope_and_out(const mtlinv::Tensor& x, const mtlinv::Tensor& w) {
  CountingBackend counting;
  mtlinv::Tensor y = mtlinv::Tensor::empty({1, 4}, mtlinv::DType::f32);
  {
    const mtlinv::BackendScope scope(counting);
    check("the scope's backend is the thread's", &mtlinv::active_backend() == &counting);
    std::thread([&] { mtlinv::gemv(x, w, nullptr, true); }).join();
    check("another thread's op runs on the process's backend", counting.dispatches == 0);
    const mtlinv::Tensor r = mtlinv::gemv(x, w, nullptr, true, mtlinv::GemvNames{}, &y);
    check("the thread's op runs on the scope's backend, into out",
          counting.dispatches > 0 && r.storage == y.storage);
  }
  check("the end of the scope restores the process's backend", &mtlinv::active_backend() == &counting.inner);
  std::vector<float> got(4);
  y.download(got.data(), sizeof(float) * 4);
  check("out holds the result", got == std::vector<float>(4, 64.0f));
  mtlinv::Tensor wide = mtlinv::Tensor::empty({1, 5}, mtlinv::DType::f32);
  expect_invalid("gemv into an out of another shape",
                 [&] { mtlinv::gemv(x, w, nullptr, true, mtlinv::GemvNames{}, &wide); },
                 "gemv: out has shape [1, 5] and dtype float32; the result is [1, 4] float32");
}

}  // namespace

int main() {
  std::vector<float> host(4 * 64, 1.0f);
  expect_invalid("from_host with fewer strides than dims",
                 [&] { mtlinv::Tensor::from_host(host.data(), {4, 64}, {}, mtlinv::DType::f32); },
                 "from_host: strides [] have 0 entries but shape [4, 64] has 2");
  expect_invalid("from_host of NULL", [&] { mtlinv::Tensor::from_host(nullptr, {4, 64}, {64, 1}, mtlinv::DType::f32); },
                 "from_host: data is NULL");

  const mtlinv::Tensor w = mtlinv::Tensor::from_host(host.data(), {4, 64}, {64, 1}, mtlinv::DType::f32);
  mtlinv::Tensor hollow;  // default-constructed: a shape, no memory
  hollow.shape = {1, 64};
  hollow.strides = {64, 1};
  expect_invalid("gemv of a tensor with no memory", [&] { mtlinv::gemv(hollow, w, nullptr, true); },
                 "gemv: x has no memory");
  expect_invalid("sdpa of a tensor with no memory", [&] { mtlinv::sdpa(hollow, w, w, mtlinv::SdpaOptions{}); },
                 "sdpa: q has no memory");
  mtlinv::Tensor strided = w;  // w read column by column: the same memory, no longer dense
  strided.strides = {1, 4};
  expect_invalid("sdpa of a strided v", [&] { mtlinv::sdpa(w, w, strided, mtlinv::SdpaOptions{}); },
                 "sdpa: v of shape [4, 64] has strides [1, 4] (elements); a contiguous tensor is required");
  check_backend_scope_and_out(mtlinv::Tensor::from_host(host.data(), {1, 64}, {64, 1}, mtlinv::DType::f32), w);

  std::vector<uint32_t> words(16 * 64 * 4 / 32);
  std::vector<uint16_t> groups(16 * 64 / 32);
  expect_invalid("quant_tile of K not a multiple of the group size", [&] {
    mtlinv::quant_tile(words.data(), groups.data(), groups.data(), 2, 16, 48, 32, 4, words.data(), groups.data(),
                       groups.data());
  }, "quant_tile: K=48 is not a positive multiple of group_size=32");
  std::vector<float> tiles(16 * 32);
  expect_invalid("tile_weights of 4-byte elements",
                 [&] { mtlinv::tile_weights(host.data(), 4, 16, 32, tiles.data()); },
                 "tile_weights: elements of 4 bytes; the tile layout is read by the 16-bit");

  mtlinv::Tensor t = mtlinv::Tensor::empty({2, 2}, mtlinv::DType::f32);
  std::vector<float> big(256);
  expect_invalid("upload of too many bytes", [&] { t.upload(big.data(), big.size() * sizeof(float)); },
                 "upload: 1024 bytes given for a tensor of 16 bytes");
  expect_invalid("download from a tensor with no memory", [&] { hollow.download(big.data(), 256); },
                 "download: the tensor has no memory");
  expect_invalid("dim out of range", [&] { t.dim(5); }, "dim: index 5 is out of range for shape [2, 2]");
  mtlinv::Tensor grown = t;  // a shape edited past the tensor's memory
  grown.shape = {4, 4};
  grown.strides = {4, 1};
  expect_invalid("upload past the memory", [&] { grown.upload(big.data(), 64); },
                 "upload: the tensor's 64 bytes at offset 0 pass the end of its 16 bytes of memory");

  // The decoder (src/core/model/decoder.h): with no layers a forward is the embedding, the final norm and the
  // logits projection, all of zeros here.
  const auto zeros = [](const mtlinv::Shape& shape, mtlinv::DType dtype) {
    mtlinv::Tensor z = mtlinv::Tensor::empty(shape, dtype);
    const std::vector<unsigned char> bytes(z.nbytes());
    z.upload(bytes.data(), bytes.size());
    return z;
  };
  const int64_t vocab = 8, hidden = 64;
  const mtlinv::QuantLinear output{zeros({vocab, hidden * 4 / 32}, mtlinv::DType::u32),
                                   zeros({vocab, hidden / 32}, mtlinv::DType::f32),
                                   zeros({vocab, hidden / 32}, mtlinv::DType::f32), 32, 4};
  const mtlinv::Tensor table = zeros({vocab, hidden}, mtlinv::DType::f32), norm = zeros({hidden}, mtlinv::DType::f32);
  mtlinv::DecoderConfig config;
  config.n_heads = 1;
  const mtlinv::Decoder bare(config, table, {}, norm, output);
  expect_invalid("decoder forward of no tokens", [&] { bare.forward({}, 0); },
                 "Decoder.forward: 0 tokens at position 0 do not fit");
  expect_invalid("decoder forward of an id past the vocabulary", [&] { bare.forward({1, 8}, 0); },
                 "embedding: ids[1]=8 is outside [0, 8)");
  const mtlinv::Tensor logits = bare.forward({1, 2}, 0);
  const bool logits_ok = logits.shape == mtlinv::Shape{2, vocab};
  std::printf("%s: decoder forward without layers gives logits %s\n", logits_ok ? "ok" : "FAIL",
              mtlinv::shape_str(logits.shape).c_str());
  failures += logits_ok ? 0 : 1;
  mtlinv::DecoderLayer shared;
  shared.k_cache = zeros({1, 4, hidden}, mtlinv::DType::f32);
  shared.v_cache = shared.k_cache;
  expect_invalid("decoder with one memory for both caches",
                 [&] { mtlinv::Decoder(config, table, {shared}, norm, output); },
                 "Decoder: layers[0]'s v_cache overlaps layers[0]'s k_cache");

  float back[4] = {0, 0, 0, 0};
  const float values[4] = {1, 2, 3, 4};
  t.upload(values, sizeof values);
  t.download(back, sizeof back);
  const bool round_trip = std::memcmp(values, back, sizeof back) == 0;
  std::printf("%s: upload then download\n", round_trip ? "ok" : "FAIL");
  failures += round_trip ? 0 : 1;
  check_limit_scopes();
  return failures != 0;
}
