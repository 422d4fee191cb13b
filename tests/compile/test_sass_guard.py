"""What nvcc makes of two kernel files (sm_90 SASS), wherever nvcc is installed: the GPU machine, a developer's,
and a CI machine that has it (cuobjdump and nvdisasm come with the test extra as wheels); elsewhere it skips. Each
property was found by timing on an H200 (docs/decisions.md, "gemv: the 16-row tile" and "sdpa").

gemv_nk_mma's hot loop: each loop iteration of every form (W in rows and in the tile layout) must issue all loads
of its first block, the two weight rows of each output tile and the tile's R / 8 rows of x, before its first matrix
instruction. When an unrelated change to the shared epilogue (metal/mma_tile.h) let nvcc move the second x load
behind the first HMMA, the 16-row tile lost 10-14%.

sdpa_mma's partials, and its output where a call has one chunk: every global store must be a vector store. Stored
one float at a time, the partials cost 14% of the time of verifying 8 queries at 64K keys.

Both files' kernels: no stack and no spills (sdpa_mma's D = 128 kernels take 248 registers, 255 with element
loads: nvcc's limit)."""
import pathlib
import re
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tools"))
import build_cuda  # noqa: E402
import sass_report  # noqa: E402

NVCC = build_cuda.find_nvcc()
CUOBJDUMP = sass_report.find_cuobjdump(NVCC)

pytestmark = pytest.mark.skipif(not (NVCC and CUOBJDUMP),
                                reason="needs nvcc and cuobjdump (the CUDA toolkit, or the test extra's wheels)")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """{stem: (ptxas report, object)} of the two kernel files these guards read, compiled once."""
    return {stem: (report, obj) for stem, report, obj in
            sass_report.compile_files(NVCC, ["gemv_mma", "sdpa_mma"], tmp_path_factory.mktemp("sass"))}


@pytest.fixture(scope="module")
def gemv_mma_loops(compiled):
    report, obj = compiled["gemv_mma"]
    return {name: sass_report.loops(CUOBJDUMP, obj, r["mangled"])
            for name, r in sass_report.resources(report).items()}


def opcode_counts(loop_line):
    """{"LDG": 16, ...} from a sass_report loop line ("170 instructions, 4 loads ...: IMAD 47, LDG 16, ...")."""
    return {op: int(n) for op, n in re.findall(r"([A-Z][A-Z0-9]*) (\d+)", loop_line.split(": ", 1)[1])}


@pytest.mark.parametrize("form, groups, tiles", [("r8", 1, 1), ("r8_c2", 1, 2), ("r16", 2, 1), ("r16_u2", 2, 1)])
@pytest.mark.parametrize("dtype", ["f16", "bf16", "f16_tiled", "bf16_tiled"])
def test_first_block_loads_ahead_of_the_matrix_units(gemv_mma_loops, form, groups, tiles, dtype):
    # The vector loop, told from the element-wise tail by its mix: GEMV_MMA_IN_FLIGHT / tiles blocks of 2 weight
    # loads per output tile and one x load per group of 8 rows, 16 bytes each, and two HMMAs per block, output tile
    # and group.
    in_flight = 4 // tiles
    first_block = 2 * tiles + groups
    want = {"LDG": in_flight * first_block, "HMMA": in_flight * 2 * tiles * groups}
    loops = gemv_mma_loops[f"gemv_nk_mma_{form}_{dtype}"]
    vector_loops = [line for line in loops if want.items() <= opcode_counts(line).items()]
    assert len(vector_loops) == 1, f"expected one loop with {want} among {loops}"
    ahead = re.search(r"(\d+) loads before the first HMMA", vector_loops[0])
    assert ahead, vector_loops[0]
    assert int(ahead.group(1)) >= first_block, vector_loops[0]


@pytest.fixture(scope="module")
def sdpa_mma_stores(compiled):
    report, obj = compiled["sdpa_mma"]
    return {name: [op for op in sass_report.opcodes(sass_report.sass(CUOBJDUMP, obj, r["mangled"]))
                   if op.startswith("STG")]
            for name, r in sass_report.resources(report).items()}


# Per lane: its merged dims of its two queries, two stores per query (float4 at D = 128, float2 at 64), and one float2
# (m, l) per query from one lane of the quad; or, with one chunk, the same dims' output, two stores per query (4
# elements of 16 bits at D = 128: 8 bytes; 2 at 64: 4 bytes).
@pytest.mark.parametrize("head_dim, expected", [(128, {"STG.E.128": 4, "STG.E.64": 2 + 4}),
                                                (64, {"STG.E.64": 6, "STG.E": 4})])
@pytest.mark.parametrize("variant", ["f16", "bf16", "unaligned_f16", "unaligned_bf16"])
def test_sdpa_mma_stores_partials_whole(sdpa_mma_stores, head_dim, expected, variant):
    stores = sdpa_mma_stores[f"sdpa_mma_d{head_dim}_{variant}"]
    assert {op: stores.count(op) for op in set(stores)} == expected, stores


@pytest.mark.parametrize("stem", ["gemv_mma", "sdpa_mma"])
def test_matrix_unit_kernels_keep_everything_in_registers(compiled, stem):
    """No stack frame, no spills. sdpa_mma runs at 248 of the 255 registers nvcc may give it (255 with element
    loads): one more live array (the next step's K, loaded early) spilled 360-520 bytes and cost 7-38% on an H200,
    and a second tile's accumulators 292 bytes, 30-38% (docs/decisions.md, "sdpa: loads, stores and prefetches",
    "sdpa: the second query tile")."""
    kernels = sass_report.resources(compiled[stem][0])
    assert kernels, f"no kernel in {stem}'s ptxas report"
    heavy = {name: r for name, r in kernels.items() if r["stack"] or r["spill_st"] or r["spill_ld"]}
    assert not heavy, heavy
