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

// -----

// CHECK-LABEL: func.func @masked
func.func @masked(%x: memref<4x20xf32>, %i: index, %j: index, %n: index) {
  // CHECK-NEXT: %m = hw.vlanecmp "slt" %j, %n : vector<16xi1>
  // CHECK-NEXT: %m2 = hw.vlanecmp "sge" %j, %n {stride = 2 : i64} : vector<16xi1>
  // CHECK-NEXT: %v = hw.vmaskload %x[%i, %j], %m : memref<4x20xf32>, vector<16xi1> -> vector<16xf32>
  // CHECK-NEXT: %g = hw.vgather %x[%i, %j], %m2 {stride = 2 : i64} : memref<4x20xf32>, vector<16xi1> -> vector<16xf32>
  // CHECK-NEXT: %s = hw.vselect %m, %v, %g : vector<16xi1>, vector<16xf32>
  // CHECK-NEXT: hw.vmaskstore %s, %x[%i, %j], %m : vector<16xf32>, memref<4x20xf32>, vector<16xi1>
  %m = hw.vlanecmp "slt" %j, %n : vector<16xi1>
  %m2 = hw.vlanecmp "sge" %j, %n {stride = 2 : i64} : vector<16xi1>
  %v = hw.vmaskload %x[%i, %j], %m : memref<4x20xf32>, vector<16xi1> -> vector<16xf32>
  %g = hw.vgather %x[%i, %j], %m2 {stride = 2 : i64} : memref<4x20xf32>, vector<16xi1> -> vector<16xf32>
  %s = hw.vselect %m, %v, %g : vector<16xi1>, vector<16xf32>
  hw.vmaskstore %s, %x[%i, %j], %m : vector<16xf32>, memref<4x20xf32>, vector<16xi1>
  func.return
}
