// The kernel registry, filled by MTLINV_KERNEL's static Registrar objects before main() (or at dlopen).
#include <algorithm>
#include <cstdio>
#include <mutex>
#include <unordered_map>

#include "runtime.h"

namespace emu {
namespace {

// Function-local statics: constructed on first use, so a Registrar in any translation unit may run first. Looked
// up by name once per kernel, when a backend makes its table by kernel id (src/emu/backend_emu.cpp); entries stay
// put as the table grows (find_kernel returns pointers).
std::unordered_map<std::string, KernelEntry>& table() {
  static std::unordered_map<std::string, KernelEntry> t;
  return t;
}

std::mutex& table_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

Registrar::Registrar(const char* name, KernelFn fn, bool checked) {
  const char* variant = checked ? "checked" : "fast";
  if (!name || !fn) {
    std::fprintf(stderr, "mtlinv emulator: ignoring a %s kernel registration without a name or function\n", variant);
    return;
  }
  std::lock_guard<std::mutex> lock(table_mutex());
  KernelFn& slot = checked ? table()[name].checked : table()[name].fast;
  // Two kernels with one name mean a build mistake; keep the first rather than abort at load time.
  if (slot) {
    std::fprintf(stderr, "mtlinv emulator: kernel %s (%s) registered twice; keeping the first\n", name, variant);
    return;
  }
  slot = fn;
}

const KernelEntry* find_kernel(const std::string& name) {
  std::lock_guard<std::mutex> lock(table_mutex());
  auto it = table().find(name);
  return it == table().end() ? nullptr : &it->second;
}

std::vector<std::string> kernel_names() {
  std::lock_guard<std::mutex> lock(table_mutex());
  std::vector<std::string> names;
  for (const auto& entry : table()) names.push_back(entry.first);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace emu
