"""`mtlinv demo`'s arguments are checked against the model before its weights are imported."""
from mtlinv.demo import run_demo


def test_run_past_the_context_is_refused(model_path, capsys):
    """The KV caches are preallocated for the whole run; --tokens 20000 once started decoding past SmolLM2's 8192
    positions, and 10^7 failed only on a 3.6 GiB allocation."""
    assert run_demo("Hi", tokens=20_000, k=4, model_path=str(model_path)) == 2
    err = capsys.readouterr().err
    assert "+ --tokens 20000 + --k 4 + 2 need" in err and "the model's context holds 8192" in err


def test_prompt_that_is_not_utf8_is_refused(model_path, capsys):
    assert run_demo("caf\udce9", tokens=1, k=1, model_path=str(model_path)) == 2
    assert "mtlinv demo: prompt is not valid UTF-8 at character 3: '\\udce9'" in capsys.readouterr().err
