// IOSurface as metal-cpp sees it (CoreFoundation/CoreFoundation.h says why it is here).
#pragma once

typedef struct __IOSurface* IOSurfaceRef;
