// RUN: ziggurat-opt %s -p 'loop-cache-write{block=mm buffer=0}' | filecheck %s
// RUN: ziggurat-opt %s -p 'loop-cache-write{block=mm buffer=0},loop-reverse-compute-at{block=mm_write0 at=mm loop=1}' | filecheck %s --check-prefix=TILE
// RUN: not ziggurat-opt %s -p 'loop-cache-write{block=mm buffer=1}' 2>&1 | filecheck %s --check-prefix=ERR

// The reduction and its init block accumulate in a local buffer; a write-back nest follows.
// CHECK:         %[[C:.*]] = loop.alloc "local" : memref<8x16xf32>
// CHECK:         loop.block "mm_init" [S %a0 = %i, S %a1 = %j] {
// CHECK:           loop.store %z, %[[C]][%a0, %a1] : memref<8x16xf32>
// CHECK:         loop.block "mm" [S %b0 = %i, S %b1 = %j, R %b2 = %k] {
// CHECK:           %o = loop.load %[[C]][%b0, %b1] : memref<8x16xf32>
// CHECK:           loop.store %n, %[[C]][%b0, %b1] : memref<8x16xf32>
// CHECK:       loop.for %mm_write0_ax0 = 0 to 8 serial {
// CHECK-NEXT:    loop.for %mm_write0_ax1 = 0 to 16 serial {
// CHECK-NEXT:      loop.block "mm_write0" [S %[[P:.*]] = %mm_write0_ax0, S %[[Q:.*]] = %mm_write0_ax1] {
// CHECK-NEXT:        %[[E:.*]] = loop.load %[[C]][%[[P]], %[[Q]]] : memref<8x16xf32>
// CHECK-NEXT:        loop.store %[[E]], %t[%[[P]], %[[Q]]] : memref<8x16xf32>
// CHECK:       loop.block "relu"

// TILE:          loop.block "mm" [S %b0 = %i, S %b1 = %j, R %b2 = %k] {
// TILE:          loop.for %mm_write0_ax0 = 0 to 1 serial {
// TILE-NEXT:       loop.for %mm_write0_ax1 = 0 to 1 serial {
// TILE:              loop.block "mm_write0"

// ERR: cache_write: block 'mm' writes 1 buffer(s) (memref<8x16xf32>); there is no buffer 1
func.func @mm(%a: memref<8x4xf32>, %b: memref<4x16xf32>, %y: memref<8x16xf32>) {
  %t = loop.alloc "local" : memref<8x16xf32>
  loop.for %i = 0 to 8 serial {
    loop.for %j = 0 to 16 serial {
      loop.block "mm_init" [S %a0 = %i, S %a1 = %j] {
        %z = arith.constant 0.000000e+00 : f32
        loop.store %z, %t[%a0, %a1] : memref<8x16xf32>
      }
      loop.for %k = 0 to 4 serial {
        loop.block "mm" [S %b0 = %i, S %b1 = %j, R %b2 = %k] {
          %x = loop.load %a[%b0, %b2] : memref<8x4xf32>
          %w = loop.load %b[%b2, %b1] : memref<4x16xf32>
          %m = arith.mulf %x, %w : f32
          %o = loop.load %t[%b0, %b1] : memref<8x16xf32>
          %n = arith.addf %o, %m : f32
          loop.store %n, %t[%b0, %b1] : memref<8x16xf32>
        }
      }
    }
  }
  loop.for %i2 = 0 to 8 serial {
    loop.for %j2 = 0 to 16 serial {
      loop.block "relu" [S %c0 = %i2, S %c1 = %j2] {
        %v = loop.load %t[%c0, %c1] : memref<8x16xf32>
        %zero = arith.constant 0.000000e+00 : f32
        %r = arith.maximumf %v, %zero : f32
        loop.store %r, %y[%c0, %c1] : memref<8x16xf32>
      }
    }
  }
  func.return
}
