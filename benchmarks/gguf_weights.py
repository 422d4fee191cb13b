"""Random GGUF projections for the benchmarks, and the bytes a projection holds on the device.

The blocks are random bytes with their float16 fields drawn in a chosen range, imported as `mtlinv.model` imports a
file's projections (`QuantLinear.from_gguf`): Q4_K, Q5_K and Q6_K in qgemv's super-block form, the other types in
the affine format at their blocks' float16 scales. Needs the model extra (gguf).
"""
import numpy as np

# Byte offsets of each type's float16 scale fields in a block (the rest of a block is codes and small integer
# scales, for which any byte is valid).
F16_FIELDS = {"Q4_0": (0,), "Q4_1": (0, 2), "Q8_0": (0,), "Q5_0": (0,), "Q5_1": (0, 2), "Q4_K": (0, 2),
              "Q5_K": (0, 2), "Q6_K": (208,)}
ARRAYS = ("wq", "scales", "biases", "supers")  # a QuantLinear's weight arrays (supers: the super-block form's)


def block_elements(kind):
    """Elements per block of GGUF type `kind` (32, or 256 for the K-quants): K must be a multiple of it."""
    import gguf
    from mtlinv.model.gguf_model import QType

    return gguf.GGML_QUANT_SIZES[QType[kind]][0]


def gguf_tensor(rng, kind, k, n, field_scale=None):
    """A GGUFTensor [N, K] of random `kind` blocks, its float16 fields uniform in [0.5, 1.5) x field_scale (by
    default K^-1/2 / 8, about the size of a trained model's)."""
    import gguf
    from mtlinv.model.gguf_model import GGUFTensor, QType

    qtype = QType[kind]
    block, nbytes = gguf.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(n, k // block, nbytes), dtype=np.uint8)
    scale = np.float32(k ** -0.5 / 8 if field_scale is None else field_scale)
    for at in F16_FIELDS[kind]:
        d = (rng.random((n, k // block), dtype=np.float32) + 0.5) * scale
        raw[..., at:at + 2] = d.astype("<f2")[..., None].view(np.uint8)
    return GGUFTensor(f"bench.{kind}", qtype, (n, k), raw.reshape(n, -1))


def arrays(linear):
    """The QuantLinear's weight arrays by field, each stored array once (Q6_K's codes serve as scales and biases)."""
    found = {}
    for f in ARRAYS:
        a = getattr(linear, f)
        if a is not None and all(a is not b for b in found.values()):
            found[f] = a
    return found


def nbytes(linear):
    """The bytes of the QuantLinear's weight arrays, each stored array once."""
    return sum(a.nbytes for a in arrays(linear).values())
