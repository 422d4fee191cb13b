"""Tokenizers built from GGUF metadata encode as llama.cpp's own tokenizer does: the Llama 3 (`llama-bpe`) and
Qwen2 (`qwen2`) pre-tokenizers over a byte-level BPE vocabulary, and a SentencePiece (`llama`) vocabulary with
byte fallback. The files (tests/model/fixtures/tok-*.gguf: vocabularies without weights) and llama.cpp's ids
(reference_tokens.npz) come from tools/make_model_fixtures.py."""
import pathlib

import gguf
import numpy as np
import pytest

from mtlinv.model import Tokenizer

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
REFERENCE = np.load(FIXTURES / "reference_tokens.npz")
TEXTS = [str(t) for t in REFERENCE["texts"]]


def tokenizer(name):
    reader = gguf.GGUFReader(FIXTURES / f"{name}.gguf")
    return Tokenizer.from_metadata({k: f.contents() for k, f in reader.fields.items()}, name)


@pytest.mark.parametrize("name", ["tok-llama-bpe", "tok-qwen2", "tok-spm"])
@pytest.mark.parametrize("i", range(len(TEXTS)))
def test_encodes_as_llama_cpp(name, i):
    tok = tokenizer(name)
    ids = tok.encode(TEXTS[i])
    assert ids == REFERENCE[f"{name}/{i}"].tolist()
    assert tok.decode(ids) == TEXTS[i]


def test_the_pre_tokenizers_differ_on_these_texts():
    """The reference ids tell the two regexes apart (Llama 3 groups digits by three, Qwen2 splits them), so the
    test above checks which one each name gets."""
    assert any(REFERENCE[f"tok-llama-bpe/{i}"].tolist() != REFERENCE[f"tok-qwen2/{i}"].tolist()
               for i in range(len(TEXTS)))
