// TEMPORARY: stubs until the reference conversions land. Delete when quant_ref_*.cpp exist.
#include "core/error.h"
#include "core/quant/quant_ref.h"
#include "core/dtype.h"
#include <cstring>
namespace lumen {
#define STUB_TO(n) void to_float_##n(const void*, float*, int64_t) { fail("{} not implemented", #n); }
#define STUB_FROM(n) void from_float_##n(const float*, void*, int64_t) { fail("{} not implemented", #n); }
void to_float_f32(const void* s, float* d, int64_t n) { std::memcpy(d, s, n * 4); }
void to_float_f16(const void* s, float* d, int64_t n) { auto p = (const uint16_t*)s; for (int64_t i = 0; i < n; i++) d[i] = fp16_to_fp32(p[i]); }
void to_float_bf16(const void* s, float* d, int64_t n) { auto p = (const uint16_t*)s; for (int64_t i = 0; i < n; i++) d[i] = bf16_to_fp32(p[i]); }
STUB_TO(q4_0) STUB_TO(q4_1) STUB_TO(q5_0) STUB_TO(q5_1) STUB_TO(q8_0) STUB_TO(q2_k) STUB_TO(q3_k)
STUB_TO(q4_k) STUB_TO(q5_k) STUB_TO(q6_k) STUB_TO(q8_k) STUB_TO(iq4_nl)
STUB_FROM(f32) STUB_FROM(f16) STUB_FROM(bf16) STUB_FROM(q4_0) STUB_FROM(q4_1) STUB_FROM(q5_0)
STUB_FROM(q5_1) STUB_FROM(q8_0) STUB_FROM(q8_k) STUB_FROM(q8_1)
#define STUB_DOT(n) float vec_dot_##n(int64_t, const void*, const void*) { fail("{} not implemented", #n); }
STUB_DOT(f32) STUB_DOT(f16) STUB_DOT(bf16) STUB_DOT(q4_0) STUB_DOT(q4_1) STUB_DOT(q5_0) STUB_DOT(q5_1) STUB_DOT(q8_0) STUB_DOT(q2_k) STUB_DOT(q3_k) STUB_DOT(q4_k) STUB_DOT(q5_k) STUB_DOT(q6_k) STUB_DOT(iq4_nl)
}
