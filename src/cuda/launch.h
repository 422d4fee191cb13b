// What the CUDA backend hands each kernel launch, by value as the one kernel parameter: the argument struct's
// bytes ([[buffer(0)]]) and the device address of every other binding; and the registry of kernels by host name
// (src/cuda/registry.cu). Shared by the host (backend_cuda.cu) and the kernels (shim/device.cuh).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace cu {

// Bindings per kernel, [[buffer(0)]] included, and bytes of the argument struct. The plans use at most 8 and
// 64 (the structs of metal/*_args.h hold only 4-byte scalars); the whole struct stays far under CUDA's 4 KiB of parameters.
constexpr int kMaxBindings = 16;
constexpr std::size_t kMaxArgBytes = 256;

struct LaunchArgs {
  alignas(16) unsigned char arg_bytes[kMaxArgBytes];  // [[buffer(0)]]: the argument struct
  void* buffers[kMaxBindings];                        // [[buffer(i)]], i >= 1; buffers[0] is unused
  // The launch is a piece of a larger grid (src/core/grid_pieces.h, which cuts y and z only): blockIdx + origin is
  // the threadgroup's position in the whole grid, whose size `grid` the kernel sees as threadgroups_per_grid.
  unsigned origin_y, origin_z;
  unsigned grid[3];
};

// The host-side handle of a registered kernel: the address of its __global__ entry.
using KernelHandle = const void*;

// Called by MTLINV_KERNEL at static initialisation, once per instantiation (src/cuda/registry.cu).
struct Registrar {
  Registrar(const char* name, KernelHandle entry);
};
KernelHandle find_kernel(const std::string& name);  // nullptr if not registered
std::vector<std::string> kernel_names();            // sorted

}  // namespace cu
