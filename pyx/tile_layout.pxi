# The tile layouts of the matrix-unit kernels' weights, made on the host by the C++ core (src/core/tile_layout.h).
from libc.stdint cimport uintptr_t

cdef const void* _host_address(a):
    return <const void*><uintptr_t>a.ctypes.data


def tile_weights(w):
    """W [N, K] (float16 or bfloat16, a linear layer's weight as gemv(transpose=True) takes it) in the tile layout
    that gemv's matrix-unit kernel reads in whole blocks: a numpy array [N/16, K/32, 16, 32], block [t, b] holding
    K positions [32 b, 32 b + 32) of rows 16 t .. 16 t + 15. N and K must be multiples of 16 and 32 (the shape then
    gives K, which gemv checks x against). gemv takes either layout (told apart by rank) and gives the same bits at
    or below the limit (above it each layout has its own throughput kernel); the tile layout runs where the device
    has matrix units (device_info()["matrix_units"]: CUDA). On an H200 a call took 4-12% less time at M = 1..16 at
    4096 x 4096 and 8192 x 8192, 0-4% at 4096 x 14336 (one row of 8192 x 8192 at 92% of copy bandwidth;
    docs/decisions.md, "gemv: tile layout")."""
    w = _host_array(w, None, "tile_weights", "w")
    if w.ndim != 2:
        raise InvalidArgumentError(f"tile_weights: w must be [N, K], got shape {w.shape}")
    if w.dtype not in (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)):
        raise DTypeError(f"tile_weights: w has dtype {w.dtype}; the tile layout is read by the 16-bit (float16, "
                         f"bfloat16) matrix-unit kernel only")
    w = np.ascontiguousarray(w)
    n, k = w.shape
    c_tiled_weight_elements(n, k)  # checks the shape
    w_tiled = np.empty(tuple(c_tiled_weight_shape(n, k)), w.dtype)
    c_tile_weights(_host_address(w), w.dtype.itemsize, n, k, <void*>_host_address(w_tiled))
    return w_tiled


def _quant_tile(wq, scales, biases, int group_size, int bits, supers=None):
    """The tile layout of mtlinv.quant.tile from the row layout's numpy arrays (wq uint32 [N, K*bits/32], scales
    and biases [N, K/group_size] of one 2- or 4-byte float dtype, or int8 codes with supers float32 [N, K/256, 2]):
    wq [N/16, ceil(K/128), 16, 4*bits], scales and biases [N/16, K/group_size, 16], supers [N/16, K/256, 16, 2]
    (returned fourth where given)."""
    wq, scales, biases = (np.ascontiguousarray(a) for a in (wq, scales, biases))
    if wq.ndim != 2 or wq.dtype != np.uint32:
        raise InvalidArgumentError(f"_quant_tile: wq must be uint32 [N, K*bits/32], got {wq.dtype} {list(wq.shape)}")
    n = wq.shape[0]
    k = wq.shape[1] * 32 // bits if bits > 0 else 0
    c_quant_tiled_words(n, k, group_size, bits)  # checks the shape
    # The rearrangement reads N K/group_size scales and biases (and N K/256 pairs of supers): anything else would
    # read past them.
    groups = [n, k // group_size]
    codes = scales.dtype == np.int8
    for name, a in (("scales", scales), ("biases", biases)):
        if list(a.shape) != groups or a.dtype != scales.dtype or a.dtype.itemsize not in (1, 2, 4) or (
                a.dtype.itemsize == 1 and not codes):
            raise InvalidArgumentError(f"_quant_tile: {name} must be [N, K/group_size] = {groups} of one 2- or "
                                       f"4-byte float dtype, or int8 codes, got {a.dtype} {list(a.shape)}")
    if codes != (supers is not None):
        raise InvalidArgumentError("_quant_tile: supers go with int8 scale codes, and int8 codes need supers")
    wq_tiled = np.empty(tuple(c_quant_tiled_shape(n, k, bits)), np.uint32)
    scales_tiled = np.empty(tuple(c_quant_tiled_group_shape(n, k, group_size)), scales.dtype)
    biases_tiled = np.empty_like(scales_tiled)
    cdef const float* p_supers = NULL
    cdef float* p_supers_tiled = NULL
    if codes:
        supers = np.ascontiguousarray(supers)
        expected = [n, k // kQgemvSuperK, 2]
        if supers.dtype != np.float32 or list(supers.shape) != expected:
            raise InvalidArgumentError(f"_quant_tile: supers must be float32 [N, K/256, 2] = {expected}, "
                                       f"got {supers.dtype} {list(supers.shape)}")
        supers_tiled = np.empty(tuple(c_quant_tiled_super_shape(n, k)), np.float32)
        p_supers = <const float*>_host_address(supers)
        p_supers_tiled = <float*>_host_address(supers_tiled)
    c_quant_tile(<const uint32_t*>_host_address(wq), _host_address(scales), _host_address(biases),
                 scales.dtype.itemsize, n, k, group_size, bits, <uint32_t*>_host_address(wq_tiled),
                 <void*>_host_address(scales_tiled), <void*>_host_address(biases_tiled), p_supers, p_supers_tiled)
    return (wq_tiled, scales_tiled, biases_tiled, supers_tiled) if codes else (wq_tiled, scales_tiled, biases_tiled)
