/* netsum-switch: the daemon's port loop in C (switch/native/io.py drives it).
 *
 * One Loop per PortSet.  run() polls the port sockets (UDP tunnel ports and AF_PACKET
 * ports) with the GIL released, receives up to BATCH frames per ready socket with one
 * recvmmsg, runs each through the generated pipeline (nsio.h) with the GIL and the Device
 * lock held, so P4Runtime writes from other threads stay serialized with packets exactly as
 * on the Python path, and sends each egress port's outputs with one sendmmsg once the lock
 * is released (as Device.receive sends after process()).  Per frame it does what
 * switch/ports.py and Device.process do: a UDP datagram from an address other than the
 * port's peer is counted (udp_foreign) and never delivered; an AF_PACKET frame the switch
 * sent itself is skipped, a VLAN tag the kernel moved into metadata is put back; a frame
 * above MAX_FRAME is counted (oversize); an assert, the action loop limit or a Python
 * exception cost the frame and all its outputs; an output to a port without a socket is
 * counted (no_tx_port), a failed send (tx_errors); frames for the CPU port go to the packet-in
 * handler.  UDP GSO/GRO (netsum/udpgso.py; Linux >= 5.0, NETSUM_UDP_GSO=0 turns it off): a
 * datagram buffer that arrives coalesced (a UDP_GRO cmsg gives its segment size, the last
 * segment may be shorter) is split into its datagrams, each run through the pipeline as its
 * own frame, exactly as if they came one by one (a buffer has one source address, checked
 * once for all of them); a port's outputs, grouped in their order into runs of one length
 * (the last one of a run may be shorter, at most GSO_SEGS datagrams and GSO_BYTES bytes), go
 * out as one sendmsg with a UDP_SEGMENT cmsg each -- one trip through the kernel's stack for
 * the run; a refused GSO send (EIO, EINVAL, ENOPROTOOPT, EOPNOTSUPP) turns it off for the
 * port and the same frames go out one by one.  Shared-memory ports (shmport.c, netsum/shmring.py) are served in the same pass:
 * each wake-up takes up to BATCH frames of a port's ring 0 and puts its outputs in ring 1;
 * before poll() sleeps, the loop spins up to spin_us on the rings, then arms their doorbells
 * (eventfds, in the poll set with the sockets).  Control fds (the shm ports' listening
 * sockets) make run() return RUN_CONTROL so that Python accepts or refuses the peer.
 * The `gate` callback decides, under the lock, per wake-up, whether this loop may
 * run the packets at all (else run() returns GATE_CLOSED without having read anything and
 * the Python loop takes over).  Counters live here until take_stats() folds them into
 * switch.stats.Stats.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <linux/if_packet.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define BATCH 64                 /* frames per socket per wake-up, as the Python loop */
#define MAX_FRAME 65535          /* switch.device.MAX_FRAME */
#define RX_LEN (MAX_FRAME + 1)   /* what the Python loop asks recvfrom/recvmsg for */
#define SLOT (RX_LEN + 8)        /* + room to put a VLAN tag back in front of the frame */
#define MAX_PORT 511
#define CTL_LEN 64               /* ancillary data space, as recvmsg(..., 64) */
/* UDP_SEGMENT, UDP_GRO, GSO_SEGS, GSO_BYTES, udp_gro_size(): udpgso.h, compiled in front */
#define GSO_CTL CMSG_SPACE(sizeof(uint16_t))

enum { KIND_UDP = 0, KIND_LINUX = 1, KIND_SHM = 2 };
enum { RUN_IDLE = 0, RUN_GATE_CLOSED = 1, RUN_SIGNAL = 2, RUN_CONTROL = 3 };
enum { C_RX, C_TX, C_OVERSIZE, C_FOREIGN, C_NO_TX, C_TX_ERRORS, C_ASSERT, C_LOOP,
       C_SHM_BAD_DESC, C_SHM_BAD_INDEX, C_SHM_TX_FULL, C_COUNT };
/* GSO/GRO counters (gso_stats(); not part of switch.stats: the Python loop has no such thing) */
enum { G_RX_BUFFERS, G_RX_SEGMENTS, G_TX_SENDS, G_TX_SEGMENTS, G_REFUSED, G_COUNT };
enum { ST_OK = 0, ST_ASSERT = 1, ST_LOOP = 2, ST_PYERR = 3 };

typedef struct {
    int fd, kind, number;
    int family;                          /* UDP: the peer's address family */
    uint8_t addr[16];                    /* UDP: the peer's address (4 or 16 bytes) */
    uint16_t port;                       /* UDP: the peer's port, host order */
    struct sockaddr_storage peer;        /* UDP: where outputs go */
    socklen_t peerlen;
    int gso;                             /* UDP: group outputs into GSO sends */
    Shm *shm;                            /* SHM: the rings (fd is the switch's doorbell) */
} Port;

typedef struct { int port; Py_ssize_t off, len; } Out;

typedef struct {
    NsSink sink;                         /* first: the pipeline emits into this loop */
    int nports, nctl, nshm;              /* pfd: the ports' fds, then nctl control fds */
    Port *ports;
    struct pollfd *pfd;
    int index[MAX_PORT + 1];             /* port number -> index in ports, -1: none */
    long cpu_port;                       /* -1: none */
    uint8_t *rx;                         /* BATCH slots of SLOT bytes */
    struct mmsghdr rmsg[BATCH];
    struct iovec riov[BATCH];
    struct sockaddr_storage raddr[BATCH];
    union { struct cmsghdr align; char buf[CTL_LEN]; } rctl[BATCH];
    /* outputs of this wake-up, in the order the pipeline produced them */
    uint8_t *arena; Py_ssize_t used, cap;
    Out *out; Py_ssize_t nout, ocap;
    struct mmsghdr *smsg; struct iovec *siov; Py_ssize_t *order; Py_ssize_t scap;  /* scap each */
    union { struct cmsghdr align; char buf[GSO_CTL]; } *sctl;           /* scap too */
    Py_ssize_t *first, *pos;             /* per port index: start in `order`; scratch */
    unsigned long long cnt[C_COUNT];
    unsigned long long gcnt[G_COUNT];
} Loop;

static int grow(void **p, Py_ssize_t *cap, Py_ssize_t need, size_t item) {
    if (need <= *cap) return 0;
    Py_ssize_t n = *cap ? *cap : 64;
    while (n < need) n *= 2;
    void *q = PyMem_Realloc(*p, (size_t)n * item);
    if (!q) { PyErr_NoMemory(); return -1; }
    *p = q; *cap = n;
    return 0;
}

/* NsSink.emit: copy one output frame into this wake-up's arena. */
static int emit(NsSink *sink, uint64_t port, const uint8_t *frame, Py_ssize_t len) {
    Loop *L = (Loop *)sink;
    if (grow((void **)&L->arena, &L->cap, L->used + len, 1) < 0) return -1;
    if (grow((void **)&L->out, &L->ocap, L->nout + 1, sizeof(Out)) < 0) return -1;
    memcpy(L->arena + L->used, frame, (size_t)len);
    /* a port number outside 0..511 cannot have a socket: -2 is counted as no_tx_port */
    L->out[L->nout].port = port <= MAX_PORT ? (int)port : -2;
    L->out[L->nout].off = L->used;
    L->out[L->nout].len = len;
    L->nout++;
    L->used += len;
    return 0;
}

static void loop_free(PyObject *cap) {
    Loop *L = (Loop *)PyCapsule_GetPointer(cap, "netsum.ioloop");
    if (!L) return;
    for (int i = 0; L->ports && i < L->nports; i++)
        if (L->ports[i].shm) { shm_free(L->ports[i].shm); PyMem_Free(L->ports[i].shm); }
    PyMem_Free(L->ports); PyMem_Free(L->pfd); PyMem_Free(L->rx); PyMem_Free(L->arena);
    PyMem_Free(L->out); PyMem_Free(L->smsg); PyMem_Free(L->siov); PyMem_Free(L->order);
    PyMem_Free(L->first); PyMem_Free(L->pos); PyMem_Free(L->sctl);
    PyMem_Free(L);
}

static Loop *get_loop(PyObject *cap) { return (Loop *)PyCapsule_GetPointer(cap, "netsum.ioloop"); }

/* new([(number, fd, kind, family, addr_bytes, peer_port[, shm]), ...], cpu_port or -1,
 *     [control fd, ...], [port number, ...]); shm: shm_init's tuple, for KIND_SHM (fd: the
 *     switch's doorbell); the last list: the UDP ports whose outputs go as GSO sends */
static PyObject *m_new(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    (void)self;
    if (n != 4 || !PyList_Check(args[0]) || !PyList_Check(args[2]) || !PyList_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError,
                        "new(ports: list, cpu_port: int, control: list, gso: list)");
        return NULL;
    }
    Py_ssize_t np = PyList_GET_SIZE(args[0]), nc = PyList_GET_SIZE(args[2]);
    long cpu = PyLong_AsLong(args[1]);
    if (cpu == -1 && PyErr_Occurred()) return NULL;
    Loop *L = (Loop *)PyMem_Calloc(1, sizeof(Loop));
    if (!L) return PyErr_NoMemory();
    L->sink.emit = emit;
    L->cpu_port = cpu;
    L->nports = (int)np;
    L->nctl = (int)nc;
    L->ports = (Port *)PyMem_Calloc((size_t)(np ? np : 1), sizeof(Port));
    L->pfd = (struct pollfd *)PyMem_Calloc((size_t)(np + nc ? np + nc : 1),
                                           sizeof(struct pollfd));
    L->first = (Py_ssize_t *)PyMem_Calloc((size_t)np + 1, sizeof(Py_ssize_t));
    L->pos = (Py_ssize_t *)PyMem_Calloc((size_t)np + 1, sizeof(Py_ssize_t));
    /* Untouched pages of this buffer are never made resident: only what frames fill is. */
    L->rx = (uint8_t *)PyMem_Malloc((size_t)BATCH * SLOT);
    PyObject *cap = NULL;
    if (!L->ports || !L->pfd || !L->first || !L->pos || !L->rx) { PyErr_NoMemory(); goto fail; }
    for (int i = 0; i <= MAX_PORT; i++) L->index[i] = -1;
    for (Py_ssize_t i = 0; i < np; i++) {
        Port *p = &L->ports[i];
        const char *addr; Py_ssize_t alen;
        int number, fd, kind, family, port;
        PyObject *shm = NULL;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(args[0], i), "iiiiy#i|O", &number, &fd, &kind,
                              &family, &addr, &alen, &port, &shm))
            goto fail;
        if (number < 0 || number > MAX_PORT || L->index[number] >= 0 || fd < 0 ||
            (kind != KIND_UDP && kind != KIND_LINUX && kind != KIND_SHM) ||
            (kind == KIND_SHM) != (shm != NULL && PyTuple_Check(shm))) {
            PyErr_SetString(PyExc_ValueError, "ioloop: bad port");
            goto fail;
        }
        p->fd = fd; p->kind = kind; p->number = number;
        if (kind == KIND_SHM) {
            p->shm = (Shm *)PyMem_Calloc(1, sizeof(Shm));
            if (!p->shm) { PyErr_NoMemory(); goto fail; }
            if (shm_init(p->shm, shm) < 0) { PyMem_Free(p->shm); p->shm = NULL; goto fail; }
            L->nshm++;
        }
        if (kind == KIND_UDP) {
            if (!((family == AF_INET && alen == 4) || (family == AF_INET6 && alen == 16)) ||
                port < 0 || port > 65535) {
                PyErr_SetString(PyExc_ValueError, "ioloop: bad UDP peer");
                goto fail;
            }
            p->family = family; p->port = (uint16_t)port;
            memcpy(p->addr, addr, (size_t)alen);
            memset(&p->peer, 0, sizeof p->peer);
            if (family == AF_INET) {
                struct sockaddr_in *s = (struct sockaddr_in *)&p->peer;
                s->sin_family = AF_INET; s->sin_port = htons(p->port);
                memcpy(&s->sin_addr, addr, 4);
                p->peerlen = sizeof *s;
            } else {
                struct sockaddr_in6 *s = (struct sockaddr_in6 *)&p->peer;
                s->sin6_family = AF_INET6; s->sin6_port = htons(p->port);
                memcpy(&s->sin6_addr, addr, 16);
                p->peerlen = sizeof *s;
            }
        }
        L->index[number] = (int)i;
        L->pfd[i].fd = fd;
        L->pfd[i].events = POLLIN;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(args[3]); i++) {
        long number = PyLong_AsLong(PyList_GET_ITEM(args[3], i));
        if (number == -1 && PyErr_Occurred()) goto fail;
        if (number >= 0 && number <= MAX_PORT && L->index[number] >= 0 &&
                L->ports[L->index[number]].kind == KIND_UDP)
            L->ports[L->index[number]].gso = 1;
    }
    for (Py_ssize_t i = 0; i < nc; i++) {
        int fd = (int)PyLong_AsLong(PyList_GET_ITEM(args[2], i));
        if (fd < 0) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "ioloop: bad control fd");
            goto fail;
        }
        L->pfd[np + i].fd = fd;
        L->pfd[np + i].events = POLLIN;
    }
    cap = PyCapsule_New(L, "netsum.ioloop", loop_free);
    if (cap) return cap;
fail:
    for (Py_ssize_t i = 0; L->ports && i < np; i++)
        if (L->ports[i].shm) { shm_free(L->ports[i].shm); PyMem_Free(L->ports[i].shm); }
    PyMem_Free(L->ports); PyMem_Free(L->pfd); PyMem_Free(L->first); PyMem_Free(L->pos);
    PyMem_Free(L->rx); PyMem_Free(L);
    return NULL;
}

/* Is a received UDP source the port's peer?  (The Python loop compares recvfrom's host
 * string and port with the resolved peer's: the same as comparing address and port.) */
static int from_peer(const Port *p, const struct sockaddr_storage *a) {
    if (a->ss_family != p->family) return 0;
    if (a->ss_family == AF_INET) {
        const struct sockaddr_in *s = (const struct sockaddr_in *)a;
        return ntohs(s->sin_port) == p->port && memcmp(&s->sin_addr, p->addr, 4) == 0;
    }
    const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)a;
    return ntohs(s->sin6_port) == p->port && memcmp(&s->sin6_addr, p->addr, 16) == 0;
}

/* The VLAN tag the kernel stripped into PACKET_AUXDATA, put back after the MACs (as
 * ports.py does): the frame was received at slot + 4, so moving its first 12 bytes 4 to the
 * front makes room without copying the rest.  Returns the frame's start. */
static uint8_t *vlan_back(struct msghdr *h, uint8_t *slot, Py_ssize_t *len) {
    uint8_t *data = slot + 4;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(h); cm; cm = CMSG_NXTHDR(h, cm)) {
        if (cm->cmsg_level != SOL_PACKET || cm->cmsg_type != PACKET_AUXDATA ||
            cm->cmsg_len < CMSG_LEN(sizeof(struct tpacket_auxdata)))
            continue;
        struct tpacket_auxdata aux;
        memcpy(&aux, CMSG_DATA(cm), sizeof aux);
        if (!(aux.tp_status & TP_STATUS_VLAN_VALID) || *len < 12) continue;
        uint16_t tpid = (aux.tp_status & TP_STATUS_VLAN_TPID_VALID) ? aux.tp_vlan_tpid : 0x8100;
        memmove(slot, data, 12);
        slot[12] = (uint8_t)(tpid >> 8); slot[13] = (uint8_t)tpid;
        slot[14] = (uint8_t)(aux.tp_vlan_tci >> 8); slot[15] = (uint8_t)aux.tp_vlan_tci;
        data = slot;
        *len += 4;
    }
    return data;
}

typedef struct {
    NsPipe *pipe;
    PyObject *now;                       /* callable giving the clock in µs, or None */
    PyObject *internal_error;            /* Device._internal_error(exc, what) */
} Run;

/* One frame through the pipeline; its outputs stay in the arena unless it failed. */
static int run_frame(Loop *L, Run *r, int number, const uint8_t *data, Py_ssize_t len) {
    L->cnt[C_RX]++;
    if (len > MAX_FRAME) { L->cnt[C_OVERSIZE]++; return 0; }
    Py_ssize_t nout = L->nout, used = L->used;
    uint64_t now = 0;
    int st;
    if (r->now != Py_None) {
        PyObject *t = PyObject_CallNoArgs(r->now);
        if (t) { now = PyLong_AsUnsignedLongLongMask(t); Py_DECREF(t); }
        st = PyErr_Occurred() ? ST_PYERR : ST_OK;
    } else {
        st = ST_OK;
    }
    if (st == ST_OK) st = r->pipe->process(r->pipe->ctx, (uint64_t)number, data, len, now, &L->sink);
    if (st == ST_OK) { L->cnt[C_TX] += (unsigned long long)(L->nout - nout); return 0; }
    L->nout = nout; L->used = used;      /* a failed frame has no outputs, as Device.process */
    if (st == ST_ASSERT) { L->cnt[C_ASSERT]++; return 0; }
    if (st == ST_LOOP) { L->cnt[C_LOOP]++; return 0; }
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "native: callback failed");
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb && value) PyException_SetTraceback(value, tb);
    PyObject *res = NULL;
    if (PyErr_GivenExceptionMatches(type, PyExc_Exception)) {
        PyObject *what = PyUnicode_FromFormat("a %zd-byte frame from port %d", len, number);
        if (what) res = PyObject_CallFunctionObjArgs(r->internal_error, value, what, NULL);
        Py_XDECREF(what);
        Py_XDECREF(type); Py_XDECREF(value); Py_XDECREF(tb);
        if (!res) return -1;
        Py_DECREF(res);
        return 0;
    }
    PyErr_Restore(type, value, tb);      /* KeyboardInterrupt and the like: the caller's */
    return -1;
}

/* Receive one socket's ready frames and run them; -1 with a Python exception. */
static int drain(Loop *L, Run *r, Port *p) {
    for (int j = 0; j < BATCH; j++) {
        struct msghdr *h = &L->rmsg[j].msg_hdr;
        uint8_t *slot = L->rx + (size_t)j * SLOT;
        L->riov[j].iov_base = p->kind == KIND_LINUX ? slot + 4 : slot;
        L->riov[j].iov_len = RX_LEN;
        memset(h, 0, sizeof *h);
        h->msg_iov = &L->riov[j]; h->msg_iovlen = 1;
        h->msg_name = &L->raddr[j]; h->msg_namelen = sizeof L->raddr[j];
        h->msg_control = L->rctl[j].buf; h->msg_controllen = CTL_LEN;  /* VLAN tag, UDP_GRO */
    }
    int m = recvmmsg(p->fd, L->rmsg, BATCH, MSG_DONTWAIT, NULL);
    if (m <= 0) return 0;                /* EAGAIN, or an error the socket survives */
    for (int j = 0; j < m; j++) {
        uint8_t *slot = L->rx + (size_t)j * SLOT;
        Py_ssize_t len = (Py_ssize_t)L->rmsg[j].msg_len;
        const uint8_t *data = slot;
        if (p->kind == KIND_UDP) {
            Py_ssize_t seg = (Py_ssize_t)udp_gro_size(&L->rmsg[j].msg_hdr);
            if (seg > 0 && seg < len) {  /* coalesced: each datagram is its own frame */
                Py_ssize_t nseg = (len + seg - 1) / seg;
                if (!from_peer(p, &L->raddr[j])) { L->cnt[C_FOREIGN] += (unsigned long long)nseg; continue; }
                L->gcnt[G_RX_BUFFERS]++;
                L->gcnt[G_RX_SEGMENTS] += (unsigned long long)nseg;
                for (Py_ssize_t off = 0; off < len; off += seg)
                    if (run_frame(L, r, p->number, slot + off, len - off < seg ? len - off : seg) < 0)
                        return -1;
                continue;
            }
            if (!from_peer(p, &L->raddr[j])) { L->cnt[C_FOREIGN]++; continue; }
        } else {
            const struct sockaddr_ll *ll = (const struct sockaddr_ll *)&L->raddr[j];
            if (ll->sll_pkttype == PACKET_OUTGOING) continue;   /* our own transmissions */
            data = vlan_back(&L->rmsg[j].msg_hdr, slot, &len);
        }
        if (run_frame(L, r, p->number, data, len) < 0) return -1;
    }
    return 0;
}

/* Take up to BATCH frames of a shared-memory port's ring 0 and run them; each is copied out
 * of the region first.  -1 with a Python exception (the frames after it stay queued). */
static int drain_shm(Loop *L, Run *r, Port *p) {
    uint32_t tail = 0, j = 0;
    uint32_t m = shm_take_begin(p->shm, BATCH, &tail, &L->cnt[C_SHM_BAD_INDEX]);
    int rc = 0;
    for (; j < m; j++) {
        int64_t len = shm_copy_in(p->shm, tail + j, L->rx, RX_LEN);
        if (len == -1) { L->cnt[C_SHM_BAD_DESC]++; continue; }
        if (len == -2) { L->cnt[C_RX]++; L->cnt[C_OVERSIZE]++; continue; }
        if (run_frame(L, r, p->number, L->rx, (Py_ssize_t)len) < 0) { rc = -1; j++; break; }
    }
    if (m) shm_take_end(p->shm, tail + j);
    return rc;
}

/* Frames for the CPU port go to the packet-in handler (GIL held, lock released). */
static int to_cpu(Loop *L, PyObject *handler) {
    if (L->cpu_port < 0) return 0;
    for (Py_ssize_t i = 0; i < L->nout; i++) {
        Out *o = &L->out[i];
        if (o->port != L->cpu_port) continue;
        o->port = -3;                    /* delivered; the send pass skips it */
        if (handler == Py_None) continue;
        PyObject *b = PyBytes_FromStringAndSize((const char *)L->arena + o->off, o->len);
        if (!b) return -1;
        PyObject *res = PyObject_CallOneArg(handler, b);
        Py_DECREF(b);
        if (!res) return -1;
        Py_DECREF(res);
    }
    return 0;
}

/* Order the pending outputs by egress port (stable) for one sendmmsg per port; with the
 * GIL held (it may allocate).  Counts outputs to ports without a socket. */
static int plan_sends(Loop *L) {
    if (L->nout > L->scap) {
        Py_ssize_t cap = L->scap ? L->scap : 64;
        while (cap < L->nout) cap *= 2;
        Py_ssize_t *o = (Py_ssize_t *)PyMem_Realloc(L->order, sizeof(Py_ssize_t) * (size_t)cap);
        if (o) L->order = o;
        struct mmsghdr *m = (struct mmsghdr *)PyMem_Realloc(L->smsg, sizeof(struct mmsghdr) * (size_t)cap);
        if (m) L->smsg = m;
        struct iovec *v = (struct iovec *)PyMem_Realloc(L->siov, sizeof(struct iovec) * (size_t)cap);
        if (v) L->siov = v;
        void *c = PyMem_Realloc(L->sctl, sizeof *L->sctl * (size_t)cap);
        if (c) L->sctl = c;
        if (!o || !m || !v || !c) { PyErr_NoMemory(); return -1; }
        L->scap = cap;
    }
    int np = L->nports;
    Py_ssize_t *first = L->first, *pos = L->pos;
    memset(first, 0, sizeof(Py_ssize_t) * ((size_t)np + 1));
    for (Py_ssize_t i = 0; i < L->nout; i++) {
        int port = L->out[i].port;
        if (port == -3) continue;
        if (port < 0 || L->index[port] < 0) { L->out[i].port = -3; L->cnt[C_NO_TX]++; continue; }
        first[L->index[port] + 1]++;
    }
    for (int k = 0; k < np; k++) first[k + 1] += first[k];
    /* counting sort, stable: order[first[k] .. first[k+1]) are port k's outputs in order */
    memcpy(pos, first, sizeof(Py_ssize_t) * ((size_t)np + 1));
    for (Py_ssize_t i = 0; i < L->nout; i++) {
        int port = L->out[i].port;
        if (port >= 0) L->order[pos[L->index[port]]++] = i;
    }
    return 0;
}

/* Where the run of outputs order[i..b) that goes out as one send ends (see plan_groups in
 * netsum/udpgso.py): equal lengths, the last one possibly shorter, GSO_SEGS / GSO_BYTES. */
static Py_ssize_t gso_run(const Loop *L, Py_ssize_t i, Py_ssize_t b) {
    Py_ssize_t seg = L->out[L->order[i]].len, total = seg, j = i + 1;
    while (j < b && j - i < GSO_SEGS) {
        Py_ssize_t len = L->out[L->order[j]].len;
        if (len == 0 || len > seg || total + len > GSO_BYTES) break;   /* empty: its own send */
        total += len;
        j++;
        if (len < seg) break;            /* a shorter segment ends the send */
    }
    return j;
}

/* Send port p's outputs order[a..b) grouped into GSO sends (GIL released).  Returns where
 * the plain path must go on: b when all went, or the first output of a send the kernel
 * refused as GSO (then GSO is off for this port from now on). */
static Py_ssize_t send_gso(Loop *L, Port *p, Py_ssize_t a, Py_ssize_t b, TxCounts *tc) {
    /* group messages are built at smsg[g] for g from a on: a group never has fewer outputs
     * than messages before it, so message g's iovecs (from siov[first]) never overlap */
    Py_ssize_t g = a, i = a;
    while (i < b) {
        Py_ssize_t j = gso_run(L, i, b);
        struct msghdr *h = &L->smsg[g].msg_hdr;
        memset(h, 0, sizeof *h);
        for (Py_ssize_t k = i; k < j; k++) {
            Out *o = &L->out[L->order[k]];
            L->siov[k].iov_base = L->arena + o->off;
            L->siov[k].iov_len = (size_t)o->len;
        }
        h->msg_iov = &L->siov[i]; h->msg_iovlen = (size_t)(j - i);
        h->msg_name = &p->peer; h->msg_namelen = p->peerlen;
        if (j - i > 1) {
            h->msg_control = L->sctl[g].buf; h->msg_controllen = GSO_CTL;
            struct cmsghdr *cm = CMSG_FIRSTHDR(h);
            cm->cmsg_level = SOL_UDP; cm->cmsg_type = UDP_SEGMENT;
            cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
            uint16_t seg = (uint16_t)L->out[L->order[i]].len;
            memcpy(CMSG_DATA(cm), &seg, sizeof seg);
        }
        L->smsg[g].msg_len = (unsigned int)(j - i);   /* outputs in it, until sent */
        g++;
        i = j;
    }
    Py_ssize_t m = a, at = a;            /* next message, its first output */
    while (m < g) {
        Py_ssize_t chunk = g - m > 1024 ? 1024 : g - m;
        unsigned int counts[1024];
        for (Py_ssize_t k = 0; k < chunk; k++) counts[k] = L->smsg[m + k].msg_len;
        int sent = sendmmsg(p->fd, &L->smsg[m], (unsigned int)chunk, MSG_DONTWAIT);
        if (sent > 0) {
            for (int k = 0; k < sent; k++) {
                if (counts[k] > 1) {
                    L->gcnt[G_TX_SENDS]++;
                    L->gcnt[G_TX_SEGMENTS] += counts[k];
                }
                at += counts[k];
            }
            m += sent;
            continue;
        }
        int err = errno;
        if (sent < 0 && err == EINTR) continue;
        if (counts[0] > 1 && (err == EIO || err == EINVAL || err == ENOPROTOOPT ||
                              err == EOPNOTSUPP)) {
            p->gso = 0;                  /* the kernel will not: one by one from here */
            L->gcnt[G_REFUSED]++;
            return at;
        }
        tc->errors += counts[0];         /* each of its frames failed (as sendto raising) */
        at += counts[0];
        m++;
    }
    return b;
}

/* Send the planned outputs (GIL released); failures are added to *tc. */
static void send_all(Loop *L, TxCounts *tc) {
    for (int k = 0; k < L->nports; k++) {
        Py_ssize_t a = L->first[k], b = L->first[k + 1];
        if (a == b) continue;
        Port *p = &L->ports[k];
        if (p->kind == KIND_SHM) {
            ShmTx t;
            shm_put_begin(p->shm, &t, tc);
            for (Py_ssize_t i = a; i < b; i++) {
                Out *o = &L->out[L->order[i]];
                shm_put_one(p->shm, &t, L->arena + o->off, (uint64_t)o->len, tc);
            }
            shm_put_end(p->shm, &t);
            continue;
        }
        if (p->kind == KIND_UDP && p->gso) a = send_gso(L, p, a, b, tc);
        for (Py_ssize_t i = a; i < b; i++) {
            Out *o = &L->out[L->order[i]];
            struct msghdr *h = &L->smsg[i].msg_hdr;
            memset(h, 0, sizeof *h);
            L->siov[i].iov_base = L->arena + o->off;
            L->siov[i].iov_len = (size_t)o->len;
            h->msg_iov = &L->siov[i]; h->msg_iovlen = 1;
            if (p->kind == KIND_UDP) { h->msg_name = &p->peer; h->msg_namelen = p->peerlen; }
        }
        Py_ssize_t i = a;
        while (i < b) {
            Py_ssize_t chunk = b - i > 1024 ? 1024 : b - i;
            int sent = sendmmsg(p->fd, &L->smsg[i], (unsigned int)chunk, MSG_DONTWAIT);
            if (sent > 0) { i += sent; continue; }
            if (sent < 0 && errno == EINTR) continue;
            tc->errors++;                /* this frame failed (as sendto raising OSError) */
            i++;
        }
    }
    L->nout = 0; L->used = 0;
    memset(L->first, 0, sizeof(Py_ssize_t) * ((size_t)L->nports + 1));
}

static void add_tx(Loop *L, const TxCounts *tc) {
    L->cnt[C_TX_ERRORS] += tc->errors;
    L->cnt[C_SHM_TX_FULL] += tc->full;
    L->cnt[C_SHM_BAD_INDEX] += tc->bad_index;
}

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000ll + t.tv_nsec;
}

/* Before sleeping (GIL released): 1 if a shared-memory ring holds frames, after spinning up
 * to spin_ns on them; otherwise every ring is armed (its producer will ring the doorbell). */
static int shm_wait_prepare(Loop *L, long long spin_ns) {
    if (!L->nshm) return 0;
    long long end = spin_ns > 0 ? now_ns() + spin_ns : 0;
    for (unsigned it = 0;; it++) {
        for (int i = 0; i < L->nports; i++)
            if (L->ports[i].shm && shm_pending(L->ports[i].shm)) return 1;
        if (!end || ((it & 15) == 15 && now_ns() >= end)) break;
        cpu_relax();
    }
    for (int i = 0; i < L->nports; i++)
        if (L->ports[i].shm) shm_arm(L->ports[i].shm);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    for (int i = 0; i < L->nports; i++)
        if (L->ports[i].shm && shm_pending(L->ports[i].shm)) return 1;
    return 0;
}

static void shm_wait_done(Loop *L) {
    for (int i = 0; i < L->nports && L->nshm; i++)
        if (L->ports[i].shm) shm_disarm(L->ports[i].shm, L->pfd[i].fd, L->pfd[i].revents);
}

static long long now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static int call0(PyObject *fn) {
    PyObject *r = PyObject_CallNoArgs(fn);
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

/* run(loop, acquire, release, gate, internal_error, idle_ms, budget_ms, spin_us) -> code
 * Serves the ports until idle_ms pass without a frame (RUN_IDLE), budget_ms have passed
 * (RUN_IDLE), gate() answers None (RUN_GATE_CLOSED: nothing was read), a signal arrived
 * (RUN_SIGNAL, its Python handler has run) or a control fd is readable (RUN_CONTROL, after
 * the frames of that wake-up).  gate() -> None | (pipe capsule, now callable or None,
 * packet-in handler or None) is called with the lock held. */
static PyObject *m_run(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    (void)self;
    if (n != 8) { PyErr_SetString(PyExc_TypeError, "run takes 8 arguments"); return NULL; }
    Loop *L = get_loop(args[0]);
    PyObject *acquire = args[1], *release = args[2], *gate = args[3];
    long idle = PyLong_AsLong(args[5]), budget = PyLong_AsLong(args[6]);
    long long spin_ns = PyLong_AsLongLong(args[7]) * 1000;
    if (!L || PyErr_Occurred()) return NULL;
    long long end = now_ms() + budget;
    int code = RUN_IDLE;
    nfds_t nfds = (nfds_t)(L->nports + L->nctl);
    for (;;) {
        long long left = end - now_ms();
        int tmo = left <= 0 ? 0 : (int)(left < idle ? left : idle);
        TxCounts tc = {0, 0, 0};
        int ready, err, pending;
        Py_BEGIN_ALLOW_THREADS
        send_all(L, &tc);
        pending = shm_wait_prepare(L, tmo ? spin_ns : 0);
        ready = poll(L->pfd, nfds, pending ? 0 : tmo);
        err = errno;
        shm_wait_done(L);
        Py_END_ALLOW_THREADS
        add_tx(L, &tc);
        if (PyErr_CheckSignals() < 0) return NULL;
        if (ready < 0) {
            if (err == EINTR) { code = RUN_SIGNAL; break; }
            errno = err;
            return PyErr_SetFromErrno(PyExc_OSError);
        }
        if (ready == 0 && !pending) break;
        int control = 0;
        for (int i = 0; i < L->nctl; i++) control |= L->pfd[L->nports + i].revents != 0;
        if (ready == 0 || ready > control || L->nshm) {
            if (call0(acquire) < 0) return NULL;
            PyObject *g = PyObject_CallNoArgs(gate);
            if (g && g != Py_None && (!PyTuple_Check(g) || PyTuple_GET_SIZE(g) != 3)) {
                Py_DECREF(g);
                g = NULL;
                PyErr_SetString(PyExc_TypeError, "gate() must return None or a 3-tuple");
            }
            if (!g) {                    /* release the lock, keep gate's exception */
                PyObject *t, *v, *tb;
                PyErr_Fetch(&t, &v, &tb);
                int e = call0(release);
                if (e == 0) PyErr_Restore(t, v, tb);
                else { Py_XDECREF(t); Py_XDECREF(v); Py_XDECREF(tb); }
                return NULL;
            }
            if (g == Py_None) {
                Py_DECREF(g);
                if (call0(release) < 0) return NULL;
                code = RUN_GATE_CLOSED;
                break;
            }
            Run r;
            r.pipe = (NsPipe *)PyCapsule_GetPointer(PyTuple_GET_ITEM(g, 0), "netsum.native.pipe");
            r.now = PyTuple_GET_ITEM(g, 1);
            r.internal_error = args[4];
            int bad = 0;
            if (!r.pipe) bad = 1;
            else if (r.pipe->abi != NS_ABI) {
                PyErr_SetString(PyExc_RuntimeError, "ioloop: pipeline module of another ABI");
                bad = 1;
            }
            for (int i = 0; i < L->nports && !bad; i++) {
                Port *p = &L->ports[i];
                if (p->kind == KIND_SHM) { if (drain_shm(L, &r, p) < 0) bad = 1; }
                else if (L->pfd[i].revents && drain(L, &r, p) < 0) bad = 1;
            }
            PyObject *t = NULL, *v = NULL, *tb = NULL;
            if (bad) PyErr_Fetch(&t, &v, &tb);
            int rel = call0(release);
            if (bad) { PyErr_Restore(t, v, tb); Py_DECREF(g); return NULL; }
            if (rel < 0 || to_cpu(L, PyTuple_GET_ITEM(g, 2)) < 0 || plan_sends(L) < 0) {
                Py_DECREF(g);
                return NULL;
            }
            Py_DECREF(g);
        }
        if (control) { code = RUN_CONTROL; break; }
        if (now_ms() >= end) break;
    }
    TxCounts tc = {0, 0, 0};
    Py_BEGIN_ALLOW_THREADS
    send_all(L, &tc);
    Py_END_ALLOW_THREADS
    add_tx(L, &tc);
    return PyLong_FromLong(code);
}

/* gso_stats(loop) -> (coalesced buffers received, their datagrams, GSO sends, their
 * datagrams, GSO sends refused) since the loop was made; ports with GSO on now.  Read while
 * the loop may run without the GIL: a figure may lag by the wake-up in progress. */
static PyObject *m_gso_stats(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    (void)self;
    if (n != 1) { PyErr_SetString(PyExc_TypeError, "gso_stats(loop)"); return NULL; }
    Loop *L = get_loop(args[0]);
    if (!L) return NULL;
    int on = 0;
    for (int i = 0; i < L->nports; i++) on += L->ports[i].kind == KIND_UDP && L->ports[i].gso;
    PyObject *t = Py_BuildValue("(KKKKKi)", L->gcnt[0], L->gcnt[1], L->gcnt[2], L->gcnt[3],
                                L->gcnt[4], on);
    return t;
}

/* take_stats(loop) -> (rx_packets, tx_packets, oversize, udp_foreign, no_tx_port, tx_errors,
 * assert_failures, loop_limit, shm_bad_desc, shm_bad_index, shm_tx_full) since the last call */
static PyObject *m_take_stats(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    (void)self;
    if (n != 1) { PyErr_SetString(PyExc_TypeError, "take_stats(loop)"); return NULL; }
    Loop *L = get_loop(args[0]);
    if (!L) return NULL;
    PyObject *t = PyTuple_New(C_COUNT);
    if (!t) return NULL;
    for (int i = 0; i < C_COUNT; i++) {
        PyObject *v = PyLong_FromUnsignedLongLong(L->cnt[i]);
        if (!v) { Py_DECREF(t); return NULL; }
        PyTuple_SET_ITEM(t, i, v);
        L->cnt[i] = 0;
    }
    return t;
}

static PyMethodDef methods[] = {
    {"new", (PyCFunction)(void (*)(void))m_new, METH_FASTCALL, "a loop over port sockets"},
    {"run", (PyCFunction)(void (*)(void))m_run, METH_FASTCALL, "serve the ports for a while"},
    {"take_stats", (PyCFunction)(void (*)(void))m_take_stats, METH_FASTCALL, "counters since last call"},
    {"gso_stats", (PyCFunction)(void (*)(void))m_gso_stats, METH_FASTCALL, "GSO/GRO counters so far"},
    {NULL, NULL, 0, NULL}
};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, MODNAME, NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC MODINIT(void) { return PyModule_Create(&moddef); }
