// The batch-invariance limit: calls with M <= limit rows (or queries) take the canonical kernels.
// One process-wide std::atomic<int>, initialised from MTLINV_BATCH_INVARIANT_LIMIT on first use. 0 (the default)
// still sends M == 1 to the canonical kernel; only rows 2..limit are affected by the setting.
#pragma once

namespace mtlinv {

// The first call of any of these reads MTLINV_BATCH_INVARIANT_LIMIT (unset or empty: 0). Each throws
// InvalidArgument while that value is unparsable or negative, so a program fails loudly instead of running with a
// silent 0.
int get_limit();
// Returns the previous value; throws InvalidArgument for n outside [0, 2^30].
int set_limit(int n);
// Only reads the variable: the Python package calls it on import.
void init_limit_from_env();
// True when a call with `rows` rows must take the canonical kernel under `limit`.
inline bool use_canonical(long long rows, int limit) { return rows <= 1 || rows <= limit; }

}  // namespace mtlinv
