// RUN: ziggurat-opt %s -p 'loop-tile{block=relu loops=0,1 factors=2,8}' | filecheck %s
// RUN: not ziggurat-opt %s -p 'loop-tile{block=relu loops=0,1 factors=2,5}' 2>&1 | filecheck %s --check-prefix=FACTOR
// RUN: not ziggurat-opt %s -p 'loop-tile{block=mm loops=1,2 factors=4,2}' 2>&1 | filecheck %s --check-prefix=IMPERFECT

// Both loops split, all outer parts before all inner parts.
// CHECK:       loop.for %i2_o = 0 to 4 serial {
// CHECK-NEXT:    loop.for %j2_o = 0 to 2 serial {
// CHECK-NEXT:      loop.for %i2_i = 0 to 2 serial {
// CHECK-NEXT:        loop.for %j2_i = 0 to 8 serial {
// CHECK:               %i2 = arith.addi %{{.*}}, %i2_i : index
// CHECK:               %j2 = arith.addi %{{.*}}, %j2_i : index
// CHECK-NEXT:          loop.block "relu" [S %c0 = %i2, S %c1 = %j2] {

// FACTOR: split: factor 5 does not divide the trip count 16 of loop %j2 (0 to 16) around block(s) ['relu']; use one of [2, 4, 8]
// The init block beside the reduction loop keeps the nest imperfect.
// IMPERFECT: reorder: loop %j_i (0 to 4) around block(s) ['mm', 'mm_init'] is not perfectly nested around loop %k_o (0 to 2) around block(s) ['mm']: it also holds 'loop.block' (block 'mm_init')
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
