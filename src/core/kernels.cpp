#include "kernels.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <mutex>
#include <ostream>

#include "backend.h"
#include "errors.h"

namespace mtlinv {

namespace {

// Kernels registered outside the table (tests/kernels, emulator only), ids kCount + i. Function-local statics:
// registries call in from static initialisers of other translation units. A deque keeps the names in place.
struct Outside {
  std::mutex mutex;
  std::deque<std::string> names;
};
Outside& outside() {
  static Outside o;
  return o;
}

std::optional<KernelId> table_id(const char* name) {
  const uint16_t* first = std::begin(kernel_table::kByName);
  const uint16_t* last = std::end(kernel_table::kByName);
  const uint16_t* it = std::lower_bound(first, last, name, [](uint16_t id, const char* n) {
    return std::strcmp(kernel_table::kEntries[id].name, n) < 0;
  });
  if (it == last || std::strcmp(kernel_table::kEntries[*it].name, name) != 0) return std::nullopt;
  return kernel_at(*it);
}

}  // namespace

size_t kernel_table_size() { return kernel_table::kCount; }

const char* kernel_name(KernelId id) {
  const size_t i = kernel_index(id);
  if (i < kernel_table_size()) return kernel_table::kEntries[i].name;
  Outside& o = outside();
  std::lock_guard<std::mutex> lock(o.mutex);
  return i - kernel_table_size() < o.names.size() ? o.names[i - kernel_table_size()].c_str() : "(no such kernel)";
}

std::optional<KernelId> find_kernel_id(const std::string& name) {
  if (const auto id = table_id(name.c_str())) return id;
  Outside& o = outside();
  std::lock_guard<std::mutex> lock(o.mutex);
  const auto it = std::find(o.names.begin(), o.names.end(), name);
  if (it == o.names.end()) return std::nullopt;
  return kernel_at(kernel_table_size() + static_cast<size_t>(it - o.names.begin()));
}

KernelId register_kernel_name(const char* name) {
  if (const auto id = table_id(name)) return *id;
  Outside& o = outside();
  std::lock_guard<std::mutex> lock(o.mutex);
  const auto it = std::find(o.names.begin(), o.names.end(), name);
  const size_t i = static_cast<size_t>(it - o.names.begin());
  if (it == o.names.end()) o.names.emplace_back(name);
  return kernel_at(kernel_table_size() + i);
}

size_t kernel_id_count() {
  Outside& o = outside();
  std::lock_guard<std::mutex> lock(o.mutex);
  return kernel_table_size() + o.names.size();
}

std::ostream& operator<<(std::ostream& out, KernelId id) { return out << kernel_name(id); }

std::vector<std::string> Backend::kernel_names() const {
  std::vector<std::string> names;
  const size_t count = kernel_id_count();
  for (size_t i = 0; i < count; ++i) {
    if (has_kernel(kernel_at(i))) names.push_back(kernel_name(kernel_at(i)));
  }
  std::sort(names.begin(), names.end());
  return names;
}

const char* kernel_family_name(KernelFamily family) {
  return kernel_table::kFamilyNames[static_cast<size_t>(family)];
}

namespace kernel_lookup {

void missing(KernelFamily family, const int32_t* args, int arity) {
  std::string list;
  for (int i = 0; i < arity; ++i) list += (i ? ", " : "") + std::to_string(args[i]);
  throw KernelError("internal: a plan asked for ", kernel_family_name(family), "<", list, "> (DTypes as numbers), "
                    "which no MTLINV_KERNEL line of metal/ instantiates");
}

}  // namespace kernel_lookup

}  // namespace mtlinv
