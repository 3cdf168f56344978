/* One decoder layer of a decode step on CPU, in one call (inference/quant/decode_layer.py).
 *
 * The step's rows are decode tokens (or a verification's few tokens); every projection is kept
 * 4/8-bit and goes through mm_q4 / mm_q8 (qmatmul.c), attention through paged_attention
 * (cpu_attention.c), both linked into the same library. What Python ran between those calls (two
 * RMSNorms, rope, the K/V write, SiLU * up, two residual adds: a dozen torch ops per layer, each
 * costing more to dispatch than it computes at one row) runs here, so a token costs one call per layer.
 *
 * x [M, hidden] is updated in place: x += o(attn(rope(qkv(norm_in(x))))), then
 * x += down(silu(gate) * up of gate_up(norm_post(x))).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void quantize_rows(const float *x, int64_t M, int64_t K, int8_t *qx, float *dx, float *sx);
void mm_q4(const int8_t *qx, const float *dx, const float *sx, int64_t M, int64_t K, const uint8_t *qs,
           const float *d, const float *mn, int64_t N, const float *bias, float *y, int threads);
void mm_q8(const int8_t *qx, const float *dx, int64_t M, int64_t K, const int8_t *qw, const float *d,
           int64_t N, const float *bias, float *y, int threads);
void paged_attention(const float *q, const float *cache, int64_t T, int64_t H, int64_t KVH, int64_t D,
                     int64_t num_blocks, int64_t block_size, const int32_t *tables, int64_t width,
                     const int64_t *seq, const int64_t *context, float scale, float *out, int threads);

/* A weight as QuantWeight holds it: kind 4 (q4: nibbles, d, mn) or 8 (q8: int8, d). */
typedef struct {
    int64_t kind, n, k;
    const void *q;
    const float *d, *mn, *bias;
} qweight;

typedef struct {
    int64_t hidden, heads, kv_heads, head_dim, intermediate;
    float eps;
    const float *norm_in, *norm_post;
    qweight qkv, o, gate_up, down;
} layer_spec;

/* What every layer of one step shares. */
typedef struct {
    int64_t rows;
    const float *cos, *sin;         /* [rows, head_dim]: cos and signed sin (inference/models/rope.py) */
    const int64_t *slots;           /* [rows] flat cache slot of each row's new K/V */
    const int32_t *tables;          /* [seqs, width] block tables */
    int64_t width, num_blocks, block_size;
    const int64_t *seq, *context;   /* [rows] each row's sequence and the keys it attends */
    int64_t attention_threads, threads;
} step_spec;

/* Scratch of one call: quantized activations and the intermediate rows. */
typedef struct {
    int8_t *qx;
    float *dx, *sx, *h, *qkv, *q, *attn, *gu;
} scratch;

static void rms_norm(const float *x, const float *w, float eps, int64_t M, int64_t K, float *out) {
    for (int64_t m = 0; m < M; m++) {
        const float *r = x + m * K;
        float ss = 0.f;
        for (int64_t i = 0; i < K; i++) ss += r[i] * r[i];
        const float inv = 1.f / sqrtf(ss / (float)K + eps);
        for (int64_t i = 0; i < K; i++) out[m * K + i] = r[i] * inv * w[i];
    }
}

/* y = h @ w.T + bias for M rows of h (quantized here, as qlinear does). */
static void project(const qweight *w, const float *h, int64_t M, const step_spec *s, scratch *t, float *y) {
    quantize_rows(h, M, w->k, t->qx, t->dx, t->sx);
    const int threads = (int)s->threads;
    if (w->kind == 4)
        mm_q4(t->qx, t->dx, t->sx, M, w->k, w->q, w->d, w->mn, w->n, w->bias, y, threads);
    else
        mm_q8(t->qx, t->dx, M, w->k, w->q, w->d, w->n, w->bias, y, threads);
}

/* rotate_half rope on the first `heads` heads of a row: x * cos + roll(x, D / 2) * signed_sin. */
static void rope(float *x, int64_t heads, int64_t D, const float *cos, const float *sin) {
    float r[D];
    for (int64_t h = 0; h < heads; h++) {
        float *v = x + h * D;
        memcpy(r, v, D * sizeof(float));
        for (int64_t i = 0; i < D; i++) v[i] = r[i] * cos[i] + r[(i + D / 2) % D] * sin[i];
    }
}

static void attention_block(const layer_spec *L, const step_spec *s, float *cache, scratch *t) {
    const int64_t M = s->rows, H = L->heads, KVH = L->kv_heads, D = L->head_dim;
    const int64_t width = (H + 2 * KVH) * D, plane = s->num_blocks * s->block_size * D;
    for (int64_t m = 0; m < M; m++) {
        float *row = t->qkv + m * width;
        rope(row, H + KVH, D, s->cos + m * D, s->sin + m * D);
        memcpy(t->q + m * H * D, row, H * D * sizeof(float));
        for (int64_t j = 0; j < KVH; j++) {
            memcpy(cache + j * plane + s->slots[m] * D, row + (H + j) * D, D * sizeof(float));
            memcpy(cache + (KVH + j) * plane + s->slots[m] * D, row + (H + KVH + j) * D, D * sizeof(float));
        }
    }
    paged_attention(t->q, cache, M, H, KVH, D, s->num_blocks, s->block_size, s->tables, s->width, s->seq,
                    s->context, 1.f / sqrtf((float)D), t->attn, (int)s->attention_threads);
}

/* 0, or -1 where scratch could not be allocated (x is then unchanged). */
int decode_layer(const layer_spec *L, const step_spec *s, float *cache, float *x) {
    const int64_t M = s->rows, K = L->hidden, I = L->intermediate;
    const int64_t q_width = L->heads * L->head_dim;
    const int64_t kmax = I > K ? (I > q_width ? I : q_width) : (K > q_width ? K : q_width);
    scratch t;
    void *blocks[] = {
        t.qx = malloc(M * kmax),
        t.dx = malloc(M * (kmax / 32) * sizeof(float)),
        t.sx = malloc(M * (kmax / 32) * sizeof(float)),
        t.h = malloc(M * kmax * sizeof(float)),
        t.qkv = malloc(M * L->qkv.n * sizeof(float)),
        t.q = malloc(M * q_width * sizeof(float)),
        t.attn = malloc(M * q_width * sizeof(float)),
        t.gu = malloc(M * (2 * I > K ? 2 * I : K) * sizeof(float)),
    };
    const int n_blocks = sizeof(blocks) / sizeof(blocks[0]);
    int ok = 1;
    for (int i = 0; i < n_blocks; i++) ok &= blocks[i] != NULL;
    if (ok) {
        rms_norm(x, L->norm_in, L->eps, M, K, t.h);
        project(&L->qkv, t.h, M, s, &t, t.qkv);
        attention_block(L, s, cache, &t);
        project(&L->o, t.attn, M, s, &t, t.h);
        for (int64_t i = 0; i < M * K; i++) x[i] += t.h[i];
        rms_norm(x, L->norm_post, L->eps, M, K, t.h);
        project(&L->gate_up, t.h, M, s, &t, t.gu);
        for (int64_t m = 0; m < M; m++)
            for (int64_t i = 0; i < I; i++) {
                const float g = t.gu[m * 2 * I + i], u = t.gu[m * 2 * I + I + i];
                t.h[m * I + i] = g / (1.f + expf(-g)) * u;
            }
        project(&L->down, t.h, M, s, &t, t.gu);
        for (int64_t i = 0; i < M * K; i++) x[i] += t.gu[i];
    }
    for (int i = 0; i < n_blocks; i++) free(blocks[i]);
    return ok ? 0 : -1;
}
