"""`mtlinv generate` and `mtlinv chat`: text from a model on the active device, streamed as it comes, with the
decoding rate at the end (on stderr, so that stdout holds the text alone)."""
from __future__ import annotations

import argparse
import sys

EXTRA_HINT = 'pip install "mtlinv[model]"'
_EXTRA_MODULES = ("gguf", "tokenizers", "jinja2")


def missing_extra() -> str | None:
    """The first module of the model extra that does not import, or None."""
    for name in _EXTRA_MODULES:
        try:
            __import__(name)
        except ImportError:
            return name
    return None


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options generate and chat share."""
    p.add_argument("--model", default=None, metavar="PATH",
                   help="a GGUF file or an MLX checkpoint directory (default: SmolLM2-135M-Instruct, fetched "
                        "once); see docs/models.md")
    p.add_argument("--max-tokens", type=int, default=256, help="most tokens per reply (default 256)")
    p.add_argument("--temperature", type=float, default=0.0, help="0 (default): greedy; otherwise sample")
    p.add_argument("--top-k", type=int, default=0, help="sample among the k most likely tokens (0: all)")
    p.add_argument("--top-p", type=float, default=1.0, help="sample among the most likely tokens of this mass")
    p.add_argument("--min-p", type=float, default=0.0, help="drop tokens below min-p times the likeliest's probability")
    p.add_argument("--seed", type=int, default=0, help="the sampling seed (default 0): same seed, same text")
    p.add_argument("--stop", action="append", default=[], metavar="TEXT", help="end the text at TEXT (repeatable)")
    p.add_argument("--draft", default="none", metavar="DRAFT",
                   help="speculative decoding with this draft: none (default), prompt-lookup, layer-skip, or the "
                        "path of a smaller model with the same vocabulary (the text is the same as without)")
    p.add_argument("--k", type=int, default=4, help="draft tokens per verification call (default 4)")
    p.add_argument("--system", default=None, help="a system message (chat format)")


def _options(args, draft) -> dict:
    return dict(max_tokens=args.max_tokens, temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
                min_p=args.min_p, seed=args.seed, stop=args.stop, k=args.k, draft=draft)


def _draft(args, load):
    """None, a draft's name, or a loaded draft model."""
    from ..model import GGUFModelError, ModelFetchError
    from ..model.generation import DRAFTS
    if args.draft == "none":
        return None
    if args.draft in DRAFTS:
        return args.draft
    try:
        return load(args.draft)
    except (ModelFetchError, GGUFModelError) as e:  # a misspelt draft name would read as a missing model file
        raise type(e)(f"--draft must be none, {', '.join(DRAFTS)} or a model, got {args.draft!r}: {e}") from None


def _stream(generation) -> None:
    out = sys.stdout
    for token in generation:
        out.write(token.text)
        out.flush()
    out.write("\n")
    c = generation.counts
    spec = f", draft acceptance {c.accepted}/{c.proposed}" if c.proposed else ""
    print(f"[{len(generation.tokens)} tokens, {generation.tokens_per_s:.2f} tokens/s after the first (which took "
          f"{generation.time_to_first_token:.2f} s){spec}; finished: {generation.finish_reason}]", file=sys.stderr)


def run(command: str, args) -> int:
    """Runs `mtlinv generate` or `mtlinv chat`; 2 on bad input or a model it cannot run, with one line on stderr."""
    missing = missing_extra()
    if missing:
        print(f"mtlinv {command} needs the model extra ({missing} is not installed): {EXTRA_HINT}", file=sys.stderr)
        return 2
    from ..model import GGUFModelError, ModelFetchError, generate, load
    from ..model.chat_template import ChatTemplateError  # MLXCheckpointError is a GGUFModelError
    try:
        model = load(args.model)
        options = _options(args, _draft(args, load))
        if command == "generate":
            g = generate(model, args.prompt, chat=args.chat or args.system is not None, system=args.system,
                         **options)
            _stream(g)
            return 0
        return _chat(model, args, options)
    except (ModelFetchError, GGUFModelError, ChatTemplateError, ValueError) as e:
        print(f"mtlinv {command}: {e}", file=sys.stderr)
        return 2


def _chat(model, args, options) -> int:
    from ..model import generate
    model.chat_template  # noqa: B018 (a model without one is refused before the user types a message)
    messages = [{"role": "system", "content": args.system}] if args.system is not None else []
    print(f"{model.name}: type a message, an empty line to end", file=sys.stderr)
    # input() writes its prompt to stdout: from a terminal only, so that messages fed on stdin leave the replies alone
    prompt = "> " if sys.stdin.isatty() else ""
    while True:
        try:
            line = input(prompt)
        except EOFError:
            return 0
        if not line.strip():
            return 0
        messages.append({"role": "user", "content": line})
        g = generate(model, messages, **options)
        _stream(g)
        messages.append({"role": "assistant", "content": g.text})
