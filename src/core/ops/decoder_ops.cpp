#include "decoder_ops.h"

#include <cstdlib>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "../plans/decoder_ops.h"
#include "../run_plan.h"
#include "checks.h"

namespace mtlinv {

namespace {

Tensor elementwise(const char* op, Plan (*plan)(DType, int64_t), const Tensor& a, const Tensor& b) {
  require_float_operands(op, {{"a", a}, {"b", b}});
  if (a.shape != b.shape) {
    throw InvalidArgument(op, ": shapes differ: ", shape_str(a.shape), " and ", shape_str(b.shape));
  }
  require_u32(op, "size", a.numel());
  Tensor y = Tensor::empty(a.shape, a.dtype);
  if (a.numel() > 0) run_plan(plan(a.dtype, a.numel()), {&a, &b, &y});
  return y;
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) { return elementwise("add", plan_add, a, b); }
Tensor swiglu(const Tensor& gate, const Tensor& up) { return elementwise("swiglu", plan_swiglu, gate, up); }

Tensor swiglu_halves(const Tensor& x) {
  const char* op = "swiglu_halves";
  require_float_operands(op, {{"x", x}});
  if (x.ndim() != 2 || x.dim(1) % 2 != 0) {
    throw InvalidArgument(op, ": x must be [L, 2 F], got ", shape_str(x.shape));
  }
  const int64_t rows = x.dim(0), half = x.dim(1) / 2;
  require_u32(op, "size", x.numel());  // threads index rows * F < the size
  Tensor y = Tensor::empty({rows, half}, x.dtype);
  if (y.numel() > 0) run_plan(plan_swiglu_halves(x.dtype, rows, half), {&x, &y});
  return y;
}

namespace {

// v with as many digits as it takes to read back as v: the default six would print 0.99999994 as 1, and the message
// of a base just below the range would read like one at its edge.
std::string round_trip(double v) {
  std::ostringstream out;
  for (int digits = 6;; ++digits) {
    out.str("");
    out.precision(digits);
    out << v;
    if (digits >= 17 || std::strtod(out.str().c_str(), nullptr) == v) return out.str();
  }
}

}  // namespace

float rope_base(const char* op, const char* arg, double base) {
  // Checked on the double: converting one beyond float32's range to float is undefined behaviour.
  if (!(base >= 1.0 && base <= std::numeric_limits<float>::max())) {
    throw InvalidArgument(op, ": ", arg, "=", round_trip(base), " is outside [1, ",
                          round_trip(std::numeric_limits<float>::max()),
                          "]: a RoPE base must be a float32 of at least 1, whose frequencies base^(-2j/D) are at "
                          "most 1 a position (below 1 they grow without bound and overflow float32 to NaN)");
  }
  return static_cast<float>(base);
}

namespace {

// The checks write_heads and qkv_to_heads share: L rows written at seq_offset.. of a cache of `capacity` positions,
// for positions start_pos..; returns the RoPE base as the kernels take it (float32), checked where `rotate` (and
// unused, 1, where not).
float check_heads_write(const char* op, int64_t rows, int64_t dim, int64_t capacity, int64_t seq_offset,
                        int64_t start_pos, bool rotate, double base) {
  require_u32(op, "L", rows);
  require_u32(op, "D", dim);
  require_u32(op, "C", capacity);
  // seq_offset > capacity - rows, not seq_offset + rows > capacity: the sum of a huge offset would wrap.
  if (seq_offset < 0 || seq_offset > capacity - rows) {
    throw InvalidArgument(op, ": seq_offset=", seq_offset, " with L=", rows, " rows does not fit dst capacity ",
                          capacity);
  }
  require_u32(op, "start_pos", start_pos);
  if (rotate && dim % 2 != 0) throw InvalidArgument(op, ": rotation needs an even head dim, got D=", dim);
  require_u32(op, "start_pos + L", start_pos + rows);  // both below 2^32 here: no wrap
  return rotate ? rope_base(op, "base", base) : 1.0f;
}

}  // namespace

void write_heads(const Tensor& x, const Tensor& dst, int64_t seq_offset, int64_t start_pos, bool rotate, double base,
                 const char* op) {
  require_float_operands(op, {{"x", x}, {"dst", dst}});
  if (x.ndim() != 3 || dst.ndim() != 3 || x.dim(1) != dst.dim(0) || x.dim(2) != dst.dim(2)) {
    throw InvalidArgument(op, ": x must be [L, H, D] and dst [H, C, D], got x ", shape_str(x.shape), " and dst ",
                          shape_str(dst.shape));
  }
  const int64_t rows = x.dim(0), heads = x.dim(1), dim = x.dim(2), capacity = dst.dim(1);
  require_u32(op, "H", heads);
  const float base_f = check_heads_write(op, rows, dim, capacity, seq_offset, start_pos, rotate, base);
  if (x.numel() == 0) return;
  run_plan(plan_to_heads(rotate, x.dtype, rows, heads, dim, capacity, seq_offset, start_pos, base_f), {&x, &dst});
}

Tensor rope_freqs(const char* op, const char* arg, const std::vector<float>& freqs) {
  for (size_t j = 0; j < freqs.size(); ++j) {
    if (!(freqs[j] > 0.0f && freqs[j] <= 1.0f)) {
      throw InvalidArgument(op, ": ", arg, "[", j, "]=", round_trip(freqs[j]), " is outside (0, 1]: a RoPE "
                            "frequency above 1 a position grows the angles of late positions past float32");
    }
  }
  require_u32(op, (std::string(arg) + "'s size").c_str(), static_cast<int64_t>(freqs.size()));
  Tensor t = Tensor::empty({static_cast<int64_t>(freqs.size())}, DType::f32);
  if (!freqs.empty()) t.upload(freqs.data(), t.nbytes(), op);
  return t;
}

Tensor qkv_to_heads(const Tensor& x, int64_t q_heads, const Tensor& k_dst, const Tensor& v_dst, int64_t seq_offset,
                    int64_t start_pos, double base, const Tensor* freqs) {
  const char* op = "qkv_to_heads";
  require_float_operands(op, {{"qkv", x}, {"k_dst", k_dst}, {"v_dst", v_dst}});
  if (k_dst.ndim() != 3 || v_dst.shape != k_dst.shape) {
    throw InvalidArgument(op, ": k_dst and v_dst must be [Hkv, C, D] of one shape, got ", shape_str(k_dst.shape),
                          " and ", shape_str(v_dst.shape));
  }
  if (k_dst.storage == v_dst.storage) {  // one is written from the other's heads' values: they must not overlap
    throw InvalidArgument(op, ": k_dst and v_dst share memory");
  }
  const int64_t kv_heads = k_dst.dim(0), capacity = k_dst.dim(1), dim = k_dst.dim(2);
  // [L, q_heads + 2 Hkv, D], or the projection's own [L, (q_heads + 2 Hkv) * D]: the same dense layout.
  const bool heads_ok = x.ndim() == 3 ? x.dim(1) == q_heads + 2 * kv_heads && x.dim(2) == dim
                                      : x.ndim() == 2 && dim > 0 && x.dim(1) % dim == 0 &&
                                            x.dim(1) / dim == q_heads + 2 * kv_heads;
  if (q_heads < 1 || kv_heads < 1 || !heads_ok) {
    throw InvalidArgument(op, ": qkv must be [L, q_heads + 2 Hkv, D] or [L, (q_heads + 2 Hkv) * D] for q_heads >= 1 "
                          "and k_dst [Hkv, C, D], got qkv ", shape_str(x.shape), ", q_heads=", q_heads, ", k_dst ",
                          shape_str(k_dst.shape));
  }
  const int64_t rows = x.dim(0);
  require_u32(op, "q_heads + 2 Hkv", q_heads + 2 * kv_heads);
  float base_f = 1.0f;  // unused with a table
  if (freqs != nullptr) {
    if (freqs->dtype != DType::f32) {
      throw DTypeError(op, ": freqs has dtype ", dtype_name(freqs->dtype), "; expected float32");
    }
    freqs->require_dense(op, "freqs");
    if (freqs->ndim() != 1 || freqs->dim(0) * 2 != dim) {
      throw InvalidArgument(op, ": freqs must be [D / 2] = [", dim / 2, "] for D=", dim, ", got ",
                            shape_str(freqs->shape));
    }
    check_heads_write(op, rows, dim, capacity, seq_offset, start_pos, false, base);
  } else {
    base_f = check_heads_write(op, rows, dim, capacity, seq_offset, start_pos, true, base);
  }
  Tensor q = Tensor::empty({q_heads, rows, dim}, x.dtype);
  if (x.numel() > 0) {
    run_plan(plan_qkv_to_heads(x.dtype, rows, q_heads, kv_heads, dim, capacity, seq_offset, start_pos, base_f,
                               freqs != nullptr),
             freqs ? std::vector<const Tensor*>{&x, &q, &k_dst, &v_dst, freqs}
                   : std::vector<const Tensor*>{&x, &q, &k_dst, &v_dst});
  }
  return q;
}

Tensor heads_to_rows(const Tensor& x) {
  const char* op = "heads_to_rows";
  require_float_operands(op, {{"x", x}});
  if (x.ndim() != 3) throw InvalidArgument(op, ": x must be [H, L, D], got ", shape_str(x.shape));
  require_u32(op, "H", x.dim(0));
  require_u32(op, "L", x.dim(1));
  require_u32(op, "D", x.dim(2));
  Tensor y = Tensor::empty({x.dim(1), x.dim(0) * x.dim(2)}, x.dtype);
  if (x.numel() > 0) run_plan(plan_heads_to_rows(x.dtype, x.dim(1), x.dim(0), x.dim(2)), {&x, &y});
  return y;
}

namespace {

void check_table(const char* op, const Tensor& table) {
  require_float_operands(op, {{"table", table}});
  if (table.ndim() != 2) throw InvalidArgument(op, ": table must be [V, D], got ", shape_str(table.shape));
  require_u32(op, "V", table.dim(0));
  require_u32(op, "D", table.dim(1));
}

void check_id(const char* op, size_t i, int64_t id, int64_t vocab) {
  if (id < 0 || id >= vocab) throw InvalidArgument(op, ": ids[", i, "]=", id, " is outside [0, ", vocab, ")");
}

// ids: int32 or uint32 [L], already checked against the table.
Tensor gather_rows(const Tensor& table, const Tensor& ids) {
  Tensor y = Tensor::empty({ids.dim(0), table.dim(1)}, table.dtype);
  if (y.numel() == 0) return y;
  run_plan(plan_gather_rows(table.dtype, ids.dim(0), table.dim(0), table.dim(1)), {&table, &ids, &y});
  return y;
}

}  // namespace

Tensor embedding(const Tensor& table, const Tensor& ids) {
  const char* op = "embedding";
  check_table(op, table);
  ids.require_dense(op, "ids");
  if (ids.dtype != DType::i32 && ids.dtype != DType::u32) {
    throw DTypeError(op, ": ids has dtype ", dtype_name(ids.dtype), "; expected int32 or uint32");
  }
  if (ids.ndim() != 1) throw InvalidArgument(op, ": ids must be 1-D, got shape ", shape_str(ids.shape));
  require_u32(op, "L", ids.dim(0));
  std::vector<int32_t> host(static_cast<size_t>(ids.numel()));
  ids.download(host.data(), ids.nbytes(), op);
  for (size_t i = 0; i < host.size(); ++i) {
    check_id(op, i, ids.dtype == DType::u32 ? static_cast<int64_t>(static_cast<uint32_t>(host[i])) : host[i],
             table.dim(0));
  }
  return gather_rows(table, ids);
}

Tensor embedding(const Tensor& table, const std::vector<int64_t>& ids) {
  const char* op = "embedding";
  check_table(op, table);
  require_u32(op, "L", static_cast<int64_t>(ids.size()));
  std::vector<uint32_t> narrow(ids.size());  // the kernel reads uint32; every id is in [0, V), V < 2^32
  for (size_t i = 0; i < ids.size(); ++i) {
    check_id(op, i, ids[i], table.dim(0));
    narrow[i] = static_cast<uint32_t>(ids[i]);
  }
  Tensor device_ids = Tensor::empty({static_cast<int64_t>(ids.size())}, DType::u32);
  if (!narrow.empty()) device_ids.upload(narrow.data(), device_ids.nbytes(), op);
  return gather_rows(table, device_ids);
}

}  // namespace mtlinv
