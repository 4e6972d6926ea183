// RUN: ziggurat-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @bad_kind(%y: memref<4xf32>) {
  loop.for %i = 0 to 4 step 0 serial {
  }
  func.return
}
// CHECK: 'loop.for' op step must be positive, got 0

// -----

func.func @bad_bounds(%y: memref<4xf32>) {
  loop.for %i = 8 to 4 serial {
  }
  func.return
}
// CHECK: 'loop.for' op lower bound 8 exceeds upper bound 4

// -----

func.func @bad_store(%y: memref<4x4xf32>) {
  loop.for %i = 0 to 4 serial {
    loop.block "b" [S %v = %i] {
      %c = arith.constant 1.0 : f32
      loop.store %c, %y[%v] : memref<4x4xf32>
    }
  }
  func.return
}
// CHECK: 'loop.store' op needs 2 indices for memref<4x4xf32>, has 1

// -----

func.func @bad_scope() {
  %t = loop.alloc "shared" : memref<4xf32>
  func.return
}
// CHECK: 'loop.alloc' op scope must be global or local, got 'shared'

// -----

func.func @bad_copy(%a: memref<4xf32>, %b: memref<5xf32>) {
  loop.copy %a, %b : memref<4xf32>, memref<5xf32>
  func.return
}
// CHECK: 'loop.copy' op source and destination sizes differ
