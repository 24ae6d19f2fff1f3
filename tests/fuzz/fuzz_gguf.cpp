// libFuzzer target: the GGUF reader must answer any byte string with a parsed file or a
// lumen::Error, never a crash, an out-of-bounds read or an unbounded allocation.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "gguf/gguf_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Copy into an exact-size heap buffer so ASan sees any read past the end.
  std::vector<uint8_t> buf(data, data + size);
  try {
    auto f = lumen::GgufFile::parse(buf.data(), buf.size(), "fuzz");
    // Touch what a loader touches: every value, every tensor's bytes.
    size_t sum = 0;
    for (auto& [k, v] : f->metadata()) sum += v.to_string().size();
    for (auto& t : f->tensors())
      if (t.n_bytes) sum += t.data[0] + t.data[t.n_bytes - 1];
    (void)sum;
  } catch (const lumen::Error&) {
  }
  return 0;
}
