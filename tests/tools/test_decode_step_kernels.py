"""benchmarks/profiling/decode_step_kernels.py's summary of an Nsight Compute raw page (ncu itself needs a GPU):
times, shares, DRAM bytes and bandwidth by kernel, from a page in ncu's CSV layout (a header, a units row)."""
import pathlib

BENCHMARKS = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"

PAGE = '''==PROF== Connected to process 1 (python3)
"ID","Kernel Name","dram__bytes_read.sum","dram__bytes_write.sum","gpu__time_duration.sum","sm__warps_active.avg.pct_of_peak_sustained_active"
"","","Mbyte","Kbyte","usecond","%"
"0","qgemv_mma_b4_r8_bf16_tiled(cu::LaunchArgs)","30.00","1,000.00","15.50","40"
"1","add_rms_norm_bf16(cu::LaunchArgs)","0.03","10.00","5.00","50"
"2","qgemv_mma_b4_r8_bf16_tiled(cu::LaunchArgs)","10.00","0.00","4.50","30"
'''


def test_summary_by_kernel(capsys, monkeypatch, load_script):
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # the script imports bench_decode_step from benchmarks/
    load_script("benchmarks/profiling/decode_step_kernels.py").summarize(PAGE)
    lines = capsys.readouterr().out.splitlines()
    # 25 us in all; 30 + 1 + 0.03 + 0.01 + 10 = 41.04 MB moved.
    assert lines[0] == "3 kernels, 25 us in all (each timed alone), 0.041 GB of DRAM traffic, 1.64 TB/s over their sum"
    qgemv = lines[2].split()
    # 2 launches, median of (4.5, 15.5) is the upper one, 20 us = 80%, 41 MB / 2 = 20.5 MB each, 41 MB / 20 us.
    assert qgemv == ["qgemv_mma_b4_r8_bf16_tiled", "2", "15.50", "20", "80.0%", "20.50", "2.05", "35%"]
    norm = lines[3].split()
    assert norm[:5] == ["add_rms_norm_bf16", "1", "5.00", "5", "20.0%"] and norm[-1] == "50%"
