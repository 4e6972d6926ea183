// RUN: ziggurat-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @signed_a(%a: tensor<8x64xi8>, %b: tensor<16x128xi8>) {
  %c = graph.qgemm %a, %b : tensor<8x64xi8>, tensor<16x128xi8> -> tensor<8x32xi32>
  func.return
}
// CHECK: 'graph.qgemm' op a must hold ui8 (or i16; i8 with pairs16), got tensor<8x64xi8>

// -----

func.func @signed_a_signed_b(%a: tensor<8x64xi8>, %b: tensor<16x128xi8>) {
  %c = graph.qgemm %a, %b {pairs16} : tensor<8x64xi8>, tensor<16x128xi8> -> tensor<8x32xi32>
  func.return
}
// CHECK: 'graph.qgemm' op b must hold ui8 with a signed 8-bit a, got tensor<16x128xi8>

// -----

func.func @k_not_packed(%a: tensor<8x62xui8>, %b: tensor<16x128xi8>) {
  %c = graph.qgemm %a, %b : tensor<8x62xui8>, tensor<16x128xi8> -> tensor<8x32xi32>
  func.return
}
// CHECK: 'graph.qgemm' op a's K = 62 must be a multiple of 4 and equal 4 x b's dim -2 (16)

// -----

func.func @n_not_16(%a: tensor<8x64xui8>, %b: tensor<16x40xi8>) {
  %c = graph.qgemm %a, %b : tensor<8x64xui8>, tensor<16x40xi8> -> tensor<8x10xi32>
  func.return
}
// CHECK: 'graph.qgemm' op b's last dim 40 must be 4 x N (plus padding) with N a multiple of 16

// -----

func.func @wide_a_byte_b(%a: tensor<8x64xi16>, %b: tensor<32x64xi8>) {
  %c = graph.qgemm %a, %b : tensor<8x64xi16>, tensor<32x64xi8> -> tensor<8x32xi32>
  func.return
}
// CHECK: 'graph.qgemm' op b must hold i16 with an i16 a, got tensor<32x64xi8>

// -----

func.func @n_past_b(%a: tensor<8x64xi16>, %b: tensor<32x64xi16>) {
  %c = graph.qgemm %a, %b : tensor<8x64xi16>, tensor<32x64xi16> -> tensor<8x48xi32>
  func.return
}
// CHECK: 'graph.qgemm' op result N = 48 must be a multiple of 16 and at most b's last dim / 2 (32)
