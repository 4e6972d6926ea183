// RUN: python -c "import numpy as np; np.savez('%t.npz', w=np.arange(256, dtype=np.float32).reshape(16, 16))"
// RUN: ziggurat-opt %s --weights %t.npz -p 'pack-weight-panels{width=8}' | filecheck %s

// A matmul over symbolic rows by a constant 16x16 weight reads it in 8-lane column panels; a
// matrix-vector product (one row) keeps it as it is.
func.func @main(%x: tensor<?x16xf32, #sym.dims<"n">>, %v: tensor<1x16xf32>) -> (tensor<?x16xf32, #sym.dims<"n">>, tensor<1x16xf32>) {
  %w = graph.constant "w" : tensor<16x16xf32>
  %y = graph.matmul %x, %w : tensor<?x16xf32, #sym.dims<"n">>, tensor<16x16xf32> -> tensor<?x16xf32, #sym.dims<"n">>
  %z = graph.matmul %v, %w : tensor<1x16xf32>, tensor<16x16xf32> -> tensor<1x16xf32>
  func.return %y, %z : tensor<?x16xf32, #sym.dims<"n">>, tensor<1x16xf32>
}

// CHECK:      %[[P:.*]] = graph.constant "w.p8" : tensor<2x16x8xf32>
// CHECK-NEXT: %{{.*}} = graph.matmul_panels %x, %[[P]]
// CHECK:      graph.matmul %v, %w
