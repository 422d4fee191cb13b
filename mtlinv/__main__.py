"""python -m mtlinv: the `mtlinv` command (generate, chat, demo, check, doctor, --version: mtlinv/apps/cli.py), and
--cmake-dir | --include-dir | --library-dir | --pkgconfig-dir: where the package's C/C++ library lies
(mtlinv/_paths.py)."""
import sys

from . import _paths

if len(sys.argv) == 2 and sys.argv[1] in _paths.FLAGS:
    sys.exit(_paths.main())
from .apps.cli import main  # noqa: E402 (the path flags answer without importing the command's modules)

sys.exit(main())
