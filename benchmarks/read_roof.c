/* How fast this host streams a buffer that stays in its caches between calls: the bandwidth roof
   of a batch-1 matrix-vector product (docs/autotuning.md, "The MLP against the read roof").
   Each of THREADS OpenMP threads sums its static share of BYTES with 8 AVX accumulators, one
   parallel region per call (as a generated kernel pays); prints the median of CALLS calls.

     gcc -O3 -mavx2 -mfma -fopenmp benchmarks/read_roof.c -o /tmp/read_roof
     /tmp/read_roof 2143272 1 3000     # the weights of mlp_784_512_256_10, 1 thread

   Not part of the package or the tests: a measuring tool for the docs, like benchmarks/*.py. */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y); }
int main(int argc, char **argv) {
  long bytes = argc > 1 ? atol(argv[1]) : 2143272; int threads = argc > 2 ? atoi(argv[2]) : 1;
  int calls = argc > 3 ? atoi(argv[3]) : 3000;
  long n = (bytes / 4 + 63) / 64 * 64;
  float *w = aligned_alloc(64, n * 4); for (long i = 0; i < n; i++) w[i] = 1e-3f * (i % 97);
  double *ts = malloc(calls * sizeof(double)); volatile float sink = 0;
  omp_set_num_threads(threads);
  for (int c = -100; c < calls; c++) {
    double t0 = now(); float total = 0;
#pragma omp parallel reduction(+ : total)
    {
      int t = omp_get_thread_num(), nt = omp_get_num_threads();
      long lo = n / 64 * t / nt * 64, hi = n / 64 * (t + 1) / nt * 64;
      __m256 a[8]; for (int r = 0; r < 8; r++) a[r] = _mm256_setzero_ps();
      for (long i = lo; i < hi; i += 64) for (int r = 0; r < 8; r++) a[r] = _mm256_add_ps(a[r], _mm256_load_ps(w + i + 8 * r));
      for (int r = 1; r < 8; r++) a[0] = _mm256_add_ps(a[0], a[r]);
      total += a[0][0] + a[0][7];
    }
    sink += total; if (c >= 0) ts[c] = now() - t0;
  }
  qsort(ts, calls, sizeof(double), cmp);
  printf("read %ld bytes, %d thread(s): median %.1f us, %.1f GB/s\n", n * 4, threads, ts[calls / 2] * 1e6, n * 4 / ts[calls / 2] / 1e9);
  return 0;
}
