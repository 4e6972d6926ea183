// RUN: ziggurat-opt %s -p 'convert-loop-to-hw{vector-width=16}' --split-input-file | filecheck %s

// Quantize then dequantize (an int8 model's Q/DQ pair): roundeven and trunc stay lane-wise,
// the float <-> integer casts become hw.vconvert (xDSL's arith casts are scalar only), and the
// loop is vectorized with its lanes going f32 -> i8 -> f32.
func.func @qdq(%x: memref<32xf32>, %y: memref<32xf32>) {
  loop.for %j = 0 to 32 vectorized {
    loop.block "qdq" [S %b = %j] {
      %v = loop.load %x[%b] : memref<32xf32>
      %r = math.roundeven %v : f32
      %t = math.trunc %r : f32
      %lo = arith.constant 0.000000e+00 : f32
      %hi = arith.constant 2.550000e+02 : f32
      %c1 = arith.maximumf %t, %lo : f32
      %c2 = arith.minimumf %c1, %hi : f32
      %q = arith.fptoui %c2 : f32 to i8
      %d = arith.uitofp %q : i8 to f32
      loop.store %d, %y[%b] : memref<32xf32>
    }
  }
  func.return
}
// CHECK-LABEL: func.func @qdq
// CHECK:         %[[V:.*]] = hw.vload %x[%{{.*}}] : memref<32xf32> -> vector<16xf32>
// CHECK:         math.roundeven %[[V]] : vector<16xf32>
// CHECK:         math.trunc %{{.*}} : vector<16xf32>
// CHECK:         %[[Q:.*]] = hw.vconvert "fptoui" %{{.*}} : vector<16xf32> -> vector<16xi8>
// CHECK-NEXT:    %[[D:.*]] = hw.vconvert "uitofp" %[[Q]] : vector<16xi8> -> vector<16xf32>
// CHECK:         hw.vstore %[[D]], %y
// CHECK-NOT:     hw.not_vectorized

// -----

// Must not fire: lanes that would widen past the loop's 32-bit elements (f32 -> f64) keep the
// loop scalar, with the reason.
func.func @widen(%x: memref<32xf32>, %y: memref<32xf32>) {
  loop.for %j = 0 to 32 vectorized {
    loop.block "widen" [S %b = %j] {
      %v = loop.load %x[%b] : memref<32xf32>
      %w = arith.extf %v : f32 to f64
      %n = arith.truncf %w : f64 to f32
      loop.store %n, %y[%b] : memref<32xf32>
    }
  }
  func.return
}
// CHECK-LABEL: func.func @widen
// CHECK:         hw.not_vectorized = "'arith.extf' makes lanes wider than the loop's 32-bit elements"
// CHECK-NOT:     hw.vconvert

// -----

// An int8 GEMM's epilogue: i32 accumulators and column sums loaded as i32 lanes, integer
// subtraction lane-wise, then to f32 and scaled: one vector loop over mixed element types.
func.func @requant(%acc: memref<32xi32>, %cols: memref<32xi32>, %scale: memref<32xf32>, %y: memref<32xf32>) {
  loop.for %j = 0 to 32 vectorized {
    loop.block "requant" [S %b = %j] {
      %a = loop.load %acc[%b] : memref<32xi32>
      %c = loop.load %cols[%b] : memref<32xi32>
      %d = arith.subi %a, %c : i32
      %f = arith.sitofp %d : i32 to f32
      %s = loop.load %scale[%b] : memref<32xf32>
      %r = arith.mulf %f, %s : f32
      loop.store %r, %y[%b] : memref<32xf32>
    }
  }
  func.return
}
// CHECK-LABEL: func.func @requant
// CHECK:         %[[A:.*]] = hw.vload %acc[%{{.*}}] : memref<32xi32> -> vector<16xi32>
// CHECK:         %[[C:.*]] = hw.vload %cols[%{{.*}}] : memref<32xi32> -> vector<16xi32>
// CHECK:         %[[D:.*]] = arith.subi %[[A]], %[[C]] : vector<16xi32>
// CHECK:         hw.vconvert "sitofp" %[[D]] : vector<16xi32> -> vector<16xf32>
// CHECK-NOT:     hw.not_vectorized
