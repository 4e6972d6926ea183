// RUN: ziggurat-opt %s -p 'convert-loop-to-hw{vector-width=8}' --split-input-file | filecheck %s

// A float64 loop is vectorized with half the lanes (same register width).
func.func @scale(%x: memref<20xf64>, %y: memref<20xf64>) {
  loop.for %j = 0 to 20 vectorized {
    loop.block "scale" [S %b = %j] {
      %v = loop.load %x[%b] : memref<20xf64>
      %s = arith.addf %v, %v : f64
      loop.store %s, %y[%b] : memref<20xf64>
    }
  }
  func.return
}
// CHECK-LABEL: func.func @scale
// CHECK:         loop.for %j = 0 to 20 step 4 serial {
// CHECK:           hw.vload %x[%{{.*}}] : memref<20xf64> -> vector<4xf64>
// CHECK:           arith.addf %{{.*}}, %{{.*}} : vector<4xf64>
// CHECK:         } {hw.vector_width = 4 : i64}

// -----

// Must not fire: integer and bool buffers stay scalar, with the reason.
func.func @select(%c: memref<20xi1>, %x: memref<20xi32>, %y: memref<20xi32>) {
  loop.for %j = 0 to 20 vectorized {
    loop.block "select" [S %b = %j] {
      %m = loop.load %c[%b] : memref<20xi1>
      %v = loop.load %x[%b] : memref<20xi32>
      %z = arith.constant 0 : i32
      %s = arith.select %m, %v, %z : i32
      loop.store %s, %y[%b] : memref<20xi32>
    }
  }
  func.return
}
// CHECK-LABEL: func.func @select
// CHECK:         loop.for %j = 0 to 20 serial {
// CHECK-NOT:       hw.vload
// CHECK:           loop.load %c[%{{.*}}] : memref<20xi1>
// CHECK:         } {hw.not_vectorized = "element types i1, i32 are not vectorized"}
