// RUN: ziggurat-opt %s -p convert-graph-to-te --split-input-file | filecheck %s

// Each compute op becomes a call to its own te kernel; constants stay.
func.func @main(%x: tensor<1x8xf32>) -> tensor<1x4xf32> {
  %w = graph.constant "fc.w" : tensor<4x8xf32>
  %m = graph.matmul %x, %w {transpose_b = true} : tensor<1x8xf32>, tensor<4x8xf32> -> tensor<1x4xf32>
  %r = graph.relu %m : tensor<1x4xf32>
  func.return %r : tensor<1x4xf32>
}
// CHECK-LABEL: func.func @main(%x: tensor<1x8xf32>) -> tensor<1x4xf32> {
// CHECK-NEXT:    %w = graph.constant "fc.w" : tensor<4x8xf32>
// CHECK-NEXT:    %m = graph.call_kernel @matmul_0(%x, %w) : (tensor<1x8xf32>, tensor<4x8xf32>) -> tensor<1x4xf32>
// CHECK-NEXT:    %r = graph.call_kernel @relu_0(%m) : (tensor<1x4xf32>) -> tensor<1x4xf32>
// CHECK-NEXT:    func.return %r : tensor<1x4xf32>
// CHECK-LABEL: func.func @matmul_0(%in0: tensor<1x8xf32>, %in1: tensor<4x8xf32>) -> tensor<1x4xf32> {
// CHECK-NEXT:    %{{.*}} = te.reduce "matmul" add init 0.000000e+00 : f32 (%[[I:.*]], %[[J:.*]]) reduce (%[[K:.*]] : 8) : tensor<1x4xf32> {
// CHECK-NEXT:      %[[A:.*]] = te.read %in0[%[[I]], %[[K]]] : tensor<1x8xf32>
// CHECK-NEXT:      %[[B:.*]] = te.read %in1[%[[J]], %[[K]]] : tensor<4x8xf32>
// CHECK-NEXT:      %[[P:.*]] = arith.mulf %[[A]], %[[B]] : f32
// CHECK-NEXT:      te.yield %[[P]] : f32
// CHECK-LABEL: func.func @relu_0(%in0: tensor<1x4xf32>) -> tensor<1x4xf32> {
// CHECK-NEXT:    %{{.*}} = te.compute "relu" (%[[I:.*]], %[[J:.*]]) : tensor<1x4xf32> {
// CHECK-NEXT:      %[[V:.*]] = te.read %in0[%[[I]], %[[J]]] : tensor<1x4xf32>
// CHECK-NEXT:      %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      %{{.*}} = arith.maximumf %[[V]], %[[Z]] : f32

// -----

// Broadcasting reads index 0 on size-1 dims and drops leading dims.
func.func @main(%a: tensor<2x3xf32>, %b: tensor<1x3xf32>) -> tensor<2x3xf32> {
  %c = graph.add %a, %b : tensor<2x3xf32>, tensor<1x3xf32> -> tensor<2x3xf32>
  func.return %c : tensor<2x3xf32>
}
// CHECK-LABEL: func.func @add_0(%in0: tensor<2x3xf32>, %in1: tensor<1x3xf32>) -> tensor<2x3xf32> {
// CHECK:         te.compute "add" (%[[I:.*]], %[[J:.*]]) : tensor<2x3xf32> {
// CHECK-NEXT:      te.read %in0[%[[I]], %[[J]]] : tensor<2x3xf32>
// CHECK-NEXT:      %[[Z:.*]] = arith.constant 0 : index
// CHECK-NEXT:      te.read %in1[%[[Z]], %[[J]]] : tensor<1x3xf32>

// -----

// A padded convolution reads with a pad value; an unpadded pool does not.
func.func @main(%x: tensor<1x2x4x4xf32>, %w: tensor<3x2x3x3xf32>) -> tensor<1x3x2x2xf32> {
  %y = graph.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x2x4x4xf32>, tensor<3x2x3x3xf32> -> tensor<1x3x4x4xf32>
  %p = graph.max_pool2d %y {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : tensor<1x3x4x4xf32> -> tensor<1x3x2x2xf32>
  func.return %p : tensor<1x3x2x2xf32>
}
// CHECK-LABEL: func.func @conv2d_0
// CHECK:         te.reduce "conv2d" add init 0.000000e+00 : f32 (%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) reduce (%{{.*}} : 2, %{{.*}} : 3, %{{.*}} : 3)
// CHECK:         te.read %in0[{{.*}}] pad 0.000000e+00 : f32 : tensor<1x2x4x4xf32>
// CHECK-LABEL: func.func @max_pool2d_0
// CHECK:         te.reduce "max_pool2d" max init 0xff800000 : f32
// CHECK-NOT:     pad
// CHECK:         te.yield

// -----

// Negative: a function without graph compute ops is left alone.
func.func @identity(%x: tensor<4xf32>) -> tensor<4xf32> {
  %w = graph.constant "w" : tensor<4xf32>
  func.return %x : tensor<4xf32>
}
// CHECK-LABEL: func.func @identity(%x: tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT:    %w = graph.constant "w" : tensor<4xf32>
// CHECK-NEXT:    func.return %x : tensor<4xf32>
// CHECK-NEXT:  }
// CHECK-NOT:   func.func

// -----

// A model function (graph.output_names) that returns its argument, as
// simplify-graph leaves `x / 1`: the output gets its own buffer, a copy.
func.func @model(%x: tensor<4xf32>) -> tensor<4xf32> attributes {graph.input_names = ["x"], graph.output_names = ["y"]} {
  func.return %x : tensor<4xf32>
}
// CHECK-LABEL: func.func @model(%x: tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %0 = graph.call_kernel @broadcast_to_0(%x) : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    func.return %0 : tensor<4xf32>
// CHECK-LABEL: func.func @broadcast_to_0

// -----

// A graph.fused group becomes ONE kernel: the conv2d reduction, then a single
// elementwise compute with batch_norm and relu inlined into it.
func.func @main(%x: tensor<1x3x8x8xf32>) -> tensor<1x4x6x6xf32> {
  %w = graph.constant "w" : tensor<4x3x3x3xf32>
  %s = graph.constant "s" : tensor<4xf32>
  %r = graph.fused (%x, %w, %s) : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x6x6xf32> {
  ^bb0(%a: tensor<1x3x8x8xf32>, %b: tensor<4x3x3x3xf32>, %c: tensor<4xf32>):
    %conv = graph.conv2d %a, %b {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x6x6xf32>
    %bn = graph.batch_norm %conv, %c, %c, %c, %c {epsilon = 1.0e-05 : f64} : tensor<1x4x6x6xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32> -> tensor<1x4x6x6xf32>
    %relu = graph.relu %bn : tensor<1x4x6x6xf32>
    graph.yield %relu : tensor<1x4x6x6xf32>
  }
  func.return %r : tensor<1x4x6x6xf32>
}
// CHECK-LABEL: func.func @main
// CHECK:       %r = graph.call_kernel @fused_conv2d_batch_norm_relu_0(%x, %w, %s) : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x6x6xf32>
// CHECK-NEXT:  func.return %r
// CHECK:       func.func @fused_conv2d_batch_norm_relu_0(%in0: tensor<1x3x8x8xf32>, %in1: tensor<4x3x3x3xf32>, %in2: tensor<4xf32>) -> tensor<1x4x6x6xf32> {
// CHECK-NEXT:    %[[CONV:.*]] = te.reduce "conv2d" add
// CHECK:         %[[OUT:.*]] = te.compute "relu"
// CHECK-NOT:     te.compute
// CHECK:           math.sqrt
// CHECK:           te.read %[[CONV]]
// CHECK:           arith.maximumf
// CHECK:         func.return %[[OUT]] : tensor<1x4x6x6xf32>
