// RUN: ziggurat-opt %s -p 'loop-split{block=b loop=1 factor=16}' | filecheck %s
// RUN: not ziggurat-opt %s -p 'loop-split{block=b loop=1 factor=5}' 2>&1 | filecheck %s --check-prefix=ERR

// CHECK-LABEL: func.func @k
// CHECK:         loop.for %i = 0 to 4 serial {
// CHECK-NEXT:      loop.for %j_o = 0 to 2 serial {
// CHECK-NEXT:        loop.for %j_i = 0 to 16 serial {
// CHECK-NEXT:          %{{.*}} = arith.constant 16 : index
// CHECK-NEXT:          %[[T:.*]] = arith.muli %j_o, %{{.*}} : index
// CHECK-NEXT:          %j = arith.addi %[[T]], %j_i : index
// CHECK-NEXT:          loop.block "b" [S %a = %i, S %v = %j] {
// Not a divisor: refused, nothing is rewritten.
// ERR: split: factor 5 does not divide the trip count 32 of loop %j (0 to 32) around block(s) ['b']; use one of [2, 4, 8, 16]
func.func @k(%x: memref<4x32xf32>, %y: memref<4x32xf32>) {
  loop.for %i = 0 to 4 serial {
    loop.for %j = 0 to 32 serial {
      loop.block "b" [S %a = %i, S %v = %j] {
        %e = loop.load %x[%a, %v] : memref<4x32xf32>
        loop.store %e, %y[%a, %v] : memref<4x32xf32>
      }
    }
  }
  func.return
}
