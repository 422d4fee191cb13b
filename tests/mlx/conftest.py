import os

import pytest


@pytest.fixture(scope="session")
def mlx_ext():
    """mtlinv._mlx_ext, built once for the run (mtlinv/mlx_ext/build.py, under a file lock: one build for every
    pytest-xdist worker; a later run rebuilds only what changed). A failed build fails the tests that need it."""
    pytest.importorskip("mlx.core")
    import importlib.util
    import shutil

    import mtlinv.mlx
    from mtlinv.mlx_ext import build
    missing = [name for name, found in (("cmake", shutil.which("cmake")),
                                        ("nanobind", importlib.util.find_spec("nanobind"))) if not found]
    if missing and not os.environ.get("CI"):  # in CI the build fails instead, naming it
        pytest.skip(f"{' and '.join(missing)} not installed (the test extra installs them)")
    build.build()
    mtlinv.mlx._extension_state.clear()  # imported afresh, now that it is built
    assert mtlinv.mlx.backend() == "primitive", mtlinv.mlx.extension_error()
    from mtlinv import _mlx_ext
    return _mlx_ext


@pytest.fixture(params=["primitive", "dlpack"])
def route(request):
    """mtlinv.mlx's two routes: the MLX extension's primitives, and DLPack where the extension is not built."""
    if request.param == "primitive":
        request.getfixturevalue("mlx_ext")
    return request.param
