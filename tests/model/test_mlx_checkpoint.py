"""MLX checkpoints as mlx-lm writes them (tests/model/fixtures/mlx-*, made by tools/make_model_fixtures.py with
mlx-lm's own model classes, quantize_model and save path), loaded without conversion: mlx-lm's logits as the
reference (token agreement and logit error: the kernels differ). Qwen 2, Qwen 3 and Llama 3's RoPE scaling, and the
refusals of what stays unsupported: test_architectures.py."""
import pathlib

import numpy as np
import pytest

import mtlinv
from mtlinv.apps.cli import main
from mtlinv.model import load
from mtlinv.model.mlx_checkpoint import Checkpoint, MLXCheckpointError, interleave_rope_rows

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
LLAMA = FIXTURES / "mlx-llama-q4"


@pytest.fixture(scope="module")
def model():
    return load(LLAMA)


def test_logits_match_mlx_lm(model):
    ref = np.load(FIXTURES / "mlx_reference_logits.npz")
    tokens = [int(t) for t in ref["tokens"]]
    got = model.decoder(len(tokens)).forward(tokens, 0)
    want = ref["mlx-llama-q4"]
    top = np.mean(np.argmax(got, -1) == np.argmax(want, -1))
    err = np.abs(got - want).max() / want.std()
    assert top >= 0.9 and err < 0.1, (top, err)


def test_rope_rows_permuted_and_nothing_requantized(model):
    """The device holds the checkpoint's own codes and scales: the tied output is the embedding's blocks as stored,
    and q's rows are the stored rows in the interleaved order (llama.cpp's permutation of HF weights)."""
    ckpt = Checkpoint(LLAMA)
    out = model.weights.output
    if not mtlinv.device_info()["matrix_units"]:  # else the tile layout holds them in another order
        assert np.array_equal(np.asarray(out.wq), ckpt.get("model.embed_tokens.weight"))
        assert np.array_equal(np.asarray(out.scales), ckpt.get("model.embed_tokens.scales").astype(np.float32))
    assert (out.group_size, out.bits) == (64, 4)
    rows = np.arange(8)[:, None]
    assert interleave_rope_rows(rows, 2)[:, 0].tolist() == [0, 2, 1, 3, 4, 6, 5, 7]


def test_tokenizer_and_template_are_the_checkpoints(model):
    ids = model.chat_prompt("Hello")
    assert model.tokenizer.decode(ids) == "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n"
    assert model.stop_ids == {299} and model.tokenizer.encode("<|im_end|>") == [299]


def test_generate_speculative_sampling_equals_plain(model):
    args = dict(max_tokens=12, temperature=1.0, top_p=0.9, seed=4, k=3, stop_tokens=())
    plain = [t.id for t in mtlinv.generate(model, "the sea", **args)]
    spec = mtlinv.generate(model, "the sea", draft="layer-skip", **args)
    assert [t.id for t in spec] == plain and spec.counts.proposed > 0


def test_command_line_with_a_draft_model_gives_the_plain_text(capsys):
    """`--draft PATH`: another model as the draft (here a second copy of the same checkpoint): the same text."""
    args = ["generate", "the sea", "--model", str(LLAMA), "--max-tokens", "8", "--temperature", "1", "--seed", "2"]
    assert main(args) == 0
    plain = capsys.readouterr()
    assert main([*args, "--draft", str(LLAMA), "--k", "3"]) == 0
    spec = capsys.readouterr()
    assert spec.out == plain.out and "draft acceptance" in spec.err
