"""One name per kernel: the kernel table generated from the MTLINV_KERNEL(...) lines of metal/*.metal
(tools/kernel_table.py) is what the plans pick from, by family and template arguments, and what every target
builds.

- Every plan's kernel, over every dtype, form (tiled or row weights, float32 scales, aligned or not), limit, row
  count and device kind (the emulator's plans and the GPU plans), is in the emulator's registry, in the CUDA
  translation (tools/msl2cpp.py --target cuda, whose MTLINV_KERNEL lines register the CUDA kernels) and in the
  Metal source the Metal backend embeds (tools/embed_metal.py).
- The plans reach every kernel of the table: no kernel is dead.
- Buffer slots: every kernel names its slots in the enum beside its argument struct (`XArgs`, `enum XSlot`,
  metal/shared.h), and every plan binds exactly the slots its kernel takes.
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
import msl2cpp  # noqa: E402

METAL = ROOT / "metal"
DTYPES = ["float32", "float16", "bfloat16"]
SIXTEEN = ["float16", "bfloat16"]


def _launches(plan):
    """{(kernel, the slots the plan binds)} of a plan's launches."""
    return {(launch["kernel"], tuple(sorted(launch["slots"]))) for launch in plan["launches"]}


def _kernels(plan):
    return {kernel for kernel, _ in _launches(plan)}


def _gemv_launches(matrix_units):
    found = set()
    # Rows: each row tile (1, 2, 4, 8, and 16 / 32 above the limit's reach), N: 16 up to sizes whose split counts
    # take the wide forms (_c2, _u2) on a GPU of 128 cores, K: one block to many.
    for rows, k, n, dtype, limit, transpose in itertools.product(
            [1, 2, 3, 4, 5, 8, 9, 16, 17, 32, 33, 40], [64, 4096, 14336], [16, 4096, 8192, 14336], DTYPES,
            [0, 8, 16, 64], [True, False]):
        found |= _launches(_native.plan_gemv(rows=rows, k=k, n=n, dtype=dtype, limit=limit, transpose=transpose))
        if matrix_units and transpose and dtype in SIXTEEN:  # the tile layout: matrix-unit kernels only
            found |= _launches(_native.plan_gemv(rows=rows, k=k, n=n, dtype=dtype, limit=limit, tiled=True))
    return found


def _tiled_launches(qgemv_args):
    """qgemv's launches with the weights in the tile layout, as plain calls and as a decoder's (constant weights)."""
    return set().union(*(_launches(_native.plan_qgemv(**qgemv_args, tiled=True, constant_weights=constant))
                         for constant in (False, True)))


def _qgemv_launches(matrix_units):
    found = set()
    for rows, k, n, bits, dtype, limit in itertools.product(
            [1, 2, 3, 4, 5, 8, 9, 16, 17, 33, 40], [256, 4096], [16, 4096], [2, 3, 4, 5, 6, 8], DTYPES, [0, 8, 64]):
        scales = [None] + (["float32"] if dtype in SIXTEEN and bits in (4, 8) else []) + (
            ["float16"] if dtype == "bfloat16" and bits in (4, 5, 8) else [])
        for scale_dtype, group_size in itertools.product(scales, [64] + ([16] if bits == 8 else [])):
            if scale_dtype == "float16" and group_size == 16:  # float16 scales are built at groups of 32 and up
                continue
            args = dict(rows=rows, k=k, n=n, bits=bits, dtype=dtype, scale_dtype=scale_dtype, limit=limit,
                        group_size=group_size)
            found |= _launches(_native.plan_qgemv(**args))
            if matrix_units and dtype in SIXTEEN and bits in (4, 8):
                found |= _tiled_launches(args)
        # The super-block form (int8 codes): Q4_K and Q5_K at group 32, Q6_K at 6 bits and group 16; both layouts.
        if (bits, k) in ((4, 4096), (5, 4096), (6, 4096)):
            args = dict(rows=rows, k=k, n=n, bits=bits, dtype=dtype, scale_dtype="int8", limit=limit,
                        group_size=16 if bits == 6 else 32)
            found |= _launches(_native.plan_qgemv(**args))
            if matrix_units and dtype in SIXTEEN:
                found |= _tiled_launches(args)
    return found


def _sdpa_launches():
    found = set()
    for q_len, kv_len, head_dim, heads, dtype, limit, aligned in itertools.product(
            [1, 2, 5, 8, 33], [1, 100, 4096, 70000], [64, 80, 96, 128, 256], [(32, 8), (4, 4), (1, 1)], DTYPES,
            [0, 8], [True, False]):
        if q_len <= kv_len:
            found |= _launches(_native.plan_sdpa(q_len=q_len, kv_len=kv_len, head_dim=head_dim, q_heads=heads[0],
                                                kv_heads=heads[1], dtype=dtype, limit=limit, aligned=aligned))
    return found


def _small_op_launches():
    found = set()
    for dtype in DTYPES:
        for residual in (False, True):
            found |= _launches(_native.plan_rms_norm(rows=3, cols=4096, dtype=dtype, residual=residual))
        for plan in _native.plan_decoder_ops(dtype=dtype).values():
            found |= _launches(plan)
    return found


@pytest.fixture(scope="module")
def planned_launches():
    """Every (kernel, slots bound) any plan launches: with the emulator's plans, and with the GPU plans (K splits,
    wide threadgroups) of a GPU with matrix units (CUDA) and of one without (Metal)."""
    if mtlinv.device_info()["backend"] != "emu":
        pytest.skip("enumerates the GPU plans through the emulator's switch (_set_emu_gpu_plans)")
    found = set()
    for gpu, matrix_units in ((False, False), (True, True), (True, False)):
        _native._set_emu_gpu_plans(gpu, matrix_units)
        try:
            found |= _gemv_launches(matrix_units) | _qgemv_launches(matrix_units)
            found |= _sdpa_launches() | _small_op_launches()
        finally:
            _native._set_emu_gpu_plans(False)
    return found


@pytest.fixture(scope="module")
def planned(planned_launches):
    """Every kernel any plan picks."""
    return {kernel for kernel, _ in planned_launches}


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
        registered |= set(embed_metal.registered_names(unit.read_text()))
    assert len(registered) == len(_native.kernel_table())
    assert planned <= registered, sorted(planned - registered)


def test_every_planned_kernel_is_in_the_metal_source(planned):
    embedded = set()
    for _, names, source in embed_metal.units():
        in_source = set(embed_metal.registered_names(source))
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


# --- buffer slots ----------------------------------------------------------------------------------------------

SLOT_ENUM = re.compile(r"\benum\s+(\w+)Slot\s*:\s*uint32_t\s*\{(.*?)\};", re.S)


def slot_enums(metal_dir):
    """({family: {slot name: number}} from each `enum XSlot : uint32_t {...}` of metal/*.h (X the family, as in its
    argument struct XArgs), [problems]): every slot numbered explicitly, X_SLOT_ARGS = 0 first, no number twice."""
    enums, problems = {}, []
    for header in sorted(metal_dir.glob("*.h")):
        for m in SLOT_ENUM.finditer(header.read_text()):
            family, slots = m.group(1), {}
            for item in filter(None, (i.strip() for i in re.sub(r"//[^\n]*", "", m.group(2)).split(","))):
                name, _, number = (s.strip() for s in item.partition("="))
                if not number.isdigit():
                    problems.append(f"{header.name}: {family}Slot: {item!r} gives no number")
                slots[name] = int(number) if number.isdigit() else None
            if list(slots.values())[:1] != [0] or not next(iter(slots)).endswith("_SLOT_ARGS"):
                problems.append(f"{header.name}: {family}Slot does not start with its argument struct's slot, 0")
            if len(set(slots.values())) != len(slots):
                problems.append(f"{header.name}: two slots of {family}Slot share a number: {slots}")
            enums[family] = slots
    return enums, problems


def kernel_slots(metal_dir, enums):
    """({kernel template: the slot numbers it takes besides its argument struct's}, [problems]): a kernel takes
    `constant XArgs& args [[buffer(X_SLOT_ARGS)]]` first and names every other slot in the same enum XSlot."""
    taken, problems = {}, []
    for path in sorted(metal_dir.glob("*.metal")):
        for kernel, params in msl2cpp.kernel_signatures(path.read_text(), path.name):
            buffers = [(type_, name, slot) for type_, name, attr, slot in params if attr == "buffer"]
            args = re.fullmatch(r"constant\s+(\w+)Args\s*&", buffers[0][0]) if buffers else None
            if not args or args.group(1) not in enums:
                problems.append(f"{path.name}: {kernel} does not take an argument struct XArgs (enum XSlot) first")
                continue
            family, slots = args.group(1), enums[args.group(1)]
            for _, name, slot in buffers:
                if slot not in slots:
                    problems.append(f"{path.name}: {kernel}: {name} [[buffer({slot})]] is no slot of {family}Slot")
            numbers = [slots.get(slot) for _, _, slot in buffers]
            if numbers[0] != 0 or len(set(numbers)) != len(numbers):
                problems.append(f"{path.name}: {kernel} takes slots {numbers}: the struct's first, none twice")
            taken[kernel] = set(numbers[1:])
    return taken, problems


def unbound(launches, taken, template):
    """Launches whose plan binds other slots than its kernel takes (`template`: host name -> kernel template)."""
    return [f"{kernel}: bound {list(bound)}, takes {sorted(taken[template[kernel]])}"
            for kernel, bound in sorted(launches) if set(bound) != taken[template[kernel]]]


def test_every_kernel_names_its_familys_slots_and_every_plan_binds_them(planned_launches):
    enums, problems = slot_enums(METAL)
    taken, more = kernel_slots(METAL, enums)
    assert problems + more == []
    assert len(enums) >= 5 and len(taken) == len({r[3] for r in embed_metal.registrations()})
    template = {name: family for _, name, _, family, _ in embed_metal.registrations()}
    assert unbound(planned_launches, taken, template) == []


# --- what fails ------------------------------------------------------------------------------------------------


SLOTS_H = """enum CopySlot : uint32_t {
  COPY_SLOT_ARGS = 0,
  COPY_SLOT_X = 1,  // a comment
  COPY_SLOT_Y = 2,
};
enum PasteSlot : uint32_t { PASTE_SLOT_ARGS = 0, PASTE_SLOT_Y = 1 };
"""
COPY = """[[kernel]] void copy(constant CopyArgs& args [[buffer(COPY_SLOT_ARGS)]], device const float* x [[buffer(X)]],
                     device float* y [[buffer(COPY_SLOT_Y)]], uint i [[thread_position_in_grid]]) { y[i] = x[i]; }
"""


def _slot_problems(folder, header, kernel):
    folder.mkdir()
    (folder / "slots.h").write_text(header)
    (folder / "copy.metal").write_text(kernel)
    enums, problems = slot_enums(folder)
    taken, more = kernel_slots(folder, enums)
    return taken, problems + more


def test_slot_check_passes_a_kernel_of_its_familys_slots(tmp_path):
    taken, problems = _slot_problems(tmp_path / "metal", SLOTS_H, COPY.replace("buffer(X)", "buffer(COPY_SLOT_X)"))
    assert problems == [] and taken == {"copy": {1, 2}}
    assert unbound({("copy_f32", (1, 2))}, taken, {"copy_f32": "copy"}) == []


@pytest.mark.parametrize("slot, problem", [
    ("PASTE_SLOT_Y", r"copy: x \[\[buffer\(PASTE_SLOT_Y\)\]\] is no slot of CopySlot"),  # another family's
    ("1", r"copy: x \[\[buffer\(1\)\]\] is no slot of CopySlot"),  # a bare number
    ("COPY_SLOT_Y", r"copy takes slots \[0, 2, 2\]"),  # a slot twice
])
def test_slot_check_refuses_a_slot_outside_the_family_or_taken_twice(tmp_path, slot, problem):
    _, problems = _slot_problems(tmp_path / "metal", SLOTS_H, COPY.replace("buffer(X)", f"buffer({slot})"))
    assert len(problems) == 1 and re.search(problem, problems[0]), problems


def test_slot_check_refuses_an_enum_with_a_number_twice_or_missing(tmp_path):
    header = SLOTS_H.replace("COPY_SLOT_Y = 2", "COPY_SLOT_Y = 1").replace("PASTE_SLOT_Y = 1", "PASTE_SLOT_Y")
    _, problems = _slot_problems(tmp_path / "metal", header, COPY.replace("buffer(X)", "buffer(COPY_SLOT_X)"))
    assert any("two slots of CopySlot share a number" in p for p in problems), problems
    assert any("PasteSlot: 'PASTE_SLOT_Y' gives no number" in p for p in problems), problems


def test_slot_check_refuses_a_plan_that_binds_other_slots(tmp_path):
    taken, _ = _slot_problems(tmp_path / "metal", SLOTS_H, COPY.replace("buffer(X)", "buffer(COPY_SLOT_X)"))
    template = {"copy_f32": "copy"}
    assert unbound({("copy_f32", (2,))}, taken, template) == ["copy_f32: bound [2], takes [1, 2]"]
    assert unbound({("copy_f32", (1, 2, 3))}, taken, template) == ["copy_f32: bound [1, 2, 3], takes [1, 2]"]



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
