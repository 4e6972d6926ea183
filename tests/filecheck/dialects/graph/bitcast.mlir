// RUN: ziggurat-opt %s --split-input-file | ziggurat-opt --split-input-file | filecheck %s
// RUN: ziggurat-opt %s --split-input-file --print-op-generic | ziggurat-opt --split-input-file | filecheck %s

// graph.bitcast reinterprets each element's bits as a type of the same width.
// CHECK-LABEL: func.func @bitcasts
func.func @bitcasts(%x: tensor<2x3xf32>, %h: tensor<4xf16>, %b: tensor<4xi1>, %q: tensor<4xi4>) -> (tensor<2x3xi32>, tensor<4xbf16>, tensor<4xui8>, tensor<4xui4>) {
  // CHECK-NEXT: %i = graph.bitcast %x : tensor<2x3xf32> -> tensor<2x3xi32>
  %i = graph.bitcast %x : tensor<2x3xf32> -> tensor<2x3xi32>
  // CHECK-NEXT: %bf = graph.bitcast %h : tensor<4xf16> -> tensor<4xbf16>
  %bf = graph.bitcast %h : tensor<4xf16> -> tensor<4xbf16>
  // CHECK-NEXT: %u = graph.bitcast %b : tensor<4xi1> -> tensor<4xui8>
  %u = graph.bitcast %b : tensor<4xi1> -> tensor<4xui8>
  // CHECK-NEXT: %n = graph.bitcast %q : tensor<4xi4> -> tensor<4xui4>
  %n = graph.bitcast %q : tensor<4xi4> -> tensor<4xui4>
  func.return %i, %bf, %u, %n : tensor<2x3xi32>, tensor<4xbf16>, tensor<4xui8>, tensor<4xui4>
}
