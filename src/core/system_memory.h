// What this machine can give: MemAvailable from /proc/meminfo (the engine's default KV pool,
// `lumen plan`'s default budget).
#pragma once

#include <cstdint>

namespace lumen {

// MemAvailable, in bytes; 0 when unknown.
int64_t available_memory();

}  // namespace lumen
