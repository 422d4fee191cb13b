"""`mtlinv demo`: greedy decoding, then greedy speculative decoding with and without the batch-invariance limit,
and seeded speculative sampling beside plain sampling, on a real model and the active device. With limit k+1
every speculative run must reproduce its reference's tokens; with limit 0 the verification calls (M = k+1) take
the throughput kernels, whose logits differ in their bits (the demo shows the first that differs) and may drift.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass

import numpy as np

import mtlinv

from ..model import decoding
from ..model.chat_template import ChatTemplateError
from ..model.device_model import DeviceModel, DeviceWeights
from ..model.fetch import ModelFetchError
from ..model.gguf_model import GGUFModelError
from ..model.loader import draft_skip_layers, load
from ..model.prompt_lookup import PromptLookupDraft
from ..model.sampling import Sampler

# The sampled rows' settings: a common temperature and nucleus, and a fixed seed, so a rerun prints the same text.
DEMO_SAMPLER = Sampler(temperature=0.7, top_p=0.9, seed=0)


@dataclass
class Row:
    setting: str
    identical: bool
    first_diff: int | None
    acceptance: float
    tokens_per_s: float


def _progress(label: str):
    """A progress line on stderr: redrawn in place on a terminal, printed once at the end otherwise."""
    live = sys.stderr.isatty()

    def report(done: int, total: int) -> None:
        if live:
            print(f"\r{label}: {done}/{total}", end="" if done < total else "\n", file=sys.stderr, flush=True)
        elif done == total:
            print(f"{label}: {done}/{total}", file=sys.stderr, flush=True)
    return report


class _Ticking:
    """A DecoderModel that calls tick() after each forward: progress for runs that are otherwise silent."""

    def __init__(self, model, tick):
        self.model, self.tick = model, tick

    def forward(self, tokens, start_pos):
        logits = self.model.forward(tokens, start_pos)
        self.tick()
        return logits

    def rollback(self, n_valid):
        self.model.rollback(n_valid)


def warm_up(weights: DeviceWeights, prompt_ids: list[int], tokens: int, k: int, progress=None) -> None:
    """One short untimed run down every path the timed runs take (the prompt, single steps, the draft's catch-up,
    verification of k + 1 positions, under both limits), so that one-time costs land in no setting's rate: on a GPU
    the first launch of each kernel loads it (and compiles it, the first time on a machine), and the first forward
    fills the memory cache. Without it the greedy run, which comes first, paid them all. It needs no more cache than
    the timed runs. progress(done, total) is called after each forward call."""
    n = min(k + 2, tokens)  # k + 2: one full round of k proposals
    capacity = len(prompt_ids) + n + k + 2
    # Forward calls per limit, at most: the target's prefill and verifications, the draft's prefill and steps.
    total, done = 2 * (2 + 2 * (n + k)), 0

    def tick():
        nonlocal done
        done += 1
        if progress:
            progress(min(done, total - 1), total)  # total only once every run is over

    target = _Ticking(DeviceModel(weights, capacity), tick)
    draft = _Ticking(DeviceModel(weights, capacity), tick)
    for limit in (0, k + 1):
        with mtlinv.batch_invariant(limit):
            decoding.speculative(target, draft, prompt_ids, n, k)
    if progress:
        progress(total, total)


def _timed(run, limit):
    with mtlinv.batch_invariant(limit):
        t0 = time.perf_counter()
        result = run()
        return result, time.perf_counter() - t0


def run_settings(weights: DeviceWeights, prompt_ids: list[int], tokens: int, k: int, eos_id, out=print,
                 sampler: Sampler | None = None, progress=None) -> tuple[list[int], list[Row]]:
    """Greedy once, then every (limit, draft) setting; with a sampler also plain sampling and speculative sampling
    under limit k+1. Returns the greedy tokens and one Row per setting. progress: warm-up progress."""
    warm_up(weights, prompt_ids, tokens, k, progress)
    capacity = len(prompt_ids) + tokens + k + 2
    target = DeviceModel(weights, capacity)
    # Greedy decoding under the limit the speculative runs are held to: its prompt is one call of len(prompt_ids)
    # rows, which the limit makes canonical when the prompt is short, so with another limit greedy and the
    # speculative runs would start from KV caches of other bits (a 5-token prompt under limit 0 did, and limit 5
    # then drifted from it after 25-36 tokens on tiny models).
    greedy, elapsed = _timed(lambda: decoding.greedy(target, prompt_ids, tokens, eos_id=eos_id), k + 1)
    greedy_tps = len(greedy) / elapsed
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

    def add(setting, r, reference, seconds):
        row = Row(setting, r.first_diff is None and r.tokens == reference, r.first_diff, r.acceptance_rate,
                  len(r.tokens) / seconds)
        out(f"  {row.setting}: identical={'yes' if row.identical else 'no'} "
            f"acceptance={row.acceptance:.2f} {row.tokens_per_s:.2f} tokens/s")
        rows.append(row)

    for limit in (0, k + 1):
        for name, make_draft in drafts.items():
            draft = make_draft()
            r, seconds = _timed(lambda: decoding.speculative(target, draft, prompt_ids, tokens, k, eos_id=eos_id,
                                                             reference=greedy), limit)
            add(f"limit {limit}, {name}", r, greedy, seconds)
    if sampler is not None:
        # Speculative sampling: the layer-skip draft samples with the target's noise (same seed, same positions),
        # so it proposes the target's token wherever its distribution is close; the output is plain sampling's.
        plain, seconds = _timed(lambda: decoding.greedy(target, prompt_ids, tokens, eos_id=eos_id, sampler=sampler),
                                k + 1)
        label = f"T {sampler.temperature}, top-p {sampler.top_p}, seed {sampler.seed}"
        rows.append(Row(f"sampled {label} (reference)", True, None, 1.0, len(plain) / seconds))
        draft = drafts["layer-skip draft"]()
        r, seconds = _timed(lambda: decoding.speculative(target, draft, prompt_ids, tokens, k, eos_id=eos_id,
                                                         reference=plain, sampler=sampler), k + 1)
        add(f"limit {k + 1}, sampled, layer-skip draft", r, plain, seconds)
    return greedy, rows


def first_logit_difference(weights: DeviceWeights, prompt_ids: list[int], continuation: list[int], k: int):
    """Where the throughput path's bits differ: the logits of one verification call of k + 1 positions (the end of
    the prompt's continuation) under limit 0 and under limit k + 1, from the same cache. Returns None when every
    bit agrees, else (the position whose logits differ first, token id, its logit under limit 0, under limit k+1,
    the number of logits of the call that differ)."""
    ids = list(prompt_ids) + list(continuation)
    m = min(k + 1, len(ids) - 1)
    model = DeviceModel(weights, len(ids))
    with mtlinv.batch_invariant(k + 1):
        model.forward(ids[:-m], 0)
    calls = {}
    for limit in (0, k + 1):
        model.rollback(len(ids) - m)
        with mtlinv.batch_invariant(limit):
            calls[limit] = model.forward(ids[-m:], len(ids) - m)
    differ = calls[0].view(np.uint32) != calls[k + 1].view(np.uint32)
    if not differ.any():
        return None
    row, token = (int(i) for i in np.argwhere(differ)[0])
    return len(ids) - m + row, token, float(calls[0][row, token]), float(calls[k + 1][row, token]), int(differ.sum())


def print_table(rows: list[Row], out=print) -> None:
    """One line per setting; "identical" compares with the reference row above it (greedy, or plain sampling)."""
    out(f"{'setting':<46} {'identical to reference':>22} {'first diff':>10} {'acceptance':>10} {'tokens/s':>9}")
    for r in rows:
        diff = "-" if r.first_diff is None else str(r.first_diff)
        out(f"{r.setting:<46} {'yes' if r.identical else 'no':>22} {diff:>10} {r.acceptance:10.2f} "
            f"{r.tokens_per_s:9.2f}")


def run_demo(prompt: str, tokens: int, k: int, model_path: str | None) -> int:
    if tokens < 1 or k < 1:
        print(f"mtlinv demo: --tokens and --k must be >= 1 (got {tokens}, {k})", file=sys.stderr)
        return 2
    info = mtlinv.device_info()
    print(f"device: {info['backend']} ({info['name']})")
    try:
        model = load(model_path, import_weights=False)
        # A user turn in the model's template; plain text for a model without one (a base model).
        prompt_ids = model.chat_prompt(prompt) if model.template is not None else model.tokenizer.encode(prompt)
    except (ModelFetchError, GGUFModelError, ValueError) as e:
        # No model, not one this demo runs, or a prompt it cannot encode: say which, no traceback.
        print(f"mtlinv demo: {e}", file=sys.stderr)
        return 2
    print(f"model: {model.name}: {model.config.n_layers} layers, hidden {model.config.hidden}")
    k = min(k, max(tokens - 1, 1))  # a round never proposes past the last token, so a larger k only costs cache
    # Each model instance preallocates its KV cache for the whole run: it must fit the model's context.
    need = len(prompt_ids) + tokens + k + 2
    if need > model.config.context:
        print(f"mtlinv demo: the prompt's {len(prompt_ids)} tokens + --tokens {tokens} + --k {k} + 2 need {need} "
              f"positions; the model's context holds {model.config.context}", file=sys.stderr)
        return 2
    try:
        weights = model.import_weights(progress=_progress("importing layers"))
    except GGUFModelError as e:  # a projection of a type qgemv does not take: found at the first layer
        print(f"\nmtlinv demo: {e}", file=sys.stderr)
        return 2
    stops = model.stop_ids
    greedy, rows = run_settings(weights, prompt_ids, tokens, k, stops, sampler=DEMO_SAMPLER,
                                progress=_progress("warming up (the first use of each kernel loads or compiles it)"))
    print(f"\nprompt: {prompt}\ngreedy output: {model.tokenizer.decode(greedy, skip_special=True)}\n")
    print_table(rows)
    limit0 = [r for r in rows if r.setting.startswith("limit 0")]
    diff = first_logit_difference(weights, prompt_ids, greedy, k)
    if diff is None:
        print(f"\nlimit 0 and limit {k + 1} gave a verification call the same logits, bit for bit, on this device")
    else:
        position, token, v0, vk, n = diff
        print(f"\nthe throughput path's bits: one verification call of {k + 1} positions gives {n} logits that "
              f"differ between limit 0 and limit {k + 1}; the first at position {position}, token {token}: {v0!r} "
              f"(limit 0) vs {vk!r} (limit {k + 1})")
        if all(r.identical for r in limit0):
            print(f"limit 0 happens to match greedy in this run: no differing logit changed a token it kept (a "
                  f"limit-0 self-draft rejection is one that changed a proposal). On other prompts, lengths and "
                  f"devices it does (the first diff column); limit {k + 1} never lets it.")
    if info["backend"] == "emu":
        print("\n(On the CPU emulator a verification call of k+1 positions costs about k+1 single-token steps, as a CPU\n"
              " is compute-bound, so speculative decoding is slower than greedy here; on a GPU the canonical kernels\n"
              " read the weights once for all rows. With the target as its own draft every proposal is the target's\n"
              " own token, so a rejection there can only come from the verification kernels. The prompt-lookup draft\n"
              " runs no model: it proposes what followed the context's last tokens where they occurred before.)")
    exact = all(r.identical for r in rows if r.setting.startswith(f"limit {k + 1}"))
    print(f"\nwith limit {k + 1}: speculative decoding {'reproduces' if exact else 'DOES NOT reproduce'} greedy "
          f"decoding and seeded sampling token for token")
    return 0 if exact else 1
