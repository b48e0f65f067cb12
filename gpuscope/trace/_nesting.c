/* Nesting depth of intervals per group: the compiled half of gpuscope/trace/timeline.nesting_depth
 * (which holds the numpy version, used where this module was not built, and says what depth means).
 *
 *     depths(order, start, end, group, out) -> None
 *
 * order: int64 row indices sorted by (group, start), stable; start, end, group: int64 per row;
 * out: int16 per row, written. Within rows of equal (group, start) the longest is visited first
 * (end descending, then row order), as a push/pop stack would see them. A row's depth is the
 * number of rows of its group visited before it that end after it starts (capped at 32767): the
 * ends of visited rows are kept in a min-heap, and those at or before the current start leave it
 * (starts only grow within a group, so they never count again). O(n log depth) after the sort.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

typedef struct {
    int64_t *v;
    Py_ssize_t n;
} Heap;

static void heap_push(Heap *h, int64_t x) {
    Py_ssize_t i = h->n++;
    while (i > 0) {
        Py_ssize_t p = (i - 1) / 2;
        if (h->v[p] <= x)
            break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = x;
}

static void heap_pop(Heap *h) {
    int64_t x = h->v[--h->n];
    Py_ssize_t i = 0;
    for (;;) {
        Py_ssize_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && h->v[c + 1] < h->v[c])
            c++;
        if (h->v[c] >= x)
            break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n)
        h->v[i] = x;
}

/* Stable insertion sort of order[a:b] by end descending (tie blocks are small). */
static void longest_first(int64_t *order, Py_ssize_t a, Py_ssize_t b, const int64_t *end) {
    for (Py_ssize_t i = a + 1; i < b; i++) {
        int64_t r = order[i];
        Py_ssize_t j = i;
        while (j > a && end[order[j - 1]] < end[r]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = r;
    }
}

static int check(Py_buffer *b, Py_ssize_t itemsize, Py_ssize_t n, const char *what) {
    if (b->len != n * itemsize) {   /* (a simple buffer's itemsize need not be the element's) */
        PyErr_Format(PyExc_ValueError, "%s: expected %zd items of %zd bytes", what, n, itemsize);
        return -1;
    }
    return 0;
}

static PyObject *depths(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer order_b, start_b, end_b, group_b, out_b;
    if (!PyArg_ParseTuple(args, "y*y*y*y*w*", &order_b, &start_b, &end_b, &group_b, &out_b))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = order_b.len / 8;
    int64_t *order = NULL;
    Heap heap = {NULL, 0};
    if (check(&order_b, 8, n, "order") || check(&start_b, 8, n, "start") || check(&end_b, 8, n, "end")
        || check(&group_b, 8, n, "group") || check(&out_b, 2, n, "out"))
        goto done;
    const int64_t *start = start_b.buf, *end = end_b.buf, *group = group_b.buf;
    int16_t *out = out_b.buf;
    order = PyMem_RawMalloc((size_t)(n ? n : 1) * sizeof(int64_t));
    heap.v = PyMem_RawMalloc((size_t)(n ? n : 1) * sizeof(int64_t));
    if (!order || !heap.v) {
        PyErr_NoMemory();
        goto done;
    }
    memcpy(order, order_b.buf, (size_t)n * sizeof(int64_t));
    for (Py_ssize_t i = 0; i < n; i++) {
        if (order[i] < 0 || order[i] >= n) {
            PyErr_SetString(PyExc_ValueError, "order: an index out of range");
            goto done;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t i = 0;
    while (i < n) {
        int64_t g = group[order[i]], s = start[order[i]];
        Py_ssize_t b = i + 1;
        while (b < n && group[order[b]] == g && start[order[b]] == s)
            b++;
        if (b - i > 1)
            longest_first(order, i, b, end);
        if (i == 0 || group[order[i - 1]] != g)
            heap.n = 0;   /* a new group */
        while (heap.n && heap.v[0] <= s)
            heap_pop(&heap);
        for (Py_ssize_t j = i; j < b; j++) {
            int64_t r = order[j];
            /* rows of this tie block seen before r end after s unless zero-length (end == s) */
            Py_ssize_t d = heap.n;
            out[r] = (int16_t)(d > 32767 ? 32767 : d);
            if (end[r] > s)
                heap_push(&heap, end[r]);
        }
        i = b;
    }
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    PyMem_RawFree(order);
    PyMem_RawFree(heap.v);
    PyBuffer_Release(&order_b);
    PyBuffer_Release(&start_b);
    PyBuffer_Release(&end_b);
    PyBuffer_Release(&group_b);
    PyBuffer_Release(&out_b);
    return result;
}

static PyMethodDef methods[] = {
    {"depths", depths, METH_VARARGS, "depths(order, start, end, group, out): nesting depth per row into out"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_nesting", "Nesting depth of intervals per group.",
                                    -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__nesting(void) { return PyModule_Create(&module); }
