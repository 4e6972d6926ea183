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

// The ONNX decomposition core.

// CHECK-LABEL: func.func @core
func.func @core(%x: tensor<2x16xf32>, %y: tensor<2x4xf32>) -> tensor<2x8xf32> {
  // CHECK-NEXT: %a = graph.abs %x : tensor<2x16xf32>
  %a = graph.abs %x : tensor<2x16xf32>
  // CHECK-NEXT: %l = graph.log %a : tensor<2x16xf32>
  %l = graph.log %a : tensor<2x16xf32>
  // CHECK-NEXT: %f = graph.floor %l : tensor<2x16xf32>
  %f = graph.floor %l : tensor<2x16xf32>
  // CHECK-NEXT: %c = graph.ceil %f : tensor<2x16xf32>
  %c = graph.ceil %f : tensor<2x16xf32>
  // CHECK-NEXT: %sn = graph.sin %c : tensor<2x16xf32>
  %sn = graph.sin %c : tensor<2x16xf32>
  // CHECK-NEXT: %cs = graph.cos %sn : tensor<2x16xf32>
  %cs = graph.cos %sn : tensor<2x16xf32>
  // CHECK-NEXT: %at = graph.atan %cs : tensor<2x16xf32>
  %at = graph.atan %cs : tensor<2x16xf32>
  // CHECK-NEXT: %rd = graph.round %at : tensor<2x16xf32>
  %rd = graph.round %at : tensor<2x16xf32>
  // CHECK-NEXT: %p = graph.pow %c, %x : tensor<2x16xf32>, tensor<2x16xf32> -> tensor<2x16xf32>
  %p = graph.pow %c, %x : tensor<2x16xf32>, tensor<2x16xf32> -> tensor<2x16xf32>
  // CHECK-NEXT: %mx = graph.max %p, %x : tensor<2x16xf32>, tensor<2x16xf32> -> tensor<2x16xf32>
  %mx = graph.max %p, %x : tensor<2x16xf32>, tensor<2x16xf32> -> tensor<2x16xf32>
  // CHECK-NEXT: %mn = graph.min %mx, %x : tensor<2x16xf32>, tensor<2x16xf32> -> tensor<2x16xf32>
  %mn = graph.min %mx, %x : tensor<2x16xf32>, tensor<2x16xf32> -> tensor<2x16xf32>
  // CHECK-NEXT: %s = graph.slice %mn {starts = array<i64: 0, 15>, steps = array<i64: 1, -4>} : tensor<2x16xf32> -> tensor<2x4xf32>
  %s = graph.slice %mn {starts = array<i64: 0, 15>, steps = array<i64: 1, -4>} : tensor<2x16xf32> -> tensor<2x4xf32>
  // CHECK-NEXT: %cat = graph.concat %s, %y {axis = 1 : i64} : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x8xf32>
  %cat = graph.concat %s, %y {axis = 1 : i64} : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x8xf32>
  // CHECK-NEXT: %r = graph.reduce %cat {kind = "mean", axes = array<i64: 1>, keepdims = true} : tensor<2x8xf32> -> tensor<2x1xf32>
  %r = graph.reduce %cat {kind = "mean", axes = array<i64: 1>, keepdims = true} : tensor<2x8xf32> -> tensor<2x1xf32>
  // CHECK-NEXT: %b = graph.broadcast_to %r : tensor<2x1xf32> -> tensor<2x8xf32>
  %b = graph.broadcast_to %r : tensor<2x1xf32> -> tensor<2x8xf32>
  // CHECK-NEXT: %m = graph.compare %b, %r {kind = "lt"} : tensor<2x8xf32>, tensor<2x1xf32> -> tensor<2x8xf32>
  %m = graph.compare %b, %r {kind = "lt"} : tensor<2x8xf32>, tensor<2x1xf32> -> tensor<2x8xf32>
  // CHECK-NEXT: %w = graph.where %m, %b, %r : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x1xf32> -> tensor<2x8xf32>
  %w = graph.where %m, %b, %r : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x1xf32> -> tensor<2x8xf32>
  // CHECK-NEXT: %g = graph.gather_elements %w, %m {axis = 1 : i64} : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %g = graph.gather_elements %w, %m {axis = 1 : i64} : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  func.return %g : tensor<2x8xf32>
}

// A fused group (made by fuse-ops): block arguments stand for the inputs,
// graph.yield gives the results; one result prints bare, several in parens.
// CHECK-LABEL: func.func @fused
func.func @fused(%x: tensor<2x8xf32>, %w: tensor<8x8xf32>) -> tensor<2x8xf32> {
  // CHECK-NEXT: %y = graph.fused (%x, %w) : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32> {
  // CHECK-NEXT: ^{{.*}}(%a: tensor<2x8xf32>, %b: tensor<8x8xf32>):
  // CHECK-NEXT:   %m = graph.matmul %a, %b : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
  // CHECK-NEXT:   %r = graph.relu %m : tensor<2x8xf32>
  // CHECK-NEXT:   graph.yield %r : tensor<2x8xf32>
  // CHECK-NEXT: }
  %y = graph.fused (%x, %w) : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>, %b: tensor<8x8xf32>):
    %m = graph.matmul %a, %b : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
    %r = graph.relu %m : tensor<2x8xf32>
    graph.yield %r : tensor<2x8xf32>
  }
  // CHECK: %p, %q = graph.fused (%y) : (tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  // CHECK:   graph.yield %e, %n : tensor<2x8xf32>, tensor<2x8xf32>
  %p, %q = graph.fused (%y) : (tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  ^bb0(%c: tensor<2x8xf32>):
    %e = graph.exp %c : tensor<2x8xf32>
    %n = graph.neg %e : tensor<2x8xf32>
    graph.yield %e, %n : tensor<2x8xf32>, tensor<2x8xf32>
  }
  func.return %q : tensor<2x8xf32>
}
