"""tools/sass_report.py's parsing of ptxas's verbose report and of a SASS listing (these run without nvcc or
cuobjdump): resources per kernel host name, loops with their loads ahead of the first matrix instruction, opcodes
with their modifiers, and a cuobjdump that fails."""
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tools"))
import sass_report  # noqa: E402

PTXAS = """ptxas info    : Compiling entry function '_ZN10cu_kernels5entry20gemv_nk_mma_r16_bf16EN2cu10LaunchArgsE' for 'sm_90'
ptxas info    : Function properties for _ZN10cu_kernels5entry20gemv_nk_mma_r16_bf16EN2cu10LaunchArgsE
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 62 registers, used 1 barriers, 16384 bytes smem, 432 bytes cmem[0]
ptxas info    : Compiling entry function '_ZN10cu_kernels5entry12rms_norm_f32EN2cu10LaunchArgsE' for 'sm_90'
ptxas info    : Function properties for _ZN10cu_kernels5entry12rms_norm_f32EN2cu10LaunchArgsE
    16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 30 registers, used 1 barriers, 128 bytes smem, 432 bytes cmem[0]
"""

SASS = """        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   LDG.E.NA.128.CONSTANT R4, desc[UR6][R2.64] ;
        /*0020*/                   LDG.E.128 R8, desc[UR6][R6.64] ;
        /*0030*/                   HMMA.16816.F32.BF16 R12, R4, R8, R12 ;
        /*0040*/                   LDG.E.128 R8, desc[UR6][R6.64] ;
        /*0050*/               @P0 BRA `(.L_x_1) 0x10 ;
        /*0060*/                   EXIT ;
"""


def test_resources_by_kernel():
    kernels = sass_report.resources(PTXAS)
    assert kernels["gemv_nk_mma_r16_bf16"] == {
        "mangled": "_ZN10cu_kernels5entry20gemv_nk_mma_r16_bf16EN2cu10LaunchArgsE", "stack": 0, "spill_st": 0,
        "spill_ld": 0, "registers": 62, "smem": 16384}
    assert kernels["rms_norm_f32"]["registers"] == 30
    assert (kernels["rms_norm_f32"]["spill_st"], kernels["rms_norm_f32"]["spill_ld"]) == (8, 4)


def test_loop_span_and_loads_ahead():
    # The backward branch at 0x50 closes the loop that starts at 0x10: five instructions, two loads before the HMMA.
    assert sass_report.loop_lines(SASS) == [
        "5 instructions, 2 loads before the first HMMA: LDG 3, HMMA 1, BRA 1"]


def test_no_loop_without_a_backward_branch():
    assert sass_report.loop_lines(SASS.replace("0x10 ;", "0x60 ;")) == []


def test_opcodes_keep_modifiers_and_drop_predicates():
    listing = SASS + "        /*0070*/               @!P1 STG.E.128 desc[UR6][R2.64], R12 ;\n"
    assert sass_report.opcodes(listing) == ["MOV", "LDG.E.NA.128.CONSTANT", "LDG.E.128", "HMMA.16816.F32.BF16",
                                            "LDG.E.128", "BRA", "EXIT", "STG.E.128"]


def test_a_failing_cuobjdump_is_an_error(tmp_path):
    """cuobjdump without nvdisasm prints the listing's header and stops: no caller may read that as a kernel with
    no instructions."""
    fake = tmp_path / "cuobjdump"
    fake.write_text("#!/bin/sh\necho 'code for sm_90'\n"
                    "echo \"cuobjdump fatal   : Could not find executable file 'nvdisasm'\" >&2\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(RuntimeError, match="nvdisasm"):
        sass_report.sass(str(fake), tmp_path / "kernels.o", "_Z6kernelv")


def test_the_written_report_says_how_to_make_it_again():
    header = sass_report.report_header(["gemv_mma", "sdpa_mma"], "abc1234-dirty", "13.0", "90")
    assert header.startswith("# What nvcc makes of gemv_mma, sdpa_mma (sm_90), at abc1234-dirty\n")
    assert "`python tools/sass_report.py --files gemv_mma sdpa_mma --out <this file>`" in header
    assert "nvcc 13.0" in header
