// CoreGraphics' geometry as metal-cpp sees it (CoreFoundation/CoreFoundation.h says why it is here); arm64 macOS.
#pragma once

typedef double CGFloat;
struct CGSize {
  CGFloat width;
  CGFloat height;
};
typedef struct CGSize CGSize;
