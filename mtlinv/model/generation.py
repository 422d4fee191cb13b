"""generate(): text generation as a stream of tokens, greedy or sampled, plain or speculative, with a seed.

Every call runs under `mtlinv.batch_invariant(k + 1)`, with a draft or without: then a verification call of
k + 1 positions gives each position the bits a one-token step gives it, and since a token is chosen from its
position's logits with noise that depends only on (seed, position) (mtlinv.model.sampling), a speculative call
returns exactly the tokens of the plain call with the same arguments, whatever the draft.
"""
from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from os import PathLike

import mtlinv

from .._kinds import is_int
from . import decoding
from .loader import Model, draft_skip_layers, load
from .prompt_lookup import PromptLookupDraft
from .sampling import GREEDY, Sampler
from .tokenizer import require_utf8

DRAFTS = ("prompt-lookup", "layer-skip")
_INCOMPLETE = "\ufffd"  # what the tokenizer decodes bytes of an unfinished UTF-8 character to


@dataclass(frozen=True)
class GeneratedToken:
    """One generated token. text: the text it completes (empty while it is part of a UTF-8 character, or while the
    text so far may be the start of a stop string; the last token carries whatever is left). position: its
    absolute position (the prompt holds 0 .. prompt length - 1)."""

    id: int
    text: str
    position: int


class Generation:
    """The iterator generate() returns: GeneratedToken after GeneratedToken, as the target model commits them.

    After (and during) the iteration: tokens, text, finish_reason (None while running, then "stop": a stop token
    or string; "length": max_tokens reached), prompt_tokens, counts (decoding.Counts: draft proposals, acceptance,
    forward calls), time_to_first_token and tokens_per_s (of the tokens after the first)."""

    def __init__(self, model: Model, prompt_ids: list[int], max_tokens: int, sampler: Sampler, stops: frozenset[int],
                 stop_strings: tuple[str, ...], draft, k: int, draft_sampler: Sampler | None):
        self.model = model
        self.prompt_tokens = len(prompt_ids)
        self.limit = k + 1
        self.tokens: list[int] = []
        self.text = ""
        self.finish_reason: str | None = None
        self.counts = decoding.Counts()
        self.time_to_first_token: float | None = None
        self._stops, self._stop_strings, self._max_tokens = stops, stop_strings, max_tokens
        self._pending: list[int] = []
        self._emitted = 0  # characters of the decoded text given out so far
        self._t0: float | None = None
        self._t_end: float | None = None
        target = model.target(len(prompt_ids) + max_tokens + k + 2)
        model.active_generation = self  # the target's cache is the model's: one generation runs at a time
        self._rounds = decoding.stream(target, draft, prompt_ids, max_tokens, k, stops, sampler, draft_sampler,
                                       self.counts)

    def __iter__(self):
        return self

    def __next__(self) -> GeneratedToken:
        if self.finish_reason is not None:
            raise StopIteration
        if self.model.active_generation is not self:
            raise RuntimeError("a later generate() call on this model took over its KV cache: a model runs one "
                               "generation at a time (load another Model to run two)")
        if self._t0 is None:
            self._t0 = time.perf_counter()
        if not self._pending:
            # The limit is set around each step, not across the yields: the caller's own code between two tokens
            # keeps its limit.
            with mtlinv.batch_invariant(self.limit):
                self._pending = next(self._rounds)
        if self.time_to_first_token is None:
            self.time_to_first_token = time.perf_counter() - self._t0
        token = self._pending.pop(0)
        self.tokens.append(token)
        done = token in self._stops or len(self.tokens) == self._max_tokens
        text = self._new_text(done)
        if self.finish_reason is None and done:
            self.finish_reason = "stop" if token in self._stops else "length"
        if self.finish_reason is not None:
            self._t_end = time.perf_counter()
        return GeneratedToken(token, text, self.prompt_tokens + len(self.tokens) - 1)

    def _new_text(self, last: bool) -> str:
        """The text the latest token completes; sets finish_reason "stop" at a stop string (cut off before it)."""
        full = self.model.tokenizer.decode(self.tokens, skip_special=True)
        cut = min((i for i in (full.find(s, max(self._emitted - len(s) + 1, 0)) for s in self._stop_strings)
                   if i >= 0), default=-1)
        if cut >= 0:
            full, last, self.finish_reason = full[:cut], True, "stop"
        end = len(full)
        if not last:
            while end > self._emitted and full[end - 1] == _INCOMPLETE:
                end -= 1
            # Hold back a tail that may begin a stop string: it is given out only once the string cannot follow.
            end -= max((n for s in self._stop_strings for n in range(len(s) - 1, 0, -1)
                        if full[:end].endswith(s[:n])), default=0)
            end = max(end, self._emitted)
        self.text = full
        piece, self._emitted = full[self._emitted:end], end
        return piece

    @property
    def tokens_per_s(self) -> float:
        """Tokens after the first per second of the time after the first (the prompt's prefill excluded)."""
        if self._t_end is None or self.time_to_first_token is None or len(self.tokens) < 2:
            return 0.0
        return (len(self.tokens) - 1) / max(self._t_end - self._t0 - self.time_to_first_token, 1e-9)


def generate(model: Model | str | PathLike, prompt: str | Sequence[int], *, max_tokens: int = 256,
             temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0, min_p: float = 0.0, seed: int = 0,
             stop: Iterable[str] = (), stop_tokens: Iterable[int] | None = None, draft=None, k: int = 4,
             chat: bool = False, system: str | None = None) -> Generation:
    """Generates up to max_tokens tokens after `prompt`, as an iterator of GeneratedToken.

    model: a Model (mtlinv.model.load) or the path of a GGUF file. prompt: text, token ids, or a conversation (a
    list of {"role", "content"} dicts) rendered with the model's own chat template. chat: the text is one user turn
    (after a system turn when `system` is given) in that template. temperature 0 (the default) is greedy
    decoding; otherwise top_k, top_p, min_p and seed shape and fix the sampling (mtlinv.model.sampling.Sampler).
    stop: strings that end the text (left out of it). stop_tokens: ids that end it (default: the model's end of
    sequence/turn ids). draft: None, "prompt-lookup", "layer-skip" (the model without some of its layers), or
    another Model with the same vocabulary; each round it proposes k tokens that one target call verifies.
    """
    if not isinstance(model, Model):
        model = load(model)
    sampler = Sampler(temperature, top_k, top_p, min_p, seed)
    if not is_int(max_tokens) or max_tokens < 1:
        raise ValueError(f"max_tokens must be an int >= 1, got {max_tokens!r}")
    if not is_int(k) or k < 1:
        raise ValueError(f"k must be an int >= 1, got {k!r}")
    if not isinstance(chat, bool):
        raise TypeError(f"chat must be True or False, got {chat!r}")
    if system is not None:
        if not isinstance(system, str):
            raise TypeError(f"system must be text or None, got {type(system).__name__} {system!r}")
        require_utf8(system, "system")
    stop_strings = (stop,) if isinstance(stop, str) else tuple(stop)
    if any(not isinstance(s, str) or not s for s in stop_strings):
        raise ValueError(f"stop must be non-empty strings, got {stop!r}")
    stops = model.stop_ids if stop_tokens is None else frozenset(
        _token_ids("stop_tokens", [stop_tokens] if is_int(stop_tokens) else stop_tokens, model.config.vocab))
    prompt_ids = _prompt_ids(model, prompt, chat, system)
    need = len(prompt_ids) + max_tokens + k + 2
    if need > model.config.context:
        raise ValueError(f"the prompt's {len(prompt_ids)} tokens + max_tokens {max_tokens} + k {k} + 2 need {need} "
                         f"positions; the model's context holds {model.config.context}")
    made, draft_sampler = _draft(model, draft, need)
    return Generation(model, prompt_ids, max_tokens, sampler, stops, stop_strings, made, k, draft_sampler)


def _prompt_ids(model: Model, prompt, chat: bool, system: str | None) -> list[int]:
    if isinstance(prompt, str):
        require_utf8(prompt, "prompt")
        ids = model.chat_prompt(prompt, system) if chat else model.tokenizer.encode(prompt)
    elif isinstance(prompt, Sequence) and len(prompt) and all(isinstance(m, dict) for m in prompt):
        if system is not None:
            raise ValueError("system goes into the messages when the prompt is a conversation")
        ids = model.tokenizer.encode(model.render_chat(prompt))
    else:
        if chat or system is not None:
            raise ValueError("chat and system take a text prompt, not token ids")
        ids = _token_ids("prompt", prompt, model.config.vocab, "text, token ids or a list of messages")
    if not ids:
        raise ValueError("the prompt is empty (no tokens)")
    return ids


def _token_ids(name: str, ids, vocab: int, kinds: str = "token ids") -> list[int]:
    """`ids` as a list of ints, each a token id of the model; text and bytes are refused (bytes iterate as ints, so
    b"hi" would pass for two token ids). kinds: what the argument may be, for the message."""
    if isinstance(ids, (str, bytes, bytearray, memoryview)) or not isinstance(ids, Iterable):
        raise TypeError(f"{name} must be {kinds}, got {type(ids).__name__} {ids!r}")
    ids = list(ids)
    bad = next((t for t in ids if not is_int(t) or not 0 <= t < vocab), None)
    if bad is not None:
        raise ValueError(f"{name}: {bad!r} is not a token id in [0, {vocab})")
    return [int(t) for t in ids]


def _draft(model: Model, draft, capacity: int):
    """(the draft DecoderModel or None, its sampler: None for the target's)."""
    if draft is None:
        return None, None
    if draft == "prompt-lookup":
        return PromptLookupDraft(model.config.vocab), GREEDY  # one-hot logits: sampling them would blur the proposal
    if draft == "layer-skip":
        return model.decoder(capacity, skip_layers=draft_skip_layers(model.config.n_layers)), None
    if isinstance(draft, Model):
        if draft.tokenizer.vocab != model.tokenizer.vocab:
            raise ValueError(f"draft {draft.name}: its vocabulary is not the target's ({model.name})")
        return draft.decoder(capacity), None
    raise ValueError(f"draft must be None, {', '.join(repr(d) for d in DRAFTS)} or a Model, got {draft!r}")
