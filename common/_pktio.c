/* Batched raw-packet I/O: one recvmmsg / sendmmsg call per batch of frames.
 *
 * C accelerator of common/pktio.py (the pure-Python reference, one recv/send per frame).
 * Every function takes a socket file descriptor and works on buffers the caller owns; the
 * buffers are held (Py_buffer exports) while the GIL is released around the system call, so
 * another thread can neither free nor resize them meanwhile.
 *
 *   recv_into(fd, buf, stride, size, lengths, limit[, stamps]) -> int
 *       Frame i lands in buf[i*stride : i*stride+size] (truncated to size <= stride bytes, as
 *       recv_into does); lengths[i] (a list) gets its length. Returns how many arrived (0: none
 *       ready). A stride of an odd number of cache lines keeps the slots from mapping to the
 *       same cache sets (a 64 KiB stride made the copies twice as slow). With stamps (a list),
 *       stamps[i] gets the kernel's receive time of frame i (SO_TIMESTAMPNS, which the caller
 *       enabled on the socket) in seconds of CLOCK_REALTIME, 0.0 when the frame has none.
 *   recv_bytes(fd, buf, stride, size, limit) -> list[bytes]
 *       The same with buf as scratch space, each frame copied out into its own bytes object.
 *   send(fd, frames, lengths, start, count) -> (sent, sent_bytes, errno)
 *       Sends frames[start:start+count] (lengths[i] bytes of frames[i] when lengths is not
 *       None) and stops at the first failure: errno is 0 when all went out, else the error of
 *       frame start+sent (which was not sent). A frame that is not a buffer or a length
 *       outside its frame raises when sending reaches it (the frames before it were tried).
 *   send(fd, frames, lengths, start, count, drop, failed) -> (sent, sent_bytes, errno, first)
 *       The same, but a failure whose errno is in drop (a set, tuple or list of errnos; True:
 *       any errno) is a dropped frame: its index is appended to the list failed and sending
 *       goes on with the next frame, in the same call (the buffers stay exported: a batch to
 *       a full queue costs one call, not one per dropped frame). errno is the failure that
 *       stopped the call (0: every frame was tried), first the errno of the first failure.
 *
 *   ring_recv(ring, head, frame_size, frame_nr, limit) -> (frames, head, newest, dropped)
 *       Walks a TPACKET_V2 receive ring (PACKET_RX_RING, mapped by common/pktring.py) from
 *       slot head: every slot the kernel handed over (TP_STATUS_USER) is copied out into a
 *       bytes object and given back (TP_STATUS_KERNEL), up to limit frames, in order. Returns
 *       the frames, the slot to start from next time, the kernel's receive time of the
 *       newest frame (seconds of CLOCK_REALTIME, 0.0 when none came) and how many slots held
 *       a frame cut short by the slot size (dropped, given back). No system call.
 *
 * Receive errors other than EAGAIN raise OSError; EINTR is retried after running signal
 * handlers (PEP 475). Sockets are used with MSG_DONTWAIT: a call never blocks.
 */
#define _GNU_SOURCE
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <linux/if_packet.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

#define PKTIO_MAX_BATCH 1024 /* UIO_MAXIOV: the kernel's own cap on one *mmsg call */

#define PKTIO_SMALL 64 /* batches up to this size use arrays on the stack, no allocation */

#define PKTIO_CTRL CMSG_SPACE(sizeof(struct timespec)) /* one SCM_TIMESTAMPNS per frame */

typedef struct {
    struct mmsghdr *msgs;
    struct iovec *iov;
    char *ctrl; /* PKTIO_CTRL bytes per message when timestamps are wanted, else NULL */
    struct mmsghdr small_msgs[PKTIO_SMALL];
    struct iovec small_iov[PKTIO_SMALL];
    char small_ctrl[PKTIO_SMALL * PKTIO_CTRL] __attribute__((aligned(8)));
} msgvec;

static void msgvec_init(msgvec *v) {
    v->msgs = NULL;
    v->iov = NULL;
    v->ctrl = NULL;
}

static int msgvec_alloc(msgvec *v, Py_ssize_t n) {
    if (n <= PKTIO_SMALL) {
        v->msgs = v->small_msgs;
        v->iov = v->small_iov;
        memset(v->msgs, 0, (size_t)n * sizeof(struct mmsghdr));
    } else {
        v->msgs = PyMem_Calloc((size_t)n, sizeof(struct mmsghdr));
        v->iov = PyMem_Calloc((size_t)n, sizeof(struct iovec));
        if (v->msgs == NULL || v->iov == NULL) {
            PyMem_Free(v->msgs);
            PyMem_Free(v->iov);
            msgvec_init(v);
            PyErr_NoMemory();
            return -1;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        v->msgs[i].msg_hdr.msg_iov = &v->iov[i];
        v->msgs[i].msg_hdr.msg_iovlen = 1;
    }
    return 0;
}

/* Give every message a control buffer for its receive timestamp. */
static int msgvec_ctrl(msgvec *v, Py_ssize_t n) {
    if (n <= PKTIO_SMALL) {
        v->ctrl = v->small_ctrl;
    } else {
        v->ctrl = PyMem_Calloc((size_t)n, PKTIO_CTRL);
        if (v->ctrl == NULL) {
            PyErr_NoMemory();
            return -1;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        v->msgs[i].msg_hdr.msg_control = v->ctrl + i * PKTIO_CTRL;
        v->msgs[i].msg_hdr.msg_controllen = PKTIO_CTRL;
    }
    return 0;
}

/* The SCM_TIMESTAMPNS of a received message in seconds, 0.0 when it has none. */
static double msg_stamp(struct msghdr *m) {
    for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c != NULL; c = CMSG_NXTHDR(m, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS &&
            c->cmsg_len >= CMSG_LEN(sizeof(struct timespec))) {
            struct timespec ts;
            memcpy(&ts, CMSG_DATA(c), sizeof ts);
            return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
        }
    }
    return 0.0;
}

static void msgvec_free(msgvec *v) {
    if (v->msgs != v->small_msgs)
        PyMem_Free(v->msgs);
    if (v->iov != v->small_iov)
        PyMem_Free(v->iov);
    if (v->ctrl != NULL && v->ctrl != v->small_ctrl)
        PyMem_Free(v->ctrl);
}

/* Common argument checks of the receive functions; returns the batch size or -1. */
static Py_ssize_t rx_batch(int fd, const Py_buffer *buf, Py_ssize_t stride, Py_ssize_t size,
                           Py_ssize_t limit) {
    if (fd < 0) {
        errno = EBADF;
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    if (stride <= 0 || stride > (1 << 24)) {
        PyErr_Format(PyExc_ValueError, "stride must be 1..%d bytes, got %zd", 1 << 24, stride);
        return -1;
    }
    if (size <= 0 || size > stride) {
        PyErr_Format(PyExc_ValueError, "size must be 1..stride (%zd) bytes, got %zd", stride, size);
        return -1;
    }
    if (limit < 0) {
        PyErr_Format(PyExc_ValueError, "limit must be >= 0, got %zd", limit);
        return -1;
    }
    Py_ssize_t slots = buf->len >= size ? (buf->len - size) / stride + 1 : 0;
    if (limit > slots) {
        PyErr_Format(PyExc_ValueError, "limit %zd exceeds the %zd frames of %zd bytes the buffer holds",
                     limit, slots, stride);
        return -1;
    }
    if (limit > PKTIO_MAX_BATCH)
        limit = PKTIO_MAX_BATCH;
    return limit;
}

/* recvmmsg into n consecutive slots of buf; returns the count (0 when nothing is ready) or -1
 * with an exception set. */
static int rx_call(int fd, Py_buffer *buf, Py_ssize_t stride, Py_ssize_t size, Py_ssize_t n,
                   msgvec *v) {
    char *base = buf->buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        v->iov[i].iov_base = base + i * stride;
        v->iov[i].iov_len = (size_t)size;
        v->msgs[i].msg_len = 0;
        if (v->ctrl != NULL)
            v->msgs[i].msg_hdr.msg_controllen = PKTIO_CTRL;
    }
    for (;;) {
        int got;
        int err;
        Py_BEGIN_ALLOW_THREADS
        got = recvmmsg(fd, v->msgs, (unsigned int)n, MSG_DONTWAIT, NULL);
        err = errno;
        Py_END_ALLOW_THREADS
        if (got >= 0)
            return got;
        if (err == EAGAIN || err == EWOULDBLOCK)
            return 0;
        if (err == EINTR) {
            if (PyErr_CheckSignals() < 0)
                return -1;
            continue;
        }
        errno = err;
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
}

static PyObject *pktio_recv_into(PyObject *self, PyObject *args) {
    (void)self;
    int fd;
    Py_buffer buf;
    Py_ssize_t stride, size, limit;
    PyObject *lengths, *stamps = NULL;
    if (!PyArg_ParseTuple(args, "iw*nnO!n|O!:recv_into", &fd, &buf, &stride, &size, &PyList_Type,
                          &lengths, &limit, &PyList_Type, &stamps))
        return NULL;
    PyObject *result = NULL;
    msgvec v;
    msgvec_init(&v);
    Py_ssize_t n = rx_batch(fd, &buf, stride, size, limit);
    if (n < 0)
        goto done;
    if (n > PyList_GET_SIZE(lengths) || (stamps != NULL && n > PyList_GET_SIZE(stamps))) {
        PyErr_Format(PyExc_ValueError, "lengths (%zd) and stamps hold fewer entries than limit "
                     "%zd", PyList_GET_SIZE(lengths), n);
        goto done;
    }
    if (n == 0) {
        result = PyLong_FromLong(0);
        goto done;
    }
    if (msgvec_alloc(&v, n) < 0)
        goto done;
    if (stamps != NULL && msgvec_ctrl(&v, n) < 0)
        goto done;
    int got = rx_call(fd, &buf, stride, size, n, &v);
    if (got < 0)
        goto done;
    if (stamps != NULL) {
        for (int i = 0; i < got; i++) {
            PyObject *value = PyFloat_FromDouble(msg_stamp(&v.msgs[i].msg_hdr));
            if (value == NULL)
                goto done;
            if (i >= PyList_GET_SIZE(stamps)) { /* shrank while the GIL was released */
                Py_DECREF(value);
                PyErr_SetString(PyExc_RuntimeError, "stamps list shrank during recv_into");
                goto done;
            }
            PyList_SetItem(stamps, i, value); /* steals the reference */
        }
    }
    for (int i = 0; i < got; i++) {
        unsigned int len = v.msgs[i].msg_len;
        if ((Py_ssize_t)len > size)
            len = (unsigned int)size;
        PyObject *value = PyLong_FromUnsignedLong(len);
        if (value == NULL)
            goto done;
        /* lengths may have shrunk while the GIL was released: check again */
        if (i >= PyList_GET_SIZE(lengths)) {
            Py_DECREF(value);
            PyErr_SetString(PyExc_RuntimeError, "lengths list shrank during recv_into");
            goto done;
        }
        PyList_SetItem(lengths, i, value); /* steals the reference */
    }
    result = PyLong_FromLong(got);
done:
    msgvec_free(&v);
    PyBuffer_Release(&buf);
    return result;
}

static PyObject *pktio_recv_bytes(PyObject *self, PyObject *args) {
    (void)self;
    int fd;
    Py_buffer buf;
    Py_ssize_t stride, size, limit;
    if (!PyArg_ParseTuple(args, "iw*nnn:recv_bytes", &fd, &buf, &stride, &size, &limit))
        return NULL;
    PyObject *result = NULL;
    msgvec v;
    msgvec_init(&v);
    Py_ssize_t n = rx_batch(fd, &buf, stride, size, limit);
    if (n < 0)
        goto done;
    if (n == 0) {
        result = PyList_New(0);
        goto done;
    }
    if (msgvec_alloc(&v, n) < 0)
        goto done;
    int got = rx_call(fd, &buf, stride, size, n, &v);
    if (got < 0)
        goto done;
    PyObject *list = PyList_New(got);
    if (list == NULL)
        goto done;
    const char *base = buf.buf;
    for (int i = 0; i < got; i++) {
        Py_ssize_t len = (Py_ssize_t)v.msgs[i].msg_len;
        if (len > size)
            len = size;
        PyObject *frame = PyBytes_FromStringAndSize(base + (Py_ssize_t)i * stride, len);
        if (frame == NULL) {
            Py_DECREF(list);
            goto done;
        }
        PyList_SET_ITEM(list, i, frame);
    }
    result = list;
done:
    msgvec_free(&v);
    PyBuffer_Release(&buf);
    return result;
}

static PyObject *pktio_ring_recv(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer ring;
    Py_ssize_t head, frame_size, frame_nr, limit;
    if (!PyArg_ParseTuple(args, "w*nnnn:ring_recv", &ring, &head, &frame_size, &frame_nr,
                          &limit))
        return NULL;
    PyObject *result = NULL;
    if (frame_size < (Py_ssize_t)sizeof(struct tpacket2_hdr) || frame_nr < 1 ||
        frame_size * frame_nr > ring.len || head < 0 || head >= frame_nr) {
        PyErr_SetString(PyExc_ValueError, "ring_recv: ring geometry does not fit the buffer");
        goto done;
    }
    PyObject *list = PyList_New(0);
    if (list == NULL)
        goto done;
    double newest = 0.0;
    Py_ssize_t dropped = 0, got = 0;
    char *base = ring.buf;
    while (got < limit) {
        struct tpacket2_hdr *h = (struct tpacket2_hdr *)(base + head * frame_size);
        /* the kernel writes the frame, then (after a barrier) the status: read in that order */
        uint32_t status = __atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE);
        if (!(status & TP_STATUS_USER))
            break;
        Py_ssize_t mac = h->tp_mac, len = h->tp_snaplen;
        if (len < (Py_ssize_t)h->tp_len || mac + len > frame_size) {
            dropped++; /* longer than a slot: never forwarded cut short */
        } else {
            PyObject *frame = PyBytes_FromStringAndSize((char *)h + mac, len);
            if (frame == NULL || PyList_Append(list, frame) < 0) {
                Py_XDECREF(frame); /* out of memory: keep this slot for the next call */
                PyErr_Clear();
                break;
            }
            Py_DECREF(frame);
            got++;
        }
        newest = (double)h->tp_sec + (double)h->tp_nsec * 1e-9;
        __atomic_store_n(&h->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
        head = head + 1 == frame_nr ? 0 : head + 1;
    }
    result = Py_BuildValue("(Nndn)", list, head, newest, dropped);
done:
    PyBuffer_Release(&ring);
    return result;
}

/* 1 if a send failure with errno err is a drop, 0 if not, -1 with an exception set. */
static int is_drop(PyObject *drop, int err) {
    if (drop == Py_True)
        return 1;
    PyObject *code = PyLong_FromLong(err);
    if (code == NULL)
        return -1;
    int found = PySequence_Contains(drop, code);
    Py_DECREF(code);
    return found;
}

static PyObject *pktio_send(PyObject *self, PyObject *args) {
    (void)self;
    int fd;
    PyObject *frames_obj, *lengths_obj, *drop = Py_None, *failed = NULL;
    Py_ssize_t start, count;
    if (!PyArg_ParseTuple(args, "iOOnn|OO!:send", &fd, &frames_obj, &lengths_obj, &start, &count,
                          &drop, &PyList_Type, &failed))
        return NULL;
    int drop_mode = drop != Py_None;
    if (drop_mode && drop != Py_True && !PyAnySet_Check(drop) && !PyTuple_Check(drop) &&
        !PyList_Check(drop))
        return PyErr_Format(PyExc_TypeError, "drop must be None, True or a set of errnos");
    if (drop_mode && failed == NULL)
        return PyErr_Format(PyExc_TypeError, "send: a drop set needs a failed list");
    if (fd < 0) {
        errno = EBADF;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    /* A private tuple: the caller's list may change while the GIL is released, the tuple
     * (and the exports below) keep every frame alive and unchanged in size. */
    PyObject *frames = PySequence_Tuple(frames_obj);
    if (frames == NULL)
        return NULL;
    Py_ssize_t total = PyTuple_GET_SIZE(frames);
    if (start < 0 || start > total) {
        Py_DECREF(frames);
        return PyErr_Format(PyExc_ValueError, "start %zd outside 0..%zd", start, total);
    }
    if (count < 0 || count > total - start)
        count = total - start;
    Py_ssize_t nlen = -1;
    PyObject *lengths = NULL; /* a private tuple too: read again after each system call */
    if (lengths_obj != Py_None) {
        if (!PySequence_Check(lengths_obj)) {
            Py_DECREF(frames);
            return PyErr_Format(PyExc_TypeError, "lengths must be a sequence of ints or None");
        }
        lengths = PySequence_Tuple(lengths_obj);
        if (lengths == NULL) {
            Py_DECREF(frames);
            return NULL;
        }
        nlen = PyTuple_GET_SIZE(lengths);
        if (nlen < start + count) {
            Py_DECREF(frames);
            Py_DECREF(lengths);
            return PyErr_Format(PyExc_ValueError, "lengths holds %zd entries, frames need %zd",
                                nlen, start + count);
        }
    }
    Py_ssize_t chunk = count < PKTIO_MAX_BATCH ? count : PKTIO_MAX_BATCH;
    Py_buffer *views = NULL;
    msgvec v;
    msgvec_init(&v);
    PyObject *result = NULL;
    Py_ssize_t pos = 0, sent = 0, sent_bytes = 0; /* frames tried, frames sent */
    int error = 0, first = 0;
    Py_buffer small_views[PKTIO_SMALL];
    if (chunk > 0) {
        views = chunk <= PKTIO_SMALL ? small_views : PyMem_Calloc((size_t)chunk, sizeof(Py_buffer));
        if (views == NULL) {
            PyErr_NoMemory();
            goto out;
        }
        if (msgvec_alloc(&v, chunk) < 0)
            goto out;
    }
    while (pos < count && error == 0) {
        Py_ssize_t n = count - pos < chunk ? count - pos : chunk;
        Py_ssize_t held = 0;
        for (; held < n; held++) {
            Py_ssize_t idx = start + pos + held;
            if (PyObject_GetBuffer(PyTuple_GET_ITEM(frames, idx), &views[held], PyBUF_SIMPLE) < 0)
                break;
            Py_ssize_t len = views[held].len;
            if (nlen >= 0) {
                PyObject *item = PyTuple_GET_ITEM(lengths, idx);
                /* any integer (__index__), as the reference's slicing takes; it may run
                 * Python code: the frames and lengths are private tuples and the buffers
                 * exported, nothing it can do reaches them. Out of range: clamped, then
                 * refused below as any length beyond the frame. */
                Py_ssize_t want = PyNumber_AsSsize_t(item, NULL);
                if (want == -1 && PyErr_Occurred()) {
                    PyBuffer_Release(&views[held]);
                    break;
                }
                if (want < 0 || want > len) {
                    PyErr_Format(PyExc_ValueError,
                                 "lengths[%zd] = %zd outside the frame's 0..%zd bytes", idx,
                                 want, len);
                    PyBuffer_Release(&views[held]);
                    break;
                }
                len = want;
            }
            v.iov[held].iov_base = views[held].buf;
            v.iov[held].iov_len = (size_t)len;
            v.msgs[held].msg_len = 0;
        }
        /* A bad frame or length (frame start+pos+held) raises once the frames before it have
         * been tried, as the reference raises when it reaches it: the exception waits while
         * those are sent (and is dropped if one of them ends the call with an errno). */
        PyObject *bad_type = NULL, *bad_value = NULL, *bad_tb = NULL;
        if (PyErr_Occurred()) {
            PyErr_Fetch(&bad_type, &bad_value, &bad_tb);
            n = held;
        }
        Py_ssize_t done = 0;
        while (done < n) {
            int r;
            int err;
            Py_BEGIN_ALLOW_THREADS
            r = sendmmsg(fd, v.msgs + done, (unsigned int)(n - done), MSG_DONTWAIT);
            err = errno;
            Py_END_ALLOW_THREADS
            if (r > 0) {
                for (int i = 0; i < r; i++)
                    sent_bytes += (Py_ssize_t)v.iov[done + i].iov_len;
                done += r;
                sent += r;
                continue;
            }
            if (r < 0 && err == EINTR) {
                if (PyErr_CheckSignals() < 0)
                    break;
                continue;
            }
            if (r >= 0)
                err = EIO; /* r == 0 with work left: never expected */
            if (first == 0)
                first = err;
            if (drop_mode) { /* frame start+pos+done failed: a drop, or the end */
                int dropped = is_drop(drop, err);
                if (dropped < 0)
                    break;
                if (dropped) {
                    PyObject *index = PyLong_FromSsize_t(start + pos + done);
                    if (index == NULL)
                        break;
                    int rc = PyList_Append(failed, index);
                    Py_DECREF(index);
                    if (rc < 0)
                        break;
                    done++;
                    continue;
                }
            }
            error = err;
            break;
        }
        for (Py_ssize_t i = 0; i < n; i++)
            PyBuffer_Release(&views[i]);
        pos += done;
        if (bad_type != NULL) {
            if (PyErr_Occurred() || error != 0) { /* a signal's exception, or the end first */
                Py_XDECREF(bad_type);
                Py_XDECREF(bad_value);
                Py_XDECREF(bad_tb);
            } else {
                PyErr_Restore(bad_type, bad_value, bad_tb);
            }
        }
        if (PyErr_Occurred())
            goto out;
    }
    result = drop_mode ? Py_BuildValue("(nnii)", sent, sent_bytes, error, first)
                       : Py_BuildValue("(nni)", sent, sent_bytes, error);
out:
    msgvec_free(&v);
    if (views != small_views)
        PyMem_Free(views);
    Py_DECREF(frames);
    Py_XDECREF(lengths);
    return result;
}

static PyMethodDef pktio_methods[] = {
    {"recv_into", pktio_recv_into, METH_VARARGS,
     "recv_into(fd, buf, stride, size, lengths, limit[, stamps]) -> int: one recvmmsg into "
     "buffer slots (stamps: the kernel's receive times)."},
    {"recv_bytes", pktio_recv_bytes, METH_VARARGS,
     "recv_bytes(fd, scratch, stride, size, limit) -> list[bytes]: one recvmmsg, frames copied "
     "out."},
    {"ring_recv", pktio_ring_recv, METH_VARARGS,
     "ring_recv(ring, head, frame_size, frame_nr, limit) -> (frames, head, newest, dropped): "
     "frames copied out of a TPACKET_V2 receive ring, slots given back."},
    {"send", pktio_send, METH_VARARGS,
     "send(fd, frames, lengths, start, count[, drop, failed]) -> (sent, sent_bytes, errno[, "
     "first_errno]): sendmmsg until the first failure that is not a drop."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef pktio_module = {
    PyModuleDef_HEAD_INIT, "_pktio",
    "Batched raw-packet I/O (recvmmsg/sendmmsg); reference: common/pktio.py.", -1,
    pktio_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__pktio(void) {
    PyObject *m = PyModule_Create(&pktio_module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddIntConstant(m, "MAX_BATCH", PKTIO_MAX_BATCH) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
