// Passes that read weight values fail with one error when no weights are bound (the
// module names no graph.weights_file and no --weights is given), naming the pass, a
// constant and what to do; with --weights they run.
// RUN: not ziggurat-opt %s -p cse,fold-constants 2>&1 | filecheck %s --check-prefix=FOLD
// RUN: not ziggurat-opt %s -p simplify-graph 2>&1 | filecheck %s --check-prefix=SIMPLIFY
// RUN: python -c "import numpy as np; np.savez('%t.npz', w=np.ones((4,8),np.float32))"
// RUN: ziggurat-opt %s -p fold-constants --weights %t.npz | filecheck %s --check-prefix=BOUND
// Passes that do not need values still run without weights.
// RUN: ziggurat-opt %s -p cse,convert-graph-to-te | filecheck %s --check-prefix=TE

// FOLD: ziggurat-opt: error: pass 'fold-constants' needs the values of the weights, but none are bound (graph.constant 'w'): pass --weights W.npz, or import the model with `ziggurat import MODEL --weights W.npz -o M.mlir`
// SIMPLIFY: ziggurat-opt: error: pass 'simplify-graph' needs the values of the weights, but none are bound (graph.constant 'w')
// BOUND: graph.weights_file = "{{.*}}.npz"
// BOUND: %t = graph.constant "folded.t" : tensor<8x4xf32>
// TE: graph.call_kernel
func.func @main() -> tensor<8x4xf32> {
  %w = graph.constant "w" : tensor<4x8xf32>
  %t = graph.transpose %w {perm = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
  func.return %t : tensor<8x4xf32>
}
