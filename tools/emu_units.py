"""The emulator's kernel translation units, as setup.py and CMakeLists.txt build them (CMake runs
`python tools/emu_units.py OUT_DIR [--fast-only]`, which writes the library's units and no test kernels).

Every kernel file of metal/ (and tests/kernels/, kernels with planted bugs that the emulator's checks must catch)
goes through the MSL pre-pass (tools/msl2cpp.py) into C++, and is compiled twice, as the fast and the
bounds-checked variant, in distinct namespaces.
"""
import pathlib
import subprocess
import sys


def generate(root: pathlib.Path, out: pathlib.Path, fast_checked: bool = False,
             test_kernels: bool = True, checked: bool = True) -> list[pathlib.Path]:
    """Runs the pre-pass into `out` and returns the units; `fast_checked` bounds-checks the fast variant too
    (MTLINV_DEBUG); `test_kernels` adds tests/kernels/ (the Python extension has them, the installed library not);
    `checked=False` leaves the checked variant out (MTLINV_SANITIZE: the sanitizers watch the fast one, which has no
    checks of its own; CMake's MTLINV_CHECKED_KERNELS=OFF): the build takes half the time, and checking mode then
    refuses to run. A unit's file is rewritten only when its text changes, so its object stays up to date."""
    kernels = sorted((root / "metal").glob("*.metal"))
    if test_kernels:
        kernels += sorted((root / "tests" / "kernels").glob("*.metal"))
    headers = sorted((root / "metal").glob("*.h"))
    subprocess.check_call([sys.executable, str(root / "tools" / "msl2cpp.py"), "--target", "emu", "--out", str(out)]
                          + [str(p) for p in kernels + headers])
    units = []
    variants = [("fast", int(fast_checked))] + ([("checked", 1)] if checked else [])  # (name, EMU_CHECKED)
    for src in kernels:
        for variant, bounds in variants:
            unit = out / f"{src.stem}.{variant}.cpp"
            text = (f"// Generated: the {variant} emulator variant of {src.relative_to(root)}.\n"
                    f"#define EMU_CHECKED {bounds}\n#define MTLINV_VARIANT_NS emu_{variant}\n"
                    f'#include "{src.stem}.cpp"\n')
            if not unit.exists() or unit.read_text() != text:
                unit.write_text(text)
            units.append(unit)
    return units


if __name__ == "__main__":
    args = sys.argv[1:]
    fast_only = args[1:] == ["--fast-only"]  # CMake's MTLINV_CHECKED_KERNELS=OFF
    if len(args) not in (1, 2) or (len(args) == 2 and not fast_only):
        sys.exit("usage: emu_units.py OUT_DIR [--fast-only]")
    generate(pathlib.Path(__file__).resolve().parent.parent, pathlib.Path(args[0]), test_kernels=False,
             checked=not fast_only)
