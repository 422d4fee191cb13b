"""`mtlinv generate` and `mtlinv chat` on SmolLM2: the streamed text is generate()'s, the rate goes to stderr, and
a model the command cannot run exits 2 with one line."""
import pathlib
import subprocess
import sys

import pytest

import mtlinv
import mtlinv.model
from mtlinv.apps.cli import main


@pytest.fixture
def loaded(monkeypatch, smollm):
    """The command loads the model given; the tests hand it the one already loaded (the emulator imports its
    weights in tens of seconds)."""
    paths = []

    def load(path=None, progress=None, import_weights=True):
        paths.append(path)
        return smollm
    monkeypatch.setattr(mtlinv.model, "load", load)
    return paths


def test_generate_streams_the_text_and_the_rate(loaded, capsys):
    args = ["--max-tokens", "4", "--temperature", "0.8", "--top-p", "0.9", "--seed", "3", "--draft", "prompt-lookup",
            "--k", "2"]
    assert main(["generate", "Once upon a time", "--model", "x.gguf", *args]) == 0
    out, err = capsys.readouterr()
    g = mtlinv.generate(mtlinv.model.load(), "Once upon a time", max_tokens=4, temperature=0.8, top_p=0.9, seed=3,
                        k=2)
    assert out == "".join(t.text for t in g) + "\n" and loaded[0] == "x.gguf"
    assert "[4 tokens, " in err and "tokens/s after the first" in err and "draft acceptance" in err


def test_chat_keeps_the_conversation(loaded, monkeypatch, capsys):
    """Messages fed on stdin (not a terminal) get no "> " prompts among the replies on stdout (they once did)."""
    lines = iter(["What is the capital of France?", ""])
    prompts, asked = [], []
    real_generate = mtlinv.model.generate

    def generate(model, prompt, **kw):
        prompts.append(list(prompt))
        return real_generate(model, prompt, **kw)

    def ask(prompt):
        asked.append(prompt)
        return next(lines)
    monkeypatch.setattr("builtins.input", ask)
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    monkeypatch.setattr(mtlinv.model, "generate", generate)
    assert main(["chat", "--max-tokens", "3"]) == 0
    out, err = capsys.readouterr()
    assert prompts == [[{"role": "user", "content": "What is the capital of France?"}]]
    assert out.strip() and "tokens/s" in err
    assert asked == ["", ""]


def test_unsupported_model_exits_2_with_one_line(tmp_path, capsys):
    (tmp_path / "notes.gguf").write_text("not a model")
    assert main(["generate", "Hi", "--model", str(tmp_path / "notes.gguf")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("mtlinv generate: ") and "is not a GGUF file" in err
    assert "Traceback" not in err


def test_bad_sampling_option_exits_2(loaded, capsys):
    assert main(["generate", "Hi", "--top-p", "0"]) == 2
    assert capsys.readouterr().err == "mtlinv generate: top_p must be in (0, 1], got 0.0\n"


def test_directory_that_is_not_a_checkpoint_is_named(tmp_path, capsys):
    """A directory without config.json is no MLX checkpoint: said so (it was once 'model file ... is not a regular
    file', which a user who meant a checkpoint could not act on)."""
    assert main(["generate", "Hi", "--model", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (f"mtlinv generate: {tmp_path} is a directory but not an MLX checkpoint (it "
                                       f"has no config.json)\n")


def test_draft_that_is_no_name_and_no_model_names_the_option(capsys):
    """A misspelt --draft is taken for a model path; the message names the option and its choices (it once said
    only 'model file layerskip does not exist')."""
    fixture = pathlib.Path(__file__).parent / "fixtures" / "tiny-Q4_K.gguf"
    assert main(["generate", "Hi", "--model", str(fixture), "--draft", "layerskip"]) == 2
    assert capsys.readouterr().err == ("mtlinv generate: --draft must be none, prompt-lookup, layer-skip or a model, "
                                       "got 'layerskip': model file layerskip does not exist\n")


def test_chat_with_a_model_without_template_exits_before_reading(tmp_path, monkeypatch, capsys):
    """chat needs the model's template: refused before the first message is asked for (it once asked, then
    refused the answer)."""
    raw = (pathlib.Path(__file__).parent / "fixtures" / "tiny-Q4_K.gguf").read_bytes()
    path = tmp_path / "no-template.gguf"
    path.write_bytes(raw.replace(b"tokenizer.chat_template", b"tokenizer.chat_templatX"))
    monkeypatch.setattr("builtins.input", lambda _: pytest.fail("chat read a message"))
    assert main(["chat", "--model", str(path)]) == 2
    assert capsys.readouterr().err == ("mtlinv chat: no-template.gguf has no chat template; give the prompt as plain "
                                       "text\n")


def test_reader_that_leaves_ends_the_command_quietly():
    """`mtlinv generate ... | head -c 1`: once the reader has gone the command ends with SIGPIPE's status (141) and
    nothing on stderr (it once printed a BrokenPipeError's traceback)."""
    fixture = pathlib.Path(__file__).parent / "fixtures" / "tiny-Q4_K.gguf"
    p = subprocess.Popen([sys.executable, "-m", "mtlinv", "generate", "Once", "--model", str(fixture),
                          "--max-tokens", "200"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.read(1)
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 141 and err == "", err
