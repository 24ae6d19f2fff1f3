#include "core/system_memory.h"

#include <fstream>
#include <string>

namespace lumen {

int64_t available_memory() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  int64_t value = 0;
  while (in >> key >> value >> unit)
    if (key == "MemAvailable:") return value * 1024;
  return 0;
}

}  // namespace lumen
