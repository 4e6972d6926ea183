// RUN: ziggurat-opt %s -p 'loop-compute-inline{block=p}' | filecheck %s
// RUN: not ziggurat-opt %s -p 'loop-compute-inline{block=c}' 2>&1 | filecheck %s --check-prefix=ARG
// RUN: not ziggurat-opt %s -p 'loop-compute-at{block=p at=c loop=0},loop-compute-inline{block=p}' 2>&1 | filecheck %s --check-prefix=SHARED

// Each read of t becomes the producer's computation at the read's indices; t and its nest are gone.
// CHECK-LABEL: func.func @st
// CHECK-NOT:     loop.alloc
// CHECK-NOT:     loop.block "p"
// CHECK:         loop.block "c" [S %c = %i2, S %d = %j2] {
// CHECK-NEXT:      %[[E:.*]] = loop.load %x[%c, %d] : memref<8x17xf32>
// CHECK-NEXT:      %[[S:.*]] = arith.mulf %[[E]], %[[E]] : f32
// CHECK-NEXT:      %one = arith.constant 1 : index
// CHECK-NEXT:      %d1 = arith.addi %d, %one : index
// CHECK-NEXT:      %[[E2:.*]] = loop.load %x[%c, %d1] : memref<8x17xf32>
// CHECK-NEXT:      %[[S2:.*]] = arith.mulf %[[E2]], %[[E2]] : f32
// CHECK-NEXT:      %w = arith.addf %[[S]], %[[S2]] : f32

// ARG: compute_inline: block 'c' writes %y, which is not a loop.alloc of this kernel (a kernel argument); compute_inline works on kernel-local buffers only
// SHARED: compute_inline: block 'p' shares its loop nest with block(s) ['c']; it must have a loop nest of its own
func.func @st(%x: memref<8x17xf32>, %y: memref<8x16xf32>) {
  %t = loop.alloc "local" : memref<8x17xf32>
  loop.for %i = 0 to 8 serial {
    loop.for %j = 0 to 17 serial {
      loop.block "p" [S %a = %i, S %b = %j] {
        %e = loop.load %x[%a, %b] : memref<8x17xf32>
        %s = arith.mulf %e, %e : f32
        loop.store %s, %t[%a, %b] : memref<8x17xf32>
      }
    }
  }
  loop.for %i2 = 0 to 8 serial {
    loop.for %j2 = 0 to 16 serial {
      loop.block "c" [S %c = %i2, S %d = %j2] {
        %u = loop.load %t[%c, %d] : memref<8x17xf32>
        %one = arith.constant 1 : index
        %d1 = arith.addi %d, %one : index
        %v = loop.load %t[%c, %d1] : memref<8x17xf32>
        %w = arith.addf %u, %v : f32
        loop.store %w, %y[%c, %d] : memref<8x16xf32>
      }
    }
  }
  func.return
}
