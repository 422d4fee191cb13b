"""python -m mtlinv: the `mtlinv` command (mtlinv/apps/cli.py): generate, chat, demo, check, doctor, --version, and
the folders of the package's C/C++ library (--include-dir, --cmake-dir, --library-dir, --pkgconfig-dir)."""
import sys

from .apps.cli import main

sys.exit(main())
