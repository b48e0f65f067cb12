/* Integer columns of one SQLite table b-tree, decoded straight from the file's pages.
 *
 * The compiled half of gpuscope/nsys/pages.py (which says when it is used and holds the numpy
 * version of the same decoding, the fallback where this module was not built). SQLite's on-disk
 * format: https://www.sqlite.org/fileformat2.html (sections 1.6 "B-tree Pages", 2.1 "Record
 * Format").
 *
 *     cells(buffer, page_size, root) -> n | error code
 *     scan(buffer, page_size, usable, root, kinds, rowid, values, nulls) -> 0 | error code
 *
 * cells() counts the rows (the cells of the table's leaf pages); the caller allocates the outputs
 * for n rows (numpy arrays: large ones get huge pages, a tenth of the page faults of a bytearray)
 * and scan() fills them. kinds[j] says what to do with record column j (j < len(kinds)): 0 skip
 * it, 1 decode it as an integer, 2 keep only whether it is NULL. The outputs:
 *   rowid  n int64;
 *   values (number of kind-1 columns) x n int64, column after column (NULL, 0 and 1 constants
 *          decoded as 0, 0, 1);
 *   nulls  (number of kind-1 and kind-2 columns) x n uint8, in column order, 1 where NULL.
 * Anything this decoder does not handle returns a negative int, never raises, and the caller reads
 * through sqlite3: ERR_LAYOUT (a page or cell outside the file or its page, a loop in the tree,
 * an unknown page type, a row count other than the outputs'), ERR_OVERFLOW (a cell whose payload
 * spills onto overflow pages), ERR_TYPE (a float, text or blob where an integer was asked for).
 * Outputs of the wrong size raise ValueError.
 * Every read is bounds-checked: a damaged file gives an error code, not a crash.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define ERR_LAYOUT (-1)
#define ERR_OVERFLOW (-2)
#define ERR_TYPE (-3)
#define ERR_MEMORY (-4)
#define MAX_DEPTH 64
#define MAX_COLUMNS 4096

typedef struct {
    const uint8_t *buf;
    Py_ssize_t len, page_size, usable, pages;
} File;

typedef struct {
    uint32_t *v;
    Py_ssize_t n, cap, visits;
    Py_ssize_t cells;
} Leaves;

static inline uint32_t be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* A varint at p (1..9 bytes), not reading at or past end; the number of bytes, 0 if cut off. */
static inline int varint(const uint8_t *p, const uint8_t *end, uint64_t *out) {
    if (p < end && p[0] < 0x80) {   /* most serial types, small payloads and rowids */
        *out = p[0];
        return 1;
    }
    uint64_t v = 0;
    for (int i = 0; i < 9; i++) {
        if (p + i >= end)
            return 0;
        uint8_t b = p[i];
        if (i == 8) {
            *out = (v << 8) | b;
            return 9;
        }
        v = (v << 7) | (b & 0x7F);
        if (!(b & 0x80)) {
            *out = v;
            return i + 1;
        }
    }
    return 0;
}

/* The page's offset in the file and its b-tree header's (page 1 starts after the 100-byte file
 * header), or -1 when the page is not in the file. */
static Py_ssize_t page_base(const File *f, uint32_t page, Py_ssize_t *header) {
    if (page < 1 || (Py_ssize_t)page > f->pages)
        return -1;
    Py_ssize_t base = (Py_ssize_t)(page - 1) * f->page_size;
    *header = base + (page == 1 ? 100 : 0);
    return base;
}

/* Leaf pages of the subtree under `page`, in key (rowid) order. */
static int walk(const File *f, uint32_t page, int depth, Leaves *out) {
    Py_ssize_t h, base = page_base(f, page, &h);
    if (base < 0 || depth > MAX_DEPTH || ++out->visits > f->pages)
        return ERR_LAYOUT;
    const uint8_t *b = f->buf;
    unsigned n = ((unsigned)b[h + 3] << 8) | b[h + 4];
    if (b[h] == 13) {
        if (out->n == out->cap) {
            Py_ssize_t cap = out->cap ? 2 * out->cap : 256;
            uint32_t *v = PyMem_RawRealloc(out->v, (size_t)cap * sizeof(uint32_t));
            if (!v)
                return ERR_MEMORY;
            out->v = v;
            out->cap = cap;
        }
        out->v[out->n++] = page;
        out->cells += n;
        return 0;
    }
    if (b[h] != 5 || h + 12 + 2 * (Py_ssize_t)n > base + f->page_size)
        return ERR_LAYOUT;
    for (unsigned i = 0; i < n; i++) {
        Py_ssize_t cell = base + (((Py_ssize_t)b[h + 12 + 2 * i] << 8) | b[h + 13 + 2 * i]);
        if (cell + 4 > base + f->page_size)
            return ERR_LAYOUT;
        int err = walk(f, be32(b + cell), depth + 1, out);
        if (err)
            return err;
    }
    return walk(f, be32(b + h + 8), depth + 1, out);
}

/* Bytes of a value of serial type t. */
static inline uint64_t value_size(uint64_t t) {
    static const uint8_t small[12] = {0, 1, 2, 3, 4, 6, 8, 8, 0, 0, 0, 0};
    return t < 12 ? small[t] : (t - 12) / 2;
}

/* A big-endian two's-complement integer of w bytes (1, 2, 3, 4, 6 or 8). */
static inline int64_t be_int(const uint8_t *p, int w) {
    switch (w) {
    case 1:
        return (int8_t)p[0];
    case 2:
        return (int16_t)(((uint16_t)p[0] << 8) | p[1]);
    case 4:
        return (int32_t)be32(p);
    case 8:
        return (int64_t)(((uint64_t)be32(p) << 32) | be32(p + 4));
    default: {
        uint64_t v = 0;
        for (int i = 0; i < w; i++)
            v = (v << 8) | p[i];
        int shift = 64 - 8 * w;
        return (int64_t)(v << shift) >> shift;
    }
    }
}

typedef struct {
    const uint8_t *kinds;
    Py_ssize_t k, n_values, n_nulls;
    int64_t *rowid, *values;
    uint8_t *nulls;
} Out;

/* Where column j's values and NULL flags go (NULL: not wanted), resolved once per scan so the
 * per-row loop does no index arithmetic and, with restrict, reloads nothing after its stores. */
typedef struct {
    const uint8_t *restrict kinds;
    Py_ssize_t k;
    int64_t **value_col;
    uint8_t **null_col;
} Columns;

/* One leaf cell (payload length, rowid, record) into row `row` of the outputs. */
static inline int decode_cell(Py_ssize_t usable, const uint8_t *p, const uint8_t *page_end, Py_ssize_t row,
                              const Columns *cols, int64_t *restrict rowid_out) {
    uint64_t payload, rowid, hsize;
    int a = varint(p, page_end, &payload);
    if (!a)
        return ERR_LAYOUT;
    int b = varint(p + a, page_end, &rowid);
    if (!b)
        return ERR_LAYOUT;
    if (payload > (uint64_t)(usable - 35))
        return ERR_OVERFLOW;
    const uint8_t *rec = p + a + b, *rec_end = rec + payload;
    if (rec_end > page_end)
        return ERR_LAYOUT;
    int c = varint(rec, rec_end, &hsize);
    if (!c || hsize > payload || hsize < (uint64_t)c)
        return ERR_LAYOUT;
    rowid_out[row] = (int64_t)rowid;
    const uint8_t *hp = rec + c, *hend = rec + hsize, *vp = hend;
    const uint8_t *restrict kinds = cols->kinds;
    int64_t *const *value_col = cols->value_col;
    uint8_t *const *null_col = cols->null_col;
    const Py_ssize_t k = cols->k;
    for (Py_ssize_t j = 0; j < k; j++) {
        uint64_t t = 0;   /* past the header's end: a column added later, NULL */
        if (hp < hend) {
            int d = varint(hp, hend, &t);
            if (!d)
                return ERR_LAYOUT;
            hp += d;
        }
        uint64_t size = value_size(t);
        if ((uint64_t)(rec_end - vp) < size)
            return ERR_LAYOUT;
        uint8_t kind = kinds[j];
        if (kind == 1) {
            int64_t v;
            if (t == 0 || t == 8)
                v = 0;
            else if (t == 9)
                v = 1;
            else if (t <= 6)
                v = be_int(vp, (int)size);
            else
                return ERR_TYPE;
            value_col[j][row] = v;
        }
        if (kind)
            null_col[j][row] = (t == 0);
        vp += size;
    }
    return 0;
}

static int decode(const File *f, const Leaves *leaves, Py_ssize_t n, Out *o) {
    int err = 0;
    Py_ssize_t row = 0, vi = 0, ni = 0;
    Columns cols = {o->kinds, o->k, PyMem_RawCalloc((size_t)o->k + 1, sizeof(int64_t *)),
                    PyMem_RawCalloc((size_t)o->k + 1, sizeof(uint8_t *))};
    if (!cols.value_col || !cols.null_col) {
        err = ERR_MEMORY;
        goto done;
    }
    for (Py_ssize_t j = 0; j < o->k; j++) {
        if (o->kinds[j] == 1)
            cols.value_col[j] = o->values + n * vi++;
        if (o->kinds[j])
            cols.null_col[j] = o->nulls + n * ni++;
    }
    for (Py_ssize_t i = 0; i < leaves->n && !err; i++) {
        Py_ssize_t h, base = page_base(f, leaves->v[i], &h);
        const uint8_t *b = f->buf, *page_end = b + base + f->page_size;
        unsigned cells = ((unsigned)b[h + 3] << 8) | b[h + 4];
        if (h + 8 + 2 * (Py_ssize_t)cells > base + f->page_size || row + cells > n) {
            err = ERR_LAYOUT;
            break;
        }
        for (unsigned c = 0; c < cells && !err; c++) {
            Py_ssize_t off = ((Py_ssize_t)b[h + 8 + 2 * c] << 8) | b[h + 9 + 2 * c];
            if (base + off < h + 8 || off >= f->page_size)
                err = ERR_LAYOUT;
            else
                err = decode_cell(f->usable, b + base + off, page_end, row++, &cols, o->rowid);
        }
    }
    if (!err && row != n)
        err = ERR_LAYOUT;
done:
    PyMem_RawFree(cols.value_col);
    PyMem_RawFree(cols.null_col);
    return err;
}

static int open_file(File *f, Py_buffer *view, Py_ssize_t page_size, Py_ssize_t usable) {
    f->buf = view->buf;
    f->len = view->len;
    f->page_size = page_size;
    f->usable = usable;
    f->pages = page_size > 0 ? view->len / page_size : 0;
    if (page_size < 512 || page_size > 65536 || usable < 480 || usable > page_size)
        return ERR_LAYOUT;
    return 0;
}

static PyObject *cells(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    Py_ssize_t page_size;
    unsigned long root;
    if (!PyArg_ParseTuple(args, "y*nk", &view, &page_size, &root))
        return NULL;
    File f;
    Leaves leaves = {0};
    int err = open_file(&f, &view, page_size, page_size);
    if (!err) {
        Py_BEGIN_ALLOW_THREADS
        err = walk(&f, (uint32_t)root, 0, &leaves);
        Py_END_ALLOW_THREADS
    }
    PyMem_RawFree(leaves.v);
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(err ? err : leaves.cells);
}

static int sized(Py_buffer *b, Py_ssize_t bytes, const char *what) {
    if (b->len != bytes) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes where %zd are needed", what, b->len, bytes);
        return -1;
    }
    return 0;
}

static PyObject *scan(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view, kinds, rowid_b, values_b, nulls_b;
    Py_ssize_t page_size, usable;
    unsigned long root;
    if (!PyArg_ParseTuple(args, "y*nnky*w*w*w*", &view, &page_size, &usable, &root, &kinds, &rowid_b, &values_b,
                          &nulls_b))
        return NULL;
    PyObject *result = NULL;
    Leaves leaves = {0};
    File f;
    Out o = {kinds.buf, kinds.len, 0, 0, rowid_b.buf, values_b.buf, nulls_b.buf};
    Py_ssize_t n = rowid_b.len / 8;
    int err = open_file(&f, &view, page_size, usable);
    if (kinds.len > MAX_COLUMNS)
        err = ERR_LAYOUT;
    for (Py_ssize_t j = 0; j < o.k; j++) {
        o.n_values += o.kinds[j] == 1;
        o.n_nulls += o.kinds[j] != 0;
    }
    if (!err && (sized(&rowid_b, n * 8, "rowid") || sized(&values_b, n * 8 * o.n_values, "values")
                 || sized(&nulls_b, n * o.n_nulls, "nulls")))
        goto done;
    if (!err) {
        Py_BEGIN_ALLOW_THREADS
        err = walk(&f, (uint32_t)root, 0, &leaves);
        if (!err && leaves.cells != n)
            err = ERR_LAYOUT;
        if (!err)
            err = decode(&f, &leaves, n, &o);
        Py_END_ALLOW_THREADS
    }
    result = PyLong_FromLong(err);
done:
    PyMem_RawFree(leaves.v);
    PyBuffer_Release(&view);
    PyBuffer_Release(&kinds);
    PyBuffer_Release(&rowid_b);
    PyBuffer_Release(&values_b);
    PyBuffer_Release(&nulls_b);
    return result;
}

static PyMethodDef methods[] = {
    {"cells", cells, METH_VARARGS, "cells(buffer, page_size, root) -> rows of the table, or a negative error code"},
    {"scan", scan, METH_VARARGS,
     "scan(buffer, page_size, usable, root, kinds, rowid, values, nulls) -> 0 or a negative error code"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_pagescan",
                                    "Integer columns of a SQLite table, decoded from its pages.", -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__pagescan(void) { return PyModule_Create(&module); }
