// RUN: ziggurat-opt %s | ziggurat-opt | filecheck %s
// RUN: ZIGGURAT_ROUNDTRIP | filecheck %s

// CHECK-LABEL: func.func @cnn
func.func @cnn(%x: tensor<1x3x32x32xf32>, %p: tensor<32xf32>) -> tensor<1x10xf32> {
  // CHECK-NEXT: %w = graph.constant "conv.w" : tensor<32x3x3x3xf32>
  %w = graph.constant "conv.w" : tensor<32x3x3x3xf32>
  // CHECK-NEXT: %c = graph.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x3x32x32xf32>, tensor<32x3x3x3xf32> -> tensor<1x32x32x32xf32>
  %c = graph.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x3x32x32xf32>, tensor<32x3x3x3xf32> -> tensor<1x32x32x32xf32>
  // CHECK-NEXT: %bn = graph.batch_norm %c, %p, %p, %p, %p {epsilon = 1.000000e-05 : f64}
  %bn = graph.batch_norm %c, %p, %p, %p, %p {epsilon = 1.0e-05 : f64} : tensor<1x32x32x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32> -> tensor<1x32x32x32xf32>
  // CHECK-NEXT: %r = graph.relu %bn : tensor<1x32x32x32xf32>
  %r = graph.relu %bn : tensor<1x32x32x32xf32>
  // CHECK-NEXT: %t = graph.tanh %r : tensor<1x32x32x32xf32>
  %t = graph.tanh %r : tensor<1x32x32x32xf32>
  // CHECK-NEXT: %s = graph.sigmoid %t : tensor<1x32x32x32xf32>
  %s = graph.sigmoid %t : tensor<1x32x32x32xf32>
  // CHECK-NEXT: %mp = graph.max_pool2d %s {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : tensor<1x32x32x32xf32> -> tensor<1x32x16x16xf32>
  %mp = graph.max_pool2d %s {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : tensor<1x32x32x32xf32> -> tensor<1x32x16x16xf32>
  // CHECK-NEXT: %ap = graph.avg_pool2d %mp {kernel = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, ceil_mode = false, count_include_pad = true} : tensor<1x32x16x16xf32> -> tensor<1x32x16x16xf32>
  %ap = graph.avg_pool2d %mp {kernel = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, ceil_mode = false, count_include_pad = true} : tensor<1x32x16x16xf32> -> tensor<1x32x16x16xf32>
  // CHECK-NEXT: %g = graph.global_avg_pool %ap : tensor<1x32x16x16xf32> -> tensor<1x32x1x1xf32>
  %g = graph.global_avg_pool %ap : tensor<1x32x16x16xf32> -> tensor<1x32x1x1xf32>
  // CHECK-NEXT: %f = graph.reshape %g : tensor<1x32x1x1xf32> -> tensor<1x32xf32>
  %f = graph.reshape %g : tensor<1x32x1x1xf32> -> tensor<1x32xf32>
  %fw = graph.constant "fc.w" : tensor<10x32xf32>
  // CHECK: %m = graph.matmul %f, %fw {transpose_b = true} : tensor<1x32xf32>, tensor<10x32xf32> -> tensor<1x10xf32>
  %m = graph.matmul %f, %fw {transpose_b = true} : tensor<1x32xf32>, tensor<10x32xf32> -> tensor<1x10xf32>
  %fb = graph.constant "fc.b" : tensor<10xf32>
  // CHECK: %a = graph.add %m, %fb : tensor<1x10xf32>, tensor<10xf32> -> tensor<1x10xf32>
  %a = graph.add %m, %fb : tensor<1x10xf32>, tensor<10xf32> -> tensor<1x10xf32>
  // CHECK-NEXT: %sub = graph.sub %a, %a : tensor<1x10xf32>, tensor<1x10xf32> -> tensor<1x10xf32>
  %sub = graph.sub %a, %a : tensor<1x10xf32>, tensor<1x10xf32> -> tensor<1x10xf32>
  // CHECK-NEXT: %mul = graph.mul %sub, %fb : tensor<1x10xf32>, tensor<10xf32> -> tensor<1x10xf32>
  %mul = graph.mul %sub, %fb : tensor<1x10xf32>, tensor<10xf32> -> tensor<1x10xf32>
  // CHECK-NEXT: %div = graph.div %mul, %a : tensor<1x10xf32>, tensor<1x10xf32> -> tensor<1x10xf32>
  %div = graph.div %mul, %a : tensor<1x10xf32>, tensor<1x10xf32> -> tensor<1x10xf32>
  // CHECK-NEXT: %e = graph.exp %div : tensor<1x10xf32>
  %e = graph.exp %div : tensor<1x10xf32>
  // CHECK-NEXT: %q = graph.sqrt %e : tensor<1x10xf32>
  %q = graph.sqrt %e : tensor<1x10xf32>
  // CHECK-NEXT: %n = graph.neg %q : tensor<1x10xf32>
  %n = graph.neg %q : tensor<1x10xf32>
  // CHECK-NEXT: %er = graph.erf %n : tensor<1x10xf32>
  %er = graph.erf %n : tensor<1x10xf32>
  // CHECK-NEXT: %tr = graph.transpose %er {perm = array<i64: 1, 0>} : tensor<1x10xf32> -> tensor<10x1xf32>
  %tr = graph.transpose %er {perm = array<i64: 1, 0>} : tensor<1x10xf32> -> tensor<10x1xf32>
  // CHECK-NEXT: %sm = graph.softmax %er {axis = 1 : i64} : tensor<1x10xf32>
  %sm = graph.softmax %er {axis = 1 : i64} : tensor<1x10xf32>
  // CHECK-NEXT: %k = graph.call_kernel @kernel_0(%sm, %a) : (tensor<1x10xf32>, tensor<1x10xf32>) -> tensor<1x10xf32>
  %k = graph.call_kernel @kernel_0(%sm, %a) : (tensor<1x10xf32>, tensor<1x10xf32>) -> tensor<1x10xf32>
  func.return %k : tensor<1x10xf32>
}
