// RUN: python -c "import numpy as np; np.savez('%t.npz', w=np.ones((4,3,3,3),np.float32), s=np.full(4,2,np.float32), b0=np.ones((4,1,1),np.float32), one=np.ones(8,np.float32), zero=np.zeros(8,np.float32), two=np.full(8,2,np.float32), c255=np.full(1,255,np.float32), fc=np.ones((8,8),np.float32))"
// RUN: sed 's#WEIGHTS#%t.npz#' %s | ziggurat-opt -p simplify-graph --split-input-file | filecheck %s

// Shape ops: a transpose pair that cancels, an identity reshape and a chain of
// reshapes; none needs weights.
// CHECK-LABEL: func.func @shapes
// CHECK-NEXT:  %c = graph.reshape %x : tensor<4x8xf32> -> tensor<2x16xf32>
// CHECK-NEXT:  %p = graph.transpose %x {perm = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
// CHECK-NEXT:  func.return %c, %p
func.func @shapes(%x: tensor<4x8xf32>) -> (tensor<2x16xf32>, tensor<8x4xf32>) {
  %t = graph.transpose %x {perm = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
  %u = graph.transpose %t {perm = array<i64: 1, 0>} : tensor<8x4xf32> -> tensor<4x8xf32>
  %r = graph.reshape %u : tensor<4x8xf32> -> tensor<4x8xf32>
  %a = graph.reshape %r : tensor<4x8xf32> -> tensor<32xf32>
  %c = graph.reshape %a : tensor<32xf32> -> tensor<2x16xf32>
  %i = graph.transpose %x {perm = array<i64: 0, 1>} : tensor<4x8xf32> -> tensor<4x8xf32>
  %p = graph.transpose %i {perm = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
  func.return %c, %p : tensor<2x16xf32>, tensor<8x4xf32>
}

// -----

// BatchNorm after conv2d + bias folds into a new conv weight and one bias add.
// CHECK-LABEL: func.func @conv_bn
// CHECK-NOT:   graph.batch_norm
// CHECK:       %[[W:.*]] = graph.constant "w.bn" : tensor<4x3x3x3xf32>
// CHECK-NEXT:  %[[C:.*]] = graph.conv2d %x, %[[W]]
// CHECK-NEXT:  %[[B:.*]] = graph.constant "w.bn.bn_bias" : tensor<4x1x1xf32>
// CHECK-NEXT:  %[[BN:.*]] = graph.add %[[C]], %[[B]] : tensor<1x4x6x6xf32>, tensor<4x1x1xf32> -> tensor<1x4x6x6xf32>
// CHECK-NEXT:  func.return %[[BN]]
builtin.module attributes {graph.weights_file = "WEIGHTS"} {
  func.func @conv_bn(%x: tensor<1x3x8x8xf32>) -> tensor<1x4x6x6xf32> {
    %w = graph.constant "w" : tensor<4x3x3x3xf32>
    %b0 = graph.constant "b0" : tensor<4x1x1xf32>
    %s = graph.constant "s" : tensor<4xf32>
    %c = graph.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x6x6xf32>
    %cb = graph.add %c, %b0 : tensor<1x4x6x6xf32>, tensor<4x1x1xf32> -> tensor<1x4x6x6xf32>
    %bn = graph.batch_norm %cb, %s, %s, %s, %s {epsilon = 1.0e-05 : f64} : tensor<1x4x6x6xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32> -> tensor<1x4x6x6xf32>
    func.return %bn : tensor<1x4x6x6xf32>
  }
}

// -----

// Neutral operands vanish, division by a constant becomes a multiplication;
// x * 2 and an x + 0 that broadcasts to a larger shape must stay.
// CHECK-LABEL: func.func @arith
// CHECK:       %[[R:.*]] = graph.constant "two.reciprocal" : tensor<8xf32>
// CHECK-NEXT:  %[[D:.*]] = graph.mul %x, %[[R]] : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
// CHECK-NEXT:  %m2 = graph.mul %[[D]], %two : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
// CHECK-NEXT:  %wide = graph.add %y, %zero : tensor<1xf32>, tensor<8xf32> -> tensor<8xf32>
// CHECK-NEXT:  func.return %m2, %wide
builtin.module attributes {graph.weights_file = "WEIGHTS"} {
  func.func @arith(%x: tensor<8xf32>, %y: tensor<1xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
    %one = graph.constant "one" : tensor<8xf32>
    %zero = graph.constant "zero" : tensor<8xf32>
    %two = graph.constant "two" : tensor<8xf32>
    %m = graph.mul %one, %x : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
    %a = graph.add %m, %zero : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
    %d = graph.div %a, %two : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
    %m2 = graph.mul %d, %two : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
    %wide = graph.add %y, %zero : tensor<1xf32>, tensor<8xf32> -> tensor<8xf32>
    func.return %m2, %wide : tensor<8xf32>, tensor<8xf32>
  }
}

// -----

// A one-element division by a constant stays a division (exact: DynamicQuantizeLinear's scale).
// CHECK-LABEL: func.func @scalar_div
// CHECK-NEXT:  %c = graph.constant "c255" : tensor<1xf32>
// CHECK-NEXT:  %d = graph.div %x, %c : tensor<1xf32>, tensor<1xf32> -> tensor<1xf32>
builtin.module attributes {graph.weights_file = "WEIGHTS"} {
  func.func @scalar_div(%x: tensor<1xf32>) -> tensor<1xf32> {
    %c = graph.constant "c255" : tensor<1xf32>
    %d = graph.div %x, %c : tensor<1xf32>, tensor<1xf32> -> tensor<1xf32>
    func.return %d : tensor<1xf32>
  }
}

// -----

// The conv's result is used twice, so the batch_norm does not fold into its weights: it becomes
// a per-channel multiply and add. (Without a weight store simplify-graph is an error:
// tests/filecheck/cli/weights-required.mlir.)
// CHECK-LABEL: func.func @bn_kept
// CHECK-NOT:   graph.batch_norm
// CHECK:       %[[A:.*]] = graph.constant "s.affine_a" : tensor<4x1x1xf32>
// CHECK:       %[[C:.*]] = graph.constant "s.affine_c" : tensor<4x1x1xf32>
// CHECK:       %[[M:.*]] = graph.mul %c, %[[A]] : tensor<1x4x6x6xf32>, tensor<4x1x1xf32> -> tensor<1x4x6x6xf32>
// CHECK-NEXT:  %{{.*}} = graph.add %[[M]], %[[C]]
// CHECK:       %m = graph.relu %c
builtin.module attributes {graph.weights_file = "WEIGHTS"} {
  func.func @bn_kept(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> (tensor<1x4x6x6xf32>, tensor<1x4x6x6xf32>) {
    %s = graph.constant "s" : tensor<4xf32>
    %c = graph.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x6x6xf32>
    %bn = graph.batch_norm %c, %s, %s, %s, %s {epsilon = 1.0e-05 : f64} : tensor<1x4x6x6xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32> -> tensor<1x4x6x6xf32>
    %m = graph.relu %c : tensor<1x4x6x6xf32>
    func.return %bn, %m : tensor<1x4x6x6xf32>, tensor<1x4x6x6xf32>
  }
}

// -----

// A batch_norm whose parameters are computed (an int8 model dequantizes them): the per-channel
// factors are ops on them, for fold-constants to fold.
// CHECK-LABEL: func.func @bn_computed
// CHECK-NOT:   graph.batch_norm
// CHECK:       %[[E:.*]] = graph.add %p, %{{.*}} : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
// CHECK-NEXT:  %[[R:.*]] = graph.sqrt %[[E]]
// CHECK-NEXT:  %[[A:.*]] = graph.div %p, %[[R]]
// CHECK:       %[[AR:.*]] = graph.reshape %[[A]] : tensor<4xf32> -> tensor<4x1x1xf32>
// CHECK:       graph.mul %x, %[[AR]] : tensor<1x4x6x6xf32>, tensor<4x1x1xf32> -> tensor<1x4x6x6xf32>
builtin.module attributes {graph.weights_file = "WEIGHTS"} {
  func.func @bn_computed(%x: tensor<1x4x6x6xf32>, %q: tensor<4xi8>) -> tensor<1x4x6x6xf32> {
    %p = graph.cast %q : tensor<4xi8> -> tensor<4xf32>
    %bn = graph.batch_norm %x, %p, %p, %p, %p {epsilon = 1.0e-05 : f64} : tensor<1x4x6x6xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32> -> tensor<1x4x6x6xf32>
    func.return %bn : tensor<1x4x6x6xf32>
  }
}

// -----

// A quantize-dequantize pair: clamp(round(x) + zp, 0, 255) through ui8 and back is that float,
// but for NaN (which the casts make 0): a compare and a select replace the two casts.
// CHECK-LABEL: func.func @qdq_pair
// CHECK-NOT:   graph.cast
// CHECK:       %[[ORD:.*]] = graph.compare %[[Y:.*]], %[[Y]] {kind = "eq"}
// CHECK-NEXT:  %[[K:.*]] = graph.where %[[ORD]], %[[Y]], %{{.*}}
// CHECK-NEXT:  func.return %[[K]]
builtin.module attributes {graph.weights_file = "WEIGHTS"} {
  func.func @qdq_pair(%x: tensor<8xf32>) -> tensor<8xf32> {
    %zero = graph.constant "zero" : tensor<8xf32>
    %lo = graph.constant "zero" : tensor<8xf32>
    %hi = graph.constant "two" : tensor<8xf32>
    %r = graph.round %x : tensor<8xf32>
    %a = graph.add %r, %zero : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
    %c1 = graph.max %r, %lo : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
    %c2 = graph.min %c1, %hi : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
    %q = graph.cast %c2 : tensor<8xf32> -> tensor<8xui8>
    %d = graph.cast %q : tensor<8xui8> -> tensor<8xf32>
    func.return %d : tensor<8xf32>
  }
}

// -----

// Negative: without the clamp the value may leave the uint8 range, where the cast saturates.
// CHECK-LABEL: func.func @unclamped
// CHECK:       graph.cast %r : tensor<8xf32> -> tensor<8xui8>
// CHECK:       graph.cast
builtin.module attributes {graph.weights_file = "WEIGHTS"} {
  func.func @unclamped(%x: tensor<8xf32>) -> tensor<8xf32> {
    %r = graph.round %x : tensor<8xf32>
    %q = graph.cast %r : tensor<8xf32> -> tensor<8xui8>
    %d = graph.cast %q : tensor<8xui8> -> tensor<8xf32>
    func.return %d : tensor<8xf32>
  }
}
