"""The Linux-side checks of code only Apple's toolchain builds (tools/check_static.py, tools/embed_metal.py).

The real kernels and Objective-C++ must pass; each planted bug under tests/static/fixtures/ must be caught, and
the report must point at the planted line (marked `PLANTED`). Without clang these tests fail in CI (env CI set)
and are skipped elsewhere, with the reason shown: never a silent pass. On macOS they are skipped (with that
reason): there the real toolchain compiles what they stand in for.
"""
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOOLS = ROOT / "tools"
FIXTURES = ROOT / "tests" / "static" / "fixtures"
sys.path.insert(0, str(TOOLS))
import check_static  # noqa: E402
import embed_metal  # noqa: E402


@pytest.fixture(scope="module")
def clang():
    if sys.platform == "darwin":
        pytest.skip("Linux stand-ins for Apple's toolchain; on macOS the build compiles objc/ and Metal compiles metal/")
    found = check_static.find_clang(os.environ.get("MTLINV_CLANG"))
    if found is None:
        reason = "no clang++ for the static checks of metal/ and objc/ (Debian: apt-get install clang-19)"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI must run them", pytrace=False)
        pytest.skip(reason)
    return found


def run_check(clang, *files):
    proc = subprocess.run([sys.executable, str(TOOLS / "check_static.py"), "--clang", clang, *map(str, files)],
                          cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc.returncode, proc.stdout


def test_real_sources_pass(clang):
    rc, out = run_check(clang)
    assert rc == 0, out
    checked = sorted((ROOT / "metal").glob("*.metal")) + sorted((ROOT / "objc").glob("*.mm"))
    assert checked, "nothing to check"
    for path in checked:
        assert f"ok   {path.relative_to(ROOT)}" in out, out
    assert f"ok   {check_static.FLATTENED}" in out, out


def test_flattened_library_catches_what_single_files_cannot(clang, tmp_path):
    """Two kernel files that each define the same helper: each passes alone, but the Metal backend compiles all of
    them as one unit, where the second definition is an error. Only the flattened check sees it."""
    metal = tmp_path / "metal"
    metal.mkdir()
    for name in ("a.metal", "b.metal"):
        (metal / name).write_text("#include <metal_stdlib>\nusing namespace metal;\n"
                                  "float clashing_helper(float x) { return x; }  // PLANTED in both files\n")
    work = tmp_path / "work"
    work.mkdir()
    assert check_static.check_metal(clang, sorted(metal.glob("*.metal")), work) == []
    failures = check_static.check_flattened(clang, work, metal)
    assert len(failures) == 1 and "redefinition of 'clashing_helper'" in failures[0][1], failures
    assert "b.metal:3:" in failures[0][1], failures


@pytest.mark.parametrize("name", ["bad_address_space.metal", "bad_buffer_slot.metal", "bad_selector.mm",
                                  "bad_wait.metal"])
def test_planted_bug_is_caught(clang, name):
    fixture = FIXTURES / name
    planted = [n for n, line in enumerate(fixture.read_text().splitlines(), 1) if "PLANTED" in line]
    assert planted, f"{name} marks no PLANTED line"
    rc, out = run_check(clang, fixture)
    assert rc == 1, out
    assert f"FAIL tests/static/fixtures/{name}" in out, out
    for line in planted:
        assert f"fixtures/{name}:{line}:" in out and "error:" in out, f"line {line} not reported:\n{out}"


def test_wait_rule_both_ways():
    """MTLINV_KERNEL_WAITS without the call in the body fails (bad_wait.metal's planted line, above); so does the call
    in a kernel registered with MTLINV_KERNEL, whose entry already waited, and a _WAITS kernel whose body lies in
    another file, where the check cannot see it; a _WAITS kernel that calls it passes."""
    fixture = (FIXTURES / "bad_wait.metal").read_text()
    errors = check_static.wait_errors(fixture, "bad_wait.metal")
    assert len(errors) == 1 and "copy_not_waiting is registered with MTLINV_KERNEL_WAITS" in errors[0], errors
    plain = fixture.replace("MTLINV_KERNEL_WAITS(copy_waiting_f32", "MTLINV_KERNEL(copy_waiting_f32")
    errors = check_static.wait_errors(plain, "plain.metal")
    assert len(errors) == 2 and any("copy_waiting calls wait_for_previous_kernels()" in e for e in errors), errors
    elsewhere = "MTLINV_KERNEL_WAITS(k_f32, defined_in_a_header, float)\n"
    errors = check_static.wait_errors(elsewhere, "elsewhere.metal")
    assert len(errors) == 1 and "its body is not in this file" in errors[0], errors


def test_embedded_units_round_trip(clang, tmp_path):
    """The generated header, compiled as C++, yields exactly each kernel file's unit: its name, the host names of
    its kernels and its flattened source."""
    units = embed_metal.units()
    header = tmp_path / "metal_source.inc"
    header.write_text(embed_metal.cpp_header(units))
    program = tmp_path / "dump.cpp"
    # Records end with \x1e, fields with \x1f (neither occurs in MSL).
    program.write_text(
        '#include <cstdio>\n#include "metal_source.inc"\n'
        "int main() {\n"
        "  for (const auto& f : mtlinv::metal_source::kFiles) {\n"
        '    std::printf("%s\\x1f", f.name);\n'
        '    for (auto k = f.kernels; *k; ++k) std::printf("%s\\n", *k);\n'
        '    std::fputs("\\x1f", stdout);\n'
        "    for (auto c = f.chunks; *c; ++c) std::fputs(*c, stdout);\n"
        '    std::fputs("\\x1e", stdout);\n'
        "  }\n"
        "}\n")
    exe = tmp_path / "dump"
    subprocess.run([clang, "-std=c++17", "-o", str(exe), str(program)], check=True)
    dumped = subprocess.run([str(exe)], check=True, stdout=subprocess.PIPE).stdout.decode()
    records = [r.split("\x1f") for r in dumped.split("\x1e")[:-1]]
    assert [(name, kernels.split(), source) for name, kernels, source in records] == units


def test_each_unit_is_one_file_with_its_headers():
    """What the runtime compiles at a kernel's first use: the kernel file that defines it, with the headers it
    includes, and every kernel of the library in exactly one unit."""
    units = embed_metal.units()
    assert [name for name, _, _ in units] == [p.name for p in sorted((ROOT / "metal").glob("*.metal"))]
    assert [k for _, kernels, _ in units for k in kernels] == embed_metal.kernel_names()
    for name, kernels, source in units:
        assert kernels, f"{name} registers no kernel"
        assert '#include "' not in source and "#pragma once" not in source
        lines = source.splitlines()
        assert [line for line in lines if line.startswith("#line 1 ") and line.endswith('.metal"')] == \
            [f'#line 1 "{name}"'], name
        for header in sorted((ROOT / "metal").glob("*.h")):
            assert lines.count(f'#line 1 "{header.name}"') <= 1, (name, header.name)


def test_flatten_inlines_each_header_once():
    source = embed_metal.flatten()
    assert '#include "' not in source
    assert "#pragma once" not in source
    for header in sorted((ROOT / "metal").glob("*.h")):
        included = any(f'#include "{header.name}"' in f.read_text() for f in (ROOT / "metal").iterdir())
        assert source.count(f'#line 1 "{header.name}"') == (1 if included else 0), header.name
    for kernel_file in sorted((ROOT / "metal").glob("*.metal")):
        assert f'#line 1 "{kernel_file.name}"' in source


def test_chunks_stay_under_the_literal_limit():
    source = "".join(f"// line {i} " + "x" * 90 + "\n" for i in range(2000)) + "y" * 50000 + "\n"
    chunks = embed_metal._chunks(source)
    assert "".join(chunks) == source
    assert max(len(c.encode()) for c in chunks) <= embed_metal.CHUNK_BYTES


def test_kernel_list_is_the_registration_table():
    names = embed_metal.kernel_names()
    assert names and len(names) == len(set(names))
    out = subprocess.run([sys.executable, str(TOOLS / "embed_metal.py"), "--list-kernels"], check=True,
                         stdout=subprocess.PIPE, text=True).stdout.split()
    assert out == names
