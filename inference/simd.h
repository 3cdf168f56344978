/* Helpers shared by our C kernels (quant/qmatmul.c, quant/decode_layer.c, cpu_attention.c). */
#ifndef GROUNDWORK_SIMD_H
#define GROUNDWORK_SIMD_H
#include <stdint.h>
#include <string.h>

/* fp32 to bf16 bits, rounded to nearest even as torch converts (finite values). */
static inline uint16_t bf16_bits(float f) {
    uint32_t bits;
    memcpy(&bits, &f, 4);
    return (uint16_t)((bits + 0x7FFF + (bits >> 16 & 1)) >> 16);
}

/* bf16 bits to fp32 (exact). */
static inline float from_bf16(uint16_t h) {
    const uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

#ifdef __AVX2__
#include <immintrin.h>

/* Eight bf16 values to fp32 (exact). */
static inline __m256 load_bf16(const uint16_t *p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}

static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* e^x within an ulp or two of expf for |x| <= 87 (x is clamped to that range): 2^n e^r with |r| <= ln2 / 2,
 * e^r by its Taylor series to the 8th power. */
static inline __m256 exp8(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.f)), _mm256_set1_ps(87.f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145752f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860677e-6f), r);
    static const float c[] = {1.f / 5040, 1.f / 720, 1.f / 120, 1.f / 24, 1.f / 6, 0.5f, 1.f, 1.f};
    __m256 p = _mm256_set1_ps(1.f / 40320);
    for (int i = 0; i < 8; i++) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c[i]));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}
#endif
#endif
