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

void paged_attention(const float *q, const float *cache, int64_t T, int64_t H, int64_t KVH, int64_t D,
                     int64_t num_blocks, int64_t block_size, const int32_t *tables, int64_t width,
                     const int64_t *seq, const int64_t *context, float scale, float *out, int threads) {
    const int64_t group = H / KVH, plane = num_blocks * block_size * D;
    #pragma omp parallel for collapse(2) schedule(dynamic) num_threads(threads)
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < H; h++) {
            const int64_t n = context[t];
            const int32_t *blocks = tables + seq[t] * width;
            const float *K = cache + (h / group) * plane, *V = cache + (KVH + h / group) * plane;
            const float *qh = q + (t * H + h) * D;
            float *o = out + (t * H + h) * D;
            memset(o, 0, D * sizeof(float));
            if (n <= 0) continue;
            float p[n]; /* n <= max_model_len: at most a few hundred KB of stack */
            float top = -INFINITY, sum = 0.f;
            for (int64_t i = 0; i < n; i++) {
                const int64_t slot = (int64_t)blocks[i / block_size] * block_size + i % block_size;
                p[i] = dot(qh, K + slot * D, D) * scale;
                top = p[i] > top ? p[i] : top;
            }
            for (int64_t i = 0; i < n; i++) {
                p[i] = expf(p[i] - top);
                sum += p[i];
            }
            for (int64_t i = 0; i < n; i++) {
                const int64_t slot = (int64_t)blocks[i / block_size] * block_size + i % block_size;
                const float w = p[i] / sum, *v = V + slot * D;
                for (int64_t d = 0; d < D; d++) o[d] += w * v[d];
            }
        }
}
