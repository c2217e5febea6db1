/* Run-time support of the p4json C backend, pasted into every generated module (see
 * switch/p4json/cgen.py). Values are unsigned __int128; fields are read and written MSB
 * first at bit offsets of wire images; table lookups read the engine's Python objects
 * (dicts of entries, lists of prefix lengths); counters and registers are the engine's
 * unsigned 64-bit arrays, written in place. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef unsigned __int128 u128;
#define P4_MAX_HDR 1024 /* bytes of one header image (checked by the generator) */

static const uint8_t p4_zero[P4_MAX_HDR];
static PyObject *s_action, *s_args, *s_member, *s_group, *s_choices, *s_members, *s_default;
static PyObject *s_counter;

static inline uint64_t p4_bits64(const uint8_t *p, unsigned off, unsigned width) {
    unsigned first = off >> 3, last = (off + width + 7) >> 3;
    u128 acc = 0;
    for (unsigned i = first; i < last; i++) acc = (acc << 8) | p[i];
    acc >>= (last << 3) - (off + width);
    return (uint64_t)(width == 64 ? acc : acc & (((u128)1 << width) - 1));
}

static inline u128 p4_bits(const uint8_t *p, unsigned off, unsigned width) {
    if (width <= 64) return p4_bits64(p, off, width);
    return ((u128)p4_bits64(p, off, width - 64) << 64) | p4_bits64(p, off + width - 64, 64);
}

static inline void p4_put64(uint8_t *p, unsigned off, unsigned width, uint64_t v) {
    unsigned first = off >> 3, last = (off + width + 7) >> 3;
    unsigned shift = (last << 3) - (off + width);
    u128 acc = 0;
    for (unsigned i = first; i < last; i++) acc = (acc << 8) | p[i];
    u128 mask = (width == 64 ? ~(u128)0 >> 64 : (((u128)1 << width) - 1)) << shift;
    acc = (acc & ~mask) | (((u128)v << shift) & mask);
    for (unsigned i = last; i-- > first;) { p[i] = (uint8_t)acc; acc >>= 8; }
}

static inline void p4_put(uint8_t *p, unsigned off, unsigned width, u128 v) {
    if (width <= 64) { p4_put64(p, off, width, (uint64_t)v); return; }
    p4_put64(p, off, width - 64, (uint64_t)(v >> 64));
    p4_put64(p, off + width - 64, 64, (uint64_t)v);
}

static inline u128 p4_mask(unsigned width) {
    return width >= 128 ? ~(u128)0 : (((u128)1 << width) - 1);
}

/* bits [bit, bit + width) of the frame; bits past its end read as 0 (select lookahead) */
static inline u128 p4_peek(const uint8_t *p, Py_ssize_t len, Py_ssize_t bit, unsigned width) {
    uint8_t tmp[40];
    Py_ssize_t first = bit >> 3, n = ((bit + width + 7) >> 3) - first;
    if (n > (Py_ssize_t)sizeof tmp) return 0;
    for (Py_ssize_t i = 0; i < n; i++) tmp[i] = first + i < len ? p[first + i] : 0;
    return p4_bits(tmp, (unsigned)(bit & 7), width);
}

static inline PyObject *p4_pylong(u128 v) {
    if ((v >> 64) == 0) return PyLong_FromUnsignedLongLong((unsigned long long)v);
    uint8_t buf[16];
    for (int i = 0; i < 16; i++) { buf[i] = (uint8_t)v; v >>= 8; }
    return _PyLong_FromByteArray(buf, 16, 1, 0);
}

/* an int the engine stored (always non-negative and within 128 bits) */
static inline u128 p4_u128(PyObject *o) {
    int overflow = 0;
    long long s = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (!overflow && s >= 0) return (u128)(unsigned long long)s;
    uint8_t buf[16] = {0};
    if (_PyLong_AsByteArray((PyLongObject *)o, buf, 16, 1, 0) < 0) { PyErr_Clear(); return 0; }
    u128 v = 0;
    for (int i = 15; i >= 0; i--) v = (v << 8) | buf[i];
    return v;
}

static inline PyObject *p4_get1(PyObject *dict, u128 key) {
    PyObject *k = p4_pylong(key);
    if (k == NULL) return NULL;
    PyObject *e = PyDict_GetItemWithError(dict, k);
    Py_DECREF(k);
    return e;
}

static inline PyObject *p4_tuple(int n, const u128 *vals) {
    PyObject *t = PyTuple_New(n);
    if (t == NULL) return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *o = p4_pylong(vals[i]);
        if (o == NULL) { Py_DECREF(t); return NULL; }
        PyTuple_SET_ITEM(t, i, o);
    }
    return t;
}

static inline PyObject *p4_getn(PyObject *dict, int n, const u128 *vals) {
    PyObject *k = p4_tuple(n, vals);
    if (k == NULL) return NULL;
    PyObject *e = PyDict_GetItemWithError(dict, k);
    Py_DECREF(k);
    return e;
}

/* longest prefix first: lens is the table's list of prefix lengths, by_len its dicts */
static inline PyObject *p4_lpm1(PyObject *by_len, PyObject *lens, unsigned width, u128 key) {
    Py_ssize_t n = PyList_GET_SIZE(lens);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pl = PyList_GET_ITEM(lens, i);
        long plen = PyLong_AsLong(pl);
        PyObject *bucket = PyDict_GetItemWithError(by_len, pl);
        if (bucket == NULL) { if (PyErr_Occurred()) return NULL; continue; }
        u128 m = plen == 0 ? 0 : (p4_mask((unsigned)plen) << (width - (unsigned)plen));
        PyObject *e = p4_get1(bucket, key & m);
        if (e != NULL || PyErr_Occurred()) return e;
    }
    return NULL;
}

/* a Python lookup method of the table (ternary / range / multi-field LPM) on the tuple of
 * key values: new reference */
static inline PyObject *p4_call(PyObject *table, PyObject *method, int n, const u128 *vals) {
    PyObject *arg = p4_tuple(n, vals);
    if (arg == NULL) return NULL;
    PyObject *e = PyObject_CallMethodOneArg(table, method, arg);
    Py_DECREF(arg);
    return e;
}

/* (action id, args tuple) pair of a call; aid -1 when absent. Borrowed args. */
static inline int p4_call_of(PyObject *call, long *aid, PyObject **args) {
    if (call == NULL || call == Py_None || !PyTuple_Check(call) || PyTuple_GET_SIZE(call) != 2) {
        *aid = -1; *args = NULL; return 0;
    }
    PyObject *a = PyTuple_GET_ITEM(call, 0);
    *aid = a == Py_None ? -1 : PyLong_AsLong(a);
    *args = PyTuple_GET_ITEM(call, 1);
    return 0;
}

static inline u128 p4_arg(PyObject *args, Py_ssize_t i) {
    if (args == NULL || !PyTuple_Check(args) || i >= PyTuple_GET_SIZE(args)) return 0;
    return p4_u128(PyTuple_GET_ITEM(args, i));
}

/* ---- calculation input: bits appended MSB first, zero padded at the end ---------------- */
typedef struct { uint8_t buf[512]; unsigned bits; int overflow; } p4_bitbuf;

static inline void p4_append(p4_bitbuf *b, unsigned width, u128 v) {
    if (b->bits + width > 8 * sizeof b->buf) { b->overflow = 1; return; }
    unsigned from = (b->bits + 7) >> 3; /* a partly filled byte keeps its bits */
    memset(b->buf + from, 0, ((b->bits + width + 7) >> 3) - from);
    if (b->bits & 7) b->buf[b->bits >> 3] &= (uint8_t)(0xFF00 >> (b->bits & 7));
    p4_put(b->buf, b->bits, width, v & p4_mask(width));
    b->bits += width;
}

static inline void p4_append_bytes(p4_bitbuf *b, const uint8_t *p, unsigned n) {
    if (b->bits + 8 * n > 8 * sizeof b->buf) { b->overflow = 1; return; }
    if (b->bits & 7) {
        for (unsigned i = 0; i < n; i++) p4_append(b, 8, p[i]);
        return;
    }
    memcpy(b->buf + (b->bits >> 3), p, n);
    b->bits += 8 * n;
}

static uint16_t p4_crc16_table[256];
static uint32_t p4_crc32_table[256];
static uint16_t p4_ccitt_table[256];

static void p4_tables_init(void) {
    for (unsigned i = 0; i < 256; i++) {
        uint16_t c = (uint16_t)i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0xA001 : c >> 1;
        p4_crc16_table[i] = c;
        uint32_t d = i;
        for (int k = 0; k < 8; k++) d = (d & 1) ? (d >> 1) ^ 0xEDB88320u : d >> 1;
        p4_crc32_table[i] = d;
        uint16_t e = (uint16_t)(i << 8);
        for (int k = 0; k < 8; k++) e = (e & 0x8000) ? (uint16_t)((e << 1) ^ 0x1021) : (uint16_t)(e << 1);
        p4_ccitt_table[i] = e;
    }
}

static inline u128 p4_hash(int algo, const uint8_t *p, size_t n) {
    switch (algo) {
    case 0: { /* crc16: CRC-16/ARC */
        uint16_t c = 0;
        for (size_t i = 0; i < n; i++) c = (uint16_t)((c >> 8) ^ p4_crc16_table[(c ^ p[i]) & 0xFF]);
        return c;
    }
    case 1: { /* crc32 */
        uint32_t c = 0xFFFFFFFFu;
        for (size_t i = 0; i < n; i++) c = (c >> 8) ^ p4_crc32_table[(c ^ p[i]) & 0xFF];
        return c ^ 0xFFFFFFFFu;
    }
    case 2: { /* crcCCITT: CRC-16/CCITT-FALSE */
        uint16_t c = 0xFFFF;
        for (size_t i = 0; i < n; i++) c = (uint16_t)((c << 8) ^ p4_ccitt_table[((c >> 8) ^ p[i]) & 0xFF]);
        return c;
    }
    case 3: { /* csum16 / cksum16: the Internet checksum */
        uint64_t s = 0;
        for (size_t i = 0; i + 1 < n; i += 2) s += (uint64_t)(p[i] << 8 | p[i + 1]);
        if (n & 1) s += (uint64_t)p[n - 1] << 8;
        while (s >> 16) s = (s & 0xFFFF) + (s >> 16);
        return (~s) & 0xFFFF;
    }
    case 4: { /* identity: the first (at most) 8 bytes */
        uint64_t v = 0;
        for (size_t i = 0; i < n && i < 8; i++) v = (v << 8) | p[i];
        return v;
    }
    case 5: case 6: { /* xor16, xor32 */
        size_t w = algo == 5 ? 2 : 4;
        uint64_t x = 0;
        for (size_t i = 0; i < n; i += w) {
            uint64_t word = 0;
            for (size_t j = 0; j < w; j++) word = (word << 8) | (i + j < n ? p[i + j] : 0);
            x ^= word;
        }
        return x;
    }
    }
    return 0;
}

static inline u128 p4_hash_buf(int algo, p4_bitbuf *b) {
    return p4_hash(algo, b->buf, (b->bits + 7) >> 3);
}

/* a writable view of an array('Q'), kept for the state's lifetime: while it is held the
 * array cannot be resized (BufferError), so the cell pointer stays valid */
static int p4_buffer(PyObject *obj, Py_buffer *view, uint64_t **cells, Py_ssize_t *n) {
    if (PyObject_GetBuffer(obj, view, PyBUF_WRITABLE | PyBUF_FORMAT) < 0) return -1;
    if (view->itemsize != 8 || view->format == NULL || strcmp(view->format, "Q") != 0) {
        PyBuffer_Release(view);
        view->obj = NULL;
        PyErr_SetString(PyExc_TypeError, "counter/register cells must be array('Q')");
        return -1;
    }
    *cells = (uint64_t *)view->buf;
    *n = view->len / 8;
    return 0;
}

static inline void p4_release(Py_buffer *view) {
    if (view->obj != NULL) PyBuffer_Release(view);
}

static int p4_strings(void) {
#define P4_S(v, s) if ((v = PyUnicode_InternFromString(s)) == NULL) return -1
    P4_S(s_action, "action"); P4_S(s_args, "args"); P4_S(s_member, "member");
    P4_S(s_group, "group"); P4_S(s_choices, "choices"); P4_S(s_members, "members");
    P4_S(s_default, "default"); P4_S(s_counter, "counter");
#undef P4_S
    return 0;
}

/* an attribute holding a small int or None (entry.member / entry.group): -1 for None */
static inline long p4_attr_long(PyObject *o, PyObject *name) {
    PyObject *v = PyObject_GetAttr(o, name);
    if (v == NULL) { PyErr_Clear(); return -1; }
    long r = v == Py_None ? -1 : PyLong_AsLong(v);
    Py_DECREF(v);
    return r;
}
