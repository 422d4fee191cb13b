# Extern declarations of the ops, their plans (for introspection) and the model code of the C++ core.
from libc.stdint cimport int64_t, uint32_t
from libcpp cimport bool
from libcpp.utility cimport pair
from libcpp.vector cimport vector

from native cimport *

cdef extern from "../src/core/ops.h" namespace "mtlinv" nogil:
    CTensor c_rms_norm "mtlinv::rms_norm"(const CTensor&, const CTensor&, double) except +raise_py_error
    pair[CTensor, CTensor] c_add_rms_norm "mtlinv::add_rms_norm"(const CTensor&, const CTensor&, const CTensor&,
                                                                  double) except +raise_py_error
    CTensor c_qk_rms_norm "mtlinv::qk_rms_norm"(const CTensor&, int64_t, int64_t, const CTensor&, const CTensor&,
                                                double) except +raise_py_error
    cdef cppclass CGemvNames "mtlinv::GemvNames":
        const char* op
        const char* x
        const char* w
    CTensor c_gemv "mtlinv::gemv"(const CTensor&, const CTensor&, const CTensor*, bool,
                                  const CGemvNames&) except +raise_py_error

cdef extern from "../src/core/plans/gemv.h" namespace "mtlinv":
    cdef cppclass CGemvShape "mtlinv::GemvShape":
        int64_t batch, rows, k, n
        CDType dtype
        bool w_kn, has_bias, x_batched, w_batched, aligned, tiled
    CPlan c_plan_gemv "mtlinv::plan_gemv"(const CGemvShape&, int, const CDeviceCaps&) except +raise_py_error
    void c_check_gemv_operands "mtlinv::check_gemv_operands"(const CGemvShape&,
                                                             const CDeviceCaps&) except +raise_py_error

cdef extern from "../src/core/plans/rms_norm.h" namespace "mtlinv":
    CPlan c_plan_rms_norm "mtlinv::plan_rms_norm"(int64_t, int64_t, CDType, float, const CDeviceCaps&,
                                                  bool) except +raise_py_error
    CPlan c_plan_qk_rms_norm "mtlinv::plan_qk_rms_norm"(int64_t, int64_t, int64_t, int64_t, CDType, float,
                                                        const CDeviceCaps&) except +raise_py_error

cdef extern from "../src/core/plans/decoder_ops.h" namespace "mtlinv":
    CPlan c_plan_add "mtlinv::plan_add"(CDType, int64_t) except +raise_py_error
    CPlan c_plan_swiglu "mtlinv::plan_swiglu"(CDType, int64_t) except +raise_py_error
    CPlan c_plan_swiglu_halves "mtlinv::plan_swiglu_halves"(CDType, int64_t, int64_t) except +raise_py_error
    CPlan c_plan_to_heads "mtlinv::plan_to_heads"(bool, CDType, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                                                  float) except +raise_py_error
    CPlan c_plan_qkv_to_heads "mtlinv::plan_qkv_to_heads"(CDType, int64_t, int64_t, int64_t, int64_t, int64_t,
                                                          int64_t, int64_t, float, bool) except +raise_py_error
    CPlan c_plan_heads_to_rows "mtlinv::plan_heads_to_rows"(CDType, int64_t, int64_t, int64_t) except +raise_py_error
    CPlan c_plan_gather_rows "mtlinv::plan_gather_rows"(CDType, int64_t, int64_t, int64_t) except +raise_py_error

cdef extern from "../src/core/ops.h" namespace "mtlinv" nogil:
    CTensor c_qgemv "mtlinv::qgemv"(const CTensor&, const CTensor&, const CTensor&, const CTensor&, const CTensor*,
                                    int, int, const CTensor*, const CTensor*, bool) except +raise_py_error

cdef extern from "../src/core/plans/qgemv.h" namespace "mtlinv":
    const int64_t kQgemvSuperK
    cdef cppclass CQGemvShape "mtlinv::QGemvShape":
        int64_t rows, k, n
        int group_size, bits
        CDType dtype, scale_dtype
        bool has_bias, aligned, w_aligned, tiled, constant_weights
    CPlan c_plan_qgemv "mtlinv::plan_qgemv"(const CQGemvShape&, int, const CDeviceCaps&) except +raise_py_error
    void c_check_qgemv_operands "mtlinv::check_qgemv_operands"(const CQGemvShape&,
                                                               const CDeviceCaps&) except +raise_py_error

cdef extern from "../src/core/ops.h" namespace "mtlinv" nogil:
    cdef cppclass CSdpaOptions "mtlinv::SdpaOptions":
        bool causal
        bool has_scale
        double scale
        bool has_kv_len
        int64_t kv_len
        bool rows_out
    CTensor c_sdpa "mtlinv::sdpa"(const CTensor&, const CTensor&, const CTensor&,
                                  const CSdpaOptions&) except +raise_py_error

cdef extern from "../src/core/plans/sdpa.h" namespace "mtlinv":
    cdef cppclass CSdpaShape "mtlinv::SdpaShape":
        int64_t batch, q_heads, kv_heads, q_len, kv_len, capacity, head_dim
        CDType dtype
        bool causal, aligned
        float scale
    CPlan c_plan_sdpa "mtlinv::plan_sdpa"(const CSdpaShape&, int, const CDeviceCaps&) except +raise_py_error
    cdef cppclass CSdpaChunking "mtlinv::SdpaChunking":
        uint32_t block_keys, tier_keys
    CSdpaChunking c_sdpa_chunking "mtlinv::sdpa_chunking"(int64_t, CDType, const CDeviceCaps&)
    void c_check_sdpa_shape "mtlinv::check_sdpa_shape"(const CSdpaShape&) except +raise_py_error
    vector[pair[uint32_t, uint32_t]] c_sdpa_chunks "mtlinv::sdpa_chunks"(uint32_t, uint32_t, uint32_t)

cdef extern from "../src/core/ops/decoder_ops.h" namespace "mtlinv" nogil:
    CTensor c_add "mtlinv::add"(const CTensor&, const CTensor&) except +raise_py_error
    CTensor c_swiglu "mtlinv::swiglu"(const CTensor&, const CTensor&) except +raise_py_error
    CTensor c_swiglu_halves "mtlinv::swiglu_halves"(const CTensor&) except +raise_py_error
    void c_write_heads "mtlinv::write_heads"(const CTensor&, const CTensor&, int64_t, int64_t, bool,
                                             double, const char*) except +raise_py_error
    CTensor c_qkv_to_heads "mtlinv::qkv_to_heads"(const CTensor&, int64_t, const CTensor&, const CTensor&, int64_t,
                                                  int64_t, double, const CTensor*) except +raise_py_error
    CTensor c_rope_freqs "mtlinv::rope_freqs"(const char*, const char*, const vector[float]&) except +raise_py_error
    CTensor c_heads_to_rows "mtlinv::heads_to_rows"(const CTensor&) except +raise_py_error
    CTensor c_embedding "mtlinv::embedding"(const CTensor&, const CTensor&) except +raise_py_error

cdef extern from "../src/core/model/decoder.h" namespace "mtlinv":
    cdef cppclass CQuantLinear "mtlinv::QuantLinear":
        CTensor wq, scales, biases, bias, supers
        int group_size, bits
    cdef cppclass CDecoderLayer "mtlinv::DecoderLayer":
        CTensor attn_norm, ffn_norm, k_cache, v_cache, q_norm, k_norm
        CQuantLinear qkv, o, gate_up, down
    cdef cppclass CDecoderConfig "mtlinv::DecoderConfig":
        int64_t n_heads
        double rope_theta, rms_eps
        vector[float] rope_freqs
    cdef cppclass CDecoder "mtlinv::Decoder":
        CDecoder(CDecoderConfig, CTensor, vector[CDecoderLayer], CTensor, CQuantLinear) except +raise_py_error
        CTensor forward(const vector[int64_t]&, int64_t) except +raise_py_error nogil
        void check_positions(int64_t, int64_t) except +raise_py_error
        int64_t capacity()

cdef extern from "../src/core/tile_layout.h" namespace "mtlinv" nogil:
    vector[int64_t] c_tiled_weight_shape "mtlinv::tiled_weight_shape"(int64_t, int64_t)
    vector[int64_t] c_quant_tiled_shape "mtlinv::quant_tiled_shape"(int64_t, int64_t, int)
    vector[int64_t] c_quant_tiled_group_shape "mtlinv::quant_tiled_group_shape"(int64_t, int64_t, int)
    int64_t c_tiled_weight_elements "mtlinv::tiled_weight_elements"(int64_t, int64_t) except +raise_py_error
    void c_tile_weights "mtlinv::tile_weights"(const void*, size_t, int64_t, int64_t, void*) except +raise_py_error
    int64_t c_quant_tiled_words "mtlinv::quant_tiled_words"(int64_t, int64_t, int, int) except +raise_py_error
    void c_quant_tile "mtlinv::quant_tile"(const uint32_t*, const void*, const void*, size_t, int64_t, int64_t, int,
                                           int, uint32_t*, void*, void*, const float*, float*) except +raise_py_error
    vector[int64_t] c_quant_tiled_super_shape "mtlinv::quant_tiled_super_shape"(int64_t, int64_t)
