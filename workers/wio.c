/* The worker's I/O loops in C: appended to wcore.c into one module (workers/native.py), so a
 * wake-up of the driver is one call that receives a batch, checks it, hands it to the core
 * (wcore.c's `take`) and sends what the core queued (workers/cio.py is the Python face).
 *
 * An `Io` is one transport's receive rows (the transport's own buffer: datagram or frame j
 * lands in row j, kept rows are moved down as workers/transport.py's loop moves them) and
 * its way out:
 *   - UDP (kernel UDP and the UDP tunnel ports): recvmmsg / sendmmsg on the socket's fd, the
 *     calls workers/mmsg.py makes through ctypes, with the same flags and the same loop (read
 *     until the socket is empty or the rows are full, wait once only when nothing came).
 *   - shm: the port's two rings in the mapped region (netsum/shmring.py has the format and
 *     the trust rules, kept here: every descriptor read once and checked against its ring's
 *     buffer area, an impossible head counted and the ring resynchronised, every frame copied
 *     into its row before anything looks at it), the eventfd doorbells as Consumer.wait and
 *     Producer.notify ring them.
 *   - UDP GSO/GRO (wgso.c, netsum/udpgso.py; NETSUM_UDP_GSO=0: off): the queued frames leave
 *     as GSO sends of up to 64, and with UDP_GRO on the socket a coalesced buffer's datagrams
 *     are copied into rows one each, so everything after the read is as without it.
 *
 * The frame check is the transports' fast one: the datagram's length is the one valid length
 * and its first `headlen` bytes equal those of a frame that passed every check before (the
 * verdict of wire.netsum_payload depends on nothing else); `headlen` 0 checks the length
 * only (kernel UDP).  Any other datagram stops the loop with IO_CHECK: Python runs its own
 * check on that row (and says whether it kept it) and resumes, so the rows and rx_other come
 * out in the order the Python loop gives. */
/* (its system headers are included before wcore.c: workers/native.py's _PRELUDE) */

#define IO_DRAIN 256                   /* rows; the transports' _DRAIN */
#define IO_GOOD 8                      /* known-good heads remembered */
#define IO_HEAD 128
#define RING_U32 0xFFFFFFFFu

enum { IO_DONE = 0, IO_CHECK = 1, IO_ROUTE = 2, IO_CODE = 3 };
enum { K_UDP = 0, K_SHM = 1 };

typedef struct {
    int kind, fd, closed;
    Py_buffer rxb, regb;
    int rx_held, reg_held;
    uint8_t *rx;
    int64_t nrows, rowlen, skip, frame, headlen, limit;
    uint8_t good[IO_GOOD][IO_HEAD];
    int ngood, good_next;
    /* a receive in progress (IO_CHECK returned): resumed by the next receive call */
    int busy;
    int64_t m, j, n;                   /* udp: read, next to check, kept; shm: n kept */
    uint32_t tk_tail, tk_count, tk_j;  /* shm: the take in progress */
    int tk_on;
    unsigned int lens[IO_DRAIN];
    int64_t got, bad;                  /* since last reported */
    /* udp */
    struct sockaddr_in dest;
    struct mmsghdr rxh[IO_DRAIN], txh[IO_DRAIN];
    struct iovec rxv[IO_DRAIN], txv[IO_DRAIN];
    /* shm: ring 0 peer -> switch (we produce), ring 1 switch -> peer (we consume) */
    uint8_t *reg;
    uint32_t slots, rframe, mask;
    uint32_t *rx_head, *rx_tail, *rx_wake, *rx_desc, *tx_head, *tx_tail, *tx_wake, *tx_desc;
    uint64_t rx_lo, rx_hi, tx_lo;
    int bell_rx, bell_tx;
    double spin;
    int64_t tx_bad;
    Gso *gso;                          /* udp: GSO sends / GRO reads where on (wgso.c) */
} Io;

static void io_release(Io *io) {
    if (io->rx_held) PyBuffer_Release(&io->rxb);
    if (io->reg_held) PyBuffer_Release(&io->regb);
    io->rx_held = io->reg_held = 0;
    io->closed = 1;
    gso_free(io->gso);
    io->gso = NULL;
}

static void io_free(PyObject *cap) {
    Io *io = PyCapsule_GetPointer(cap, "netsum.wio");
    if (!io) return;
    io_release(io);
    free(io);
}

static Io *io_get(PyObject *cap) {
    Io *io = PyCapsule_GetPointer(cap, "netsum.wio");
    if (io && io->closed) {
        PyErr_SetString(PyExc_ValueError, "wio: the transport is closed");
        return NULL;
    }
    return io;
}

static double mono(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* Wait up to `timeout` s for fd to be readable, without the GIL: 1 readable, 0 not, -1 a
 * Python error (a signal handler raised). */
static int wait_fd(int fd, double timeout) {
    struct pollfd p = {fd, POLLIN, 0};
    struct timespec ts, *tp = NULL;
    if (timeout < 1e9) {
        if (timeout < 0) timeout = 0;
        ts.tv_sec = (time_t)timeout;
        ts.tv_nsec = (long)((timeout - (double)ts.tv_sec) * 1e9);
        tp = &ts;
    }
    int r;
    Py_BEGIN_ALLOW_THREADS
    r = ppoll(&p, 1, tp, NULL);
    Py_END_ALLOW_THREADS
    if (r < 0) {
        if (errno == EINTR && PyErr_CheckSignals() < 0) return -1;
        return 0;                      /* interrupted: the driver loops and comes back */
    }
    return r > 0;
}

static int row_ok(Io *io, int64_t n, unsigned int len) {
    if (len != (unsigned int)io->frame) return 0;
    if (!io->headlen) return 1;
    const uint8_t *row = io->rx + n * io->rowlen;
    for (int g = 0; g < io->ngood; g++)
        if (!memcmp(row, io->good[g], io->headlen)) return 1;
    return 0;
}

/* -- UDP ------------------------------------------------------------------------------- */
static int udp_read(Io *io, double timeout) {       /* 0, or -1 with a Python error */
    int waited = timeout <= 0;
    io->m = 0;
    int gro = io->gso && io->gso->rx_on;
    while (io->m < io->limit) {
        int r = gro ? (int)gro_read(io->gso, io->fd, io->rx, io->rowlen, io->lens, io->m,
                                    io->limit)
                    : recvmmsg(io->fd, io->rxh + io->m, (unsigned int)(io->limit - io->m),
                               MSG_DONTWAIT | MSG_TRUNC, NULL);
        if (r < 0) {
            if (errno == ECONNREFUSED) continue;      /* an earlier datagram's ICMP */
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                PyErr_SetFromErrno(PyExc_OSError);
                return -1;
            }
            r = 0;
        }
        if (r > 0) {
            if (!gro)
                for (int i = 0; i < r; i++) io->lens[io->m + i] = io->rxh[io->m + i].msg_len;
            io->m += r;
            continue;
        }
        if (gro && io->limit - io->m < GRO_ROOM) break;   /* full: the rest waits its turn */
        if (io->m || waited) break;
        waited = 1;
        int w = wait_fd(io->fd, timeout);
        if (w < 0) return -1;
        if (!w) break;
    }
    io->j = io->n = 0;
    return 0;
}

static int udp_check(Io *io, int resumed, int accepted) {
    if (resumed) {
        if (accepted) io->n++;
        io->j++;
    }
    while (io->j < io->m) {
        unsigned int len = io->lens[io->j];
        if (io->n != io->j) {
            int64_t c = len < io->rowlen ? len : io->rowlen;
            memmove(io->rx + io->n * io->rowlen, io->rx + io->j * io->rowlen, c);
        }
        if (!row_ok(io, io->n, len)) return IO_CHECK;
        io->n++;
        io->j++;
    }
    io->got += io->m;
    return IO_DONE;
}

/* -- shm ------------------------------------------------------------------------------- */
static inline uint32_t ld(uint32_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static inline void st(uint32_t *p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

static int shm_wait(Io *io, double timeout) {        /* Consumer.wait: 1, 0 or -1 */
    if (ld(io->rx_head) != ld(io->rx_tail)) return 1;
    if (io->spin > 0) {
        double end = mono() + (io->spin < timeout ? io->spin : timeout);
        while (mono() < end)
            if (ld(io->rx_head) != ld(io->rx_tail)) return 1;
    }
    if (timeout <= 0) return 0;
    st(io->rx_wake, 1);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    int r = 1;
    if (ld(io->rx_head) == ld(io->rx_tail)) {
        r = wait_fd(io->bell_rx, timeout);
        uint64_t v;
        if (r >= 0) {
            ssize_t ignored = read(io->bell_rx, &v, sizeof v);   /* drain_bell */
            (void)ignored;
            r = ld(io->rx_head) != ld(io->rx_tail);
        }
    }
    st(io->rx_wake, 0);
    return r;
}

/* Consumer.take with the check as its sink, resumable at a frame Python must check. */
static int shm_take(Io *io, int resumed, int accepted) {
    if (resumed) {
        if (accepted) io->n++;
        io->tk_j++;
    }
    for (;;) {
        if (!io->tk_on) {
            if (io->n >= io->limit) break;
            uint32_t tail = ld(io->rx_tail), head = ld(io->rx_head);
            uint32_t n = (head - tail) & RING_U32;
            if (n > io->slots) {
                io->bad++;                               /* bad_index */
                st(io->rx_tail, head);
                break;
            }
            if (n > io->limit - io->n) n = (uint32_t)(io->limit - io->n);
            if (!n) break;
            io->tk_tail = tail;
            io->tk_count = n;
            io->tk_j = 0;
            io->tk_on = 1;
        }
        while (io->tk_j < io->tk_count) {
            uint32_t i = (io->tk_tail + io->tk_j) & io->mask;
            uint32_t off = __atomic_load_n(io->rx_desc + 2 * i, __ATOMIC_RELAXED);
            uint32_t len = __atomic_load_n(io->rx_desc + 2 * i + 1, __ATOMIC_RELAXED);
            if (off < io->rx_lo || (uint64_t)off + len > io->rx_hi) {
                io->bad++;                               /* bad_desc */
                io->tk_j++;
                continue;
            }
            if (len <= io->rowlen) memcpy(io->rx + io->n * io->rowlen, io->reg + off, len);
            io->lens[0] = len;
            if (!row_ok(io, io->n, len)) return IO_CHECK;
            io->n++;
            io->tk_j++;
        }
        st(io->rx_tail, (io->tk_tail + io->tk_count) & RING_U32);
        io->got += io->tk_count;
        io->tk_on = 0;
    }
    return IO_DONE;
}

/* -- receive: a batch into the rows ---------------------------------------------------- */
static int io_recv_batch(Io *io, double timeout, int resumed, int accepted) {
    if (io->kind == K_UDP) {
        if (!resumed && udp_read(io, timeout) < 0) return -1;
        return udp_check(io, resumed, accepted);
    }
    if (!resumed) {
        io->n = 0;
        io->tk_on = 0;
        int w = shm_wait(io, timeout);
        if (w < 0) return -1;
        if (!w) return IO_DONE;
    }
    return shm_take(io, resumed, accepted);
}

/* A new batch while a check was pending (the Python check raised): the rows read are dropped
 * (loss, which the core recovers from); a ring's take in progress stored no tail, so its
 * frames come again. */
static void io_abandon(Io *io) {
    io->busy = 0;
    io->tk_on = 0;
}

static PyObject *recv_result(Io *io, int r) {
    if (r < 0) return NULL;
    io->busy = r == IO_CHECK;
    unsigned int len = io->kind == K_UDP ? (r == IO_CHECK ? io->lens[io->j] : 0) :
                       (r == IO_CHECK ? io->lens[0] : 0);
    long long got = io->got, bad = io->bad;
    if (r != IO_CHECK) io->got = io->bad = 0;
    else got = bad = 0;
    return Py_BuildValue("(iLILL)", r, (long long)io->n, len, got, bad);
}

/* -- send: a core's queued frames ------------------------------------------------------ */
static int64_t io_send_out(Io *io, const uint8_t *out, int64_t stride, int64_t count) {
    int64_t at = 0;
    if (io->kind == K_UDP) {
        if (io->gso && io->gso->tx_on && count > 1) {
            int64_t s = gso_send(io->gso, io->fd, &io->dest, out, stride, count);
            if (s >= 0) return s;        /* else refused: one by one below */
        }
        while (at < count) {
            int64_t m = count - at < IO_DRAIN ? count - at : IO_DRAIN;
            for (int64_t j = 0; j < m; j++) {
                io->txv[j].iov_base = (void *)(out + (at + j) * stride);
                io->txv[j].iov_len = stride;
            }
            int r = sendmmsg(io->fd, io->txh, (unsigned int)m, MSG_DONTWAIT);
            if (r <= 0) break;         /* the caller sends the next alone, waiting or counting */
            at += r;
        }
        return at;
    }
    if ((uint64_t)stride > io->rframe) return 0;   /* the caller counts it too long */
    uint32_t head = ld(io->tx_head), tail = ld(io->tx_tail);
    uint32_t used = (head - tail) & RING_U32;
    if (used > io->slots) {                        /* the consumer's tail is impossible */
        io->tx_bad++;
        st(io->tx_tail, head);
        used = 0;
    }
    uint32_t room = io->slots - used, n = 0;
    while (at < count && n < room) {
        uint32_t i = (head + n) & io->mask;
        uint64_t off = io->tx_lo + (uint64_t)i * io->rframe;
        memcpy(io->reg + off, out + at * stride, stride);
        io->tx_desc[2 * i] = (uint32_t)off;
        io->tx_desc[2 * i + 1] = (uint32_t)stride;
        n++;
        at++;
    }
    if (n) {
        st(io->tx_head, (head + n) & RING_U32);      /* descriptors before head (release) */
        __atomic_thread_fence(__ATOMIC_SEQ_CST);     /* Producer.notify */
        if (ld(io->tx_wake)) {
            uint64_t one = 1;
            ssize_t ignored = write(io->bell_tx, &one, sizeof one);  /* full: rung already */
            (void)ignored;
        }
    }
    return at;
}

/* -- the Python face ------------------------------------------------------------------- */
static Io *io_alloc(PyObject *rows, long long nrows, long long rowlen, long long skip,
                    long long frame, long long headlen, PyObject **cap) {
    Io *io = calloc(1, sizeof(Io));
    if (!io) { PyErr_NoMemory(); return NULL; }
    if (PyObject_GetBuffer(rows, &io->rxb, PyBUF_WRITABLE) < 0) { free(io); return NULL; }
    io->rx_held = 1;
    *cap = PyCapsule_New(io, "netsum.wio", io_free);
    if (!*cap) { io_release(io); free(io); return NULL; }
    if (nrows < 1 || rowlen < 1 || io->rxb.len < nrows * rowlen || skip < 0 || frame < 0 ||
            headlen < 0 || headlen > IO_HEAD || headlen > rowlen || skip > rowlen) {
        Py_CLEAR(*cap);
        PyErr_SetString(PyExc_ValueError, "wio: rows do not match");
        return NULL;
    }
    io->rx = io->rxb.buf;
    io->nrows = nrows; io->rowlen = rowlen; io->skip = skip; io->frame = frame;
    io->headlen = headlen;
    io->limit = nrows < IO_DRAIN ? nrows : IO_DRAIN;
    io->fd = io->bell_rx = io->bell_tx = -1;
    return io;
}

/* udp(fd, rows, nrows, rowlen, skip, frame, headlen, dest_ip_u32_be, dest_port) */
static PyObject *io_udp(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *rows, *cap;
    int fd;
    long long nrows, rowlen, skip, frame, headlen;
    unsigned long ip;
    int port;
    if (!PyArg_ParseTuple(args, "iOLLLLLki", &fd, &rows, &nrows, &rowlen, &skip, &frame,
                          &headlen, &ip, &port)) return NULL;
    Io *io = io_alloc(rows, nrows, rowlen, skip, frame, headlen, &cap);
    if (!io) return NULL;
    io->kind = K_UDP;
    io->fd = fd;
    io->dest.sin_family = AF_INET;
    io->dest.sin_port = htons((uint16_t)port);
    io->dest.sin_addr.s_addr = htonl((uint32_t)ip);
    for (int j = 0; j < IO_DRAIN; j++) {
        io->rxv[j].iov_base = j < io->nrows ? io->rx + j * rowlen : io->rx;
        io->rxv[j].iov_len = rowlen;
        io->rxh[j].msg_hdr.msg_iov = &io->rxv[j];
        io->rxh[j].msg_hdr.msg_iovlen = 1;
        io->txh[j].msg_hdr.msg_iov = &io->txv[j];
        io->txh[j].msg_hdr.msg_iovlen = 1;
        io->txh[j].msg_hdr.msg_name = &io->dest;
        io->txh[j].msg_hdr.msg_namelen = sizeof io->dest;
    }
    return cap;
}

/* shm(region, slots, frame, rx_ctrl, rx_desc, rx_buf, tx_ctrl, tx_desc, tx_buf, bell_rx,
 *     bell_tx, spin, rows, nrows, rowlen, skip, frame_len, headlen) -- offsets from Layout */
static PyObject *io_shm(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *region, *rows, *cap;
    unsigned long slots, rframe, rc, rd, rb, tc, td, tb;
    int bell_rx, bell_tx;
    double spin;
    long long nrows, rowlen, skip, frame, headlen;
    if (!PyArg_ParseTuple(args, "OkkkkkkkkiidOLLLLL", &region, &slots, &rframe, &rc, &rd, &rb,
                          &tc, &td, &tb, &bell_rx, &bell_tx, &spin, &rows, &nrows, &rowlen,
                          &skip, &frame, &headlen)) return NULL;
    Io *io = io_alloc(rows, nrows, rowlen, skip, frame, headlen, &cap);
    if (!io) return NULL;
    io->kind = K_SHM;
    if (PyObject_GetBuffer(region, &io->regb, PyBUF_WRITABLE) < 0) { Py_DECREF(cap); return NULL; }
    io->reg_held = 1;
    uint64_t size = (uint64_t)io->regb.len;
    if (slots < 2 || (slots & (slots - 1)) || rframe < 64 || rc + 192 > size ||
            tc + 192 > size || rd + 8 * (uint64_t)slots > size || td + 8 * (uint64_t)slots > size ||
            rb + (uint64_t)slots * rframe > size || tb + (uint64_t)slots * rframe > size ||
            (rc | rd | tc | td) & 3 || rb + (uint64_t)slots * rframe > RING_U32 ||
            tb + (uint64_t)slots * rframe > RING_U32) {
        Py_DECREF(cap);
        PyErr_SetString(PyExc_ValueError, "wio: the ring layout does not fit the region");
        return NULL;
    }
    uint8_t *r = io->reg = io->regb.buf;
    io->slots = (uint32_t)slots; io->rframe = (uint32_t)rframe; io->mask = (uint32_t)slots - 1;
    io->rx_head = (uint32_t *)(r + rc); io->rx_tail = (uint32_t *)(r + rc + 64);
    io->rx_wake = (uint32_t *)(r + rc + 128); io->rx_desc = (uint32_t *)(r + rd);
    io->tx_head = (uint32_t *)(r + tc); io->tx_tail = (uint32_t *)(r + tc + 64);
    io->tx_wake = (uint32_t *)(r + tc + 128); io->tx_desc = (uint32_t *)(r + td);
    io->rx_lo = rb; io->rx_hi = rb + (uint64_t)slots * rframe; io->tx_lo = tb;
    io->bell_rx = bell_rx; io->bell_tx = bell_tx; io->spin = spin;
    return cap;
}

static PyObject *io_good(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap;
    Py_buffer b;
    if (!PyArg_ParseTuple(args, "Oy*", &cap, &b)) return NULL;
    Io *io = io_get(cap);
    if (io && b.len == io->headlen && io->headlen) {
        int g;
        for (g = 0; g < io->ngood; g++)
            if (!memcmp(io->good[g], b.buf, b.len)) break;
        if (g == io->ngood) {
            memcpy(io->good[io->good_next], b.buf, b.len);
            io->good_next = (io->good_next + 1) % IO_GOOD;
            if (io->ngood < IO_GOOD) io->ngood++;
        }
    }
    PyBuffer_Release(&b);
    if (!io) return NULL;
    Py_RETURN_NONE;
}

/* recv(io, timeout, accepted) -> (status, rows kept, length at IO_CHECK, got, bad); accepted
 * -1 starts a batch, 0/1 resumes after IO_CHECK with Python's verdict on that row. */
static PyObject *io_recv(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap;
    double timeout;
    int accepted;
    if (!PyArg_ParseTuple(args, "Odi", &cap, &timeout, &accepted)) return NULL;
    Io *io = io_get(cap);
    if (!io) return NULL;
    int resumed = accepted >= 0;
    if (resumed && !io->busy) {
        PyErr_SetString(PyExc_ValueError, "wio.recv: resumed without a check pending");
        return NULL;
    }
    if (!resumed) io_abandon(io);
    return recv_result(io, io_recv_batch(io, timeout, resumed, accepted > 0));
}

/* send(io, core) -> (frames sent, ring heads found impossible): the core's queued rows */
static PyObject *io_send(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap, *ccap;
    long long first = 0;
    if (!PyArg_ParseTuple(args, "OO|L", &cap, &ccap, &first)) return NULL;
    Io *io = io_get(cap);
    Core *c = get(ccap);
    if (!io || !c) return NULL;
    if (first < 0 || first > c->nout) first = c->nout;
    int64_t sent = io_send_out(io, c->out + first * c->stride, c->stride, c->nout - first);
    long long bad = io->tx_bad;
    io->tx_bad = 0;
    return Py_BuildValue("(LL)", (long long)sent, bad);
}

/* The start of a wake-up of cycle / cycle_many: a batch received into the rows.  Returns -1
 * (a Python error), IO_CHECK (row *len's bytes are for Python's check; recv resumes after it)
 * or the batch's status, with the receive counters handed over in *got / *bad. */
static int io_wake(Io *io, double timeout, unsigned int *len, long long *got, long long *bad) {
    io_abandon(io);
    int r = io_recv_batch(io, timeout, 0, 0);
    if (r < 0) return r;
    *got = io->got;
    *bad = io->bad;
    if (r == IO_CHECK) {
        io->busy = 1;
        *len = io->kind == K_UDP ? io->lens[io->j] : io->lens[0];
        return r;
    }
    io->got = io->bad = 0;
    return r;
}

/* clock() as a double; -1 with a Python error set when it fails. */
static int io_now(PyObject *clock, double *now) {
    PyObject *t = PyObject_CallNoArgs(clock);
    if (!t) return -1;
    *now = PyFloat_AsDouble(t);
    Py_DECREF(t);
    return *now == -1.0 && PyErr_Occurred() ? -1 : 0;
}

/* cycle(io, core, timeout, clock, job) -> (status, rows, x, now, got, bad, sent, txbad):
 * receive a batch, hand it to the core (job >= 0: only if every payload is that job's,
 * else IO_ROUTE), send what it queued.  IO_CHECK: x is the length of row `rows`, for
 * Python's check (then recv resumes).  IO_CODE: the core stopped at payload x with code
 * `sent` (SLOW or an error): nothing was sent.  IO_DONE: every payload taken, `sent` of
 * the core's frames went out (the rest are Python's to send). */
static PyObject *io_cycle(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap, *ccap, *clock;
    double timeout;
    long long job;
    if (!PyArg_ParseTuple(args, "OOdOL", &cap, &ccap, &timeout, &clock, &job)) return NULL;
    Io *io = io_get(cap);
    Core *c = get(ccap);
    if (!io || !c) return NULL;
    unsigned int len = 0;
    long long got = 0, bad = 0;
    int r = io_wake(io, timeout, &len, &got, &bad);
    if (r < 0) return NULL;
    if (r == IO_CHECK)
        return Py_BuildValue("(iLIdLLLL)", r, (long long)io->n, len, 0.0, 0LL, 0LL, 0LL, 0LL);
    int64_t n = io->n, size = HB + 4 * c->k;
    if (!n || size != io->frame - io->skip)
        return Py_BuildValue("(iLIdLLLL)", n ? IO_ROUTE : IO_DONE, (long long)n, 0u, 0.0,
                             got, bad, 0LL, 0LL);
    const uint8_t *rows = io->rx + io->skip;
    if (job >= 0)
        for (int64_t j = 0; j < n; j++) {
            const uint8_t *p = rows + j * io->rowlen;
            if (((int64_t)p[2] << 8 | p[3]) != job)
                return Py_BuildValue("(iLIdLLLL)", IO_ROUTE, (long long)n, 0u, 0.0, got, bad,
                                     0LL, 0LL);
        }
    double now;
    if (io_now(clock, &now) < 0) return NULL;
    c->nout = 0;
    int64_t j = 0;
    int code = OK;
    for (; j < n; j++) {
        code = take(c, rows + j * io->rowlen, size, now);
        if (code) break;
    }
    if (code)
        return Py_BuildValue("(iLLdLLiL)", IO_CODE, (long long)n, (long long)j, now, got, bad,
                             code, 0LL);
    int64_t sent = c->nout ? io_send_out(io, c->out, c->stride, c->nout) : 0;
    long long txbad = io->tx_bad;
    io->tx_bad = 0;
    return Py_BuildValue("(iLLdLLLL)", IO_DONE, (long long)n, (long long)c->nout, now, got,
                         bad, (long long)sent, txbad);
}

/* cycle_many(io, cores, jobs, quiet, clock) -> (status, rows, now, got, bad, foreign, sent,
 *                                              txbad, order, per_core):
 * one wake-up of a driver with several compiled cores (the training lanes), the way
 * Driver._route_frames does it in Python: each received payload goes to the core of its job
 * id (jobs[i] is cores[i]'s), in the batch's order; a payload of no core is counted in
 * `foreign` unless its job is in `quiet`.  Each core's queued frames go out in the order in
 * which its job first appeared in the batch (`order`: core indices), all in one sendmmsg
 * (with GSO sends: core by core, wgso.c) / ring put, up to the first core that stopped: a core stops at a payload take() leaves to
 * Python (SLOW) or refuses (an error code); its remaining payloads are not taken, and it and
 * every core after it in `order` are sent by Python once it handled the stop.  per_core[i] =
 * (payloads taken, frames queued, frames sent, code, index in the batch where it stopped or
 * -1).  IO_CHECK: as cycle (`rows` kept so far, `now` holds the length of the row to check);
 * IO_ROUTE: the rows are not for this path (another length) -- Python routes them. */
#define IO_MANY 32
static PyObject *io_cycle_many(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap, *cores, *jobs, *quiet, *clock;
    double timeout;
    if (!PyArg_ParseTuple(args, "OO!O!O!dO", &cap, &PyTuple_Type, &cores, &PyTuple_Type, &jobs,
                          &PyTuple_Type, &quiet, &timeout, &clock)) return NULL;
    Io *io = io_get(cap);
    if (!io) return NULL;
    Py_ssize_t nc = PyTuple_GET_SIZE(cores), nq = PyTuple_GET_SIZE(quiet);
    if (nc < 1 || nc > IO_MANY || PyTuple_GET_SIZE(jobs) != nc || nq > 4 * IO_MANY) {
        PyErr_SetString(PyExc_ValueError, "wio.cycle_many: 1..32 cores, one job id each");
        return NULL;
    }
    Core *cs[IO_MANY];
    long job[IO_MANY], qj[4 * IO_MANY];
    for (Py_ssize_t i = 0; i < nc; i++) {
        cs[i] = get(PyTuple_GET_ITEM(cores, i));
        job[i] = PyLong_AsLong(PyTuple_GET_ITEM(jobs, i));
        if (!cs[i] || (job[i] == -1 && PyErr_Occurred())) return NULL;
        if (cs[i]->k != cs[0]->k || cs[i]->stride != cs[0]->stride) {
            PyErr_SetString(PyExc_ValueError, "wio.cycle_many: cores of different K");
            return NULL;
        }
    }
    for (Py_ssize_t q = 0; q < nq; q++) {
        qj[q] = PyLong_AsLong(PyTuple_GET_ITEM(quiet, q));
        if (qj[q] == -1 && PyErr_Occurred()) return NULL;
    }
    unsigned int len = 0;
    long long got = 0, bad = 0;
    int r = io_wake(io, timeout, &len, &got, &bad);
    if (r < 0) return NULL;
    if (r == IO_CHECK)
        return Py_BuildValue("(iLdLLLLLOO)", r, (long long)io->n, (double)len, 0LL, 0LL, 0LL,
                             0LL, 0LL, Py_None, Py_None);
    int64_t n = io->n, size = HB + 4 * cs[0]->k;
    if (!n || size != io->frame - io->skip)
        return Py_BuildValue("(iLdLLLLLOO)", n ? IO_ROUTE : IO_DONE, (long long)n, 0.0, got,
                             bad, 0LL, 0LL, 0LL, Py_None, Py_None);
    double now;
    if (io_now(clock, &now) < 0) return NULL;
    const uint8_t *rows = io->rx + io->skip;
    int order[IO_MANY], norder = 0, code[IO_MANY];
    int64_t taken[IO_MANY], stop[IO_MANY], sent[IO_MANY];
    for (Py_ssize_t i = 0; i < nc; i++) {
        taken[i] = sent[i] = 0;
        stop[i] = -1;
        code[i] = -1;                      /* -1: no payload of its job in this batch */
    }
    long long foreign = 0;
    for (int64_t j = 0; j < n; j++) {
        const uint8_t *p = rows + j * io->rowlen;
        long jb = (long)p[2] << 8 | p[3];
        Py_ssize_t i = 0;
        while (i < nc && job[i] != jb) i++;
        if (i == nc) {
            Py_ssize_t q = 0;
            while (q < nq && qj[q] != jb) q++;
            if (q == nq) foreign++;
            continue;
        }
        if (code[i] < 0) {                 /* first payload of this core: Python's nout = 0 */
            code[i] = OK;
            cs[i]->nout = 0;
            order[norder++] = (int)i;
        }
        if (code[i] != OK) continue;       /* stopped: the rest is Python's */
        int c = take(cs[i], p, size, now);
        if (c) {
            code[i] = c;
            stop[i] = j;
        } else {
            taken[i]++;
        }
    }
    /* Send in `order` up to the first stopped core: one sendmmsg over the cores' rows. */
    long long total = 0, txbad;
    int upto = 0;
    while (upto < norder && code[order[upto]] == OK) upto++;
    if (io->kind == K_UDP && !(io->gso && io->gso->tx_on)) {
        int o = 0;
        int64_t at = 0;                    /* next frame of core order[o] */
        int full = 0;
        while (o < upto && !full) {
            int64_t m = 0;
            int first_o = o;
            int64_t first_at = at;
            while (o < upto && m < IO_DRAIN) {   /* fill up to IO_DRAIN iovecs */
                Core *c = cs[order[o]];
                while (at < c->nout && m < IO_DRAIN) {
                    io->txv[m].iov_base = c->out + at * c->stride;
                    io->txv[m].iov_len = c->stride;
                    m++;
                    at++;
                }
                if (at >= c->nout) { o++; at = 0; }
            }
            if (!m) break;
            int got_m = sendmmsg(io->fd, io->txh, (unsigned int)m, MSG_DONTWAIT);
            if (got_m < 0) got_m = 0;
            /* credit what went out to its cores, in order */
            int64_t left = got_m;
            int oo = first_o;
            int64_t aa = first_at;
            while (left > 0) {
                Core *c = cs[order[oo]];
                int64_t can = c->nout - aa < left ? c->nout - aa : left;
                sent[order[oo]] = aa + can;
                left -= can;
                total += can;
                aa += can;
                if (aa >= c->nout) { oo++; aa = 0; }
            }
            if (got_m < m) full = 1;       /* Python sends the rest, waiting or counting */
        }
    } else {                               /* shm, and UDP with GSO: core by core */
        for (int o = 0; o < upto; o++) {
            Core *c = cs[order[o]];
            int64_t s1 = c->nout ? io_send_out(io, c->out, c->stride, c->nout) : 0;
            sent[order[o]] = s1;
            total += s1;
            if (s1 < c->nout) break;       /* the ring or socket is full: the rest is Python's */
        }
    }
    txbad = io->tx_bad;
    io->tx_bad = 0;
    PyObject *ord = PyTuple_New(norder), *per = PyTuple_New(nc);
    if (!ord || !per) { Py_XDECREF(ord); Py_XDECREF(per); return NULL; }
    for (int o = 0; o < norder; o++) PyTuple_SET_ITEM(ord, o, PyLong_FromLong(order[o]));
    for (Py_ssize_t i = 0; i < nc; i++)
        PyTuple_SET_ITEM(per, i, Py_BuildValue("(LLLiL)", (long long)taken[i],
                                               (long long)(code[i] < 0 ? 0 : cs[i]->nout),
                                               (long long)sent[i], code[i], (long long)stop[i]));
    return Py_BuildValue("(iLdLLLLLNN)", IO_DONE, (long long)n, now, got, bad, foreign,
                         total, txbad, ord, per);
}

/* gso(io, tx, rx): GSO sends (tx) and GRO reads (rx: the socket has UDP_GRO on) for a UDP
 * Io; rx needs at least GRO_ROOM rows.  -> (tx on, rx on) */
static PyObject *io_gso(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap;
    int tx, rx;
    if (!PyArg_ParseTuple(args, "Opp", &cap, &tx, &rx)) return NULL;
    Io *io = io_get(cap);
    if (!io) return NULL;
    if (io->kind != K_UDP) { PyErr_SetString(PyExc_ValueError, "wio.gso: UDP only"); return NULL; }
    if (gso_setup(&io->gso, tx, rx, io->limit) < 0) return PyErr_NoMemory();
    return Py_BuildValue("(ii)", io->gso ? io->gso->tx_on : 0, io->gso ? io->gso->rx_on : 0);
}

/* gso_stats(io) -> (coalesced buffers read, their datagrams, GSO sends, their datagrams,
 * refused sends, datagrams cut, tx on, rx on) since the last call */
static PyObject *io_gso_stats(PyObject *self, PyObject *cap) {
    (void)self;
    Io *io = io_get(cap);
    return io ? gso_stats_take(io->gso) : NULL;
}

static PyObject *io_close(PyObject *self, PyObject *cap) {
    (void)self;
    Io *io = PyCapsule_GetPointer(cap, "netsum.wio");
    if (!io) return NULL;
    io_release(io);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"new", w_new, METH_VARARGS, "a core's slot table over its Python buffers"},
    {"config", w_config, METH_VARARGS, "the progress deadline (s)"},
    {"set_out", w_set_out, METH_VARARGS, "the output rows (buffer, count)"},
    {"start", w_start, METH_VARARGS, "every slot's bootstrap use -> (code, frames out)"},
    {"receive", w_receive, METH_VARARGS, "a batch of payloads -> (code, index, frames out)"},
    {"tick", w_tick, METH_VARARGS, "timers -> (code, frames out)"},
    {"deadline", w_deadline, METH_O, "next_deadline()"},
    {"status", w_status, METH_VARARGS, "a STATUS for (slot, round): the held timers' probe"},
    {"counters", w_counters, METH_O, "statistics and state"},
    {"slots", w_slots, METH_O, "per slot: block, round, offset, next round"},
    {"io_udp", io_udp, METH_VARARGS, "an Io over a UDP socket's fd and receive rows"},
    {"io_shm", io_shm, METH_VARARGS, "an Io over a shared-memory port's rings"},
    {"io_good", io_good, METH_VARARGS, "a head that passed every check"},
    {"io_recv", io_recv, METH_VARARGS, "a batch into the rows (resumable at a check)"},
    {"io_send", io_send, METH_VARARGS, "a core's queued frames out"},
    {"io_cycle", io_cycle, METH_VARARGS, "receive, take, send: one wake-up"},
    {"io_cycle_many", io_cycle_many, METH_VARARGS,
     "receive, route by job id, take, send: one wake-up of several cores"},
    {"io_gso", io_gso, METH_VARARGS, "GSO sends / GRO reads on a UDP Io"},
    {"io_gso_stats", io_gso_stats, METH_O, "GSO/GRO counters since the last call"},
    {"io_close", io_close, METH_O, "let go of the buffers"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, MODNAME, NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC MODINIT(void) { return PyModule_Create(&moddef); }
