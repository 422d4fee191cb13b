"""`mtlinv demo`: greedy decoding, then greedy speculative decoding with and without the batch-invariance limit,
on a real model and the active device. With limit k+1 every speculative run must reproduce the greedy tokens;
with limit 0 the verification calls (M = k+1) take the throughput kernels and may drift.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass

import mtlinv

from ..model import decoding
from ..model.device_model import DeviceModel, DeviceWeights
from ..model.fetch import ModelFetchError, load_model_path
from ..model.gguf_model import GGUFModelError, load_gguf
from ..model.prompt_lookup import PromptLookupDraft
from ..model.tokenizer import Tokenizer

# Layers a cheap draft leaves out (for SmolLM2-135M's 30 layers the best acceptance among the patterns tried).
DRAFT_SKIP_FRACTIONS = (10 / 30, 14 / 30, 18 / 30, 22 / 30, 26 / 30)


@dataclass
class Row:
    setting: str
    identical: bool
    first_diff: int | None
    acceptance: float
    tokens_per_s: float


def draft_skip_layers(n_layers: int) -> list[int]:
    return sorted({int(f * n_layers) for f in DRAFT_SKIP_FRACTIONS if int(f * n_layers) < n_layers})


def _progress(label: str):
    """A progress line on stderr: redrawn in place on a terminal, printed once at the end otherwise."""
    live = sys.stderr.isatty()

    def report(done: int, total: int) -> None:
        if live:
            print(f"\r{label}: {done}/{total}", end="" if done < total else "\n", file=sys.stderr, flush=True)
        elif done == total:
            print(f"{label}: {done}/{total}", file=sys.stderr, flush=True)
    return report


def warm_up(weights: DeviceWeights, prompt_ids: list[int], tokens: int, k: int) -> None:
    """One short untimed run down every path the timed runs take (the prompt, single steps, the draft's catch-up,
    verification of k + 1 positions, under both limits), so that one-time costs land in no setting's rate: on a GPU
    the first launch of each kernel loads it, and the first forward fills the memory cache. Without it the greedy
    run, which comes first, paid them all. It needs no more cache than the timed runs."""
    n = min(k + 2, tokens)  # k + 2: one full round of k proposals
    capacity = len(prompt_ids) + n + k + 2
    target, draft = DeviceModel(weights, capacity), DeviceModel(weights, capacity)
    for limit in (0, k + 1):
        with mtlinv.batch_invariant(limit):
            decoding.speculative(target, draft, prompt_ids, n, k)


def run_settings(weights: DeviceWeights, prompt_ids: list[int], tokens: int, k: int, eos_id: int | None,
                 out=print) -> tuple[list[int], list[Row]]:
    """Greedy once, then every (limit, draft) setting; returns the greedy tokens and one Row per setting."""
    warm_up(weights, prompt_ids, tokens, k)
    capacity = len(prompt_ids) + tokens + k + 2
    target = DeviceModel(weights, capacity)
    # Greedy decoding under the limit the speculative runs are held to: its prompt is one call of len(prompt_ids)
    # rows, which the limit makes canonical when the prompt is short, so with another limit greedy and the
    # speculative runs would start from KV caches of other bits (a 5-token prompt under limit 0 did, and limit 5
    # then drifted from it after 25-36 tokens on tiny models).
    t0 = time.perf_counter()
    with mtlinv.batch_invariant(k + 1):
        greedy = decoding.greedy(target, prompt_ids, tokens, eos_id=eos_id)
    greedy_tps = len(greedy) / (time.perf_counter() - t0)
    out(f"greedy: {len(greedy)} tokens at {greedy_tps:.2f} tokens/s")

    # The self-draft shows exactness (a rejection can only come from the verification kernels), the layer-skip
    # draft a cheaper model, and prompt lookup speed: it drafts with no forward pass, so each round costs one
    # verification call, about one decoding step, for however many proposals the target takes.
    drafts = {
        "self-draft": lambda: DeviceModel(weights, capacity),
        "layer-skip draft": lambda: DeviceModel(weights, capacity,
                                                skip_layers=draft_skip_layers(weights.config.n_layers)),
        "prompt-lookup draft": lambda: PromptLookupDraft(weights.config.vocab),
    }
    rows = [Row("greedy (reference)", True, None, 1.0, greedy_tps)]
    for limit in (0, k + 1):
        for name, make_draft in drafts.items():
            draft = make_draft()
            with mtlinv.batch_invariant(limit):
                t0 = time.perf_counter()
                r = decoding.speculative(target, draft, prompt_ids, tokens, k, eos_id=eos_id, reference=greedy)
                tps = len(r.tokens) / (time.perf_counter() - t0)
            row = Row(f"limit {limit}, {name}", r.first_diff is None and r.tokens == greedy, r.first_diff,
                      r.acceptance_rate, tps)
            out(f"  {row.setting}: identical={'yes' if row.identical else 'no'} "
                f"acceptance={row.acceptance:.2f} {tps:.2f} tokens/s")
            rows.append(row)
    return greedy, rows


def print_table(rows: list[Row], out=print) -> None:
    out(f"{'setting':<30} {'identical to greedy':>19} {'first diff':>10} {'acceptance':>10} {'tokens/s':>9}")
    for r in rows:
        diff = "-" if r.first_diff is None else str(r.first_diff)
        out(f"{r.setting:<30} {'yes' if r.identical else 'no':>19} {diff:>10} {r.acceptance:10.2f} "
            f"{r.tokens_per_s:9.2f}")


def run_demo(prompt: str, tokens: int, k: int, model_path: str | None) -> int:
    if tokens < 1 or k < 1:
        print(f"mtlinv demo: --tokens and --k must be >= 1 (got {tokens}, {k})", file=sys.stderr)
        return 2
    info = mtlinv.device_info()
    print(f"device: {info['backend']} ({info['name']})")
    try:
        path = load_model_path(model_path)
        model = load_gguf(path)
    except (ModelFetchError, GGUFModelError) as e:  # no model, or not one this demo runs: say which, no traceback
        print(f"mtlinv demo: {e}", file=sys.stderr)
        return 2
    print(f"model: {path.name}: {model.config.n_layers} layers, hidden {model.config.hidden}")
    tokenizer = Tokenizer.from_gguf(model)
    try:
        prompt_ids = tokenizer.encode_chat(prompt)
    except ValueError as e:
        print(f"mtlinv demo: {e}", file=sys.stderr)
        return 2
    k = min(k, max(tokens - 1, 1))  # a round never proposes past the last token, so a larger k only costs cache
    # Each model instance preallocates its KV cache for the whole run: it must fit the model's context.
    need = len(prompt_ids) + tokens + k + 2
    if need > model.config.context:
        print(f"mtlinv demo: the prompt's {len(prompt_ids)} tokens + --tokens {tokens} + --k {k} + 2 need {need} "
              f"positions; the model's context holds {model.config.context}", file=sys.stderr)
        return 2
    try:
        weights = DeviceWeights.from_gguf(model, progress=_progress("importing layers"))
    except GGUFModelError as e:  # a projection of a type qgemv does not take: found at the first layer
        print(f"\nmtlinv demo: {e}", file=sys.stderr)
        return 2
    greedy, rows = run_settings(weights, prompt_ids, tokens, k, tokenizer.eos_id)
    print(f"\nprompt: {prompt}\ngreedy output: {tokenizer.decode(greedy, skip_special=True)}\n")
    print_table(rows)
    if info["backend"] == "emu":
        print("\n(On the CPU emulator a verification call of k+1 positions costs about k+1 single-token steps, as a CPU\n"
              " is compute-bound, so speculative decoding is slower than greedy here; on a GPU the canonical kernels\n"
              " read the weights once for all rows. With the target as its own draft every proposal is the target's\n"
              " own token, so a rejection there can only come from the verification kernels. The prompt-lookup draft\n"
              " runs no model: it proposes what followed the context's last tokens where they occurred before.)")
    exact = all(r.identical for r in rows if r.setting.startswith(f"limit {k + 1}"))
    print(f"\nwith limit {k + 1}: speculative decoding {'reproduces' if exact else 'DOES NOT reproduce'} greedy "
          f"decoding token for token")
    return 0 if exact else 1
