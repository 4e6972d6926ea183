/* runner: runs a model exported by ziggurat (runtime/export.py) without Python.
 *
 *   runner MODEL.so OUT_DIR IN0.npy [IN1.npy ...]
 *
 * Reads MODEL.so.abi (the plain-text ABI manifest) and the constants' byte
 * ranges of MODEL.so.weights.npz, dlopens MODEL.so, reads the inputs from
 * .npy files (little-endian, C order, the model's dtypes and sizes), calls
 * `void <entry>(void **args)` with args = inputs, outputs, constants, arena
 * (every buffer 64-byte aligned), and writes OUT_DIR/out<i>.npy for each
 * output and OUT_DIR/check<i>.npy for each index check (the smallest, then
 * the largest index a data-dependent node saw; runtime/signature.py).
 *
 * Build: cc -O2 -std=c99 runner.c -ldl -o runner
 *        aarch64-linux-gnu-gcc -O2 -std=c99 runner.c -ldl -o runner  (for an AArch64 board)
 * C99 plus POSIX (dlopen, posix_memalign). docs/targets.md. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BUFS 4096
#define MAX_RANK 16

typedef struct {
    char kind[16], dtype[16];
    long long nbytes, rank, dims[MAX_RANK];
    void *data;
} Buf;

static void die(const char *msg, const char *what) {
    fprintf(stderr, "runner: %s%s%s\n", msg, what ? ": " : "", what ? what : "");
    exit(1);
}

static void *aligned_buf(long long nbytes) {
    void *p = NULL;
    if (posix_memalign(&p, 64, (size_t)((nbytes + 63) / 64 * 64 + 64)) != 0) die("out of memory", NULL);
    memset(p, 0, (size_t)nbytes);
    return p;
}

/* Reads a .npy (v1-v3) whose descr and size must be `b`'s; its data into b->data. */
static void read_npy(const char *path, Buf *b) {
    FILE *f = fopen(path, "rb");
    unsigned char pre[12];
    if (!f) die("cannot open input", path);
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0) die("not an .npy file", path);
    long long hlen = pre[8] | (pre[9] << 8);
    if (pre[6] >= 2) {
        if (fread(pre + 10, 1, 2, f) != 2) die("truncated .npy", path);
        hlen |= ((long long)pre[10] << 16) | ((long long)pre[11] << 24);
    }
    char *h = malloc((size_t)hlen + 1);
    if (!h || fread(h, 1, (size_t)hlen, f) != (size_t)hlen) die("truncated .npy header", path);
    h[hlen] = 0;
    char want[40];
    snprintf(want, sizeof want, "'descr': '%s'", b->dtype);
    if (!strstr(h, want)) {
        fprintf(stderr, "runner: %s: expected dtype %s, header %s\n", path, b->dtype, h);
        exit(1);
    }
    if (strstr(h, "'fortran_order': True") && b->rank > 1) die("input is in Fortran order", path);
    long start = ftell(f);
    fseek(f, 0, SEEK_END);
    if (ftell(f) - start != b->nbytes) {
        fprintf(stderr, "runner: %s holds %ld bytes, the model input takes %lld\n", path, ftell(f) - start, b->nbytes);
        exit(1);
    }
    fseek(f, start, SEEK_SET);
    if (b->nbytes && fread(b->data, 1, (size_t)b->nbytes, f) != (size_t)b->nbytes) die("short read", path);
    free(h);
    fclose(f);
}

static void write_npy(const char *path, const Buf *b) {
    char h[512], shape[200] = "";
    size_t n = 0;
    for (long long i = 0; i < b->rank; i++)
        n += (size_t)snprintf(shape + n, sizeof shape - n, "%lld%s", b->dims[i], b->rank == 1 ? "," : (i + 1 < b->rank ? ", " : ""));
    int len = snprintf(h, sizeof h, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", b->dtype, shape);
    int total = (10 + len + 1 + 63) / 64 * 64; /* magic+version+hlen, header, '\n': a multiple of 64 */
    memset(h + len, ' ', (size_t)(total - 10 - len));
    h[total - 10 - 1] = '\n';
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)((total - 10) & 255), (unsigned char)((total - 10) >> 8)};
    FILE *f = fopen(path, "wb");
    if (!f) die("cannot write", path);
    fwrite(pre, 1, 10, f);
    fwrite(h, 1, (size_t)(total - 10), f);
    if (b->nbytes) fwrite(b->data, 1, (size_t)b->nbytes, f);
    fclose(f);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL.so OUT_DIR [IN0.npy ...]\n", argv[0]);
        return 2;
    }
    static Buf bufs[MAX_BUFS];
    static long long coff[MAX_BUFS], clen[MAX_BUFS];
    int nb = 0, nc = 0;
    char entry[256] = "", line[4096], path[4096];
    long long arena = 0;
    snprintf(path, sizeof path, "%s.abi", argv[1]);
    FILE *m = fopen(path, "r");
    if (!m) die("cannot open the ABI manifest (export the model again)", path);
    if (!fgets(line, sizeof line, m) || strncmp(line, "ziggurat-abi 1", 14) != 0) die("not a ziggurat-abi 1 manifest", path);
    while (fgets(line, sizeof line, m)) {
        char kind[16];
        int used = 0;
        if (sscanf(line, "%15s%n", kind, &used) != 1) continue;
        char *rest = line + used;
        if (!strcmp(kind, "entry")) {
            if (sscanf(rest, "%255s", entry) != 1) die("bad entry line", path);
        } else if (!strcmp(kind, "arena")) {
            arena = atoll(rest);
        } else if (!strcmp(kind, "const")) {
            if (nc >= MAX_BUFS || sscanf(rest, "%lld %lld", &coff[nc], &clen[nc]) != 2) die("bad const line", path);
            nc++;
        } else {
            if (nb >= MAX_BUFS) die("too many inputs and outputs", path);
            Buf *b = &bufs[nb++];
            int k = 0;
            snprintf(b->kind, sizeof b->kind, "%s", kind);
            if (sscanf(rest, "%15s %lld %lld%n", b->dtype, &b->nbytes, &b->rank, &k) != 3 || b->rank > MAX_RANK)
                die("bad tensor line", path);
            rest += k;
            for (long long i = 0; i < b->rank; i++) {
                b->dims[i] = strtoll(rest, &rest, 10);
            }
            b->data = aligned_buf(b->nbytes);
        }
    }
    fclose(m);

    int nin = 0;
    for (int i = 0; i < nb; i++) nin += !strcmp(bufs[i].kind, "input");
    if (argc - 3 != nin) {
        fprintf(stderr, "runner: the model takes %d input(s), got %d .npy file(s)\n", nin, argc - 3);
        return 2;
    }
    for (int i = 0; i < nin; i++) read_npy(argv[3 + i], &bufs[i]);

    snprintf(path, sizeof path, "%s.weights.npz", argv[1]);
    FILE *w = fopen(path, "rb");
    if (!w && nc) die("cannot open the weights", path);
    void **args = malloc(sizeof(void *) * (size_t)(nb + nc + 1));
    int na = 0;
    for (int i = 0; i < nb; i++) args[na++] = bufs[i].data;
    for (int i = 0; i < nc; i++) {
        void *c = aligned_buf(clen[i]);
        if (fseek(w, (long)coff[i], SEEK_SET) != 0 || (clen[i] && fread(c, 1, (size_t)clen[i], w) != (size_t)clen[i]))
            die("cannot read a constant from", path);
        args[na++] = c;
    }
    if (w) fclose(w);
    if (arena > 0) args[na++] = aligned_buf(arena);

    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) die("dlopen failed", dlerror());
    void (*fn)(void **);
    *(void **)(&fn) = dlsym(lib, entry);
    if (!fn) die("entry symbol not found", entry);
    fn(args);

    int no = 0, nk = 0;
    for (int i = nin; i < nb; i++) {
        int check = !strcmp(bufs[i].kind, "check");
        snprintf(path, sizeof path, "%s/%s%d.npy", argv[2], check ? "check" : "out", check ? nk++ : no++);
        write_npy(path, &bufs[i]);
    }
    return 0;
}
