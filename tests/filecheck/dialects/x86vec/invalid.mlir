// RUN: ziggurat-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @lanes(%c: vector<16xi32>, %a: vector<32xi8>) {
  %r = x86vec.dpbusd %c, %a, %a : vector<16xi32>, vector<32xi8>, vector<32xi8>
  func.return
}
// CHECK: 'x86vec.dpbusd' op lhs must be vector<64xi8> for a 16-lane accumulator, got vector<32xi8>

// -----

func.func @acc(%c: vector<16xf32>, %a: vector<64xi8>) {
  %r = x86vec.dpbusd %c, %a, %a : vector<16xf32>, vector<64xi8>, vector<64xi8>
  func.return
}
// CHECK: 'x86vec.dpbusd' op accumulates in i32, got vector<16xf32>

// -----

func.func @wide(%c: vector<32xi32>, %a: vector<128xi8>) {
  %r = x86vec.dpbusd %c, %a, %a : vector<32xi32>, vector<128xi8>, vector<128xi8>
  func.return
}
// CHECK: 'x86vec.dpbusd' op needs a 128-, 256- or 512-bit accumulator, got vector<32xi32>

// -----

func.func @group(%a: vector<8xi8>) {
  %q = x86vec.bcast_group %a : vector<8xi8> -> vector<64xi8>
  func.return
}
// CHECK: 'x86vec.bcast_group' op broadcasts a 32-bit group, got vector<8xi8>

// -----

func.func @maddubs_lanes(%c: vector<8xi32>, %a: vector<64xi8>) {
  %r = x86vec.maddubs_dot %c, %a, %a : vector<8xi32>, vector<64xi8>, vector<64xi8>
  func.return
}
// CHECK: 'x86vec.maddubs_dot' op lhs must be vector<32xi8> for a 8-lane accumulator, got vector<64xi8>

// -----

func.func @maddwd_bytes(%c: vector<8xi32>, %a: vector<16xi8>) {
  %r = x86vec.maddwd_dot %c, %a, %a : vector<8xi32>, vector<16xi8>, vector<16xi8>
  func.return
}
// CHECK: 'x86vec.maddwd_dot' op lhs must be vector<16xi16> for a 8-lane accumulator, got vector<16xi8>
