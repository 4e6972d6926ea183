// RUN: ziggurat-opt %s -p 'loop-compute-at{block=p at=c loop=1}' | filecheck %s
// RUN: ziggurat-opt %s -p 'loop-compute-at{block=p at=c loop=0}' | filecheck %s --check-prefix=ROW
// RUN: not ziggurat-opt %s -p 'loop-compute-at{block=c at=p loop=0}' 2>&1 | filecheck %s --check-prefix=ARG
// RUN: not ziggurat-opt %s -p 'loop-cache-read{block=c buffer=0},loop-compute-at{block=p at=c loop=0}' 2>&1 | filecheck %s --check-prefix=OUTSIDE

// One iteration of %j2 reads t[i2, j2] and t[i2, j2 + 1]: the producer computes that 1x2 box.
// CHECK:       %t = loop.alloc "local" : memref<8x17xf32>
// CHECK-NEXT:  loop.for %i2 = 0 to 8 serial {
// CHECK-NEXT:    loop.for %j2 = 0 to 16 serial {
// CHECK-NEXT:      loop.for %p_ax0 = 0 to 1 serial {
// CHECK-NEXT:        loop.for %p_ax1 = 0 to 2 serial {
// CHECK-NEXT:          %[[A:.*]] = arith.addi %p_ax0, %i2 : index
// CHECK-NEXT:          %[[B:.*]] = arith.addi %p_ax1, %j2 : index
// CHECK-NEXT:          loop.block "p" [S %a = %[[A]], S %b = %[[B]]] {
// CHECK:           loop.block "c" [S %c = %i2, S %d = %j2] {

// ROW:         loop.for %i2 = 0 to 8 serial {
// ROW-NEXT:      loop.for %p_ax0 = 0 to 1 serial {
// ROW-NEXT:        loop.for %p_ax1 = 0 to 17 serial {

// ARG: compute_at: block 'c' writes %y, which is not a loop.alloc of this kernel (a kernel argument); compute_at works on kernel-local buffers only
// OUTSIDE: compute_at: block(s) ['c_read0'] read the buffer of block 'p' outside loop %i2 (0 to 8) around block(s) ['c']
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
