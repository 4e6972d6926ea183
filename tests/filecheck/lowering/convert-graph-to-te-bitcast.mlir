// RUN: ziggurat-opt %s -p convert-graph-to-te --split-input-file | filecheck %s

// float32 -> int32: one arith.bitcast per element.
func.func @main(%x: tensor<4xf32>) -> tensor<4xi32> {
  %y = graph.bitcast %x : tensor<4xf32> -> tensor<4xi32>
  func.return %y : tensor<4xi32>
}
// CHECK-LABEL: func.func @bitcast_0(%in0: tensor<4xf32>) -> tensor<4xi32> {
// CHECK:         %[[V:.*]] = te.read %in0[%{{.*}}] : tensor<4xf32>
// CHECK-NEXT:    %[[B:.*]] = arith.bitcast %[[V]] : f32 to i32
// CHECK-NEXT:    te.yield %[[B]] : i32

// -----

// Same scalar type below the graph level (bfloat16 is its i16 bits): the
// element is copied as is.
func.func @main(%x: tensor<4xbf16>) -> tensor<4xui16> {
  %y = graph.bitcast %x : tensor<4xbf16> -> tensor<4xui16>
  func.return %y : tensor<4xui16>
}
// CHECK-LABEL: func.func @bitcast_0(%in0: tensor<4xi16>) -> tensor<4xi16> {
// CHECK:         %[[V:.*]] = te.read %in0[%{{.*}}] : tensor<4xi16>
// CHECK-NEXT:    te.yield %[[V]] : i16

// -----

// bool (one byte, 0 or 1) -> uint8: a zero-extension.
func.func @main(%x: tensor<4xi1>) -> tensor<4xui8> {
  %y = graph.bitcast %x : tensor<4xi1> -> tensor<4xui8>
  func.return %y : tensor<4xui8>
}
// CHECK-LABEL: func.func @bitcast_0(%in0: tensor<4xi1>) -> tensor<4xi8> {
// CHECK:         %[[V:.*]] = te.read %in0[%{{.*}}] : tensor<4xi1>
// CHECK-NEXT:    %[[B:.*]] = arith.extui %[[V]] : i1 to i8
// CHECK-NEXT:    te.yield %[[B]] : i8
