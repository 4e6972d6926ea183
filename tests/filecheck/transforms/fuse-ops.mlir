// RUN: ziggurat-opt %s -p fuse-ops | filecheck %s
// RUN: ziggurat-opt %s -p 'fuse-ops{allow-reduction-fusion=true}' | filecheck %s --check-prefix=RED
// RUN: ziggurat-opt %s -p 'fuse-ops{max-group-size=2}' | filecheck %s --check-prefix=SMALL

// conv2d absorbs its batch_norm (elementwise on the conv's output) and relu:
// one group; the constants stay outside as inputs.
// CHECK-LABEL: func.func @conv_bn_relu
// CHECK:      %w = graph.constant "w" : tensor<4x3x3x3xf32>
// CHECK-NEXT: %s = graph.constant "s" : tensor<4xf32>
// CHECK-NEXT: %r = graph.fused (%x, %w, %s) : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x6x6xf32> {
// CHECK-NEXT: ^{{.*}}(%[[X:.*]]: tensor<1x3x8x8xf32>, %[[W:.*]]: tensor<4x3x3x3xf32>, %[[S:.*]]: tensor<4xf32>):
// CHECK-NEXT:   %c = graph.conv2d %[[X]], %[[W]]
// CHECK-NEXT:   %bn = graph.batch_norm %c, %[[S]], %[[S]], %[[S]], %[[S]]
// CHECK-NEXT:   %[[R:.*]] = graph.relu %bn : tensor<1x4x6x6xf32>
// CHECK-NEXT:   graph.yield %[[R]] : tensor<1x4x6x6xf32>
// CHECK-NEXT: }
// CHECK-NEXT: func.return %r : tensor<1x4x6x6xf32>
// SMALL-LABEL: func.func @conv_bn_relu
// SMALL:      %bn = graph.fused
// SMALL:      %r = graph.relu %bn
func.func @conv_bn_relu(%x: tensor<1x3x8x8xf32>) -> tensor<1x4x6x6xf32> {
  %w = graph.constant "w" : tensor<4x3x3x3xf32>
  %s = graph.constant "s" : tensor<4xf32>
  %c = graph.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x6x6xf32>
  %bn = graph.batch_norm %c, %s, %s, %s, %s {epsilon = 1.0e-05 : f64} : tensor<1x4x6x6xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32> -> tensor<1x4x6x6xf32>
  %r = graph.relu %bn : tensor<1x4x6x6xf32>
  func.return %r : tensor<1x4x6x6xf32>
}

// A diamond below a matmul: both branches are elementwise, so the matmul, the
// branches and the join (its post-dominator) form one group.
// CHECK-LABEL: func.func @diamond_fuses
// CHECK:      %j = graph.fused (%x, %w) : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32> {
// CHECK:        graph.matmul
// CHECK-NEXT:   graph.relu
// CHECK-NEXT:   graph.exp
// CHECK-NEXT:   graph.add
// CHECK-NEXT:   graph.yield
// CHECK-NEXT: }
func.func @diamond_fuses(%x: tensor<2x8xf32>, %w: tensor<8x8xf32>) -> tensor<2x8xf32> {
  %m = graph.matmul %x, %w : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
  %a = graph.relu %m : tensor<2x8xf32>
  %b = graph.exp %m : tensor<2x8xf32>
  %j = graph.add %a, %b : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  func.return %j : tensor<2x8xf32>
}

// A diamond with an opaque softmax on one branch: the relu at the top may not
// fuse into the join (the path to its post-dominator crosses the softmax);
// only the elementwise branch joins the add.
// CHECK-LABEL: func.func @diamond_blocked
// CHECK:      %t = graph.relu %x : tensor<2x8xf32>
// CHECK-NEXT: %s = graph.softmax %t
// CHECK-NEXT: %j = graph.fused (%t, %s) : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32> {
// CHECK:        graph.exp
// CHECK-NEXT:   graph.add
// CHECK-NEXT:   graph.yield
func.func @diamond_blocked(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %t = graph.relu %x : tensor<2x8xf32>
  %s = graph.softmax %t {axis = 1 : i64} : tensor<2x8xf32>
  %e = graph.exp %t : tensor<2x8xf32>
  %j = graph.add %s, %e : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  func.return %j : tensor<2x8xf32>
}

// A reduction takes its injective and elementwise producers but keeps its
// consumers out of its group; with allow-reduction-fusion it fuses into the
// next reduction through the reshape.
// CHECK-LABEL: func.func @reduction_own_group
// CHECK:      %g = graph.fused (%x) : (tensor<1x4x6x6xf32>) -> tensor<1x4x1x1xf32> {
// CHECK:        graph.relu
// CHECK-NEXT:   graph.global_avg_pool
// CHECK-NEXT:   graph.yield
// CHECK-NEXT: }
// CHECK-NEXT: %f = graph.fused (%g) : (tensor<1x4x1x1xf32>) -> tensor<1x1x1x1xf32> {
// CHECK:        graph.reshape
// CHECK-NEXT:   graph.global_avg_pool
// CHECK-NEXT:   graph.yield
// RED-LABEL: func.func @reduction_own_group
// RED:      %f = graph.fused (%x) : (tensor<1x4x6x6xf32>) -> tensor<1x1x1x1xf32> {
// RED:        graph.relu
// RED-NEXT:   graph.global_avg_pool
// RED-NEXT:   graph.reshape
// RED-NEXT:   graph.global_avg_pool
func.func @reduction_own_group(%x: tensor<1x4x6x6xf32>) -> tensor<1x1x1x1xf32> {
  %r = graph.relu %x : tensor<1x4x6x6xf32>
  %g = graph.global_avg_pool %r : tensor<1x4x6x6xf32> -> tensor<1x4x1x1xf32>
  %h = graph.reshape %g : tensor<1x4x1x1xf32> -> tensor<1x1x2x2xf32>
  %f = graph.global_avg_pool %h : tensor<1x1x2x2xf32> -> tensor<1x1x1x1xf32>
  func.return %f : tensor<1x1x1x1xf32>
}

// Negative: nothing fuses. The relu's value is also returned, the softmax is
// opaque, and a lone op gets no group of its own.
// CHECK-LABEL: func.func @no_fusion
// CHECK-NEXT: %r = graph.relu %x : tensor<2x8xf32>
// CHECK-NEXT: %s = graph.softmax %r {axis = 1 : i64} : tensor<2x8xf32>
// CHECK-NEXT: %e = graph.exp %s : tensor<2x8xf32>
// CHECK-NEXT: func.return %r, %e : tensor<2x8xf32>, tensor<2x8xf32>
// CHECK-NOT: graph.fused
func.func @no_fusion(%x: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  %r = graph.relu %x : tensor<2x8xf32>
  %s = graph.softmax %r {axis = 1 : i64} : tensor<2x8xf32>
  %e = graph.exp %s : tensor<2x8xf32>
  func.return %r, %e : tensor<2x8xf32>, tensor<2x8xf32>
}
