"""Exact seeded speculative sampling and generate(): with a seed, speculative decoding gives the tokens of plain
sampling, token for token, whatever the draft; generate() streams them with stop tokens, stop strings and
max_tokens. On a tiny model on the device (many tokens and drafts), and on SmolLM2-135M (few tokens: the
emulator runs about one forward call a second)."""
import numpy as np
import pytest

import mtlinv
from mtlinv.model import ReferenceModel, Sampler, decoding
from mtlinv.model.device_model import DeviceModel, DeviceWeights
from mtlinv.model.prompt_lookup import PromptLookupDraft

SEEDS = (0, 1, 2024)
TEMPERATURES = (0.7, 1.0)
TOP_P = 0.9


def run(target, draft, prompt, n, k, sampler, draft_sampler=None):
    counts = decoding.Counts()
    tokens = [t for step in decoding.stream(target, draft, prompt, n, k, None, sampler, draft_sampler, counts)
              for t in step]
    return tokens, counts


@pytest.fixture(scope="module")
def tiny(make_weights):
    w = make_weights(seed=3, n_layers=3, hidden=128, n_heads=2, n_kv_heads=1, vocab=64)
    return DeviceWeights.from_reference(w)


@pytest.mark.parametrize("temperature", TEMPERATURES)
def test_tiny_model_speculative_sampling_equals_plain_sampling(tiny, temperature):
    """3 seeds x 3 prompts x k in {2, 4}, a layer-skipping draft (sampled with the target's noise) and prompt
    lookup: every run gives the plain run's 24 tokens, and the drafts' proposals are both taken and refused."""
    n, accepted, refused = 16, 0, 0
    for seed in SEEDS:
        sampler = Sampler(temperature, top_p=TOP_P, seed=seed)
        for prompt in ([3, 14, 15, 9, 2], [7, 7, 7], [60, 1, 33, 8, 41, 12, 5]):
            for k in (2, 4):
                capacity = len(prompt) + n + k + 2
                target = DeviceModel(tiny, capacity)
                with mtlinv.batch_invariant(k + 1):
                    plain, _ = run(target, None, prompt, n, k, sampler)
                    for draft, draft_sampler in ((DeviceModel(tiny, capacity, skip_layers=[1]), None),
                                                 (PromptLookupDraft(64), Sampler())):
                        spec, c = run(target, draft, prompt, n, k, sampler, draft_sampler)
                        assert spec == plain, f"seed {seed}, T {temperature}, prompt {prompt}, k {k}"
                        accepted += c.accepted
                        refused += c.proposed - c.accepted
        assert len(set(plain)) > 3, "sampling should not collapse to one token"
    assert accepted > 0 and refused > 0, "the drafts should have proposals taken and proposals refused"


class RunningStreamSampler:
    """Sampling from one running random stream, as mlx-lm's samplers do from a process-global state: the noise of a
    position depends on how many draws came before it."""

    def __init__(self, temperature, seed):
        self.temperature, self.rng = temperature, np.random.default_rng(seed)

    def choose(self, logits, position):
        g = -np.log(-np.log(self.rng.random(len(logits))))
        return int(np.argmax(np.asarray(logits, np.float64) / self.temperature + g))

    def __call__(self, logits, positions):
        return [self.choose(row, p) for row, p in zip(logits, positions)]


def test_a_running_random_stream_breaks_speculative_sampling(tiny_weights):
    """Negative control, on the float64 reference whose rows are exact: with noise drawn from one running stream
    the speculative run differs from the plain one (the draft's and the verification's draws shift the stream),
    so the equality above is a property of the (seed, position) noise, which the test can tell apart."""
    prompt, n, k = [3, 141, 59, 26, 5], 24, 3
    plain, _ = run(ReferenceModel(tiny_weights, row_by_row=True), None, prompt, n, k, RunningStreamSampler(1.0, 5))
    spec, _ = run(ReferenceModel(tiny_weights, row_by_row=True), ReferenceModel(tiny_weights, skip_layers=[2]),
                  prompt, n, k, RunningStreamSampler(1.0, 5), Sampler())
    assert spec != plain
    seeded = Sampler(1.0, seed=5)
    assert run(ReferenceModel(tiny_weights, row_by_row=True), ReferenceModel(tiny_weights, skip_layers=[2]),
               prompt, n, k, seeded)[0] == run(ReferenceModel(tiny_weights, row_by_row=True), None, prompt, n, k,
                                               seeded)[0]


PROMPTS = ("Once upon a time", "My favourite colour is", "The best way to")


@pytest.mark.slow
@pytest.mark.parametrize("prompt", PROMPTS)
def test_real_model_speculative_sampling_equals_plain_sampling(smollm, prompt):
    """SmolLM2: 3 seeds x T in {0.7, 1.0} with top-p 0.9 for each of 3 prompts: generate() with a prompt-lookup
    draft gives plain sampling's tokens (3 tokens: the emulator is slow; the GPU runs this with more)."""
    outputs = set()
    for seed in SEEDS:
        for t in TEMPERATURES:
            args = dict(max_tokens=3, temperature=t, top_p=TOP_P, seed=seed, k=2, stop_tokens=())
            plain = [tok.id for tok in mtlinv.generate(smollm, prompt, **args)]
            spec = mtlinv.generate(smollm, prompt, draft="prompt-lookup", **args)
            assert [tok.id for tok in spec] == plain, f"seed {seed}, T {t}"
            assert spec.counts.proposed > 0
            outputs.add(tuple(plain))
    assert len(outputs) > 1, "different seeds and temperatures should sample different continuations"


@pytest.mark.slow
def test_real_model_layer_skip_draft_sampling(smollm):
    args = dict(max_tokens=4, temperature=1.0, top_p=TOP_P, seed=11, k=3, stop_tokens=())
    plain = [tok.id for tok in mtlinv.generate(smollm, PROMPTS[0], **args)]
    spec = mtlinv.generate(smollm, PROMPTS[0], draft="layer-skip", **args)
    assert [tok.id for tok in spec] == plain and spec.counts.proposed > 0


def test_generate_streams_text_and_stops(smollm):
    """The streamed pieces add up to the text; a stop string ends it (left out), max_tokens ends it as "length"."""
    g = mtlinv.generate(smollm, "What is the capital of France?", chat=True, max_tokens=6)
    pieces = [tok.text for tok in g]
    assert "".join(pieces) == g.text == smollm.tokenizer.decode(g.tokens, skip_special=True)
    assert g.finish_reason == "length" and len(g.tokens) == 6 and g.tokens_per_s > 0
    assert mtlinv.generate is mtlinv.model.generate
    # A stop string in the middle of the text: the longest piece from the third token on (the text itself is a
    # near-tie's outcome here: the float64 reference puts 'The' 0.08 above 'L' after this prompt, and bfloat16
    # activations may choose either).
    word = max(pieces[2:], key=len)
    cut = mtlinv.generate(smollm, "What is the capital of France?", chat=True, max_tokens=6, stop=[word])
    assert "".join(tok.text for tok in cut) == g.text[:g.text.index(word)] and cut.finish_reason == "stop"
    stopped = mtlinv.generate(smollm, "What is the capital of France?", chat=True, max_tokens=6,
                              stop_tokens=[g.tokens[1]])
    assert [tok.id for tok in stopped] == g.tokens[:2] and stopped.finish_reason == "stop"


def test_a_later_generation_takes_over_the_model(smollm):
    first = mtlinv.generate(smollm, "Hi", max_tokens=4)
    next(first)
    second = mtlinv.generate(smollm, "Hello", max_tokens=1)
    with pytest.raises(RuntimeError, match="a model runs one generation at a time"):
        next(first)
    assert len(list(second)) == 1


@pytest.mark.parametrize("kwargs, message", [
    (dict(max_tokens=0), "max_tokens must be an int >= 1, got 0"),
    (dict(k=0), "k must be an int >= 1, got 0"),
    (dict(stop=[""]), "stop must be non-empty strings"),
    (dict(draft="tree"), "draft must be None, 'prompt-lookup', 'layer-skip' or a Model, got 'tree'"),
    (dict(temperature=-0.5), "temperature must be a finite number >= 0, got -0.5"),
    (dict(max_tokens=9000), r"need \d+ positions; the model's context holds 8192"),
])
def test_generate_arguments_are_checked(smollm, kwargs, message):
    with pytest.raises(ValueError, match=message):
        mtlinv.generate(smollm, "Hi", **kwargs)


def test_generate_token_prompt_is_checked(smollm):
    with pytest.raises(ValueError, match=r"prompt: 49152 is not a token id in \[0, 49152\)"):
        mtlinv.generate(smollm, [1, 49152])
    with pytest.raises(ValueError, match="the prompt is empty"):
        mtlinv.generate(smollm, "")
    with pytest.raises(ValueError, match="prompt is not valid UTF-8 at character 3"):  # it once said "text"
        mtlinv.generate(smollm, "caf\udce9")


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(chat="yes"), TypeError, "chat must be True or False, got 'yes'"),  # once taken as true
    (dict(chat=True, system=5), TypeError, "system must be text or None, got int 5"),  # once an AttributeError
    (dict(chat=True, system="caf\udce9"), ValueError, "system is not valid UTF-8 at character 3"),
])
def test_generate_chat_and_system_are_checked(smollm, kwargs, error, message):
    with pytest.raises(error, match=message):
        mtlinv.generate(smollm, "Hi", **kwargs)


@pytest.mark.parametrize("prompt", [None, 7, b"Hi", bytearray(b"Hi")])
def test_generate_prompt_of_no_kind_it_takes_is_named(smollm, prompt):
    """None and an int once ended in len()'s TypeError, and bytes passed for token ids (b"Hi" iterates as 72, 105)."""
    with pytest.raises(TypeError, match=f"prompt must be text, token ids or a list of messages, got "
                                        f"{type(prompt).__name__}"):
        mtlinv.generate(smollm, prompt)


@pytest.mark.parametrize("stop_tokens, error, message", [
    ([-1], ValueError, r"stop_tokens: -1 is not a token id in \[0, 49152\)"),  # once taken: a stop that never comes
    (49152, ValueError, r"stop_tokens: 49152 is not a token id in \[0, 49152\)"),
    ([2, "<|im_end|>"], ValueError, r"stop_tokens: '<\|im_end\|>' is not a token id"),  # once named eos_id
    ("<|im_end|>", TypeError, r"stop_tokens must be token ids, got str '<\|im_end\|>'"),  # stop takes text
    (2.0, TypeError, "stop_tokens must be token ids, got float 2.0"),
])
def test_generate_stop_tokens_are_checked(smollm, stop_tokens, error, message):
    with pytest.raises(error, match=message):
        mtlinv.generate(smollm, "Hi", stop_tokens=stop_tokens)
