# A llama decoder's forward pass in C++ (src/core/model/decoder.h): one call from Python a step instead of ten a
# layer, since a small model's step on a GPU costs mostly the host's time to issue its ops.

_LINEARS = ("qkv", "o", "gate_up", "down")
_LAYER_KEYS = frozenset(("attn_norm", "ffn_norm", "k_cache", "v_cache") + _LINEARS)
_OPTIONAL_LAYER_KEYS = frozenset(("q_norm", "k_norm"))  # Qwen 3's per-head norms of q and k


# no_gc_clear: `c` must release the Tensors' storages before `keepalive` drops the Tensors (Tensor.__dealloc__).
@cython.no_gc_clear
cdef class Decoder:
    """A llama decoder's forward pass, run op by op in C++ on the active device (mtlinv.model.DeviceModel's loop).

    n_heads: query heads (the caches give Hkv and the head dim). embedding [V, H]; output_norm [H]; output: the
    logits projection. layers: the layers to run, each a dict with attn_norm and ffn_norm [H], the projections
    qkv (q, k and v stacked by rows), o, gate_up (gate and up stacked) and down, and the layer's k_cache and
    v_cache [Hkv, C, D], written in place; optionally q_norm and k_norm [D] (both: per-head RMS norms of the queries
    and keys before RoPE, mtlinv.qk_rms_norm). A projection is any object with wq, scales and biases (Tensors, as
    mtlinv.qgemv takes them), group_size and bits, and optionally bias (a Tensor [N], or None), such as
    mtlinv.model.QuantLinear. rope_freqs: None (pair j turns by rope_theta^(-2j/D) a position), or the D / 2 pair
    frequencies of a scaled RoPE, each in (0, 1] (taken as float32)."""
    cdef unique_ptr[CDecoder] c
    cdef object keepalive  # the Tensors it uses: a zero-copy Tensor keeps its array alive, not the C++ side
    cdef int64_t vocab

    def __init__(self, *, n_heads, rope_theta, rms_eps, embedding, layers, output_norm, output, rope_freqs=None):
        op = "Decoder"
        if self.c:  # a forward on another thread may be running on the decoder it would replace
            raise InvalidArgumentError(f"{op}: already initialised; make a new Decoder")
        cdef CDecoderConfig config
        config.n_heads = _int_arg(op, "n_heads", n_heads, 1, 2**31)
        config.rope_theta = _real_arg(op, "rope_theta", rope_theta)
        config.rms_eps = _real_arg(op, "rms_eps", rms_eps)
        if rope_freqs is not None:
            config.rope_freqs = _float_vector(op, "rope_freqs", rope_freqs)
            if config.rope_freqs.empty():  # the core reads an empty table as none
                raise InvalidArgumentError(f"{op}: rope_freqs is empty; pass None for no table, or the D / 2 pair "
                                           "frequencies")
        kept = []
        cdef vector[CDecoderLayer] c_layers
        cdef CDecoderLayer c_layer
        for i, layer in enumerate(layers):
            if not isinstance(layer, dict) or not _LAYER_KEYS <= set(layer) <= _LAYER_KEYS | _OPTIONAL_LAYER_KEYS:
                got = sorted(map(repr, layer)) if isinstance(layer, dict) else type(layer).__name__
                raise InvalidArgumentError(f"{op}: layers[{i}] must be a dict with keys {sorted(_LAYER_KEYS)} "
                                           f"(and optionally {sorted(_OPTIONAL_LAYER_KEYS)}), got {got}")
            where = f"layers[{i}]"
            c_layer.attn_norm = _decoder_tensor(kept, layer["attn_norm"], f"{where}['attn_norm']")
            c_layer.ffn_norm = _decoder_tensor(kept, layer["ffn_norm"], f"{where}['ffn_norm']")
            c_layer.k_cache = _decoder_tensor(kept, layer["k_cache"], f"{where}['k_cache']", writable=True)
            c_layer.v_cache = _decoder_tensor(kept, layer["v_cache"], f"{where}['v_cache']", writable=True)
            c_layer.qkv = _decoder_linear(kept, layer["qkv"], f"{where}['qkv']")
            c_layer.o = _decoder_linear(kept, layer["o"], f"{where}['o']")
            c_layer.gate_up = _decoder_linear(kept, layer["gate_up"], f"{where}['gate_up']")
            c_layer.down = _decoder_linear(kept, layer["down"], f"{where}['down']")
            c_layer.q_norm = CTensor()
            c_layer.k_norm = CTensor()
            if layer.get("q_norm") is not None:
                c_layer.q_norm = _decoder_tensor(kept, layer["q_norm"], f"{where}['q_norm']")
            if layer.get("k_norm") is not None:
                c_layer.k_norm = _decoder_tensor(kept, layer["k_norm"], f"{where}['k_norm']")
            c_layers.push_back(c_layer)
        cdef CTensor c_embedding = _decoder_tensor(kept, embedding, "embedding")
        cdef CTensor c_norm = _decoder_tensor(kept, output_norm, "output_norm")
        cdef CQuantLinear c_output = _decoder_linear(kept, output, "output")
        self.c.reset(new CDecoder(config, c_embedding, c_layers, c_norm, c_output))
        self.keepalive = kept
        self.vocab = c_embedding.shape[0] if c_embedding.shape.size() else 0

    @property
    def capacity(self):
        """Cache positions per layer (the caches' C); unbounded without layers."""
        return self._checked().capacity()

    def forward(self, ids, start):
        """Logits [M, V] (the embedding's dtype) of token ids [M] (M >= 1) at positions start..start + M - 1:
        writes their keys and values into the caches there and attends over positions 0..start + M - 1 (the caller
        keeps the positions before start valid). On CUDA it returns once the kernels are queued, having first
        waited for the work queued before it (the ids' upload does)."""
        cdef CDecoder* d = self._checked()
        a = np.asarray(ids)
        if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
            raise InvalidArgumentError(f"Decoder.forward: ids must be a 1-D sequence of integers, got {a.dtype} "
                                       f"of shape {a.shape}")
        cdef int64_t c_start = _int_arg("Decoder.forward", "start", start, 0, 2**62)
        d.check_positions(a.shape[0], c_start)  # before the copy below, which a broadcast view would make huge
        _check_dims(a, "Decoder.forward: ids")
        if a.size and a.dtype.kind == "u" and a.max() >= 2**63:  # past int64, where the conversion would wrap
            i = int(np.argmax(a))
            raise InvalidArgumentError(f"Decoder.forward: ids[{i}]={int(a[i])} is outside [0, {self.vocab})")
        cdef const int64_t[::1] view = np.ascontiguousarray(a, dtype=np.int64)
        cdef vector[int64_t] c_ids
        if view.shape[0]:
            c_ids.assign(&view[0], &view[0] + view.shape[0])
        cdef CTensor out
        cdef CContextLimit limit_scope
        limit_scope.open(_context_limit())
        with nogil:
            out = d.forward(c_ids, c_start)
        return _wrap(out)

    cdef CDecoder* _checked(self) except NULL:
        if not self.c:
            raise InvalidArgumentError("Decoder: not initialised (construct it with Decoder(...))")
        return self.c.get()


cdef CTensor _decoder_tensor(list kept, value, str name, bint writable=False) except *:
    if not isinstance(value, Tensor):
        raise InvalidArgumentError(f"Decoder: {name} must be an mtlinv.Tensor, got {type(value).__name__}")
    cdef Tensor t = value
    t._require_storage("Decoder", name)
    if writable and t.readonly:
        raise InvalidArgumentError(f"Decoder: {name} wraps a read-only array; it is written in place")
    kept.append(t)
    return t.c


cdef CQuantLinear _decoder_linear(list kept, value, str name) except *:
    cdef CQuantLinear linear
    for field in ("wq", "scales", "biases", "group_size", "bits"):
        if not hasattr(value, field):
            raise InvalidArgumentError(f"Decoder: {name} has no {field}; a projection has wq, scales, biases, "
                                       f"group_size and bits (as mtlinv.model.QuantLinear)")
    linear.wq = _decoder_tensor(kept, value.wq, f"{name}.wq")
    linear.scales = _decoder_tensor(kept, value.scales, f"{name}.scales")
    linear.biases = _decoder_tensor(kept, value.biases, f"{name}.biases")
    linear.group_size = _int_arg("Decoder", f"{name}.group_size", value.group_size, 1, 2**16)
    linear.bits = _int_arg("Decoder", f"{name}.bits", value.bits, 1, 32)
    if getattr(value, "bias", None) is not None:
        linear.bias = _decoder_tensor(kept, value.bias, f"{name}.bias")
    if getattr(value, "supers", None) is not None:
        linear.supers = _decoder_tensor(kept, value.supers, f"{name}.supers")
    return linear
