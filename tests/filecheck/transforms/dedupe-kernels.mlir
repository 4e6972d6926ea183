// RUN: ziggurat-opt %s -p dedupe-kernels | filecheck %s

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
