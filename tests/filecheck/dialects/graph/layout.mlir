// RUN: ZIGGURAT_ROUNDTRIP | filecheck %s

// The blocked-layout ops of the graph dialect print and parse in both forms.
// CHECK: graph.layout_transform %x {src = "NCHW", dst = "NCHW16c"} : tensor<1x32x8x8xf32> -> tensor<1x2x8x8x16xf32>
// CHECK: graph.layout_transform %w {src = "OIHW", dst = "OIHW16i16o"} : tensor<32x32x3x3xf32> -> tensor<2x2x3x3x16x16xf32>
// CHECK: graph.conv2d_nchwc %b, %wb {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : tensor<1x2x8x8x16xf32>, tensor<2x2x3x3x16x16xf32> -> tensor<1x2x8x8x16xf32>
// CHECK: graph.max_pool2d_nchwc %c {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : tensor<1x2x8x8x16xf32> -> tensor<1x2x4x4x16xf32>
// CHECK: graph.layout_transform %p {src = "NCHW16c", dst = "NCHW"} : tensor<1x2x4x4x16xf32> -> tensor<1x32x4x4xf32>
// CHECK: graph.layout_transform %x {src = "NCHW", dst = "NCHW16c", pads = array<i64: 1, 0, 2, 1>} : tensor<1x32x8x8xf32> -> tensor<1x2x11x9x16xf32>
func.func @main(%x: tensor<1x32x8x8xf32>, %w: tensor<32x32x3x3xf32>) -> tensor<1x32x4x4xf32> {
  %b = graph.layout_transform %x {src = "NCHW", dst = "NCHW16c"} : tensor<1x32x8x8xf32> -> tensor<1x2x8x8x16xf32>
  %wb = graph.layout_transform %w {src = "OIHW", dst = "OIHW16i16o"} : tensor<32x32x3x3xf32> -> tensor<2x2x3x3x16x16xf32>
  %c = graph.conv2d_nchwc %b, %wb {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : tensor<1x2x8x8x16xf32>, tensor<2x2x3x3x16x16xf32> -> tensor<1x2x8x8x16xf32>
  %p = graph.max_pool2d_nchwc %c {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : tensor<1x2x8x8x16xf32> -> tensor<1x2x4x4x16xf32>
  %y = graph.layout_transform %p {src = "NCHW16c", dst = "NCHW"} : tensor<1x2x4x4x16xf32> -> tensor<1x32x4x4xf32>
  %padded = graph.layout_transform %x {src = "NCHW", dst = "NCHW16c", pads = array<i64: 1, 0, 2, 1>} : tensor<1x32x8x8xf32> -> tensor<1x2x11x9x16xf32>
  func.return %y : tensor<1x32x4x4xf32>
}


// -----

// The depthwise and grouped blocked convs and a ragged channel count (24 channels in two
// 16-lane blocks; the transform back drops the padding).
// CHECK-LABEL: func.func @depthwise
// CHECK: graph.depthwise_conv2d_nchwc %b, %w {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : tensor<1x2x8x8x16xf32>, tensor<2x3x3x16xf32> -> tensor<1x2x4x4x16xf32>
// CHECK: graph.layout_transform %d {src = "NCHW16c", dst = "NCHW"} : tensor<1x2x4x4x16xf32> -> tensor<1x24x4x4xf32>
// CHECK: graph.grouped_conv2d_nchwc %b, %g {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : tensor<1x2x8x8x16xf32>, tensor<2x3x3x16x16xf32> -> tensor<1x2x8x8x16xf32>
func.func @depthwise(%x: tensor<1x24x8x8xf32>, %w: tensor<2x3x3x16xf32>, %g: tensor<2x3x3x16x16xf32>) -> tensor<1x24x4x4xf32> {
  %b = graph.layout_transform %x {src = "NCHW", dst = "NCHW16c"} : tensor<1x24x8x8xf32> -> tensor<1x2x8x8x16xf32>
  %d = graph.depthwise_conv2d_nchwc %b, %w {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : tensor<1x2x8x8x16xf32>, tensor<2x3x3x16xf32> -> tensor<1x2x4x4x16xf32>
  %y = graph.layout_transform %d {src = "NCHW16c", dst = "NCHW"} : tensor<1x2x4x4x16xf32> -> tensor<1x24x4x4xf32>
  %gc = graph.grouped_conv2d_nchwc %b, %g {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : tensor<1x2x8x8x16xf32>, tensor<2x3x3x16x16xf32> -> tensor<1x2x8x8x16xf32>
  func.return %y : tensor<1x24x4x4xf32>
}
