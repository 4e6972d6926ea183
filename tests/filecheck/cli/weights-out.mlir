// Weights a pass makes travel with the text IR: --weights-out writes the module's weights (the
// old ones and fold-constants' 'folded.*') and names the file, relative to the -o file's folder,
// in graph.weights_file; the next ziggurat-opt reads them from there whatever its working
// directory. Without --weights-out, a warning names the weights no file holds.
// RUN: rm -rf %t && mkdir -p %t/in %t/out
// RUN: python -c "import numpy as np; np.savez('%t/in/w.npz', w=np.ones((4,8),np.float32), b=np.ones(4,np.float32))"
// RUN: cp %s %t/in/m.mlir
// RUN: ziggurat-opt %t/in/m.mlir -p fold-constants,dce --weights-out %t/out/f.npz -o %t/out/f.mlir
// RUN: filecheck %s --check-prefix=SAVED < %t/out/f.mlir
// RUN: python -c "import numpy as np; print(sorted(np.load('%t/out/f.npz').files))" | filecheck %s --check-prefix=NPZ
// RUN: cd / && ziggurat-opt %t/out/f.mlir -p simplify-graph,fold-constants | filecheck %s --check-prefix=AGAIN
// RUN: ziggurat-opt %t/in/m.mlir -p fold-constants -o %t/out/g.mlir 2>&1 | filecheck %s --check-prefix=WARN
// RUN: filecheck %s --check-prefix=REPOINTED < %t/out/g.mlir

// SAVED: builtin.module attributes {graph.weights_file = "f.npz"}
// SAVED: graph.constant "folded.e" : tensor<4x8xf32>
// NPZ: ['b', 'folded.e', 'folded.s', 'folded.t', 'folded.u', 'w']
// AGAIN: graph.weights_file = "{{/.*}}/out/f.npz"
// AGAIN: %e = graph.constant "folded.e"
// WARN: ziggurat-opt: warning: the output names 4 weight(s) no file holds (folded.t, folded.s, folded.u, ...); pass --weights-out W.npz
// REPOINTED: graph.weights_file = "../in/w.npz"
builtin.module attributes {graph.weights_file = "w.npz"} {
  func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
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
