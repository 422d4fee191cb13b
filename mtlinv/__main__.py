"""python -m mtlinv --cmake-dir | --include-dir | --library-dir | --pkgconfig-dir: where the package's C/C++
library lies (mtlinv/_paths.py)."""
import sys

from ._paths import main

sys.exit(main())
