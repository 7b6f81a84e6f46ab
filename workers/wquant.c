/* Per-value passes of a call's set-up in C (workers/native.py builds this as a module of its
 * own, next to wcore.c's): what NativeCore computes over the whole input before it sends.
 *
 * proposals(rows, k, props) -> -1, or the index in rows of the first NaN/Inf
 *   One pass over the (nb, k) float32 rows: per block the biased exponent proposal of
 *   quant.block_exponents (the least e with 2^e >= max|x|, clamped to [-126, 128], biased
 *   by 127; EXP_ZERO = 0 for an all-zero block) into props (nb bytes), and the finiteness
 *   check, whose first offending index it returns (the caller raises NonFiniteError with
 *   that element's value, as the reference does).
 *
 * Everything is integer arithmetic on the float's bits: |x| is bits & 0x7fffffff, whose
 * integer order is the order of the magnitudes (and puts Inf and NaN above every finite
 * value), so a block's peak is an integer max the compiler vectorises.  From the peak's
 * exponent field F and fraction f: 0 for a zero block; a subnormal peak (F = 0) is below
 * 2^-126, so clamped to 1; else 2^(F-127) * 1.f needs e = F - 127 when f = 0 and one more
 * otherwise, i.e. biased F + (f != 0) (at most 255). */
#include <stdint.h>
#include <string.h>

#define NONFINITE_BITS 0x7f800000u

static int64_t proposals(const uint32_t *restrict x, int64_t nb, int64_t k,
                         uint8_t *restrict props) {
    for (int64_t b = 0; b < nb; b++) {
        const uint32_t *row = x + b * k;
        uint32_t peak = 0;
        for (int64_t j = 0; j < k; j++) {
            uint32_t a = row[j] & 0x7fffffffu;
            peak = a > peak ? a : peak;
        }
        if (peak >= NONFINITE_BITS) {
            for (int64_t j = 0; j < k; j++)
                if ((row[j] & 0x7fffffffu) >= NONFINITE_BITS) return b * k + j;
        }
        uint32_t field = peak >> 23, frac = peak & 0x7fffffu;
        props[b] = peak == 0 ? 0 : field == 0 ? 1 : (uint8_t)(field + (frac != 0));
    }
    return -1;
}

static PyObject *q_proposals(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer rows, props;
    long long k;
    if (!PyArg_ParseTuple(args, "y*Lw*", &rows, &k, &props)) return NULL;
    int64_t nb = k > 0 ? (int64_t)(rows.len / 4) / k : 0;
    if (k < 1 || rows.len != nb * k * 4 || props.len < nb) {
        PyBuffer_Release(&rows);
        PyBuffer_Release(&props);
        PyErr_SetString(PyExc_ValueError, "wquant.proposals: rows must be (nb, k) float32 "
                        "and props nb bytes");
        return NULL;
    }
    int64_t bad;
    Py_BEGIN_ALLOW_THREADS
    bad = proposals(rows.buf, nb, k, props.buf);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&rows);
    PyBuffer_Release(&props);
    return PyLong_FromLongLong(bad);
}

static PyMethodDef qmethods[] = {
    {"proposals", q_proposals, METH_VARARGS,
     "(rows, k, props) -> -1 or the first NaN/Inf's index: exponent proposals per block"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef qmoddef = {PyModuleDef_HEAD_INIT, MODNAME, NULL, -1, qmethods,
                                     NULL, NULL, NULL, NULL};

PyMODINIT_FUNC MODINIT(void) { return PyModule_Create(&qmoddef); }
