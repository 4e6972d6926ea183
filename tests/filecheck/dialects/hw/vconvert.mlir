// RUN: ziggurat-opt %s | ziggurat-opt | filecheck %s
// RUN: ZIGGURAT_ROUNDTRIP | filecheck %s

// hw.vconvert round-trips: lane-wise float <-> integer conversion, as many lanes in as out.
func.func @convert(%x: vector<16xf32>, %q: vector<8xi32>) -> (vector<16xi8>, vector<8xf32>) {
  %a = hw.vconvert "fptoui" %x : vector<16xf32> -> vector<16xi8>
  %b = hw.vconvert "sitofp" %q : vector<8xi32> -> vector<8xf32>
  func.return %a, %b : vector<16xi8>, vector<8xf32>
}
// CHECK:      hw.vconvert "fptoui" %{{.*}} : vector<16xf32> -> vector<16xi8>
// CHECK-NEXT: hw.vconvert "sitofp" %{{.*}} : vector<8xi32> -> vector<8xf32>
