// RUN: ziggurat-opt %s -p 'loop-default-schedule{vector-width=8}' | filecheck %s
// RUN: ziggurat-opt %s -p 'loop-default-schedule{vector-width=8 fuse-epilogues=false}' | filecheck %s --check-prefix=OFF

// matmul + bias + relu as convert-te-to-loop leaves a fused group: the register
// block stores into the local %t, then a bias nest and a relu nest sweep it.
// After the schedule both stages run in the block's store blocks, on the tile,
// and only the relu result reaches memory (%t and %u are gone).
// CHECK-LABEL: func.func @matmul_bias_relu
// CHECK-NOT:     loop.alloc "local" : memref<16x32xf32>
// CHECK:         loop.block "matmul_store" [S %[[I:.*]] = %i0, S %[[J:.*]] = %{{.*}}] {
// CHECK-NEXT:      %[[ROW:.*]] = arith.constant 0 : index
// CHECK-NEXT:      %[[V:.*]] = loop.load %{{.*}}[%[[ROW]], %[[J]]] : memref<4x40xf32>
// CHECK-NEXT:      %[[B:.*]] = loop.load %bias[%[[J]]] : memref<32xf32>
// CHECK-NEXT:      %[[S:.*]] = arith.addf %[[V]], %[[B]] : f32
// CHECK-NEXT:      %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      %[[R:.*]] = arith.maximumf %[[S]], %[[Z]] : f32
// CHECK-NEXT:      loop.store %[[R]], %y[%[[I]], %[[J]]] : memref<16x32xf32>
// CHECK-NOT:     loop.block "bias"
// CHECK-NOT:     loop.block "relu"
// CHECK:         func.return

// Without epilogue fusion the stages keep their own nests over the local %t.
// OFF-LABEL: func.func @matmul_bias_relu
// OFF:         loop.block "matmul_store"
// OFF:         loop.block "bias"
// OFF:         loop.block "relu"
func.func @matmul_bias_relu(%a: memref<16x8xf32>, %b: memref<8x32xf32>, %bias: memref<32xf32>, %y: memref<16x32xf32>) {
  %t = loop.alloc "local" : memref<16x32xf32>
  %u = loop.alloc "local" : memref<16x32xf32>
  loop.for %i0 = 0 to 16 serial {
    loop.for %i1 = 0 to 32 serial {
      loop.block "matmul_init" [S %0 = %i0, S %1 = %i1] {
        %z = arith.constant 0.000000e+00 : f32
        loop.store %z, %t[%0, %1] : memref<16x32xf32>
      }
      loop.for %r0 = 0 to 8 serial {
        loop.block "matmul" [S %2 = %i0, S %3 = %i1, R %4 = %r0] {
          %x = loop.load %a[%2, %4] : memref<16x8xf32>
          %w = loop.load %b[%4, %3] : memref<8x32xf32>
          %p = arith.mulf %x, %w : f32
          %o = loop.load %t[%2, %3] : memref<16x32xf32>
          %s = arith.addf %o, %p : f32
          loop.store %s, %t[%2, %3] : memref<16x32xf32>
        }
      }
    }
  }
  loop.for %j0 = 0 to 16 serial {
    loop.for %j1 = 0 to 32 serial {
      loop.block "bias" [S %5 = %j0, S %6 = %j1] {
        %v = loop.load %t[%5, %6] : memref<16x32xf32>
        %c = loop.load %bias[%6] : memref<32xf32>
        %r = arith.addf %v, %c : f32
        loop.store %r, %u[%5, %6] : memref<16x32xf32>
      }
    }
  }
  loop.for %k0 = 0 to 16 serial {
    loop.for %k1 = 0 to 32 serial {
      loop.block "relu" [S %7 = %k0, S %8 = %k1] {
        %v2 = loop.load %u[%7, %8] : memref<16x32xf32>
        %z2 = arith.constant 0.000000e+00 : f32
        %m = arith.maximumf %v2, %z2 : f32
        loop.store %m, %y[%7, %8] : memref<16x32xf32>
      }
    }
  }
  func.return
}

// Negative: the stage reads the matmul result transposed, so it stays a nest of its own.
// CHECK-LABEL: func.func @matmul_then_transpose
// CHECK:         loop.block "matmul_store"
// CHECK:         loop.block "transpose"
func.func @matmul_then_transpose(%a: memref<16x8xf32>, %b: memref<8x16xf32>, %y: memref<16x16xf32>) {
  %t = loop.alloc "local" : memref<16x16xf32>
  loop.for %i0 = 0 to 16 serial {
    loop.for %i1 = 0 to 16 serial {
      loop.block "matmul_init" [S %0 = %i0, S %1 = %i1] {
        %z = arith.constant 0.000000e+00 : f32
        loop.store %z, %t[%0, %1] : memref<16x16xf32>
      }
      loop.for %r0 = 0 to 8 serial {
        loop.block "matmul" [S %2 = %i0, S %3 = %i1, R %4 = %r0] {
          %x = loop.load %a[%2, %4] : memref<16x8xf32>
          %w = loop.load %b[%4, %3] : memref<8x16xf32>
          %p = arith.mulf %x, %w : f32
          %o = loop.load %t[%2, %3] : memref<16x16xf32>
          %s = arith.addf %o, %p : f32
          loop.store %s, %t[%2, %3] : memref<16x16xf32>
        }
      }
    }
  }
  loop.for %j0 = 0 to 16 serial {
    loop.for %j1 = 0 to 16 serial {
      loop.block "transpose" [S %5 = %j0, S %6 = %j1] {
        %v = loop.load %t[%6, %5] : memref<16x16xf32>
        loop.store %v, %y[%5, %6] : memref<16x16xf32>
      }
    }
  }
  func.return
}
