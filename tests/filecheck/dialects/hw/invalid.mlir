// RUN: ziggurat-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @too_wide(%x: memref<64xf32>, %i: index) {
  %v = hw.vload %x[%i] : memref<64xf32> -> vector<32xf32>
  func.return
}
// CHECK: 'hw.vload' op vector<32xf32> is 1024 bits; registers hold at most 512

// -----

func.func @short_buffer(%x: memref<4x8xf32>, %i: index) {
  %v = hw.vload %x[%i, %i] : memref<4x8xf32> -> vector<16xf32>
  func.return
}
// CHECK: 'hw.vload' op the buffer's last dim is shorter than the vector width 16

// -----

func.func @bad_reduce(%v: vector<16xf32>) {
  %s = hw.vreduce "xor" %v : vector<16xf32> -> f32
  func.return
}
// CHECK: 'hw.vreduce' op kind must be one of ('add', 'mul', 'max', 'min')

// -----

func.func @bad_mask(%x: memref<32xf32>, %i: index, %m: vector<8xi1>) {
  %v = hw.vmaskload %x[%i], %m : memref<32xf32>, vector<8xi1> -> vector<16xf32>
  func.return
}
// CHECK: 'hw.vmaskload' op mask must be a vector of i1 with 16 lanes, got vector<8xi1>

// -----

func.func @bad_predicate(%i: index) {
  %m = hw.vlanecmp "ult" %i, %i : vector<16xi1>
  func.return
}
// CHECK: 'hw.vlanecmp' op predicate must be one of ('slt', 'sle', 'sgt', 'sge', 'eq', 'ne')

// -----

func.func @gather_no_stride(%x: memref<32xf32>, %i: index, %m: vector<16xi1>) {
  %v = hw.vgather %x[%i], %m : memref<32xf32>, vector<16xi1> -> vector<16xf32>
  func.return
}
// CHECK: 'hw.vgather' op needs an integer `stride` attribute

// -----

func.func @bad_select(%m: vector<8xi1>, %a: vector<16xf32>) {
  %v = hw.vselect %m, %a, %a : vector<8xi1>, vector<16xf32>
  func.return
}
// CHECK: 'hw.vselect' op mask must be a vector of i1 with as many lanes as the result, got vector<8xi1>
