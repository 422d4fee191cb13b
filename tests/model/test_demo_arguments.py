"""`mtlinv demo`'s arguments are checked against the model before its weights are imported, and a model it cannot
run is reported without a traceback."""
import pathlib

import pytest
from test_reference import write_gguf

from mtlinv.apps.demo import run_demo
from mtlinv.model import GGUFModelError, load_gguf
from mtlinv.model.device_model import DeviceWeights

FIXTURES = pathlib.Path(__file__).parent / "fixtures"


def test_run_past_the_context_is_refused(model_path, capsys):
    """The KV caches are preallocated for the whole run; --tokens 20000 once started decoding past SmolLM2's 8192
    positions, and 10^7 failed only on a 3.6 GiB allocation."""
    assert run_demo("Hi", tokens=20_000, k=4, model_path=str(model_path)) == 2
    err = capsys.readouterr().err
    assert "+ --tokens 20000 + --k 4 + 2 need" in err and "the model's context holds 8192" in err


def test_prompt_that_is_not_utf8_is_refused(model_path, capsys):
    assert run_demo("caf\udce9", tokens=1, k=1, model_path=str(model_path)) == 2
    assert "mtlinv demo: prompt is not valid UTF-8 at character 3: '\\udce9'" in capsys.readouterr().err


def test_missing_or_foreign_model_file_exits_2(tmp_path, capsys):
    """No traceback for a model file that is not there or not a GGUF: a message and exit 2."""
    assert run_demo("Hi", tokens=1, k=1, model_path=str(tmp_path / "none.gguf")) == 2
    assert f"mtlinv demo: model file {tmp_path / 'none.gguf'} does not exist" in capsys.readouterr().err
    (tmp_path / "text.gguf").write_text("not a model")
    assert run_demo("Hi", tokens=1, k=1, model_path=str(tmp_path / "text.gguf")) == 2
    assert "is not a GGUF file (no GGUF magic at its start)" in capsys.readouterr().err


def test_projection_of_a_type_qgemv_does_not_take_is_named(tmp_path, make_weights):
    """load_gguf reads F32/F16/BF16 projections (the float64 reference runs them), but the device model runs its
    projections through qgemv: such a file is refused naming the first tensor, as a GGUFModelError, which the
    demo reports with exit 2 (it once ended in a ValueError's traceback after the model had loaded)."""
    write_gguf(tmp_path / "f32.gguf", make_weights(n_layers=1), {})
    with pytest.raises(GGUFModelError, match=r"blk.0.attn_q.weight: type F32: the device model runs its projections "
                                             r"through qgemv, which takes Q4_0, Q4_1, Q8_0"):
        DeviceWeights.from_gguf(load_gguf(tmp_path / "f32.gguf"))


def test_model_without_a_chat_template_takes_the_prompt_as_text(tmp_path, capsys):
    """A base model has no chat template: the demo runs its prompt as plain text (it once exited 2 telling the user
    to give a plain-text prompt, which the demo has no way to)."""
    raw = (FIXTURES / "tiny-Q4_K.gguf").read_bytes()
    path = tmp_path / "no-template.gguf"
    path.write_bytes(raw.replace(b"tokenizer.chat_template", b"tokenizer.chat_templatX"))
    assert run_demo("Once upon a time", tokens=3, k=2, model_path=str(path)) == 0
    assert "\nprompt: Once upon a time\n" in capsys.readouterr().out
