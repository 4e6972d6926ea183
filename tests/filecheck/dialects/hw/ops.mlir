// RUN: ziggurat-opt %s | ziggurat-opt | filecheck %s
// RUN: ZIGGURAT_ROUNDTRIP | filecheck %s

// CHECK-LABEL: func.func @axpy
func.func @axpy(%x: memref<4x64xf32>, %y: memref<4x64xf32>, %a: f32, %i: index, %j: index) -> f32 {
  // CHECK-NEXT: %v = hw.vload %x[%i, %j] : memref<4x64xf32> -> vector<16xf32>
  // CHECK-NEXT: %s = hw.vbroadcast %a : f32 -> vector<16xf32>
  // CHECK-NEXT: %acc = hw.vload %y[%i, %j] : memref<4x64xf32> -> vector<16xf32>
  // CHECK-NEXT: %r = hw.vfma %v, %s, %acc : vector<16xf32>
  // CHECK-NEXT: hw.vstore %r, %y[%i, %j] : vector<16xf32>, memref<4x64xf32>
  // CHECK-NEXT: %t = hw.vreduce "add" %r : vector<16xf32> -> f32
  %v = hw.vload %x[%i, %j] : memref<4x64xf32> -> vector<16xf32>
  %s = hw.vbroadcast %a : f32 -> vector<16xf32>
  %acc = hw.vload %y[%i, %j] : memref<4x64xf32> -> vector<16xf32>
  %r = hw.vfma %v, %s, %acc : vector<16xf32>
  hw.vstore %r, %y[%i, %j] : vector<16xf32>, memref<4x64xf32>
  %t = hw.vreduce "add" %r : vector<16xf32> -> f32
  func.return %t : f32
}
