"""The `mtlinv` command: `mtlinv check` (bitwise audit of every op) and `mtlinv demo` (exact speculative
decoding on a real model)."""
from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="mtlinv", description="batch-invariant inference kernels")
    sub = ap.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="bitwise invariance audit of every op on the active device")
    check.add_argument("--limit", type=int, default=8, help="largest M checked (default 8, at most 256)")
    check.add_argument("--quick", action="store_true", help="smaller shapes")
    demo = sub.add_parser("demo", help="greedy vs speculative decoding on a real model")
    demo.add_argument("--prompt", default="Write a short story about a robot who learns to paint.")
    demo.add_argument("--tokens", type=int, default=48, help="tokens to generate (default 48)")
    demo.add_argument("--k", type=int, default=4, help="draft tokens per speculative step (default 4)")
    demo.add_argument("--model", default=None, help="path of a llama-architecture GGUF (default: SmolLM2-135M)")
    args = ap.parse_args(argv)

    if args.command == "check":
        from .audit import MAX_LIMIT
        if not 1 <= args.limit <= MAX_LIMIT:
            ap.error(f"--limit must be in [1, {MAX_LIMIT}], got {args.limit}")
        from .audit import run_audit
        return 0 if run_audit(args.limit, args.quick) else 1
    from .demo import run_demo
    return run_demo(prompt=args.prompt, tokens=args.tokens, k=args.k, model_path=args.model)


if __name__ == "__main__":
    sys.exit(main())
