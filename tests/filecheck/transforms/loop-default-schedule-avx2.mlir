// RUN: ziggurat-opt %s -p 'loop-default-schedule{vector-width=8}' | filecheck %s

// 8 lanes, 16 registers (AVX2): a matmul gets a 4 x (2 vectors) register block:
// the row loop steps by 4 (16 is no multiple of 6), the columns walk 8-lane
// panels two at a time, and each row's two vectors sit side by side in %acc.
// CHECK-LABEL: func.func @matmul
// CHECK:         loop.for %i0 = 0 to 16 step 4 serial {
// CHECK-NEXT:      %[[ACC:.*]] = loop.alloc "local" : memref<4x40xf32>
// CHECK-NEXT:      loop.for %i1p = 0 to 4 step 2 serial {
// CHECK-NEXT:        loop.for %i1l = 0 to 8 vectorized {
// CHECK-COUNT-8:       loop.block "matmul_init"
// CHECK:               loop.for %r0 = 0 to 8 serial {
// CHECK-COUNT-8:         loop.block "matmul" [S
// CHECK-COUNT-8:       loop.block "matmul_store"
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

// A padded conv in NCHW8c (L = the 8 output lanes, one vector): the input is
// copied into a zero-padded local buffer (zeros in the halo: rows 0 and 7, then
// columns 0 and 7 of rows 1..6; then the interior at +1), the
// reduction reads it without tests, and the block is 6 output columns x 2
// output-channel blocks (12 accumulators; columns, not rows, on a tie: one
// contiguous stretch of the input per tile).
// CHECK-LABEL: func.func @conv_nchw8c
// CHECK:         %[[PAD:.*]] = loop.alloc "local" : memref<1x2x8x8x8xf32>
// CHECK:         loop.for %q2 = 0 to 1 serial {
// CHECK:         loop.block "conv_pad_zero"
// CHECK:         loop.for %q2{{.*}} = 7 to 8 serial {
// CHECK:         loop.block "conv_pad_zero"
// CHECK:         loop.for %q2{{.*}} = 1 to 7 serial {
// CHECK-NEXT:      loop.for %q3{{.*}} = 0 to 1 serial {
// CHECK:         loop.block "conv_pad_zero"
// CHECK:         loop.for %q2{{.*}} = 1 to 7 serial {
// CHECK-NEXT:      loop.for %q3{{.*}} = 7 to 8 serial {
// CHECK:         loop.block "conv_pad_zero"
// CHECK-NOT:     loop.block "conv_pad_zero"
// CHECK:         loop.block "conv_pad_copy"
// CHECK:           loop.store %{{.*}}, %[[PAD]]
// CHECK:         loop.for %i1 = 0 to 2 step 2 serial {
// CHECK-NEXT:      loop.for %i2 = 0 to 6 serial {
// CHECK-NEXT:        loop.for %i3 = 0 to 6 step 6 serial {
// CHECK-NEXT:          %[[ACC:.*]] = loop.alloc "local" : memref<12x16xf32>
// CHECK-NEXT:          loop.for %i4 = 0 to 8 vectorized {
// CHECK:                 loop.for %r3 = 0 to 8 serial {
// CHECK:                   loop.block "conv" [S
// CHECK-NOT:               arith.select
// CHECK:                   loop.load %[[PAD]]
// CHECK-COUNT-11:          loop.block "conv" [S
// CHECK:                 loop.block "conv_store"
func.func @conv_nchw8c(%in0: memref<1x2x6x6x8xf32>, %in1: memref<2x2x3x3x8x8xf32>, %out0: memref<1x2x6x6x8xf32>) {
  loop.for %i0 = 0 to 1 serial {
    loop.for %i1 = 0 to 2 serial {
      loop.for %i2 = 0 to 6 serial {
        loop.for %i3 = 0 to 6 serial {
          loop.for %i4 = 0 to 8 serial {
            loop.block "conv_init" [S %0 = %i0, S %1 = %i1, S %2 = %i2, S %3 = %i3, S %4 = %i4] {
              %5 = arith.constant 0.000000e+00 : f32
              loop.store %5, %out0[%0, %1, %2, %3, %4] : memref<1x2x6x6x8xf32>
            }
            loop.for %r0 = 0 to 2 serial {
              loop.for %r1 = 0 to 3 serial {
                loop.for %r2 = 0 to 3 serial {
                  loop.for %r3 = 0 to 8 serial {
                    loop.block "conv" [S %6 = %i0, S %7 = %i1, S %8 = %i2, S %9 = %i3, S %10 = %i4, R %11 = %r0, R %12 = %r1, R %13 = %r2, R %14 = %r3] {
                      %15 = arith.addi %8, %12 : index
                      %16 = arith.constant -1 : index
                      %17 = arith.addi %15, %16 : index
                      %18 = arith.addi %9, %13 : index
                      %19 = arith.constant -1 : index
                      %20 = arith.addi %18, %19 : index
                      %21 = arith.constant 0 : index
                      %22 = arith.cmpi sge, %17, %21 : index
                      %23 = arith.constant 6 : index
                      %24 = arith.cmpi slt, %17, %23 : index
                      %25 = arith.andi %22, %24 : i1
                      %26 = arith.select %25, %17, %21 : index
                      %27 = arith.cmpi sge, %20, %21 : index
                      %28 = arith.constant 6 : index
                      %29 = arith.cmpi slt, %20, %28 : index
                      %30 = arith.andi %27, %29 : i1
                      %31 = arith.andi %25, %30 : i1
                      %32 = arith.select %30, %20, %21 : index
                      %33 = loop.load %in0[%6, %11, %26, %32, %14] : memref<1x2x6x6x8xf32>
                      %34 = arith.constant 0.000000e+00 : f32
                      %35 = arith.select %31, %33, %34 : f32
                      %36 = loop.load %in1[%7, %11, %12, %13, %14, %10] : memref<2x2x3x3x8x8xf32>
                      %37 = arith.mulf %35, %36 : f32
                      %38 = loop.load %out0[%6, %7, %8, %9, %10] : memref<1x2x6x6x8xf32>
                      %39 = arith.addf %38, %37 : f32
                      loop.store %39, %out0[%6, %7, %8, %9, %10] : memref<1x2x6x6x8xf32>
                    }
                  }
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
