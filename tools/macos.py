"""What setup.py does differently on macOS, kept apart so that Linux tests can run every branch of it.

- The deployment target: macOS 14, the first release with MSL 3.1, which the kernels' bfloat needs.
- A universal2 Python (python.org's installers) would build both architectures; only the one the Python runs as is
  built, since the other could never load here. An Intel Mac builds too, but its GPU is no Apple7 GPU: mtlinv runs
  on the CPU emulator there, and says so.
- The offline kernel compile (`xcrun metal`) is optional: Command Line Tools have no Metal compiler, and Xcode 26
  ships it as a separate download, so `xcrun --find metal` may succeed while `metal` fails. Any failure leaves the
  runtime to compile the embedded source at first use.
"""
import os
import subprocess

# MSL 3.1's floor; CMakeLists.txt's CMAKE_OSX_DEPLOYMENT_TARGET default says the same (tests/compile/test_macos_build.py).
DEPLOYMENT_TARGET = "14.0"
# What the Metal backend compiles the kernels as, offline and at run time (objc/metal_backend.mm): fast math off,
# so the compiler may not reassociate or contract (design.md §2, rule 4).
METAL_FLAGS = ["-std=metal3.1", "-fno-fast-math"]


def metal_flags() -> list[str]:
    return [*METAL_FLAGS, f"-mmacosx-version-min={DEPLOYMENT_TARGET}"]


def configure(env: dict, platform_tag: str, machine: str) -> list[str]:
    """Sets the build's macOS environment in `env` (os.environ in setup.py): the deployment target unless the user
    chose one, and one architecture for a universal2 Python unless ARCHFLAGS says otherwise. `platform_tag` is
    sysconfig.get_platform() (e.g. 'macosx-10.9-universal2'), `machine` platform.machine(). Returns notes for the
    build log."""
    notes = []
    env.setdefault("MACOSX_DEPLOYMENT_TARGET", DEPLOYMENT_TARGET)
    if platform_tag.endswith("-universal2") and "ARCHFLAGS" not in env:
        arch = "arm64" if machine == "arm64" else "x86_64"
        env["ARCHFLAGS"] = f"-arch {arch}"
        notes.append(f"mtlinv: universal2 Python; building for {arch} only (ARCHFLAGS='-arch {arch}')")
    if machine != "arm64":
        notes.append("mtlinv: building for x86_64. On an Intel Mac mtlinv runs on its CPU emulator: its Metal kernels "
                     "need an Apple-silicon GPU (M1 or later)")
    return notes


def build_metallib(msl: str, air: str, metallib: str, run=subprocess.run) -> tuple[bool, str]:
    """Compiles the flattened kernel source `msl` into `metallib` with Apple's offline compiler. Returns (True, '')
    or, on any failure, (False, why): the caller then leaves the kernels to be compiled at first use. Never raises
    for a missing or broken toolchain. `run` is subprocess.run (replaced in tests)."""
    if os.path.exists(metallib):
        os.remove(metallib)  # a failure below must not leave an older build's kernels to be found
    steps = [
        ["xcrun", "-sdk", "macosx", "metal", *metal_flags(), "-c", msl, "-o", air],
        ["xcrun", "-sdk", "macosx", "metallib", air, "-o", metallib],
    ]
    for step in steps:
        try:
            done = run(step, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        except OSError as e:
            return False, f"{step[3]}: {e}"
        if done.returncode != 0:
            words = (done.stdout or "").strip().splitlines()[-5:]
            return False, f"`{' '.join(step[:4])}` failed (exit {done.returncode}): " + " / ".join(words)
    if not os.path.exists(metallib):
        return False, f"`xcrun metallib` wrote no {metallib}"
    return True, ""


if __name__ == "__main__":
    # `python tools/macos.py`: the offline compiler's flags, for the macOS workflow's own kernel compile.
    print(" ".join(metal_flags()))
