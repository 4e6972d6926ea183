// RUN: ziggurat-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @bad_broadcast(%a: tensor<2xf32>, %b: tensor<3xf32>) {
  %c = graph.add %a, %b : tensor<2xf32>, tensor<3xf32> -> tensor<2xf32>
  func.return
}
// CHECK: 'graph.add' op operand shapes (2,) and (3,) do not broadcast

// -----

func.func @bad_matmul(%a: tensor<4x8xf32>, %b: tensor<7x5xf32>) {
  %c = graph.matmul %a, %b : tensor<4x8xf32>, tensor<7x5xf32> -> tensor<4x5xf32>
  func.return
}
// CHECK: 'graph.matmul' op contracting dims differ: 8 vs 7

// -----

func.func @bad_conv_channels(%x: tensor<1x3x8x8xf32>, %w: tensor<4x2x3x3xf32>) {
  %y = graph.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x3x8x8xf32>, tensor<4x2x3x3xf32> -> tensor<1x4x8x8xf32>
  func.return
}
// CHECK: 'graph.conv2d' op weight has 2 input channels per group, input has 3 for 1 groups

// -----

func.func @bad_conv_shape(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  %y = graph.conv2d %x, %w {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x8x8xf32>
  func.return
}
// CHECK: 'graph.conv2d' op result shape (1, 4, 8, 8) should be (1, 4, 4, 4)

// -----

func.func @bad_pool(%x: tensor<1x3x8x8xf32>) {
  %y = graph.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : tensor<1x3x8x8xf32> -> tensor<1x3x8x8xf32>
  func.return
}
// CHECK: 'graph.max_pool2d' op result shape (1, 3, 8, 8) should be (1, 3, 4, 4)

// -----

func.func @bad_reshape(%x: tensor<2x3xf32>) {
  %y = graph.reshape %x : tensor<2x3xf32> -> tensor<7xf32>
  func.return
}
// CHECK: 'graph.reshape' op element counts differ: 6 vs 7

// -----

func.func @bad_transpose(%x: tensor<2x3xf32>) {
  %y = graph.transpose %x {perm = array<i64: 0, 0>} : tensor<2x3xf32> -> tensor<2x2xf32>
  func.return
}
// CHECK: 'graph.transpose' op perm (0, 0) is not a permutation of 2 dims

// -----

func.func @bad_softmax(%x: tensor<2x3xf32>) {
  %y = graph.softmax %x {axis = 2 : i64} : tensor<2x3xf32>
  func.return
}
// CHECK: 'graph.softmax' op axis 2 out of range for rank 2

// -----

func.func @bad_batch_norm(%x: tensor<1x4x2x2xf32>, %p: tensor<3xf32>) {
  %y = graph.batch_norm %x, %p, %p, %p, %p {epsilon = 1.0e-05 : f64} : tensor<1x4x2x2xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32> -> tensor<1x4x2x2xf32>
  func.return
}
// CHECK: 'graph.batch_norm' op parameters must have shape (4,), got (3,)

// -----

func.func @slice_leaves_input(%x: tensor<2x16xf32>) {
  %y = graph.slice %x {starts = array<i64: 0, 14>, steps = array<i64: 1, 2>} : tensor<2x16xf32> -> tensor<2x4xf32>
  func.return
}
// CHECK: 'graph.slice' op dim 1: 4 elements from 14 by 2 leave the input extent 16

// -----

func.func @concat_sizes(%a: tensor<2x3xf32>, %b: tensor<2x5xf32>) {
  %y = graph.concat %a, %b {axis = 1 : i64} : tensor<2x3xf32>, tensor<2x5xf32> -> tensor<2x9xf32>
  func.return
}
// CHECK: 'graph.concat' op result dim 1 is 9, the inputs sum to 8

// -----

func.func @reduce_kind(%x: tensor<2x3xf32>) {
  %y = graph.reduce %x {kind = "median", axes = array<i64: 1>} : tensor<2x3xf32> -> tensor<2xf32>
  func.return
}
// CHECK: 'graph.reduce' op kind must be one of ('sum', 'mean', 'max', 'min', 'prod'), got 'median'

// -----

func.func @reduce_shape(%x: tensor<2x3xf32>) {
  %y = graph.reduce %x {kind = "sum", axes = array<i64: 1>} : tensor<2x3xf32> -> tensor<2x1xf32>
  func.return
}
// CHECK: 'graph.reduce' op result shape (2, 1) should be (2,)

// -----

func.func @broadcast_to_bad(%x: tensor<3x2xf32>) {
  %y = graph.broadcast_to %x : tensor<3x2xf32> -> tensor<3x4xf32>
  func.return
}
// CHECK: 'graph.broadcast_to' op input shape (3, 2) does not broadcast to (3, 4)

// -----

func.func @compare_kind(%x: tensor<3xf32>) {
  %y = graph.compare %x, %x {kind = "lte"} : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  func.return
}
// CHECK: 'graph.compare' op kind must be one of ('lt', 'le', 'gt', 'ge', 'eq', 'ne'), got 'lte'

// -----

func.func @where_shape(%c: tensor<3xf32>, %x: tensor<2x1xf32>) {
  %y = graph.where %c, %x, %x : tensor<3xf32>, tensor<2x1xf32>, tensor<2x1xf32> -> tensor<2x1xf32>
  func.return
}
// CHECK: 'graph.where' op result shape (2, 1) is not the broadcast shape of (3,), (2, 1) and (2, 1)

// -----

func.func @gather_elements_shape(%x: tensor<3x5xf32>, %i: tensor<4x2xf32>) {
  %y = graph.gather_elements %x, %i {axis = 1 : i64} : tensor<3x5xf32>, tensor<4x2xf32> -> tensor<4x2xf32>
  func.return
}
// CHECK: 'graph.gather_elements' op result (4, 2) exceeds the input (3, 5) outside axis 1

// -----

func.func @bad_padded_layout_shape(%x: tensor<1x32x8x8xf32>) {
  %b = graph.layout_transform %x {src = "NCHW", dst = "NCHW16c", pads = array<i64: 1, 1, 1, 1>} : tensor<1x32x8x8xf32> -> tensor<1x2x8x8x16xf32>
  func.return
}
// CHECK: 'graph.layout_transform' op result shape (1, 2, 8, 8, 16) should be (1, 2, 10, 10, 16) for NCHW -> NCHW16c

// -----

func.func @bad_padded_layout_direction(%x: tensor<1x2x8x8x16xf32>) {
  %b = graph.layout_transform %x {src = "NCHW16c", dst = "NCHW", pads = array<i64: 1, 1, 1, 1>} : tensor<1x2x8x8x16xf32> -> tensor<1x32x8x8xf32>
  func.return
}
// CHECK: 'graph.layout_transform' op pads apply to NCHW -> NCHW<b>c only, not NCHW16c -> NCHW

// -----

func.func @bad_depthwise_weight(%x: tensor<1x2x8x8x16xf32>, %w: tensor<3x3x3x16xf32>) {
  %y = graph.depthwise_conv2d_nchwc %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : tensor<1x2x8x8x16xf32>, tensor<3x3x3x16xf32> -> tensor<1x2x8x8x16xf32>
  func.return
}
// CHECK: 'graph.depthwise_conv2d_nchwc' op expects an NCHW<b>c input and a [C/b, KH, KW, b] weight matching its channel blocks, got (1, 2, 8, 8, 16) and (3, 3, 3, 16)

// -----

func.func @bad_grouped_result(%x: tensor<1x2x8x8x16xf32>, %w: tensor<2x3x3x16x16xf32>) {
  %y = graph.grouped_conv2d_nchwc %x, %w {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : tensor<1x2x8x8x16xf32>, tensor<2x3x3x16x16xf32> -> tensor<1x2x8x8x16xf32>
  func.return
}
// CHECK: 'graph.grouped_conv2d_nchwc' op result shape (1, 2, 8, 8, 16) should be (1, 2, 4, 4, 16)
