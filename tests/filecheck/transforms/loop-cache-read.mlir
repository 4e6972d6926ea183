// RUN: ziggurat-opt %s -p 'loop-cache-read{block=c buffer=0}' | filecheck %s
// RUN: ziggurat-opt %s -p 'loop-cache-read{block=p buffer=0},loop-compute-at{block=p_read0 at=p loop=0}' | filecheck %s --check-prefix=AT
// RUN: not ziggurat-opt %s -p 'loop-cache-read{block=c buffer=1}' 2>&1 | filecheck %s --check-prefix=ERR
// RUN: not ziggurat-opt %s -p 'loop-compute-at{block=p at=c loop=0},loop-cache-read{block=c buffer=0}' 2>&1 | filecheck %s --check-prefix=STALE

// CHECK:         %[[C:.*]] = loop.alloc "local" : memref<8x17xf32>
// CHECK:         loop.block "p"
// CHECK:       loop.for %c_read0_ax0 = 0 to 8 serial {
// CHECK-NEXT:    loop.for %c_read0_ax1 = 0 to 17 serial {
// CHECK-NEXT:      loop.block "c_read0" [S %[[P:.*]] = %c_read0_ax0, S %[[Q:.*]] = %c_read0_ax1] {
// CHECK-NEXT:        %[[E:.*]] = loop.load %t[%[[P]], %[[Q]]] : memref<8x17xf32>
// CHECK-NEXT:        loop.store %[[E]], %[[C]][%[[P]], %[[Q]]] : memref<8x17xf32>
// CHECK:         loop.block "c" [S %c = %i2, S %d = %j2] {
// CHECK-NEXT:      %u = loop.load %[[C]][%c, %d] : memref<8x17xf32>
// CHECK:           %v = loop.load %[[C]][%c, %d1] : memref<8x17xf32>

// The copy of x moves next to its use: one row per iteration of %i.
// AT:          loop.for %i = 0 to 8 serial {
// AT-NEXT:       loop.for %p_read0_ax0 = 0 to 1 serial {
// AT-NEXT:         loop.for %p_read0_ax1 = 0 to 17 serial {
// AT:                loop.block "p_read0"
// AT:            loop.for %j = 0 to 17 serial {
// AT-NEXT:         loop.block "p"

// ERR: cache_read: block 'c' reads 1 buffer(s) (memref<8x17xf32>); there is no buffer 1
// STALE: cache_read: block 'p' in the loop nest of block 'c' writes %t; a copy made before the nest would be stale
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
