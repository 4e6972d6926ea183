// RUN: ziggurat-opt %s | ziggurat-opt | filecheck %s
// RUN: ZIGGURAT_ROUNDTRIP | filecheck %s

// CHECK-LABEL: func.func @mask
func.func @mask(%a: vector<16xf32>, %b: vector<16xf32>) -> vector<16xf32> {
  // CHECK-NEXT: %m = hw.vcmpf "olt" %a, %b : vector<16xf32> -> vector<16xi1>
  // CHECK-NEXT: %u = hw.vcmpf "une" %a, %a : vector<16xf32> -> vector<16xi1>
  // CHECK-NEXT: %s = hw.vselect %m, %a, %b : vector<16xi1>, vector<16xf32>
  %m = hw.vcmpf "olt" %a, %b : vector<16xf32> -> vector<16xi1>
  %u = hw.vcmpf "une" %a, %a : vector<16xf32> -> vector<16xi1>
  %s = hw.vselect %m, %a, %b : vector<16xi1>, vector<16xf32>
  func.return %s : vector<16xf32>
}
