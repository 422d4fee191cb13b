#!/usr/bin/env python3
"""The MSL pre-pass: turns metal/*.metal and metal/*.h into C++ (the emulator) or CUDA.

Kernels are written once in a portable subset of MSL (documented in docs/kernel_guide.md). The shims
(src/emu/msl_shim.h, src/cuda/cuda_shim.cuh) implement the metal_stdlib names; this pass does only what a header
cannot:

* A kernel's parameter list becomes bindings from a context struct, so every kernel has one signature that the
  runtime can call per thread (emulator) or from a ``__global__`` entry (CUDA):
      [[kernel]] void f(constant A& a [[buffer(A_SLOT_ARGS)]], device T* y [[buffer(A_SLOT_Y)]], uint i [[...]])
  becomes
      void f(const KCTX& __ctx) { constant A& a = bind_constant<A>(__ctx, A_SLOT_ARGS); ...; { body } }
  A slot is a number or the name of one (an enumerator of the family's slot enum, metal/shared.h), emitted as
  written: the translation includes the args headers, so the C++ compiler resolves the name.
* ``threadgroup T name[N];`` declarations become storage shared by the threadgroup: ``static thread_local`` on the
  emulator (all fibers of a threadgroup run on one OS thread) and ``__shared__`` on CUDA.
* ``device X*`` pointer types become ``EMU_DPTR(X)`` on the emulator, a bounds-checked pointer in checked builds.
* CUDA only: every other function defined at namespace or class scope (helpers such as ``simd_ladder_sum``, member
  functions of helper structs) gains ``__device__``, and program-scope ``constant`` data that is not ``constexpr``
  becomes ``__device__`` data: nvcc compiles unannotated functions for the host alone.
* CUDA only: the address-space keywords are erased here (``constant`` becomes ``const``) rather than by macros as on
  the emulator: CUDA's ``__device__`` and ``__constant__`` are macros that expand through the very tokens
  ``device`` and ``constant``, so keyword macros would break them.

``#line`` directives keep compiler messages pointing at the .metal source.
"""
from __future__ import annotations

import argparse
import pathlib
import re
import sys

TARGETS = {
    "emu": {"shim": "msl_shim.h", "ctx": "::emu::KernelCtx", "ns": "::emu", "fn_prefix": "",
            "shared": "static thread_local"},
    "cuda": {"shim": "cuda_shim.cuh", "ctx": "::cu::KernelCtx", "ns": "::cu", "fn_prefix": "__device__ ",
             "shared": "__shared__"},
}

# MSL thread-position attributes the kernels may use; each is a field of the context struct.
POSITION_ATTRIBUTES = {
    "threadgroup_position_in_grid", "threadgroups_per_grid", "thread_position_in_threadgroup",
    "threads_per_threadgroup", "thread_position_in_grid", "thread_index_in_threadgroup",
    "simdgroup_index_in_threadgroup", "thread_index_in_simdgroup", "simdgroups_per_threadgroup",
    "threads_per_simdgroup",
}

KERNEL_HEAD = re.compile(r"\[\[\s*kernel\s*\]\]\s*void\s+(\w+)\s*\(")
THREADGROUP_ARRAY = re.compile(r"^(\s*)threadgroup\s+([\w:<>, ]+?)\s+(\w+)\s*((?:\[[^\]]+\])+)\s*;", re.M)
TYPE_NAME = r"[A-Za-z_][\w:]*(?:<[^<>;(){}]*>)?"
DEVICE_POINTER = re.compile(rf"\b(const\s+)?device\s+(const\s+)?({TYPE_NAME})\s*\*")
PARAM = re.compile(r"^(?P<decl>.*?)\s*\[\[\s*(?P<attr>\w+)\s*(?:\((?P<index>.*)\))?\s*\]\]\s*$", re.S)
# What [[buffer(...)]] may hold: a decimal number or one identifier (a slot's name); never an expression.
SLOT = re.compile(r"\d+|[A-Za-z_]\w*")


class PrepassError(Exception):
    pass


def _matching(text: str, open_at: int) -> int:
    """Index of the bracket closing the one at text[open_at] ('(' or '{')."""
    opening = text[open_at]
    closing = {"(": ")", "{": "}"}[opening]
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == opening:
            depth += 1
        elif text[i] == closing:
            depth -= 1
            if depth == 0:
                return i
    raise PrepassError(f"unbalanced '{opening}' at offset {open_at}")


def _split_params(params: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(params):
        if ch in "(<[":
            depth += 1
        elif ch in ")>]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(params[start:i])
            start = i + 1
    parts.append(params[start:])
    return [p.strip() for p in parts if p.strip()]


def _declarator(decl: str) -> tuple[str, str]:
    m = re.match(r"^(.*?)(\w+)$", decl.strip(), re.S)
    if not m:
        raise PrepassError(f"cannot parse kernel parameter '{decl}'")
    return m.group(1).strip(), m.group(2)


def parameter(param: str, where: str) -> tuple[str, str, str, str | None]:
    """A kernel parameter as (type, name, attribute, slot): the slot of [[buffer(slot)]] as written (a number or a
    slot's name), None for the other attributes. Raises PrepassError for what the pass does not take."""
    m = PARAM.match(param)
    if not m:
        raise PrepassError(f"{where}: kernel parameter '{param}' has no [[attribute]]")
    type_, name = _declarator(m.group("decl"))
    attr, index = m.group("attr"), m.group("index")
    if index is not None and attr != "buffer":
        raise PrepassError(f"{where}: [[{attr}]] on '{name}' takes no index, got [[{attr}({index})]]")
    if attr == "buffer" and (index is None or not SLOT.fullmatch(index.strip())):
        written = "buffer" if index is None else f"buffer({index})"
        raise PrepassError(f"{where}: [[{written}]] on '{name}': a slot is a number or the name of one (an "
                           "enumerator of the family's slot enum, metal/shared.h), not an expression")
    return type_, name, attr, index.strip() if index is not None else None


def kernel_signatures(text: str, path: str) -> list[tuple[str, list[tuple[str, str, str, str | None]]]]:
    """Every [[kernel]] of `text`: (its name, its parameters as `parameter` gives them)."""
    kernels = []
    for m in KERNEL_HEAD.finditer(text):
        where = f"{path}:{text.count(chr(10), 0, m.start()) + 1}: kernel {m.group(1)}"
        params = _split_params(text[m.end():_matching(text, m.end() - 1)])
        kernels.append((m.group(1), [parameter(p, where) for p in params]))
    return kernels


def _binding(param: str, target: dict, where: str) -> str:
    type_, name, attr, index = parameter(param, where)
    ns = target["ns"]
    if attr == "buffer":
        if type_.startswith("constant") and type_.endswith("&"):
            struct = type_[len("constant"):-1].strip()
            return f"constant {struct}& {name} = {ns}::bind_constant<{struct}>(__ctx, {index});"
        pointer = DEVICE_POINTER.fullmatch(type_)
        if pointer:
            const = "const " if (pointer.group(1) or pointer.group(2)) else ""
            element = const + pointer.group(3)
            return f'{_pointer_type(element, target)} {name} = {ns}::bind_device<{element}>(__ctx, {index}, "{name}");'
        raise PrepassError(f"{where}: buffer parameter '{param}' must be 'constant S&' or 'device T*'")
    if attr in POSITION_ATTRIBUTES:
        return f"{type_} {name} = {ns}::attr<{type_}>(__ctx.{attr});"
    raise PrepassError(f"{where}: unsupported attribute [[{attr}]] on '{param}'")


def _pointer_type(element: str, target: dict) -> str:
    return f"EMU_DPTR({element})" if target is TARGETS["emu"] else f"{element}*"


def _rewrite_kernels(text: str, target: dict, path: str) -> str:
    out, pos = [], 0
    for m in KERNEL_HEAD.finditer(text):
        if m.start() < pos:
            continue
        open_at = m.end() - 1
        close_at = _matching(text, open_at)
        brace = text.index("{", close_at)
        line = text.count("\n", 0, m.start()) + 1
        body_line = text.count("\n", 0, brace) + 1
        where = f"{path}:{line}: kernel {m.group(1)}"
        bindings = [_binding(p, target, where) for p in _split_params(text[open_at + 1:close_at])]
        out.append(text[pos:m.start()])
        out.append(f"{target['fn_prefix']}void {m.group(1)}(const {target['ctx']}& __ctx) {{\n")
        out.extend(f"  {b}\n" for b in bindings)
        out.append(f'#line {body_line} "{path}"\n')
        end = _matching(text, brace)
        # The body keeps its own braces: a block inside the new function, closed right after it.
        out.append(text[brace:end + 1])
        out.append(f"\n}}\n#line {text.count(chr(10), 0, end) + 1} \"{path}\"")
        pos = end + 1
    out.append(text[pos:])
    return "".join(out)


def _code_mask(text: str) -> str:
    """`text` with comments, string and character literals and preprocessor lines blanked (newlines kept), so
    that a scan for braces and semicolons sees code only; offsets are unchanged."""
    out = list(text)
    i, n = 0, len(text)
    line_start = True
    while i < n:
        ch = text[i]
        if line_start and ch == "#" or text.startswith("//", i):
            end = i
            while end < n and text[end] != "\n":
                end += 2 if text.startswith("\\\n", end) else 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
        elif ch in "\"'":
            end = i + 1
            while end < n and text[end] != ch:
                end += 2 if text[end] == "\\" else 1
            end += 1
        else:
            if ch == "\n":
                line_start = True
            elif not ch.isspace():
                line_start = False
            i += 1
            continue
        for j in range(i, min(end, n)):
            if out[j] != "\n":
                out[j] = " "
        i = end
    return "".join(out)


def _after_template_header(code: str, start: int, end: int) -> int:
    """The offset of the first token of the declaration in code[start:end] after any `template <...>` headers."""
    pos = start
    while True:
        m = re.compile(r"\s*").match(code, pos, end)
        pos = m.end()
        t = re.compile(r"template\s*<").match(code, pos, end)
        if not t:
            return pos
        depth, pos = 1, t.end()
        while pos < end and depth:
            depth += {"<": 1, ">": -1}.get(code[pos], 0)
            pos += 1


FUNCTION_HEAD = re.compile(r"\)\s*(?:const|noexcept|override|final|&&?|\s)*$")
OPERATOR_NAME = re.compile(r"\boperator\s*(?:\(\s*\)|[^\s(]+)")


def _is_function_head(head: str) -> bool:
    """Whether a declaration (comments blanked) that reaches a `{` or `;` is a function: it ends with a parameter
    list and has no `=` outside parentheses (operator names aside); a static_assert only looks like one."""
    head = OPERATOR_NAME.sub("operator", head)
    if not FUNCTION_HEAD.search(head) or re.search(r"\b(typedef|using|return|static_assert)\b", head):
        return False
    depth = 0
    for ch in head:
        depth += {"(": 1, ")": -1, "[": 1, "]": -1}.get(ch, 0)
        if ch == "=" and depth == 0:
            return False
    return True


def _annotate_device_functions(text: str) -> str:
    """CUDA: `__device__` on every function declared or defined at namespace or class scope (kernels are already
    `__device__`), and on program-scope `constant` data that is not constexpr. Tracks scopes by braces over the
    code with comments, literals and preprocessor lines blanked; an `MTLINV_KERNEL(...)` line ends a declaration."""
    code = _code_mask(text)
    inserts: list[int] = []
    scopes = ["namespace"]  # namespace, class, body (a function body or an initializer: not scanned)
    head_start, paren, i = 0, 0, 0

    def annotate(end: int, function: bool) -> None:
        """Marks the declaration that ends at `end`, after its template header, when it is a function or data."""
        at = _after_template_header(code, head_start, end)
        decl = code[at:end]
        if "__device__" in decl or "__global__" in decl:
            return
        if function or (re.match(r"constant\b", decl) and not re.search(r"\bconstexpr\b", decl)):
            inserts.append(at)

    while i < len(code):
        ch = code[i]
        if scopes[-1] == "body":
            if ch == "{":
                scopes.append("body")
            elif ch == "}":
                scopes.pop()
                head_start = i + 1
            i += 1
            continue
        if code.startswith("MTLINV_KERNEL", i) and not code[head_start:i].strip():
            close = _matching(code, code.index("(", i))
            i = head_start = close + 1
            continue
        decl = code[_after_template_header(code, head_start, i):i] if ch in ";{" else ""
        if ch == "(":
            paren += 1
        elif ch == ")":
            paren -= 1
        elif ch == ";" and paren == 0:
            annotate(i, _is_function_head(decl))
            head_start = i + 1
        elif ch == "{":
            if paren > 0:
                scopes.append("body")
            elif re.search(r"\bnamespace\b|\bextern\b", decl):
                scopes.append("namespace")
            elif _is_function_head(decl):
                annotate(i, True)
                scopes.append("body")
            elif re.match(r"\s*(typedef\s+)?(struct|class|union|enum)\b", decl):
                scopes.append("class")
            else:
                annotate(i, False)
                scopes.append("body")
            head_start = i + 1
        elif ch == "}":
            scopes.pop()
            head_start = i + 1
        i += 1
    for at in reversed(inserts):
        text = text[:at] + "__device__ " + text[at:]
    return text


ADDRESS_SPACE = re.compile(r"\b(device|threadgroup|thread|constant|kernel)\b")


def _erase_address_spaces(text: str) -> str:
    """CUDA: drops MSL's address-space keywords from code (not comments or preprocessor lines); `constant`
    becomes `const`. Generic addressing reaches global and shared memory through plain pointers."""
    code = _code_mask(text)
    out, pos = [], 0
    for m in ADDRESS_SPACE.finditer(code):
        out.append(text[pos:m.start()])
        out.append("const" if m.group(1) == "constant" else "")
        pos = m.end()
    out.append(text[pos:])
    return "".join(out)


def translate(text: str, path: str, target_name: str) -> str:
    target = TARGETS[target_name]
    text = _rewrite_kernels(text, target, path)
    text = THREADGROUP_ARRAY.sub(lambda m: f"{m.group(1)}{target['shared']} {m.group(2)} {m.group(3)}{m.group(4)};",
                                 text)
    if target_name == "cuda":
        return _erase_address_spaces(_annotate_device_functions(text))

    def pointer(m: re.Match) -> str:
        const = "const " if (m.group(1) or m.group(2)) else ""
        return f"EMU_DPTR({const}{m.group(3)})"
    return DEVICE_POINTER.sub(pointer, text)


def translate_file(src: pathlib.Path, dst: pathlib.Path, target_name: str) -> None:
    """Writes the translated `src` to `dst`. A .metal file becomes a self-contained translation unit: the shim
    first, then the kernels inside a namespace per build variant (the emulator builds each file twice: fast and
    bounds-checked, and the two must not collide)."""
    target = TARGETS[target_name]
    body = translate(src.read_text(), src.name, target_name)
    if src.suffix == ".metal":
        head = f'// Generated from metal/{src.name} by tools/msl2cpp.py --target {target_name}. Do not edit.\n'
        head += f'#include "{target["shim"]}"\nnamespace MTLINV_VARIANT_NS {{\n#line 1 "{src.name}"\n'
        body = head + body + "\n}  // namespace MTLINV_VARIANT_NS\n"
    else:
        body = f"// Generated from metal/{src.name} by tools/msl2cpp.py. Do not edit.\n#line 1 \"{src.name}\"\n" + body
    dst.parent.mkdir(parents=True, exist_ok=True)
    if not dst.exists() or dst.read_text() != body:
        dst.write_text(body)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", choices=sorted(TARGETS), required=True)
    ap.add_argument("--out", required=True, type=pathlib.Path, help="output directory")
    ap.add_argument("sources", nargs="+", type=pathlib.Path, help=".metal and .h files")
    args = ap.parse_args(argv)
    suffix = ".cpp" if args.target == "emu" else ".cu"
    try:
        for src in args.sources:
            name = src.stem + suffix if src.suffix == ".metal" else src.name
            translate_file(src, args.out / name, args.target)
    except PrepassError as e:
        print(f"msl2cpp: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
