// The CUDA kernel registry: host name -> __global__ entry, filled by MTLINV_KERNEL's static Registrar objects when
// the extension is loaded (src/cuda/shim/device.cuh).
#include <algorithm>
#include <cstdio>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "launch.h"

namespace cu {
namespace {

// Function-local statics: constructed on first use, so a Registrar in any translation unit may run first. Looked
// up by name once per kernel, when the backend makes its table by kernel id (src/cuda/backend_cuda.cu).
std::unordered_map<std::string, KernelHandle>& table() {
  static std::unordered_map<std::string, KernelHandle> t;
  return t;
}

std::mutex& table_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

Registrar::Registrar(const char* name, KernelHandle entry) {
  std::lock_guard<std::mutex> lock(table_mutex());
  // Two kernels with one name mean a build mistake; keep the first rather than abort while the library loads.
  if (!table().emplace(name, entry).second) {
    std::fprintf(stderr, "mtlinv cuda: kernel %s registered twice; keeping the first\n", name);
  }
}

KernelHandle find_kernel(const std::string& name) {
  std::lock_guard<std::mutex> lock(table_mutex());
  auto it = table().find(name);
  return it == table().end() ? nullptr : it->second;
}

std::vector<std::string> kernel_names() {
  std::lock_guard<std::mutex> lock(table_mutex());
  std::vector<std::string> names;
  for (const auto& entry : table()) names.push_back(entry.first);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace cu
