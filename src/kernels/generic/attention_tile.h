// The attention tile's skeleton (kernels/attention.h), written once over an ISA's SIMD layer V
// (avx2::Vf, avx512::Vf) and its attention traits A, and instantiated by that ISA's
// translation unit: the scratch layout, the walk over key blocks of kAttentionKeyBlock
// positions with the next block's rows fetched one block ahead (and prefetched over this
// block's row passes), the K/V element
// loaders and stagers (every K/V type dequantized to F32 exactly as kv_row_to_float), a
// block-type K's queries rounded to Q8_0 (attention.h: kv_k_meets_q8), and the final
// normalisation. What differs per ISA is A:
//  - A::kRows: how many rows one pass over the staged block serves: a query's heads, or the
//    heads of several consecutive queries where a group is smaller (each row with its own keys);
//  - A::stage_k_for(type): how K is staged (AVX2 row-major like V; AVX-512 transposed);
//  - A::kQ8: whether its scores against a block-type K take the queries as the unpacked Q8_0
//    (attention_query_q8) and integer dot products; else as the floats d * q of that rounding;
//  - A::rows_block: the scores (soft-capped with softcap > 0), online softmax and P.V of those
//    rows against the block, issuing its share of the next block's prefetches (Ahead);
//  - A::v_in_place(type, dv, passes): whether the row passes read V's slices where they are
//    stored (Values) instead of a staged F32 copy.
// Every step a row takes depends only on that row (its query, its key range [kv_begin, n_kv)),
// never on the other rows of its pass or the other queries of the tile (a pass walks the union
// of its rows' keys, a row's keys outside its own range weigh exactly 0), so a query gets the
// same bits in decode and in prefill. Free of library inline code (no std:: containers or
// algorithms); internal linkage (an unnamed namespace).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/attention.h"
#include "kernels/generic/vec_math.h"

namespace lumen::attention_tile {
namespace {

constexpr int64_t kB = kAttentionKeyBlock;

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t round16(int64_t n) { return (n + 15) / 16 * 16; }

struct Row {  // one query row's running state, and its keys [lo, nk) of the current block
  float* o;   // output accumulator, dvp floats
  float* m;   // running max
  float* l;   // running sum of exp
  int64_t lo, nk;
};

// A head slice of n elements -> floats at dst, zero-padded to round16(n): the same floats as
// kv_row_to_float. The type is read only by the fallback for types without a SIMD stager.
using LineFn = void (*)(GgmlType t, const uint8_t* slice, int64_t n, float* dst);
// The next key block's K and V head slices, prefetched a few cache lines at a time over this
// block's row passes (A::rows_block), K then V slice by slice. Without them the tile waits on
// every block (the hardware prefetcher does not run ahead of a tile that computes between its
// loads: ~2.5x slower at 4,096 keys even over the KV arena's long runs), and a burst of
// prefetches stalls on the core's miss buffers: a block's prefetches issued while it was staged
// (a third of its time) left the row passes with nothing in flight; spread over the row passes
// the misses overlap the arithmetic (TinyLlama's attention at 4,096 keys, DRAM-resident, two
// threads: ~295 -> ~245 us per layer).
struct Ahead {
  const uint8_t* const* k = nullptr;  // the next block's slices, n of each (n = 0: last block)
  const uint8_t* const* v = nullptr;
  int64_t n = 0;
  int64_t k_lines = 0, v_lines = 0;  // cache lines of one slice
  int64_t j = 0, line = 0;           // cursor: slice j, line `line` of its K then its V lines

  int64_t total() const { return n * (k_lines + v_lines); }
  // Prefetches the next `count` lines.
  void lines(int64_t count) {
    for (; count > 0 && j < n; count--) {
      const uint8_t* p = line < k_lines ? k[j] + line * 64 : v[j] + (line - k_lines) * 64;
      __builtin_prefetch(p, 0, 3);
      if (++line == k_lines + v_lines) line = 0, j++;
    }
  }
};

// The block's V as the row passes read it: staged (F32 rows dvp floats apart in `staged`) or,
// where the ISA's A::v_in_place said so, in place (`rows`: the fetched slices, of `type`).
// Converting an element type to F32 is exact, so both give the same bits.
struct Values {
  const float* staged = nullptr;
  const uint8_t* const* rows = nullptr;
  GgmlType type = GgmlType::F32;
};

// Slices [lo, nb) of a block (the ones fetched) -> buf in the stager's layout.
using RowsFn = void (*)(GgmlType t, const uint8_t* const* slices, int64_t lo, int64_t nb, int64_t n, float* buf);

template <class V>
struct Stage {
  using F = typename V::F;

  // Loaders of the element types: elements [e, e + min(n, kLanes)) of a stored slice (n >= 1)
  // as floats, zero beyond n; full: kLanes elements (plain loads, the common case).
  struct LoadF32 {
    static F full(const uint8_t* row, int64_t e) { return V::loadu(reinterpret_cast<const float*>(row) + e); }
    static F load(const uint8_t* row, int64_t e, int64_t n) {
      return V::load_m(V::mask(n), reinterpret_cast<const float*>(row) + e);
    }
  };
  struct LoadF16 {
    static F full(const uint8_t* row, int64_t e) { return V::load_f16_part(reinterpret_cast<const uint16_t*>(row) + e, V::kLanes); }
    static F load(const uint8_t* row, int64_t e, int64_t n) {
      return V::load_f16_part(reinterpret_cast<const uint16_t*>(row) + e, n);
    }
  };
  struct LoadBF16 {
    static F full(const uint8_t* row, int64_t e) { return V::load_bf16_part(reinterpret_cast<const uint16_t*>(row) + e, V::kLanes); }
    static F load(const uint8_t* row, int64_t e, int64_t n) {
      return V::load_bf16_part(reinterpret_cast<const uint16_t*>(row) + e, n);
    }
  };

  // The 32-element block types: kLanes elements from element j (a multiple of kLanes) of the
  // block at b, times its scale d, with the same float operations as to_float.
  struct Q8_0Blocks {  // 34 bytes: x = d * q, q int8
    static constexpr int64_t kBytes = 34;
    static F chunk(const uint8_t* b, int64_t j, F d) { return V::mul(V::load_i8(reinterpret_cast<const int8_t*>(b + 2 + j)), d); }
  };
  // 18 bytes: x = d * (q - 8); elements 0..15 are the low nibbles of its 16 bytes, 16..31 the
  // high ones. q - 8 is exact in floats, so subtracting after the conversion changes no bit.
  struct Q4_0Blocks {
    static constexpr int64_t kBytes = 18;
    static F chunk(const uint8_t* b, int64_t j, F d) {
      return V::mul(V::sub(V::load_u4(b + 2 + (j & 15), static_cast<int>(j >> 4) * 4), V::set1(8.0f)), d);
    }
  };

  template <class L>
  static void line(GgmlType, const uint8_t* slice, int64_t n, float* dst) {
    int64_t c = 0;
    for (; c + V::kLanes <= n; c += V::kLanes) V::store(dst + c, L::full(slice, c));
    if (c < n) {
      V::store(dst + c, L::load(slice, c, n - c));
      c += V::kLanes;
    }
    for (; c < round16(n); c += V::kLanes) V::store(dst + c, V::zero());
  }

  // The slice is whole blocks padded with zeros (attention.h), so the chunks past n read its
  // own padding and store the zeros dst's padding wants.
  template <class Q>
  static void blocks(GgmlType, const uint8_t* slice, int64_t n, float* dst) {
    const uint8_t* b = slice;
    for (int64_t c = 0; c < n; c += 32, b += Q::kBytes) {
      const F d = V::set1_f16(b);
      for (int64_t k = 0; k < 32 && c + k < n; k += V::kLanes) V::store(dst + c + k, Q::chunk(b, k, d));
    }
    for (int64_t c = (n + V::kLanes - 1) / V::kLanes * V::kLanes; c < round16(n); c += V::kLanes) V::store(dst + c, V::zero());
  }

  // Any other type: the scalar definition (which reports a type it does not know), zero-padded.
  static void any(GgmlType t, const uint8_t* slice, int64_t n, float* dst) {
    kv_row_to_float(t, slice, 0, n, dst);
    for (int64_t i = n; i < round16(n); i++) dst[i] = 0.0f;
  }

  // Slices [lo, nb) of a block (the ones fetched) -> buf, round16(n) floats per slice; the line
  // stager a template argument, so it inlines (a call per slice measured ~10% of decode).
  template <LineFn kLine>
  static void rows(GgmlType t, const uint8_t* const* slices, int64_t lo, int64_t nb, int64_t n, float* buf) {
    for (int64_t j = lo; j < nb; j++) kLine(t, slices[j], n, buf + j * round16(n));
  }
  static RowsFn rows_for(GgmlType t) {
    switch (t) {
      case GgmlType::F32: return rows<line<LoadF32>>;
      case GgmlType::F16: return rows<line<LoadF16>>;
      case GgmlType::BF16: return rows<line<LoadBF16>>;
      case GgmlType::Q8_0: return rows<blocks<Q8_0Blocks>>;
      case GgmlType::Q4_0: return rows<blocks<Q4_0Blocks>>;
      default: return rows<any>;
    }
  }
};

// K of a tile's first block, staged 16 keys at a time, each group's V slices and the next
// group's K slices prefetched before it. Nothing has prefetched this block (Ahead prefetches
// each later block over the row passes of the one before it), and at a short context it is
// all the tile reads: staged in one go, its K lines missed one group after another and its V
// lines only when the row passes reached them. Cold K/V (lumen_bench_micro
// --benchmark_filter=AttentionDecodeCold, 2 threads, us, medians of five alternations of the
// binaries before and after, two runs): SmolLM at 128 keys 9.7-9.9 -> 6.9-7.0, Qwen3-MoE at 64
// keys 14.3-14.5 -> 10.7-11.4, TinyLlama at 128 keys 12.2-12.6 -> 9.2-10.1. In the model
// (`lumen bench -p 0 -n 64`, six alternations) SmolLM Q8_0 decode 1.03x, Qwen3-MoE Q4_0 1.055x.
// The stager writes only the keys of [lo, nb) it is given: the same buffer either way.
// A prompt's tiles (more than kColdQueries queries) stage as before: their first block is a
// small part of their work, and its lines were just written.
constexpr int64_t kColdQueries = 8;  // decode, speculative verification: not a prompt's tiles
inline void stage_k_cold(RowsFn stage_k, GgmlType k_type, const uint8_t* const* k_rows, const uint8_t* const* v_rows,
                         int64_t lo, int64_t nb, int64_t dk, float* kbuf, int64_t k_lines, int64_t v_lines) {
  for (int64_t g = lo / 16 * 16; g < nb; g += 16) {
    const int64_t a = g > lo ? g : lo, e = min64(g + 16, nb);
    for (int64_t j = e; j < min64(e + 16, nb); j++)
      for (int64_t l = 0; l < k_lines; l++) __builtin_prefetch(k_rows[j] + 64 * l, 0, 3);
    for (int64_t j = a; j < e; j++)
      for (int64_t l = 0; l < v_lines; l++) __builtin_prefetch(v_rows[j] + 64 * l, 0, 3);
    stage_k(k_type, k_rows, a, e, dk, kbuf);
  }
}

// A span's state of one row (o: dvp floats, m, l) folded into the row's running state (O, M,
// L) in span order: the first span the row has keys in is copied, each later one rescaled
// onto the larger max. One function for the tile's in-order folds and attention()'s merge of
// split spans, so both give the same bits.
template <class V>
inline void fold_span(float* O, float* M, float* L, bool first, const float* o, float m, float l, int64_t dvp) {
  if (first) {
    for (int64_t c = 0; c < dvp; c += V::kLanes) V::store(O + c, V::load(o + c));
    *M = m, *L = l;
    return;
  }
  const float m_new = *M > m ? *M : m;
  const float a = vec_math::exp1<V>(*M - m_new), b = vec_math::exp1<V>(m - m_new);
  const typename V::F va = V::set1(a), vb = V::set1(b);
  for (int64_t c = 0; c < dvp; c += V::kLanes) V::store(O + c, V::fmadd(V::load(o + c), vb, V::mul(V::load(O + c), va)));
  *L = __builtin_fmaf(l, b, *L * a);
  *M = m_new;
}

// out = O / L for one row's dv outputs.
template <class V>
inline void store_row(const float* O, float L, float* dst, int64_t dv) {
  const typename V::F inv = V::set1(1.0f / L);
  int64_t c = 0;  // whole vectors stored plainly: AVX2's masked stores are slow (on AMD)
  for (; c + V::kLanes <= dv; c += V::kLanes) V::storeu(dst + c, V::mul(V::load(O + c), inv));
  if (c < dv) V::store_m(dst + c, V::mask(dv - c), V::mul(V::load(O + c), inv));
}

// Query i's keys within [qs.key_lo, qs.key_hi): [*begin, *end), empty when end <= begin.
inline void query_keys(const AttentionQueries& qs, int64_t i, int64_t* begin, int64_t* end) {
  const int64_t b = qs.kv_begin ? qs.kv_begin[i] : 0;
  *begin = b > qs.key_lo ? b : qs.key_lo;
  *end = min64(qs.n_kv[i], qs.key_hi);
}

// The tile (AttentionTileFn). Scratch layout within attention_scratch_floats: per query row its
// output accumulator, max and sum over the current span, its running state over the spans
// before (O, M, L) and, for a block-type K, its query rounded to Q8_0 (qrow); the staged K
// (kbuf) and V; A::kRows probability rows; the fetched row pointers of this block and the
// next.
template <class V, class A>
void tile(const AttentionParams& p, const KvRows& kv, const AttentionQueries& qs, int64_t hk, float* scratch) {
  const int64_t group = p.n_head / p.n_head_kv, dk = p.head_dim_k, dv = p.head_dim_v;
  const int64_t dkp = round16(dk), dvp = round16(dv);
  const int64_t n_rows = qs.n_q * group;

  float* base = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(scratch) + 63) & ~uintptr_t{63});
  float* o = base;                     // n_rows x dvp
  float* mx = o + n_rows * dvp;        // n_rows
  float* ls = mx + round16(n_rows);    // n_rows
  float* run_o = ls + round16(n_rows); // n_rows x dvp: the spans before the current one
  float* run_m = run_o + n_rows * dvp; // n_rows
  float* run_l = run_m + round16(n_rows);
  float* qrow = run_l + round16(n_rows);  // n_rows x dkp
  float* kbuf = qrow + n_rows * dkp;   // B x dkp
  float* vbuf = kbuf + kB * dkp;       // B x dvp
  float* pbuf = vbuf + kB * dvp;       // A::kRows x B
  auto** k_rows = reinterpret_cast<const uint8_t**>(pbuf + 4 * kB);
  const uint8_t** v_rows = k_rows + kB;
  const uint8_t** k_next = v_rows + kB;  // the next block's rows, fetched one block ahead
  const uint8_t** v_next = k_next + kB;
  static_assert(A::kRows <= 4, "attention_scratch_floats holds 4 probability rows");
  static_assert(kAttentionSpan % kB == 0, "a key block never straddles two spans");
  const RowsFn stage_k = A::stage_k_for(p.k_type);
  const RowsFn stage_v = Stage<V>::rows_for(p.v_type);
  // Row passes per block: a query's heads in chunks of A::kRows, or, where a group is smaller,
  // the heads of A::kRows / group consecutive queries in one pass (Gemma 2's groups of 2 and
  // Phi-3's of 1 would leave AVX-512's 4-row passes half or three-quarters empty).
  const int64_t q_per_pass = group < A::kRows ? A::kRows / group : 1;
  const int64_t passes = q_per_pass > 1 ? (qs.n_q + q_per_pass - 1) / q_per_pass
                                        : qs.n_q * ((group + A::kRows - 1) / A::kRows);
  const bool v_in_place = A::v_in_place(p.v_type, dv, passes);
  const Values values{vbuf, v_in_place ? v_rows : nullptr, p.v_type};
  const auto q_of = [&](int64_t i, int64_t g) { return qs.q + qs.rows[i] * qs.ldq + (hk * group + g) * dk; };
  // A block-type K meets the queries rounded to Q8_0 (attention.h), each row once per tile, as
  // A's scores read it (A::kQ8: unpacked; else its floats d * q, kbuf the scratch for the
  // rounding).
  const bool q8 = kv_k_meets_q8(p.k_type);
  if (q8)
    for (int64_t i = 0; i < qs.n_q; i++)
      for (int64_t g = 0; g < group; g++) {
        float* dst = qrow + (i * group + g) * dkp;
        if constexpr (A::kQ8) {
          attention_query_q8(q_of(i, g), dk, dst);
        } else {
          const QueryQ8 qq = attention_query_q8(q_of(i, g), dk, kbuf);
          for (int64_t c = 0; c < dkp; c++) dst[c] = c < dk ? qq.d[c / 32] * static_cast<float>(qq.qs[c]) : 0.0f;
        }
      }

  // The keys the tile walks: the union of its queries' ranges within [key_lo, key_hi).
  int64_t max_kv = 0, min_begin = INT64_MAX;
  for (int64_t i = 0; i < qs.n_q; i++) {
    int64_t b, e;
    query_keys(qs, i, &b, &e);
    if (e <= b) continue;
    max_kv = e > max_kv ? e : max_kv;
    min_begin = b < min_begin ? b : min_begin;
  }
  const auto reset = [&](int64_t r) {
    mx[r] = -__builtin_inff();
    ls[r] = 0.0f;
    for (int64_t c = 0; c < dvp; c += V::kLanes) V::store(o + r * dvp + c, V::zero());
  };
  for (int64_t r = 0; r < n_rows; r++) reset(r);
  // The span [s0, s0 + kAttentionSpan) just walked: each row's state folded into its running
  // state (rows whose query has no key in it are left as they are), or, in a split's piece,
  // written to the span's slot of qs.partial; then reset.
  const int64_t stride = attention_partial_floats(p);
  const auto end_span = [&](int64_t s0) {
    for (int64_t i = 0; i < qs.n_q; i++) {
      int64_t b, e;
      query_keys(qs, i, &b, &e);
      const bool has_keys = (b > s0 ? b : s0) < min64(e, s0 + kAttentionSpan);
      if (!has_keys && !qs.partial) continue;
      for (int64_t g = 0; g < group; g++) {
        const int64_t r = i * group + g;
        if (qs.partial) {
          float* dst = qs.partial + ((s0 - qs.key_lo) / kAttentionSpan * n_rows + r) * stride;
          for (int64_t c = 0; c < dvp; c += V::kLanes) V::store(dst + c, V::load(o + r * dvp + c));
          dst[dvp] = mx[r], dst[dvp + 1] = ls[r], dst[dvp + 2] = has_keys ? 1.0f : 0.0f;
        } else {
          const bool first = s0 == b / kAttentionSpan * kAttentionSpan;  // the span of its first key
          fold_span<V>(run_o + r * dvp, run_m + r, run_l + r, first, o + r * dvp, mx[r], ls[r], dvp);
        }
        reset(r);
      }
    }
  };
  if (qs.partial)  // every slot says "no keys" until its span is walked
    for (int64_t sp = 0; sp < (qs.key_hi - qs.key_lo) / kAttentionSpan; sp++)
      for (int64_t r = 0; r < n_rows; r++) qs.partial[(sp * n_rows + r) * stride + dvp + 2] = 0.0f;

  // The next block's head slices are fetched one block ahead and prefetched over this block's
  // row passes (Ahead says why); a cache block's slices of one head are contiguous, but
  // consecutive cache blocks need not be.
  const auto lines_of = [](GgmlType t, int64_t n) { return static_cast<int64_t>((kv_row_bytes(t, n) + 63) / 64); };
  Ahead ahead{k_next, v_next, 0, lines_of(p.k_type, dk), lines_of(p.v_type, dv)};
  // Blocks stay aligned to multiples of B from position 0 whatever the tile's queries, so a
  // query sees the same blocks alone and in a tile; positions below min_begin are never fetched
  // (only the first block can start below it).
  const int64_t j_first = min_begin / kB * kB;
  if (j_first < max_kv) {
    const int64_t lo = min_begin - j_first;
    kv.fetch(kv.ctx, min_begin, min64(kB, max_kv - j_first) - lo, hk, k_next + lo, v_next + lo);
  }
  for (int64_t j0 = j_first; j0 < max_kv; j0 += kB) {
    // Spans of kAttentionSpan keys each keep their own softmax state, folded in order at their
    // end: a query's result is then the same whether its spans run in one tile or in several
    // (attention() splits a long decode's keys over the threads that way).
    if (j0 % kAttentionSpan == 0 && j0 != j_first) end_span(j0 - kAttentionSpan);
    const int64_t nb = min64(kB, max_kv - j0);
    const int64_t lo = min_begin > j0 ? min_begin - j0 : 0;
    for (int64_t j = lo; j < nb; j++) k_rows[j] = k_next[j], v_rows[j] = v_next[j];
    ahead.n = j0 + kB < max_kv ? min64(kB, max_kv - j0 - kB) : 0;
    ahead.j = ahead.line = 0;
    if (ahead.n > 0) kv.fetch(kv.ctx, j0 + kB, ahead.n, hk, k_next, v_next);
    // This KV head's slice of every fetched row of the block, staged once for all the tile's
    // query rows (K as A's stager lays it out; V dequantized to F32, unless read in place).
    if (j0 == j_first && qs.n_q <= kColdQueries)
      stage_k_cold(stage_k, p.k_type, k_rows, v_rows, lo, nb, dk, kbuf, ahead.k_lines, ahead.v_lines);
    else
      stage_k(p.k_type, k_rows, lo, nb, dk, kbuf);
    if (!v_in_place) stage_v(p.v_type, v_rows, lo, nb, dv, vbuf);
    // The row passes of this block, each prefetching its share of the next block's lines (a
    // query that skips the block leaves its share to the catch-up after the passes).
    const int64_t share = (ahead.total() + passes - 1) / passes;
    const float* q[A::kRows];
    Row rows[A::kRows];
    int nr = 0;
    const auto pass = [&] {
      if (nr > 0) A::rows_block(nr, q, p, kbuf, values, rows, pbuf, ahead, share);
      nr = 0;
    };
    for (int64_t i = 0; i < qs.n_q; i++) {
      int64_t begin, end;
      query_keys(qs, i, &begin, &end);
      const int64_t k_lo = begin > j0 ? begin - j0 : 0, nk = min64(nb, end - j0);
      if (nk <= k_lo) continue;
      for (int64_t g = 0; g < group; g++) {
        const int64_t r = i * group + g;
        q[nr] = q8 ? qrow + r * dkp : q_of(i, g);
        rows[nr++] = Row{o + r * dvp, mx + r, ls + r, k_lo, nk};
        if (nr == A::kRows) pass();
      }
      if (nr + group > A::kRows) pass();  // the next query's heads do not fit: a pass never splits them
    }
    pass();
    ahead.lines(ahead.total());  // whatever the passes left (none when every pass took its share)
  }

  if (max_kv > 0) end_span((max_kv - 1) / kAttentionSpan * kAttentionSpan);
  if (qs.partial) return;  // a split's piece: attention() merges the spans
  for (int64_t i = 0; i < qs.n_q; i++)
    for (int64_t g = 0; g < group; g++) {
      const int64_t r = i * group + g;
      store_row<V>(run_o + r * dvp, run_l[r], qs.out + qs.rows[i] * qs.ldo + (hk * group + g) * dv, dv);
    }
}

// Merges the spans of a split (attention()): partials holds n_spans states of every row of the
// queries (span-major, attention_partial_floats each), folded in span order as the tile folds
// them, then normalised into the queries' outputs. scratch: round16(head_dim_v) + 16 floats.
template <class V>
void merge(const AttentionParams& p, const AttentionQueries& qs, int64_t hk, const float* partials, int64_t n_spans,
           float* scratch) {
  const int64_t group = p.n_head / p.n_head_kv, dv = p.head_dim_v, dvp = round16(dv);
  const int64_t stride = attention_partial_floats(p), n_rows = qs.n_q * group;
  float* O = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(scratch) + 63) & ~uintptr_t{63});
  for (int64_t i = 0; i < qs.n_q; i++)
    for (int64_t g = 0; g < group; g++) {
      const int64_t r = i * group + g;
      float M = 0.0f, L = 0.0f;
      bool first = true;
      for (int64_t s = 0; s < n_spans; s++) {
        const float* part = partials + (s * n_rows + r) * stride;
        if (part[dvp + 2] == 0.0f) continue;  // no key of this query in the span
        fold_span<V>(O, &M, &L, first, part, part[dvp], part[dvp + 1], dvp);
        first = false;
      }
      store_row<V>(O, L, qs.out + qs.rows[i] * qs.ldo + (hk * group + g) * dv, dv);
    }
}

}  // namespace
}  // namespace lumen::attention_tile
