/* The decoder layers of a decode step on CPU, in one call (inference/quant/decode_layer.py).
 *
 * The step's rows are decode tokens (or a verification's few tokens); every projection is kept
 * 4/8-bit (qmatmul.c), attention reads the paged cache in place (cpu_attention.c), both linked into
 * the same library. What Python ran between those calls (two RMSNorms, rope, the K/V write, SiLU * up,
 * two residual adds: a dozen torch ops per layer, each costing more to dispatch than it computes at one
 * row) runs here, and the threads meet at spin barriers inside one parallel region per step: an OpenMP
 * region per matmul woke a sleeping worker (OMP_WAIT_POLICY=PASSIVE) four times per layer.
 *
 * Per layer, x [M, hidden] is updated in place: x += o(attn(rope(qkv(norm_in(x))))), then
 * x += down(silu(gate) * up of gate_up(norm_post(x))).
 */
#include <math.h>
#include <omp.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../simd.h"

void quantize_rows(const float *x, int64_t M, int64_t K, int8_t *qx, float *dx, float *sx);
void mm_q4_rows(const int8_t *qx, const float *dx, const float *sx, int64_t M, int64_t K, const uint8_t *qs,
                const uint32_t *qh, const float *d, const float *mn, int64_t N, const float *bias, float *y,
                int64_t n0, int64_t n1);
void mm_q8_rows(const int8_t *qx, const float *dx, int64_t M, int64_t K, const int8_t *qw, const float *d,
                int64_t N, const float *bias, float *y, int64_t n0, int64_t n1);
void paged_attention_pairs(const float *q, const void *cache, int bf16, int64_t H, int64_t KVH, int64_t D,
                           int64_t num_blocks, int64_t block_size, const int32_t *tables, int64_t width,
                           const int64_t *seq, const int64_t *context, float scale, float *out, int64_t from,
                           int64_t to);

/* A weight as QuantWeight holds it: kind 4 (q4: nibbles, d, mn), 5 (q5: q4's and fifth bits qh) or 8
 * (q8: int8, d). */
typedef struct {
    int64_t kind, n, k;
    const void *q;
    const uint32_t *qh;
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
    int64_t kv_bf16;                /* the caches hold bf16 (else fp32) */
    int64_t threads;
} step_spec;

/* Scratch of one step: quantized activations and the intermediate rows. */
typedef struct {
    int8_t *qx;
    float *dx, *sx, *h, *qkv, *q, *attn, *gu;
} scratch;

/* Threads wait for each other by spinning: a stage lasts microseconds, less than a sleeping thread
 * takes to wake. Past SPINS polls a waiter yields its core (another process may need it to run the
 * thread being waited for). */
#define SPINS 20000

typedef struct {
    _Atomic int64_t arrived, phase;
    int64_t n;
} spin_barrier;

static void wait_all(spin_barrier *b) {
    /* NOTE: the phase is read before arriving: the last thread may open the next phase at once. */
    const int64_t phase = atomic_load_explicit(&b->phase, memory_order_acquire);
    if (atomic_fetch_add_explicit(&b->arrived, 1, memory_order_acq_rel) == b->n - 1) {
        atomic_store_explicit(&b->arrived, 0, memory_order_relaxed);
        atomic_store_explicit(&b->phase, phase + 1, memory_order_release);
        return;
    }
    for (int64_t spins = 0; atomic_load_explicit(&b->phase, memory_order_acquire) == phase; spins++) {
        if (spins < SPINS) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        } else {
            sched_yield();
        }
    }
}

static void rms_norm(const float *x, const float *w, float eps, int64_t M, int64_t K, float *out) {
    for (int64_t m = 0; m < M; m++) {
        const float *r = x + m * K;
        float ss = 0.f;
        for (int64_t i = 0; i < K; i++) ss += r[i] * r[i];
        const float inv = 1.f / sqrtf(ss / (float)K + eps);
        for (int64_t i = 0; i < K; i++) out[m * K + i] = r[i] * inv * w[i];
    }
}

/* This thread's share of y = qx @ w.T + bias (qx: the activations quantized by thread 0). */
static void project(const qweight *w, int64_t M, const scratch *t, float *y, int64_t tid, int64_t nt) {
    const int64_t n0 = w->n * tid / nt, n1 = w->n * (tid + 1) / nt;
    if (w->kind != 8)
        mm_q4_rows(t->qx, t->dx, t->sx, M, w->k, w->q, w->qh, w->d, w->mn, w->n, w->bias, y, n0, n1);
    else
        mm_q8_rows(t->qx, t->dx, M, w->k, w->q, w->d, w->n, w->bias, y, n0, n1);
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

/* D values of a K or V row into the cache at element `at`, in the cache's dtype. */
static void store_kv(void *cache, int64_t bf16, int64_t at, const float *v, int64_t D) {
    if (!bf16) {
        memcpy((float *)cache + at, v, D * sizeof(float));
        return;
    }
    for (int64_t d = 0; d < D; d++) ((uint16_t *)cache)[at + d] = bf16_bits(v[d]);
}

/* Rope on q and k, this step's K/V into the cache, q gathered for attention (thread 0). */
static void rope_and_store(const layer_spec *L, const step_spec *s, void *cache, scratch *t) {
    const int64_t H = L->heads, KVH = L->kv_heads, D = L->head_dim;
    const int64_t width = (H + 2 * KVH) * D, plane = s->num_blocks * s->block_size * D;
    for (int64_t m = 0; m < s->rows; m++) {
        float *row = t->qkv + m * width;
        rope(row, H + KVH, D, s->cos + m * D, s->sin + m * D);
        memcpy(t->q + m * H * D, row, H * D * sizeof(float));
        for (int64_t j = 0; j < KVH; j++) {
            store_kv(cache, s->kv_bf16, j * plane + s->slots[m] * D, row + (H + j) * D, D);
            store_kv(cache, s->kv_bf16, (KVH + j) * plane + s->slots[m] * D, row + (H + KVH + j) * D, D);
        }
    }
}

static void layer(const layer_spec *L, const step_spec *s, void *cache, float *x, scratch *t,
                  spin_barrier *b, int64_t tid, int64_t nt) {
    const int64_t M = s->rows, K = L->hidden, I = L->intermediate, pairs = M * L->heads;
    if (tid == 0) {
        rms_norm(x, L->norm_in, L->eps, M, K, t->h);
        quantize_rows(t->h, M, K, t->qx, t->dx, t->sx);
    }
    wait_all(b);
    project(&L->qkv, M, t, t->qkv, tid, nt);
    wait_all(b);
    if (tid == 0) rope_and_store(L, s, cache, t);
    wait_all(b);
    paged_attention_pairs(t->q, cache, (int)s->kv_bf16, L->heads, L->kv_heads, L->head_dim, s->num_blocks,
                          s->block_size, s->tables, s->width, s->seq, s->context, 1.f / sqrtf((float)L->head_dim),
                          t->attn, pairs * tid / nt, pairs * (tid + 1) / nt);
    wait_all(b);
    if (tid == 0) quantize_rows(t->attn, M, L->o.k, t->qx, t->dx, t->sx);
    wait_all(b);
    project(&L->o, M, t, t->h, tid, nt);
    wait_all(b);
    if (tid == 0) {
        for (int64_t i = 0; i < M * K; i++) x[i] += t->h[i];
        rms_norm(x, L->norm_post, L->eps, M, K, t->h);
        quantize_rows(t->h, M, K, t->qx, t->dx, t->sx);
    }
    wait_all(b);
    project(&L->gate_up, M, t, t->gu, tid, nt);
    wait_all(b);
    if (tid == 0) {
        for (int64_t m = 0; m < M; m++)
            for (int64_t i = 0; i < I; i++) {
                const float g = t->gu[m * 2 * I + i], u = t->gu[m * 2 * I + I + i];
                t->h[m * I + i] = g / (1.f + expf(-g)) * u;
            }
        quantize_rows(t->h, M, I, t->qx, t->dx, t->sx);
    }
    wait_all(b);
    project(&L->down, M, t, t->gu, tid, nt);
    wait_all(b);
    /* The next layer starts on thread 0 too: the others wait for its norm before reading. */
    if (tid == 0)
        for (int64_t i = 0; i < M * K; i++) x[i] += t->gu[i];
}

/* Every layer on x (updated in place); caches[l] is layer l's paged cache. 0, or -1 where scratch
 * could not be allocated (x and the caches are then unchanged). */
int decode_step(const layer_spec *layers, int64_t n_layers, const step_spec *s, void *const *caches, float *x) {
    const layer_spec *L = layers;
    const int64_t M = s->rows, K = L->hidden, I = L->intermediate, q_width = L->heads * L->head_dim;
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
        spin_barrier b = {0, 0, 1};
        #pragma omp parallel num_threads((int)s->threads)
        {
            /* NOTE: the runtime may give fewer threads than asked for; the barrier counts those. */
            #pragma omp single
            b.n = omp_get_num_threads();
            const int64_t tid = omp_get_thread_num(), nt = b.n;
            for (int64_t l = 0; l < n_layers; l++) layer(layers + l, s, caches[l], x, &t, &b, tid, nt);
        }
    }
    for (int i = 0; i < n_blocks; i++) free(blocks[i]);
    return ok ? 0 : -1;
}
