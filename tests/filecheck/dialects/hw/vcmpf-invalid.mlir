// RUN: ziggurat-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @bad_predicate(%a: vector<16xf32>) {
  %m = hw.vcmpf "slt" %a, %a : vector<16xf32> -> vector<16xi1>
  func.return
}
// CHECK: 'hw.vcmpf' op predicate must be one of

// -----

func.func @bad_lanes(%a: vector<16xf32>) {
  %m = "hw.vcmpf"(%a, %a) <{predicate = "oeq"}> : (vector<16xf32>, vector<16xf32>) -> vector<8xi1>
  func.return
}
// CHECK: 'hw.vcmpf' op result must be a vector of i1 with as many lanes as the operands, got vector<8xi1>
