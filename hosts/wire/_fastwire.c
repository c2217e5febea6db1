/* C fast path of the MRC wire codec (hosts/wire/codec.py stays the reference).
 *
 * A small table-driven interpreter: it knows no header layout. hosts/wire/fastpath.py
 * compiles the layout tables (hosts/wire/layout.py) into one program per header stack and
 * hands them to configure() at import. A program lists field operations: the struct word
 * that holds a field (byte offset and size in the stack), the field's shift and width, its
 * kind, the object and slot the value lives in, where an encoded value comes from and what a
 * decoded value must equal.
 *
 * Scope: the valid common case. Anything else (bad lengths, unknown opcodes, wrong types,
 * a bad ICRC, unusual arguments) makes the C code give up *before* it changes anything and
 * call the Python reference with the original arguments, so errors and edge cases are the
 * reference's by construction. The try_* functions return NotImplemented instead (tests).
 *
 * Objects are created with tp_alloc and their slots stored through the member offsets of the
 * slots dataclasses, like object.__new__ plus slot stores in the Python decoder.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

enum { K_U, K_S, K_F, K_B, K_O, K_COUNT };
enum { SRC_NONE, SRC_SLOT, SRC_CONST, SRC_REG, SRC_COUNT };
/* Length registers: filled by decoded fields (op.reg), read by encoded ones (SRC_REG). */
enum { R_ULEN, R_PLEN, R_PAD, R_TSH, R_NH, R_EXTLEN, R_LEFT, R_LAST, NREG };
/* Stack tables, plus the two SRv6 outer programs (Ethernet + outer IPv6, SRH fixed part). */
enum { T_ETH, T_INNER, T_PACKET, NTABLE, T_OUTER = NTABLE, T_SRH };
enum { F_ENCODE_FRAME, F_DECODE_FRAME, F_ENCODE_PACKET, F_DECODE_PACKET, NFUNC };

#define MAXOBJ 8
#define MAXOPS 64
#define MAXNONE 16
#define MAXMASK 64
#define NKEYS 512
#define CRC_CALL_MIN 256 /* shorter runs: table CRC here; longer: the SIMD crc32 callable */

/* Returned by the runners when the Python reference must handle the call. */
#define FALLBACK (-2)
#define OBJ_BTH 2 /* objects: 0 frame, 1 packet, 2 bth, 3.. extension headers */

typedef struct {
    Py_ssize_t off;   /* byte offset of the field's word in the stack */
    int size;         /* word size in bytes (1, 2, 4, 8; byte fields: their length) */
    int shift;        /* lsb of the field within the word */
    int width;        /* bits */
    int kind;         /* K_* */
    int obj;          /* object holding the value, -1: none (checked or derived) */
    Py_ssize_t slot;  /* member offset in that object */
    int src;          /* SRC_*: where the encoder takes the value from */
    uint64_t cval;    /* SRC_CONST value (SRC_REG: the register is reg) */
    int has_expect;   /* decoded value must equal expect */
    uint64_t expect;
    int reg;          /* R_* the decoded value is copied to, -1: none */
    PyObject *last;   /* the last decoded value object, reused while the value repeats */
    uint64_t last_val; /* its value (integer fields) */
} Op;

typedef struct {
    int table;
    int tsh;
    Py_ssize_t size;
    Py_ssize_t ip_at;
    int has_payload;
    PyObject *opcode;                  /* Opcode member of decoded packets */
    int nobj;                          /* 0 frame, 1 packet, 2 bth, 3.. headers */
    PyTypeObject *types[MAXOBJ];
    Py_ssize_t pkt_slot[MAXOBJ];       /* MrcPacket member holding object i (i >= 2) */
    int nnone;
    Py_ssize_t none_slot[MAXNONE];
    int nops;
    Op ops[MAXOPS];
} Program;

static struct {
    int ready;
    PyTypeObject *frame_t, *pkt_t, *bth_t, *srv6_t;
    Py_ssize_t pkt_payload, pkt_trimmed, pkt_bth, pkt_tseth;
    Py_ssize_t bth_pad, bth_tsh, bth_opcode;
    Py_ssize_t frame_srv6, frame_eth_dst, frame_eth_src, srv6_segments, srv6_segments_left;
    Py_ssize_t opcode_byte, tsh_byte, tsh_mask;
    Py_ssize_t bth_len, eth_len, ip_len, ip_nh_byte, udp_len, srh_len, seg_len, icrc_len;
    Py_ssize_t pad_mask, proto_udp, proto_ipv6, proto_routing;
    PyObject *crc32;
    uint32_t seed;
    uint8_t mask[MAXMASK];
    Py_ssize_t mask_len;
    Py_ssize_t srh_unit, max_segments;
    PyObject *ref[NFUNC];
    Program *tables[NTABLE][NKEYS];
    Program *outer, *srh; /* SRv6: Ethernet + outer IPv6; SRH fixed part */
    unsigned long long hits[NFUNC], falls[NFUNC];
    /* C calls running now (nested through the crc32 callable, or in other threads while it
     * runs without the GIL): configure() must not free the programs they execute. */
    int busy;
} G;

static uint32_t crc_tab[8][256];

/* ------------------------------------------------------------------ CRC-32 (IEEE, as zlib) */
static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
        crc_tab[0][i] = c;
    }
    for (int t = 1; t < 8; t++)
        for (int i = 0; i < 256; i++)
            crc_tab[t][i] = (crc_tab[t - 1][i] >> 8) ^ crc_tab[0][crc_tab[t - 1][i] & 0xFF];
}

static inline uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* zlib semantics: crc is the CRC of the bytes before p (0 for none). */
static uint32_t crc_update(uint32_t crc, const uint8_t *p, Py_ssize_t n) {
    crc = ~crc;
    while (n >= 8) {
        uint32_t a = crc ^ le32(p), b = le32(p + 4);
        crc = crc_tab[7][a & 0xFF] ^ crc_tab[6][(a >> 8) & 0xFF] ^ crc_tab[5][(a >> 16) & 0xFF] ^
              crc_tab[4][a >> 24] ^ crc_tab[3][b & 0xFF] ^ crc_tab[2][(b >> 8) & 0xFF] ^
              crc_tab[1][(b >> 16) & 0xFF] ^ crc_tab[0][b >> 24];
        p += 8;
        n -= 8;
    }
    while (n-- > 0)
        crc = (crc >> 8) ^ crc_tab[0][(crc ^ *p++) & 0xFF];
    return ~crc;
}

static PyObject *view_slice(PyObject *view, Py_ssize_t lo, Py_ssize_t hi);

/* CRC of n more bytes at p after crc: the table for short runs, else the SIMD callable.
 * whole: a flat byte memoryview of the buffer p points into (NULL: use the table). The
 * callable gets a read-only slice of it, not a view of raw memory: one it keeps holds an
 * export of the real buffer (which then cannot be resized or freed), like any memoryview. */
static int crc_more(uint32_t crc, PyObject *whole, const uint8_t *p, Py_ssize_t n,
                    uint32_t *out) {
    if (n < CRC_CALL_MIN || G.crc32 == NULL || whole == NULL) {
        *out = crc_update(crc, p, n);
        return 0;
    }
    const Py_buffer *wb = PyMemoryView_GET_BUFFER(whole);
    uintptr_t at = (uintptr_t)p, from = (uintptr_t)wb->buf;
    if (at < from || at - from > (uintptr_t)wb->len || n > wb->len - (Py_ssize_t)(at - from)) {
        *out = crc_update(crc, p, n); /* p is not inside whole: never expected */
        return 0;
    }
    Py_ssize_t lo = (Py_ssize_t)(at - from);
    PyObject *view = view_slice(whole, lo, lo + n);
    if (view == NULL)
        return -1;
    if (!PyMemoryView_Check(view)) {
        Py_DECREF(view);
        PyErr_SetString(PyExc_SystemError, "_fastwire: slicing a memoryview gave no memoryview");
        return -1;
    }
    ((PyMemoryViewObject *)view)->view.readonly = 1; /* a fresh object: nobody shares it */
    PyObject *start = PyLong_FromUnsignedLong(crc);
    if (start == NULL) {
        Py_DECREF(view);
        return -1;
    }
    PyObject *fn = Py_NewRef(G.crc32);
    PyObject *args[2] = {view, start};
    PyObject *res = PyObject_Vectorcall(fn, args, 2, NULL);
    Py_DECREF(fn);
    Py_DECREF(view);
    Py_DECREF(start);
    if (res == NULL)
        return -1;
    unsigned long v = PyLong_AsUnsignedLong(res);
    Py_DECREF(res);
    if (v == (unsigned long)-1 && PyErr_Occurred())
        return -1;
    *out = (uint32_t)v;
    return 0;
}

/* ICRC of base[ip_off:end] with the variant header bits taken as ones (base is not written). */
static int icrc(PyObject *whole, const uint8_t *base, Py_ssize_t ip_off, Py_ssize_t end,
                uint32_t *out) {
    uint8_t hdr[MAXMASK];
    for (Py_ssize_t i = 0; i < G.mask_len; i++)
        hdr[i] = base[ip_off + i] | G.mask[i];
    return crc_more(crc_update(G.seed, hdr, G.mask_len), whole, base + ip_off + G.mask_len,
                    end - ip_off - G.mask_len, out);
}

/* ------------------------------------------------------------------ helpers */
#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

static inline uint64_t width_mask(int width) {
    return width >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << width) - 1);
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && defined(__GNUC__)
#define BE16(x) __builtin_bswap16(x)
#define BE32(x) __builtin_bswap32(x)
#define BE64(x) __builtin_bswap64(x)
#elif defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define BE16(x) (x)
#define BE32(x) (x)
#define BE64(x) (x)
#endif

/* Big-endian word of n bytes (1, 2, 4 or 8). */
static inline uint64_t load_be(const uint8_t *p, int n) {
#ifdef BE64
    switch (n) {
    case 1: return p[0];
    case 2: { uint16_t v; memcpy(&v, p, 2); return BE16(v); }
    case 4: { uint32_t v; memcpy(&v, p, 4); return BE32(v); }
    default: { uint64_t v; memcpy(&v, p, 8); return BE64(v); }
    }
#else
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
#endif
}

/* OR v into the big-endian word of n bytes at p. */
static inline void or_be(uint8_t *p, int n, uint64_t v) {
#ifdef BE64
    switch (n) {
    case 1: p[0] |= (uint8_t)v; return;
    case 2: { uint16_t w; memcpy(&w, p, 2); w |= BE16((uint16_t)v); memcpy(p, &w, 2); return; }
    case 4: { uint32_t w; memcpy(&w, p, 4); w |= BE32((uint32_t)v); memcpy(p, &w, 4); return; }
    default: { uint64_t w; memcpy(&w, p, 8); w |= BE64(v); memcpy(p, &w, 8); return; }
    }
#else
    for (int i = n - 1; i >= 0; i--) {
        p[i] |= (uint8_t)v;
        v >>= 8;
    }
#endif
}

/* An int whose `&`, `<<`, comparisons and truth are int's own (int, bool, IntEnum members,
 * ...): the operators the reference applies to a field value (`(v & mask) << shift`, the top
 * field of a word unmasked: `v << shift`; the stack key `opcode << 1`; `pad != x`), so
 * reading its value here gives what the reference computes from it. */
static inline int plain_int(PyObject *o) {
    if (PyLong_CheckExact(o) || PyBool_Check(o))
        return 1;
    PyTypeObject *t = Py_TYPE(o);
    return PyLong_Check(o) && t->tp_as_number != NULL && t->tp_del == NULL &&
           t->tp_finalize == NULL && t->tp_richcompare == PyLong_Type.tp_richcompare &&
           t->tp_as_number->nb_and == PyLong_Type.tp_as_number->nb_and &&
           t->tp_as_number->nb_lshift == PyLong_Type.tp_as_number->nb_lshift &&
           t->tp_as_number->nb_bool == PyLong_Type.tp_as_number->nb_bool;
}

/* 1 if o is a plain int equal to v, 0 if a plain int that differs, -1 if not a plain int. */
static int int_equals(PyObject *o, long long v) {
    if (!plain_int(o))
        return -1;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (x == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    return !overflow && x == v;
}

/* Exact int argument of a sane size (offsets: no overflow when a few KB are added to it);
 * 0 ok, -1 not handled here (no exception left set). */
static int ssize_arg(PyObject *o, Py_ssize_t *out) {
    if (!PyLong_CheckExact(o))
        return -1;
    Py_ssize_t v = PyLong_AsSsize_t(o);
    if (v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    if (v > PY_SSIZE_T_MAX / 4 || v < -(PY_SSIZE_T_MAX / 4))
        return -1;
    *out = v;
    return 0;
}

/* A flat byte buffer (format B, 1-D, contiguous) of bytes, bytearray or memoryview objects.
 * 0 ok (release it), -1 not handled (nothing to release, no exception). */
static int byte_buffer(PyObject *o, Py_buffer *view, int writable) {
    if (!(PyBytes_CheckExact(o) || PyByteArray_CheckExact(o) || PyMemoryView_Check(o)))
        return -1;
    if (PyObject_GetBuffer(o, view, writable ? PyBUF_FULL : PyBUF_FULL_RO) < 0) {
        PyErr_Clear();
        return -1;
    }
    int ok = view->ndim == 1 && view->itemsize == 1 && view->suboffsets == NULL &&
             (view->strides == NULL || view->strides[0] == 1) &&
             (view->format == NULL || strcmp(view->format, "B") == 0) && view->len >= 0;
    if (!ok) {
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static PyObject *new_object(PyTypeObject *t) { return t->tp_alloc(t, 0); }

/* ------------------------------------------------------------------ encode */
/* Field values read from the objects: integers already reduced to 64 bits, byte fields as
 * references to their bytes objects (held until written: another thread may rebind the
 * attribute while a long CRC runs without the GIL). */
typedef struct {
    uint64_t vals[MAXOPS];
    PyObject *bytes[MAXOPS];
} Gathered;

static void release_gathered(const Program *pg, Gathered *g) {
    for (int i = 0; i < pg->nops; i++)
        Py_CLEAR(g->bytes[i]);
}

/* Read every value the program encodes from objs; 0 ok, FALLBACK if one is not taken here. */
static int gather(const Program *pg, PyObject *const *objs, Gathered *g) {
    for (int i = 0; i < pg->nops; i++)
        g->bytes[i] = NULL;
    for (int i = 0; i < pg->nops; i++) {
        const Op *op = &pg->ops[i];
        g->vals[i] = op->src == SRC_CONST ? op->cval : 0;
        if (op->src != SRC_SLOT)
            continue;
        PyObject *v = SLOT(objs[op->obj], op->slot);
        if (v == NULL)
            goto fallback;
        if (op->kind == K_B) {
            if (!PyBytes_CheckExact(v) || PyBytes_GET_SIZE(v) != op->size)
                goto fallback;
            g->bytes[i] = Py_NewRef(v);
        } else {
            if (!plain_int(v))
                goto fallback;
            uint64_t x = PyLong_AsUnsignedLongLongMask(v);
            if (x == (uint64_t)-1 && PyErr_Occurred()) {
                PyErr_Clear();
                goto fallback;
            }
            g->vals[i] = x;
        }
    }
    return 0;
fallback:
    release_gathered(pg, g);
    return FALLBACK;
}

/* Write the program's bytes at s (reserved bits zero), integers modulo 2**width. */
static void emit(const Program *pg, uint8_t *s, const Gathered *g, const uint64_t *reg) {
    memset(s, 0, (size_t)pg->size);
    for (int i = 0; i < pg->nops; i++) {
        const Op *op = &pg->ops[i];
        if (op->kind == K_B) {
            if (g->bytes[i] != NULL)
                memcpy(s + op->off, PyBytes_AS_STRING(g->bytes[i]), (size_t)op->size);
            continue;
        }
        uint64_t v = op->src == SRC_REG ? reg[op->reg] : g->vals[i];
        or_be(s + op->off, op->size, (v & width_mask(op->width)) << op->shift);
    }
}

/* Encode one stack at start. Returns the end offset (frames: after the ICRC), FALLBACK when
 * the reference must run (nothing was changed), -1 with an exception set. */
static Py_ssize_t run_encode(const Program *pg, PyObject *frame, PyObject *pkt, Py_buffer *out,
                             Py_ssize_t start) {
    PyObject *objs[MAXOBJ] = {frame, pkt};
    for (int i = OBJ_BTH; i < pg->nobj; i++) {
        PyObject *o = SLOT(pkt, pg->pkt_slot[i]);
        if (o == NULL || Py_TYPE(o) != pg->types[i])
            return FALLBACK;
        objs[i] = o;
    }
    PyObject *bth = objs[OBJ_BTH];
    Py_buffer pay;
    int have_pay = 0, have_vals = 0;
    Py_ssize_t plen = 0, pad = 0;
    Gathered g;
    if (pg->has_payload) {
        PyObject *p = SLOT(pkt, G.pkt_payload);
        if (p == NULL || byte_buffer(p, &pay, 0) < 0)
            return FALLBACK;
        have_pay = 1;
        plen = pay.len;
        pad = -plen & G.pad_mask;
    }
    Py_ssize_t result = FALLBACK;
    PyObject *old_pad = NULL, *old_tsh = NULL;
    /* bth.pad / bth.tsh are rewritten unless both already hold the derived values */
    PyObject *cur_pad = SLOT(bth, G.bth_pad), *cur_tsh = SLOT(bth, G.bth_tsh);
    if (cur_pad == NULL || cur_tsh == NULL)
        goto done;
    int eq_pad = int_equals(cur_pad, pad), eq_tsh = int_equals(cur_tsh, pg->tsh);
    if (eq_pad < 0 || eq_tsh < 0)
        goto done;
    Py_ssize_t hdr_end = start + pg->size;
    Py_ssize_t end = hdr_end + plen + pad;
    Py_ssize_t total = pg->ip_at >= 0 ? end + G.icrc_len : end;
    if (start < 0 || total > out->len)
        goto done;
    Py_ssize_t ulen = pg->ip_at >= 0 ? total - (start + pg->ip_at) - G.ip_len : 0;
    if (ulen > 0xFFFF) /* the 16-bit UDP / IPv6 lengths cannot say it: the reference raises */
        goto done;
    if (gather(pg, objs, &g) < 0)
        goto done;
    have_vals = 1;
    uint64_t reg[NREG] = {0};
    reg[R_ULEN] = reg[R_PLEN] = (uint64_t)ulen; /* no IPv6 extension headers inside */
    reg[R_PAD] = (uint64_t)pad;
    reg[R_TSH] = (uint64_t)pg->tsh;
    /* everything checked: side effects (the old values are released at the very end), then
     * the bytes */
    if (!(eq_pad && eq_tsh)) {
        PyObject *np = PyLong_FromSsize_t(pad);
        if (np == NULL) {
            result = -1;
            goto done;
        }
        old_pad = SLOT(bth, G.bth_pad);
        old_tsh = SLOT(bth, G.bth_tsh);
        SLOT(bth, G.bth_pad) = np;
        SLOT(bth, G.bth_tsh) = Py_NewRef(pg->tsh ? Py_True : Py_False);
    }
    uint8_t *b = (uint8_t *)out->buf;
    uint8_t *s = b + start;
    emit(pg, s, &g, reg);
    /* As the reference: the header holds its ICRC-variant bits as ones while the payload is
     * copied (a payload viewing this very header sees the same bytes) and the CRC runs, then
     * the real header bytes are put back. */
    uint8_t *ip = pg->ip_at >= 0 ? s + pg->ip_at : s, saved[MAXMASK];
    if (pg->ip_at >= 0) {
        memcpy(saved, ip, (size_t)G.mask_len);
        for (Py_ssize_t i = 0; i < G.mask_len; i++)
            ip[i] |= G.mask[i];
    }
    if (plen)
        memmove(b + hdr_end, pay.buf, (size_t)plen);
    if (pad)
        memset(b + hdr_end + plen, 0, (size_t)pad);
    if (pg->ip_at >= 0) {
        uint32_t crc;
        Py_ssize_t rest = end - (start + pg->ip_at) - G.mask_len;
        PyObject *whole = NULL; /* the output buffer as a memoryview, for the crc32 callable */
        if (rest >= CRC_CALL_MIN && out->obj != NULL) {
            whole = PyMemoryView_FromObject(out->obj);
            if (whole == NULL) {
                memcpy(ip, saved, (size_t)G.mask_len);
                result = -1;
                goto done;
            }
            const Py_buffer *w = PyMemoryView_GET_BUFFER(whole);
            if (w->buf != out->buf || w->len != out->len || w->ndim != 1 || w->itemsize != 1)
                Py_CLEAR(whole); /* not the same flat memory: the table CRC */
        }
        int rc = crc_more(crc_update(G.seed, ip, G.mask_len), whole, ip + G.mask_len, rest, &crc);
        Py_XDECREF(whole);
        memcpy(ip, saved, (size_t)G.mask_len);
        if (rc < 0) {
            result = -1;
            goto done;
        }
        for (int i = 0; i < 4; i++)
            b[end + i] = (uint8_t)(crc >> (8 * i));
    }
    result = total;
done:
    if (have_vals)
        release_gathered(pg, &g);
    if (have_pay)
        PyBuffer_Release(&pay);
    Py_XDECREF(old_pad);
    Py_XDECREF(old_tsh);
    return result;
}

/* ------------------------------------------------------------------ decode */
/* The memoryview payload slices come from: the input itself when it is a memoryview, else a
 * view of it made once per call (its slices keep the input alive, as in the reference). */
typedef struct {
    PyObject *data;
    PyObject *view; /* owned, lazily made */
} Source;

static PyObject *source_view(Source *src) {
    if (src->view == NULL) {
        if (PyMemoryView_Check(src->data))
            src->view = Py_NewRef(src->data);
        else
            src->view = PyMemoryView_FromObject(src->data);
    }
    return src->view;
}

/* view[lo:hi] for a flat byte memoryview (1-D, itemsize 1, contiguous: checked by the caller
 * through byte_buffer on the same object). A new view of the same managed buffer, narrowed the
 * way memoryview slicing narrows one (its .obj is the viewed object), without the slice and
 * index objects of the generic path. */
static PyObject *view_slice(PyObject *view, Py_ssize_t lo, Py_ssize_t hi) {
    PyMemoryViewObject *src = (PyMemoryViewObject *)view;
    if (src->view.ndim != 1 || src->view.itemsize != 1 || src->view.shape == NULL ||
        (src->view.strides != NULL && src->view.strides[0] != 1) || lo < 0 || hi < lo ||
        hi > src->view.len)
        return PySequence_GetSlice(view, lo, hi);
    PyObject *out = PyMemoryView_FromObject(view);
    if (out == NULL)
        return NULL;
    PyMemoryViewObject *mv = (PyMemoryViewObject *)out;
    mv->view.buf = (char *)mv->view.buf + lo;
    mv->view.len = hi - lo;
    mv->view.shape[0] = hi - lo;
    return out;
}

/* Addresses, QPs, ports, keys repeat from packet to packet of a flow: hand out the same
 * (immutable) bytes or int object while they do instead of a new one each time. */
static PyObject *decode_bytes(Op *op, const uint8_t *p) {
    PyObject *last = op->last;
    if (last != NULL && memcmp(PyBytes_AS_STRING(last), p, (size_t)op->size) == 0)
        return Py_NewRef(last);
    PyObject *v = PyBytes_FromStringAndSize((const char *)p, op->size);
    if (v != NULL)
        Py_XSETREF(op->last, Py_NewRef(v));
    return v;
}

/* Pass 1 of decoding: every integer field of the program at s into vals (and its register);
 * 0, or -1 when a field does not hold the value the reference requires. */
static int scan(const Program *pg, const uint8_t *s, uint64_t *vals, uint64_t *reg) {
    for (int i = 0; i < pg->nops; i++) {
        const Op *op = &pg->ops[i];
        if (op->kind == K_B) {
            vals[i] = 0;
            continue;
        }
        uint64_t v = (load_be(s + op->off, op->size) >> op->shift) & width_mask(op->width);
        if (op->has_expect && v != op->expect)
            return -1;
        if (op->reg >= 0)
            reg[op->reg] = v;
        vals[i] = v;
    }
    return 0;
}

static inline long long sign_extend(uint64_t x, int width) {
    uint64_t half = (uint64_t)1 << (width - 1);
    return (long long)((x ^ half) - half);
}

/* The Python value of field i (scanned value x; byte fields read at s). New reference. */
static PyObject *make_value(Program *pg, int i, const uint8_t *s, uint64_t x) {
    const Op *op = &pg->ops[i];
    switch (op->kind) {
    case K_B: return decode_bytes(&pg->ops[i], s + op->off);
    case K_F: return Py_NewRef(x ? Py_True : Py_False);
    case K_O: return Py_NewRef(pg->opcode);
    default: break;
    }
    if (x < 256) /* CPython's small ints are shared anyway */
        return op->kind == K_S ? PyLong_FromLongLong(sign_extend(x, op->width))
                               : PyLong_FromUnsignedLongLong(x);
    Op *w = &pg->ops[i];
    if (w->last != NULL && w->last_val == x)
        return Py_NewRef(w->last);
    PyObject *v = op->kind == K_S ? PyLong_FromLongLong(sign_extend(x, op->width))
                                  : PyLong_FromUnsignedLongLong(x);
    if (v != NULL) {
        Py_XSETREF(w->last, Py_NewRef(v));
        w->last_val = x;
    }
    return v;
}

/* Decode one stack at b[start:limit] (caller: start + pg->size <= limit <= buffer length).
 * Frames return (Frame, MrcPacket), packets the MrcPacket; a new reference, Py_NotImplemented
 * (new reference) when the reference must run, NULL with an exception set. */
static PyObject *run_decode(Program *pg, Source *src, const uint8_t *b, Py_ssize_t start,
                            Py_ssize_t limit, PyObject *eth_dst, PyObject *eth_src,
                            PyObject *srv6, int verify) {
    uint64_t vals[MAXOPS];
    uint64_t reg[NREG] = {0};
    const uint8_t *s = b + start;
    if (scan(pg, s, vals, reg) < 0)
        Py_RETURN_NOTIMPLEMENTED;
    int frame_mode = pg->ip_at >= 0;
    Py_ssize_t hdr_end = start + pg->size, end = limit;
    int trimmed = 0;
    if (frame_mode) {
        Py_ssize_t ip_off = start + pg->ip_at;
        Py_ssize_t ip_end = ip_off + G.ip_len + (Py_ssize_t)reg[R_PLEN];
        if (ip_end > limit)
            Py_RETURN_NOTIMPLEMENTED;
        Py_ssize_t ulen = (Py_ssize_t)reg[R_ULEN];
        end = ip_off + G.ip_len + ulen;
        if (end > ip_end || ulen < G.udp_len || hdr_end > end)
            Py_RETURN_NOTIMPLEMENTED;
        trimmed = pg->has_payload && hdr_end == end;
        if (!trimmed) {
            if (end - hdr_end < G.icrc_len)
                Py_RETURN_NOTIMPLEMENTED;
            end -= G.icrc_len;
            if (verify) {
                uint32_t want;
                PyObject *whole = NULL; /* the input as a memoryview, for the crc32 callable */
                if (end - ip_off - G.mask_len >= CRC_CALL_MIN && (whole = source_view(src)) == NULL)
                    return NULL;
                if (icrc(whole, b, ip_off, end, &want) < 0)
                    return NULL;
                if (want != le32(b + end))
                    Py_RETURN_NOTIMPLEMENTED;
            }
        }
    }
    Py_ssize_t pay_lo = 0, pay_hi = 0;
    int slice = 0;
    if (!trimmed) {
        if (pg->has_payload) {
            Py_ssize_t pad = (Py_ssize_t)reg[R_PAD];
            if (end - hdr_end < pad)
                Py_RETURN_NOTIMPLEMENTED;
            pay_lo = hdr_end;
            pay_hi = end - pad;
            slice = 1;
        } else if (end != hdr_end) {
            Py_RETURN_NOTIMPLEMENTED;
        }
    }
    /* valid: build the objects */
    PyObject *objs[MAXOBJ] = {NULL};
    PyObject *result = NULL;
    for (int i = frame_mode ? 0 : 1; i < pg->nobj; i++)
        if ((objs[i] = new_object(pg->types[i])) == NULL)
            goto out;
    PyObject *pkt = objs[1];
    for (int i = 0; i < pg->nops; i++) {
        const Op *op = &pg->ops[i];
        if (op->obj < 0)
            continue;
        PyObject *v = make_value(pg, i, s, vals[i]);
        if (v == NULL)
            goto out;
        SLOT(objs[op->obj], op->slot) = v;
    }
    for (int i = 2; i < pg->nobj; i++)
        SLOT(pkt, pg->pkt_slot[i]) = Py_NewRef(objs[i]);
    for (int i = 0; i < pg->nnone; i++)
        SLOT(pkt, pg->none_slot[i]) = Py_NewRef(Py_None);
    PyObject *payload;
    if (slice) {
        PyObject *view = source_view(src);
        payload = view == NULL ? NULL : view_slice(view, pay_lo, pay_hi);
    } else {
        payload = PyBytes_FromStringAndSize(NULL, 0);
    }
    if (payload == NULL)
        goto out;
    SLOT(pkt, G.pkt_payload) = payload;
    SLOT(pkt, G.pkt_trimmed) = Py_NewRef(trimmed ? Py_True : Py_False);
    if (!frame_mode) {
        result = Py_NewRef(pkt);
        goto out; /* releases the object references held in objs */
    }
    PyObject *frame = objs[0];
    SLOT(frame, G.frame_srv6) = Py_NewRef(srv6);
    if (pg->table == T_INNER) {
        SLOT(frame, G.frame_eth_dst) = Py_NewRef(eth_dst);
        SLOT(frame, G.frame_eth_src) = Py_NewRef(eth_src);
    }
    result = PyTuple_Pack(2, frame, pkt);
out:
    for (int i = 0; i < MAXOBJ; i++)
        Py_XDECREF(objs[i]);
    return result;
}

/* ------------------------------------------------------------------ public functions */
/* The Python reference of function f with the caller's arguments. A strong reference to it
 * is held for the call: configure() may replace G.ref meanwhile. */
static PyObject *forward(int f, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    PyObject *ref = G.ref[f];
    if (ref == NULL) {
        PyErr_SetString(PyExc_RuntimeError,
                        "_fastwire is not configured (hosts.wire.fastpath.install does it)");
        return NULL;
    }
    G.falls[f]++;
    Py_INCREF(ref);
    PyObject *r = PyObject_Vectorcall(ref, args, (size_t)nargs, kwnames);
    Py_DECREF(ref);
    return r;
}

typedef PyObject *(*impl_fn)(PyObject *const *, Py_ssize_t, PyObject *);

/* Run the C implementation (a result, NULL with an exception, or NotImplemented: the
 * reference must run) while G.busy keeps configure() from freeing its programs; then hand
 * NotImplemented over to the reference unless strict (try_*). */
static PyObject *dispatch(int f, impl_fn impl, int strict, PyObject *const *args,
                          Py_ssize_t nargs, PyObject *kwnames) {
    PyObject *r;
    if (G.ready) {
        G.busy++;
        r = impl(args, nargs, kwnames);
        G.busy--;
    } else {
        r = Py_NewRef(Py_NotImplemented);
    }
    if (r != Py_NotImplemented) {
        if (r != NULL)
            G.hits[f]++;
        return r;
    }
    if (strict)
        return r;
    Py_DECREF(r);
    return forward(f, args, nargs, kwnames);
}

static inline int stack_key(const uint8_t *bth) {
    return (bth[G.opcode_byte] << 1) | ((bth[G.tsh_byte] & G.tsh_mask) != 0);
}

/* Key of the packet to encode, or -1 (reference). */
static int encode_key(PyObject *pkt, PyObject **bth_out) {
    if (Py_TYPE(pkt) != G.pkt_t)
        return -1;
    PyObject *bth = SLOT(pkt, G.pkt_bth), *tseth = SLOT(pkt, G.pkt_tseth);
    if (bth == NULL || tseth == NULL || Py_TYPE(bth) != G.bth_t)
        return -1;
    PyObject *op = SLOT(bth, G.bth_opcode);
    if (op == NULL || !plain_int(op))
        return -1;
    int overflow = 0;
    long v = PyLong_AsLongAndOverflow(op, &overflow);
    if (v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    if (overflow || v < 0 || v > 255)
        return -1;
    *bth_out = bth;
    return (int)((v << 1) | (tseth != Py_None));
}

/* SRv6 outer part of an encode: its values are read (and checked) before the inner stack is
 * encoded, written after it (the reference's order: inner stack first, then the outer). */
typedef struct {
    PyObject *segs;          /* the segments tuple (held) */
    Py_ssize_t nseg;
    Gathered ip, srh;
    int have_ip, have_srh;
} Outer;

static void release_outer(Outer *o) {
    if (o->have_ip)
        release_gathered(G.outer, &o->ip);
    if (o->have_srh)
        release_gathered(G.srh, &o->srh);
    Py_CLEAR(o->segs);
    o->have_ip = o->have_srh = 0;
}

/* 0 ok, FALLBACK: the reference must run. */
static int gather_outer(PyObject *frame, PyObject *srv6, Outer *o) {
    o->segs = NULL;
    o->have_ip = o->have_srh = 0;
    if (Py_TYPE(srv6) != G.srv6_t || G.outer == NULL || G.srh == NULL)
        return FALLBACK;
    PyObject *segs = SLOT(srv6, G.srv6_segments);
    if (segs == NULL || !PyTuple_CheckExact(segs))
        return FALLBACK;
    o->nseg = PyTuple_GET_SIZE(segs);
    if (o->nseg > G.max_segments)
        return FALLBACK;
    for (Py_ssize_t i = 0; i < o->nseg; i++) {
        PyObject *seg = PyTuple_GET_ITEM(segs, i);
        if (!PyBytes_CheckExact(seg) || PyBytes_GET_SIZE(seg) != G.seg_len)
            return FALLBACK;
    }
    o->segs = Py_NewRef(segs);
    PyObject *objs[MAXOBJ] = {frame, srv6};
    if (gather(G.outer, objs, &o->ip) < 0)
        goto fallback;
    o->have_ip = 1;
    if (o->nseg) {
        if (gather(G.srh, objs, &o->srh) < 0)
            goto fallback;
        o->have_srh = 1;
    }
    return 0;
fallback:
    release_outer(o);
    return FALLBACK;
}

static Py_ssize_t outer_len(const Outer *o) {
    return G.eth_len + G.ip_len + (o->nseg ? G.srh_len + G.seg_len * o->nseg : 0);
}

/* Ethernet, outer IPv6 (+ SRH and segments) at b[offset:], the inner stack ending at total. */
static void emit_outer(const Outer *o, uint8_t *b, Py_ssize_t offset, Py_ssize_t total) {
    uint64_t reg[NREG] = {0};
    Py_ssize_t ip = offset + G.eth_len;
    reg[R_PLEN] = (uint64_t)(total - ip - G.ip_len);
    reg[R_NH] = (uint64_t)(o->nseg ? G.proto_routing : G.proto_ipv6);
    reg[R_EXTLEN] = (uint64_t)(o->nseg * (G.seg_len / G.srh_unit));
    reg[R_LAST] = (uint64_t)(o->nseg - 1);
    emit(G.outer, b + offset, &o->ip, reg);
    if (!o->nseg)
        return;
    Py_ssize_t off = ip + G.ip_len;
    emit(G.srh, b + off, &o->srh, reg);
    off += G.srh_len;
    for (Py_ssize_t i = 0; i < o->nseg; i++, off += G.seg_len)
        memcpy(b + off, PyBytes_AS_STRING(PyTuple_GET_ITEM(o->segs, i)), (size_t)G.seg_len);
}

static PyObject *encode_frame_impl(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    PyObject *bth;
    Py_ssize_t offset = 0;
    if (kwnames != NULL || nargs < 3 || nargs > 4)
        goto fwd;
    if (nargs == 4 && (ssize_arg(args[3], &offset) < 0 || offset < 0))
        goto fwd;
    PyObject *frame = args[0], *pkt = args[1];
    if (Py_TYPE(frame) != G.frame_t)
        goto fwd;
    int key = encode_key(pkt, &bth);
    if (key < 0)
        goto fwd;
    PyObject *srv6 = SLOT(frame, G.frame_srv6);
    if (srv6 == NULL)
        goto fwd;
    Outer outer;
    int is_srv6 = srv6 != Py_None;
    const Program *pg = G.tables[is_srv6 ? T_INNER : T_ETH][key];
    if (pg == NULL)
        goto fwd;
    if (is_srv6 && gather_outer(frame, srv6, &outer) < 0)
        goto fwd;
    Py_buffer out;
    if (byte_buffer(args[2], &out, 1) < 0) {
        if (is_srv6)
            release_outer(&outer);
        goto fwd;
    }
    Py_ssize_t total = run_encode(pg, frame, pkt, &out, offset + (is_srv6 ? outer_len(&outer) : 0));
    if (is_srv6) {
        if (total >= 0 && total - (offset + G.eth_len) - G.ip_len > 0xFFFF)
            total = FALLBACK; /* the outer IPv6 payload length cannot say it: the reference raises */
        if (total >= 0)
            emit_outer(&outer, (uint8_t *)out.buf, offset, total);
        release_outer(&outer);
    }
    PyBuffer_Release(&out);
    if (total == FALLBACK)
        goto fwd;
    if (total < 0)
        return NULL;
    return PyLong_FromSsize_t(total - offset);
fwd:
    Py_RETURN_NOTIMPLEMENTED;
}

static PyObject *encode_packet_impl(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    PyObject *bth;
    Py_ssize_t offset = 0;
    if (kwnames != NULL || nargs < 2 || nargs > 3)
        goto fwd;
    if (nargs == 3 && (ssize_arg(args[2], &offset) < 0 || offset < 0))
        goto fwd;
    int key = encode_key(args[0], &bth);
    if (key < 0 || G.tables[T_PACKET][key] == NULL)
        goto fwd;
    Py_buffer out;
    if (byte_buffer(args[1], &out, 1) < 0)
        goto fwd;
    Py_ssize_t end = run_encode(G.tables[T_PACKET][key], NULL, args[0], &out, offset);
    PyBuffer_Release(&out);
    if (end == FALLBACK)
        goto fwd;
    if (end < 0)
        return NULL;
    return PyLong_FromSsize_t(end);
fwd:
    Py_RETURN_NOTIMPLEMENTED;
}

/* SRv6 frame: Ethernet, outer IPv6 (+ SRH) checked as the reference checks them, then the
 * inner stack. Returns like run_decode. Caller: n >= Ethernet + IPv6. */
static PyObject *decode_srv6(Source *src, const uint8_t *b, Py_ssize_t n, int verify) {
    uint64_t reg[NREG] = {0}, ovals[MAXOPS], svals[MAXOPS];
    Program *po = G.outer, *ps = G.srh;
    if (po == NULL || ps == NULL || scan(po, b, ovals, reg) < 0)
        Py_RETURN_NOTIMPLEMENTED;
    Py_ssize_t off = G.eth_len + G.ip_len;
    Py_ssize_t limit = off + (Py_ssize_t)reg[R_PLEN];
    if (limit > n)
        Py_RETURN_NOTIMPLEMENTED;
    Py_ssize_t count = 0, seg_base = 0, srh_at = -1;
    if (reg[R_NH] == (uint64_t)G.proto_routing) {
        if (limit - off < G.srh_len || scan(ps, b + off, svals, reg) < 0)
            Py_RETURN_NOTIMPLEMENTED;
        Py_ssize_t units = G.seg_len / G.srh_unit;
        Py_ssize_t srh_len = G.srh_len + G.srh_unit * (Py_ssize_t)reg[R_EXTLEN];
        if ((Py_ssize_t)reg[R_EXTLEN] % units || limit - off < srh_len)
            Py_RETURN_NOTIMPLEMENTED;
        count = (Py_ssize_t)reg[R_EXTLEN] / units;
        if ((Py_ssize_t)reg[R_LAST] >= count || (Py_ssize_t)reg[R_LEFT] > count)
            Py_RETURN_NOTIMPLEMENTED;
        srh_at = off;
        seg_base = off + G.srh_len;
        off += srh_len;
    }
    if (reg[R_NH] != (uint64_t)G.proto_ipv6 || limit - off < G.ip_len)
        Py_RETURN_NOTIMPLEMENTED;
    Py_ssize_t bo = off + G.ip_len + G.udp_len;
    if (limit - bo < G.bth_len)
        Py_RETURN_NOTIMPLEMENTED;
    Program *pg = G.tables[T_INNER][stack_key(b + bo)];
    if (pg == NULL || off + pg->size > limit)
        Py_RETURN_NOTIMPLEMENTED;
    /* the outer objects, then the inner stack */
    PyObject *eth[2] = {NULL, NULL}, *r = NULL;
    PyObject *outer = new_object(G.srv6_t);
    if (outer == NULL)
        return NULL;
    for (int i = 0; i < po->nops; i++) {
        const Op *op = &po->ops[i];
        if (op->obj < 0)
            continue;
        PyObject *v = make_value(po, i, b, ovals[i]);
        if (v == NULL)
            goto done;
        if (op->obj == 1)
            SLOT(outer, op->slot) = v;
        else
            eth[op->slot == G.frame_eth_dst ? 0 : 1] = v; /* configure: only these two */
    }
    if (srh_at >= 0) {
        for (int i = 0; i < ps->nops; i++) {
            if (ps->ops[i].obj < 0)
                continue;
            PyObject *v = make_value(ps, i, b + srh_at, svals[i]);
            if (v == NULL)
                goto done;
            SLOT(outer, ps->ops[i].slot) = v;
        }
    } else {
        SLOT(outer, G.srv6_segments_left) = PyLong_FromLong(0);
        if (SLOT(outer, G.srv6_segments_left) == NULL)
            goto done;
    }
    PyObject *segs = PyTuple_New(count);
    if (segs == NULL)
        goto done;
    SLOT(outer, G.srv6_segments) = segs;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *seg = PyBytes_FromStringAndSize((const char *)b + seg_base + G.seg_len * i,
                                                  G.seg_len);
        if (seg == NULL)
            goto done;
        PyTuple_SET_ITEM(segs, i, seg);
    }
    if (eth[0] == NULL || eth[1] == NULL) {
        PyErr_SetString(PyExc_SystemError, "_fastwire: outer program lacks Ethernet addresses");
        goto done;
    }
    r = run_decode(pg, src, b, off, limit, eth[0], eth[1], outer, verify);
done:
    Py_XDECREF(eth[0]);
    Py_XDECREF(eth[1]);
    Py_DECREF(outer);
    return r;
}

static PyObject *decode_frame_impl(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    int verify = 1;
    if (nargs != 1)
        goto fwd;
    if (kwnames != NULL) {
        if (PyTuple_GET_SIZE(kwnames) != 1)
            goto fwd;
        PyObject *name = PyTuple_GET_ITEM(kwnames, 0);
        if (!PyUnicode_Check(name) || PyUnicode_CompareWithASCIIString(name, "verify_icrc") != 0 ||
            !PyBool_Check(args[1]))
            goto fwd;
        verify = args[1] == Py_True;
    }
    Py_buffer in;
    if (byte_buffer(args[0], &in, 0) < 0)
        goto fwd;
    Source src = {args[0], NULL};
    const uint8_t *b = (const uint8_t *)in.buf;
    Py_ssize_t n = in.len;
    PyObject *r = Py_NewRef(Py_NotImplemented);
    if (n >= G.eth_len + G.ip_len) {
        Py_ssize_t nh = b[G.eth_len + G.ip_nh_byte];
        Py_ssize_t bo = G.eth_len + G.ip_len + G.udp_len;
        if (nh == G.proto_udp && n >= bo + G.bth_len) {
            Program *pg = G.tables[T_ETH][stack_key(b + bo)];
            if (pg != NULL && pg->size <= n) {
                Py_DECREF(r);
                r = run_decode(pg, &src, b, 0, n, NULL, NULL, Py_None, verify);
            }
        } else if (nh == G.proto_ipv6 || nh == G.proto_routing) {
            Py_DECREF(r);
            r = decode_srv6(&src, b, n, verify);
        }
    }
    PyBuffer_Release(&in);
    Py_XDECREF(src.view);
    return r;
fwd:
    Py_RETURN_NOTIMPLEMENTED;
}

static PyObject *decode_packet_impl(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    Py_ssize_t offset = 0, end = -1;
    int end_given = 0;
    if (kwnames != NULL || nargs < 1 || nargs > 3)
        goto fwd;
    if (nargs >= 2 && ssize_arg(args[1], &offset) < 0)
        goto fwd;
    if (nargs == 3 && args[2] != Py_None) {
        if (ssize_arg(args[2], &end) < 0)
            goto fwd;
        end_given = 1;
    }
    Py_buffer in;
    if (byte_buffer(args[0], &in, 0) < 0)
        goto fwd;
    Source src = {args[0], NULL};
    const uint8_t *b = (const uint8_t *)in.buf;
    Py_ssize_t n = in.len;
    if (!end_given || end > n)
        end = n;
    PyObject *r = Py_NewRef(Py_NotImplemented);
    if (offset >= 0 && end >= 0 && end - offset >= G.bth_len) {
        Program *pg = G.tables[T_PACKET][stack_key(b + offset)];
        if (pg != NULL && offset + pg->size <= end) {
            Py_DECREF(r);
            r = run_decode(pg, &src, b, offset, end, NULL, NULL, Py_None, 0);
        }
    }
    PyBuffer_Release(&in);
    Py_XDECREF(src.view);
    return r;
fwd:
    Py_RETURN_NOTIMPLEMENTED;
}

#define ENTRY(name, f, strict)                                                                \
    static PyObject *fw_##name##_##strict(PyObject *self, PyObject *const *args,             \
                                          Py_ssize_t nargs, PyObject *kwnames) {             \
        (void)self;                                                                           \
        return dispatch(f, name##_impl, strict, args, nargs, kwnames);                       \
    }
ENTRY(encode_frame, F_ENCODE_FRAME, 0)
ENTRY(encode_frame, F_ENCODE_FRAME, 1)
ENTRY(decode_frame, F_DECODE_FRAME, 0)
ENTRY(decode_frame, F_DECODE_FRAME, 1)
ENTRY(encode_packet, F_ENCODE_PACKET, 0)
ENTRY(encode_packet, F_ENCODE_PACKET, 1)
ENTRY(decode_packet, F_DECODE_PACKET, 0)
ENTRY(decode_packet, F_DECODE_PACKET, 1)

/* ------------------------------------------------------------------ configuration */
static PyObject *cfg_get(PyObject *d, const char *k) {
    PyObject *v = PyDict_GetItemString(d, k); /* borrowed */
    if (v == NULL && !PyErr_Occurred())
        PyErr_Format(PyExc_KeyError, "_fastwire.configure: missing %s", k);
    return v;
}

static int cfg_size(PyObject *d, const char *k, Py_ssize_t *out) {
    PyObject *v = cfg_get(d, k);
    if (v == NULL)
        return -1;
    Py_ssize_t x = PyLong_AsSsize_t(v);
    if (x == -1 && PyErr_Occurred())
        return -1;
    if (x < 0 || x > 65535) {
        PyErr_Format(PyExc_ValueError, "_fastwire.configure: %s out of range", k);
        return -1;
    }
    *out = x;
    return 0;
}

static int cfg_type(PyObject *d, const char *k, PyTypeObject **out) {
    PyObject *v = cfg_get(d, k);
    if (v == NULL)
        return -1;
    if (!PyType_Check(v) || !(((PyTypeObject *)v)->tp_flags & Py_TPFLAGS_HEAPTYPE) ||
        ((PyTypeObject *)v)->tp_itemsize != 0) {
        PyErr_Format(PyExc_TypeError, "_fastwire.configure: %s must be a slots class", k);
        return -1;
    }
    Py_XSETREF(*out, (PyTypeObject *)Py_NewRef(v));
    return 0;
}

static int cfg_callable(PyObject *d, const char *k, PyObject **out) {
    PyObject *v = cfg_get(d, k);
    if (v == NULL)
        return -1;
    if (!PyCallable_Check(v)) {
        PyErr_Format(PyExc_TypeError, "_fastwire.configure: %s must be callable", k);
        return -1;
    }
    Py_XSETREF(*out, Py_NewRef(v));
    return 0;
}

/* Offset of the writable object slot `name` of t (a slots class), or -1 with ValueError. */
static Py_ssize_t member_offset(PyTypeObject *t, const char *name) {
    for (PyMemberDef *m = t->tp_members; name != NULL && m != NULL && m->name != NULL; m++) {
        if (strcmp(m->name, name) != 0)
            continue;
        if (m->type == T_OBJECT_EX && !(m->flags & READONLY) &&
            m->offset >= (Py_ssize_t)sizeof(PyObject) &&
            m->offset + (Py_ssize_t)sizeof(PyObject *) <= t->tp_basicsize)
            return m->offset;
        break;
    }
    PyErr_Format(PyExc_ValueError, "_fastwire: %s has no object slot %s", t->tp_name,
                 name ? name : "(none)");
    return -1;
}

static void free_program(Program *pg) {
    if (pg == NULL)
        return;
    Py_XDECREF(pg->opcode);
    for (int i = 0; i < pg->nops; i++)
        Py_XDECREF(pg->ops[i].last);
    for (int i = 0; i < MAXOBJ; i++)
        Py_XDECREF(pg->types[i]);
    PyMem_Free(pg);
}

static void clear_tables(void) {
    for (int t = 0; t < NTABLE; t++)
        for (int k = 0; k < NKEYS; k++) {
            free_program(G.tables[t][k]);
            G.tables[t][k] = NULL;
        }
    free_program(G.outer);
    free_program(G.srh);
    G.outer = G.srh = NULL;
}

#define BAD(...)                                                                              \
    do {                                                                                      \
        PyErr_Format(PyExc_ValueError, "_fastwire program: " __VA_ARGS__);                    \
        goto fail;                                                                            \
    } while (0)

static int parse_op(Program *pg, PyObject *t, Op *op) {
    const char *slot = NULL;
    unsigned long long cval = 0;
    long long expect = -1;
    if (!PyTuple_Check(t) ||
        !PyArg_ParseTuple(t, "niiiiiziKLi", &op->off, &op->size, &op->shift, &op->width,
                          &op->kind, &op->obj, &slot, &op->src, &cval, &expect, &op->reg)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "_fastwire program: an op must be a tuple");
        return -1;
    }
    op->cval = cval;
    op->has_expect = expect >= 0;
    op->expect = (uint64_t)expect;
    op->slot = 0;
    if (op->kind < 0 || op->kind >= K_COUNT || op->src < 0 || op->src >= SRC_COUNT ||
        op->reg < -1 || op->reg >= NREG || op->obj < -1 || op->obj >= pg->nobj)
        BAD("op codes out of range");
    if (op->width < 1 || (op->kind != K_B && op->width > 64))
        BAD("bad width %d", op->width);
    if (op->kind == K_B) {
        if (op->shift != 0 || op->size < 1 || op->size > 64 || op->size * 8 != op->width ||
            op->src != SRC_SLOT || op->has_expect || op->reg >= 0)
            BAD("bad byte field");
    } else if (!(op->size == 1 || op->size == 2 || op->size == 4 || op->size == 8) ||
               op->shift < 0 || op->shift + op->width > op->size * 8) {
        BAD("bad word");
    }
    if (op->off < 0 || op->off + op->size > pg->size)
        BAD("field outside the stack");
    if (op->kind == K_O && pg->opcode == NULL)
        BAD("no opcode member");
    if (op->src == SRC_REG && op->reg < 0)
        BAD("register source without register");
    if ((pg->table == T_PACKET || pg->table == T_SRH) && op->obj == 0)
        BAD("no frame object here");
    if (op->obj >= 0) {
        op->slot = member_offset(pg->types[op->obj], slot);
        if (op->slot < 0)
            return -1;
    } else if (slot != NULL || op->src == SRC_SLOT) {
        BAD("slot without object");
    }
    if (pg->table >= NTABLE && op->kind == K_O)
        BAD("no opcode in SRv6 outer headers");
    if (pg->table == T_OUTER && op->obj == 0 &&
        (op->kind != K_B || (op->slot != G.frame_eth_dst && op->slot != G.frame_eth_src)))
        BAD("the outer program sets only the frame's Ethernet addresses");
    return 0;
fail:
    return -1;
}

static int parse_ops(Program *pg, PyObject *ops) {
    if (!PyTuple_Check(ops) || PyTuple_GET_SIZE(ops) > MAXOPS)
        BAD("bad ops");
    pg->nops = (int)PyTuple_GET_SIZE(ops);
    for (int i = 0; i < pg->nops; i++) {
        if (parse_op(pg, PyTuple_GET_ITEM(ops, i), &pg->ops[i]) < 0) {
            pg->nops = i; /* only parsed ops own a cached value */
            return -1;
        }
        for (int j = 0; j < i; j++) /* each slot is stored once (no leaked references) */
            if (pg->ops[i].obj >= 0 && pg->ops[j].obj == pg->ops[i].obj &&
                pg->ops[j].slot == pg->ops[i].slot)
                BAD("slot stored twice");
    }
    return 0;
fail:
    return -1;
}

static Program *parse_program(PyObject *t) {
    Program *pg = PyMem_Calloc(1, sizeof(Program));
    if (pg == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    PyObject *opcode, *objects, *nones, *ops;
    int key;
    if (!PyTuple_Check(t) ||
        !PyArg_ParseTuple(t, "iiinniOOOO", &pg->table, &key, &pg->tsh, &pg->size, &pg->ip_at,
                          &pg->has_payload, &opcode, &objects, &nones, &ops)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "_fastwire: a program must be a tuple");
        goto fail;
    }
    pg->opcode = Py_NewRef(opcode);
    if (pg->table < 0 || pg->table > T_SRH || key < 0 || key >= NKEYS || (pg->tsh & ~1) ||
        pg->size < 1 || pg->size > 4096)
        BAD("bad table, key or size");
    if (pg->table == T_PACKET || pg->table >= NTABLE
            ? pg->ip_at != -1
            : (pg->ip_at < 0 || pg->ip_at + G.mask_len > pg->size))
        BAD("bad IPv6 offset");
    if (pg->table >= NTABLE) { /* SRv6 outer: objects 0 frame, 1 Srv6Outer */
        if ((pg->table == T_OUTER && pg->size != G.eth_len + G.ip_len) ||
            (pg->table == T_SRH && pg->size != G.srh_len))
            BAD("bad SRv6 outer program size");
        pg->nobj = 2;
        pg->types[0] = (PyTypeObject *)Py_NewRef(G.frame_t);
        pg->types[1] = (PyTypeObject *)Py_NewRef(G.srv6_t);
        if (parse_ops(pg, ops) < 0)
            goto fail;
        Program **slot = pg->table == T_OUTER ? &G.outer : &G.srh;
        if (*slot != NULL)
            BAD("duplicate program");
        *slot = pg;
        return pg;
    }
    if (!PyTuple_Check(objects) || PyTuple_GET_SIZE(objects) < 1 ||
        PyTuple_GET_SIZE(objects) > MAXOBJ - OBJ_BTH)
        BAD("bad objects");
    pg->nobj = OBJ_BTH + (int)PyTuple_GET_SIZE(objects);
    pg->types[0] = (PyTypeObject *)Py_NewRef(G.frame_t);
    pg->types[1] = (PyTypeObject *)Py_NewRef(G.pkt_t);
    for (int i = OBJ_BTH; i < pg->nobj; i++) {
        PyObject *o = PyTuple_GET_ITEM(objects, i - OBJ_BTH);
        PyObject *cls;
        const char *name;
        if (!PyTuple_Check(o) || !PyArg_ParseTuple(o, "Os", &cls, &name))
            BAD("bad object entry");
        if (!PyType_Check(cls) || !(((PyTypeObject *)cls)->tp_flags & Py_TPFLAGS_HEAPTYPE) ||
            ((PyTypeObject *)cls)->tp_itemsize != 0)
            BAD("object class must be a slots class");
        pg->types[i] = (PyTypeObject *)Py_NewRef(cls);
        if ((pg->pkt_slot[i] = member_offset(G.pkt_t, name)) < 0)
            goto fail;
    }
    if (pg->types[OBJ_BTH] != G.bth_t || pg->pkt_slot[OBJ_BTH] != G.pkt_bth)
        BAD("object 2 must be the BTH");
    if (!PyTuple_Check(nones) || PyTuple_GET_SIZE(nones) > MAXNONE)
        BAD("bad none slots");
    pg->nnone = (int)PyTuple_GET_SIZE(nones);
    for (int i = 0; i < pg->nnone; i++) {
        PyObject *s = PyTuple_GET_ITEM(nones, i);
        const char *name = PyUnicode_Check(s) ? PyUnicode_AsUTF8(s) : NULL;
        if (name == NULL)
            BAD("bad none slot");
        if ((pg->none_slot[i] = member_offset(G.pkt_t, name)) < 0)
            goto fail;
    }
    if (parse_ops(pg, ops) < 0)
        goto fail;
    if (G.tables[pg->table][key] != NULL)
        BAD("duplicate program");
    G.tables[pg->table][key] = pg;
    return pg;
fail:
    free_program(pg);
    return NULL;
}

static PyObject *fw_configure(PyObject *self, PyObject *d) {
    (void)self;
    if (!PyDict_Check(d)) {
        PyErr_SetString(PyExc_TypeError, "configure() takes a dict");
        return NULL;
    }
    if (G.busy > 0) {
        PyErr_SetString(PyExc_RuntimeError,
                        "_fastwire.configure: an encode/decode call is running (its crc32 "
                        "callable or another thread): its programs cannot be replaced now");
        return NULL;
    }
    G.ready = 0;
    clear_tables();
    static const char *refs[NFUNC] = {"encode_frame", "decode_frame", "encode_packet",
                                      "decode_packet"};
    for (int i = 0; i < NFUNC; i++)
        if (cfg_callable(d, refs[i], &G.ref[i]) < 0)
            return NULL;
    if (cfg_callable(d, "crc32", &G.crc32) < 0)
        return NULL;
    if (cfg_type(d, "frame", &G.frame_t) < 0 || cfg_type(d, "packet", &G.pkt_t) < 0 ||
        cfg_type(d, "bth", &G.bth_t) < 0 || cfg_type(d, "srv6", &G.srv6_t) < 0)
        return NULL;
    struct {
        const char *name;
        Py_ssize_t *out;
    } sizes[] = {
        {"opcode_byte", &G.opcode_byte}, {"tsh_byte", &G.tsh_byte},
        {"tsh_mask", &G.tsh_mask},       {"bth_len", &G.bth_len},
        {"eth_len", &G.eth_len},         {"ip_len", &G.ip_len},
        {"ip_nh_byte", &G.ip_nh_byte},   {"udp_len", &G.udp_len},
        {"srh_len", &G.srh_len},         {"seg_len", &G.seg_len},
        {"icrc_len", &G.icrc_len},       {"pad_mask", &G.pad_mask},
        {"proto_udp", &G.proto_udp},     {"proto_ipv6", &G.proto_ipv6},
        {"proto_routing", &G.proto_routing}, {"srh_unit", &G.srh_unit},
        {"max_segments", &G.max_segments},
    };
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        if (cfg_size(d, sizes[i].name, sizes[i].out) < 0)
            return NULL;
    if (G.opcode_byte >= G.bth_len || G.tsh_byte >= G.bth_len || G.tsh_mask > 255 ||
        G.ip_nh_byte >= G.ip_len || G.icrc_len != 4 || G.pad_mask > 255 || G.srh_unit < 1 ||
        G.seg_len < 1 || G.seg_len % G.srh_unit || G.max_segments > 4096) {
        PyErr_SetString(PyExc_ValueError, "_fastwire.configure: inconsistent sizes");
        return NULL;
    }
    PyObject *seed = cfg_get(d, "seed"), *mask = cfg_get(d, "mask");
    if (seed == NULL || mask == NULL)
        return NULL;
    unsigned long s = PyLong_AsUnsignedLong(seed);
    if (s == (unsigned long)-1 && PyErr_Occurred())
        return NULL;
    G.seed = (uint32_t)s;
    if (!PyBytes_Check(mask) || PyBytes_GET_SIZE(mask) > MAXMASK ||
        PyBytes_GET_SIZE(mask) != G.ip_len + G.udp_len + G.bth_len) {
        PyErr_SetString(PyExc_ValueError, "_fastwire.configure: mask must cover IPv6+UDP+BTH");
        return NULL;
    }
    G.mask_len = PyBytes_GET_SIZE(mask);
    memcpy(G.mask, PyBytes_AS_STRING(mask), (size_t)G.mask_len);
    if ((G.pkt_payload = member_offset(G.pkt_t, "payload")) < 0 ||
        (G.pkt_trimmed = member_offset(G.pkt_t, "trimmed")) < 0 ||
        (G.pkt_bth = member_offset(G.pkt_t, "bth")) < 0 ||
        (G.pkt_tseth = member_offset(G.pkt_t, "tseth")) < 0 ||
        (G.bth_pad = member_offset(G.bth_t, "pad")) < 0 ||
        (G.bth_tsh = member_offset(G.bth_t, "tsh")) < 0 ||
        (G.bth_opcode = member_offset(G.bth_t, "opcode")) < 0 ||
        (G.frame_srv6 = member_offset(G.frame_t, "srv6")) < 0 ||
        (G.frame_eth_dst = member_offset(G.frame_t, "eth_dst")) < 0 ||
        (G.frame_eth_src = member_offset(G.frame_t, "eth_src")) < 0 ||
        (G.srv6_segments = member_offset(G.srv6_t, "segments")) < 0 ||
        (G.srv6_segments_left = member_offset(G.srv6_t, "segments_left")) < 0)
        return NULL;
    PyObject *progs = cfg_get(d, "programs");
    if (progs == NULL)
        return NULL;
    PyObject *seq = PySequence_Fast(progs, "_fastwire.configure: programs must be a sequence");
    if (seq == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++)
        if (parse_program(PySequence_Fast_GET_ITEM(seq, i)) == NULL) {
            Py_DECREF(seq);
            clear_tables();
            return NULL;
        }
    Py_DECREF(seq);
    memset(G.hits, 0, sizeof(G.hits));
    memset(G.falls, 0, sizeof(G.falls));
    G.ready = 1;
    Py_RETURN_NONE;
}

static PyObject *fw_stats(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    static const char *names[NFUNC] = {"encode_frame", "decode_frame", "encode_packet",
                                       "decode_packet"};
    PyObject *d = PyDict_New();
    if (d == NULL)
        return NULL;
    for (int i = 0; i < NFUNC; i++) {
        PyObject *v = Py_BuildValue("(KK)", G.hits[i], G.falls[i]);
        if (v == NULL || PyDict_SetItemString(d, names[i], v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(v);
    }
    return d;
}

static PyObject *fw_crc32(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer data;
    unsigned int start = 0;
    if (!PyArg_ParseTuple(args, "y*|I", &data, &start))
        return NULL;
    uint32_t crc = crc_update(start, (const uint8_t *)data.buf, data.len);
    PyBuffer_Release(&data);
    return PyLong_FromUnsignedLong(crc);
}

#define FAST(name, doc)                                                                       \
    {#name, (PyCFunction)(void (*)(void))fw_##name##_0, METH_FASTCALL | METH_KEYWORDS, doc},  \
    {"try_" #name, (PyCFunction)(void (*)(void))fw_##name##_1, METH_FASTCALL | METH_KEYWORDS, \
     "Like " #name " but NotImplemented instead of running the Python reference."}

static PyMethodDef methods[] = {
    FAST(encode_frame, "encode_frame(frame, pkt, buf, offset=0) -> bytes written (C fast path)."),
    FAST(decode_frame, "decode_frame(data, *, verify_icrc=True) -> (Frame, MrcPacket) (C fast path)."),
    FAST(encode_packet, "encode_packet(pkt, buf, offset=0) -> end offset (C fast path)."),
    FAST(decode_packet, "decode_packet(data, offset=0, end=None) -> MrcPacket (C fast path)."),
    {"configure", fw_configure, METH_O, "Install the stack programs (hosts/wire/fastpath.py)."},
    {"stats", fw_stats, METH_NOARGS, "{function: (handled in C, handed to Python)}."},
    {"crc32", fw_crc32, METH_VARARGS, "crc32(data, value=0): the table CRC-32 used for headers."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_fastwire",
    "C fast path of the MRC wire codec (table-driven; see hosts/wire/fastpath.py).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fastwire(void) {
    crc_init();
    return PyModule_Create(&moduledef);
}
