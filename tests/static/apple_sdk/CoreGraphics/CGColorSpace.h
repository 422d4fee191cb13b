// CoreGraphics' color space as metal-cpp sees it (CoreFoundation/CoreFoundation.h says why it is here).
#pragma once

typedef struct CGColorSpace* CGColorSpaceRef;
