// RUN: ziggurat-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @wrong_arity(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = te.compute "f" (%i) : tensor<4x8xf32> {
    %c = arith.constant 0.0 : f32
    te.yield %c : f32
  }
  func.return %y : tensor<4x8xf32>
}
// CHECK: 'te.compute' op needs 2 index arguments, has 1

// -----

func.func @bad_combiner(%x: tensor<4xf32>) -> tensor<1xf32> {
  %y = te.reduce "s" xor init 0.0 : f32 (%i) reduce (%k : 4) : tensor<1xf32> {
    %v = te.read %x[%k] : tensor<4xf32>
    te.yield %v : f32
  }
  func.return %y : tensor<1xf32>
}
// CHECK: 'te.reduce' op combiner must be one of ('add', 'mul', 'max', 'min', 'umax', 'umin'), got 'xor'

// -----

func.func @bad_read(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %y = te.compute "f" (%i) : tensor<4xf32> {
    %v = te.read %x[%i] : tensor<4x8xf32>
    te.yield %v : f32
  }
  func.return %y : tensor<4xf32>
}
// CHECK: 'te.read' op needs 2 indices, has 1

// -----

func.func @bad_yield(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = te.compute "f" (%i) : tensor<4xf32> {
    te.yield %i : index
  }
  func.return %y : tensor<4xf32>
}
// CHECK: 'te.compute' op yields index, result elements are f32
