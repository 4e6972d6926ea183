// RUN: ziggurat-opt %s -p 'loop-storage-align{block=p buffer=0 axis=0 factor=16 offset=0}' | filecheck %s
// RUN: ziggurat-opt %s -p 'loop-storage-align{block=p buffer=0 axis=0 factor=16 offset=0},loop-compute-inline{block=p}' | filecheck %s --check-prefix=INLINE
// RUN: not ziggurat-opt %s -p 'loop-storage-align{block=p buffer=0 axis=1 factor=16 offset=0}' 2>&1 | filecheck %s --check-prefix=AXIS
// RUN: not ziggurat-opt %s -p 'loop-storage-align{block=c buffer=0 axis=0 factor=16 offset=0}' 2>&1 | filecheck %s --check-prefix=ARG

// Rows of t are padded from 17 to 32 floats; every access keeps its indices.
// CHECK:       %t = loop.alloc "local" {logical_shape = [8 : i64, 17 : i64]} : memref<8x32xf32>
// CHECK:         loop.store %s, %t[%a, %b] : memref<8x32xf32>
// CHECK:         %u = loop.load %t[%c, %d] : memref<8x32xf32>
// CHECK:         %v = loop.load %t[%c, %d1] : memref<8x32xf32>

// The other primitives see the unpadded shape.
// INLINE-NOT:  loop.alloc
// INLINE:      loop.block "c"

// AXIS: storage_align: axis 1 of the 2-d buffer of block 'p' has no padded stride; use an axis from 0 to 0
// ARG: storage_align: block 'c' writes %y, which is not a loop.alloc of this kernel (a kernel argument); storage_align works on kernel-local buffers only
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
