/* mtlinv's version: the one place it is written (setup.py, pyproject's metadata and CMake read it here).
 * MAJOR changes when the C API's ABI breaks (docs/embedding.md, "Versions and ABI"); MINOR when functions are added;
 * PATCH for fixes. mtlinv_version() (mtlinv.h) returns the library's own, which may differ from the header's a
 * program was compiled with. */
#ifndef MTLINV_VERSION_H
#define MTLINV_VERSION_H

#define MTLINV_VERSION_MAJOR 0
#define MTLINV_VERSION_MINOR 2
#define MTLINV_VERSION_PATCH 0
/* One comparable number: 10000 * MAJOR + 100 * MINOR + PATCH. */
#define MTLINV_VERSION (MTLINV_VERSION_MAJOR * 10000 + MTLINV_VERSION_MINOR * 100 + MTLINV_VERSION_PATCH)

#endif /* MTLINV_VERSION_H */
