"""The prompt-lookup draft: its proposals against a brute-force search through random forwards and rollbacks, and
speculative decoding with it reproducing greedy decoding (float64 reference; the device model at limit k + 1)."""
import numpy as np
import pytest

import mtlinv
from mtlinv.model import PromptLookupDraft, ReferenceModel, greedy, speculative
from mtlinv.model.device_model import DeviceModel, DeviceWeights


def brute_force_proposal(ctx, max_ngram):
    """The token after the latest earlier occurrence of the longest recurring suffix; the last token otherwise."""
    for n in range(min(max_ngram, len(ctx) - 1), 0, -1):
        for p in range(len(ctx) - 1, n - 1, -1):
            if ctx[p - n:p] == ctx[len(ctx) - n:]:
                return ctx[p]
    return ctx[-1]


def test_proposes_what_followed_the_latest_match():
    draft = PromptLookupDraft(vocab=10)
    logits = draft.forward([1, 2, 3, 4, 1, 2], 0)
    assert logits.shape == (6, 10) and np.array_equal(logits.sum(axis=1), np.ones(6))
    assert np.argmax(logits[-1]) == 3  # "1 2" was followed by 3
    assert np.argmax(draft.forward([9], 6)[0]) == 9  # nothing ever followed 9: the last token again
    draft.rollback(5)  # back to [1, 2, 3, 4, 1]
    assert np.argmax(draft.forward([2], 5)[0]) == 3


@pytest.mark.parametrize("max_ngram", [1, 2, 3, 5])
def test_matches_brute_force_through_rollbacks(max_ngram):
    rng = np.random.default_rng(max_ngram)
    draft, ctx = PromptLookupDraft(vocab=6, max_ngram=max_ngram), []
    for _ in range(400):
        if ctx and rng.random() < 0.3:
            n_valid = int(rng.integers(0, len(ctx) + 1))
            draft.rollback(n_valid)
            del ctx[n_valid:]
            continue
        tokens = [int(t) for t in rng.integers(0, 6, size=int(rng.integers(1, 5)))]
        logits = draft.forward(tokens, len(ctx))
        for i, t in enumerate(tokens):
            ctx.append(t)
            assert np.argmax(logits[i]) == brute_force_proposal(ctx, max_ngram), (ctx, i)
    assert draft.kv_len == len(ctx)


def test_refuses_bad_arguments():
    with pytest.raises(ValueError, match="vocab must be an int >= 1, got 0"):
        PromptLookupDraft(vocab=0)
    with pytest.raises(ValueError, match="max_ngram must be an int >= 1, got 2.5"):
        PromptLookupDraft(vocab=4, max_ngram=2.5)
    draft = PromptLookupDraft(vocab=4)
    draft.forward([1, 2], 0)
    with pytest.raises(ValueError, match="start_pos=1 but the context holds 2 tokens"):
        draft.forward([3], 1)
    with pytest.raises(ValueError, match=r"tokens\[1\]=4 is not an id in \[0, 4\)"):
        draft.forward([3, 4], 2)
    assert draft.kv_len == 2  # nothing taken in, not even the good token before the bad one
    with pytest.raises(ValueError, match="at least one token"):
        draft.forward([], 2)
    with pytest.raises(ValueError, match=r"rollback\(3\) with 2 tokens"):
        draft.rollback(3)


# A prompt that repeats itself, so that the context has n-grams to find from the first round on.
PROMPT = [3, 41, 59, 26, 5, 3, 41, 59, 26, 5, 3, 41]


def test_reference_model_output_is_greedy_and_proposals_are_taken(tiny_weights):
    reference = greedy(ReferenceModel(tiny_weights, row_by_row=True), PROMPT, 40)
    r = speculative(ReferenceModel(tiny_weights, row_by_row=True), PromptLookupDraft(tiny_weights.config.vocab),
                    PROMPT, 40, 4, reference=reference)
    assert r.tokens == reference and r.first_diff is None
    assert r.accepted > 0 and r.target_calls < 40, "the test should see proposals taken"


def test_device_model_at_limit_reproduces_greedy(make_weights):
    w = make_weights(seed=3, n_layers=2, hidden=128, n_heads=2, n_kv_heads=1, vocab=64)
    weights = DeviceWeights.from_reference(w)
    capacity = len(PROMPT) + 40 + 6
    reference = greedy(DeviceModel(weights, capacity), PROMPT, 40)
    with mtlinv.batch_invariant(5):
        r = speculative(DeviceModel(weights, capacity), PromptLookupDraft(w.config.vocab), PROMPT, 40, 4,
                        reference=reference)
    assert r.tokens == reference and r.first_diff is None
    assert r.accepted > 0
