/* UDP GSO/GRO for the worker's C I/O over UDP (netsum/udpgso.py has the why and the knob,
 * NETSUM_UDP_GSO): appended before wio.c, which owns a `Gso` per UDP Io where it is on
 * (sends: to a loopback destination only, workers/cio.py decides).
 *
 * Send: a core's queued frames are all one length and lie back to back (`out`, `stride`),
 * so up to GSO_SEGS of them (and GSO_BYTES) go out as ONE message: one iovec over the run
 * and a UDP_SEGMENT cmsg of `stride`; a sendmmsg carries up to IO_DRAIN such messages.  A
 * refused GSO send (EIO, EINVAL, ENOPROTOOPT, EOPNOTSUPP) turns sending GSO off for good and
 * the caller sends the same frames one by one.
 * Receive (the socket has UDP_GRO on): a buffer may hold several datagrams; recvmmsg reads up
 * to GRO_BUFS buffers into staging space, and each datagram is copied into its own row with
 * its own length, as if received one by one (the rows stay the transport's, the checks and
 * the row moves of wio.c are unchanged).  A read is made only with GRO_ROOM rows free, so a
 * buffer from our switch (at most GSO_SEGS datagrams) always fits; more datagrams than rows
 * (a sender of 128 segments) are dropped and counted (`cut`): loss the core recovers from. */
/* UDP_SEGMENT, UDP_GRO, GSO_SEGS, GSO_BYTES, udp_gro_size(): the switch's udpgso.h,
 * compiled in front of this file (workers/native.py) */
#define GSO_TX 256                      /* messages per sendmmsg (wio.c's IO_DRAIN) */
#define GRO_BUFS 4
#define GRO_LEN 65536
#define GRO_ROOM 64

typedef struct {
    int tx_on, rx_on;
    struct mmsghdr txh[GSO_TX];
    struct iovec txv[GSO_TX];
    union { struct cmsghdr align; char buf[CMSG_SPACE(sizeof(uint16_t))]; } txc[GSO_TX];
    unsigned int cnt[GSO_TX];
    uint8_t *rx;                        /* GRO_BUFS x GRO_LEN, only with rx_on */
    struct mmsghdr rxh[GRO_BUFS];
    struct iovec rxv[GRO_BUFS];
    union { struct cmsghdr align; char buf[64]; } rxc[GRO_BUFS];
    /* counters: coalesced buffers received and their datagrams, GSO sends and their
     * datagrams, refused sends, datagrams cut for want of rows */
    long long rx_bufs, rx_segs, tx_sends, tx_segs, refused, cut;
} Gso;

static Gso *gso_new(int tx_on, int rx_on) {
    Gso *g = calloc(1, sizeof(Gso));
    if (!g) return NULL;
    g->tx_on = tx_on;
    if (rx_on) {
        g->rx = malloc((size_t)GRO_BUFS * GRO_LEN);
        if (!g->rx) { free(g); return NULL; }
        g->rx_on = 1;
        for (int k = 0; k < GRO_BUFS; k++) {
            g->rxv[k].iov_base = g->rx + (size_t)k * GRO_LEN;
            g->rxv[k].iov_len = GRO_LEN;
        }
    }
    return g;
}

static void gso_free(Gso *g) {
    if (!g) return;
    free(g->rx);
    free(g);
}

/* Send `count` frames of `stride` bytes at `out` to `dest` as GSO sends.  Returns the frames
 * sent (the caller sends the next one alone, waiting or counting, as after sendmmsg), or -1
 * when the first message was refused as GSO (sending GSO is off now; nothing went out). */
static int64_t gso_send(Gso *g, int fd, struct sockaddr_in *dest, const uint8_t *out,
                        int64_t stride, int64_t count) {
    int64_t per = stride > 0 ? GSO_BYTES / stride : 0, at = 0;
    if (per > GSO_SEGS) per = GSO_SEGS;
    if (per < 2) { g->tx_on = 0; return -1; }
    while (at < count) {
        int m = 0;
        for (int64_t a = at; a < count && m < GSO_TX; m++) {
            int64_t k = count - a < per ? count - a : per;
            struct msghdr *h = &g->txh[m].msg_hdr;
            memset(h, 0, sizeof *h);
            g->txv[m].iov_base = (void *)(out + a * stride);
            g->txv[m].iov_len = (size_t)(k * stride);
            h->msg_iov = &g->txv[m]; h->msg_iovlen = 1;
            h->msg_name = dest; h->msg_namelen = sizeof *dest;
            if (k > 1) {
                h->msg_control = g->txc[m].buf; h->msg_controllen = sizeof g->txc[m].buf;
                struct cmsghdr *cm = CMSG_FIRSTHDR(h);
                cm->cmsg_level = SOL_UDP; cm->cmsg_type = UDP_SEGMENT;
                cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
                uint16_t seg = (uint16_t)stride;
                memcpy(CMSG_DATA(cm), &seg, sizeof seg);
            }
            g->cnt[m] = (unsigned int)k;
            a += k;
        }
        int r = sendmmsg(fd, g->txh, (unsigned int)m, MSG_DONTWAIT);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int e = errno;
            if (r < 0 && at == 0 && g->cnt[0] > 1 &&
                    (e == EIO || e == EINVAL || e == ENOPROTOOPT || e == EOPNOTSUPP)) {
                g->tx_on = 0;
                g->refused++;
                return -1;
            }
            break;
        }
        for (int k = 0; k < r; k++) {
            if (g->cnt[k] > 1) { g->tx_sends++; g->tx_segs += g->cnt[k]; }
            at += g->cnt[k];
        }
    }
    return at;
}

/* One recvmmsg of coalesced buffers, their datagrams into rows m.. (up to `limit`) with
 * their lengths in lens[].  Returns the rows filled (0: nothing was queued or no room), or
 * -1 with errno set. */
static int64_t gro_read(Gso *g, int fd, uint8_t *rows, int64_t rowlen, unsigned int *lens,
                        int64_t m, int64_t limit) {
    int64_t v = (limit - m) / GRO_ROOM;
    if (v > GRO_BUFS) v = GRO_BUFS;
    if (v < 1) return 0;
    for (int k = 0; k < v; k++) {
        struct msghdr *h = &g->rxh[k].msg_hdr;
        memset(h, 0, sizeof *h);
        h->msg_iov = &g->rxv[k]; h->msg_iovlen = 1;
        h->msg_control = g->rxc[k].buf; h->msg_controllen = sizeof g->rxc[k].buf;
    }
    int r = recvmmsg(fd, g->rxh, (unsigned int)v, MSG_DONTWAIT, NULL);
    if (r < 0) return -1;
    int64_t at = m;
    for (int k = 0; k < r; k++) {
        const uint8_t *buf = g->rx + (size_t)k * GRO_LEN;
        int64_t len = g->rxh[k].msg_len, seg = udp_gro_size(&g->rxh[k].msg_hdr);
        if (seg <= 0 || seg >= len) seg = len ? len : 1;   /* one datagram (maybe empty) */
        else { g->rx_bufs++; g->rx_segs += (len + seg - 1) / seg; }
        int64_t off = 0;
        do {
            int64_t sl = len - off < seg ? len - off : seg;
            if (at >= limit) { g->cut++; }
            else {
                memcpy(rows + at * rowlen, buf + off, (size_t)(sl < rowlen ? sl : rowlen));
                lens[at++] = (unsigned int)sl;
            }
            off += seg;
        } while (off < len);
    }
    return at - m;
}

/* (Re)make *slot for GSO sends (tx) and GRO reads (rx: only with GRO_ROOM rows); -1: no
 * memory. */
static int gso_setup(Gso **slot, int tx, int rx, int64_t limit) {
    rx = rx && limit >= GRO_ROOM;
    gso_free(*slot);
    *slot = NULL;
    if ((tx || rx) && !(*slot = gso_new(tx, rx))) return -1;
    return 0;
}

/* The counters since the last call and whether sends / reads are on (zeros without a Gso). */
static PyObject *gso_stats_take(Gso *g) {
    if (!g) return Py_BuildValue("(LLLLLLii)", 0LL, 0LL, 0LL, 0LL, 0LL, 0LL, 0, 0);
    PyObject *t = Py_BuildValue("(LLLLLLii)", g->rx_bufs, g->rx_segs, g->tx_sends, g->tx_segs,
                                g->refused, g->cut, g->tx_on, g->rx_on);
    g->rx_bufs = g->rx_segs = g->tx_sends = g->tx_segs = g->refused = g->cut = 0;
    return t;
}
