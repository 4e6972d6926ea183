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
