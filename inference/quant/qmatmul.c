/* Matmuls over 4-, 5- and 8-bit weights in groups of 32, for CPU decode (inference/README.md).
 *
 * y[m, n] = sum_k x[m, k] * w[n, k] with w = d * q + mn per group of 32 along k (q4: q in 0..15;
 * q5: q in 0..31; q8: q in -127..127, mn = 0). Activations are quantized per group of 32 to int8 (qx,
 * scale dx, sx = dx * sum(qx)), as llama.cpp does, so each group is one integer dot product:
 * y += d * dx * dot(q, qx) + mn * sx.
 * q4 layout per group: 16 bytes, byte j holds element j (low nibble) and element j + 16 (high).
 * q5 adds a 32-bit word per group (qh), bit j the fifth bit of element j (GGUF's Q5_0 / Q5_1 layout);
 * a q5 weight without mn has mn = -16 d (Q5_0's w = d (q - 16)).
 */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>
#include "../simd.h"

/* Rows shorter than this many values in all are quantized on the calling thread: waking a sleeping
 * OpenMP worker (OMP_WAIT_POLICY=PASSIVE) costs more than the pass over a decode batch takes. */
#define PARALLEL_MIN_VALUES (1 << 17)

#ifdef __AVX2__
/* One group of 32 on the int8 grid: q = round(v / d), half to even, in q[4] (as floats), and the
 * group's scale d = max|v| / 127 (q = 0 for an all-zero group): the scalar code's operations, in its
 * order, so the same floats. */
static inline float group_round(const float *v, __m256 q[4]) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    __m256 x[4], m = _mm256_setzero_ps();
    for (int i = 0; i < 4; i++) {
        x[i] = _mm256_loadu_ps(v + 8 * i);
        m = _mm256_max_ps(m, _mm256_and_ps(x[i], abs_mask));
    }
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    const float d = _mm_cvtss_f32(h) / 127.f;
    const __m256 id = _mm256_set1_ps(d ? 1.f / d : 0.f);
    for (int i = 0; i < 4; i++)
        q[i] = _mm256_round_ps(_mm256_mul_ps(x[i], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return d;
}

/* fp32 to bf16, rounded to nearest even as torch converts (finite values). */
static inline __m128i to_bf16(__m256 f) {
    __m256i b = _mm256_castps_si256(f);
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
    b = _mm256_srli_epi32(_mm256_add_epi32(b, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7FFF))), 16);
    return _mm_packus_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
}

#else
/* The group's scale d = max|v| / 127 and its inverse (0 for an all-zero group). */
static inline float group_scale(const float *v, float *id) {
    float amax = 0.f;
    for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(v[j]));
    const float d = amax / 127.f;
    *id = d ? 1.f / d : 0.f;
    return d;
}
#endif

void quantize_rows(const float *x, int64_t M, int64_t K, int8_t *qx, float *dx, float *sx) {
    const int64_t G = K / 32;
    #pragma omp parallel for schedule(static) if (M * K >= PARALLEL_MIN_VALUES)
    for (int64_t r = 0; r < M * G; r++) {
        const float *v = x + r * 32;
#ifdef __AVX2__
        __m256 q[4];
        const float d = group_round(v, q);
        __m256i i32[4];
        for (int i = 0; i < 4; i++) i32[i] = _mm256_cvtps_epi32(q[i]);
        const __m256i s = _mm256_add_epi32(_mm256_add_epi32(i32[0], i32[1]), _mm256_add_epi32(i32[2], i32[3]));
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        s4 = _mm_hadd_epi32(s4, s4);
        const int sum = _mm_cvtsi128_si32(_mm_hadd_epi32(s4, s4));
        /* the packs work within 128-bit lanes: dword k of the packed bytes holds values 4k..4k+3 of
         * vector (k % 4) * 2 + k / 4's half, which the permute puts back in order */
        const __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(i32[0], i32[1]), _mm256_packs_epi32(i32[2], i32[3]));
        _mm256_storeu_si256((__m256i *)(qx + r * 32),
                            _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
#else
        float id;
        const float d = group_scale(v, &id);
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            const int q = (int)lrintf(v[j] * id);
            qx[r * 32 + j] = (int8_t)q;
            sum += q;
        }
#endif
        dx[r] = d;
        sx[r] = d * (float)sum;
    }
}

/* One group of 32 rounded to the grid quantize_rows puts it on (q * d), into `out`: fp32, or
 * (bf16 != 0) bf16 rounded to nearest even as torch converts. */
static inline void grid_group(const float *v, void *out, int64_t at, int bf16) {
#ifdef __AVX2__
    __m256 q[4];
    const __m256 d = _mm256_set1_ps(group_round(v, q));
    for (int i = 0; i < 4; i++) {
        const __m256 g = _mm256_mul_ps(q[i], d);
        if (bf16)
            _mm_storeu_si128((__m128i *)((uint16_t *)out + at + 8 * i), to_bf16(g));
        else
            _mm256_storeu_ps((float *)out + at + 8 * i, g);
    }
#else
    float id;
    const float d = group_scale(v, &id);
    for (int j = 0; j < 32; j++) {
        const float g = (float)lrintf(v[j] * id) * d;
        if (!bf16) {
            ((float *)out)[at + j] = g;
            continue;
        }
        ((uint16_t *)out)[at + j] = bf16_bits(g);
    }
#endif
}

/* x [M, K] on the int8 grid, for a float matmul over a weight's dense copy (one pass where torch took
 * six ops and a conversion, as long as the matmul itself on a long chunk). */
void grid_rows(const float *x, int64_t M, int64_t K, void *out, int bf16) {
    const int64_t G = K / 32;
    #pragma omp parallel for schedule(static) if (M * K >= PARALLEL_MIN_VALUES)
    for (int64_t r = 0; r < M * G; r++) grid_group(x + r * 32, out, r * 32, bf16);
}

/* silu(gate) * up of a bf16 gate/up matmul's output gu [M, 2I] (gate first), on the int8 grid in bf16
 * [M, I]: the down projection's input, without the fp32 copies of gu and of the product between. */
void swiglu_grid_bf16(const uint16_t *gu, int64_t M, int64_t I, uint16_t *out) {
    const int64_t G = I / 32;
    #pragma omp parallel for schedule(static) if (M * I >= PARALLEL_MIN_VALUES)
    for (int64_t r = 0; r < M * G; r++) {
        const uint16_t *gate = gu + (r / G) * 2 * I + (r % G) * 32, *up = gate + I;
        float h[32];
#ifdef __AVX2__
        for (int i = 0; i < 4; i++) {
            const __m256 g = load_bf16(gate + 8 * i);
            const __m256 e = _mm256_add_ps(_mm256_set1_ps(1.f), exp8(_mm256_sub_ps(_mm256_setzero_ps(), g)));
            _mm256_storeu_ps(h + 8 * i, _mm256_mul_ps(_mm256_div_ps(g, e), load_bf16(up + 8 * i)));
        }
#else
        for (int j = 0; j < 32; j++) {
            const float g = from_bf16(gate[j]);
            h[j] = g / (1.f + expf(-g)) * from_bf16(up[j]);
        }
#endif
        grid_group(h, out, r * 32, 1);
    }
}

#ifdef __AVX2__
/* Unsigned by signed bytes: 8 sums of 4 products. One VNNI instruction where the CPU has it, else
 * two; the same sums either way (maddubs cannot saturate here: |products| <= 127 * 127, two a lane). */
static inline __m256i dot_u8s8(__m256i u, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

static inline __m256i unpack_q4(const uint8_t *qs) {
    const __m128i b = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(0xF));
}

/* Byte j: 16 where bit j of h is set, else 0. */
static inline __m256i fifth_bits(uint32_t h) {
#if defined(__AVX512BW__) && defined(__AVX512VL__)
    return _mm256_maskz_mov_epi8((__mmask32)h, _mm256_set1_epi8(16));
#else
    /* bytes 8i..8i+7 take byte i of h, then each keeps its own bit */
    const __m256i spread = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    const __m256i bit = _mm256_set1_epi64x((int64_t)0x8040201008040201);
    const __m256i v = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)h), spread), bit);
    return _mm256_and_si256(_mm256_cmpeq_epi8(v, bit), _mm256_set1_epi8(16));
#endif
}

/* Group g's 32 weights as bytes: q4, or q5 where there are fifth bits. */
static inline __m256i unpack(const uint8_t *qs, const uint32_t *qh, int64_t g) {
    const __m256i q = unpack_q4(qs + g * 16);
    return qh ? _mm256_or_si256(q, fifth_bits(qh[g])) : q;
}
#endif

/* Group g's offset: mn, or Q5_0's -16 d. */
static inline float offset(const float *d, const float *mn, int64_t g) {
    return mn ? mn[g] : -16.f * d[g];
}

#ifdef __AVX2__
#if defined(__AVX512BW__) && defined(__AVX512VNNI__)
/* NOTE: where the CPU has 512-bit VNNI, two groups go through each integer dot product and each
 * scaling FMA (half the instructions of a decode batch), and the two halves of the sums are folded
 * before the last group of an odd count: another summation order than AVX2's, the same on every path. */
#define PAIRED 1
/* Groups g and g + 1's 64 weights as bytes: q4, or q5 where there are fifth bits. */
static inline __m512i unpack2(const uint8_t *qs, const uint32_t *qh, int64_t g) {
    const __m256i b = _mm256_loadu_si256((const __m256i *)(qs + g * 16)), h = _mm256_srli_epi16(b, 4);
    /* 128-bit lanes: group g's low nibbles and its high ones, then group g + 1's */
    __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_permute2x128_si256(b, h, 0x20)),
                                   _mm256_permute2x128_si256(b, h, 0x31), 1);
    q = _mm512_and_si512(q, _mm512_set1_epi8(0xF));
    if (qh) q = _mm512_or_si512(q, _mm512_maskz_mov_epi8((__mmask64)qh[g] | (__mmask64)qh[g + 1] << 32,
                                                          _mm512_set1_epi8(16)));
    return q;
}

/* v[0] in lanes 0-7, v[1] in lanes 8-15. */
static inline __m512 pair(const float *v) {
    /* two broadcast loads and a blend: no shuffle, whose port the FMAs need */
    return _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(v[0]), _mm512_set1_ps(v[1]));
}

static inline __m256 fold(__m512 v) {
    return _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}


/* Pair g, g + 1 of row r of the activations (K apart) against the pair's weights as bytes: q (q4/q5), or
 * for q8 (q8 != 0) their absolute values aw with the sign mask neg. */
static inline __m512i dot2(__m512i q, __mmask64 neg, const int8_t *x, int q8) {
    __m512i v = _mm512_loadu_si512(x);
    /* |w| * (x * sign(w)), as dot1 */
    if (q8) v = _mm512_mask_sub_epi8(v, neg, _mm512_setzero_si512(), v);
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, v);
}
#endif

/* Group g of one activation row against its weights: q (q4/q5, as bytes) or the q8 bytes w. */
static inline __m256i dot1(__m256i w, const int8_t *x, int q8) {
    const __m256i v = _mm256_loadu_si256((const __m256i *)x);
    /* |w| * (x * sign(w)): one operand must be unsigned; |w| <= 127 fits */
    return q8 ? dot_u8s8(_mm256_sign_epi8(w, w), _mm256_sign_epi8(v, w)) : dot_u8s8(w, v);
}

/* R activation rows (K apart) against one weight row (q4/q5: qs, qh, mn; q8: qw), each weight group
 * loaded and unpacked once for all R (a batched decode step is bound by these instructions, not by
 * reading the weights). Every row gets the same operations in the same order whatever R: the same
 * floats. Inlined with constant R and q8. */
static inline void dot_rows(const uint8_t *qs, const uint32_t *qh, const float *d, const float *mn, const int8_t *qx,
                            const float *dx, const float *sx, int64_t K, int64_t G, const int R, const int q8,
                            float *out) {
    const int8_t *qw = (const int8_t *)qs;
    __m256 acc[4];
    int64_t g = 0;
#ifdef PAIRED
    __m512 wide[4];
    for (int r = 0; r < R; r++) wide[r] = _mm512_setzero_ps();
    for (; g + 2 <= G; g += 2) {
        const __m512i w = q8 ? _mm512_loadu_si512(qw + g * 32) : unpack2(qs, qh, g);
        const __m512i q = q8 ? _mm512_abs_epi8(w) : w;
        const __mmask64 neg = q8 ? _mm512_movepi8_mask(w) : 0;
        const __m512 dw = pair(d + g);
        for (int r = 0; r < R; r++) {
            const __m512i p = dot2(q, neg, qx + r * K + g * 32, q8);
            wide[r] = _mm512_fmadd_ps(_mm512_mul_ps(dw, pair(dx + r * G + g)), _mm512_cvtepi32_ps(p), wide[r]);
        }
    }
    for (int r = 0; r < R; r++) acc[r] = fold(wide[r]);
#else
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
#endif
    for (; g < G; g++) {
        const __m256i w = q8 ? _mm256_loadu_si256((const __m256i *)(qw + g * 32)) : unpack(qs, qh, g);
        for (int r = 0; r < R; r++) {
            const __m256i p = dot1(w, qx + r * K + g * 32, q8);
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d[g] * dx[r * G + g]), _mm256_cvtepi32_ps(p), acc[r]);
        }
    }
    for (int r = 0; r < R; r++) {
        float extra = 0.f;
        for (int64_t j = 0; j < G && !q8; j++) extra += offset(d, mn, j) * sx[r * G + j];
        out[r] = hsum(acc[r]) + extra;
    }
}
#else
static float dot_q4(const uint8_t *qs, const uint32_t *qh, const float *d, const float *mn, const int8_t *qx,
                    const float *dx, const float *sx, int64_t G) {
    float extra = 0.f;
    for (int64_t g = 0; g < G; g++) extra += offset(d, mn, g) * sx[g];
    float acc = 0.f;
    for (int64_t g = 0; g < G; g++) {
        const uint32_t h = qh ? qh[g] : 0;
        int s = 0;
        for (int j = 0; j < 16; j++)
            s += ((qs[g * 16 + j] & 0xF) | ((h >> j & 1) << 4)) * qx[g * 32 + j] +
                 ((qs[g * 16 + j] >> 4) | ((h >> (j + 16) & 1) << 4)) * qx[g * 32 + j + 16];
        acc += d[g] * dx[g] * (float)s;
    }
    return acc + extra;
}

static float dot_q8(const int8_t *qw, const float *d, const int8_t *qx, const float *dx, int64_t G) {
    float acc = 0.f;
    for (int64_t g = 0; g < G; g++) {
        int s = 0;
        for (int j = 0; j < 32; j++) s += qw[g * 32 + j] * qx[g * 32 + j];
        acc += d[g] * dx[g] * (float)s;
    }
    return acc;
}
#endif

/* Rows [n0, n1) of w against every activation row: one thread's share (decode_layer.c splits them
 * itself); each row of w meets every activation row while it is in cache. q4, or q5 with qh. */
void mm_q4_rows(const int8_t *qx, const float *dx, const float *sx, int64_t M, int64_t K, const uint8_t *qs,
                const uint32_t *qh, const float *d, const float *mn, int64_t N, const float *bias, float *y,
                int64_t n0, int64_t n1) {
    const int64_t G = K / 32;
    for (int64_t n = n0; n < n1; n++) {
        const float b = bias ? bias[n] : 0.f;
        const uint8_t *wq = qs + n * G * 16;
        const uint32_t *wh = qh ? qh + n * G : NULL;
        const float *wmn = mn ? mn + n * G : NULL;
        int64_t m = 0;
#ifdef __AVX2__
        float o[4];
        for (; m + 4 <= M; m += 4) {
            dot_rows(wq, wh, d + n * G, wmn, qx + m * K, dx + m * G, sx + m * G, K, G, 4, 0, o);
            for (int r = 0; r < 4; r++) y[(m + r) * N + n] = b + o[r];
        }
        for (; m < M; m++) {
            dot_rows(wq, wh, d + n * G, wmn, qx + m * K, dx + m * G, sx + m * G, K, G, 1, 0, o);
            y[m * N + n] = b + o[0];
        }
#else
        for (; m < M; m++) y[m * N + n] = b + dot_q4(wq, wh, d + n * G, wmn, qx + m * K, dx + m * G, sx + m * G, G);
#endif
    }
}

void mm_q8_rows(const int8_t *qx, const float *dx, int64_t M, int64_t K, const int8_t *qw, const float *d,
                int64_t N, const float *bias, float *y, int64_t n0, int64_t n1) {
    const int64_t G = K / 32;
    for (int64_t n = n0; n < n1; n++) {
        const float b = bias ? bias[n] : 0.f;
        int64_t m = 0;
#ifdef __AVX2__
        float o[4];
        for (; m + 4 <= M; m += 4) {
            dot_rows((const uint8_t *)(qw + n * K), NULL, d + n * G, NULL, qx + m * K, dx + m * G, NULL, K, G, 4, 1, o);
            for (int r = 0; r < 4; r++) y[(m + r) * N + n] = b + o[r];
        }
        for (; m < M; m++) {
            dot_rows((const uint8_t *)(qw + n * K), NULL, d + n * G, NULL, qx + m * K, dx + m * G, NULL, K, G, 1, 1, o);
            y[m * N + n] = b + o[0];
        }
#else
        for (; m < M; m++) y[m * N + n] = b + dot_q8(qw + n * K, d + n * G, qx + m * K, dx + m * G, G);
#endif
    }
}

/* Rows of w are split evenly among threads. */
void mm_q4(const int8_t *qx, const float *dx, const float *sx, int64_t M, int64_t K, const uint8_t *qs,
           const uint32_t *qh, const float *d, const float *mn, int64_t N, const float *bias, float *y, int threads) {
    #pragma omp parallel num_threads(threads)
    {
        const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
        mm_q4_rows(qx, dx, sx, M, K, qs, qh, d, mn, N, bias, y, N * t / nt, N * (t + 1) / nt);
    }
}

void mm_q8(const int8_t *qx, const float *dx, int64_t M, int64_t K, const int8_t *qw, const float *d,
           int64_t N, const float *bias, float *y, int threads) {
    #pragma omp parallel num_threads(threads)
    {
        const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
        mm_q8_rows(qx, dx, M, K, qw, d, N, bias, y, N * t / nt, N * (t + 1) / nt);
    }
}
