"""Where the package keeps the C/C++ library it carries, for building C and C++ programs against it (as
numpy.get_include() and pybind11.get_cmake_dir() do): the headers, the CMake package and mtlinv.pc.

    cmake -S app -B build -Dmtlinv_DIR=$(python -m mtlinv --cmake-dir)      # then find_package(mtlinv)
    PKG_CONFIG_PATH=$(python -m mtlinv --pkgconfig-dir) pkg-config --cflags --libs mtlinv

The library is a second copy of the core beside mtlinv._native, with its own state: tensors do not pass between
them. setup.py's build puts these files in the package (setup.py: package_files)."""
import pathlib
import sys

_PACKAGE = pathlib.Path(__file__).resolve().parent


def _existing(path: pathlib.Path) -> str:
    if not path.exists():
        raise FileNotFoundError(f"mtlinv: {path} is missing; this mtlinv was installed without its C/C++ library "
                                f"(build it with setup.py, which puts it there)")
    return str(path)


def get_include() -> str:
    """The include directory: #include <mtlinv/mtlinv.h> (C) or <mtlinv/mtlinv.hpp> (C++)."""
    return _existing(_PACKAGE / "include")


def get_cmake_dir() -> str:
    """The folder of mtlinvConfig.cmake: pass it as mtlinv_DIR (or add it to CMAKE_PREFIX_PATH)."""
    return _existing(_PACKAGE / "lib" / "cmake" / "mtlinv")


def get_library_dir() -> str:
    """The folder of the shared library: libmtlinv.so.MAJOR.MINOR (libmtlinv.MAJOR.MINOR.dylib on macOS), named by
    its soname; link it through pkg-config or the CMake package, which name the file."""
    return _existing(_PACKAGE / "lib")


def get_pkgconfig_dir() -> str:
    """The folder of mtlinv.pc: add it to PKG_CONFIG_PATH."""
    return _existing(_PACKAGE / "lib" / "pkgconfig")


FLAGS = {"--include-dir": get_include, "--cmake-dir": get_cmake_dir, "--library-dir": get_library_dir,
         "--pkgconfig-dir": get_pkgconfig_dir}


def print_folder(flag: str) -> int:
    """`mtlinv FLAG` (mtlinv/apps/cli.py): prints the folder FLAG names (a key of FLAGS)."""
    try:
        print(FLAGS[flag]())
    except FileNotFoundError as e:
        print(e, file=sys.stderr)
        return 1
    return 0
