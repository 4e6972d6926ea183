// RUN: ziggurat-opt %s | ziggurat-opt | filecheck %s
// RUN: ZIGGURAT_ROUNDTRIP | filecheck %s

// CHECK-LABEL: func.func @vnni
func.func @vnni(%a: memref<8x64xi8>, %b: memref<16x64xi8>, %c: memref<8x16xi32>, %i: index, %k: index) {
  // CHECK-NEXT: %a4 = hw.vload %a[%i, %k] : memref<8x64xi8> -> vector<4xi8>
  // CHECK-NEXT: %q = x86vec.bcast_group %a4 : vector<4xi8> -> vector<64xi8>
  // CHECK-NEXT: %bv = hw.vload %b[%k, %k] : memref<16x64xi8> -> vector<64xi8>
  // CHECK-NEXT: %acc = hw.vload %c[%i, %k] : memref<8x16xi32> -> vector<16xi32>
  // CHECK-NEXT: %r = x86vec.dpbusd %acc, %q, %bv : vector<16xi32>, vector<64xi8>, vector<64xi8>
  %a4 = hw.vload %a[%i, %k] : memref<8x64xi8> -> vector<4xi8>
  %q = x86vec.bcast_group %a4 : vector<4xi8> -> vector<64xi8>
  %bv = hw.vload %b[%k, %k] : memref<16x64xi8> -> vector<64xi8>
  %acc = hw.vload %c[%i, %k] : memref<8x16xi32> -> vector<16xi32>
  %r = x86vec.dpbusd %acc, %q, %bv : vector<16xi32>, vector<64xi8>, vector<64xi8>
  hw.vstore %r, %c[%i, %k] : vector<16xi32>, memref<8x16xi32>
  func.return
}

// CHECK-LABEL: func.func @avx2
func.func @avx2(%c: vector<8xi32>, %q: vector<32xi8>, %b: vector<32xi8>) -> vector<8xi32> {
  // CHECK-NEXT: %r = x86vec.maddubs_dot %c, %q, %b : vector<8xi32>, vector<32xi8>, vector<32xi8>
  %r = x86vec.maddubs_dot %c, %q, %b : vector<8xi32>, vector<32xi8>, vector<32xi8>
  func.return %r : vector<8xi32>
}

// CHECK-LABEL: func.func @avx2_wide
func.func @avx2_wide(%c: vector<8xi32>, %a: vector<16xi16>, %b: vector<16xi16>) -> vector<8xi32> {
  // CHECK-NEXT: %r = x86vec.maddwd_dot %c, %a, %b : vector<8xi32>, vector<16xi16>, vector<16xi16>
  %r = x86vec.maddwd_dot %c, %a, %b : vector<8xi32>, vector<16xi16>, vector<16xi16>
  func.return %r : vector<8xi32>
}

// CHECK-LABEL: func.func @bf16
func.func @bf16(%f: vector<8xf32>, %x: vector<16xbf16>, %y: vector<16xbf16>) -> vector<8xf32> {
  // CHECK-NEXT: %r = x86vec.dpbf16ps %f, %x, %y : vector<8xf32>, vector<16xbf16>, vector<16xbf16>
  %r = x86vec.dpbf16ps %f, %x, %y : vector<8xf32>, vector<16xbf16>, vector<16xbf16>
  func.return %r : vector<8xf32>
}
