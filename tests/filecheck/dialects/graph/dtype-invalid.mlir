// RUN: ziggurat-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @bad_width(%x: tensor<4xf32>) {
  %y = graph.bitcast %x : tensor<4xf32> -> tensor<4xi64>
  func.return
}
// CHECK: 'graph.bitcast' op element types float32 and int64 differ in bit width

// -----

func.func @bad_shape(%x: tensor<4xf32>) {
  %y = graph.bitcast %x : tensor<4xf32> -> tensor<2x2xi32>
  func.return
}
// CHECK: 'graph.bitcast' op input and result shapes differ

// -----

func.func @bad_round_mode(%x: tensor<4xf32>) {
  %y = graph.cast %x {round_mode = "sideways"} : tensor<4xf32> -> tensor<4xf8E8M0FNU>
  func.return
}
// CHECK: 'graph.cast' op round_mode must be 'up', 'down' or 'nearest', got 'sideways'
