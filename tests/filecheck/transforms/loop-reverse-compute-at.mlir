// RUN: ziggurat-opt %s -p 'loop-reverse-compute-at{block=relu at=mm loop=1}' | filecheck %s
// RUN: ziggurat-opt %s -p 'loop-reverse-compute-at{block=relu at=mm loop=0}' | filecheck %s --check-prefix=ROW
// RUN: not ziggurat-opt %s -p 'loop-reverse-compute-at{block=relu at=mm loop=2}' 2>&1 | filecheck %s --check-prefix=ERR
// RUN: not ziggurat-opt %s -p 'loop-decompose-reduction{block=mm loop=1},loop-reorder{block=mm loops=2,1},loop-reverse-compute-at{block=relu at=mm loop=2}' 2>&1 | filecheck %s --check-prefix=RED
// RUN: ziggurat-opt %s -p 'loop-decompose-reduction{block=mm loop=1},loop-reverse-compute-at{block=relu at=mm loop=1}' | filecheck %s --check-prefix=INIT

// The epilogue runs on the element the reduction just finished.
// CHECK:       loop.for %j = 0 to 16 serial {
// CHECK:           loop.block "mm" [S %b0 = %i, S %b1 = %j, R %b2 = %k] {
// CHECK:         loop.for %relu_ax0 = 0 to 1 serial {
// CHECK-NEXT:      loop.for %relu_ax1 = 0 to 1 serial {
// CHECK-NEXT:        %[[A:.*]] = arith.addi %relu_ax0, %i : index
// CHECK-NEXT:        %[[B:.*]] = arith.addi %relu_ax1, %j : index
// CHECK-NEXT:        loop.block "relu" [S %c0 = %[[A]], S %c1 = %[[B]]] {
// CHECK-NOT:   loop.for %i2

// Under the outer loop it consumes a whole row.
// ROW:         loop.for %relu_ax0 = 0 to 1 serial {
// ROW-NEXT:      loop.for %relu_ax1 = 0 to 16 serial {
// ROW-NEXT:        %[[A:.*]] = arith.addi %relu_ax0, %i : index
// ROW-NEXT:        loop.block "relu" [S %c0 = %[[A]], S %c1 = %relu_ax1] {

// ERR: reverse_compute_at: loop %k (0 to 4) around block(s) ['mm'] carries the reduction of block 'mm'; its results are not final after one iteration of loop %k (0 to 4) around block(s) ['mm']
// RED: reverse_compute_at: loop %k (0 to 4) around block(s) ['mm'] carries the reduction of block 'mm'; its results are not final after one iteration of loop %j (0 to 16) around block(s) ['mm']
// The init block, decomposed into its own loop before %j, has finished its row before %j runs.
// INIT:        loop.for %j = 0 to 16 serial {
// INIT-NEXT:     loop.block "mm_init"
// INIT:        loop.for %j_1 = 0 to 16 serial {
// INIT:            loop.block "mm" [S %b0 = %i, S %b1 = %j_1, R %b2 = %k] {
// INIT:          loop.for %relu_ax0 = 0 to 1 serial {
// INIT-NEXT:       loop.for %relu_ax1 = 0 to 1 serial {
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
