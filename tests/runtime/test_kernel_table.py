"""One name per kernel: the kernel table generated from the MTLINV_KERNEL(...) lines of metal/*.metal
(tools/kernel_table.py) is what the plans pick from, by family and template arguments, and what every target
builds.

- Every plan's kernel, over every dtype, form (tiled or row weights, float32 scales, aligned or not), limit, row
  count and device kind (the emulator's plans and the GPU plans), is in the emulator's registry, in the CUDA
  translation (tools/msl2cpp.py --target cuda, whose MTLINV_KERNEL lines register the CUDA kernels) and in the
  Metal source the Metal backend embeds (tools/embed_metal.py).
- The plans reach every kernel of the table: no kernel is dead.
- A plan asking for an instantiation metal/ lacks fails: at compile time where the arguments are constants, with a
  KernelError naming the family and arguments otherwise; the generator refuses what it cannot encode.
"""
import itertools
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

import mtlinv
from mtlinv import _native

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import embed_metal  # noqa: E402
import kernel_table  # noqa: E402

DTYPES = ["float32", "float16", "bfloat16"]
SIXTEEN = ["float16", "bfloat16"]
REGISTRATION = re.compile(r"^MTLINV_KERNEL\((\w+),", re.M)


def _kernels(plan):
    return {launch["kernel"] for launch in plan["launches"]}


def _gemv_kernels(matrix_units):
    found = set()
    # Rows: each row tile (1, 2, 4, 8, and 16 / 32 above the limit's reach), N: 16 up to sizes whose split counts
    # take the wide forms (_c2, _u2) on a GPU of 128 cores, K: one block to many.
    for rows, k, n, dtype, limit, transpose in itertools.product(
            [1, 2, 3, 4, 5, 8, 9, 16, 17, 32, 33, 40], [64, 4096, 14336], [16, 4096, 8192, 14336], DTYPES,
            [0, 8, 16, 64], [True, False]):
        found |= _kernels(_native.plan_gemv(rows=rows, k=k, n=n, dtype=dtype, limit=limit, transpose=transpose))
        if matrix_units and transpose and dtype in SIXTEEN:  # the tile layout: matrix-unit kernels only
            found |= _kernels(_native.plan_gemv(rows=rows, k=k, n=n, dtype=dtype, limit=limit, tiled=True))
    return found


def _qgemv_kernels(matrix_units):
    found = set()
    for rows, k, n, bits, dtype, limit in itertools.product(
            [1, 2, 3, 4, 5, 8, 9, 16, 17, 33, 40], [256, 4096], [16, 4096], [2, 3, 4, 5, 6, 8], DTYPES, [0, 8, 64]):
        scales = [None] + (["float32"] if dtype in SIXTEEN and bits in (4, 8) else [])
        for scale_dtype, group_size in itertools.product(scales, [64] + ([16] if bits == 8 else [])):
            args = dict(rows=rows, k=k, n=n, bits=bits, dtype=dtype, scale_dtype=scale_dtype, limit=limit,
                        group_size=group_size)
            found |= _kernels(_native.plan_qgemv(**args))
            if matrix_units and dtype in SIXTEEN and bits in (4, 8):
                found |= _kernels(_native.plan_qgemv(**args, tiled=True))
    return found


def _sdpa_kernels():
    found = set()
    for q_len, kv_len, head_dim, heads, dtype, limit, aligned in itertools.product(
            [1, 2, 5, 8, 33], [1, 100, 4096, 70000], [64, 80, 96, 128, 256], [(32, 8), (4, 4), (1, 1)], DTYPES,
            [0, 8], [True, False]):
        if q_len <= kv_len:
            found |= _kernels(_native.plan_sdpa(q_len=q_len, kv_len=kv_len, head_dim=head_dim, q_heads=heads[0],
                                                kv_heads=heads[1], dtype=dtype, limit=limit, aligned=aligned))
    return found


def _small_op_kernels():
    found = set()
    for dtype in DTYPES:
        for residual in (False, True):
            found |= _kernels(_native.plan_rms_norm(rows=3, cols=4096, dtype=dtype, residual=residual))
        for plan in _native.plan_decoder_ops(dtype=dtype).values():
            found |= _kernels(plan)
    return found


@pytest.fixture(scope="module")
def planned():
    """Every kernel any plan picks: with the emulator's plans, and with the GPU plans (K splits, wide threadgroups)
    of a GPU with matrix units (CUDA) and of one without (Metal)."""
    if mtlinv.device_info()["backend"] != "emu":
        pytest.skip("enumerates the GPU plans through the emulator's switch (_set_emu_gpu_plans)")
    found = set()
    for gpu, matrix_units in ((False, False), (True, True), (True, False)):
        _native._set_emu_gpu_plans(gpu, matrix_units)
        try:
            found |= _gemv_kernels(matrix_units) | _qgemv_kernels(matrix_units) | _sdpa_kernels() | _small_op_kernels()
        finally:
            _native._set_emu_gpu_plans(False)
    return found


def test_the_table_is_the_mtlinv_kernel_lines():
    table = _native.kernel_table()
    assert len(table) == len(set(table)) > 250
    assert sorted(table) == sorted(embed_metal.kernel_names())


def test_every_planned_kernel_is_in_the_table_and_every_kernel_is_planned(planned):
    table = set(_native.kernel_table())
    assert planned <= table
    assert table - planned == set(), "kernels no plan picks (dead, or a plan lost its path to them)"


def test_every_planned_kernel_is_in_the_emulator_registry(planned):
    registered = set(mtlinv.kernel_names())
    assert planned <= registered, sorted(planned - registered)


def test_every_planned_kernel_is_in_the_cuda_registry_source(planned, tmp_path):
    metal = sorted((ROOT / "metal").glob("*.metal")) + sorted((ROOT / "metal").glob("*.h"))
    subprocess.run([sys.executable, str(ROOT / "tools" / "msl2cpp.py"), "--target", "cuda", "--out", str(tmp_path)]
                   + [str(p) for p in metal], check=True)
    registered = set()
    for unit in tmp_path.glob("*.cu"):
        registered |= set(REGISTRATION.findall(unit.read_text()))
    assert len(registered) == len(_native.kernel_table())
    assert planned <= registered, sorted(planned - registered)


def test_every_planned_kernel_is_in_the_metal_source(planned):
    embedded = set()
    for _, names, source in embed_metal.units():
        in_source = set(REGISTRATION.findall(source))
        assert set(names) == in_source  # the names the backend indexes are the source's instantiations
        embedded |= in_source
    assert planned <= embedded, sorted(planned - embedded)


def test_plan_introspection_names_the_kernels_it_picks():
    # A control on the enumeration above: the lookup by family and arguments lands on the instantiation its
    # MTLINV_KERNEL line names. The names are the emulator's plans (a GPU's pick its matrix-unit kernels).
    if mtlinv.device_info()["backend"] != "emu":
        pytest.skip("the expected kernels are the emulator's plans")
    plan = _native.plan_gemv(rows=3, k=64, n=16, dtype="float16", limit=8, transpose=False)
    assert _kernels(plan) == {"gemv_kn_r4_f16"}
    plan = _native.plan_qgemv(rows=1, k=256, n=16, bits=4, dtype="bfloat16", scale_dtype="float32", limit=8)
    assert _kernels(plan) == {"qgemv_b4_r2_bf16_sf32"}  # the emulator's plans take the 2-row tile for one row
    plan = _native.plan_sdpa(q_len=1, kv_len=300, head_dim=80, dtype="float32", aligned=False, limit=8)
    assert _kernels(plan) == {"sdpa_blocks_q4_unaligned_f32", "sdpa_combine_f32"}


# --- what fails ------------------------------------------------------------------------------------------------


def _write_kernels(folder, lines):
    folder.mkdir()
    (folder / "k.metal").write_text("\n".join(lines) + "\n")
    return folder


def test_generator_refuses_a_family_with_two_arities(tmp_path):
    metal = _write_kernels(tmp_path / "metal", ["MTLINV_KERNEL(f_a, f, float, 1)", "MTLINV_KERNEL(f_b, f, float)"])
    with pytest.raises(kernel_table.TableError, match=r"f_b gives f 1 template arguments.*write every argument out"):
        kernel_table.entries(metal)


def test_generator_refuses_an_argument_it_cannot_encode(tmp_path):
    metal = _write_kernels(tmp_path / "metal", ["MTLINV_KERNEL(f_a, f, float4, 1)"])
    with pytest.raises(kernel_table.TableError, match=r"k.metal:1: template argument 'float4'"):
        kernel_table.entries(metal)


def test_generator_refuses_a_split_line(tmp_path):
    metal = _write_kernels(tmp_path / "metal", ["MTLINV_KERNEL(f_a, f,", "  float, 1)"])
    with pytest.raises(embed_metal.EmbedError, match="on one line"):
        kernel_table.entries(metal)


LOOKUP = """
#include <cstdio>
#include "kernels.h"
#include "errors.h"
using namespace mtlinv;
int main() {
  constexpr KernelId present = kernel_id(KernelFamily::gemv_nk, DType::f16, 8);
  static_assert(kernel_index(present) < kernel_table::kCount, "an id of the table");
#ifdef MISSING_AT_COMPILE_TIME
  constexpr KernelId absent = kernel_id(KernelFamily::gemv_nk, DType::f16, 3);
  (void)absent;
#endif
  std::printf("%s\\n", kernel_name(present));
  volatile int rows = 3;  // not a constant: the lookup runs, and throws
  try {
    kernel_id(KernelFamily::gemv_nk, DType::f16, static_cast<int>(rows));
  } catch (const KernelError& e) {
    std::printf("%s\\n", e.what());
    return 0;
  }
  return 1;
}
"""


@pytest.fixture(scope="module")
def lookup_build(tmp_path_factory):
    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no C++ compiler on PATH")
    work = tmp_path_factory.mktemp("lookup")
    kernel_table.write(work / "kernel_table.h")
    (work / "lookup.cpp").write_text(LOOKUP)

    def build(*flags):
        cmd = [cxx, "-std=c++17", "-O0", f"-I{work}", f"-I{ROOT / 'src' / 'core'}", *flags, str(work / "lookup.cpp"),
               str(ROOT / "src" / "core" / "kernels.cpp"), "-o", str(work / "lookup")]
        return subprocess.run(cmd, capture_output=True, text=True), work / "lookup"

    return build


def test_a_missing_kernel_fails_to_compile_with_constant_arguments(lookup_build):
    proc, _ = lookup_build("-DMISSING_AT_COMPILE_TIME")
    assert proc.returncode != 0
    # The constant evaluation reaches the lookup's failure (without the define the program compiles: below).
    assert "lookup.cpp:10" in proc.stderr and "missing" in proc.stderr, proc.stderr


def test_a_missing_kernel_is_a_clear_error_at_run_time(lookup_build):
    proc, exe = lookup_build()
    assert proc.returncode == 0, proc.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    name, message = run.stdout.splitlines()
    assert name == "gemv_nk_r8_f16"
    assert re.search(r"internal: a plan asked for gemv_nk<1, 3> .*no MTLINV_KERNEL line of metal/", message)
