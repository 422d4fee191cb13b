#!/usr/bin/env python3
"""Flattens metal/*.metal into MSL sources and embeds them in a C++ header for the Metal backend.

    python tools/embed_metal.py --out build/gen/metal_source.inc   # C++ header (objc/metal_backend.mm)
    python tools/embed_metal.py --msl build/gen/mtlinv.metal       # the flattened MSL (for a metallib build)
    python tools/embed_metal.py --list-kernels                     # host names from MTLINV_KERNEL(...) lines

Every metal/*.metal is part of the library, so a new kernel file needs no registration here. `#include "x.h"`
of a file in metal/ is inlined once per unit; `#include <...>` is left to the Metal compiler. Includes are
resolved textually, so a `#include "x.h"` must not sit inside `#if`. `#line` directives keep the compiler log
pointing at the original files.

Two kinds of unit: --msl writes the whole library as one (every file, each header inlined once), which a metallib
is built from; --out embeds each kernel file as a unit of its own (its headers inlined), with the host names of
its kernels, so that the runtime compiles a file when one of its kernels is first used and a file that does not
compile takes only its own kernels down.
"""
import argparse
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
METAL_DIR = ROOT / "metal"

INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*(?://.*)?$')  # a comment may follow
PRAGMA_ONCE_RE = re.compile(r"^\s*#\s*pragma\s+once\b")
# The one reading of a registration, for every tool and test that reads them: MTLINV_KERNEL(host name, template,
# template arguments...) or MTLINV_KERNEL_WAITS(...) (metal/common.h), on one line. KERNEL_RE finds a line's start
# (re.M: in a whole text too); KERNEL_LINE_RE reads the whole line.
KERNEL_RE = re.compile(r"^[ \t]*MTLINV_KERNEL(?P<waits>_WAITS)?\(\s*(?P<name>[A-Za-z_]\w*)\s*,", re.M)
KERNEL_LINE_RE = re.compile(r"^\s*MTLINV_KERNEL(?P<waits>_WAITS)?\(\s*(?P<name>[A-Za-z_]\w*)\s*,"
                            r"\s*(?P<template>[A-Za-z_]\w*)\s*(?P<arguments>(?:,[^()]*)?)\)\s*$")

# MSVC rejects a single string literal over 16380 bytes; each chunk stays below that.
CHUNK_BYTES = 16000
RAW_DELIM = "mtlinv_msl"


class EmbedError(Exception):
    pass


def kernel_files(metal_dir=METAL_DIR):
    files = sorted(metal_dir.glob("*.metal"))
    if not files:
        raise EmbedError(f"no .metal files in {metal_dir}")
    return files


def _inline(path, metal_dir, seen, out):
    out.append(f'#line 1 "{path.name}"')
    for lineno, line in enumerate(path.read_text().splitlines(), start=1):
        if PRAGMA_ONCE_RE.match(line):
            out.append("")
            continue
        m = INCLUDE_RE.match(line)
        if not m:
            out.append(line)
            continue
        header = (path.parent / m.group(1)).resolve()
        if header.parent != metal_dir.resolve() or not header.is_file():
            raise EmbedError(f"{path.name}:{lineno}: #include \"{m.group(1)}\" is not a file in {metal_dir}")
        if header not in seen:
            seen.add(header)
            _inline(header, metal_dir, seen, out)
        out.append(f'#line {lineno + 1} "{path.name}"')


def flatten(metal_dir=METAL_DIR):
    """One MSL source: every .metal file in name order, each metal/ header inlined at its first include."""
    seen = set()
    out = ["// Flattened from metal/*.metal by tools/embed_metal.py."]
    for path in kernel_files(metal_dir):
        _inline(path.resolve(), metal_dir, seen, out)
    return "\n".join(out) + "\n"


def flatten_file(path, metal_dir=METAL_DIR):
    """One kernel file as a unit of its own: its MSL with every metal/ header it includes inlined."""
    out = [f"// Flattened from metal/{path.name} by tools/embed_metal.py."]
    _inline(pathlib.Path(path).resolve(), metal_dir, set(), out)
    return "\n".join(out) + "\n"


def registrations(metal_dir=METAL_DIR):
    """(file, host name, line, template, [template arguments]) of every MTLINV_KERNEL(...) line, in file order; a
    name registered twice, or a line that is not one whole MTLINV_KERNEL(name, template, arguments...), is an
    error."""
    found, where = [], {}
    for path in kernel_files(metal_dir):
        for lineno, line in enumerate(path.read_text().splitlines(), start=1):
            if not KERNEL_RE.match(line):
                continue
            m = KERNEL_LINE_RE.match(line)
            if not m:
                raise EmbedError(f"{path.name}:{lineno}: write MTLINV_KERNEL(name, template, arguments...) on one "
                                 "line")
            name, template = m["name"], m["template"]
            arguments = [a.strip() for a in m["arguments"].split(",")[1:]]
            if name in where:
                raise EmbedError(f"kernel {name} registered twice: {where[name]} and {path.name}:{lineno}")
            where[name] = f"{path.name}:{lineno}"
            found.append((path, name, lineno, template, arguments))
    return found


def registered_names(text):
    """Host names of the registration lines of a text (a kernel file, a flattened unit, a generated translation)."""
    return [m["name"] for m in KERNEL_RE.finditer(text)]


def kernel_names(metal_dir=METAL_DIR):
    """Host names of every MTLINV_KERNEL(...) line, in file order."""
    return [r[1] for r in registrations(metal_dir)]


def units(metal_dir=METAL_DIR):
    """[(file name, [host names of its kernels], flattened source)] for every kernel file, in name order."""
    kernels = {}
    for path, name, *_ in registrations(metal_dir):
        kernels.setdefault(path, []).append(name)
    return [(path.name, kernels.get(path, []), flatten_file(path, metal_dir)) for path in kernel_files(metal_dir)]


def _chunks(source):
    """Pieces under CHUNK_BYTES, cut at line ends (an overlong line is cut anywhere)."""
    step = CHUNK_BYTES // 4  # characters that surely fit: UTF-8 takes at most 4 bytes each
    chunks, current = [], ""
    for line in source.splitlines(keepends=True):
        pieces = [line] if len(line.encode()) <= CHUNK_BYTES else [line[i:i + step] for i in range(0, len(line), step)]
        for piece in pieces:
            if current and len((current + piece).encode()) > CHUNK_BYTES:
                chunks.append(current)
                current = ""
            current += piece
    if current:
        chunks.append(current)
    return chunks


def _c_string(text):
    if not re.fullmatch(r"[A-Za-z0-9_.]+", text):
        raise EmbedError(f"{text!r} is not a file or kernel name this header can embed")
    return f'"{text}"'


def cpp_header(unit_list):
    """The C++ header embedding `unit_list` (as units() returns it): per file its name, its kernels' host names
    and its source in pieces (compilers limit the length of one literal), each list ended by nullptr."""
    closing = f'){RAW_DELIM}"'
    arrays, files = [], []
    for i, (name, kernels, source) in enumerate(unit_list):
        if closing in source:
            raise EmbedError(f"{name}: the MSL source contains the raw-string terminator {closing!r}")
        pieces = "".join(f'R"{RAW_DELIM}({chunk}){RAW_DELIM}",\n' for chunk in _chunks(source))
        names = "".join(f"{_c_string(k)}, " for k in kernels)
        arrays.append(f"inline constexpr const char* kKernels{i}[] = {{{names}nullptr}};\n"
                      f"inline constexpr const char* kChunks{i}[] = {{\n{pieces}nullptr}};\n")
        files.append(f"    {{{_c_string(name)}, kKernels{i}, kChunks{i}}},\n")
    return (
        "// Generated by tools/embed_metal.py from metal/*.metal; do not edit.\n"
        "// Each kernel file's MSL as a unit of its own, with the host names of its kernels.\n"
        "#pragma once\n"
        "namespace mtlinv {\n"
        "namespace metal_source {\n"
        "struct File {\n"
        "  const char* name;             // e.g. \"gemv.metal\"\n"
        "  const char* const* kernels;   // host names, ended by nullptr\n"
        "  const char* const* chunks;    // the source: join the pieces in order; ended by nullptr\n"
        "};\n"
        + "".join(arrays)
        + f"inline constexpr File kFiles[] = {{\n{''.join(files)}}};\n"
        "}  // namespace metal_source\n"
        "}  // namespace mtlinv\n"
    )


def _write_if_changed(path, text):
    """Leaves the file (and its timestamp) alone when unchanged, so builds do not redo work."""
    path = pathlib.Path(path)
    if path.is_file() and path.read_text() == text:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="write the C++ header embedding the flattened source here")
    parser.add_argument("--msl", help="write the flattened MSL source here")
    parser.add_argument("--list-kernels", action="store_true", help="print every kernel host name, one a line")
    parser.add_argument("--metal-dir", default=str(METAL_DIR), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not (args.out or args.msl or args.list_kernels):
        parser.error("nothing to do: give --out, --msl and/or --list-kernels")
    metal_dir = pathlib.Path(args.metal_dir).resolve()
    try:
        if args.list_kernels:
            print("\n".join(kernel_names(metal_dir)))
        if args.out:
            _write_if_changed(args.out, cpp_header(units(metal_dir)))
        if args.msl:
            _write_if_changed(args.msl, flatten(metal_dir))
    except EmbedError as e:
        print(f"embed_metal: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
