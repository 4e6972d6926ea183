// The tutorial's pass that reads a constant (docs/tutorial.md, docs/examples/act_plugin.py): raise-silu
// folds the value of `c` in x * sigmoid(x * c), read from the weights, into act.silu's beta; without
// weights bound it is one error; the lowering makes beta a new weight (act.beta).
// RUN: python -c "import numpy as np; np.savez('%t.npz', c=np.array(1.702, np.float32), v=np.ones(8, np.float32))"
// RUN: ziggurat-opt --load-plugin %S/../../../docs/examples/act_plugin.py %s -p raise-silu --weights %t.npz | filecheck %s --check-prefix=RAISE
// RUN: ziggurat-opt --load-plugin %S/../../../docs/examples/act_plugin.py %s -p raise-silu,convert-act-to-graph --weights %t.npz --weights-out %t.out.npz | filecheck %s --check-prefix=LOWER
// RUN: python -c "import numpy as np; w = np.load('%t.out.npz'); assert abs(float(w['act.beta']) - 1.702) < 1e-6, dict(w)"
// RUN: not ziggurat-opt --load-plugin %S/../../../docs/examples/act_plugin.py %s -p raise-silu 2>&1 | filecheck %s --check-prefix=NOWEIGHTS

// RAISE-LABEL: func.func @swish
// RAISE-NEXT:    %y = act.silu %x {beta = 1.702000e+00 : f32} : tensor<4x8xf32>
// RAISE-NEXT:    func.return %y
// LOWER-LABEL: func.func @swish
// LOWER-NEXT:    %[[B:.*]] = graph.constant "act.beta" : tensor<f32>
// LOWER-NEXT:    %[[XB:.*]] = graph.mul %x, %[[B]] : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
// LOWER-NEXT:    %[[S:.*]] = graph.sigmoid %[[XB]]
// LOWER-NEXT:    %[[Y:.*]] = graph.mul %x, %[[S]]
// LOWER-NEXT:    func.return %[[Y]]
// NOWEIGHTS: ziggurat-opt: error: pass 'raise-silu' needs the values of the weights, but none are bound (graph.constant 'c' and 1 more)
func.func @swish(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %c = graph.constant "c" : tensor<f32>
  %xc = graph.mul %x, %c : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %s = graph.sigmoid %xc : tensor<4x8xf32>
  %y = graph.mul %x, %s : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}

// Must not fire: a scale of more than one element (a per-column scale) is not a beta.
// RAISE-LABEL: func.func @per_column
// RAISE-NEXT:    %v = graph.constant "v"
// RAISE-NEXT:    %xv = graph.mul %x, %v
// RAISE-NEXT:    %s = graph.sigmoid %xv
// RAISE-NEXT:    %y = graph.mul %x, %s
func.func @per_column(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %v = graph.constant "v" : tensor<8xf32>
  %xv = graph.mul %x, %v : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %s = graph.sigmoid %xv : tensor<4x8xf32>
  %y = graph.mul %x, %s : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}
