// RUN: ziggurat-opt %s -p 'loop-vectorize-innermost{min-extent=16}' | filecheck %s

// CHECK-LABEL: func.func @nest
func.func @nest(%x: memref<4x32xf32>, %y: memref<4x8xf32>) {
  // CHECK:       loop.for %i = 0 to 4 serial {
  // CHECK-NEXT:    loop.for %j = 0 to 32 vectorized {
  loop.for %i = 0 to 4 serial {
    loop.for %j = 0 to 32 serial {
      loop.block "a" [S %a = %i, S %b = %j] {
        %v = loop.load %x[%a, %b] : memref<4x32xf32>
        loop.store %v, %x[%a, %b] : memref<4x32xf32>
      }
    }
  }
  // Negative: the innermost loop is too short, and parallel loops keep their kind.
  // CHECK:       loop.for %k = 0 to 4 parallel {
  // CHECK-NEXT:    loop.for %l = 0 to 8 serial {
  loop.for %k = 0 to 4 parallel {
    loop.for %l = 0 to 8 serial {
      loop.block "b" [S %c = %k, S %d = %l] {
        %v = loop.load %y[%c, %d] : memref<4x8xf32>
        loop.store %v, %y[%c, %d] : memref<4x8xf32>
      }
    }
  }
  func.return
}
