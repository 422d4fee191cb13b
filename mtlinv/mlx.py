"""mtlinv inside mlx-lm: route a model's linear layers and attention to mtlinv's canonical kernels.

    import mtlinv.mlx
    routing = mtlinv.mlx.patch(model, limit=8)   # an mlx-lm model, as mlx_lm.load returns it
    ...  # mlx_lm.generate / stream_generate(..., draft_model=...): speculative output == greedy output
    routing.unpatch()                            # or `with mtlinv.mlx.patch(model, 8):`

Every call with M <= limit rows (a linear layer's B*L, attention's queries L) runs mtlinv's canonical kernel
(mtlinv.gemv, qgemv, sdpa under batch_invariant(limit)), reading the model's own weights: an nn.Linear's weight
[N, K] is gemv's w, and MLX's affine quantization (nn.QuantizedLinear's weight, scales and biases) is qgemv's
format, so there is no conversion step. Larger M, and what mtlinv has no kernel for (another quantization mode, a
mask array, a quantized KV cache, attention sinks, a head dim outside 64/80/96/128/256, mixed dtypes), is left to
MLX; `Routing.to_mlx` counts those calls by reason. Norms, RoPE and the rest stay MLX's: each is row-wise.

How arrays cross: the buffer protocol (MLX exports bfloat16 as format 'bfloat16', which mtlinv reads), which
gives the CPU address of an evaluated array on every MLX build (a Mac's unified memory included), which a
DLPack export of a GPU array need not. mtlinv reads it without a copy; MLX evaluates an array
when it is exported, so a routed layer is a synchronization point of MLX's lazy graph. MLX's CPU build imports
nothing without a copy, so each result is copied into MLX (mx.from_dlpack). Not built: an MLX C++ extension (a
Primitive running mtlinv's kernels on MLX's own stream and Metal command encoder, keeping the graph lazy, copying
nothing). Run on the MLX CPU build (Linux); on a Mac the same route has not been run.

mlx is imported on first use: the rest of mtlinv does not need it.
"""
from __future__ import annotations

import contextvars
import sys
from collections import Counter

import mtlinv

# sdpa's head dimensions (mtlinv.sdpa's docstring) and qgemv's quantization parameters (mtlinv.qgemv's).
_SDPA_HEAD_DIMS = (64, 80, 96, 128, 256)
_QGEMV_BITS = (2, 3, 4, 5, 6, 8)
_QGEMV_GROUP_SIZES = (32, 64, 128)
_FLOATS = ("float32", "float16", "bfloat16")

# The Routing whose model is running in this context: attention is a module-level function in mlx-lm, called by
# every model of a module, so the function takes mtlinv's route only inside a patched model's call.
_active: contextvars.ContextVar[Routing | None] = contextvars.ContextVar("mtlinv_mlx_routing", default=None)
# Module -> (mlx-lm's function, number of patched models using the module): restored when the count drops to 0.
_attention_hooks: dict = {}


def _mlx():
    try:
        import mlx.core as mx
        import mlx.nn as nn
    except ImportError as e:
        raise ImportError("mtlinv.mlx needs MLX: pip install mlx (macOS) or 'mlx[cpu]' (Linux), and mlx-lm") from e
    return mx, nn


def _base_attention():
    from mlx_lm.models import base
    return base.scaled_dot_product_attention


class Routing:
    """What patch() did to one model, and how many calls each route has taken since.

    routed: Counter of calls run by mtlinv, by kind ('linear', 'quantized_linear', 'embedding_as_linear',
    'attention'). to_mlx: Counter of calls left to MLX, by (kind, reason). layers: how many layers of each kind
    were patched. attention_modules: the mlx-lm model modules whose attention function was hooked (empty when the
    model calls MLX's attention directly: then only its linear layers are routed)."""

    def __init__(self, model, limit: int):
        if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= 2**30:
            raise mtlinv.InvalidArgumentError(f"mtlinv.mlx.patch: limit must be an int in 0..2^30, got {limit!r}")
        self.model = model
        self.limit = limit
        self.routed: Counter = Counter()
        self.to_mlx: Counter = Counter()
        self.layers: Counter = Counter()
        self.attention_modules: list[str] = []
        self._swapped: list = []  # (module, its class before patch)

    def rows_reason(self, rows: int) -> str | None:
        """Why `rows` rows are MLX's, or None when they are mtlinv's."""
        if rows > self.limit:
            return f"M > limit {self.limit}"
        return None if rows >= 1 else "no rows"

    def unpatch(self):
        """Restores every patched layer's class and, once no patched model uses it, mlx-lm's attention function."""
        for module, cls in reversed(self._swapped):
            module.__class__ = cls
        self._swapped.clear()
        for name in self.attention_modules:
            original, users = _attention_hooks[name]
            if users == 1:
                sys.modules[name].scaled_dot_product_attention = original
                del _attention_hooks[name]
            else:
                _attention_hooks[name] = (original, users - 1)
        self.attention_modules = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.unpatch()

    def __repr__(self):
        return (f"mtlinv.mlx.Routing(limit={self.limit}, layers={dict(self.layers)}, routed={dict(self.routed)}, "
                f"to_mlx={dict(self.to_mlx)}, attention_modules={self.attention_modules})")


def _dtype_reason(*arrays) -> str | None:
    names = [str(a.dtype).rsplit(".", 1)[-1] for a in arrays if a is not None]
    if names[0] not in _FLOATS or any(n != names[0] for n in names):
        return "dtypes " + "/".join(names)
    return None


def _host(array):
    """An MLX array's memory for mtlinv, zero-copy: a strided view (a KV cache's keys) is made contiguous first."""
    mx, _ = _mlx()
    return memoryview(mx.contiguous(array))


def _maybe_host(array):
    return None if array is None else _host(array)


def _to_mlx(tensor):
    mx, _ = _mlx()
    return mx.from_dlpack(tensor)  # a copy: MLX's CPU build imports none without one


def _run(routing, kind, reason, mlx_call, mtlinv_call):
    """mtlinv_call() under the routing's limit, or, when `reason` says why not, mlx_call(); counted either way."""
    if reason is not None:
        routing.to_mlx[(kind, reason)] += 1
        return mlx_call()
    routing.routed[kind] += 1
    with mtlinv.batch_invariant(routing.limit):
        return _to_mlx(mtlinv_call())


def _rows(x) -> int:
    return x.size // x.shape[-1] if x.ndim else 0


def _linear_call(self, x):
    routing, base = self._mtlinv_routing, self._mtlinv_base
    w, b = self["weight"], self.get("bias")
    reason = routing.rows_reason(_rows(x)) or _dtype_reason(x, w, b)
    return _run(routing, "linear", reason, lambda: base.__call__(self, x),
                lambda: mtlinv.gemv(_host(x), _host(w), _maybe_host(b)))


def _quantized_reason(module, x, scales, biases, bias):
    """Why a quantized layer is MLX's: qgemv reads MLX's affine format (with biases) at its bits and group sizes."""
    mode = getattr(module, "mode", "affine")
    if mode != "affine" or biases is None:
        return f"mode {mode}" if mode != "affine" else "affine without biases"
    if module.bits not in _QGEMV_BITS or module.group_size not in _QGEMV_GROUP_SIZES:
        return f"bits {module.bits}, group_size {module.group_size}"
    return _dtype_reason(x, scales, biases, bias)


def _quantized_call(self, x):
    routing, base = self._mtlinv_routing, self._mtlinv_base
    wq, scales, biases, bias = self["weight"], self["scales"], self.get("biases"), self.get("bias")
    reason = routing.rows_reason(_rows(x)) or _quantized_reason(self, x, scales, biases, bias)
    return _run(routing, "quantized_linear", reason, lambda: base.__call__(self, x),
                lambda: mtlinv.qgemv(_host(x), _host(wq), _host(scales), _host(biases), bias=_maybe_host(bias),
                                     group_size=self.group_size, bits=self.bits))


def _embedding_as_linear(self, x):
    """Tied embeddings: the output projection is the embedding table as a linear layer's weight."""
    routing, base = self._mtlinv_routing, self._mtlinv_base
    mlx_call = lambda: base.as_linear(self, x)  # noqa: E731
    if "scales" in self:
        wq, scales, biases = self["weight"], self["scales"], self.get("biases")
        reason = routing.rows_reason(_rows(x)) or _quantized_reason(self, x, scales, biases, None)
        return _run(routing, "embedding_as_linear", reason, mlx_call,
                    lambda: mtlinv.qgemv(_host(x), _host(wq), _host(scales), _host(biases),
                                         group_size=self.group_size, bits=self.bits))
    w = self["weight"]
    reason = routing.rows_reason(_rows(x)) or _dtype_reason(x, w)
    return _run(routing, "embedding_as_linear", reason, mlx_call, lambda: mtlinv.gemv(_host(x), _host(w)))


def _attention(queries, keys, values, cache, scale, mask, sinks=None, **kwargs):
    """mlx-lm's scaled_dot_product_attention, on mtlinv.sdpa inside a patched model's call."""
    routing = _active.get()
    original = _base_attention()
    if routing is None:
        return original(queries, keys, values, cache=cache, scale=scale, mask=mask, sinks=sinks, **kwargs)
    if sinks is not None or kwargs:
        reason = "attention sinks" if sinks is not None else f"arguments {sorted(kwargs)}"
    elif hasattr(cache, "bits"):
        reason = "quantized KV cache"
    elif mask is not None and not (isinstance(mask, str) and mask == "causal"):
        reason = "mask array"
    elif queries.shape[-1] not in _SDPA_HEAD_DIMS:
        reason = f"head dim {queries.shape[-1]}"
    else:
        reason = routing.rows_reason(queries.shape[-2]) or _dtype_reason(queries, keys, values)
    return _run(routing, "attention", reason,
                lambda: original(queries, keys, values, cache=cache, scale=scale, mask=mask, sinks=sinks),
                lambda: mtlinv.sdpa(_host(queries), _host(keys), _host(values), scale=scale,
                                    causal=mask is not None))


def _model_call(self, *args, **kwargs):
    token = _active.set(self._mtlinv_routing)
    try:
        return self._mtlinv_base.__call__(self, *args, **kwargs)
    finally:
        _active.reset(token)


def _swap(routing, module, methods: dict, kind: str):
    """Makes `module` an instance of a subclass of its class whose `methods` take mtlinv's route: parameters, names
    and everything else stay the class's, so the model's weights are read where they are."""
    cls = type(module)
    routed = type(f"Mtlinv{cls.__name__}", (cls,),
                  dict(methods, _mtlinv_routing=routing, _mtlinv_base=cls, __module__=__name__))
    module.__class__ = routed
    routing._swapped.append((module, cls))
    routing.layers[kind] += 1


def patch(model, limit: int = 8) -> Routing:
    """Routes `model`'s nn.Linear, nn.QuantizedLinear and tied-embedding output layers, and its attention, to mtlinv's
    canonical kernels for M <= limit rows (queries), leaving larger M to MLX. Returns the Routing (its counters, and
    unpatch(), which restores the model exactly). The model's weights stay where they are: no conversion step."""
    _, nn = _mlx()
    if getattr(type(model), "_mtlinv_routing", None) is not None:
        raise mtlinv.InvalidArgumentError("mtlinv.mlx.patch: this model is already patched; unpatch it first")
    routing = Routing(model, limit)
    for _, module in model.named_modules():
        if type(module).__dict__.get("_mtlinv_routing") is not None:
            continue
        if isinstance(module, nn.QuantizedLinear):
            _swap(routing, module, {"__call__": _quantized_call}, "quantized_linear")
        elif isinstance(module, nn.Linear):
            _swap(routing, module, {"__call__": _linear_call}, "linear")
        elif isinstance(module, (nn.Embedding, nn.QuantizedEmbedding)):
            _swap(routing, module, {"as_linear": _embedding_as_linear}, "embedding")
    _hook_attention(routing, model)
    _swap(routing, model, {"__call__": _model_call}, "model")
    return routing


def _hook_attention(routing, model):
    """Replaces mlx-lm's attention function in the modules of the model's classes that call it."""
    original = _base_attention()
    names = sorted({type(m).__module__ for _, m in model.named_modules()})
    for name in names:
        module = sys.modules.get(name)
        current = getattr(module, "scaled_dot_product_attention", None)
        if current is original:
            module.scaled_dot_product_attention = _attention
            _attention_hooks[name] = (original, 1)
        elif current is _attention:
            _attention_hooks[name] = (_attention_hooks[name][0], _attention_hooks[name][1] + 1)
        else:
            continue
        routing.attention_modules.append(name)
