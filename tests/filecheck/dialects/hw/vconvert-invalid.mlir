// RUN: ziggurat-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @lanes(%x: vector<16xf32>) -> vector<8xi8> {
  %a = hw.vconvert "fptoui" %x : vector<16xf32> -> vector<8xi8>
  func.return %a : vector<8xi8>
}
// CHECK: operand and result must have as many lanes, got vector<16xf32> and vector<8xi8>

// -----

func.func @direction(%x: vector<16xf32>) -> vector<16xf32> {
  %a = hw.vconvert "uitofp" %x : vector<16xf32> -> vector<16xf32>
  func.return %a : vector<16xf32>
}
// CHECK: 'uitofp' converts integer to float lanes, got vector<16xf32> -> vector<16xf32>

// -----

func.func @kind(%x: vector<16xf32>) -> vector<16xi8> {
  %a = hw.vconvert "bitcast" %x : vector<16xf32> -> vector<16xi8>
  func.return %a : vector<16xi8>
}
// CHECK: kind must be one of
