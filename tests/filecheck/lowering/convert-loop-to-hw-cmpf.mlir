// RUN: ziggurat-opt %s -p 'convert-loop-to-hw{vector-width=8}' --split-input-file | filecheck %s

// A float compare in a vectorized loop becomes hw.vcmpf feeding hw.vselect
// (xDSL's arith.cmpf has a scalar i1 result only).
func.func @mask(%x: memref<16xf32>, %y: memref<16xf32>) {
  loop.for %j = 0 to 16 vectorized {
    loop.block "mask" [S %b = %j] {
      %v = loop.load %x[%b] : memref<16xf32>
      %z = arith.constant 0.000000e+00 : f32
      %o = arith.constant 1.000000e+00 : f32
      %c = arith.cmpf olt, %v, %z : f32
      %s = arith.select %c, %o, %z : f32
      loop.store %s, %y[%b] : memref<16xf32>
    }
  }
  func.return
}
// CHECK-LABEL: func.func @mask
// CHECK:         %[[V:.*]] = hw.vload %x[%{{.*}}] : memref<16xf32> -> vector<8xf32>
// CHECK:         %[[ZV:.*]] = hw.vbroadcast %{{.*}} : f32 -> vector<8xf32>
// CHECK-NEXT:    %[[M:.*]] = hw.vcmpf "olt" %[[V]], %[[ZV]] : vector<8xf32> -> vector<8xi1>
// CHECK:         hw.vselect %[[M]], %{{.*}}, %{{.*}} : vector<8xi1>, vector<8xf32>
// CHECK-NOT:     arith.cmpf

// -----

// Must not fire: a serial loop keeps its scalar arith.cmpf.
func.func @serial(%x: memref<16xf32>, %y: memref<16xf32>) {
  loop.for %j = 0 to 16 serial {
    loop.block "mask" [S %b = %j] {
      %v = loop.load %x[%b] : memref<16xf32>
      %z = arith.constant 0.000000e+00 : f32
      %c = arith.cmpf olt, %v, %z : f32
      %s = arith.select %c, %v, %z : f32
      loop.store %s, %y[%b] : memref<16xf32>
    }
  }
  func.return
}
// CHECK-LABEL: func.func @serial
// CHECK:         arith.cmpf olt
// CHECK-NOT:     hw.vcmpf
