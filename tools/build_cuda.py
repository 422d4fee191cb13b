"""Builds the CUDA part of mtlinv's extension (called from setup.py when MTLINV_CUDA=1).

Runs the MSL pre-pass for the CUDA target (tools/msl2cpp.py --target cuda: build/gen/cuda/*.cu), compiles those
kernels and src/cuda/*.cu with nvcc into objects, and returns what the extension needs to link them. An object is
rebuilt only when its flags or inputs changed (a content key beside it); independent files compile in parallel.

Code generation: sm_90 machine code (H100/H200) plus compute_90 PTX, which the driver compiles for later GPUs.
MTLINV_CUDA_ARCH=80 (say) builds for another architecture instead. Always IEEE arithmetic: --fmad=false (no
contraction of a * b + c, design.md §2 rule 4), precise division and square root, no flush to zero.
"""
from __future__ import annotations

import hashlib
import os
import pathlib
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor


def find_nvcc() -> str | None:
    for var in ("CUDA_HOME", "CUDA_PATH"):
        home = os.environ.get(var)
        if home and (pathlib.Path(home) / "bin" / "nvcc").exists():
            return str(pathlib.Path(home) / "bin" / "nvcc")
    return shutil.which("nvcc")


def cuda_library_dirs(nvcc: str) -> list[str]:
    """The runtime library folders nvcc itself links against (its dry run names them), stubs excluded."""
    out = subprocess.run([nvcc, "--dryrun", "-x", "cu", "-c", os.devnull, "-o", os.devnull],
                         capture_output=True, text=True).stderr
    m = re.search(r"^#\$ LIBRARIES=(.*)$", out, re.M)
    dirs = re.findall(r'"-L([^"]+)"', m.group(1)) if m else []
    return [str(pathlib.Path(d).resolve()) for d in dirs if not d.rstrip("/").endswith("stubs")]


def cuda_arch() -> str:
    """The GPU generation built for: MTLINV_CUDA_ARCH, else 90 (sm_90, the H200)."""
    return os.environ.get("MTLINV_CUDA_ARCH", "90")


def nvcc_flags(debug: bool) -> list[str]:
    arch = cuda_arch()
    flags = ["-std=c++17", f"-arch=sm_{arch}", "-gencode", f"arch=compute_{arch},code=compute_{arch}",
             "--fmad=false", "--prec-div=true", "--prec-sqrt=true", "--ftz=false",
             "-lineinfo",  # source lines (the .metal files, through #line) in compute-sanitizer reports
             "-Xcompiler", "-fPIC", "-Xcompiler", "-Wall", "-Xcompiler", "-Wno-unknown-pragmas"]
    return flags + (["-O1", "-g"] if debug else ["-O3"])


def _key(flags: list[str], inputs: list[pathlib.Path]) -> str:
    """What an object is built from: the flags and the contents of its source and of every header. Contents, not
    times, so that objects carried to another machine (or a fresh checkout) are reused exactly when valid."""
    h = hashlib.sha256("\0".join(flags).encode())
    for p in inputs:
        h.update(p.read_bytes())
    return h.hexdigest()


def build(root: pathlib.Path, gen: pathlib.Path, debug: bool = False) -> dict:
    """Compiles everything and returns the extension's additions: extra_objects, libraries, library_dirs and
    define_macros (MTLINV_WITH_CUDA: a build with the CUDA backend, which registers itself with the core)."""
    nvcc = find_nvcc()
    if nvcc is None:
        raise SystemExit("MTLINV_CUDA=1 but nvcc was not found: put it on PATH or set CUDA_HOME")
    cuda_src = root / "src" / "cuda"
    metal = sorted((root / "metal").glob("*.metal")) + sorted((root / "metal").glob("*.h"))
    subprocess.check_call([sys.executable, str(root / "tools" / "msl2cpp.py"), "--target", "cuda", "--out", str(gen)]
                          + [str(p) for p in metal])

    # Every header any unit may include; a change to one rebuilds all units (there are few). src/shim holds the
    # target-independent half of the shim, which the CUDA shim includes.
    headers = [p for p in cuda_src.rglob("*") if p.suffix in (".h", ".cuh")]
    headers += sorted((root / "src" / "shim").glob("*.h"))
    headers += sorted(gen.glob("*.h")) + sorted((root / "src" / "core").glob("*.h"))
    units = sorted(gen.glob("*.cu")) + sorted(cuda_src.glob("*.cu"))
    obj_dir = gen.parent / "cuda-obj"
    obj_dir.mkdir(parents=True, exist_ok=True)
    flags = nvcc_flags(debug)

    stems = [u.stem for u in units]
    if len(set(stems)) != len(stems):
        raise SystemExit(f"build_cuda: two CUDA units share a name: {sorted(stems)}")

    def compile_unit(src: pathlib.Path) -> pathlib.Path:
        obj = obj_dir / f"{src.stem}.o"
        stamp = obj.with_suffix(".key")
        key = _key(flags, [src] + headers)
        if not obj.exists() or not stamp.exists() or stamp.read_text() != key:
            cmd = [nvcc] + flags + ["-I", str(cuda_src), "-c", str(src), "-o", str(obj)]
            print(" ".join(cmd), flush=True)
            subprocess.check_call(cmd)
            stamp.write_text(key)
        return obj

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        objects = list(pool.map(compile_unit, units))
    print(f"build_cuda: kernels from {', '.join(p.name for p in sorted(gen.glob('*.cu')))}", flush=True)
    return {
        "extra_objects": [str(o) for o in objects],
        # The static runtime: the extension then needs only the driver (libcuda.so) at run time, found by the
        # runtime itself, so it imports (and falls back to the emulator) on machines without one.
        "libraries": ["cudart_static", "dl", "rt", "pthread"],
        "library_dirs": cuda_library_dirs(nvcc),
        "define_macros": [("MTLINV_WITH_CUDA", "1")],
    }
