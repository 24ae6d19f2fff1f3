// TEMPORARY: stubs until the reference conversions land. Delete when quant_ref_*.cpp exist.
#include "core/error.h"
#include "core/quant/quant_ref.h"
namespace lumen {
#define STUB_TO(n) void to_float_##n(const void*, float*, int64_t) { fail("{} not implemented", #n); }
#define STUB_FROM(n) void from_float_##n(const float*, void*, int64_t) { fail("{} not implemented", #n); }
STUB_TO(q2_k) STUB_TO(q3_k) STUB_TO(q4_k) STUB_TO(q5_k) STUB_TO(q6_k) STUB_TO(q8_k)
STUB_FROM(q8_k)
#define STUB_DOT(n) float vec_dot_##n(int64_t, const void*, const void*) { fail("{} not implemented", #n); }
STUB_DOT(q2_k) STUB_DOT(q3_k) STUB_DOT(q4_k) STUB_DOT(q5_k) STUB_DOT(q6_k)
}
