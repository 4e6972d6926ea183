// RUN: ziggurat-opt %s | ziggurat-opt | filecheck %s
// RUN: ZIGGURAT_ROUNDTRIP | filecheck %s

// CHECK-LABEL: func.func @q
// CHECK-NEXT: %c = graph.qgemm %a, %b : tensor<8x64xui8>, tensor<16x128xi8> -> tensor<8x32xi32>
// CHECK-NEXT: %d = graph.qgemm %e, %b : tensor<2x3x64xui8>, tensor<16x128xi8> -> tensor<2x3x32xi32>
func.func @q(%a: tensor<8x64xui8>, %b: tensor<16x128xi8>, %e: tensor<2x3x64xui8>) -> tensor<8x32xi32> {
  %c = graph.qgemm %a, %b : tensor<8x64xui8>, tensor<16x128xi8> -> tensor<8x32xi32>
  %d = graph.qgemm %e, %b : tensor<2x3x64xui8>, tensor<16x128xi8> -> tensor<2x3x32xi32>
  func.return %c : tensor<8x32xi32>
}

// The wide form (AVX2's exact int8 GEMM): 8-bit values widened to i16, b packed [K/2][2N].
// CHECK-LABEL: func.func @wide
// CHECK-NEXT: %c = graph.qgemm %a, %b : tensor<8x64xi16>, tensor<32x64xi16> -> tensor<8x32xi32>
func.func @wide(%a: tensor<8x64xi16>, %b: tensor<32x64xi16>) -> tensor<8x32xi32> {
  %c = graph.qgemm %a, %b : tensor<8x64xi16>, tensor<32x64xi16> -> tensor<8x32xi32>
  func.return %c : tensor<8x32xi32>
}

// b's rows may be padded past 2N (AVX2's packed rows: an odd number of 64-byte lines); N is the result's.
// CHECK-LABEL: func.func @padded_rows
// CHECK-NEXT: %c = graph.qgemm %a, %b : tensor<8x64xi16>, tensor<32x96xi16> -> tensor<8x32xi32>
func.func @padded_rows(%a: tensor<8x64xi16>, %b: tensor<32x96xi16>) -> tensor<8x32xi32> {
  %c = graph.qgemm %a, %b : tensor<8x64xi16>, tensor<32x96xi16> -> tensor<8x32xi32>
  func.return %c : tensor<8x32xi32>
}

// The swapped pairs16 form (-int8=saturate): signed activations (minus 128) times the weight plus 128, unsigned.
// CHECK-LABEL: func.func @swapped
// CHECK-NEXT: %c = graph.qgemm %a, %b {pairs16} : tensor<8x64xi8>, tensor<16x128xui8> -> tensor<8x32xi32>
func.func @swapped(%a: tensor<8x64xi8>, %b: tensor<16x128xui8>) -> tensor<8x32xi32> {
  %c = graph.qgemm %a, %b {pairs16} : tensor<8x64xi8>, tensor<16x128xui8> -> tensor<8x32xi32>
  func.return %c : tensor<8x32xi32>
}
