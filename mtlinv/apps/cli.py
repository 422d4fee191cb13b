"""The `mtlinv` command: `mtlinv check` (bitwise audit of every op), `mtlinv demo` (exact speculative decoding on
a real model), `mtlinv generate` and `mtlinv chat` (text from a model), and `mtlinv doctor` (the first run on a new
machine: device, audit, timing against MLX, one report)."""
from __future__ import annotations

import argparse
import os
import signal
import sys
from importlib import metadata

from .. import MtlinvError, _native, _paths
from . import generate_cli


def version() -> str:
    try:
        return metadata.version("mtlinv")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed: its build's version
        return f"{_native.VERSION} (source tree, not installed)"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 1 and argv[0] in _paths.FLAGS:
        return _paths.print_folder(argv[0])
    ap = argparse.ArgumentParser(
        prog="mtlinv", description="batch-invariant inference kernels",
        epilog=f"{' | '.join(_paths.FLAGS)}: print that folder of the C/C++ library this package carries")
    ap.add_argument("--version", action="version", version=f"mtlinv {version()}")
    sub = ap.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="bitwise invariance audit of every op on the active device")
    check.add_argument("--limit", type=int, default=8, help="largest M checked (default 8, at most 256)")
    check.add_argument("--quick", action="store_true", help="smaller shapes")
    demo = sub.add_parser("demo", help="greedy vs speculative decoding on a real model")
    demo.add_argument("--prompt", default="Write a short story about a robot who learns to paint.",
                      help="a user turn in the model's chat template, plain text where it has none")
    demo.add_argument("--tokens", type=int, default=48, help="tokens to generate (default 48)")
    demo.add_argument("--k", type=int, default=4, help="draft tokens per speculative step (default 4)")
    demo.add_argument("--model", default=None,
                      help="a llama, qwen2 or qwen3 GGUF file or MLX checkpoint directory (default: SmolLM2-135M)")
    gen = sub.add_parser("generate", help="text after a prompt, streamed (greedy, sampled, speculative)")
    gen.add_argument("prompt", help="the text to continue (with --chat or --system: a user message)")
    gen.add_argument("--chat", action="store_true", help="the prompt is a user turn in the model's chat template")
    generate_cli.add_arguments(gen)
    chat = sub.add_parser("chat", help="a conversation with a model, in its own chat template")
    generate_cli.add_arguments(chat)
    doctor = sub.add_parser(
        "doctor", help="first run on a new machine (a Mac): device, audit, timing against MLX, one report file",
        description="Reports the device and software, runs the invariance audit of `mtlinv check`, times gemv, "
                    "qgemv and sdpa against MLX when it is installed, and writes one Markdown report to attach to "
                    "an issue. Exit status: 0 all passed; 1 an audit FAIL, a device that did not start, an mtlinv "
                    "error or results far from MLX's; 2 bad usage.")
    doctor.add_argument("--quick", action="store_true", help="smaller audit shapes, fewer timing repetitions")
    doctor.add_argument("--limit", type=int, default=8, help="largest M audited and timed (default 8, at most 256)")
    doctor.add_argument("--out", default=None, metavar="PATH",
                        help="where the report goes (default: mtlinv-doctor-report.md in the current directory)")
    args = ap.parse_args(argv)
    try:
        return _run(ap, args)
    except KeyboardInterrupt:  # Ctrl-C: the usual status of a process SIGINT ended, and no traceback
        print(f"\nmtlinv {args.command}: interrupted", file=sys.stderr)
        return 130
    except MtlinvError as e:  # the device did not start (MTLINV_DEVICE names no backend of this build), ...
        print(f"mtlinv {args.command}: {type(e).__name__}: {e}", file=sys.stderr)
        return 2 if isinstance(e, (ValueError, TypeError)) else 1  # bad input, else the device or a kernel
    except BrokenPipeError:  # the reader of stdout left (`mtlinv generate ... | head`): end quietly, as SIGPIPE would
        # Python flushes stdout again at exit, which would raise once more: point it at /dev/null first.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE


def _run(ap: argparse.ArgumentParser, args) -> int:
    if args.command in ("check", "doctor"):
        from .audit import MAX_LIMIT
        if not 1 <= args.limit <= MAX_LIMIT:
            ap.error(f"--limit must be in [1, {MAX_LIMIT}], got {args.limit}")
    if args.command == "doctor":
        from .doctor import REPORT_NAME, check_out_path, run_doctor
        out = args.out if args.out is not None else REPORT_NAME
        problem = check_out_path(out)
        if problem:
            ap.error(problem)
        return run_doctor(out, args.limit, args.quick)
    if args.command == "check":
        from .audit import run_audit
        return 0 if run_audit(args.limit, args.quick) else 1
    if args.command in ("generate", "chat"):
        return generate_cli.run(args.command, args)
    missing = generate_cli.missing_extra()
    if missing:
        print(f"mtlinv demo needs the model extra ({missing} is not installed): {generate_cli.EXTRA_HINT}",
              file=sys.stderr)
        return 2
    from .demo import run_demo
    return run_demo(prompt=args.prompt, tokens=args.tokens, k=args.k, model_path=args.model)


if __name__ == "__main__":
    sys.exit(main())
