"""The decoding loops on a tiny float64 model whose forward is row-invariant by construction (row_by_row), so
speculative decoding must reproduce greedy decoding exactly and any mismatch is a bug in the loops."""

import math

import numpy as np
import pytest

from mtlinv.model import ReferenceModel, first_difference, greedy, speculative

PROMPT = [3, 141, 59, 26, 5]
N_TOKENS = 40


@pytest.fixture(scope="module")
def greedy_ref(tiny_weights):
    return greedy(ReferenceModel(tiny_weights, row_by_row=True), PROMPT, N_TOKENS)


class ConstantDraft:
    """A draft that always proposes one token and checks that the loop keeps its cache contract."""

    def __init__(self, vocab, token):
        self.vocab, self.token, self.kv_len = vocab, token, 0

    def forward(self, tokens, start_pos):
        assert start_pos == self.kv_len and tokens
        self.kv_len += len(tokens)
        logits = np.zeros((len(tokens), self.vocab))
        logits[:, self.token] = 1.0
        return logits

    def rollback(self, n_valid):
        assert 0 <= n_valid <= self.kv_len
        self.kv_len = n_valid


def test_greedy_matches_recomputing_the_whole_sequence(tiny_weights, greedy_ref):
    # Without a cache: each token is the argmax after re-running everything so far from scratch.
    seq = list(PROMPT)
    for _ in range(8):
        seq.append(int(np.argmax(ReferenceModel(tiny_weights, row_by_row=True).forward(seq, 0)[-1])))
    assert greedy_ref[:8] == seq[len(PROMPT):]
    assert len(set(greedy_ref)) > 5, "the tiny model should not just repeat a token"


@pytest.mark.parametrize("k", [1, 2, 4, 7])
def test_self_draft_accepts_everything(tiny_weights, greedy_ref, k):
    target, draft = ReferenceModel(tiny_weights, row_by_row=True), ReferenceModel(tiny_weights, row_by_row=True)
    r = speculative(target, draft, PROMPT, N_TOKENS, k, reference=greedy_ref)
    assert r.tokens == greedy_ref and r.first_diff is None
    assert r.acceptance_rate == 1.0
    # Prefill, then each call commits k + 1 tokens (the last call fewer).
    assert r.target_calls == 1 + math.ceil((N_TOKENS - 1) / (k + 1))


@pytest.mark.parametrize("k", [1, 3, 5])
def test_layer_skipping_draft_gives_greedy_output(tiny_weights, greedy_ref, k):
    target = ReferenceModel(tiny_weights, row_by_row=True)
    draft = ReferenceModel(tiny_weights, skip_layers=[2])
    r = speculative(target, draft, PROMPT, N_TOKENS, k, reference=greedy_ref)
    assert r.tokens == greedy_ref and r.first_diff is None
    assert 0.0 < r.acceptance_rate < 1.0, "the test should exercise both accepted and rejected proposals"
    assert r.target_calls < N_TOKENS


def test_always_wrong_draft_still_gives_greedy_output(tiny_weights, greedy_ref):
    never = next(t for t in range(tiny_weights.config.vocab) if t not in greedy_ref)
    r = speculative(ReferenceModel(tiny_weights, row_by_row=True), ConstantDraft(tiny_weights.config.vocab, never),
                    PROMPT, N_TOKENS, 3, reference=greedy_ref)
    assert r.tokens == greedy_ref
    assert r.accepted == 0 and r.target_calls == N_TOKENS


@pytest.mark.parametrize("n_tokens", [1, 2, 3])
def test_short_outputs(tiny_weights, greedy_ref, n_tokens):
    r = speculative(ReferenceModel(tiny_weights, row_by_row=True), ReferenceModel(tiny_weights, row_by_row=True),
                    PROMPT, n_tokens, 4)
    assert r.tokens == greedy_ref[:n_tokens]


def test_stops_after_eos(tiny_weights, greedy_ref):
    eos = greedy_ref[10]
    stop = greedy_ref.index(eos)
    g = greedy(ReferenceModel(tiny_weights, row_by_row=True), PROMPT, N_TOKENS, eos_id=eos)
    assert g == greedy_ref[:stop + 1]
    for draft in (ReferenceModel(tiny_weights, row_by_row=True), ReferenceModel(tiny_weights, skip_layers=[1])):
        r = speculative(ReferenceModel(tiny_weights, row_by_row=True), draft, PROMPT, N_TOKENS, 4, eos_id=eos)
        assert r.tokens == g


def test_reports_first_difference_from_reference(tiny_weights, greedy_ref):
    wrong = list(greedy_ref)
    wrong[7] = (wrong[7] + 1) % tiny_weights.config.vocab
    r = speculative(ReferenceModel(tiny_weights, row_by_row=True), ReferenceModel(tiny_weights, row_by_row=True),
                    PROMPT, N_TOKENS, 4, reference=wrong)
    assert r.first_diff == 7


def test_first_difference():
    assert first_difference([1, 2, 3], [1, 2, 3]) is None
    assert first_difference([1, 2, 3], [1, 5, 3]) == 1
    assert first_difference([1, 2], [1, 2, 3]) == 2


def test_rejects_shared_instance(tiny_weights):
    model = ReferenceModel(tiny_weights)
    with pytest.raises(ValueError, match="separate"):
        speculative(model, model, PROMPT, 4, 2)


def test_counts_and_prompts_are_checked(tiny_weights):
    model, draft = ReferenceModel(tiny_weights), ReferenceModel(tiny_weights)
    with pytest.raises(ValueError, match=r"greedy: n_tokens must be an int >= 1, got 2.5"):
        greedy(model, PROMPT, 2.5)  # once ran and returned 3 tokens
    with pytest.raises(ValueError, match=r"speculative: k must be an int >= 1, got 0"):
        speculative(model, draft, PROMPT, 4, 0)
    assert greedy(model, np.array(PROMPT), 2) == greedy(model, PROMPT, 2)  # an array prompt (once: "ambiguous")
    with pytest.raises(ValueError, match="non-empty prompt"):
        greedy(model, np.array([], np.int64), 2)
