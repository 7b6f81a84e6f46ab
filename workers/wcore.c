/* The worker core's per-packet path in C (workers/native.py builds and drives it).
 *
 * The same protocol as workers/core.py, recovery.py, acceptance.py and window.py (the
 * reference; tests/unit/test_worker_native.py runs both on the same frames and clock and
 * compares every frame sent), for what a call does per packet: matching a RESULT or ACK to
 * the slot use in flight (or counting it as a duplicate or stale), exponent agreement (the
 * agreed scheme: bootstrap uses, each result agreeing the exponent of the slot's next block;
 * or speculation, `spec`: each block's first use quantized with the caller's prediction, a
 * miss sent again once with the switch's max; tests/unit/test_worker_native_spec.py), the
 * result's values dequantized into the caller's float32 output, RTT/RTO (RFC 6298), the
 * congestion window, fast retransmit (RACK's reordering window), timers with backoff held
 * behind recovery.py's gate (one probe per doubling interval of silence; the Python face,
 * workers/wface.c, takes the STATUS that answers a probe), and the launch of the next blocks:
 * header words written in the slot's row (byte 18: qexp, the exponent the values are
 * quantized with), the block quantized into it, the frame copied out.
 *
 * The slots' state is one array of `Slot` kept across the calls of the API (the slot table);
 * the per-block arrays (offsets, owners, flags, proposals, predictions) and the outputs
 * (agreed exponents, maxima, whether a block's next launch is its retry, result flags,
 * latencies) are buffers of the Python core, written in place: its result(), stats and
 * refusal code (the qexp of the use a REJECT names) read them there.  A RESULT's
 * values go straight into the float32 output (`dst`: the tensor, or this rank's shard) when
 * the result is accepted: int32 times 2^(E-s) in double, rounded once to float32, as
 * quant.dequantize computes them; its two checks (nonzero sums under EXP_ZERO, an Inf after
 * the rounding) are recorded (the lowest block, the lowest offset) and raised by
 * NativeCore.result() as the reference raises them, after the call.
 *
 * Anything that is not a RESULT/ACK of this job (a STATUS, a REJECT, garbage, an ACK for a
 * chunk this rank owns) stops the batch at that frame with SLOW: the Python core handles it
 * with its own code (the messages, the status book, the refusal's error) and resumes the
 * batch after it, so frames are handled in the order they came either way.
 *
 * Frames sent in one call are copied into the output rows at the moment they are queued:
 * what one call per packet would have sent (the reference keeps the same by copying a queued
 * row before it changes, WorkerCore._keep). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define HB 24                          /* netsum header bytes (protocol v2) */
#define F_RETX 0x01
#define F_NONFINITE 0x02
#define F_ACK 0x04
#define F_KNOWN 0x07
#define T_RESULT 2
#define T_REJECT 4
#define DEST_ALL 0xFF
#define EXP_ZERO 0
#define EXP_BIAS 127
#define IDLE (-(INT64_C(1) << 62))     /* workers/recovery.py IDLE */
#define SLOT_BITS 16

enum { OK = 0, SLOW = 1, BOOT_NONZERO = 2, AGREE_LOW = 3, AGREE_NONZERO = 4, TIMEOUT = 5,
       OUT_FULL = 6, SPEC_LOW = 7, RETRY_DIFF = 8 };

typedef struct {
    int64_t cur_block;      /* block of the use in flight, IDLE for none (<0: bootstrap) */
    int64_t acc_round, acc_offset;     /* the last accepted use, -1 before one */
    int64_t attempts, seq;
    uint32_t cur_round, want_offset, next_round;
    int held;               /* a STATUS for the use in flight since its latest copy */
    double first_sent, rto, timer, tx_at;
} Slot;

enum { B_TX, B_ROWS, B_OFFSETS, B_DESTS, B_NF, B_MINE, B_PROPS, B_AGREED, B_MAXIMA, B_RFLAGS,
       B_LAT, B_DST, B_PRED, B_TRIED, NBUF };

typedef struct {
    Py_buffer buf[NBUF];
    int held[NBUF];
    Py_buffer outb;
    int out_held;
    uint8_t *tx, *out;
    const float *rows;
    const uint32_t *offsets;
    const uint8_t *dests, *nf, *mine, *props;
    uint8_t *agreed, *maxima, *rflags;
    const uint8_t *pred;    /* speculation (spec): the caller's prediction per block */
    uint8_t *tried;         /* per block: 0, its next launch is its speculative use; 1, the retry */
    int spec, slack;
    float *dst;             /* the result: block b's values at (b - dst_b0) * k */
    double *lat;
    int64_t stride, hr, w, nb, k, cap, nout, job_id, shift, fr, window_min;
    int64_t dst_b0, dst_len;
    int64_t zero_bad;       /* lowest block (from dst_b0) with sums under EXP_ZERO, or -1 */
    int64_t inf_at;         /* lowest offset in dst rounded to Inf, or -1 */
    double inf_val;         /* its value before the rounding */
    double rto_initial, rto_min, rto_max, backoff, deadline;
    int adaptive;
    Slot *s;
    int64_t *pending, npending, *flying, nflying, fly_cap;
    int64_t *uq, uq_head, uq_len, uq_cap, *due;
    int64_t tx_count, sent, retx, boot, results, dups, stale, chunks, fast, in_flight, active;
    int64_t spurious, misses;
    int64_t gap_seq, gap;
    double cwnd, ssthresh, last_cut, min_rtt, srtt, rttvar, base_rto, tmin;
    double gate, free_until;       /* held timers: LossRecovery's fields */
    int64_t probe;                 /* the probe not yet answered by its result, -1: none */
    double started, finished, progress, deadline_at;
    int has_srtt, running, done;
    int64_t err_a, err_b, err_c;
} Core;

static inline uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline void put32(uint8_t *p, uint32_t v) {
    p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v;
}
static inline int64_t slot_of(const Core *c, int64_t block) {   /* Python's block % w */
    int64_t i = block % c->w;
    return i < 0 ? i + c->w : i;
}

/* -- min-heaps of int64 (heapq's order; the values in one heap are distinct) ------------ */
static void heap_push(int64_t *h, int64_t *n, int64_t v) {
    int64_t i = (*n)++;
    while (i > 0) {
        int64_t p = (i - 1) / 2;
        if (h[p] <= v) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = v;
}
static void heap_pop(int64_t *h, int64_t *n) {
    int64_t last = h[--(*n)], i = 0, m = *n;
    for (;;) {
        int64_t l = 2 * i + 1, r = l + 1, j = i;
        int64_t best = last;
        if (l < m && h[l] < best) { j = l; best = h[l]; }
        if (r < m && h[r] < best) { j = r; }
        if (j == i) break;
        h[i] = h[j];
        i = j;
    }
    if (m) h[i] = last;
}

/* -- the unanswered transmissions, in send order (a deque of seq << 16 | slot) ---------- */
static int uq_push(Core *c, int64_t v) {
    if (c->uq_len == c->uq_cap) {
        int64_t cap = c->uq_cap * 2;
        int64_t *q = malloc(sizeof(int64_t) * cap);
        if (!q) return -1;
        for (int64_t j = 0; j < c->uq_len; j++) q[j] = c->uq[(c->uq_head + j) % c->uq_cap];
        free(c->uq);
        c->uq = q; c->uq_head = 0; c->uq_cap = cap;
    }
    c->uq[(c->uq_head + c->uq_len) % c->uq_cap] = v;
    c->uq_len++;
    return 0;
}
static inline void uq_popleft(Core *c) {
    c->uq_head = (c->uq_head + 1) % c->uq_cap;
    c->uq_len--;
}

/* -- sending ---------------------------------------------------------------------------- */
static int queue(Core *c, int64_t i) {
    if (c->nout >= c->cap) return OUT_FULL;
    memcpy(c->out + c->nout * c->stride, c->tx + i * c->stride, c->stride);
    c->nout++;
    return OK;
}

/* -- the per-value loops (workers/wvalues.c, compiled before this file) ------------- */
/* Block b's values into slot i's row quantized with the biased exponent e (EXP_ZERO: zeros):
 * rint(x * 2^(s-E)) as big-endian int32, the integers
 * of quant.quantize_block (float64) and of the window's float32 ones: multiplying a float32
 * by a power of two float32 holds is exact (a product below 2^-126 rounds to 0 under rint
 * either way), and so is rint.  Where 2^(s-E) is beyond float32 (E below 2^-97), float64
 * and nearbyint, value by value, as the reference's quantize_block. */
static void quantize(Core *c, int64_t i, int64_t b, int e) {
    uint8_t *restrict v = c->tx + i * c->stride + c->hr + HB;
    const float *restrict x = c->rows + b * c->k;
    int64_t k = c->k, j = 0;
    if (e == EXP_ZERO) {
        memset(v, 0, 4 * k);
        return;
    }
    int d = (int)(c->shift - (e - EXP_BIAS));
    if (d > F32_MAX_EXP) {
        double f = ldexp(1.0, d);
        for (; j < k; j++) put32(v + 4 * j, (uint32_t)(int32_t)nearbyint((double)x[j] * f));
        return;
    }
    quantize_f32(v, x, ldexpf(1.0f, d), k);
}

/* Block b's sums (big-endian int32 at v) into the output: the result of this rank's block,
 * dequantized with its agreed exponent E: int32 times 2^(E-s) in double (exact: a 31-bit
 * integer and an exponent well inside float64's range), rounded once to float32, as
 * quant.dequantize computes them.  Where no result can be subnormal (2^(E-s) >= 2^-126),
 * float32 gives the same value: rounding the integer to float32 first and then scaling by a
 * power of two is the same single rounding when nothing under- or overflows, and overflows
 * (to Inf) exactly when the rounded value is beyond float32.  Its n real values (the rest of
 * the K is the last block's padding) are written; the checks of quant.dequantize are kept
 * and recorded (lowest block, lowest offset) for result(). */
static void dequantize(Core *c, int64_t b, const uint8_t *restrict v) {
    int64_t db = b - c->dst_b0, at = db * c->k, n = c->dst_len - at, j = 0;
    if (n > c->k) n = c->k;
    float *restrict out = c->dst + at;
    int e = c->agreed[b];
    if (e == EXP_ZERO) {
        /* every rank proposed EXP_ZERO: every rank's values were zeros, so is their sum */
        uint32_t any = 0;
        for (int64_t t = 0; t < 4 * c->k; t++) any |= v[t];
        if (any && (c->zero_bad < 0 || db < c->zero_bad)) c->zero_bad = db;
        memset(out, 0, sizeof(float) * (size_t)(n > 0 ? n : 0));
        return;
    }
    int m = (int)(e - EXP_BIAS - c->shift);
    int big = 0;
    if (m >= -126) {
        big = dequantize_f32(out, v, ldexpf(1.0f, m), n);
    } else {
        const double f = ldexp(1.0, m);
        for (; j < n; j++) {
            out[j] = (float)((double)(int32_t)be32(v + 4 * j) * f);
            big |= isinf(out[j]);
        }
    }
    if (big && (c->inf_at < 0 || at < c->inf_at)) {
        const double f = ldexp(1.0, m);
        for (j = 0; j < n; j++)
            if (isinf(out[j])) {
                if (c->inf_at < 0 || at + j < c->inf_at) {
                    c->inf_at = at + j;
                    c->inf_val = (double)(int32_t)be32(v + 4 * j) * f;
                }
                break;
            }
    }
}

/* Slot i's row carries a new use: flags (NONFINITE or 0), the exponent field, round, offset,
 * dest and qexp (byte 18: the exponent its values are quantized with, EXP_ZERO for a
 * bootstrap's zeros). */
static void launch_row(Core *c, int64_t i, int exp, uint32_t round, uint32_t offset, int dest,
                       int flags, int qexp) {
    uint8_t *p = c->tx + i * c->stride + c->hr;
    p[1] = flags;
    p[6] = exp;
    p[7] = 0;
    put32(p + 8, round);
    put32(p + 12, offset);
    p[17] = dest;
    p[18] = qexp;
}

static int64_t lowest_in_flight(Core *c, int64_t dflt) {
    while (c->nflying) {
        int64_t b = c->flying[0];
        if (c->s[slot_of(c, b)].cur_block == b) return b;
        heap_pop(c->flying, &c->nflying);
    }
    return dflt;
}

static int pump(Core *c, double now) {
    if (!c->npending) return OK;
    double base = c->base_rto, t = now + base;
    while (c->npending) {
        int64_t block = c->pending[0];
        if ((double)c->in_flight >= c->cwnd && block > lowest_in_flight(c, block)) break;
        heap_pop(c->pending, &c->npending);
        int64_t i = slot_of(c, block);
        Slot *s = &c->s[i];
        s->cur_block = block;
        if (c->nflying == c->fly_cap) {      /* stale entries: rebuild from the live ones */
            c->nflying = 0;
            for (int64_t j = 0; j < c->w; j++)
                if (c->s[j].cur_block != IDLE && j != i)
                    heap_push(c->flying, &c->nflying, c->s[j].cur_block);
        }
        heap_push(c->flying, &c->nflying, block);
        int64_t ahead = block + c->w;
        if (c->spec) {
            /* the proposal for this very block; its first use quantized with the prediction
             * (zeros where this rank's block is above it: the proposal makes it a miss),
             * its retry with the exponent the first use's result brought */
            int q = c->tried[block] ? c->agreed[block] : c->pred[block];
            int e = c->tried[block] || c->props[block] <= q ? q : EXP_ZERO;
            s->want_offset = c->offsets[block];
            launch_row(c, i, c->props[block], s->cur_round, s->want_offset, c->dests[block],
                       c->nf[block], q);
            quantize(c, i, block, e);
        } else if (block >= 0) {
            int exp = ahead < c->nb ? c->props[ahead] : EXP_ZERO;
            s->want_offset = c->offsets[block];
            launch_row(c, i, exp, s->cur_round, s->want_offset, c->dests[block], c->nf[block],
                       c->agreed[block]);
            quantize(c, i, block, c->agreed[block]);
        } else {
            int exp = ahead < c->nb ? c->props[ahead] : EXP_ZERO;
            s->want_offset = c->offsets[ahead];
            launch_row(c, i, exp, s->cur_round, s->want_offset, DEST_ALL, 0, EXP_ZERO);
            c->boot++;       /* its values are zeros, as the row is from allocation */
        }
        s->first_sent = now;
        s->attempts = 0;
        s->rto = base;
        s->timer = t;
        if (t < c->tmin) c->tmin = t;
        s->tx_at = now;
        s->held = 0;
        s->seq = ++c->tx_count;
        if (c->fr && uq_push(c, s->seq << SLOT_BITS | i)) return OUT_FULL;
        c->in_flight++;
        c->sent++;
        int r = queue(c, i);
        if (r) return r;
    }
    return OK;
}

static int retransmit(Core *c, int64_t i, double now) {
    Slot *s = &c->s[i];
    s->attempts++;                     /* Karn: no RTT sample from this use any more */
    s->tx_at = now;
    s->held = 0;
    s->seq = ++c->tx_count;
    if (c->fr && uq_push(c, s->seq << SLOT_BITS | i)) return OUT_FULL;
    c->sent++;
    c->retx++;
    c->tx[i * c->stride + c->hr + 1] |= F_RETX;
    return queue(c, i);
}

static void loss_signal(Core *c, double now) {
    double ref = (c->has_srtt && c->srtt != 0.0) ? c->srtt : c->base_rto;
    if (now - c->last_cut < ref) return;
    double floor = (double)(c->window_min < c->w ? c->window_min : c->w);
    double half = c->cwnd / 2;
    c->ssthresh = floor > half ? floor : half;
    c->cwnd = c->ssthresh;
    c->last_cut = now;
}

/* When a timer may fire next: the least timer, held until the gate (LossRecovery.next_timer). */
static inline double next_timer(const Core *c) {
    if (c->tmin < c->free_until) return c->tmin;
    return c->tmin > c->gate ? c->tmin : c->gate;
}

static int gap_check(Core *c, int64_t seq, double rtt, double now) {
    int64_t sq = 0, j = 0;
    for (;;) {
        if (!c->uq_len) return OK;
        int64_t e = c->uq[c->uq_head];
        sq = e >> SLOT_BITS;
        j = e & ((1 << SLOT_BITS) - 1);
        if (c->s[j].cur_block != IDLE && c->s[j].seq == sq) break;
        uq_popleft(c);
    }
    if (sq > seq) return OK;
    if (sq != c->gap_seq) { c->gap_seq = sq; c->gap = 0; }
    c->gap++;
    if (c->gap < c->fr || now - c->s[j].tx_at < rtt + c->min_rtt / 4) return OK;
    uq_popleft(c);
    c->fast++;
    if (c->adaptive) loss_signal(c, now);
    double t = now + c->s[j].rto;     /* not a timeout: no backoff, restarted from now */
    c->s[j].timer = t;
    if (t < c->tmin) c->tmin = t;
    return retransmit(c, j, now);
}

/* -- receiving -------------------------------------------------------------------------- */
static int accept(Core *c, int64_t i, int64_t block, uint32_t round, int exp, int flags,
                  const uint8_t *p, double now) {
    Slot *s = &c->s[i];
    int64_t k4 = 4 * c->k;
    int64_t ahead = block + c->w;
    int hit = 1;
    if (c->spec) {
        /* exp is the max of the proposals for this block itself */
        if (exp < c->props[block]) {
            c->err_a = i; c->err_b = exp; c->err_c = block;
            return SPEC_LOW;
        }
        c->maxima[block] = exp;
        if (!c->tried[block]) {
            int pr = c->pred[block];
            hit = exp == EXP_ZERO || (exp <= pr && pr <= exp + c->slack);
            c->agreed[block] = hit ? (exp == EXP_ZERO ? EXP_ZERO : pr) : exp;
            if (!hit) {
                c->tried[block] = 1;
                c->misses++;
            }
        } else if (exp != c->agreed[block]) {
            c->err_a = i; c->err_b = exp; c->err_c = block;
            return RETRY_DIFF;
        }
    } else {
        if (block < 0 && p) {
            for (int64_t j = 0; j < k4; j++)
                if (p[HB + j]) { c->err_a = i; c->err_b = round; return BOOT_NONZERO; }
        }
        if (ahead < c->nb) {
            if (exp < c->props[ahead]) {
                c->err_a = i; c->err_b = exp; c->err_c = ahead;
                return AGREE_LOW;
            }
            c->agreed[ahead] = c->maxima[ahead] = exp;
        } else if (exp != EXP_ZERO) {
            c->err_a = i; c->err_b = exp;
            return AGREE_NONZERO;
        }
    }
    double rtt = now - s->first_sent;
    if (block >= 0 && hit) {
        if (p && c->mine[block]) dequantize(c, block, p + HB);
        c->rflags[block] = flags & F_NONFINITE;
        c->lat[block] = rtt;
        c->chunks++;
    }
    if (s->attempts == 0) {            /* RFC 6298, as LossRecovery / WorkerCore._accept */
        double srtt;
        if (!c->has_srtt) {
            srtt = rtt;
            c->rttvar = rtt / 2;
        } else {
            /* RFC 7323 appendix G: gains over the uses in flight (a sample per result) */
            double n = c->in_flight > 1 ? (double)c->in_flight : 1.0;
            srtt = c->srtt;
            c->rttvar += (fabs(srtt - rtt) - c->rttvar) / (4 * n);
            srtt += (rtt - srtt) / (8 * n);
        }
        c->srtt = srtt;
        c->has_srtt = 1;
        double v = srtt + 4 * c->rttvar;
        if (c->rto_min > v) v = c->rto_min;
        if (c->rto_max < v) v = c->rto_max;
        c->base_rto = v;
        if (rtt < c->min_rtt) c->min_rtt = rtt;
    } else if (now - s->tx_at < c->min_rtt) {
        c->spurious++;                 /* answered from an earlier copy: counted only */
    }
    /* LossRecovery.answered: a copy sent again answered by itself, no STATUS for it: a
     * real loss, the due timers fire for an RTO (a probe's cuts the window here) */
    if (s->attempts && !s->held &&
        now - s->tx_at >= (c->min_rtt < INFINITY ? c->min_rtt : 0.0)) {
        c->free_until = now + c->base_rto;
        if (i == c->probe && c->adaptive) loss_signal(c, now);
    }
    if (i == c->probe) c->probe = -1;
    c->gate = now + c->base_rto;       /* results flow: the gate restarts */
    c->results++;
    s->acc_round = round;
    s->acc_offset = s->want_offset;
    c->progress = now;
    c->deadline_at = now + c->deadline;
    c->in_flight--;
    s->cur_block = IDLE;
    s->timer = INFINITY;
    if (c->fr) {
        int r = gap_check(c, s->seq, now - s->tx_at, now);
        if (r) return r;
    }
    if (c->adaptive) {
        double cw = c->cwnd;
        cw += cw < c->ssthresh ? 1.0 : 1.0 / cw;
        c->cwnd = cw < (double)c->w ? cw : (double)c->w;
    }
    uint32_t nxt = round + 1;
    s->cur_round = nxt;
    if (!hit) {                        /* a miss: the block again, on the same slot */
        heap_push(c->pending, &c->npending, block);
    } else if (ahead < c->nb) {
        heap_push(c->pending, &c->npending, ahead);
    } else {
        s->next_round = nxt;
        if (--c->active == 0) {
            c->running = 0;
            c->done = 1;
            c->finished = now;
        }
    }
    return c->running ? pump(c, now) : OK;
}

/* One payload: OK (taken, counted), SLOW (the Python core's to handle), or an error. */
static int take(Core *c, const uint8_t *p, Py_ssize_t len, double now) {
    int64_t size = HB + 4 * c->k;
    if (len != size && len != HB) return SLOW;
    int msg = p[0], flags = p[1];
    int64_t job = (int64_t)p[2] << 8 | p[3], i = (int64_t)p[4] << 8 | p[5];
    int exp = p[6];
    uint32_t round = be32(p + 8), offset = be32(p + 12);
    const uint8_t *values = p;
    if (len == size) {
        if (msg != T_RESULT || job != c->job_id || (flags & ~(F_RETX | F_NONFINITE)))
            return SLOW;
    } else {
        if (job != c->job_id || (flags & ~F_KNOWN) || msg != T_RESULT || !(flags & F_ACK))
            return SLOW;
        values = NULL;
    }
    if (i < c->w) {
        Slot *s = &c->s[i];
        int64_t block = s->cur_block;
        if (block != IDLE && round == s->cur_round && offset == s->want_offset) {
            if (!values && (block < 0 || c->mine[block])) return SLOW;
            return accept(c, i, block, round, exp, flags, values, now);
        }
        if ((int64_t)round == s->acc_round && (int64_t)offset == s->acc_offset) {
            c->dups++;
            return OK;
        }
    }
    c->stale++;
    return OK;
}

static int by_timer_c(const void *a, const void *b, void *arg) {
    const Core *c = arg;
    int64_t i = *(const int64_t *)a, j = *(const int64_t *)b;
    double ti = c->s[i].timer, tj = c->s[j].timer;
    if (ti != tj) return ti < tj ? -1 : 1;
    return i < j ? -1 : (i > j);       /* numpy's stable argsort: ties in slot order */
}

static int expire(Core *c, double now, int64_t *due) {
    int64_t n = 0;
    for (int64_t i = 0; i < c->w; i++)
        if (c->s[i].timer <= now) due[n++] = i;
    if (n && now >= c->free_until) {
        if (c->probe >= 0 && !c->s[c->probe].held) {
            /* the last probe unanswered, not even by a STATUS: a real loss, the due go */
            c->probe = -1;
            c->free_until = now + c->base_rto;
        } else {                       /* a probe: the longest due use alone */
            int64_t j = due[0];
            for (int64_t q = 1; q < n; q++)
                if (c->s[due[q]].timer < c->s[j].timer) j = due[q];
            Slot *s = &c->s[j];
            double r = s->rto * c->backoff;
            s->rto = c->rto_max < r ? c->rto_max : r;
            s->timer = now + s->rto;
            c->probe = j;
            c->gate = now + c->base_rto;
            n = 0;
            int e = retransmit(c, j, now);
            if (e) return e;
        }
    }
    if (n && c->adaptive) {
        loss_signal(c, now);
        int64_t allowed = (int64_t)c->cwnd;
        if (allowed < 1) allowed = 1;
        if (n > allowed) {
            qsort_r(due, n, sizeof(int64_t), by_timer_c, c);
            for (int64_t j = allowed; j < n; j++) c->s[due[j]].timer = now + c->base_rto;
            n = allowed;
        }
    }
    for (int64_t j = 0; j < n; j++) {
        Slot *s = &c->s[due[j]];
        double r = s->rto * c->backoff;
        s->rto = c->rto_max < r ? c->rto_max : r;
        s->timer = now + s->rto;
        int e = retransmit(c, due[j], now);
        if (e) return e;
    }
    double m = INFINITY;
    for (int64_t i = 0; i < c->w; i++)
        if (c->s[i].timer < m) m = c->s[i].timer;
    c->tmin = m;
    return OK;
}

