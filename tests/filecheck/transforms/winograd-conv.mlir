// RUN: python -c "import numpy as np; np.savez('%t.npz', w=np.ones((16,16,3,3),np.float32), w1=np.ones((16,16,1,1),np.float32))"
// RUN: sed 's#WEIGHTS#%t.npz#' %s | ziggurat-opt -p "winograd-conv{min-channels=16 min-pixels=16}" | filecheck %s

// A 3x3 stride-1 conv becomes the input transform (4x4 tiles, stride 2: a 4x4
// output is 2x2 tiles), a batched matmul with the weight transformed at compile
// time ([16, O, C], a new store entry), and the output transform. The 1x1 conv
// and the strided 3x3 conv stay.
// CHECK:      %[[V:.*]] = graph.winograd_input %x {pads = array<i64: 1, 1, 1, 1>} : tensor<1x16x4x4xf32> -> tensor<16x16x4xf32>
// CHECK-NEXT: %[[U:.*]] = graph.constant "w.winograd" : tensor<16x16x16xf32>
// CHECK-NEXT: %[[M:.*]] = graph.matmul %[[U]], %[[V]] : tensor<16x16x16xf32>, tensor<16x16x4xf32> -> tensor<16x16x4xf32>
// CHECK-NEXT: %c = graph.winograd_output %[[M]] : tensor<16x16x4xf32> -> tensor<1x16x4x4xf32>
// CHECK-NEXT: %d = graph.conv2d %c, %w1
// CHECK-NEXT: %e = graph.conv2d %d, %w {strides = array<i64: 2, 2>
builtin.module attributes {graph.weights_file = "WEIGHTS"} {
  func.func @main(%x: tensor<1x16x4x4xf32>) -> tensor<1x16x2x2xf32> {
    %w = graph.constant "w" : tensor<16x16x3x3xf32>
    %w1 = graph.constant "w1" : tensor<16x16x1x1xf32>
    %c = graph.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x16x4x4xf32>, tensor<16x16x3x3xf32> -> tensor<1x16x4x4xf32>
    %d = graph.conv2d %c, %w1 {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x16x4x4xf32>, tensor<16x16x1x1xf32> -> tensor<1x16x4x4xf32>
    %e = graph.conv2d %d, %w {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x16x4x4xf32>, tensor<16x16x3x3xf32> -> tensor<1x16x2x2xf32>
    func.return %e : tensor<1x16x2x2xf32>
  }
}
