// RUN: python -c "import numpy as np; np.savez('%t.npz', w=np.ones((4,8),np.float32), b=np.ones(4,np.float32))"
// RUN: sed 's#WEIGHTS#%t.npz#' %s | ziggurat-opt -p fold-constants,dce --split-input-file | filecheck %s
// RUN: sed 's#WEIGHTS#%t.npz#' %s | ziggurat-opt -p 'fold-constants{max-elements=8}' --split-input-file | filecheck %s --check-prefix=LIMIT

// A chain of ops on constants folds to one constant; the op on the input stays.
// CHECK-LABEL: func.func @chain
// CHECK-NEXT:  %e = graph.constant "folded.e" : tensor<4x8xf32>
// CHECK-NEXT:  %y = graph.add %x, %e : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:  func.return %y
// LIMIT-LABEL: func.func @chain
// LIMIT:       %t = graph.transpose %w
// LIMIT:       %e = graph.exp
builtin.module attributes {graph.weights_file = "WEIGHTS"} {
  func.func @chain(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %w = graph.constant "w" : tensor<4x8xf32>
    %b = graph.constant "b" : tensor<4xf32>
    %t = graph.transpose %w {perm = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
    %s = graph.add %t, %b : tensor<8x4xf32>, tensor<4xf32> -> tensor<8x4xf32>
    %u = graph.transpose %s {perm = array<i64: 1, 0>} : tensor<8x4xf32> -> tensor<4x8xf32>
    %e = graph.exp %u : tensor<4x8xf32>
    %y = graph.add %x, %e : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
    func.return %y : tensor<4x8xf32>
  }
}

