"""The GGUF byte-level BPE tokenizer: on a hand-made vocabulary, then on SmolLM2's."""

import pytest
from tokenizers import pre_tokenizers

from mtlinv.model import Tokenizer

ROUND_TRIPS = [
    "Hello",
    "Hello, world!",
    "  leading and  double  spaces, trailing ",
    "tabs\tand\nnew\n\nlines\r\n",
    "naïve café, Straße, Ελληνικά, русский, 日本語, 한국어",
    "emoji 🙂👍🏽 and math ∑ x² ≤ ∞",
    "digits 1234567890 and 3.14159",
    "code: def f(x): return x ** 2  # comment",
]


@pytest.fixture(scope="module")
def toy():
    """The 256 byte symbols, three merges and two control tokens."""
    tokens = sorted(pre_tokenizers.ByteLevel.alphabet()) + ["he", "hel", "Ġw", "<|im_start|>", "<|im_end|>"]
    types = [1] * (len(tokens) - 2) + [3, 3]
    return Tokenizer(tokens, ["h e", "he l", "Ġ w"], types, bos_id=len(tokens) - 2, eos_id=len(tokens) - 1,
                     pre="smollm")


def test_toy_applies_merges_in_rank_order(toy):
    v = toy.vocab
    assert toy.encode("hello") == [v["hel"], v["l"], v["o"]]
    assert toy.encode("hello world")[2:4] == [v["o"], v["Ġw"]]


def test_toy_splits_digits_and_matches_control_tokens(toy):
    assert toy.encode("2024") == [toy.vocab[d] for d in "2024"]
    assert toy.encode("<|im_start|>hel<|im_end|>") == [toy.bos_id, toy.vocab["hel"], toy.eos_id]
    assert toy.decode([toy.bos_id, toy.vocab["hel"]], skip_special=True) == "hel"


@pytest.mark.parametrize("text", ROUND_TRIPS)
def test_toy_round_trips(toy, text):
    assert toy.decode(toy.encode(text)) == text


def test_unknown_pre_tokenizer_is_refused():
    with pytest.raises(ValueError, match="'deepseek-coder'"):
        Tokenizer(["a"], [], [1], 0, 0, pre="deepseek-coder")


@pytest.mark.parametrize("kind, message", [
    (None, "m.gguf: the file has no tokenizer \\(no tokenizer.ggml.model key\\)"),  # once "... is None"
    ("bert", "m.gguf: tokenizer.ggml.model is 'bert'; supported: 'gpt2'"),
])
def test_gguf_without_a_tokenizer_of_ours_is_named(kind, message):
    md = {} if kind is None else {"tokenizer.ggml.model": kind}
    with pytest.raises(ValueError, match=message):
        Tokenizer.from_metadata(md, "m.gguf")


@pytest.mark.parametrize("text", ROUND_TRIPS)
def test_smollm2_round_trips(tokenizer, text):
    assert tokenizer.decode(tokenizer.encode(text)) == text


def test_smollm2_known_ids(tokenizer, gguf_model):
    # Whole words are single vocabulary entries, so their ids can be read from the GGUF's token list directly.
    vocab_list = gguf_model.metadata["tokenizer.ggml.tokens"]
    assert tokenizer.encode("Hello") == [19556] and vocab_list[19556] == "Hello"
    assert tokenizer.encode("Hello world") == [19556, 905] and vocab_list[905] == "Ġworld"
    assert tokenizer.encode(" Hello") == [vocab_list.index("ĠHello")]
    pieces = ["What", "Ġis", "Ġthe", "Ġcapital", "Ġof", "ĠFrance", "?"]
    assert tokenizer.encode("What is the capital of France?") == [vocab_list.index(p) for p in pieces]
    assert tokenizer.encode("2024") == [vocab_list.index(d) for d in "2024"]  # SmolLM2 splits every digit


SMOLLM2_DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def test_smollm2_chat_template(chat_model, tokenizer):
    """SmolLM2's own template (from the GGUF, rendered by jinja2) adds its default system turn when none is given."""
    ids = chat_model.chat_prompt("Hi there")
    assert (tokenizer.bos_id, tokenizer.eos_id) == (1, 2)  # <|im_start|>, <|im_end|>
    assert ids[0] == tokenizer.bos_id and ids.count(tokenizer.eos_id) == 2
    assert tokenizer.decode(ids) == (f"<|im_start|>system\n{SMOLLM2_DEFAULT_SYSTEM}<|im_end|>\n"
                                     "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n")
    with_system = tokenizer.decode(chat_model.chat_prompt("Hi", system="Be brief."))
    assert with_system == "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    assert chat_model.stop_ids == {2}


def test_bad_vocabulary_metadata_is_named():
    tokens = ["a", "b", "ab"]
    with pytest.raises(ValueError, match="merge 'ab' is not 'left right'"):
        Tokenizer(tokens, ["ab"], [1, 1, 1], 0, 1)
    with pytest.raises(ValueError, match=r"eos_token_id=1000000 is outside the vocabulary \[0, 3\)"):
        Tokenizer(tokens, ["a b"], [1, 1, 1], 0, 1_000_000)
    with pytest.raises(ValueError, match="2 token types for 3 tokens"):
        Tokenizer(tokens, ["a b"], [1, 1], 0, 1)


def test_bad_ids_and_text(toy):
    for ids, bad in (([10**6], "1000000"), ([1, -1], "-1"), ([1.5], "1.5")):
        with pytest.raises(ValueError, match=f"decode: id {bad} is not a token id"):
            toy.decode(ids)  # once: out-of-range ids were dropped silently, -1 an OverflowError
    with pytest.raises(ValueError, match=r"text is not valid UTF-8 at character 3: '\\udce9'"):
        toy.encode("caf\udce9")  # what argv gives for the byte 0xe9 of a Latin-1 terminal
