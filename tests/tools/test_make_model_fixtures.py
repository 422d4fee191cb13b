"""tools/make_model_fixtures.py writes again the very weights of the committed GGUF fixtures: its F32 model's norm
weights and biases (which llama.cpp's quantiser keeps in F32) equal the files', for the K-quant files and for the
qwen2, qwen3 and Llama 3 files, each made from its own random draws."""
import pathlib

import pytest

gguf = pytest.importorskip("gguf")
import numpy as np  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "model" / "fixtures"


def _f32_tensors(path):
    return {t.name: np.array(t.data) for t in gguf.GGUFReader(str(path)).tensors
            if t.tensor_type == gguf.GGMLQuantizationType.F32}


@pytest.mark.parametrize("fixture, arch, arch_draws", [
    ("tiny-Q6_K.gguf", "llama", False), ("tiny-Q4_K_M.gguf", "llama", False),
    ("tiny-qwen2-Q4_K.gguf", "qwen2", True), ("tiny-qwen3-Q4_K.gguf", "qwen3", True)])
def test_the_script_writes_the_committed_weights(tmp_path, fixture, arch, arch_draws, load_script):
    f32 = tmp_path / "f32.gguf"
    load_script("tools/make_model_fixtures.py").write_f32(f32, arch, arch_draws=arch_draws)
    written, committed = _f32_tensors(f32), _f32_tensors(FIXTURES / fixture)
    one_d = [name for name, a in committed.items() if a.ndim == 1 and name != "rope_freqs.weight"]
    assert any(n.startswith("blk.1.") for n in one_d), one_d  # the second layer: where the draws once drifted
    for name in one_d:
        np.testing.assert_array_equal(written[name], committed[name], err_msg=name)
