// RUN: ziggurat-opt %s -p gpu-split-stages | filecheck %s
// RUN: ziggurat-opt %s -p gpu-split-stages | ziggurat-opt | filecheck %s

// A kernel of two stages (a row maximum into a scratch buffer, then a subtraction that reads it)
// and a copy becomes two kernels and a copy: the entry allocates the scratch buffer ("global",
// for plan-memory's arena) and passes it to both stages; each stage takes only the buffers it uses.
// CHECK-LABEL: func.func @main
// CHECK-SAME:    (%x: memref<4x6xf32>, %y: memref<4x6xf32>, %z: memref<24xf32>)
// CHECK-NEXT:    %[[M:.*]] = loop.alloc "global" : memref<4xf32>
// CHECK-NEXT:    func.call @norm_0_s0(%x, %[[M]]) : (memref<4x6xf32>, memref<4xf32>) -> ()
// CHECK-NEXT:    func.call @norm_0_s1(%x, %y, %[[M]]) : (memref<4x6xf32>, memref<4x6xf32>, memref<4xf32>) -> ()
// CHECK-NEXT:    loop.copy %y, %z : memref<4x6xf32>, memref<24xf32>
// CHECK-NEXT:    func.call @relu_0(%x, %y) : (memref<4x6xf32>, memref<4x6xf32>) -> ()
// CHECK-NEXT:    func.return
func.func @main(%x: memref<4x6xf32>, %y: memref<4x6xf32>, %z: memref<24xf32>) attributes {graph.input_names = ["x"], graph.output_names = ["y", "z"]} {
  func.call @norm_0(%x, %y, %z) : (memref<4x6xf32>, memref<4x6xf32>, memref<24xf32>) -> ()
  func.call @relu_0(%x, %y) : (memref<4x6xf32>, memref<4x6xf32>) -> ()
  func.return
}

// The original kernel is gone; its stages keep their loop nests, the scratch buffer an argument.
// CHECK-NOT:   func.func @norm_0(
// CHECK-DAG:   func.func @norm_0_s1(%in0: memref<4x6xf32>, %out0: memref<4x6xf32>, %m: memref<4xf32>) attributes {graph.source_nodes = ["<node #0>"]} {
// CHECK-DAG:   func.func @norm_0_s0(%in0: memref<4x6xf32>, %m: memref<4xf32>) attributes {graph.source_nodes = ["<node #0>"]} {
func.func @norm_0(%in0: memref<4x6xf32>, %out0: memref<4x6xf32>, %out1: memref<24xf32>) attributes {graph.source_nodes = ["<node #0>"]} {
  %m = loop.alloc "local" : memref<4xf32>
  loop.for %i = 0 to 4 serial {
    loop.block "max_init" [S %a = %i] {
      %c = arith.constant 0xff800000 : f32
      loop.store %c, %m[%a] : memref<4xf32>
    }
    loop.for %r = 0 to 6 serial {
      loop.block "max" [S %b = %i, R %k = %r] {
        %v = loop.load %in0[%b, %k] : memref<4x6xf32>
        %o = loop.load %m[%b] : memref<4xf32>
        %n = arith.maximumf %o, %v : f32
        loop.store %n, %m[%b] : memref<4xf32>
      }
    }
  }
  loop.for %i2 = 0 to 4 serial {
    loop.for %j2 = 0 to 6 serial {
      loop.block "sub" [S %p = %i2, S %q = %j2] {
        %v = loop.load %in0[%p, %q] : memref<4x6xf32>
        %o = loop.load %m[%p] : memref<4xf32>
        %n = arith.subf %v, %o : f32
        loop.store %n, %out0[%p, %q] : memref<4x6xf32>
      }
    }
  }
  loop.copy %out0, %out1 : memref<4x6xf32>, memref<24xf32>
  func.return
}

// A kernel of one stage and no scratch is left as it is.
// CHECK-LABEL: func.func @relu_0(%in0: memref<4x6xf32>, %out0: memref<4x6xf32>) {
// CHECK-NEXT:    loop.for %i = 0 to 4 serial {
func.func @relu_0(%in0: memref<4x6xf32>, %out0: memref<4x6xf32>) {
  loop.for %i = 0 to 4 serial {
    loop.for %j = 0 to 6 serial {
      loop.block "relu" [S %a = %i, S %b = %j] {
        %v = loop.load %in0[%a, %b] : memref<4x6xf32>
        %z = arith.constant 0.000000e+00 : f32
        %r = arith.maximumf %v, %z : f32
        loop.store %r, %out0[%a, %b] : memref<4x6xf32>
      }
    }
  }
  func.return
}
