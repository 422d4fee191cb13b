"""The library stands alone: `import mtlinv` loads none of the layers above it (mtlinv.model, mtlinv.apps), and
its ops run with those packages made unimportable, as in an install that left them out."""
import subprocess
import sys

APP_LAYERS = ("mtlinv.model", "mtlinv.apps")

_BLOCK_APPS = f"""
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.startswith({APP_LAYERS!r}):
            raise ImportError("blocked: " + name)
sys.meta_path.insert(0, Block())
"""


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_import_loads_no_application_module():
    r = _python("import sys, mtlinv\n"
                f"print(sorted(m for m in sys.modules if m.startswith({APP_LAYERS!r})))")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_ops_run_without_the_application_packages():
    r = _python(_BLOCK_APPS + """
import numpy as np, mtlinv
x = np.ones((2, 8), np.float32); w = np.ones((4, 8), np.float32)
assert np.asarray(mtlinv.gemv(x, w, transpose=True)).tolist() == [[8.0] * 4] * 2
wq, s, b = mtlinv.quantize(np.ones((4, 64), np.float32), group_size=64, bits=4)
print("ok", np.asarray(mtlinv.qgemv(np.ones((1, 64), np.float32), wq, s, b, group_size=64, bits=4)).tolist())
""")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ok [[64.0, 64.0, 64.0, 64.0]]"), r.stdout


def test_the_blocker_blocks():
    """Negative control: the same blocker makes an application import fail, so the test above can fail."""
    r = _python(_BLOCK_APPS + "import mtlinv.apps.cli")
    assert r.returncode != 0 and "blocked: mtlinv.apps" in r.stderr
