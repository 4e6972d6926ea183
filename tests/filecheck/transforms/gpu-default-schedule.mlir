// RUN: ziggurat-opt %s --split-input-file --verify-diagnostics -p 'gpu-default-schedule{threads=256}' | filecheck %s
// RUN: ziggurat-opt %s --split-input-file --verify-diagnostics -p 'gpu-default-schedule{threads=64}' | filecheck %s --check-prefix=T64
// RUN: not ziggurat-opt %s -p 'gpu-default-schedule{threads=2048}' 2>&1 | filecheck %s --check-prefix=MANY

// The spatial loops 3 x 100 are fused into 300 iterations: 2 blocks of 256 threads, the last
// block partly past the end, so the block loop carries gpu.limit = 300; the fused index is
// split back into row and column, the column varying fastest across the threads.
// CHECK-LABEL: func.func @relu_0
// CHECK:         loop.for %i_j_b = 0 to 2 blockIdx.x {
// CHECK-NEXT:      loop.for %i_j_t = 0 to 256 threadIdx.x {
// CHECK-NEXT:        %[[C:.*]] = arith.constant 256 : index
// CHECK-NEXT:        %[[T:.*]] = arith.muli %i_j_b, %[[C]] : index
// CHECK-NEXT:        %i_j = arith.addi %[[T]], %i_j_t : index
// CHECK-NEXT:        %[[W:.*]] = arith.constant 100 : index
// CHECK-NEXT:        %i = arith.divui %i_j, %[[W]] : index
// CHECK-NEXT:        %j = arith.remui %i_j, %[[W]] : index
// CHECK-NEXT:        loop.block "relu" [S %a = %i, S %b = %j] {
// CHECK:         } {gpu.limit = 300 : i64}
// 64 threads divide 300 not either: 5 blocks, and the limit.
// T64-LABEL: func.func @relu_0
// T64:         loop.for %i_j_b = 0 to 5 blockIdx.x {
// T64-NEXT:      loop.for %i_j_t = 0 to 64 threadIdx.x {
// T64:         } {gpu.limit = 300 : i64}
// MANY: gpu-default-schedule: threads=2048; a CUDA block has 1 to 1024
func.func @relu_0(%x: memref<3x100xf32>, %y: memref<3x100xf32>) {
  loop.for %i = 0 to 3 serial {
    loop.for %j = 0 to 100 serial {
      loop.block "relu" [S %a = %i, S %b = %j] {
        %v = loop.load %x[%a, %b] : memref<3x100xf32>
        %z = arith.constant 0.000000e+00 : f32
        %r = arith.maximumf %v, %z : f32
        loop.store %r, %y[%a, %b] : memref<3x100xf32>
      }
    }
  }
  func.return
}

// 512 iterations on 256 threads: 2 full blocks, no gpu.limit.
// CHECK-LABEL: func.func @exact
// CHECK:         loop.for %i_b = 0 to 2 blockIdx.x {
// CHECK-NEXT:      loop.for %i_t = 0 to 256 threadIdx.x {
// CHECK-NOT:     gpu.limit
// CHECK:         func.return
func.func @exact(%x: memref<512xf32>, %y: memref<512xf32>) {
  loop.for %i = 0 to 512 serial {
    loop.block "neg" [S %a = %i] {
      %v = loop.load %x[%a] : memref<512xf32>
      %r = arith.negf %v : f32
      loop.store %r, %y[%a] : memref<512xf32>
    }
  }
  func.return
}

// A row reduction: one thread per row (4 rows: a block of 4 threads), the reduction loop
// serial in its thread.
// CHECK-LABEL: func.func @row_sum
// CHECK:         loop.for %i_b = 0 to 1 blockIdx.x {
// CHECK-NEXT:      loop.for %i_t = 0 to 4 threadIdx.x {
// CHECK:             loop.block "sum_init"
// CHECK:             loop.for %k = 0 to 32 serial {
// CHECK-NEXT:          loop.block "sum" [S %b = %i, R %c = %k] {
func.func @row_sum(%x: memref<4x32xf32>, %y: memref<4xf32>) {
  loop.for %i = 0 to 4 serial {
    loop.block "sum_init" [S %a = %i] {
      %z = arith.constant 0.000000e+00 : f32
      loop.store %z, %y[%a] : memref<4xf32>
    }
    loop.for %k = 0 to 32 serial {
      loop.block "sum" [S %b = %i, R %c = %k] {
        %e = loop.load %x[%b, %c] : memref<4x32xf32>
        %o = loop.load %y[%b] : memref<4xf32>
        %n = arith.addf %o, %e : f32
        loop.store %n, %y[%b] : memref<4xf32>
      }
    }
  }
  func.return
}

// A full reduction to one element (the outermost loop carries the reduction): one thread.
// CHECK-LABEL: func.func @total
// CHECK-NOT:     blockIdx.x
// CHECK:         loop.for %k = 0 to 8 serial {
func.func @total(%x: memref<8xf32>, %y: memref<1xf32>) {
  loop.for %k = 0 to 8 serial {
    loop.block "total" [R %r = %k] {
      %z = arith.constant 0 : index
      %v = loop.load %x[%r] : memref<8xf32>
      %acc = loop.load %y[%z] : memref<1xf32>
      %s = arith.addf %acc, %v : f32
      loop.store %s, %y[%z] : memref<1xf32>
    }
  }
  func.return
}

// A kernel bound by hand is left as it is.
// CHECK-LABEL: func.func @bound
// CHECK:         loop.for %i = 0 to 4 blockIdx.x {
// CHECK-NEXT:      loop.for %j = 0 to 32 threadIdx.x {
func.func @bound(%x: memref<4x32xf32>, %y: memref<4x32xf32>) {
  loop.for %i = 0 to 4 blockIdx.x {
    loop.for %j = 0 to 32 threadIdx.x {
      loop.block "e" [S %a = %i, S %b = %j] {
        %v = loop.load %x[%a, %b] : memref<4x32xf32>
        loop.store %v, %y[%a, %b] : memref<4x32xf32>
      }
    }
  }
  func.return
}

// The entry function is never scheduled.
// CHECK-LABEL: func.func @main
// CHECK-NEXT:    func.call @relu_0
func.func @main(%x: memref<3x100xf32>, %y: memref<3x100xf32>) {
  func.call @relu_0(%x, %y) : (memref<3x100xf32>, memref<3x100xf32>) -> ()
  func.return
}

// -----

// Two top-level stages in one kernel: gpu-split-stages must run first.
// expected-error@unknown {{gpu-default-schedule: @two has 2 top-level stages; run gpu-split-stages first (one launch per stage)}}
func.func @two(%x: memref<8xf32>, %y: memref<8xf32>) {
  loop.for %i = 0 to 8 serial {
    loop.block "a" [S %a = %i] {
      %v = loop.load %x[%a] : memref<8xf32>
      loop.store %v, %y[%a] : memref<8xf32>
    }
  }
  loop.for %i2 = 0 to 8 serial {
    loop.block "b" [S %b = %i2] {
      %v = loop.load %y[%b] : memref<8xf32>
      loop.store %v, %x[%b] : memref<8xf32>
    }
  }
  func.return
}
