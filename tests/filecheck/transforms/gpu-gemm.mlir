// RUN: ziggurat-opt %s -p gpu-gemm | filecheck %s
// RUN: ziggurat-opt %s -p 'gpu-gemm{tile=128}' | filecheck %s --check-prefix=TILE
// RUN: ziggurat-opt %s -p 'gpu-gemm{deep-k=false}' | filecheck %s --check-prefix=SHALLOW
// RUN: ziggurat-opt %s -p gpu-gemm,gpu-default-schedule | filecheck %s --check-prefix=SCHED

// C[i, j] += A[i, k] * B[k, j]: the nest is marked with the operands' argument positions, the
// extents, the element strides (batch dims, then the two matrix dims) and the tile (64: 1 block).
// CHECK-LABEL: func.func @matmul_0
// CHECK:         } {gpu.gemm = {a = 0 : i64, b = 1 : i64, c = 2 : i64, m = 5 : i64, n = 3 : i64, k = 7 : i64
// CHECK-SAME:      batch = []
// CHECK-SAME:      a_strides = [7 : i64, 1 : i64], b_strides = [3 : i64, 1 : i64], c_strides = [3 : i64, 1 : i64], tile = 64 : i64, bk = 32 : i64}}
// SHALLOW-LABEL: func.func @matmul_0
// SHALLOW:         tile = 64 : i64, bk = 8 : i64}}
// TILE-LABEL: func.func @matmul_0
// TILE:         tile = 128 : i64, bk = 8 : i64}}
// The GEMM template implements a marked nest: gpu-default-schedule leaves it serial.
// SCHED-LABEL: func.func @matmul_0
// SCHED-NOT:     blockIdx.x
// SCHED:         } {gpu.gemm = {
func.func @matmul_0(%in0: memref<5x7xf32>, %in1: memref<7x3xf32>, %out0: memref<5x3xf32>) {
  loop.for %i0 = 0 to 5 serial {
    loop.for %i1 = 0 to 3 serial {
      loop.block "matmul_init" [S %0 = %i0, S %1 = %i1] {
        %2 = arith.constant 0.000000e+00 : f32
        loop.store %2, %out0[%0, %1] : memref<5x3xf32>
      }
      loop.for %r0 = 0 to 7 serial {
        loop.block "matmul" [S %3 = %i0, S %4 = %i1, R %5 = %r0] {
          %6 = loop.load %in0[%3, %5] : memref<5x7xf32>
          %7 = loop.load %in1[%5, %4] : memref<7x3xf32>
          %8 = arith.mulf %6, %7 : f32
          %9 = loop.load %out0[%3, %4] : memref<5x3xf32>
          %10 = arith.addf %9, %8 : f32
          loop.store %10, %out0[%3, %4] : memref<5x3xf32>
        }
      }
    }
  }
  func.return
}

// A transposed B (Gemm transB=1: B[j, k]) and the operands in another argument order.
// CHECK-LABEL: func.func @gemm_t
// CHECK:         } {gpu.gemm = {a = 1 : i64, b = 0 : i64, c = 2 : i64, m = 5 : i64, n = 3 : i64, k = 7 : i64
// CHECK-SAME:      b_strides = [1 : i64, 7 : i64]
func.func @gemm_t(%w: memref<3x7xf32>, %x: memref<5x7xf32>, %out0: memref<5x3xf32>) {
  loop.for %i0 = 0 to 5 serial {
    loop.for %i1 = 0 to 3 serial {
      loop.block "matmul_init" [S %0 = %i0, S %1 = %i1] {
        %2 = arith.constant 0.000000e+00 : f32
        loop.store %2, %out0[%0, %1] : memref<5x3xf32>
      }
      loop.for %r0 = 0 to 7 serial {
        loop.block "matmul" [S %3 = %i0, S %4 = %i1, R %5 = %r0] {
          %6 = loop.load %x[%3, %5] : memref<5x7xf32>
          %7 = loop.load %w[%4, %5] : memref<3x7xf32>
          %8 = arith.mulf %6, %7 : f32
          %9 = loop.load %out0[%3, %4] : memref<5x3xf32>
          %10 = arith.addf %9, %8 : f32
          loop.store %10, %out0[%3, %4] : memref<5x3xf32>
        }
      }
    }
  }
  func.return
}

// A batched product: the batch extent and each operand's batch stride come first. 2 x 1024 x 2048
// outputs are 2 * 8 * 16 = 256 tiles of 128: the 128 tile keeps every multiprocessor busy.
// CHECK-LABEL: func.func @bmm
// CHECK:         } {gpu.gemm = {a = 0 : i64, b = 1 : i64, c = 2 : i64, m = 1024 : i64, n = 2048 : i64, k = 16 : i64
// CHECK-SAME:      batch = [2 : i64]
// CHECK-SAME:      a_strides = [16384 : i64, 16 : i64, 1 : i64], b_strides = [32768 : i64, 2048 : i64, 1 : i64], c_strides = [2097152 : i64, 2048 : i64, 1 : i64], tile = 128 : i64, bk = 8 : i64}}
func.func @bmm(%a: memref<2x1024x16xf32>, %b: memref<2x16x2048xf32>, %c: memref<2x1024x2048xf32>) {
  loop.for %i0 = 0 to 2 serial {
    loop.for %i1 = 0 to 1024 serial {
      loop.for %i2 = 0 to 2048 serial {
        loop.block "matmul_init" [S %0 = %i0, S %1 = %i1, S %2 = %i2] {
          %3 = arith.constant 0.000000e+00 : f32
          loop.store %3, %c[%0, %1, %2] : memref<2x1024x2048xf32>
        }
        loop.for %r0 = 0 to 16 serial {
          loop.block "matmul" [S %4 = %i0, S %5 = %i1, S %6 = %i2, R %7 = %r0] {
            %8 = loop.load %a[%4, %5, %7] : memref<2x1024x16xf32>
            %9 = loop.load %b[%4, %7, %6] : memref<2x16x2048xf32>
            %10 = arith.mulf %8, %9 : f32
            %11 = loop.load %c[%4, %5, %6] : memref<2x1024x2048xf32>
            %12 = arith.addf %11, %10 : f32
            loop.store %12, %c[%4, %5, %6] : memref<2x1024x2048xf32>
          }
        }
      }
    }
  }
  func.return
}

// Not a plain product (a bias inside the update): left unmarked, for gpu-default-schedule.
// CHECK-LABEL: func.func @not_gemm
// CHECK-NOT:     gpu.gemm
// CHECK:         func.return
// SCHED-LABEL: func.func @not_gemm
// SCHED:         loop.for %i0_i1_b = 0 to 1 blockIdx.x {
// SCHED-NEXT:      loop.for %i0_i1_t = 0 to 15 threadIdx.x {
func.func @not_gemm(%in0: memref<5x7xf32>, %in1: memref<7x3xf32>, %out0: memref<5x3xf32>) {
  loop.for %i0 = 0 to 5 serial {
    loop.for %i1 = 0 to 3 serial {
      loop.block "matmul_init" [S %0 = %i0, S %1 = %i1] {
        %2 = arith.constant 0.000000e+00 : f32
        loop.store %2, %out0[%0, %1] : memref<5x3xf32>
      }
      loop.for %r0 = 0 to 7 serial {
        loop.block "matmul" [S %3 = %i0, S %4 = %i1, R %5 = %r0] {
          %6 = loop.load %in0[%3, %5] : memref<5x7xf32>
          %7 = loop.load %in1[%5, %4] : memref<7x3xf32>
          %8 = arith.mulf %6, %7 : f32
          %b = arith.constant 1.000000e+00 : f32
          %p = arith.addf %8, %b : f32
          %9 = loop.load %out0[%3, %4] : memref<5x3xf32>
          %10 = arith.addf %9, %p : f32
          loop.store %10, %out0[%3, %4] : memref<5x3xf32>
        }
      }
    }
  }
  func.return
}
