"""What nvcc makes of gemv_nk_mma's hot loop (sm_90 SASS), where nvcc and cuobjdump are installed (the GPU machine,
a developer's; not CI, where it skips): each loop iteration must issue all loads of its first block, the two weight
rows and the tile's R / 8 rows of x, before its first matrix instruction. When an unrelated change to the shared
epilogue (metal/mma_tile.h) let nvcc move the second x load behind the first HMMA, the 16-row tile lost 10-14% on an
H200 and only timing found it (benchmarks/results/h200.md)."""
import pathlib
import shutil
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tools"))
import build_cuda  # noqa: E402
import sass_report  # noqa: E402

NVCC = build_cuda.find_nvcc()
CUOBJDUMP = shutil.which("cuobjdump") or (
    str(pathlib.Path(NVCC).parent / "cuobjdump") if NVCC and (pathlib.Path(NVCC).parent / "cuobjdump").exists()
    else None)

pytestmark = pytest.mark.skipif(not (NVCC and CUOBJDUMP), reason="needs nvcc and cuobjdump (the CUDA toolkit)")


@pytest.fixture(scope="module")
def gemv_mma_loops(tmp_path_factory):
    [(_, report, obj)] = sass_report.compile_files(NVCC, ["gemv_mma"], tmp_path_factory.mktemp("sass"))
    return {name: sass_report.loops(CUOBJDUMP, obj, r["mangled"])
            for name, r in sass_report.resources(report).items()}


@pytest.mark.parametrize("rows", [8, 16])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_first_block_loads_ahead_of_the_matrix_units(gemv_mma_loops, rows, dtype):
    vector_loop = gemv_mma_loops[f"gemv_nk_mma_r{rows}_{dtype}"][0]  # the first loop: 16-byte loads, 4 blocks
    ahead = int(vector_loop.split(" loads before the first HMMA")[0].rsplit(" ", 1)[1])
    assert ahead >= 2 + rows // 8, vector_loop
