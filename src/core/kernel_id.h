// Kernels by id: what a launch names its kernel by. The ids and names come from one table, generated at build time
// from the MTLINV_KERNEL(...) lines of metal/*.metal (tools/kernel_table.py; plans use it through kernels.h). This
// header needs no generated file, so backends and registries (src/emu, src/cuda, objc) include it alone.
#pragma once
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace mtlinv {

// Ids 0 .. kernel_table_size() - 1 are the library's kernels (metal/), in the generated table's order. Ids past
// them are kernels a registry met outside the table: the emulator's planted kernels of tests/kernels, which tests
// launch by name.
enum class KernelId : uint16_t;
// A kernel template (gemv_nk, qgemv_mma, ...): plans pick an id from a family and its template arguments
// (kernels.h).
enum class KernelFamily : uint8_t;

size_t kernel_table_size();
constexpr size_t kernel_index(KernelId id) { return static_cast<size_t>(id); }
constexpr KernelId kernel_at(size_t index) { return static_cast<KernelId>(index); }
// The host name: the MSL function's and the registries' key.
const char* kernel_name(KernelId id);
// The id of a kernel named `name`, from the table or registered outside it; nullopt when neither.
std::optional<KernelId> find_kernel_id(const std::string& name);
// The table's id of `name`, or a new id past the table for a kernel outside it (the same id for the same name,
// whichever backend asks).
KernelId register_kernel_name(const char* name);
// Every id known: the table's and those registered outside it.
size_t kernel_id_count();

// For a backend: its kernels, each found by name once (`find(name)`, e.g. in its registry), in a table indexed by
// id, so that a launch takes its kernel by index, with no hash and no lock. A slot the backend lacks is Entry{}.
template <class Entry, class Find>
std::vector<Entry> kernels_by_id(const std::vector<std::string>& names, Find find) {
  std::vector<Entry> by_id(kernel_table_size());
  for (const std::string& name : names) {
    const size_t id = kernel_index(register_kernel_name(name.c_str()));
    if (by_id.size() <= id) by_id.resize(id + 1);
    by_id[id] = find(name);
  }
  return by_id;
}

// Writes the kernel's name (error messages build on it).
std::ostream& operator<<(std::ostream& out, KernelId id);

}  // namespace mtlinv
