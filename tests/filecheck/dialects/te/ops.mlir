// RUN: ziggurat-opt %s | ziggurat-opt | filecheck %s
// RUN: ZIGGURAT_ROUNDTRIP | filecheck %s

// CHECK-LABEL: func.func @dense_relu
func.func @dense_relu(%x: tensor<1x784xf32>, %w: tensor<512x784xf32>) -> tensor<1x512xf32> {
  // CHECK-NEXT: %y = te.reduce "dense" add init 0.000000e+00 : f32 (%i, %j) reduce (%k : 784) : tensor<1x512xf32> {
  // CHECK-NEXT:   %a = te.read %x[%i, %k] : tensor<1x784xf32>
  // CHECK-NEXT:   %b = te.read %w[%j, %k] : tensor<512x784xf32>
  // CHECK-NEXT:   %m = arith.mulf %a, %b : f32
  // CHECK-NEXT:   te.yield %m : f32
  // CHECK-NEXT: }
  %y = te.reduce "dense" add init 0.000000e+00 : f32 (%i, %j) reduce (%k : 784) : tensor<1x512xf32> {
    %a = te.read %x[%i, %k] : tensor<1x784xf32>
    %b = te.read %w[%j, %k] : tensor<512x784xf32>
    %m = arith.mulf %a, %b : f32
    te.yield %m : f32
  }
  // CHECK-NEXT: %z = te.compute "relu" (%i_1, %j_1) : tensor<1x512xf32> {
  // CHECK-NEXT:   %v = te.read %y[%i_1, %j_1] : tensor<1x512xf32>
  %z = te.compute "relu" (%i, %j) : tensor<1x512xf32> {
    %v = te.read %y[%i, %j] : tensor<1x512xf32>
    %c = arith.constant 0.000000e+00 : f32
    %r = arith.maximumf %v, %c : f32
    te.yield %r : f32
  }
  func.return %z : tensor<1x512xf32>
}

// CHECK-LABEL: func.func @padded_max
func.func @padded_max(%x: tensor<1x1x4x4xf32>) -> tensor<1x1x2x2xf32> {
  // CHECK: te.reduce "pool" max init 0xff800000 : f32 (%n, %c, %h, %w) reduce (%kh : 3, %kw : 3)
  // CHECK: te.read %x[%n, %c, %y, %w] pad 0xff800000 : f32 : tensor<1x1x4x4xf32>
  %p = te.reduce "pool" max init 0xFF800000 : f32 (%n, %c, %h, %w) reduce (%kh : 3, %kw : 3) : tensor<1x1x2x2xf32> {
    %y = arith.addi %h, %kh : index
    %v = te.read %x[%n, %c, %y, %w] pad 0xFF800000 : f32 : tensor<1x1x4x4xf32>
    te.yield %v : f32
  }
  func.return %p : tensor<1x1x2x2xf32>
}
