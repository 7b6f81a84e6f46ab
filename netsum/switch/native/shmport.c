/* netsum-switch: shared-memory ports for the C port loop (ioloop.c includes this file's
 * functions; io.py puts it before ioloop.c in the module's source).
 *
 * The ring format is netsum/shmring.py's: every offset comes from its Layout through the
 * port tuple (new()), none is written here.  The switch consumes ring 0 (the peer's frames)
 * and produces ring 1.  The peer can write any byte of the region at any moment, so:
 * each index and descriptor is read once (volatile) into a local and checked before use;
 * a frame is copied out of the region before the pipeline sees it (the pipeline never reads
 * memory the peer can change under it); the indices this side owns are read back from the
 * region too (a peer that rewrites them can only drop or repeat its own frames), and every
 * index is masked before it addresses anything.  The region is a sealed memfd (it cannot
 * shrink), so no access here can fault.
 *
 * Memory order: acquire loads of the peer's index, release stores of ours; the wake
 * handshake (consumer: wake = 1, fence, look at head again; producer: publish head, fence,
 * ring the doorbell if wake) needs the full fences on both sides.
 */
#include <stdint.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    Py_buffer view;                      /* the region (an mmap), held while the loop lives */
    uint8_t *base;
    uint32_t slots, mask, frame;
    volatile uint32_t *in_head, *in_tail, *in_wake;      /* ring 0: peer -> switch */
    volatile uint32_t *out_head, *out_tail, *out_wake;   /* ring 1: switch -> peer */
    volatile uint32_t *in_desc, *out_desc;
    uint64_t in_lo, in_hi;               /* ring 0's buffer area [in_lo, in_hi) */
    uint64_t out_lo;                     /* ring 1's buffers: slots x frame from here */
    int bell_out;                        /* the peer's doorbell (eventfd) */
} Shm;

typedef struct { unsigned long long errors, full, bad_index; } TxCounts;

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* (mmap, slots, frame, ctrl0, desc0, buf0, ctrl1, desc1, buf1, head, tail, wake, bell_out)
 * -> s; 0, or -1 with a Python exception.  Checks that everything lies inside the region. */
static int shm_init(Shm *s, PyObject *spec) {
    PyObject *mem;
    unsigned int slots, frame, c0, d0, b0, c1, d1, b1, head, tail, wake;
    int bell;
    memset(s, 0, sizeof *s);
    if (!PyArg_ParseTuple(spec, "OIIIIIIIIIIIi", &mem, &slots, &frame, &c0, &d0, &b0, &c1,
                          &d1, &b1, &head, &tail, &wake, &bell))
        return -1;
    if (PyObject_GetBuffer(mem, &s->view, PyBUF_WRITABLE) < 0) return -1;
    uint64_t size = (uint64_t)s->view.len;
    uint64_t area = (uint64_t)slots * frame;
    int ok = slots >= 2 && !(slots & (slots - 1)) && frame >= 64 && bell >= 0 &&
             head % 4 == 0 && tail % 4 == 0 && wake % 4 == 0 &&
             c0 % 4 == 0 && c1 % 4 == 0 && d0 % 4 == 0 && d1 % 4 == 0 &&
             (uint64_t)c0 + wake + 4 <= size && (uint64_t)c1 + wake + 4 <= size &&
             (uint64_t)c0 + head + 4 <= size && (uint64_t)c1 + head + 4 <= size &&
             (uint64_t)c0 + tail + 4 <= size && (uint64_t)c1 + tail + 4 <= size &&
             (uint64_t)d0 + 8ull * slots <= size && (uint64_t)d1 + 8ull * slots <= size &&
             (uint64_t)b0 + area <= size && (uint64_t)b1 + area <= size;
    if (!ok) {
        PyBuffer_Release(&s->view);
        PyErr_SetString(PyExc_ValueError, "ioloop: bad shared-memory layout");
        return -1;
    }
    uint8_t *m = (uint8_t *)s->view.buf;
    s->base = m;
    s->slots = slots; s->mask = slots - 1; s->frame = frame;
    s->in_head = (volatile uint32_t *)(m + c0 + head);
    s->in_tail = (volatile uint32_t *)(m + c0 + tail);
    s->in_wake = (volatile uint32_t *)(m + c0 + wake);
    s->out_head = (volatile uint32_t *)(m + c1 + head);
    s->out_tail = (volatile uint32_t *)(m + c1 + tail);
    s->out_wake = (volatile uint32_t *)(m + c1 + wake);
    s->in_desc = (volatile uint32_t *)(m + d0);
    s->out_desc = (volatile uint32_t *)(m + d1);
    s->in_lo = b0; s->in_hi = b0 + area;
    s->out_lo = b1;
    s->bell_out = bell;
    return 0;
}

static void shm_free(Shm *s) {
    if (s->base) PyBuffer_Release(&s->view);
    s->base = NULL;
}

/* Frames waiting in ring 0 (an impossible count is reported as 1: drain() resyncs it). */
static uint32_t shm_pending(const Shm *s) {
    uint32_t n = __atomic_load_n(s->in_head, __ATOMIC_ACQUIRE) -
                 __atomic_load_n(s->in_tail, __ATOMIC_RELAXED);
    return n > s->slots ? 1 : n;
}

/* Before sleeping: wake = 1.  The caller issues one fence after arming every port and then
 * looks at shm_pending again. */
static void shm_arm(Shm *s) { __atomic_store_n(s->in_wake, 1u, __ATOMIC_RELAXED); }

static void shm_disarm(Shm *s, int bell_in, short revents) {
    __atomic_store_n(s->in_wake, 0u, __ATOMIC_RELAXED);
    if (revents) {
        uint64_t v;
        ssize_t r = read(bell_in, &v, sizeof v);     /* resets the eventfd; EAGAIN is fine */
        (void)r;
    }
}

/* Start consuming: *tail and the number of descriptors to take (<= limit).  A head more
 * than `slots` ahead is counted and the ring resynchronised (0 to take). */
static uint32_t shm_take_begin(Shm *s, uint32_t limit, uint32_t *tail,
                               unsigned long long *bad_index) {
    uint32_t head = __atomic_load_n(s->in_head, __ATOMIC_ACQUIRE);
    uint32_t t = __atomic_load_n(s->in_tail, __ATOMIC_RELAXED);
    uint32_t n = head - t;
    if (n > s->slots) {
        (*bad_index)++;
        __atomic_store_n(s->in_tail, head, __ATOMIC_RELEASE);
        return 0;
    }
    *tail = t;
    return n < limit ? n : limit;
}

/* Descriptor `i` (absolute index) of ring 0, read once and checked: the frame's length, and
 * its bytes copied to `dst` (room for `room` bytes).  -1: a bad descriptor (not inside the
 * ring's buffers; length 0 is an empty frame, as an empty datagram); -2: longer than `room`
 * (copied nothing). */
static int64_t shm_copy_in(const Shm *s, uint32_t i, uint8_t *dst, uint64_t room) {
    uint32_t k = i & s->mask;
    uint64_t off = s->in_desc[2 * k];
    uint64_t len = s->in_desc[2 * k + 1];
    if (off < s->in_lo || off > s->in_hi || len > s->in_hi - off) return -1;
    if (len > room) return -2;
    memcpy(dst, s->base + off, (size_t)len);
    return (int64_t)len;
}

static void shm_take_end(Shm *s, uint32_t tail) {
    __atomic_store_n(s->in_tail, tail, __ATOMIC_RELEASE);
}

/* Frames into ring 1 (no GIL needed): begin, one call per frame, end.  A frame that does
 * not fit is counted (a full ring: full; longer than a buffer: errors, as a send above the
 * MTU); end publishes head and rings the peer's doorbell if it sleeps. */
typedef struct { uint32_t head, used, put; } ShmTx;

static void shm_put_begin(Shm *s, ShmTx *t, TxCounts *tc) {
    t->head = __atomic_load_n(s->out_head, __ATOMIC_RELAXED);
    t->used = t->head - __atomic_load_n(s->out_tail, __ATOMIC_ACQUIRE);
    t->put = 0;
    if (t->used > s->slots) {            /* the peer's tail is impossible: start over empty */
        tc->bad_index++;
        __atomic_store_n(s->out_tail, t->head, __ATOMIC_RELAXED);
        t->used = 0;
    }
}

static void shm_put_one(Shm *s, ShmTx *t, const uint8_t *data, uint64_t len, TxCounts *tc) {
    if (len > s->frame) { tc->errors++; return; }
    if (t->used + t->put >= s->slots) { tc->full++; return; }
    uint32_t k = (t->head + t->put) & s->mask;
    uint64_t off = s->out_lo + (uint64_t)k * s->frame;
    memcpy(s->base + off, data, (size_t)len);
    s->out_desc[2 * k] = (uint32_t)off;
    s->out_desc[2 * k + 1] = (uint32_t)len;
    t->put++;
}

static void shm_put_end(Shm *s, ShmTx *t) {
    if (!t->put) return;
    __atomic_store_n(s->out_head, t->head + t->put, __ATOMIC_RELEASE);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (__atomic_load_n(s->out_wake, __ATOMIC_RELAXED)) {
        uint64_t one = 1;
        ssize_t r = write(s->bell_out, &one, sizeof one);  /* EAGAIN: rung already */
        (void)r;
    }
}
