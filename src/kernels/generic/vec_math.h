// Vector math written once over an ISA's SIMD layer V (avx2::Vf, avx512::Vf).
// static inline: each ISA's translation unit compiles its own copy with its own flags.
#pragma once

namespace lumen::vec_math {

// e^x within ~2 ulp of libm's expf over the whole float range: 0 below about -103.9 (and for
// -inf), +inf above 88.73. x = n ln2 + r with |r| <= ln2/2 (Cody-Waite split of ln2), e^r by
// the Cephes expf polynomial, then V::scale_pow2 applies 2^n with correct subnormals and
// overflow.
template <class V>
static inline typename V::F exp(typename V::F x) {
  x = V::max(x, V::set1(-104.0f));
  x = V::min(x, V::set1(89.0f));
  const typename V::F n = V::round_even(V::mul(x, V::set1(1.44269504088896341f)));
  typename V::F r = V::fnmadd(n, V::set1(0.693359375f), x);
  r = V::fnmadd(n, V::set1(-2.12194440e-4f), r);
  typename V::F p = V::set1(1.9875691500e-4f);
  p = V::fmadd(p, r, V::set1(1.3981999507e-3f));
  p = V::fmadd(p, r, V::set1(8.3334519073e-3f));
  p = V::fmadd(p, r, V::set1(4.1665795894e-2f));
  p = V::fmadd(p, r, V::set1(1.6666665459e-1f));
  p = V::fmadd(p, r, V::set1(5.0000001201e-1f));
  const typename V::F y = V::fmadd(p, V::mul(r, r), V::add(r, V::set1(1.0f)));
  return V::scale_pow2(y, n);
}

// tanh(x) = (1 - t) / (1 + t), t = e^(-2x), over x clamped to [-9, 9] (tanh(9) rounds to 1 in
// float): within ~1e-7 absolute of tanhf (relative error grows near 0, where 1 - t cancels).
template <class V>
static inline typename V::F tanh(typename V::F x) {
  const typename V::F xc = V::min(V::max(x, V::set1(-9.0f)), V::set1(9.0f));
  const typename V::F t = exp<V>(V::mul(xc, V::set1(-2.0f)));
  const typename V::F one = V::set1(1.0f);
  return V::div(V::sub(one, t), V::add(one, t));
}

template <class V>
static inline float exp1(float x) {
  return V::first(exp<V>(V::set1(x)));
}

}  // namespace lumen::vec_math
