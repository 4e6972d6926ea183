// RUN: python -c "import numpy as np; np.savez('%t.npz', w=np.ones((32,16,1,1),np.float32), b=np.ones((32,1,1),np.float32))"
// RUN: sed 's#WEIGHTS#%t.npz#' %s | ziggurat-opt -p "convert-layout{block=16}" | filecheck %s

// With a weight store, the weight and the bias are transformed at compile
// time into new store entries: no layout_transform reads a constant, and the
// only transforms left are the region's two boundaries.
// CHECK:      %[[X:.*]] = graph.layout_transform %x {src = "NCHW", dst = "NCHW16c"}
// CHECK-NEXT: %[[W:.*]] = graph.constant "w.OIHW16i16o" : tensor<2x1x1x1x16x16xf32>
// CHECK-NEXT: %c = graph.conv2d_nchwc %[[X]], %[[W]]
// CHECK-NEXT: %[[B:.*]] = graph.constant "b.NCHW16c" : tensor<1x2x1x1x16xf32>
// CHECK-NEXT: %a = graph.add %c, %[[B]]
// CHECK-NEXT: %[[Y:.*]] = graph.layout_transform %a {src = "NCHW16c", dst = "NCHW"}
// CHECK-NEXT: func.return %[[Y]]
builtin.module attributes {graph.weights_file = "WEIGHTS"} {
  func.func @main(%x: tensor<1x16x4x4xf32>) -> tensor<1x32x4x4xf32> {
    %w = graph.constant "w" : tensor<32x16x1x1xf32>
    %b = graph.constant "b" : tensor<32x1x1xf32>
    %c = graph.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x16x4x4xf32>, tensor<32x16x1x1xf32> -> tensor<1x32x4x4xf32>
    %a = graph.add %c, %b : tensor<1x32x4x4xf32>, tensor<32x1x1xf32> -> tensor<1x32x4x4xf32>
    func.return %a : tensor<1x32x4x4xf32>
  }
}
