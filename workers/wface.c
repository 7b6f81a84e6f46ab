/* The Python face of the compiled worker core (workers/wcore.c, compiled right before this
 * file into the same module; workers/native.py drives it): new() over the Python core's
 * buffers, config, the output rows, start / receive / tick, the next deadline, the counters,
 * the slots' state for the reference's messages, and the STATUS hook of the held timers. */

static void core_free(PyObject *cap) {
    Core *c = PyCapsule_GetPointer(cap, "netsum.wcore");
    if (!c) return;
    for (int j = 0; j < NBUF; j++)
        if (c->held[j]) PyBuffer_Release(&c->buf[j]);
    if (c->out_held) PyBuffer_Release(&c->outb);
    free(c->s); free(c->pending); free(c->flying); free(c->uq); free(c->due);
    free(c);
}

static Core *get(PyObject *cap) {
    return PyCapsule_GetPointer(cap, "netsum.wcore");
}

static PyObject *w_new(PyObject *self, PyObject *args) {
    (void)self;
    Core *c = calloc(1, sizeof(Core));
    if (!c) return PyErr_NoMemory();
    PyObject *rounds;
    long long stride, hr, w, nb, k, job_id, shift, adaptive, initial_window, window_min, fr;
    long long dst_b0, dst_len, spec, slack;
    if (!PyArg_ParseTuple(args, "w*y*y*y*y*y*y*w*w*w*w*w*y*w*OLLLLLLLddddLLLLLLLL",
                          &c->buf[B_TX], &c->buf[B_ROWS], &c->buf[B_OFFSETS], &c->buf[B_DESTS],
                          &c->buf[B_NF], &c->buf[B_MINE], &c->buf[B_PROPS], &c->buf[B_AGREED],
                          &c->buf[B_MAXIMA], &c->buf[B_RFLAGS], &c->buf[B_LAT], &c->buf[B_DST],
                          &c->buf[B_PRED], &c->buf[B_TRIED], &rounds,
                          &stride, &hr, &w, &nb, &k, &job_id, &shift,
                          &c->rto_initial, &c->rto_min, &c->rto_max, &c->backoff, &adaptive,
                          &initial_window, &window_min, &fr, &dst_b0, &dst_len, &spec,
                          &slack)) {
        free(c);
        return NULL;
    }
    /* from here on core_free releases what was taken */
    for (int j = 0; j < NBUF; j++) c->held[j] = 1;
    PyObject *cap = PyCapsule_New(c, "netsum.wcore", core_free);
    if (!cap) {
        for (int j = 0; j < NBUF; j++) PyBuffer_Release(&c->buf[j]);
        free(c);
        return NULL;
    }
    c->stride = stride; c->hr = hr; c->w = w; c->nb = nb; c->k = k; c->job_id = job_id;
    c->shift = shift; c->adaptive = (int)adaptive; c->window_min = window_min; c->fr = fr;
    c->dst_b0 = dst_b0; c->dst_len = dst_len; c->zero_bad = c->inf_at = -1;
    c->spec = spec != 0; c->slack = (int)slack;
    if (c->buf[B_TX].len < w * stride || c->buf[B_ROWS].len < (Py_ssize_t)(nb * k * 4) ||
        c->buf[B_OFFSETS].len < nb * 4 || c->buf[B_DESTS].len < nb || c->buf[B_NF].len < nb ||
        c->buf[B_MINE].len < nb || c->buf[B_PROPS].len < nb || c->buf[B_AGREED].len < nb ||
        c->buf[B_MAXIMA].len < nb || c->buf[B_RFLAGS].len < nb || c->buf[B_LAT].len < nb * 8 ||
        c->buf[B_PRED].len < nb || c->buf[B_TRIED].len < nb || slack < 0 || slack > 255 ||
        dst_len < 0 || dst_b0 < 0 || c->buf[B_DST].len < dst_len * 4 ||
        !PyList_Check(rounds) ||
        PyList_GET_SIZE(rounds) < w || w < 1 || k < 1 || w > (1 << SLOT_BITS)) {
        Py_DECREF(cap);
        PyErr_SetString(PyExc_ValueError, "wcore.new: buffers do not match the window");
        return NULL;
    }
    c->tx = c->buf[B_TX].buf;
    c->rows = c->buf[B_ROWS].buf;
    c->offsets = c->buf[B_OFFSETS].buf;
    c->dests = c->buf[B_DESTS].buf;
    c->nf = c->buf[B_NF].buf;
    c->mine = c->buf[B_MINE].buf;
    c->props = c->buf[B_PROPS].buf;
    c->agreed = c->buf[B_AGREED].buf;
    c->maxima = c->buf[B_MAXIMA].buf;
    c->pred = c->buf[B_PRED].buf;
    c->tried = c->buf[B_TRIED].buf;
    c->rflags = c->buf[B_RFLAGS].buf;
    c->lat = c->buf[B_LAT].buf;
    c->dst = c->buf[B_DST].buf;
    for (int64_t b = 0; b < nb; b++)   /* every block this rank keeps lies inside dst */
        if (c->mine[b] && (b < dst_b0 || (b - dst_b0) * k >= dst_len)) {
            Py_DECREF(cap);
            PyErr_SetString(PyExc_ValueError, "wcore.new: a kept block lies outside dst");
            return NULL;
        }
    c->s = calloc(w, sizeof(Slot));
    c->pending = malloc(sizeof(int64_t) * (w + 1));
    c->fly_cap = 4 * w + 4;
    c->flying = malloc(sizeof(int64_t) * c->fly_cap);
    c->uq_cap = 4 * w + 4;
    c->uq = malloc(sizeof(int64_t) * c->uq_cap);
    c->due = malloc(sizeof(int64_t) * w);
    if (!c->s || !c->pending || !c->flying || !c->uq || !c->due) {
        Py_DECREF(cap);
        return PyErr_NoMemory();
    }
    for (int64_t i = 0; i < w; i++) {
        Slot *s = &c->s[i];
        s->cur_block = IDLE;
        s->acc_round = s->acc_offset = -1;
        s->rto = c->rto_initial;
        s->timer = INFINITY;
        s->next_round = (uint32_t)PyLong_AsUnsignedLongMask(PyList_GET_ITEM(rounds, i));
    }
    if (PyErr_Occurred()) { Py_DECREF(cap); return NULL; }
    c->cwnd = (double)(adaptive ? (initial_window < w ? initial_window : w) : w);
    c->ssthresh = (double)w;
    c->last_cut = -INFINITY;
    c->min_rtt = INFINITY;
    c->base_rto = c->rto_initial;
    c->tmin = INFINITY;
    c->gate = c->free_until = -INFINITY;
    c->probe = -1;
    c->gap_seq = -1;
    c->deadline_at = INFINITY;
    return cap;
}

/* The (capsule, float) arguments of start and tick. */
static Core *core_and_float(PyObject *args, double *v) {
    PyObject *cap;
    if (!PyArg_ParseTuple(args, "Od", &cap, v)) return NULL;
    return get(cap);
}

static PyObject *w_config(PyObject *self, PyObject *args) {
    /* (capsule, progress_deadline[, dst[, hold]]): set apart from new() for the format's
     * length; dst, a writable buffer of at least dst_len float32, replaces the output (before
     * start: NativeCore.write_into); hold (0 or 1; -1: as it is): Timing.hold_timers */
    (void)self;
    PyObject *cap, *dst = Py_None;
    double d;
    int hold = -1;
    if (!PyArg_ParseTuple(args, "Od|Oi", &cap, &d, &dst, &hold)) return NULL;
    Core *c = get(cap);
    if (!c) return NULL;
    if (hold >= 0) c->free_until = hold ? -INFINITY : INFINITY;
    if (dst != Py_None) {
        Py_buffer b;
        if (PyObject_GetBuffer(dst, &b, PyBUF_WRITABLE) < 0) return NULL;
        if (b.len < c->dst_len * 4) {
            PyBuffer_Release(&b);
            PyErr_SetString(PyExc_ValueError, "wcore.config: dst too short");
            return NULL;
        }
        PyBuffer_Release(&c->buf[B_DST]);
        c->buf[B_DST] = b;
        c->dst = b.buf;
    }
    c->deadline = d;
    Py_RETURN_NONE;
}

static PyObject *w_set_out(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap;
    Py_buffer b;
    long long n;
    if (!PyArg_ParseTuple(args, "Ow*L", &cap, &b, &n)) return NULL;
    Core *c = get(cap);
    if (!c || b.len < n * c->stride) {
        PyBuffer_Release(&b);
        if (c) PyErr_SetString(PyExc_ValueError, "wcore.set_out: buffer too short");
        return NULL;
    }
    if (c->out_held) PyBuffer_Release(&c->outb);
    c->outb = b;
    c->out_held = 1;
    c->out = b.buf;
    c->cap = n;
    Py_RETURN_NONE;
}

static PyObject *w_start(PyObject *self, PyObject *args) {
    (void)self;
    double now;
    Core *c = core_and_float(args, &now);
    if (!c) return NULL;
    c->nout = 0;
    c->running = 1;
    c->started = c->progress = now;
    c->deadline_at = now + c->deadline;
    for (int64_t i = 0; i < c->w; i++) {
        c->s[i].cur_round = c->s[i].next_round;
        /* ascending: already a heap; speculation: the blocks themselves, no bootstrap */
        c->pending[i] = c->spec ? i : i - c->w;
    }
    c->npending = c->w;
    c->active = c->w;
    c->gate = now + c->base_rto;       /* LossRecovery.start */
    int r = pump(c, now);
    return Py_BuildValue("(iL)", r, (long long)c->nout);
}

/* receive(capsule, payloads, first, n, now, cont) -> (code, index, frames out) */
static PyObject *w_receive(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap, *seq;
    Py_ssize_t first, n;
    double now;
    int cont;
    if (!PyArg_ParseTuple(args, "OOnndp", &cap, &seq, &first, &n, &now, &cont)) return NULL;
    Core *c = get(cap);
    if (!c) return NULL;
    if (!PySequence_Check(seq)) {
        PyErr_SetString(PyExc_TypeError, "wcore.receive: payloads must be a sequence");
        return NULL;
    }
    if (!cont) c->nout = 0;
    int r = OK;
    Py_ssize_t j = first;
    for (; j < n; j++) {
        PyObject *item = PySequence_GetItem(seq, j);
        if (!item) return NULL;
        Py_buffer b;
        if (PyObject_GetBuffer(item, &b, PyBUF_SIMPLE) < 0) {
            Py_DECREF(item);
            return NULL;
        }
        r = take(c, b.buf, b.len, now);
        PyBuffer_Release(&b);
        Py_DECREF(item);
        if (r) break;
    }
    return Py_BuildValue("(inL)", r, j, (long long)c->nout);
}

static PyObject *w_tick(PyObject *self, PyObject *args) {
    (void)self;
    double now;
    Core *c = core_and_float(args, &now);
    if (!c) return NULL;
    c->nout = 0;
    int r = OK;
    if (c->running) {
        if (now >= c->deadline_at) r = TIMEOUT;
        else if (now >= next_timer(c)) r = expire(c, now, c->due);
    }
    return Py_BuildValue("(iL)", r, (long long)c->nout);
}

static PyObject *w_deadline(PyObject *self, PyObject *cap) {
    (void)self;
    Core *c = get(cap);
    if (!c) return NULL;
    if (!c->running) Py_RETURN_NONE;
    double t = next_timer(c);
    return PyFloat_FromDouble(t < c->deadline_at ? t : c->deadline_at);
}

/* status(capsule, slot, round): a STATUS for that use (LossRecovery.status): the switch holds
 * this worker's copy, so its answer shows no loss (until it is sent again). */
static PyObject *w_status(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap;
    long long slot, round;
    if (!PyArg_ParseTuple(args, "OLL", &cap, &slot, &round)) return NULL;
    Core *c = get(cap);
    if (!c) return NULL;
    if (slot >= 0 && slot < c->w && c->s[slot].cur_block != IDLE &&
        (long long)c->s[slot].cur_round == round)
        c->s[slot].held = 1;
    Py_RETURN_NONE;
}

static PyObject *w_counters(PyObject *self, PyObject *cap) {
    (void)self;
    Core *c = get(cap);
    if (!c) return NULL;
    return Py_BuildValue("(LLLLLLLLLiidddLLLLLLd)", (long long)c->sent, (long long)c->retx,
                         (long long)c->boot, (long long)c->results, (long long)c->dups,
                         (long long)c->stale, (long long)c->chunks, (long long)c->fast,
                         (long long)c->misses,
                         c->running, c->done, c->started, c->finished, c->progress,
                         (long long)c->err_a, (long long)c->err_b, (long long)c->err_c,
                         (long long)c->spurious, (long long)c->zero_bad,
                         (long long)c->inf_at, c->inf_val);
}

static PyObject *w_slots(PyObject *self, PyObject *cap) {
    (void)self;
    Core *c = get(cap);
    if (!c) return NULL;
    PyObject *cb = PyList_New(c->w), *cr = PyList_New(c->w), *wo = PyList_New(c->w),
             *nr = PyList_New(c->w);
    if (!cb || !cr || !wo || !nr) goto fail;
    for (int64_t i = 0; i < c->w; i++) {
        PyList_SET_ITEM(cb, i, PyLong_FromLongLong(c->s[i].cur_block));
        PyList_SET_ITEM(cr, i, PyLong_FromUnsignedLong(c->s[i].cur_round));
        PyList_SET_ITEM(wo, i, PyLong_FromUnsignedLong(c->s[i].want_offset));
        PyList_SET_ITEM(nr, i, PyLong_FromUnsignedLong(c->s[i].next_round));
    }
    return Py_BuildValue("(NNNN)", cb, cr, wo, nr);
fail:
    Py_XDECREF(cb); Py_XDECREF(cr); Py_XDECREF(wo); Py_XDECREF(nr);
    return NULL;
}

/* The module's method table and init are at the end of wio.c (appended to this file). */
