// The tutorial's plugin (docs/tutorial.md, docs/examples/act_plugin.py) through ziggurat-opt.
// RUN: ziggurat-opt --load-plugin %S/../../../docs/examples/act_plugin.py %s -p raise-silu --split-input-file | filecheck %s --check-prefix=RAISE
// RUN: ziggurat-opt --load-plugin %S/../../../docs/examples/act_plugin.py %s -p raise-silu,convert-act-to-graph --split-input-file | filecheck %s --check-prefix=LOWER

// x * sigmoid(x), in either operand order, becomes act.silu; lowering gives the graph ops back.
func.func @silu(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %s = graph.sigmoid %x : tensor<4x8xf32>
  %y = graph.mul %s, %x : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}
// RAISE-LABEL: func.func @silu
// RAISE-NEXT:    %y = act.silu %x : tensor<4x8xf32>
// RAISE-NEXT:    func.return %y
// LOWER-LABEL: func.func @silu
// LOWER-NEXT:    %[[S:.*]] = graph.sigmoid %x : tensor<4x8xf32>
// LOWER-NEXT:    %[[Y:.*]] = graph.mul %x, %[[S]]
// LOWER-NEXT:    func.return %[[Y]]

// -----

// Must not fire: the sigmoid is of another value, and a sigmoid with another use stays.
func.func @not_silu(%x: tensor<4xf32>, %z: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %s = graph.sigmoid %z : tensor<4xf32>
  %y = graph.mul %x, %s : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %t = graph.sigmoid %x : tensor<4xf32>
  %w = graph.mul %x, %t : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %v = graph.add %w, %t : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  func.return %y, %v : tensor<4xf32>, tensor<4xf32>
}
// RAISE-LABEL: func.func @not_silu
// RAISE-NEXT:    %s = graph.sigmoid %z
// RAISE-NEXT:    %y = graph.mul %x, %s
// RAISE-NEXT:    %t = graph.sigmoid %x
// RAISE-NEXT:    %w = act.silu %x
// RAISE-NEXT:    %v = graph.add %w, %t
