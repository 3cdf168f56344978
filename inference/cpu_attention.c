/* Paged attention on CPU, reading keys and values in place from the block pool (inference/attention.py,
 * inference/cpu_attention.py): no gather of each sequence's blocks, one pass per query head.
 *
 * Query token t attends the first context[t] keys of the sequence in row seq[t] of the block tables
 * (0 keys: a zero output). Pool layout: [2, kv_heads, num_blocks, block_size, D], K then V; query head
 * h reads KV head h / (H / KVH). D must be a multiple of 16 (the dot products' lanes).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float dot(const float *a, const float *b, int64_t D) {
    float acc[16] = {0};
    for (int64_t i = 0; i < D; i += 16)
        for (int j = 0; j < 16; j++) acc[j] += a[i + j] * b[i + j];
    float s = 0.f;
    for (int j = 0; j < 16; j++) s += acc[j];
    return s;
}

/* Pairs [from, to) of (token, head), numbered t * H + h: one thread's share (decode_layer.c). */
void paged_attention_pairs(const float *q, const float *cache, int64_t H, int64_t KVH, int64_t D,
                           int64_t num_blocks, int64_t block_size, const int32_t *tables, int64_t width,
                           const int64_t *seq, const int64_t *context, float scale, float *out, int64_t from,
                           int64_t to) {
    const int64_t group = H / KVH, plane = num_blocks * block_size * D;
    for (int64_t i = from; i < to; i++) {
        const int64_t t = i / H, h = i % H, n = context[t];
        const int32_t *blocks = tables + seq[t] * width;
        const float *K = cache + (h / group) * plane, *V = cache + (KVH + h / group) * plane;
        const float *qh = q + i * D;
        float *o = out + i * D;
        memset(o, 0, D * sizeof(float));
        if (n <= 0) continue;
        float p[n]; /* n <= max_model_len: at most a few hundred KB of stack */
        float top = -INFINITY, sum = 0.f;
        for (int64_t j = 0; j < n; j++) {
            const int64_t slot = (int64_t)blocks[j / block_size] * block_size + j % block_size;
            p[j] = dot(qh, K + slot * D, D) * scale;
            top = p[j] > top ? p[j] : top;
        }
        for (int64_t j = 0; j < n; j++) {
            p[j] = expf(p[j] - top);
            sum += p[j];
        }
        for (int64_t j = 0; j < n; j++) {
            const int64_t slot = (int64_t)blocks[j / block_size] * block_size + j % block_size;
            const float w = p[j] / sum, *v = V + slot * D;
            for (int64_t d = 0; d < D; d++) o[d] += w * v[d];
        }
    }
}

void paged_attention(const float *q, const float *cache, int64_t T, int64_t H, int64_t KVH, int64_t D,
                     int64_t num_blocks, int64_t block_size, const int32_t *tables, int64_t width,
                     const int64_t *seq, const int64_t *context, float scale, float *out, int threads) {
    #pragma omp parallel for schedule(dynamic) num_threads(threads)
    for (int64_t i = 0; i < T * H; i++)
        paged_attention_pairs(q, cache, H, KVH, D, num_blocks, block_size, tables, width, seq, context, scale,
                              out, i, i + 1);
}
