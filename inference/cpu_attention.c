/* Paged attention on CPU, reading keys and values in place from the block pool (inference/attention.py,
 * inference/cpu_attention.py): no gather of each sequence's blocks.
 *
 * Query token t attends the first context[t] keys of the sequence in row seq[t] of the block tables
 * (0 keys: a zero output). Pool layout: [2, kv_heads, num_blocks, block_size, D], K then V; query head
 * h reads KV head h / (H / KVH). D must be a multiple of 16 (the dot products' lanes).
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
/* s[j] = scale * q . K[at[j]] for the tile's len keys, four keys at a time (one reduction for four). */
static void scores(const float *q, const float *K, const int64_t *at, int64_t len, int64_t D, float scale,
                   float *s) {
    int64_t j = 0;
    for (; j + 4 <= len; j += 4) {
        __m256 a[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
        for (int64_t d = 0; d < D; d += 8) {
            const __m256 qv = _mm256_loadu_ps(q + d);
            for (int k = 0; k < 4; k++) a[k] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(K + at[j + k] + d), a[k]);
        }
        const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
        const __m128 four = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
        _mm_storeu_ps(s + j, _mm_mul_ps(four, _mm_set1_ps(scale)));
    }
    for (; j < len; j++) {
        __m256 a = _mm256_setzero_ps();
        for (int64_t d = 0; d < D; d += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(K + at[j] + d), a);
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

/* o = o * c + sum_j w[j] V[at[j]], 16 lanes of o at a time kept in registers over the tile. */
static void weigh_values(float *o, float c, const float *w, const float *V, const int64_t *at, int64_t len,
                         int64_t D) {
    for (int64_t d = 0; d < D; d += 16) {
        __m256 x = _mm256_mul_ps(_mm256_loadu_ps(o + d), _mm256_set1_ps(c));
        __m256 y = _mm256_mul_ps(_mm256_loadu_ps(o + d + 8), _mm256_set1_ps(c));
        for (int64_t j = 0; j < len; j++) {
            const __m256 wj = _mm256_set1_ps(w[j]);
            x = _mm256_fmadd_ps(wj, _mm256_loadu_ps(V + at[j] + d), x);
            y = _mm256_fmadd_ps(wj, _mm256_loadu_ps(V + at[j] + d + 8), y);
        }
        _mm256_storeu_ps(o + d, x);
        _mm256_storeu_ps(o + d + 8, y);
    }
}
#else
static void scores(const float *q, const float *K, const int64_t *at, int64_t len, int64_t D, float scale,
                   float *s) {
    for (int64_t j = 0; j < len; j++) {
        float acc[16] = {0};
        for (int64_t i = 0; i < D; i += 16)
            for (int k = 0; k < 16; k++) acc[k] += q[i + k] * K[at[j] + i + k];
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

static void weigh_values(float *o, float c, const float *w, const float *V, const int64_t *at, int64_t len,
                         int64_t D) {
    for (int64_t d = 0; d < D; d++) o[d] *= c;
    for (int64_t j = 0; j < len; j++)
        for (int64_t d = 0; d < D; d++) o[d] += w[j] * V[at[j] + d];
}
#endif

/* Heads h0..h0+G-1 of a token (all reading the KV head at K, V) over its n keys, into out [G, D]. */
static void attend(const float *q, const float *K, const float *V, int64_t D, const int32_t *blocks,
                   int64_t block_size, int64_t n, float scale, int64_t G, float *out) {
    float s[TILE], top[MAX_GROUP], sum[MAX_GROUP];
    int64_t at[TILE]; /* the tile's keys' offsets in the pool plane */
    for (int64_t g = 0; g < G; g++) {
        top[g] = -INFINITY;
        sum[g] = 0.f;
        memset(out + g * D, 0, D * sizeof(float));
    }
    int64_t b = 0, r = 0; /* the next key's block and offset in it */
    for (int64_t j0 = 0; j0 < n; j0 += TILE) {
        const int64_t len = n - j0 < TILE ? n - j0 : TILE;
        for (int64_t j = 0; j < len; j++) {
            at[j] = ((int64_t)blocks[b] * block_size + r) * D;
            if (++r == block_size) r = 0, b++;
        }
        for (int64_t g = 0; g < G; g++) {
            scores(q + g * D, K, at, len, D, scale, s);
            float m = top[g];
            for (int64_t j = 0; j < len; j++) m = s[j] > m ? s[j] : m;
            const float c = expf(top[g] - m); /* 0 on the first tile (top = -inf) */
            sum[g] = sum[g] * c + exp_shifted(s, len, m);
            top[g] = m;
            weigh_values(out + g * D, c, s, V, at, len, D);
        }
    }
    for (int64_t g = 0; g < G; g++)
        for (int64_t d = 0; d < D; d++) out[g * D + d] /= sum[g];
}

/* Pairs [from, to) of (token, head), numbered t * H + h: one thread's share (decode_layer.c); the
 * pairs of a token that share a KV head go through `attend` together. */
void paged_attention_pairs(const float *q, const float *cache, int64_t H, int64_t KVH, int64_t D,
                           int64_t num_blocks, int64_t block_size, const int32_t *tables, int64_t width,
                           const int64_t *seq, const int64_t *context, float scale, float *out, int64_t from,
                           int64_t to) {
    const int64_t group = H / KVH, plane = num_blocks * block_size * D;
    for (int64_t i = from; i < to;) {
        const int64_t t = i / H, h = i % H, kv = h / group, n = context[t];
        int64_t G = (kv + 1) * group - h; /* this KV head's heads from h on, within [from, to) */
        G = G < to - i ? G : to - i;
        G = G < MAX_GROUP ? G : MAX_GROUP;
        if (n > 0)
            attend(q + i * D, cache + kv * plane, cache + (KVH + kv) * plane, D, tables + seq[t] * width,
                   block_size, n, scale, G, out + i * D);
        else
            memset(out + i * D, 0, G * D * sizeof(float));
        i += G;
    }
}

void paged_attention(const float *q, const float *cache, int64_t T, int64_t H, int64_t KVH, int64_t D,
                     int64_t num_blocks, int64_t block_size, const int32_t *tables, int64_t width,
                     const int64_t *seq, const int64_t *context, float scale, float *out, int threads) {
    /* one task per token and KV head */
    const int64_t group = H / KVH;
    #pragma omp parallel for schedule(dynamic) num_threads(threads)
    for (int64_t i = 0; i < T * KVH; i++)
        paged_attention_pairs(q, cache, H, KVH, D, num_blocks, block_size, tables, width, seq, context, scale,
                              out, i * group, (i + 1) * group);
}
