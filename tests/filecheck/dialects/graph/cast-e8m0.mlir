// RUN: ziggurat-opt %s --split-input-file | ziggurat-opt --split-input-file | filecheck %s
// RUN: ziggurat-opt %s --split-input-file --print-op-generic | ziggurat-opt --split-input-file | filecheck %s

// graph.cast to float8 e8m0 carries ONNX Cast's round_mode ("up" when absent).
// CHECK-LABEL: func.func @e8m0
func.func @e8m0(%x: tensor<4xf32>) -> (tensor<4xf8E8M0FNU>, tensor<4xf8E8M0FNU>, tensor<4xf4E2M1FN>) {
  // CHECK-NEXT: %up = graph.cast %x : tensor<4xf32> -> tensor<4xf8E8M0FNU>
  %up = graph.cast %x : tensor<4xf32> -> tensor<4xf8E8M0FNU>
  // CHECK-NEXT: %near = graph.cast %x {saturate = 0 : i64, round_mode = "nearest"} : tensor<4xf32> -> tensor<4xf8E8M0FNU>
  %near = graph.cast %x {saturate = 0 : i64, round_mode = "nearest"} : tensor<4xf32> -> tensor<4xf8E8M0FNU>
  // CHECK-NEXT: %f4 = graph.cast %x : tensor<4xf32> -> tensor<4xf4E2M1FN>
  %f4 = graph.cast %x : tensor<4xf32> -> tensor<4xf4E2M1FN>
  func.return %up, %near, %f4 : tensor<4xf8E8M0FNU>, tensor<4xf8E8M0FNU>, tensor<4xf4E2M1FN>
}
