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
