/* The limit of this machine for a switch in the middle (benchmarks/limits.py builds and runs
 * this): one forwarder process and N sender processes, each sender keeping WINDOW frames of
 * FRAME bytes in flight; the forwarder returns every frame to its sender.  No Python, no P4:
 * what any emulated switch on the same transport could do at most.
 *
 *   bare_limits udp|shm NSENDERS FRAME WINDOW SECONDS SPIN_US
 *
 * udp: loopback UDP sockets, recvmmsg/sendmmsg batches of up to 64 (as netsum's C port loop).
 * gsonogro: as gso, but the senders' sockets without UDP_GRO (they receive datagram by
 *      datagram; the kernel segments the forwarder's GSO sends on delivery).
 * gso: the same sockets with UDP GSO/GRO (Linux >= 5.0): every socket has UDP_GRO on, so
 *      datagrams sent together to it arrive as one buffer (its cmsg gives the segment size);
 *      each received buffer goes back as ONE sendmsg with a UDP_SEGMENT cmsg (the senders'
 *      window too is sent that way), still batched with recvmmsg/sendmmsg.  Forwards are
 *      counted per datagram (segment), so the figure compares with udp's directly.
 * shm: a ring pair per sender in shared memory (the discipline of netsum/shmring.py: u32
 *      free-running head/tail, descriptors of offset and length, a frame copied out of the
 *      ring and into the other ring as the switch does, a spin of SPIN_US then wake = 1, a
 *      fence, an eventfd doorbell).
 * Prints one line: forwards per second, and the CPU seconds of the forwarder and of all
 * senders (getrusage), from which limits.py derives µs per forward.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BATCH 64
#define SLOTS 512
#define BUF 4352                 /* a K = 1024 frame (4162 bytes) fits */

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static double cpu_of(int who) {
    struct rusage r;
    getrusage(who, &r);
    return r.ru_utime.tv_sec + r.ru_stime.tv_sec + (r.ru_utime.tv_usec + r.ru_stime.tv_usec) * 1e-6;
}

static void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* -- udp ------------------------------------------------------------------------------ */
static long udp_sender(struct sockaddr_in *fwd, int frame, int window, double end) {
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    int big = 4 << 20;
    setsockopt(s, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    connect(s, (struct sockaddr *)fwd, sizeof *fwd);
    static char buf[BATCH][BUF];
    struct mmsghdr m[BATCH];
    struct iovec v[BATCH];
    for (int i = 0; i < BATCH; i++) {
        v[i].iov_base = buf[i]; v[i].iov_len = BUF;
        memset(&m[i], 0, sizeof m[i]);
        m[i].msg_hdr.msg_iov = &v[i]; m[i].msg_hdr.msg_iovlen = 1;
    }
    for (int i = 0; i < window; i++) send(s, buf[0], (size_t)frame, 0);
    long got = 0;
    struct pollfd p = {s, POLLIN, 0};
    while (now() < end) {
        if (poll(&p, 1, 50) <= 0) { send(s, buf[0], (size_t)frame, 0); continue; }
        int n = recvmmsg(s, m, BATCH, MSG_DONTWAIT, NULL);
        if (n <= 0) continue;
        got += n;
        for (int i = 0; i < n; i++) v[i].iov_len = (size_t)frame;
        sendmmsg(s, m, (unsigned)n, 0);
        for (int i = 0; i < n; i++) v[i].iov_len = BUF;
    }
    return got;
}

static void udp_forwarder(int s, double end) {
    static char buf[BATCH][BUF];
    struct mmsghdr m[BATCH];
    struct iovec v[BATCH];
    struct sockaddr_in a[BATCH];
    struct pollfd p = {s, POLLIN, 0};
    while (now() < end) {
        for (int i = 0; i < BATCH; i++) {
            v[i].iov_base = buf[i]; v[i].iov_len = BUF;
            memset(&m[i], 0, sizeof m[i]);
            m[i].msg_hdr.msg_iov = &v[i]; m[i].msg_hdr.msg_iovlen = 1;
            m[i].msg_hdr.msg_name = &a[i]; m[i].msg_hdr.msg_namelen = sizeof a[i];
        }
        if (poll(&p, 1, 50) <= 0) continue;
        int n = recvmmsg(s, m, BATCH, MSG_DONTWAIT, NULL);
        if (n <= 0) continue;
        for (int i = 0; i < n; i++) v[i].iov_len = m[i].msg_len;
        sendmmsg(s, m, (unsigned)n, 0);
    }
}


/* -- gso: UDP segmentation offload both ways ----------------------------------------- */
#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif
#define GBATCH 16
#define GBUF 65536
#define GCTL CMSG_SPACE(sizeof(uint16_t))

typedef struct {
    char buf[GBATCH][GBUF];
    struct mmsghdr m[GBATCH];
    struct iovec v[GBATCH];
    struct sockaddr_in a[GBATCH];
    union { struct cmsghdr h; char b[64]; } c[GBATCH];
} Gso;

static void gso_arm(Gso *g) {
    for (int i = 0; i < GBATCH; i++) {
        g->v[i].iov_base = g->buf[i]; g->v[i].iov_len = GBUF;
        memset(&g->m[i], 0, sizeof g->m[i]);
        g->m[i].msg_hdr.msg_iov = &g->v[i]; g->m[i].msg_hdr.msg_iovlen = 1;
        g->m[i].msg_hdr.msg_name = &g->a[i]; g->m[i].msg_hdr.msg_namelen = sizeof g->a[i];
        g->m[i].msg_hdr.msg_control = g->c[i].b; g->m[i].msg_hdr.msg_controllen = sizeof g->c[i].b;
    }
}

/* The segment size of received message i (its whole length when not coalesced). */
static int gso_seg(Gso *g, int i) {
    struct msghdr *h = &g->m[i].msg_hdr;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(h); c; c = CMSG_NXTHDR(h, c))
        if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
            int v; memcpy(&v, CMSG_DATA(c), sizeof v); return v;
        }
    return (int)g->m[i].msg_len;
}

/* Turn received message i into one GSO send of the same bytes (segment `seg`). */
static void gso_reply(Gso *g, int i, int seg, int named) {
    struct msghdr *h = &g->m[i].msg_hdr;
    g->v[i].iov_len = g->m[i].msg_len;
    if (!named) { h->msg_name = NULL; h->msg_namelen = 0; }
    h->msg_control = g->c[i].b; h->msg_controllen = GCTL;
    struct cmsghdr *c = CMSG_FIRSTHDR(h);
    c->cmsg_level = SOL_UDP; c->cmsg_type = UDP_SEGMENT; c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
    uint16_t s16 = (uint16_t)seg; memcpy(CMSG_DATA(c), &s16, sizeof s16);
}

static int gso_socket_on(int s) {
    int one = 1;
    return setsockopt(s, SOL_UDP, UDP_GRO, &one, sizeof one);
}

/* Sends `count` frames to the connected forwarder as GSO sends of up to `per` segments. */
static void gso_send(int s, Gso *g, int frame, int per, long count) {
    while (count > 0) {
        int k = count < per ? (int)count : per;
        struct msghdr *h = &g->m[0].msg_hdr;
        g->m[0].msg_len = (unsigned)(k * frame);
        gso_reply(g, 0, frame, 0);
        if (k == 1) { h->msg_control = NULL; h->msg_controllen = 0; }
        sendmsg(s, h, 0);
        count -= k;
    }
}

/* gro: 0 for the `gsonogro` mode (senders send with GSO, receive datagram by datagram). */
static long gso_sender(struct sockaddr_in *fwd, int frame, int window, double end, int gro) {
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    int big = 4 << 20;
    setsockopt(s, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    connect(s, (struct sockaddr *)fwd, sizeof *fwd);
    if (gro) gso_socket_on(s);
    static Gso g;
    int per = 65507 / frame; if (per > 64) per = 64;
    gso_arm(&g);
    gso_send(s, &g, frame, per, window);
    long got = 0;
    struct pollfd p = {s, POLLIN, 0};
    while (now() < end) {
        gso_arm(&g);
        if (poll(&p, 1, 50) <= 0) { send(s, g.buf[0], (size_t)frame, 0); continue; }
        int n = recvmmsg(s, g.m, GBATCH, MSG_DONTWAIT, NULL);
        if (n <= 0) continue;
        long segs = 0;
        for (int i = 0; i < n; i++) {
            int seg = gso_seg(&g, i);
            segs += ((int)g.m[i].msg_len + seg - 1) / seg;
        }
        got += segs;
        gso_arm(&g);
        gso_send(s, &g, frame, per, segs);    /* the same number of frames straight back */
    }
    return got;
}

static void gso_forwarder(int s, double end) {
    static Gso g;
    gso_socket_on(s);
    struct pollfd p = {s, POLLIN, 0};
    while (now() < end) {
        gso_arm(&g);
        if (poll(&p, 1, 50) <= 0) continue;
        int n = recvmmsg(s, g.m, GBATCH, MSG_DONTWAIT, NULL);
        if (n <= 0) continue;
        for (int i = 0; i < n; i++) gso_reply(&g, i, gso_seg(&g, i), 1);
        sendmmsg(s, g.m, (unsigned)n, 0);
    }
}

/* -- shm ------------------------------------------------------------------------------ */
typedef struct {
    volatile uint32_t head __attribute__((aligned(64)));
    volatile uint32_t tail __attribute__((aligned(64)));
    volatile uint32_t wake __attribute__((aligned(64)));
    uint32_t desc[SLOTS][2] __attribute__((aligned(64)));
    uint8_t buf[SLOTS][BUF];
} Ring;

typedef struct { Ring up, down; int bell_fwd, bell_me; } Pair;   /* up: sender -> forwarder */

static uint32_t ring_take(Ring *r, uint8_t *dst, uint32_t *len) {
    uint32_t t = r->tail;
    if (__atomic_load_n(&r->head, __ATOMIC_ACQUIRE) == t) return 0;
    uint32_t k = t & (SLOTS - 1);
    uint32_t off = r->desc[k][0], n = r->desc[k][1];
    if (off >= SLOTS || n > BUF) n = 0;
    memcpy(dst, r->buf[off], n);
    *len = n;
    __atomic_store_n(&r->tail, t + 1, __ATOMIC_RELEASE);
    return 1;
}

static int ring_put(Ring *r, const uint8_t *src, uint32_t len) {
    uint32_t h = r->head;
    if (h - __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE) >= SLOTS) return 0;
    uint32_t k = h & (SLOTS - 1);
    memcpy(r->buf[k], src, len);
    r->desc[k][0] = k; r->desc[k][1] = len;
    __atomic_store_n(&r->head, h + 1, __ATOMIC_RELEASE);
    return 1;
}

static void ring_bell(Ring *r, int fd) {
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (r->wake) { uint64_t one = 1; ssize_t w = write(fd, &one, 8); (void)w; }
}

/* Spin, then arm every ring in `rs` and sleep on `fd` until one holds a frame. */
static void ring_wait(Ring **rs, int n, int fd, double spin) {
    double until = now() + spin;
    for (;;) {
        for (int i = 0; i < n; i++) if (rs[i]->head != rs[i]->tail) return;
        if (now() >= until) break;
        relax();
    }
    for (int i = 0; i < n; i++) rs[i]->wake = 1;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    int any = 0;
    for (int i = 0; i < n; i++) any |= rs[i]->head != rs[i]->tail;
    if (!any) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 50) > 0) { uint64_t v; ssize_t r = read(fd, &v, 8); (void)r; }
    }
    for (int i = 0; i < n; i++) rs[i]->wake = 0;
}

static long shm_sender(Pair *p, int frame, int window, double end, double spin) {
    static uint8_t f[BUF];
    for (int i = 0; i < window; i++) ring_put(&p->up, f, (uint32_t)frame);
    ring_bell(&p->up, p->bell_fwd);
    long got = 0;
    Ring *mine = &p->down;
    while (now() < end) {
        uint32_t len, n = 0;
        while (ring_take(&p->down, f, &len)) { n++; ring_put(&p->up, f, len); }
        if (n) { got += n; ring_bell(&p->up, p->bell_fwd); continue; }
        ring_wait(&mine, 1, p->bell_me, spin);
    }
    return got;
}

static void shm_forwarder(Pair *ps, int n, double end, double spin) {
    static uint8_t f[BUF];
    Ring *ups[64];
    for (int i = 0; i < n; i++) ups[i] = &ps[i].up;
    while (now() < end) {
        int moved = 0;
        for (int i = 0; i < n; i++) {
            uint32_t len, k = 0;
            while (k < BATCH && ring_take(&ps[i].up, f, &len)) { k++; ring_put(&ps[i].down, f, len); }
            if (k) { moved = 1; ring_bell(&ps[i].down, ps[i].bell_me); }
        }
        if (!moved) ring_wait(ups, n, ps[0].bell_fwd, spin);
    }
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: %s udp|gso|gsonogro|shm NSENDERS FRAME WINDOW SECONDS SPIN_US\n", argv[0]);
        return 2;
    }
    int shm = strcmp(argv[1], "shm") == 0, gso = strcmp(argv[1], "gso") == 0,
        nogro = strcmp(argv[1], "gsonogro") == 0;
    int n = atoi(argv[2]), frame = atoi(argv[3]), window = atoi(argv[4]);
    double secs = atof(argv[5]), spin = atof(argv[6]) * 1e-6;
    if (n < 1 || n > 64 || frame < 1 || frame > BUF || window < 1 || window > SLOTS / 2) return 2;
    long *counts = mmap(NULL, sizeof(long) * 64, PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    Pair *pairs = NULL;
    int s = -1;
    struct sockaddr_in fwd;
    if (shm) {
        pairs = mmap(NULL, sizeof(Pair) * (size_t)n, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        int bell = eventfd(0, EFD_NONBLOCK);
        for (int i = 0; i < n; i++) { pairs[i].bell_fwd = bell; pairs[i].bell_me = eventfd(0, EFD_NONBLOCK); }
    } else {
        s = socket(AF_INET, SOCK_DGRAM, 0);
        int big = 4 << 20;
        setsockopt(s, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
        memset(&fwd, 0, sizeof fwd);
        fwd.sin_family = AF_INET; fwd.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        bind(s, (struct sockaddr *)&fwd, sizeof fwd);
        socklen_t l = sizeof fwd;
        getsockname(s, (struct sockaddr *)&fwd, &l);
    }
    double start = now() + 0.2, end = start + secs;
    for (int i = 0; i < n; i++) {
        if (fork() == 0) {
            while (now() < start) usleep(1000);
            counts[i] = shm ? shm_sender(&pairs[i], frame, window, end, spin)
                      : gso || nogro ? gso_sender(&fwd, frame, window, end, gso)
                            : udp_sender(&fwd, frame, window, end);
            _exit(0);
        }
    }
    double c0 = cpu_of(RUSAGE_SELF);
    while (now() < start) usleep(1000);
    if (shm) shm_forwarder(pairs, n, end, spin);
    else if (gso || nogro) gso_forwarder(s, end);
    else udp_forwarder(s, end);
    double fwd_cpu = cpu_of(RUSAGE_SELF) - c0;
    for (int i = 0; i < n; i++) wait(NULL);
    long total = 0;
    for (int i = 0; i < n; i++) total += counts[i];
    printf("forwards_per_s %.0f forwarder_cpu_s %.4f senders_cpu_s %.4f seconds %.3f\n",
           total / secs, fwd_cpu, cpu_of(RUSAGE_CHILDREN), secs);
    return 0;
}
