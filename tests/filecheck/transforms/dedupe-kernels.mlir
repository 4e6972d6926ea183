// RUN: ziggurat-opt %s --split-input-file -p dedupe-kernels | filecheck %s

// @relu_1 equals @relu_0 but for its name: its call goes to @relu_0 and it is
// erased. @exp_0 differs (negative case) and stays, as does the entry.
// CHECK-LABEL: func.func @main
// CHECK:       func.call @relu_0(%x, %a)
// CHECK:       func.call @relu_0(%a, %b)
// CHECK-NEXT:  func.call @exp_0(%b, %y)
// CHECK:       func.func @relu_0
// CHECK-NOT:   func.func @relu_1
// CHECK:       func.func @exp_0
func.func @main(%x: memref<8xf32>, %y: memref<8xf32>) {
  %a = loop.alloc "global" : memref<8xf32>
  func.call @relu_0(%x, %a) : (memref<8xf32>, memref<8xf32>) -> ()
  %b = loop.alloc "global" : memref<8xf32>
  func.call @relu_1(%a, %b) : (memref<8xf32>, memref<8xf32>) -> ()
  func.call @exp_0(%b, %y) : (memref<8xf32>, memref<8xf32>) -> ()
  func.return
}
func.func @relu_0(%in0: memref<8xf32>, %out0: memref<8xf32>) {
  loop.for %i0 = 0 to 8 serial {
    loop.block "relu" [S %0 = %i0] {
      %1 = loop.load %in0[%0] : memref<8xf32>
      %2 = arith.constant 0.000000e+00 : f32
      %3 = arith.maximumf %1, %2 : f32
      loop.store %3, %out0[%0] : memref<8xf32>
    }
  }
  func.return
}
func.func @relu_1(%in0: memref<8xf32>, %out0: memref<8xf32>) {
  loop.for %i0 = 0 to 8 serial {
    loop.block "relu" [S %0 = %i0] {
      %1 = loop.load %in0[%0] : memref<8xf32>
      %2 = arith.constant 0.000000e+00 : f32
      %3 = arith.maximumf %1, %2 : f32
      loop.store %3, %out0[%0] : memref<8xf32>
    }
  }
  func.return
}
func.func @exp_0(%in0: memref<8xf32>, %out0: memref<8xf32>) {
  loop.for %i0 = 0 to 8 serial {
    loop.block "exp" [S %0 = %i0] {
      %1 = loop.load %in0[%0] : memref<8xf32>
      %2 = math.exp %1 : f32
      loop.store %2, %out0[%0] : memref<8xf32>
    }
  }
  func.return
}

// -----

// The te level (what convert-graph-to-te leaves): graph.call_kernel callees
// are renamed the same way, so each distinct kernel is lowered to loops once.
// CHECK-LABEL: func.func @main
// CHECK:       graph.call_kernel @relu_0(%x)
// CHECK-NEXT:  graph.call_kernel @relu_0(%a)
// CHECK-NEXT:  graph.call_kernel @exp_0(%b)
// CHECK:       func.func @relu_0
// CHECK-NOT:   func.func @relu_1
// CHECK:       func.func @exp_0
func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  %a = graph.call_kernel @relu_0(%x) : (tensor<8xf32>) -> tensor<8xf32>
  %b = graph.call_kernel @relu_1(%a) : (tensor<8xf32>) -> tensor<8xf32>
  %y = graph.call_kernel @exp_0(%b) : (tensor<8xf32>) -> tensor<8xf32>
  func.return %y : tensor<8xf32>
}
func.func @relu_0(%in0: tensor<8xf32>) -> tensor<8xf32> {
  %0 = te.compute "relu" (%1) : tensor<8xf32> {
    %2 = te.read %in0[%1] : tensor<8xf32>
    %3 = arith.constant 0.000000e+00 : f32
    %4 = arith.maximumf %2, %3 : f32
    te.yield %4 : f32
  }
  func.return %0 : tensor<8xf32>
}
func.func @relu_1(%in0: tensor<8xf32>) -> tensor<8xf32> {
  %0 = te.compute "relu" (%1) : tensor<8xf32> {
    %2 = te.read %in0[%1] : tensor<8xf32>
    %3 = arith.constant 0.000000e+00 : f32
    %4 = arith.maximumf %2, %3 : f32
    te.yield %4 : f32
  }
  func.return %0 : tensor<8xf32>
}
func.func @exp_0(%in0: tensor<8xf32>) -> tensor<8xf32> {
  %0 = te.compute "exp" (%1) : tensor<8xf32> {
    %2 = te.read %in0[%1] : tensor<8xf32>
    %3 = math.exp %2 : f32
    te.yield %3 : f32
  }
  func.return %0 : tensor<8xf32>
}
