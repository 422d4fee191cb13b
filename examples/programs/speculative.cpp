// Exact speculative decoding on mtlinv's decoder, in C++: a draft model (the target's first layer alone) proposes
// K tokens, the target checks them all in one call of K + 1 positions, and the output is the target's greedy
// decoding token for token, because with the limit at K + 1 every position's logits have the bits they have when
// computed one at a time (mtlinv::LimitScope). The model is a small random llama (quantized 4-bit with
// mtlinv::quantize), so the program needs no files. Exit status 0 when both decodings agree.
#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include <mtlinv/mtlinv.hpp>

namespace {

constexpr int64_t kVocab = 256, kHidden = 256, kHeads = 4, kKvHeads = 2, kHeadDim = 64, kFfn = 512;
constexpr int64_t kLayers = 2, kCapacity = 64, kGroup = 64;
constexpr int kBits = 4;
constexpr int kDraftTokens = 4;   // proposals a round
constexpr size_t kGenerate = 24;  // tokens to generate

mtlinv::Tensor upload(const void* data, const mtlinv::Shape& shape, mtlinv::DType dtype) {
  mtlinv::Tensor t = mtlinv::Tensor::empty(shape, dtype);
  t.upload(data, t.nbytes());
  return t;
}

std::vector<float> random_values(size_t n, float scale, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

// A random weight [n, k], quantized on the host in MLX's format and uploaded.
mtlinv::QuantLinear random_linear(int64_t n, int64_t k, std::mt19937& rng) {
  const std::vector<float> w = random_values(static_cast<size_t>(n * k), 0.08f, rng);
  const int64_t words = mtlinv::quant_row_words("random_linear", n, k, kGroup, kBits);
  std::vector<uint32_t> wq(static_cast<size_t>(n * words));
  std::vector<float> scales(static_cast<size_t>(n * k / kGroup)), biases(scales.size());
  mtlinv::quantize(w.data(), mtlinv::DType::f32, n, k, kGroup, kBits, wq.data(), scales.data(), biases.data());
  mtlinv::QuantLinear linear;
  linear.wq = upload(wq.data(), {n, words}, mtlinv::DType::u32);
  linear.scales = upload(scales.data(), {n, k / kGroup}, mtlinv::DType::f32);
  linear.biases = upload(biases.data(), {n, k / kGroup}, mtlinv::DType::f32);
  linear.group_size = static_cast<int>(kGroup);
  linear.bits = kBits;
  return linear;
}

mtlinv::Tensor ones(int64_t n) {
  const std::vector<float> v(static_cast<size_t>(n), 1.0f);
  return upload(v.data(), {n}, mtlinv::DType::f32);
}

// A layer's own KV caches: the draft and the target share weights, never caches.
void fresh_caches(mtlinv::DecoderLayer& layer) {
  layer.k_cache = mtlinv::Tensor::empty({kKvHeads, kCapacity, kHeadDim}, mtlinv::DType::f32);
  layer.v_cache = mtlinv::Tensor::empty({kKvHeads, kCapacity, kHeadDim}, mtlinv::DType::f32);
}

struct Model {
  mtlinv::Tensor embedding, norm;
  mtlinv::QuantLinear output;
  std::vector<mtlinv::DecoderLayer> layers;

  mtlinv::Decoder decoder(size_t n_layers) const {
    std::vector<mtlinv::DecoderLayer> used(layers.begin(), layers.begin() + static_cast<long>(n_layers));
    for (mtlinv::DecoderLayer& layer : used) fresh_caches(layer);
    mtlinv::DecoderConfig config;
    config.n_heads = kHeads;
    return mtlinv::Decoder(config, embedding, used, norm, output);
  }
};

Model random_model(std::mt19937& rng) {
  Model m;
  const std::vector<float> table = random_values(static_cast<size_t>(kVocab * kHidden), 1.0f, rng);
  m.embedding = upload(table.data(), {kVocab, kHidden}, mtlinv::DType::f32);
  m.norm = ones(kHidden);
  m.output = random_linear(kVocab, kHidden, rng);
  for (int64_t i = 0; i < kLayers; ++i) {
    mtlinv::DecoderLayer layer;
    layer.attn_norm = ones(kHidden);
    layer.ffn_norm = ones(kHidden);
    layer.qkv = random_linear((kHeads + 2 * kKvHeads) * kHeadDim, kHidden, rng);
    layer.o = random_linear(kHidden, kHeads * kHeadDim, rng);
    layer.gate_up = random_linear(2 * kFfn, kHidden, rng);
    layer.down = random_linear(kHidden, kFfn, rng);
    m.layers.push_back(layer);
  }
  return m;
}

// The most likely next token after each of the call's positions (the first maximum).
std::vector<int64_t> argmax_rows(const mtlinv::Tensor& logits) {
  std::vector<float> v(static_cast<size_t>(logits.numel()));
  logits.download(v.data(), v.size() * sizeof(float));
  std::vector<int64_t> best;
  for (size_t row = 0; row < v.size() / kVocab; ++row) {
    const auto first = v.begin() + static_cast<long>(row * kVocab);
    best.push_back(std::max_element(first, first + kVocab) - first);
  }
  return best;
}

std::vector<int64_t> slice(const std::vector<int64_t>& v, size_t from, size_t to) {
  return std::vector<int64_t>(v.begin() + static_cast<long>(from), v.begin() + static_cast<long>(to));
}

// One token a call: the reference.
std::vector<int64_t> greedy(const Model& model, const std::vector<int64_t>& prompt) {
  const mtlinv::Decoder target = model.decoder(kLayers);
  std::vector<int64_t> seq = prompt;
  seq.push_back(argmax_rows(target.forward(prompt, 0)).back());
  while (seq.size() < prompt.size() + kGenerate) {
    seq.push_back(argmax_rows(target.forward({seq.back()}, static_cast<int64_t>(seq.size()) - 1)).back());
  }
  return slice(seq, prompt.size(), seq.size());
}

// Draft kDraftTokens, verify them in one target call, keep the agreeing prefix and the target's own next token.
std::vector<int64_t> speculative(const Model& model, const std::vector<int64_t>& prompt, int& target_calls) {
  const mtlinv::Decoder target = model.decoder(kLayers), draft = model.decoder(1);
  std::vector<int64_t> seq = prompt;
  seq.push_back(argmax_rows(target.forward(prompt, 0)).back());
  draft.forward(prompt, 0);
  target_calls = 1;
  size_t draft_valid = prompt.size();  // positions below it hold the right keys in the draft's caches
  while (seq.size() < prompt.size() + kGenerate) {
    // The target's caches hold every position but the last token's, which this round's call starts with.
    const size_t base = seq.size() - 1;
    std::vector<int64_t> proposals;
    int64_t token = argmax_rows(draft.forward(slice(seq, draft_valid, base + 1),
                                              static_cast<int64_t>(draft_valid))).back();
    proposals.push_back(token);
    for (int i = 1; i < kDraftTokens; ++i) {
      token = argmax_rows(draft.forward({token}, static_cast<int64_t>(base) + i)).back();
      proposals.push_back(token);
    }
    std::vector<int64_t> verify = {seq[base]};
    verify.insert(verify.end(), proposals.begin(), proposals.end());
    const std::vector<int64_t> wanted = argmax_rows(target.forward(verify, static_cast<int64_t>(base)));
    ++target_calls;
    size_t accepted = 0;
    while (accepted < proposals.size() && proposals[accepted] == wanted[accepted]) ++accepted;
    seq.insert(seq.end(), proposals.begin(), proposals.begin() + static_cast<long>(accepted));
    seq.push_back(wanted[accepted]);  // the target's token after the agreeing prefix
    draft_valid = base + 1 + std::min(accepted, proposals.size() - 1);
  }
  return slice(seq, prompt.size(), prompt.size() + kGenerate);
}

void print(const char* name, const std::vector<int64_t>& tokens) {
  std::printf("%s:", name);
  for (int64_t t : tokens) std::printf(" %lld", static_cast<long long>(t));
  std::printf("\n");
}

}  // namespace

int main() {
  try {
    std::mt19937 rng(2024);
    const Model model = random_model(rng);
    const std::vector<int64_t> prompt = {3, 141, 59, 26};
    // Every call of the target verifies at most kDraftTokens + 1 positions: at this limit each row's logits have
    // the bits of the row alone, which is what makes the two decodings agree.
    mtlinv::LimitScope limit(kDraftTokens + 1);
    const std::vector<int64_t> reference = greedy(model, prompt);
    int target_calls = 0;
    const std::vector<int64_t> fast = speculative(model, prompt, target_calls);
    print("greedy", reference);
    print("speculative", fast);
    std::printf("target calls: %zu one token at a time, %d speculative\n", reference.size(), target_calls);
    const bool same = reference == fast;
    std::printf("%s\n", same ? "PASS: speculative decoding is the greedy decoding"
                             : "FAIL: speculative decoding DIFFERS from greedy");
    return same ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
