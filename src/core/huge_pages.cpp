#include "core/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>

namespace lumen {

namespace {
constexpr size_t kHuge = size_t{2} << 20;
constexpr size_t kPage = size_t{4} << 10;
}  // namespace

size_t huge_mapping_size(size_t n_bytes) {
  const size_t unit = n_bytes >= kHuge ? kHuge : kPage;
  const size_t n = n_bytes == 0 ? 1 : n_bytes;
  return (n + unit - 1) / unit * unit;
}

void* map_huge(size_t n_bytes, bool reserve) {
  const size_t size = huge_mapping_size(n_bytes);
  const int flags = MAP_PRIVATE | MAP_ANONYMOUS | (reserve ? 0 : MAP_NORESERVE);
  if (size < kHuge) {
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, flags, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
  }
  // One huge page more than needed, then the ends unmapped so the buffer starts on a 2 MiB
  // boundary (transparent huge pages need aligned 2 MiB ranges).
  void* raw = mmap(nullptr, size + kHuge, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHuge - 1) & ~(uintptr_t{kHuge} - 1);
  if (aligned > start) munmap(raw, aligned - start);
  const uintptr_t end = start + size + kHuge;
  if (end > aligned + size) munmap(reinterpret_cast<void*>(aligned + size), end - (aligned + size));
  void* p = reinterpret_cast<void*>(aligned);
#ifdef MADV_HUGEPAGE
  madvise(p, size, MADV_HUGEPAGE);  // advice only: without it the memory still works
#endif
  return p;
}

void unmap_huge(void* p, size_t n_bytes) {
  if (p) munmap(p, huge_mapping_size(n_bytes));
}

}  // namespace lumen
