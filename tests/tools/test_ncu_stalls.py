"""benchmarks/profiling/ncu_stalls.py on a small source page in Nsight Compute's CSV layout (ncu itself needs a
GPU): the shares it prints, and a clear failure on a file without the stall column."""
import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "profiling" / "ncu_stalls.py"

PAGE = '''==PROF== Connected to process 1 (python3)
"Kernel Name","cu_kernels::entry::demo(cu::LaunchArgs)",
"Address","Source","Warp Stall Sampling (All Samples)","stall_long_sb","stall_long_sb (Not Issued)","stall_wait"
"0x10","LDG.E.128 R4, desc[UR6][R2.64]","10","0","0","10"
"0x20","HMMA.16816.F32.BF16 R8, R4, R6, R8","60","55","40","5"
"0x30","EXIT","30","0","0","30"
'''


def run(path, *args):
    return subprocess.run([sys.executable, str(SCRIPT), str(path), *args], capture_output=True, text=True)


def test_shares_by_reason_and_instruction(tmp_path):
    page = tmp_path / "stalls.csv"
    page.write_text(PAGE)
    out = run(page, "--top", "2")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "100 samples; by reason: long_sb 55.0%, wait 45.0%"
    rows = [line for line in lines if line.startswith("| ") and "%" in line]
    assert rows == ["| 60.0% | 0x20 | `HMMA.16816.F32.BF16 R8, R4, R6, R8` | long_sb 55, wait 5 |",
                    "| 30.0% | 0x30 | `EXIT` | wait 30 |"]


def test_a_file_without_the_source_page_is_refused(tmp_path):
    page = tmp_path / "details.txt"
    page.write_text("  Duration   us   17.38\n")
    out = run(page)
    assert out.returncode != 0
    assert "no 'Warp Stall Sampling (All Samples)' column" in out.stderr
