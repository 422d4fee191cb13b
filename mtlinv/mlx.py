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

Two routes (backend() says which this process takes, patch(route=...) picks one):
- "primitive": mtlinv._mlx_ext, an MLX C++ extension (mtlinv/mlx_ext, built by `python -m mtlinv.mlx_ext.build`).
  Each routed call is an MLX Primitive: a node of MLX's lazy graph, evaluated with the rest of it, that runs
  mtlinv's plan over the MLX arrays' own memory, the result included. No evaluation inside the layer, no copy (a
  strided view, such as a KV cache's keys, is made contiguous by MLX first). On MLX's CPU stream it runs on mtlinv's
  active backend (on Linux the emulator: run and tested); on a Mac's GPU stream it encodes mtlinv's Metal kernels
  on MLX's own command encoder (compiled against the macOS wheel's headers on Linux, never run).
- "dlpack": where the extension is not built. Arrays cross through the buffer protocol (MLX exports bfloat16 as
  format 'bfloat16', which mtlinv reads), which gives the CPU address of an evaluated array on every MLX build;
  mtlinv reads it without a copy, but MLX evaluates an array when it is exported, so each routed layer is a
  synchronization point of MLX's graph, and MLX's CPU build imports nothing without a copy, so each result is
  copied into MLX (mx.from_dlpack).

mlx is imported on first use: the rest of mtlinv does not need it.
"""
from __future__ import annotations

import contextvars
import pathlib
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


_extension_state: dict = {}  # "module" (mtlinv._mlx_ext or None), "error" (why it is None)


def _extension():
    """mtlinv._mlx_ext, imported once, or None (the reason in extension_error())."""
    if "module" not in _extension_state:
        try:
            from mtlinv import _mlx_ext
        except ImportError as e:
            _extension_state.update(module=None, error=f"{e} (build it: python -m mtlinv.mlx_ext.build)")
        else:
            mx, _ = _mlx()
            metallib = pathlib.Path(mtlinv.__file__).with_name("mtlinv.metallib")
            if metallib.exists():
                _mlx_ext.set_metallib(str(metallib))
            if mx.metal.is_available() and not metallib.exists():
                _extension_state.update(module=None, error=f"MLX runs on Metal, and {metallib} (the kernels the "
                                        "extension encodes on MLX's GPU stream) is missing: setup.py builds it "
                                        "where Apple's Metal toolchain is installed")
            else:
                _extension_state.update(module=_mlx_ext, error=None)
    return _extension_state["module"]


def backend() -> str:
    """The route patch() takes by default: "primitive" (the MLX extension) or "dlpack" (extension_error() says why)."""
    return "dlpack" if _extension() is None else "primitive"


def extension_error() -> str | None:
    """Why mtlinv._mlx_ext did not import (None when it did)."""
    _extension()
    return _extension_state["error"]


def _base_attention():
    from mlx_lm.models import base
    return base.scaled_dot_product_attention


class Routing:
    """What patch() did to one model, and how many calls each route has taken since.

    route: "primitive" or "dlpack" (the module's docstring). routed: Counter of calls run by mtlinv, by kind
    ('linear', 'quantized_linear', 'embedding_as_linear', 'attention'). to_mlx: Counter of calls left to MLX, by
    (kind, reason). layers: how many layers of each kind were patched. attention_modules: the mlx-lm model modules
    whose attention function was hooked (empty when the model calls MLX's attention directly: then only its linear
    layers are routed)."""

    def __init__(self, model, limit: int, route: str | None):
        if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= 2**30:
            raise mtlinv.InvalidArgumentError(f"mtlinv.mlx.patch: limit must be an int in 0..2^30, got {limit!r}")
        if route not in (None, "primitive", "dlpack"):
            raise mtlinv.InvalidArgumentError(f"mtlinv.mlx.patch: route must be None, 'primitive' or 'dlpack', got "
                                              f"{route!r}")
        if route == "primitive" and _extension() is None:
            raise mtlinv.InvalidArgumentError(f"mtlinv.mlx.patch: route 'primitive' needs mtlinv._mlx_ext: "
                                              f"{extension_error()}")
        self.model = model
        self.limit = limit
        self.route = route or backend()
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
        return (f"mtlinv.mlx.Routing(limit={self.limit}, route={self.route!r}, layers={dict(self.layers)}, "
                f"routed={dict(self.routed)}, to_mlx={dict(self.to_mlx)}, attention_modules={self.attention_modules})")


def _dtype_reason(*arrays) -> str | None:
    names = [str(a.dtype).rsplit(".", 1)[-1] for a in arrays if a is not None]
    if names[0] not in _FLOATS or any(n != names[0] for n in names):
        return "dtypes " + "/".join(names)
    return None


def _host(array):
    """An MLX array's memory for mtlinv, zero-copy: a strided view (a KV cache's keys) is made contiguous first."""
    if array is None:
        return None
    mx, _ = _mlx()
    return memoryview(mx.contiguous(array))


def _run(routing, kind, reason, mlx_call, op, arrays, **params):
    """mtlinv's `op` (gemv, qgemv, sdpa) on `arrays` under the routing's limit, on the routing's route; or, when
    `reason` says why not, mlx_call(). Counted either way. `params` hold the op's keywords, `bias` among them."""
    if reason is not None:
        routing.to_mlx[(kind, reason)] += 1
        return mlx_call()
    routing.routed[kind] += 1
    if routing.route == "primitive":
        return getattr(_extension(), op)(*arrays, **params, limit=routing.limit)  # lazy: a node of MLX's graph
    mx, _ = _mlx()
    if params.get("bias") is not None:
        params["bias"] = _host(params["bias"])
    with mtlinv.batch_invariant(routing.limit):
        result = getattr(mtlinv, op)(*map(_host, arrays), **params)
    return mx.from_dlpack(result)  # a copy: MLX's CPU build imports none without one


def _rows(x) -> int:
    return x.size // x.shape[-1] if x.ndim else 0


def _linear_call(self, x):
    routing, base = self._mtlinv_routing, self._mtlinv_base
    w, b = self["weight"], self.get("bias")
    reason = routing.rows_reason(_rows(x)) or _dtype_reason(x, w, b)
    return _run(routing, "linear", reason, lambda: base.__call__(self, x), "gemv", (x, w), bias=b)


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
    return _run(routing, "quantized_linear", reason, lambda: base.__call__(self, x), "qgemv",
                (x, wq, scales, biases), bias=bias, group_size=self.group_size, bits=self.bits)


def _embedding_as_linear(self, x):
    """Tied embeddings: the output projection is the embedding table as a linear layer's weight."""
    routing, base = self._mtlinv_routing, self._mtlinv_base
    mlx_call = lambda: base.as_linear(self, x)  # noqa: E731
    if "scales" in self:
        wq, scales, biases = self["weight"], self["scales"], self.get("biases")
        reason = routing.rows_reason(_rows(x)) or _quantized_reason(self, x, scales, biases, None)
        return _run(routing, "embedding_as_linear", reason, mlx_call, "qgemv", (x, wq, scales, biases),
                    group_size=self.group_size, bits=self.bits)
    w = self["weight"]
    reason = routing.rows_reason(_rows(x)) or _dtype_reason(x, w)
    return _run(routing, "embedding_as_linear", reason, mlx_call, "gemv", (x, w))


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
                "sdpa", (queries, keys, values), scale=scale, causal=mask is not None)


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


def patch(model, limit: int = 8, route: str | None = None) -> Routing:
    """Routes `model`'s nn.Linear, nn.QuantizedLinear and tied-embedding output layers, and its attention, to mtlinv's
    canonical kernels for M <= limit rows (queries), leaving larger M to MLX. Returns the Routing (its counters, and
    unpatch(), which restores the model exactly). The model's weights stay where they are: no conversion step.
    route: "primitive", "dlpack", or None for backend()'s."""
    _, nn = _mlx()
    if getattr(type(model), "_mtlinv_routing", None) is not None:
        raise mtlinv.InvalidArgumentError("mtlinv.mlx.patch: this model is already patched; unpatch it first")
    routing = Routing(model, limit, route)
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
