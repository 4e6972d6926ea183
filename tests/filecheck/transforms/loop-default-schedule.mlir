// RUN: ziggurat-opt %s -p loop-default-schedule | filecheck %s

// A matmul nest with 32 columns (two 16-lane vectors): the row loop is
// register-blocked by 8 and the column loop walks pairs of vectors
// (%i1p) with the lane loop vectorized, 8 x 2 accumulators in %acc (with 32
// registers at most 24 accumulators, plan.MAX_ACC_WIDE); each loaded pair of
// B vectors feeds 8 rows.
// CHECK-LABEL: func.func @matmul
// CHECK:         loop.for %i0 = 0 to 16 step 8 serial {
// CHECK-NEXT:      %[[ACC:.*]] = loop.alloc "local" : memref<8x48xf32>
// CHECK-NEXT:      loop.for %i1p = 0 to 2 step 2 serial {
// CHECK-NEXT:        loop.for %i1l = 0 to 16 vectorized {
// CHECK-COUNT-16:      loop.block "matmul_init" [S
// CHECK:               loop.for %r0 = 0 to 8 serial {
// CHECK-COUNT-16:        loop.block "matmul" [S
// CHECK:               loop.block "matmul_store"
// CHECK:                 loop.store %{{.*}}, %c[%{{.*}}, %{{.*}}] : memref<16x32xf32>
func.func @matmul(%a: memref<16x8xf32>, %b: memref<8x32xf32>, %c: memref<16x32xf32>) {
  loop.for %i0 = 0 to 16 serial {
    loop.for %i1 = 0 to 32 serial {
      loop.block "matmul_init" [S %0 = %i0, S %1 = %i1] {
        %z = arith.constant 0.000000e+00 : f32
        loop.store %z, %c[%0, %1] : memref<16x32xf32>
      }
      loop.for %r0 = 0 to 8 serial {
        loop.block "matmul" [S %2 = %i0, S %3 = %i1, R %4 = %r0] {
          %x = loop.load %a[%2, %4] : memref<16x8xf32>
          %y = loop.load %b[%4, %3] : memref<8x32xf32>
          %p = arith.mulf %x, %y : f32
          %o = loop.load %c[%2, %3] : memref<16x32xf32>
          %s = arith.addf %o, %p : f32
          loop.store %s, %c[%2, %3] : memref<16x32xf32>
        }
      }
    }
  }
  func.return
}

// A long reduction (768 = 3 x 256) is blocked: the output is initialized by
// its own nest, the reduction block loop goes outside, the block's slice of
// the streamed operand is packed into 16-wide panels, and each block loads the
// partial sums into the accumulators.
// CHECK-LABEL: func.func @long_k
// CHECK:         loop.for %i0 = 0 to 4 serial {
// CHECK-NEXT:      loop.for %i1 = 0 to 16 serial {
// CHECK-NEXT:        loop.block "mm_init"
// CHECK:         loop.for %r0o = 0 to 768 step 256 serial {
// CHECK-NEXT:      %[[PANEL:.*]] = loop.alloc "local" : memref<1x256x16xf32>
// CHECK-NEXT:      loop.for %p = 0 to 1 serial {
// CHECK:               loop.block "mm_pack"
// CHECK:           loop.for %{{.*}} = 0 to 4 step 4 serial {
// CHECK:             loop.block "mm_load"
// CHECK:             loop.for %r0 = 0 to 256 serial {
// CHECK-NEXT:          %{{.*}} = arith.addi %r0o, %r0 : index
// CHECK:               loop.load %[[PANEL]][%{{.*}}, %{{.*}}, %{{.*}}] : memref<1x256x16xf32>
func.func @long_k(%a: memref<4x768xf32>, %b: memref<768x16xf32>, %c: memref<4x16xf32>) {
  loop.for %i0 = 0 to 4 serial {
    loop.for %i1 = 0 to 16 serial {
      loop.block "mm_init" [S %0 = %i0, S %1 = %i1] {
        %z = arith.constant 0.000000e+00 : f32
        loop.store %z, %c[%0, %1] : memref<4x16xf32>
      }
      loop.for %r0 = 0 to 768 serial {
        loop.block "mm" [S %2 = %i0, S %3 = %i1, R %4 = %r0] {
          %x = loop.load %a[%2, %4] : memref<4x768xf32>
          %y = loop.load %b[%4, %3] : memref<768x16xf32>
          %p = arith.mulf %x, %y : f32
          %o = loop.load %c[%2, %3] : memref<4x16xf32>
          %s = arith.addf %o, %p : f32
          loop.store %s, %c[%2, %3] : memref<4x16xf32>
        }
      }
    }
  }
  func.return
}

// A reduction along the contiguous axis (a row sum, dense with a transposed
// weight): the row loop is blocked by 4, the update block repeated per row and
// the reduction loop vectorized (one vector accumulator per row).
// CHECK-LABEL: func.func @row_sum
// CHECK:         loop.for %i0 = 0 to 16 step 4 serial {
// CHECK-COUNT-4:   loop.block "sum_init"
// CHECK:           loop.for %r0 = 0 to 64 vectorized {
// CHECK-COUNT-4:     loop.block "sum" [
func.func @row_sum(%x: memref<16x64xf32>, %y: memref<16xf32>) {
  loop.for %i0 = 0 to 16 serial {
    loop.block "sum_init" [S %0 = %i0] {
      %z = arith.constant 0.000000e+00 : f32
      loop.store %z, %y[%0] : memref<16xf32>
    }
    loop.for %r0 = 0 to 64 serial {
      loop.block "sum" [S %1 = %i0, R %2 = %r0] {
        %v = loop.load %x[%1, %2] : memref<16x64xf32>
        %o = loop.load %y[%1] : memref<16xf32>
        %s = arith.addf %o, %v : f32
        loop.store %s, %y[%1] : memref<16xf32>
      }
    }
  }
  func.return
}

// Negative: a short reduction into a short output (a 3x3 window sum over 5
// channels, prime): no vector loop and no register tile; left alone.
// CHECK-LABEL: func.func @small
// CHECK:         loop.for %i0 = 0 to 5 serial {
// CHECK-NEXT:      loop.block "win_init"
// CHECK-NOT:     vectorized
func.func @small(%x: memref<5x9xf32>, %y: memref<5xf32>) {
  loop.for %i0 = 0 to 5 serial {
    loop.block "win_init" [S %0 = %i0] {
      %z = arith.constant 0.000000e+00 : f32
      loop.store %z, %y[%0] : memref<5xf32>
    }
    loop.for %r0 = 0 to 9 serial {
      loop.block "win" [S %1 = %i0, R %2 = %r0] {
        %v = loop.load %x[%1, %2] : memref<5x9xf32>
        %o = loop.load %y[%1] : memref<5xf32>
        %s = arith.addf %o, %v : f32
        loop.store %s, %y[%1] : memref<5xf32>
      }
    }
  }
  func.return
}

// A depthwise conv in NCHW16c: every spatial loop feeds the input read, so no
// loop is free of the streamed reads; the output column is blocked by 8
// (plan.plan_shared) and each filter vector feeds 8 accumulators. The innermost
// window loop (kw, 3 trips) is marked unrolled: LLVM unrolls it and drops its index math.
// CHECK-LABEL: func.func @depthwise_conv2d_nchwc_0
// CHECK:          loop.for %i3 = 0 to 8 step 8 serial {
// CHECK-NEXT:       %{{.*}} = loop.alloc "local" : memref<8x32xf32>
// CHECK-NEXT:       loop.for %i4 = 0 to 16 vectorized {
// CHECK-COUNT-8:      loop.block "depthwise_conv2d_nchwc_init"
// CHECK:              loop.for %r0 = 0 to 3 serial {
// CHECK-NEXT:           loop.for %r1 = 0 to 3 unrolled {
// CHECK-COUNT-8:          loop.block "depthwise_conv2d_nchwc" [S
func.func @depthwise_conv2d_nchwc_0(%in0: memref<1x1x6x10x16xf32>, %in1: memref<1x3x3x16xf32>, %out0: memref<1x1x4x8x16xf32>) {
  loop.for %i0 = 0 to 1 serial {
    loop.for %i1 = 0 to 1 serial {
      loop.for %i2 = 0 to 4 serial {
        loop.for %i3 = 0 to 8 serial {
          loop.for %i4 = 0 to 16 serial {
            loop.block "depthwise_conv2d_nchwc_init" [S %0 = %i0, S %1 = %i1, S %2 = %i2, S %3 = %i3, S %4 = %i4] {
              %5 = arith.constant 0.000000e+00 : f32
              loop.store %5, %out0[%0, %1, %2, %3, %4] : memref<1x1x4x8x16xf32>
            }
            loop.for %r0 = 0 to 3 serial {
              loop.for %r1 = 0 to 3 serial {
                loop.block "depthwise_conv2d_nchwc" [S %6 = %i0, S %7 = %i1, S %8 = %i2, S %9 = %i3, S %10 = %i4, R %11 = %r0, R %12 = %r1] {
                  %13 = arith.addi %8, %11 : index
                  %14 = arith.addi %9, %12 : index
                  %15 = loop.load %in0[%6, %7, %13, %14, %10] : memref<1x1x6x10x16xf32>
                  %16 = loop.load %in1[%7, %11, %12, %10] : memref<1x3x3x16xf32>
                  %17 = arith.mulf %15, %16 : f32
                  %18 = loop.load %out0[%6, %7, %8, %9, %10] : memref<1x1x4x8x16xf32>
                  %19 = arith.addf %18, %17 : f32
                  loop.store %19, %out0[%6, %7, %8, %9, %10] : memref<1x1x4x8x16xf32>
                }
              }
            }
          }
        }
      }
    }
  }
  func.return
}
