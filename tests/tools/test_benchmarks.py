"""The benchmark scripts: every one answers --help with its whole docstring (on any machine: torch, CuPy, MLX and a GPU
are imported or needed only past the arguments), a Python script that times takes --out for its record (not the
readers of records, goals.py and plot.py, nor the probes of profiling/), writes nothing unless given --out, and
bench_decode_step.py at a tiny shape on the active device writes its JSON (command, commit, device, spreads) and
Markdown, with row 0 of every step bit-equal to the 1-row step and speculative decoding equal to greedy, and, where
mlx-lm is installed (the test extra installs it on Linux and Apple silicon), mlx-lm's step beside it."""
import ast
import importlib.util
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
SCRIPTS = sorted(p for p in BENCHMARKS.rglob("*") if p.suffix in (".py", ".sh") and p.name not in
                 ("timing.py", "report.py", "gguf_weights.py"))  # the shared modules are imported, not run
# What times and takes --out DIR for its record (JSON and Markdown, benchmarks/report.py): every Python script but
# the readers of records (goals.py, plot.py) and the probes and Nsight Compute wrappers of profiling/, which print
# (step_ablation.py, there too, records). The shell scripts of cuda/ log under $OUT instead.
RECORDING = [p for p in SCRIPTS if p.suffix == ".py" and p.name not in ("goals.py", "plot.py") and
             (p.parent.name != "profiling" or p.stem == "step_ablation")]
# The worktree's own build first, wherever mtlinv is installed.
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))


def run(*args, **kwargs):
    return subprocess.run(list(args), capture_output=True, text=True, env=ENV, timeout=300, **kwargs)


def test_the_layout_is_by_purpose():
    """User benchmarks at the top, GPU-machine scripts, tuners and profiling tools in folders of their own."""
    names = {p.relative_to(BENCHMARKS).as_posix() for p in SCRIPTS}
    assert {"bench_decode_step.py", "cuda/bench_cuda.py", "cuda/cuda_check.sh", "tuning/tune_qgemv_cuda.py",
            "profiling/ncu_case.py"} <= names
    assert not [n for n in names if "/" not in n and ("cuda" in n or n.startswith(("tune_", "ncu_")))]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.relative_to(BENCHMARKS).as_posix())
def test_help(script, tmp_path):
    command = ["bash", str(script)] if script.suffix == ".sh" else [sys.executable, str(script)]
    proc = run(*command, "--help", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "usage" in proc.stdout.lower() or script.suffix == ".sh", proc.stdout
    assert len(proc.stdout.splitlines()) >= 2, proc.stdout
    assert not list(tmp_path.iterdir())  # --help writes nothing
    assert re.search(r"^  --out ", proc.stdout, re.M) or script not in RECORDING, proc.stdout  # the option, listed
    if script.suffix == ".py":  # the whole docstring, as written: its commands and notes, not a cut first line
        doc = ast.get_docstring(ast.parse(script.read_text()), clean=False)
        assert doc.strip() in proc.stdout, proc.stdout


TINY = ["--hidden", "128", "--ffn", "256", "--layers", "2", "--heads", "4", "--kv-heads", "2", "--head-dim", "64",
        "--vocab", "256", "--context", "40", "--reps", "2", "--tokens", "6", "--rows", "1", "3"]


def test_decode_step_writes_its_record(tmp_path):
    """Where mlx-lm is installed, with --mlx on: the same step in mlx-lm's llama (on a Mac the default; here MLX's
    CPU build) recorded beside mtlinv's, with its own weights' bytes for its floor."""
    mlx = importlib.util.find_spec("mlx_lm") is not None
    out = tmp_path / "out"
    proc = run(sys.executable, str(BENCHMARKS / "bench_decode_step.py"), *TINY, *(["--mlx", "on"] if mlx else []),
               "--out", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # nothing beside --out
    data = json.loads((out / "bench_decode_step.json").read_text())
    assert data["command"].startswith("python3 ") and "--context 40" in data["command"]
    assert data["device"]["backend"] and "commit" in data
    steps = [s for s in data["steps"] if s["impl"] == "mtlinv"]
    assert [s["rows"] for s in steps] == [1, 3]
    assert all(s["row0_bits_equal_1_row"] for s in steps)
    for s in steps:
        t = s["time"]
        assert t["runs"] == 2 and 0 < t["min"] <= t["median"] <= t["max"]
    assert data["decoding"]["identical"] and data["decoding"]["tokens"] == 6
    assert "| mtlinv.Decoder | 3 |" in (out / "bench_decode_step.md").read_text()
    if mlx:
        steps = [s for s in data["steps"] if s["impl"] == "mlx"]
        assert [s["rows"] for s in steps] == [1, 3]
        assert all(s["time"]["runs"] == 2 and s["time"]["median"] > 0 and s["floor_s"] > 0 for s in steps)
        # TINY's 2 layers of q|k|v, o, gate|up and down and the output projection at 4 bits, with a bfloat16 scale
        # and bias per 64 (4.5 bits a weight), and five bfloat16 norms of 128: the embedding left out.
        layer = (4 + 2 * 2) * 64 * 128 + 128 * 4 * 64 + 2 * 256 * 128 + 128 * 256
        assert data["mlx_weight_bytes"] == (2 * layer + 256 * 128) * 9 // 16 + 5 * 128 * 2
        assert data["mlx"]
        assert "| mlx-lm llama, 4-bit g64 bf16 scales | 3 |" in (out / "bench_decode_step.md").read_text()


@pytest.mark.parametrize("kind", ["Q4_K", "Q6_K", "Q8_0"])
def test_decode_step_with_gguf_weights(tmp_path, kind):
    """--gguf: every projection random blocks of a GGUF type, imported as mtlinv.model imports a file's (K-quants
    in the super-block form, Q8_0 at its float16 scales), its bytes counted as stored; the rows' bits checked as
    for the affine weights."""
    shape = ["--hidden", "256", "--ffn", "512", "--heads", "4", "--head-dim", "64"]
    out = tmp_path / "out"
    proc = run(sys.executable, str(BENCHMARKS / "bench_decode_step.py"), *TINY, *shape, "--tokens", "0", "--gguf",
               kind, "--mlx", "off", "--out", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads((out / "bench_decode_step.json").read_text())
    assert data["shape"]["gguf"] == kind and kind in data["shape_label"]
    assert all(s["row0_bits_equal_1_row"] for s in data["steps"] if s["impl"] == "mtlinv")
    # Stored bits a weight: Q4_K 4 + 8 / 32 + 8 / 32 + 64 / 256 (codes, int8 scale and bias codes, float32 d and b a
    # block), Q6_K 6 + 8 / 16 + 64 / 256 (one code array serves as scales and biases), Q8_0 8 + 16 / 32 + 16 / 32 (a
    # float16 scale and bias a block: the affine format's two arrays). Two layers of q|k|v [(4 + 2 * 2) * 64, 256],
    # o [256, 256], gate|up [2 * 512, 256] and down [256, 512], the output projection [256, 256]; five norms of 256.
    weights = 2 * (512 * 256 + 256 * 256 + 1024 * 256 + 256 * 512) + 256 * 256
    bits = {"Q4_K": 4.75, "Q6_K": 6.75, "Q8_0": 9}[kind]
    assert data["weight_bytes"] == weights * bits / 8 + 5 * 256 * 2


def test_decode_step_gguf_refuses_partial_blocks_and_scales(tmp_path):
    proc = run(sys.executable, str(BENCHMARKS / "bench_decode_step.py"), *TINY, "--gguf", "Q4_K", cwd=tmp_path)
    assert proc.returncode == 2
    assert "--gguf Q4_K" in proc.stderr and "256-element blocks" in proc.stderr and "'--hidden': 128" in proc.stderr
    proc = run(sys.executable, str(BENCHMARKS / "bench_decode_step.py"), *TINY, "--gguf", "Q8_0", "--scales",
               "bfloat16", cwd=tmp_path)
    assert proc.returncode == 2 and "--scales bfloat16: --gguf Q8_0 imports the type's own scales" in proc.stderr


def test_without_out_nothing_is_written(tmp_path):
    proc = run(sys.executable, str(BENCHMARKS / "bench_decode_step.py"), *TINY, "--tokens", "0", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "| mtlinv.Decoder | 1 |" in proc.stdout
    assert not list(tmp_path.iterdir())


def test_step_ablation_patch_compiles(tmp_path, load_script):
    """profiling/step_ablation.py drops kernels by patching a copy of the core's one dispatch path: the patch must
    still apply to that file, once, and the patched file compile (the tool itself builds the whole copy, minutes);
    a group naming no kernel is refused."""
    compiler = shutil.which("c++")
    if compiler is None:
        pytest.skip("no host C++ compiler")
    step_ablation = load_script("benchmarks/profiling/step_ablation.py")
    source = tmp_path / "grid_pieces.cpp"
    source.write_text(step_ablation.patched((ROOT / step_ablation.PATCHED_FILE).read_text()))
    assert "MTLINV_DROP_KERNELS" in source.read_text()
    proc = subprocess.run([compiler, "-std=c++17", "-fsyntax-only", "-Wall", "-Werror", "-iquote", "src/core",
                           "-Iinclude", "-Isrc/emu", "-Imetal", str(source)], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    with pytest.raises(SystemExit, match="no longer holds"):
        step_ablation.patched("void dispatch_in_pieces(Backend& backend, const Dispatch& d) {\n")
    step_ablation.check_groups(step_ablation.GROUPS)  # the default groups name kernels that exist
    with pytest.raises(SystemExit, match="'sdpa_mmq' begins no kernel's name"):
        step_ablation.check_groups(["qgemv_mma", "sdpa_mmq,sdpa_combine"])


def test_step_ablation_records_a_run_stopped_midway(tmp_path, monkeypatch, capsys, load_script):
    """A step that fails after others were timed (a device fault; a time limit's SIGTERM unwinds the same way)
    still leaves the groups timed before it in step_ablation.json and .md, marked as stopped, with each run's
    spread; an earlier run's record in the same folder is gone."""
    step_ablation = load_script("benchmarks/profiling/step_ablation.py")
    calls, fail_at = [], [3]

    def fake_step(tree, group, step_args, out, commit):
        calls.append(group)
        if len(calls) == fail_at[0]:
            raise step_ablation.Failed(f"the step without {group} failed")
        out.mkdir(parents=True, exist_ok=True)
        (out / "bench_decode_step.json").write_text(json.dumps(
            {"device": {"backend": "emu", "name": "test"}, "shape_label": "a test shape"}))
        ms = 2.0 if group == "" else 1.5
        return {1: {"min": ms - 0.1, "median": ms, "max": ms + 0.1}}

    monkeypatch.setattr(step_ablation, "copy_tree", lambda tree: None)
    monkeypatch.setattr(step_ablation, "build", lambda tree, logs: None)
    monkeypatch.setattr(step_ablation, "run_step", fake_step)
    args = type("Args", (), {"drop": ["qgemv_mma", "add_rms_norm"]})()
    with pytest.raises(step_ablation.Failed, match="without add_rms_norm"):
        step_ablation.measure(tmp_path / "work", args, [], tmp_path / "out")
    record = json.loads((tmp_path / "out" / "step_ablation.json").read_text())
    assert [r["drop"] for r in record["runs"]] == ["", "qgemv_mma"] and record["runs_planned"] == 4
    assert record["runs"][1]["ms"] == {"1": pytest.approx({"min": 1.4, "median": 1.5, "max": 1.6})}
    markdown = (tmp_path / "out" / "step_ablation.md").read_text()
    assert "stopped after 2 of 4 runs" in markdown and "| qgemv_mma | 1.50 | 0.50 |" in markdown
    assert "**stopped after 2 of 4 runs**\n| kernels dropped |" in capsys.readouterr().out
    calls.clear()
    fail_at[0] = 1  # nothing timed: no record, and not the earlier one either
    with pytest.raises(step_ablation.Failed):
        step_ablation.measure(tmp_path / "work", args, [], tmp_path / "out")
    assert not (tmp_path / "out" / "step_ablation.json").exists()


def test_plots_from_a_record(tmp_path):
    """benchmarks/plot.py draws the percent-of-copy plots from a GPU run's JSON (committed under results/)."""
    pytest.importorskip("matplotlib")
    record = BENCHMARKS / "results" / "h200" / "bench_cuda.json"
    proc = run(sys.executable, str(BENCHMARKS / "plot.py"), str(record), "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    pngs = sorted(p.name for p in tmp_path.iterdir())
    assert pngs == ["bench_cuda_gemv_vs_m.png", "bench_cuda_qgemv_vs_m.png", "bench_cuda_sdpa_vs_keys.png"]
    assert all((tmp_path / p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)


def test_gguf_formats_writes_its_record(tmp_path):
    """bench_gguf_formats.py at a tiny shape: each format as the device model runs it, the float32-scale import
    and the stand-in timed, with the bytes the device holds (docs/models.md's bits per weight: the super-block form's
    codes, int8 codes and factors; Q4_0's float16 scales; the float32 import's scales and biases per group of 32,
    Q6_K's per 16 at 8 bits)."""
    pytest.importorskip("gguf")
    out = tmp_path / "out"
    proc = run(sys.executable, str(BENCHMARKS / "bench_gguf_formats.py"), "--formats", "Q4_0", "Q4_K", "Q6_K",
               "--shapes", "256x32", "--m", "1", "2", "--reps", "2", "--out", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads((out / "bench_gguf_formats.json").read_text())
    rows = {(r["format"], r["m"]): r for r in data["formats"]}
    assert sorted(rows) == [(f, m) for f in ("Q4_0", "Q4_K", "Q6_K") for m in (1, 2)]
    bits = {f: 8 * rows[f, 1]["import_bytes"] / (256 * 32) for f in ("Q4_0", "Q4_K", "Q6_K")}
    # The K-quants in the super-block form, Q4_0 with its float16 scales; the float32-scale affine import beside.
    assert bits == {"Q4_0": 5.0, "Q4_K": 4.75, "Q6_K": 6.75}
    affine = {f: 8 * rows[f, 1]["affine_bytes"] / (256 * 32) for f in ("Q4_0", "Q4_K", "Q6_K")}
    assert affine == {"Q4_0": 6.0, "Q4_K": 6.0, "Q6_K": 12.0}
    assert [rows[f, 1]["import_form"] for f in ("Q4_0", "Q4_K")] == ["affine, float16 scales", "super-block"]
    assert all(r["affine"]["runs"] == 2 for r in rows.values())
    assert 8 * rows["Q6_K", 1]["file_bytes"] / (256 * 32) == 6.5625
    assert rows["Q6_K", 1]["stand_in"] == "6-bit g64" and 8 * rows["Q6_K", 1]["stand_in_bytes"] / (256 * 32) == 6.5
    assert all(r["import"]["runs"] == 2 and r["stand_in_time"]["median"] > 0 for r in rows.values())
    assert "| Q6_K | 256 x 32 | 2 |" in (out / "bench_gguf_formats.md").read_text()


@pytest.mark.parametrize("record", ["h200", "h100/latest"])
def test_goal_tables_are_the_records(record):
    """docs/results.md's goal table in the section of each recorded run is, whole, what benchmarks/goals.py makes of
    that run's committed records: a table edited by hand, records replaced without their table, or tables swapped
    between runs fail here."""
    folder = BENCHMARKS / "results" / record
    proc = run(sys.executable, str(BENCHMARKS / "goals.py"), str(folder / "bench_cuda.json"),
               str(folder / "bench_decode_step.json"), str(folder / "bf16_scales" / "bench_decode_step.json"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    table = proc.stdout[proc.stdout.index("| goal |"):]
    assert len(table.splitlines()) == 16, proc.stdout
    # Runs before bench_cuda.py timed 8-bit qgemv say so in the 8-bit rows; any other gap is a cut-off record.
    timed = {r["bits"] for r in json.loads((folder / "bench_cuda.json").read_text())["results"] if r["op"] == "qgemv"}
    gaps = [line for line in table.splitlines() if "not measured" in line]
    assert gaps == ([] if 8 in timed else [line for line in table.splitlines() if line.startswith("| qgemv 8-bit")])
    assert all("the run timed no 8-bit qgemv" in line for line in gaps), gaps
    doc = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    heading = f"### The latest run: every table and plot in `benchmarks/results/{record}/`"
    section = doc[doc.index(heading):]
    section = section[:section.find("\n#", len(heading))]
    assert table in section
