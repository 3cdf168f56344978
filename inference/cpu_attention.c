/* Paged attention on CPU, reading keys and values in place from the block pool (inference/attention.py,
 * inference/cpu_attention.py): no gather of each sequence's blocks.
 *
 * Query token t attends the first context[t] keys of the sequence in row seq[t] of the block tables
 * (0 keys: a zero output). Pool layout: [2, kv_heads, num_blocks, block_size, D], K then V, in fp32 or
 * (bf16 != 0) bf16; query head h reads KV head h / (H / KVH). D must be a multiple of 16 (the dot
 * products' lanes). Queries, scores and outputs are fp32 either way.
 *
 * The query heads of a token that share a KV head are served together, so each key and value is read
 * once for all of them, in tiles of TILE keys with a running softmax (each tile's maximum rescales what
 * the earlier tiles summed), which bounds the scores kept at any time whatever the context.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "simd.h"

#define TILE 128
#define MAX_GROUP 16 /* query heads per KV head served at once; more are split into several passes */

#ifdef __AVX2__
/* Eight K or V values from element i of the pool, as fp32. */
static inline __m256 kv8(const void *c, int64_t i, int bf16) {
    return bf16 ? load_bf16((const uint16_t *)c + i) : _mm256_loadu_ps((const float *)c + i);
}

/* s[j] = scale * q . K[at[j]] for the tile's len keys, eight keys at a time: eight independent sums
 * (one FMA chain each would wait on its own latency) reduced together. */
static inline void scores(const float *q, const void *K, int bf16, const int64_t *at, int64_t len, int64_t D,
                          float scale, float *s) {
    int64_t j = 0;
    for (; j + 8 <= len; j += 8) {
        __m256 a[8];
        for (int k = 0; k < 8; k++) a[k] = _mm256_setzero_ps();
        for (int64_t d = 0; d < D; d += 8) {
            const __m256 qv = _mm256_loadu_ps(q + d);
            for (int k = 0; k < 8; k++) a[k] = _mm256_fmadd_ps(qv, kv8(K, at[j + k] + d, bf16), a[k]);
        }
        /* pairwise sums: lane k of each half ends up holding key k's (low half) and key k + 4's */
        const __m256 lo = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
        const __m256 hi = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
        const __m256 sum = _mm256_add_ps(_mm256_permute2f128_ps(lo, hi, 0x20), _mm256_permute2f128_ps(lo, hi, 0x31));
        _mm256_storeu_ps(s + j, _mm256_mul_ps(sum, _mm256_set1_ps(scale)));
    }
    for (; j < len; j++) {
        __m256 a = _mm256_setzero_ps();
        for (int64_t d = 0; d < D; d += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), kv8(K, at[j] + d, bf16), a);
        s[j] = hsum(a) * scale;
    }
}

/* s[j] = e^(s[j] - m); returns their sum. */
static float exp_shifted(float *s, int64_t len, float m) {
    __m256 t = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 8 <= len; j += 8) {
        const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(s + j), _mm256_set1_ps(m)));
        _mm256_storeu_ps(s + j, e);
        t = _mm256_add_ps(t, e);
    }
    float sum = hsum(t);
    for (; j < len; j++) sum += s[j] = expf(s[j] - m);
    return sum;
}

/* o = o * c + sum_j w[j] V[at[j]], `lanes` (64 or 16) of o at a time in registers over the tile: eight
 * or two independent FMA chains per key. */
static inline void weigh_lanes(float *o, float c, const float *w, const void *V, int bf16, const int64_t *at,
                               int64_t len, int lanes) {
    __m256 acc[8];
    for (int i = 0; i < lanes / 8; i++) acc[i] = _mm256_mul_ps(_mm256_loadu_ps(o + 8 * i), _mm256_set1_ps(c));
    for (int64_t j = 0; j < len; j++) {
        const __m256 wj = _mm256_set1_ps(w[j]);
        for (int i = 0; i < lanes / 8; i++) acc[i] = _mm256_fmadd_ps(wj, kv8(V, at[j] + 8 * i, bf16), acc[i]);
    }
    for (int i = 0; i < lanes / 8; i++) _mm256_storeu_ps(o + 8 * i, acc[i]);
}

static inline void weigh_values(float *o, float c, const float *w, const void *V, int bf16, const int64_t *at,
                                int64_t len, int64_t D) {
    int64_t d = 0;
    for (; d + 64 <= D; d += 64) weigh_lanes(o + d, c, w, (const char *)V + d * (bf16 ? 2 : 4), bf16, at, len, 64);
    for (; d < D; d += 16) weigh_lanes(o + d, c, w, (const char *)V + d * (bf16 ? 2 : 4), bf16, at, len, 16);
}
#else
static inline float kv1(const void *c, int64_t i, int bf16) {
    return bf16 ? from_bf16(((const uint16_t *)c)[i]) : ((const float *)c)[i];
}

static inline void scores(const float *q, const void *K, int bf16, const int64_t *at, int64_t len, int64_t D,
                          float scale, float *s) {
    for (int64_t j = 0; j < len; j++) {
        float acc[16] = {0};
        for (int64_t i = 0; i < D; i += 16)
            for (int k = 0; k < 16; k++) acc[k] += q[i + k] * kv1(K, at[j] + i + k, bf16);
        float sum = 0.f;
        for (int k = 0; k < 16; k++) sum += acc[k];
        s[j] = sum * scale;
    }
}

static float exp_shifted(float *s, int64_t len, float m) {
    float sum = 0.f;
    for (int64_t j = 0; j < len; j++) sum += s[j] = expf(s[j] - m);
    return sum;
}

static inline void weigh_values(float *o, float c, const float *w, const void *V, int bf16, const int64_t *at,
                                int64_t len, int64_t D) {
    for (int64_t d = 0; d < D; d++) o[d] *= c;
    for (int64_t j = 0; j < len; j++)
        for (int64_t d = 0; d < D; d++) o[d] += w[j] * kv1(V, at[j] + d, bf16);
}
#endif

/* Blocks [from, to) of a block table, K and V (span bytes each), on their way to the cache. */
static inline void prefetch_blocks(const void *K, const void *V, const int32_t *blocks, int64_t from, int64_t to,
                                   int64_t span) {
    for (int64_t i = from; i < to; i++)
        for (int64_t o = 0; o < span; o += 64) {
            __builtin_prefetch((const char *)K + blocks[i] * span + o);
            __builtin_prefetch((const char *)V + blocks[i] * span + o);
        }
}

/* Heads h0..h0+G-1 of a token (all reading the KV head at K, V) over its n keys, into out [G, D]. */
static inline void attend(const float *q, const void *K, const void *V, int bf16, int64_t D, const int32_t *blocks,
                          int64_t block_size, int64_t n, float scale, int64_t G, float *out) {
    float s[TILE], top[MAX_GROUP], sum[MAX_GROUP];
    int64_t at[TILE]; /* the tile's keys' offsets in the pool plane */
    for (int64_t g = 0; g < G; g++) {
        top[g] = -INFINITY;
        sum[g] = 0.f;
        memset(out + g * D, 0, D * sizeof(float));
    }
    int64_t b = 0, r = 0; /* the next key's block and offset in it */
    const int64_t span = block_size * D * (bf16 ? 2 : 4), last = (n + block_size - 1) / block_size;
    const int64_t first = TILE / block_size + 1; /* the first tile's blocks and the next one's first */
    prefetch_blocks(K, V, blocks, 0, first < last ? first : last, span);
    for (int64_t j0 = 0; j0 < n; j0 += TILE) {
        const int64_t len = n - j0 < TILE ? n - j0 : TILE;
        for (int64_t j = 0; j < len; j++) {
            at[j] = ((int64_t)blocks[b] * block_size + r) * D;
            if (++r == block_size) r = 0, b++;
        }
        /* NOTE: a long-running pool hands out blocks anywhere, and the hardware prefetcher starts over
         * at each; the next tile's are requested while this one is computed. 8 SmolLM2-shaped decodes
         * over 1,600 tokens in scattered blocks: 0.90 -> 0.66 ms a layer; no change over the adjacent
         * blocks of a fresh engine. */
        const int64_t ahead = b + TILE / block_size + 1;
        prefetch_blocks(K, V, blocks, b + 1, ahead < last ? ahead : last, span);
        for (int64_t g = 0; g < G; g++) {
            scores(q + g * D, K, bf16, at, len, D, scale, s);
            float m = top[g];
            for (int64_t j = 0; j < len; j++) m = s[j] > m ? s[j] : m;
            const float c = expf(top[g] - m); /* 0 on the first tile (top = -inf) */
            sum[g] = sum[g] * c + exp_shifted(s, len, m);
            top[g] = m;
            weigh_values(out + g * D, c, s, V, bf16, at, len, D);
        }
    }
    for (int64_t g = 0; g < G; g++)
        for (int64_t d = 0; d < D; d++) out[g * D + d] /= sum[g];
}

/* Pairs [from, to) of (token, head), numbered t * H + h: one thread's share (decode_layer.c); the
 * pairs of a token that share a KV head go through `attend` together. */
void paged_attention_pairs(const float *q, const void *cache, int bf16, int64_t H, int64_t KVH, int64_t D,
                           int64_t num_blocks, int64_t block_size, const int32_t *tables, int64_t width,
                           const int64_t *seq, const int64_t *context, float scale, float *out, int64_t from,
                           int64_t to) {
    const int64_t group = H / KVH, plane = num_blocks * block_size * D;
    const char *base = cache;
    const int64_t bytes = bf16 ? 2 : 4;
    for (int64_t i = from; i < to;) {
        const int64_t t = i / H, h = i % H, kv = h / group, n = context[t];
        int64_t G = (kv + 1) * group - h; /* this KV head's heads from h on, within [from, to) */
        G = G < to - i ? G : to - i;
        G = G < MAX_GROUP ? G : MAX_GROUP;
        const void *K = base + kv * plane * bytes, *V = base + (KVH + kv) * plane * bytes;
        const int32_t *blocks = tables + seq[t] * width;
        /* NOTE: two calls with a constant flag, so each inlined copy loads one dtype without a branch */
        if (n > 0 && bf16)
            attend(q + i * D, K, V, 1, D, blocks, block_size, n, scale, G, out + i * D);
        else if (n > 0)
            attend(q + i * D, K, V, 0, D, blocks, block_size, n, scale, G, out + i * D);
        else
            memset(out + i * D, 0, G * D * sizeof(float));
        i += G;
    }
}

void paged_attention(const float *q, const void *cache, int bf16, int64_t T, int64_t H, int64_t KVH, int64_t D,
                     int64_t num_blocks, int64_t block_size, const int32_t *tables, int64_t width,
                     const int64_t *seq, const int64_t *context, float scale, float *out, int threads) {
    /* one task per token and KV head */
    const int64_t group = H / KVH;
    #pragma omp parallel for schedule(dynamic) num_threads(threads)
    for (int64_t i = 0; i < T * KVH; i++)
        paged_attention_pairs(q, cache, bf16, H, KVH, D, num_blocks, block_size, tables, width, seq, context, scale,
                              out, i * group, (i + 1) * group);
}
