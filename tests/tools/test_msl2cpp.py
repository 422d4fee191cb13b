"""tools/msl2cpp.py's reading of kernel signatures: a buffer slot is a number or the name of one (an enumerator of
the family's slot enum in metal/*_args.h), emitted as written for the C++ compiler to resolve; anything else is
refused with the kernel, the parameter and what was written. (That every real kernel translates and builds is the
emulator build's and tests/runtime/test_kernel_table.py's part.)"""
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tools"))
import msl2cpp  # noqa: E402

KERNEL = """template <typename T>
[[kernel]] void copy(
    constant CopyArgs& args [[buffer(COPY_SLOT_ARGS)]],
    device const T* x [[buffer( 1 )]],
    device T* y [[buffer(COPY_SLOT_Y)]],
    uint i [[thread_position_in_grid]]) {
  y[i] = x[i];
}
"""


@pytest.mark.parametrize("target", ["emu", "cuda"])
def test_a_slot_name_and_a_number_are_emitted_as_written(target):
    out = msl2cpp.translate(KERNEL, "k.metal", target)
    ns = msl2cpp.TARGETS[target]["ns"]
    assert f"{ns}::bind_constant<CopyArgs>(__ctx, COPY_SLOT_ARGS);" in out
    assert f'{ns}::bind_device<const T>(__ctx, 1, "x");' in out
    assert f'{ns}::bind_device<T>(__ctx, COPY_SLOT_Y, "y");' in out
    assert "[[buffer" not in out


def test_signatures_give_each_slot_as_written():
    [(name, params)] = msl2cpp.kernel_signatures(KERNEL, "k.metal")
    assert name == "copy"
    assert [(n, attr, slot) for _, n, attr, slot in params] == [
        ("args", "buffer", "COPY_SLOT_ARGS"), ("x", "buffer", "1"), ("y", "buffer", "COPY_SLOT_Y"),
        ("i", "thread_position_in_grid", None)]


@pytest.mark.parametrize("written", ["buffer(COPY_SLOT_Y + 1)", "buffer(Slots::Y)", "buffer(-1)", "buffer()",
                                     "buffer(slot(1))", "buffer"])
def test_a_slot_that_is_not_a_number_or_a_name_is_refused(written):
    text = KERNEL.replace("buffer(COPY_SLOT_Y)", written)
    with pytest.raises(msl2cpp.PrepassError) as e:
        msl2cpp.translate(text, "k.metal", "emu")
    assert str(e.value).startswith("k.metal:2: kernel copy: ")
    assert f"[[{written}]] on 'y': a slot is a number or the name of one" in str(e.value)


def test_an_index_on_another_attribute_is_refused():
    text = KERNEL.replace("[[thread_position_in_grid]]", "[[thread_position_in_grid(COPY_SLOT_Y)]]")
    with pytest.raises(msl2cpp.PrepassError, match=r"\[\[thread_position_in_grid\]\] on 'i' takes no index"):
        msl2cpp.translate(text, "k.metal", "cuda")


def test_the_command_line_reports_a_refused_slot(tmp_path, capsys):
    src = tmp_path / "k.metal"
    src.write_text(KERNEL.replace("buffer(COPY_SLOT_Y)", "buffer(2 * COPY_SLOT_X)"))
    assert msl2cpp.main(["--target", "emu", "--out", str(tmp_path / "out"), str(src)]) == 1
    assert "msl2cpp: k.metal:2: kernel copy: [[buffer(2 * COPY_SLOT_X)]] on 'y'" in capsys.readouterr().err
    assert not (tmp_path / "out" / "k.cpp").exists()


def test_cuda_marks_functions_and_not_static_asserts():
    """nvcc compiles unannotated functions for the host alone, so the CUDA pass marks every function `__device__`;
    a static_assert, at namespace or class scope, ends in a parenthesis as a declaration does and must stay as
    written (marked, nvcc refuses it)."""
    text = """static_assert(sizeof(float) == 4, "float32");
inline float twice(float v) { return 2.0f * v; }
template <uint BITS>
struct Codes {
  static_assert(BITS <= 7, "below the exponent");
  static uint mask() { return (1u << BITS) - 1u; }
};
"""
    out = msl2cpp.translate(text, "k.metal", "cuda")
    assert "__device__ inline float twice(float v)" in out
    assert "__device__ static uint mask()" in out
    assert out.count("__device__") == 2, out
    assert out.count("static_assert(") == 2
