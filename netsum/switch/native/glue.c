/* netsum-switch native backend: the Python module of one generated program.
 *
 * One Ctx per pipeline, held in a capsule.  Python keeps the state (registers, counters as
 * numpy buffers this context writes in place; table entries and multicast groups, which
 * switch/native/backend.py loads here after every control-plane change) and calls
 * process() once per packet.  MODNAME and PyInit_* are defined by the generator.
 */
static void ctx_free(PyObject *cap) {
    Ctx *c = (Ctx *)PyCapsule_GetPointer(cap, "netsum.native");
    if (!c) return;
    for (int i = 0; i < NREGS; i++) if (c->reg[i].bound) PyBuffer_Release(&c->reg[i].view);
    for (int i = 0; i < NCTRS; i++) if (c->ctr[i].bound) { PyBuffer_Release(&c->ctr[i].v1); PyBuffer_Release(&c->ctr[i].v2); }
    for (int i = 0; i < NTABLES; i++) table_free(&c->tab[i]);
    for (int g = 0; g <= MAX_MGID; g++) if (c->groups[g]) { PyMem_Free(c->groups[g]->pr); PyMem_Free(c->groups[g]); }
    Py_XDECREF(c->randint); Py_XDECREF(c->getrandbits); Py_XDECREF(c->digest);
    PyMem_Free(c->obuf);
    PyMem_Free(c);
}

static Ctx *get_ctx(PyObject *cap) { return (Ctx *)PyCapsule_GetPointer(cap, "netsum.native"); }

static PyObject *m_new(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    Ctx *c = (Ctx *)PyMem_Calloc(1, sizeof(Ctx));
    if (!c) return PyErr_NoMemory();
    c->obuf = (u8 *)PyMem_Malloc(HDR_MAX + 65536 + 16);
    if (!c->obuf) { PyMem_Free(c); return PyErr_NoMemory(); }
    c->drop_port = 511;
    init_tables(c);
    PyObject *cap = PyCapsule_New(c, "netsum.native", ctx_free);
    if (!cap) { PyMem_Free(c->obuf); PyMem_Free(c); }
    return cap;
}

static int get_buffer(PyObject *obj, Py_buffer *v, Py_ssize_t itemsize) {
    if (PyObject_GetBuffer(obj, v, PyBUF_WRITABLE | PyBUF_STRIDES) < 0) return -1;
    if (v->ndim != 1 || v->itemsize != itemsize) {
        PyBuffer_Release(v);
        PyErr_SetString(PyExc_ValueError, "native: expected a 1-D buffer of the planned item size");
        return -1;
    }
    return 0;
}

/* bind_reg(ctx, index, array, itemsize) */
static PyObject *m_bind_reg(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    if (n != 4) { PyErr_SetString(PyExc_TypeError, "bind_reg(ctx, i, array, itemsize)"); return NULL; }
    Ctx *c = get_ctx(args[0]);
    long i = PyLong_AsLong(args[1]), isz = PyLong_AsLong(args[3]);
    if (!c || PyErr_Occurred()) return NULL;
    if (i < 0 || i >= NREGS) { PyErr_SetString(PyExc_IndexError, "register index"); return NULL; }
    Reg *r = &c->reg[i];
    if (r->bound) { PyBuffer_Release(&r->view); r->bound = 0; }
    if (get_buffer(args[2], &r->view, isz) < 0) return NULL;
    r->base = (char *)r->view.buf; r->stride = r->view.strides[0]; r->size = r->view.shape[0]; r->bound = 1;
    Py_RETURN_NONE;
}

/* bind_ctr(ctx, index, packets, bytes) */
static PyObject *m_bind_ctr(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    if (n != 4) { PyErr_SetString(PyExc_TypeError, "bind_ctr(ctx, i, packets, bytes)"); return NULL; }
    Ctx *c = get_ctx(args[0]);
    long i = PyLong_AsLong(args[1]);
    if (!c || PyErr_Occurred()) return NULL;
    if (i < 0 || i >= NCTRS) { PyErr_SetString(PyExc_IndexError, "counter index"); return NULL; }
    Ctr *t = &c->ctr[i];
    if (t->bound) { PyBuffer_Release(&t->v1); PyBuffer_Release(&t->v2); t->bound = 0; }
    if (get_buffer(args[2], &t->v1, 8) < 0) return NULL;
    if (get_buffer(args[3], &t->v2, 8) < 0) { PyBuffer_Release(&t->v1); return NULL; }
    if (t->v1.strides[0] != 8 || t->v2.strides[0] != 8 || t->v1.shape[0] != t->v2.shape[0]) {
        PyBuffer_Release(&t->v1); PyBuffer_Release(&t->v2);
        PyErr_SetString(PyExc_ValueError, "native: counter storage must be contiguous"); return NULL;
    }
    t->pk = (u64 *)t->v1.buf; t->by = (u64 *)t->v2.buf; t->size = t->v1.shape[0]; t->bound = 1;
    Py_RETURN_NONE;
}

static int list_words(PyObject *lst, u64 **out, Py_ssize_t *n) {
    if (!PyList_Check(lst)) { PyErr_SetString(PyExc_TypeError, "expected a list of ints"); return -1; }
    *n = PyList_GET_SIZE(lst);
    *out = (u64 *)PyMem_Malloc(sizeof(u64) * (size_t)(*n ? *n : 1));
    if (!*out) { PyErr_NoMemory(); return -1; }
    for (Py_ssize_t i = 0; i < *n; i++) {
        (*out)[i] = PyLong_AsUnsignedLongLongMask(PyList_GET_ITEM(lst, i));
        if (PyErr_Occurred()) { PyMem_Free(*out); *out = NULL; return -1; }
    }
    return 0;
}

/* table_load(ctx, tid, n_entries, words, levels, default_action, default_params)
 * levels (exact/lpm): [count, mask_0 .. mask_nk-1] per level, entries of level 0 first. */
static PyObject *m_table_load(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    if (n != 7) { PyErr_SetString(PyExc_TypeError, "table_load takes 7 arguments"); return NULL; }
    Ctx *c = get_ctx(args[0]);
    long tid = PyLong_AsLong(args[1]);
    Py_ssize_t ne = PyLong_AsSsize_t(args[2]);
    long def = PyLong_AsLong(args[5]);
    if (!c || PyErr_Occurred()) return NULL;
    if (tid < 0 || tid >= NTABLES) { PyErr_SetString(PyExc_IndexError, "table index"); return NULL; }
    Table *t = &c->tab[tid];
    u64 *words = NULL, *lv = NULL, *dp = NULL; Py_ssize_t nw, nl, nd;
    if (list_words(args[3], &words, &nw) < 0) return NULL;
    if (list_words(args[4], &lv, &nl) < 0) { PyMem_Free(words); return NULL; }
    if (list_words(args[6], &dp, &nd) < 0) { PyMem_Free(words); PyMem_Free(lv); return NULL; }
    if (ne < 0 || nw != ne * t->stride || nd > MAXP) {
        PyMem_Free(words); PyMem_Free(lv); PyMem_Free(dp);
        PyErr_SetString(PyExc_ValueError, "native: table words do not match the entry layout"); return NULL;
    }
    table_free(t);
    t->words = words; t->n = ne; t->def_act = (int)def;
    memset(t->def_params, 0, sizeof t->def_params);
    for (Py_ssize_t i = 0; i < nd; i++) t->def_params[i] = dp[i];
    PyMem_Free(dp);
    if (t->kind == 1 || t->kind == 2) {
        int nk = t->nk, cnt = 0;
        for (Py_ssize_t i = 0; i < nl; i += 1 + nk) cnt++;
        t->levels = (Level *)PyMem_Calloc((size_t)(cnt ? cnt : 1), sizeof(Level));
        Py_ssize_t first = 0;
        for (int l = 0; l < cnt; l++) {
            Level *L = &t->levels[l];
            const u64 *d = lv + (Py_ssize_t)l * (1 + nk);
            L->count = (Py_ssize_t)d[0]; L->first = first; first += L->count;
            L->mask = (u64 *)PyMem_Malloc(sizeof(u64) * (size_t)(nk ? nk : 1));
            for (int i = 0; i < nk; i++) L->mask[i] = d[1 + i];
            Py_ssize_t cap = 1;
            while (cap < 2 * L->count + 1) cap <<= 1;
            L->cap = L->count ? cap : 0;
            L->slots = (int32_t *)PyMem_Malloc(sizeof(int32_t) * (size_t)cap);
            for (Py_ssize_t j = 0; j < cap; j++) L->slots[j] = -1;
            for (Py_ssize_t e = L->first; e < L->first + L->count && e < ne; e++) {
                u64 h = key_hash(words + e * t->stride, L->mask, nk);
                Py_ssize_t j = (Py_ssize_t)(h & (u64)(cap - 1));
                while (L->slots[j] >= 0) j = (j + 1) & (cap - 1);
                L->slots[j] = (int32_t)e;
            }
            t->nlevels = l + 1;
        }
    }
    PyMem_Free(lv);
    Py_RETURN_NONE;
}

/* mc_load(ctx, [mgid, n, port, rid, ..., mgid, n, ...]): replaces every group */
static PyObject *m_mc_load(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    if (n != 2) { PyErr_SetString(PyExc_TypeError, "mc_load(ctx, words)"); return NULL; }
    Ctx *c = get_ctx(args[0]);
    if (!c) return NULL;
    u64 *w; Py_ssize_t nw;
    if (list_words(args[1], &w, &nw) < 0) return NULL;
    for (int g = 0; g <= MAX_MGID; g++) if (c->groups[g]) { PyMem_Free(c->groups[g]->pr); PyMem_Free(c->groups[g]); c->groups[g] = NULL; }
    for (Py_ssize_t i = 0; i + 1 < nw;) {
        u64 mg = w[i], cnt = w[i + 1];
        i += 2;
        if (mg == 0 || mg > MAX_MGID || i + 2 * (Py_ssize_t)cnt > nw) break;
        Group *g = (Group *)PyMem_Malloc(sizeof(Group));
        g->n = (int)cnt;
        g->pr = (int32_t *)PyMem_Malloc(sizeof(int32_t) * 2 * (size_t)(cnt ? cnt : 1));
        for (u64 k = 0; k < 2 * cnt; k++) g->pr[k] = (int32_t)w[i + (Py_ssize_t)k];
        i += 2 * (Py_ssize_t)cnt;
        c->groups[mg] = g;
    }
    PyMem_Free(w);
    Py_RETURN_NONE;
}

/* set_misc(ctx, drop_port, randint, getrandbits, digest_or_None) */
static PyObject *m_set_misc(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    if (n != 5) { PyErr_SetString(PyExc_TypeError, "set_misc takes 5 arguments"); return NULL; }
    Ctx *c = get_ctx(args[0]);
    if (!c) return NULL;
    c->drop_port = PyLong_AsUnsignedLongLongMask(args[1]);
    Py_XDECREF(c->randint); Py_XDECREF(c->getrandbits); Py_XDECREF(c->digest);
    Py_INCREF(args[2]); Py_INCREF(args[3]); Py_INCREF(args[4]);
    c->randint = args[2]; c->getrandbits = args[3]; c->digest = args[4];
    Py_RETURN_NONE;
}

/* process(ctx, port, frame: bytes, now_us, out: list) -> status */
static PyObject *m_process(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    if (n != 5 || !PyBytes_Check(args[2]) || !PyList_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError, "process(ctx, port, bytes, now, list)"); return NULL;
    }
    Ctx *c = get_ctx(args[0]);
    if (!c) return NULL;
    u64 port = PyLong_AsUnsignedLongLongMask(args[1]);
    u64 now = PyLong_AsUnsignedLongLongMask(args[3]);
    int st = process_pkt(c, port, (const u8 *)PyBytes_AS_STRING(args[2]), PyBytes_GET_SIZE(args[2]), now, args[4]);
    if (st == ST_PYERR) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "native: callback failed");
        return NULL;
    }
    return PyLong_FromLong(st);
}

/* The C port loop's entry (nsio.h): one frame, outputs to `sink` instead of a list. */
static int io_process(void *vc, uint64_t port, const uint8_t *data, Py_ssize_t len,
                      uint64_t now, NsSink *sink) {
    Ctx *c = (Ctx *)vc;
    c->sink = sink;
    int st = process_pkt(c, port, data, len, now, NULL);
    c->sink = NULL;
    return st;
}

static void pipe_free(PyObject *cap) {
    PyMem_Free(PyCapsule_GetPointer(cap, "netsum.native.pipe"));
    Py_XDECREF((PyObject *)PyCapsule_GetContext(cap));
}

/* pipe(ctx) -> capsule "netsum.native.pipe" holding an NsPipe; it keeps ctx alive. */
static PyObject *m_pipe(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    if (n != 1) { PyErr_SetString(PyExc_TypeError, "pipe(ctx)"); return NULL; }
    Ctx *c = get_ctx(args[0]);
    if (!c) return NULL;
    NsPipe *p = (NsPipe *)PyMem_Malloc(sizeof(NsPipe));
    if (!p) return PyErr_NoMemory();
    p->abi = NS_ABI; p->ctx = c; p->process = io_process;
    PyObject *cap = PyCapsule_New(p, "netsum.native.pipe", pipe_free);
    if (!cap) { PyMem_Free(p); return NULL; }
    Py_INCREF(args[0]);
    if (PyCapsule_SetContext(cap, args[0]) < 0) { Py_DECREF(args[0]); Py_DECREF(cap); return NULL; }
    return cap;
}

static PyObject *m_take_stats(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    if (n != 1) { PyErr_SetString(PyExc_TypeError, "take_stats(ctx)"); return NULL; }
    Ctx *c = get_ctx(args[0]);
    if (!c) return NULL;
    PyObject *t = PyTuple_New(S_COUNT);
    if (!t) return NULL;
    for (int i = 0; i < S_COUNT; i++) { PyTuple_SET_ITEM(t, i, PyLong_FromUnsignedLongLong(c->stats[i])); c->stats[i] = 0; }
    return t;
}

static PyMethodDef methods[] = {
    {"new", (PyCFunction)(void (*)(void))m_new, METH_FASTCALL, "new context"},
    {"bind_reg", (PyCFunction)(void (*)(void))m_bind_reg, METH_FASTCALL, "bind register storage"},
    {"bind_ctr", (PyCFunction)(void (*)(void))m_bind_ctr, METH_FASTCALL, "bind counter storage"},
    {"table_load", (PyCFunction)(void (*)(void))m_table_load, METH_FASTCALL, "load a table"},
    {"mc_load", (PyCFunction)(void (*)(void))m_mc_load, METH_FASTCALL, "load multicast groups"},
    {"set_misc", (PyCFunction)(void (*)(void))m_set_misc, METH_FASTCALL, "drop port, callbacks"},
    {"process", (PyCFunction)(void (*)(void))m_process, METH_FASTCALL, "run one packet"},
    {"pipe", (PyCFunction)(void (*)(void))m_pipe, METH_FASTCALL, "the C port loop's entry"},
    {"take_stats", (PyCFunction)(void (*)(void))m_take_stats, METH_FASTCALL, "stats since last call"},
    {NULL, NULL, 0, NULL}
};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, MODNAME, NULL, -1, methods};

PyMODINIT_FUNC MODINIT(void) {
    init_crc_tables();
    return PyModule_Create(&moddef);
}
