// Anonymous memory on 2 MiB boundaries, advised for transparent huge pages. The big buffers that
// are streamed every step (repacked weights, the KV cache arenas) live in it: with 4 KiB pages a
// decode step over a long context misses the TLB on every page of K/V it reads (a 16-position
// block of one head's K is 2 KiB of a page), and the page walks, not the bytes, set its time.
#pragma once

#include <cstddef>

namespace lumen {

// The bytes map_huge(n_bytes) maps: n_bytes rounded up to whole 2 MiB pages (to whole 4 KiB
// pages below 2 MiB); what unmap_huge must be given.
size_t huge_mapping_size(size_t n_bytes);

// Zeroed anonymous memory of huge_mapping_size(n_bytes) bytes, starting on a 2 MiB boundary when
// it is at least that large, advised MADV_HUGEPAGE (advice only: the kernel may still use 4 KiB
// pages). reserve = false maps with MAP_NORESERVE: pages are committed as they are first written.
// nullptr when the mapping fails.
void* map_huge(size_t n_bytes, bool reserve);
void unmap_huge(void* p, size_t n_bytes);

}  // namespace lumen
