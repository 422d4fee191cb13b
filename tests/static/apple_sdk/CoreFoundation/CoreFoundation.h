// CoreFoundation as metal-cpp (the MLX macOS wheel's include/metal_cpp) sees it, for compiling mtlinv/mlx_ext's
// GPU evaluation on Linux (tests/compile/test_macos_build.py): only the type names metal-cpp's headers use, with
// the definitions of Apple's SDK for arm64 macOS.
#pragma once

typedef double CFTimeInterval;
typedef const void* CFTypeRef;
