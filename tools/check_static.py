#!/usr/bin/env python3
"""Linux-side static checks of code that only Apple's toolchain can build.

    python tools/check_static.py [--clang clang++-19] [FILE ...]

With no FILE: every metal/*.metal, the flattened library that the Metal backend compiles (all of them as one unit),
and every objc/*.mm. Exits non-zero if any file fails, printing the file and
clang's output.

- .metal: clang's C++ for OpenCL mode with tests/static/msl_as_opencl.h force-included, which maps MSL's
  address spaces onto OpenCL's, so address-space mistakes fail as they would in the Metal compiler.
  Two constructs are rewritten first, line for line (line numbers stay exact): block-scope
  `threadgroup T name[N];` declarations, which OpenCL allows only in kernel functions (and kernel templates not
  at all), and MSL's own attributes ([[kernel]], [[thread_position_in_grid]], ...), which OpenCL does not know:
  blanked, except that `[[buffer(i)]]` becomes an attribute clang does know whose argument evaluates i as a
  template argument (msl_as_opencl.h, mtlinv_static::buffer_slot), so a slot that is not an integral constant
  expression from 0 to 30 (an undeclared slot name, a runtime value) fails as in the Metal compiler. Any other
  attribute is left in place, so a misspelt one fails under -Werror.
  Then one rule no compiler checks: a kernel registered with MTLINV_KERNEL_WAITS calls wait_for_previous_kernels()
  in its body (on CUDA it starts while the kernel ahead of it still runs: metal/common.h), and only such a kernel
  calls it.
- .mm: Objective-C++ with ARC against tests/static/apple_sdk, declaration headers of exactly the Metal and
  Foundation API the runtime uses, in each configuration a build can compile it in (OBJC_VARIANTS).
"""
import argparse
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
STATIC = ROOT / "tests" / "static"
sys.path.insert(0, str(ROOT / "tools"))
import embed_metal  # noqa: E402  (sibling tool: the objc check compiles against the real generated header)

# The flattened library's name in the report (tools/embed_metal.py --msl writes the same text).
FLATTENED = "the flattened library (embed_metal.py --msl)"

CLANG_CANDIDATES = [f"clang++-{v}" for v in range(21, 13, -1)] + ["clang++"]

# Attributes of MSL (kernel functions, their arguments, function constants); stripped before the OpenCL check.
MSL_ATTRIBUTES = {
    "kernel", "host_name", "buffer", "threadgroup", "texture", "sampler", "function_constant", "id",
    "max_total_threads_per_threadgroup", "thread_position_in_grid", "thread_position_in_threadgroup",
    "thread_index_in_threadgroup", "threadgroup_position_in_grid", "threadgroups_per_grid",
    "threads_per_threadgroup", "threads_per_grid", "dispatch_threads_per_threadgroup",
    "simdgroup_index_in_threadgroup", "thread_index_in_simdgroup", "simdgroups_per_threadgroup",
    "dispatch_simdgroups_per_threadgroup", "threads_per_simdgroup", "quadgroup_index_in_threadgroup",
    "thread_index_in_quadgroup", "quadgroups_per_threadgroup", "threads_per_quadgroup",
}
ATTRIBUTE_RE = re.compile(r"\[\[(.*?)\]\]")
ATTRIBUTE_ITEM_RE = re.compile(r"^\s*([A-Za-z_]\w*)\s*(\(.*\))?\s*$")
THREADGROUP_VAR_RE = re.compile(
    r"^(?P<indent>\s*)threadgroup\s+(?P<type>[A-Za-z_][\w:]*(?:\s*<[^;*&]*>)?)\s+"
    r"(?P<name>[A-Za-z_]\w*)\s*(?P<dims>(?:\[[^\]]+\]\s*)*);(?P<rest>.*)$")

WAIT_CALL = "wait_for_previous_kernels()"

CLCPP_FLAGS = ["-x", "clcpp", "-cl-std=clc++2021", "-cl-no-stdinc", "-fsyntax-only", "-Wall", "-Werror",
               "-ferror-limit=50"]
OBJC_FLAGS = ["-x", "objective-c++", "-std=c++17", "-fsyntax-only", "-fobjc-arc", "-Wall", "-Wextra", "-Werror",
              # Linux's default Objective-C runtime (GNU) has no ARC; the code targets Apple's.
              "-fobjc-runtime=macosx-14.0", "-fblocks", "-ferror-limit=50"]


def find_clang(explicit=None):
    for name in [explicit] if explicit else CLANG_CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


def _split_attribute_items(body):
    items, depth, start = [], 0, 0
    for i, ch in enumerate(body):
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            items.append(body[start:i])
            start = i + 1
    items.append(body[start:])
    return items


def _rewrite_msl_attributes(line):
    def rewrite(m):
        items = [ATTRIBUTE_ITEM_RE.match(item) for item in _split_attribute_items(m.group(1))]
        if not all(n and n.group(1) in MSL_ATTRIBUTES for n in items):
            return m.group(0)
        slots = [n.group(2)[1:-1] for n in items if n.group(1) == "buffer" and n.group(2)]
        return "".join(f'[[clang::annotate("buffer", mtlinv_static::buffer_slot<{s}>::value)]]' for s in slots) \
            or " " * len(m.group(0))
    return ATTRIBUTE_RE.sub(rewrite, line)


def rewrite_msl(text, display_path):
    """The MSL text as clcpp must see it; `#line` keeps diagnostics on the original file and lines."""
    out = [f'#line 1 "{display_path}"']
    for line in text.splitlines():
        m = THREADGROUP_VAR_RE.match(line)
        if m:
            t, dims = m.group("type"), m.group("dims").replace(" ", "")
            line = (f"{m.group('indent')}__local {t} (&{m.group('name')}){dims} = "
                    f"mtlinv_static::threadgroup_var<{t}{dims}>();{m.group('rest')}")
        out.append(_rewrite_msl_attributes(line))
    return "\n".join(out) + "\n"


def _display(path):
    if path == FLATTENED:
        return path
    path = pathlib.Path(path).resolve()
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


def _run(cmd):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc.returncode, proc.stdout


def _kernel_body(code, fn):
    """The body of kernel template `fn` in `code` (comments removed), or None where it is not defined there."""
    m = re.search(r"\[\[kernel\]\]\s*void\s+" + fn + r"\s*\(", code)
    if not m:
        return None
    start = code.index("{", m.end())
    depth = 0
    for i in range(start, len(code)):
        depth += {"{": 1, "}": -1}.get(code[i], 0)
        if depth == 0:
            return code[start:i + 1]
    return None


def wait_errors(text, display_path):
    """Registrations whose kernel breaks the MTLINV_KERNEL_WAITS rule (module docstring), as compiler-style errors."""
    code = re.sub(r"//[^\n]*", "", text)
    errors = []
    for line, text_line in enumerate(code.splitlines(), start=1):
        m = embed_metal.KERNEL_LINE_RE.match(text_line)
        if not m:
            continue
        waits, fn = m["waits"] is not None, m["template"]
        body = _kernel_body(code, fn)
        if body is None:  # defined in a header: a plain kernel needs no check, a waiting one cannot be checked
            if waits:
                errors.append(f"{display_path}:{line}: error: kernel {fn} is registered with MTLINV_KERNEL_WAITS but "
                              "its body is not in this file, where the check looks for the call")
            continue
        if waits == (WAIT_CALL in body):
            continue
        why = (f"kernel {fn} is registered with MTLINV_KERNEL_WAITS but its body never calls {WAIT_CALL}" if waits
               else f"kernel {fn} calls {WAIT_CALL} but is registered with MTLINV_KERNEL, which waits before it starts")
        errors.append(f"{display_path}:{line}: error: {why}")
    return errors


def check_metal(clang, files, work):
    """Each file against rewritten copies of metal/'s headers; returns [(file, output)] of failures."""
    headers = work / "metal"
    headers.mkdir()
    for h in sorted((ROOT / "metal").glob("*.h")):
        (headers / h.name).write_text(rewrite_msl(h.read_text(), _display(h)))
    failures = []
    for i, f in enumerate(files):
        target = work / f"src{i}" / f.name
        target.parent.mkdir()
        target.write_text(rewrite_msl(f.read_text(), _display(f)))
        cmd = [clang, *CLCPP_FLAGS, "-include", str(STATIC / "msl_as_opencl.h"),
               "-isystem", str(STATIC / "include"), "-I", str(headers), str(target)]
        rc, output = _run(cmd)
        errors = wait_errors(f.read_text(), _display(f))
        if rc != 0 or errors:
            failures.append((f, output + "".join(e + "\n" for e in errors)))
    return failures


def check_flattened(clang, work, metal_dir=embed_metal.METAL_DIR):
    """The library as the Metal backend compiles it: every .metal flattened into one unit by embed_metal.py, so
    that what only one unit can show fails here too (two files defining one helper, a header's `#pragma once`
    dropped, a name that clashes across files). Returns [(label, output)] of failures."""
    target = work / "flattened" / "mtlinv.metal"
    target.parent.mkdir()
    target.write_text(rewrite_msl(embed_metal.flatten(metal_dir), FLATTENED))
    rc, output = _run([clang, *CLCPP_FLAGS, "-include", str(STATIC / "msl_as_opencl.h"), "-isystem",
                       str(STATIC / "include"), str(target)])
    return [] if rc == 0 else [(FLATTENED, output)]


# Each .mm is checked as each build makes it: without and with a metallib (every build embeds the kernels' source;
# one with a metallib loads it and falls back to the source), each against the macOS 15 SDK and against the 14.5
# SDK (GitHub's macos-14 image defaults to it; it lacks MTLCompileOptions.mathMode).
METALLIB = '-DMTLINV_METALLIB_PATH="mtlinv.metallib"'
SDK_14_5 = "-D__MAC_OS_X_VERSION_MAX_ALLOWED=140500"
OBJC_VARIANTS = [
    ("embedded source only, SDK 15", []),
    ("embedded source only, SDK 14.5", [SDK_14_5]),
    ("metallib and embedded source, SDK 15", [METALLIB]),
    ("metallib and embedded source, SDK 14.5", [METALLIB, SDK_14_5]),
]


def check_objc(clang, files, work):
    gen = work / "gen"
    gen.mkdir()
    (gen / "metal_source.inc").write_text(embed_metal.cpp_header(embed_metal.units()))
    failures = []
    for f in files:
        for label, defines in OBJC_VARIANTS:
            cmd = [clang, *OBJC_FLAGS, "-isystem", str(STATIC / "apple_sdk"), "-I", str(gen), *defines, str(f)]
            rc, output = _run(cmd)
            if rc != 0:
                failures.append((f, f"[{label}]\n{output}"))
                break
    return failures


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clang", help="clang++ binary (default: the newest clang++-N on PATH, else clang++)")
    parser.add_argument("files", nargs="*", type=pathlib.Path,
                        help=".metal and .mm files (default: metal/*.metal and objc/*.mm)")
    args = parser.parse_args(argv)

    clang = find_clang(args.clang)
    if not clang:
        wanted = args.clang or ", ".join(CLANG_CANDIDATES)
        print(f"check_static: no clang found (looked for {wanted}); on Debian: apt-get install clang-19",
              file=sys.stderr)
        return 2
    files = args.files or sorted((ROOT / "metal").glob("*.metal")) + sorted((ROOT / "objc").glob("*.mm"))
    unknown = [f for f in files if f.suffix not in (".metal", ".mm") or not f.is_file()]
    if unknown:
        print(f"check_static: not a .metal or .mm file: {', '.join(map(str, unknown))}", file=sys.stderr)
        return 2

    with tempfile.TemporaryDirectory(prefix="mtlinv-static-") as tmp:
        work = pathlib.Path(tmp)
        metal = [f for f in files if f.suffix == ".metal"]
        objc = [f for f in files if f.suffix == ".mm"]
        failures = (check_metal(clang, metal, work) if metal else []) + (check_objc(clang, objc, work) if objc else [])
        if not args.files:
            files.append(FLATTENED)
            failures += check_flattened(clang, work)

    failed = {f for f, _ in failures}
    for f in files:
        print(f"{'FAIL' if f in failed else 'ok  '} {_display(f)}")
    for f, output in failures:
        print(f"\n==== {_display(f)} ({os.path.basename(clang)})\n{output}", end="")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
