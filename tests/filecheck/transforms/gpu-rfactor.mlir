// gpu-rfactor: a reduction with few results (4 rows of 64) gets 32 partials per row (the partials'
// loop outside the reduction, their zeroing inside their nest), then a combining reduction.
// RUN: ziggurat-opt %s -p gpu-rfactor | filecheck %s
// RUN: ziggurat-opt %s -p 'gpu-rfactor{min-extent=128}' | filecheck %s --check-prefix=LONG

// CHECK-LABEL: func.func @reduce_0
// CHECK:         %[[RF:.*]] = loop.alloc "local" : memref<4x1x32xf32>
// CHECK:         loop.for %r0_i = 0 to 32 serial {
// CHECK-NEXT:      loop.block "reduce_sum_rf_init"
// CHECK:           loop.for %r0_o = 0 to 2 serial {
// CHECK:             loop.block "reduce_sum_rf" [S {{.*}}, S {{.*}}, S {{.*}}, R {{.*}}]
// CHECK:         loop.block "reduce_sum_init"
// CHECK:         loop.for %reduce_sum_r = 0 to 32 serial {
// CHECK:           loop.load %[[RF]]
// LONG-LABEL: func.func @reduce_0
// LONG-NOT:     reduce_sum_rf
builtin.module {
  func.func @main(%x: memref<4x64xf32>, %0: memref<4xf32>) attributes {graph.input_names = ["x"], graph.output_names = ["y"]} {
    %1 = loop.alloc "global" : memref<4x1xf32>
    func.call @reduce_0(%x, %1) : (memref<4x64xf32>, memref<4x1xf32>) -> ()
    func.call @reshape_0(%1, %0) : (memref<4x1xf32>, memref<4xf32>) -> ()
    func.return
  }
  func.func @reduce_0(%in0: memref<4x64xf32>, %out0: memref<4x1xf32>) attributes {graph.source_nodes = ["<node #0>"]} {
    loop.for %i0 = 0 to 4 serial {
      loop.for %i1 = 0 to 1 serial {
        loop.block "reduce_sum_init" [S %0 = %i0, S %1 = %i1] {
          %2 = arith.constant 0.000000e+00 : f32
          loop.store %2, %out0[%0, %1] : memref<4x1xf32>
        }
        loop.for %r0 = 0 to 64 serial {
          loop.block "reduce_sum" [S %3 = %i0, S %4 = %i1, R %5 = %r0] {
            %6 = loop.load %in0[%3, %5] : memref<4x64xf32>
            %7 = loop.load %out0[%3, %4] : memref<4x1xf32>
            %8 = arith.addf %7, %6 : f32
            loop.store %8, %out0[%3, %4] : memref<4x1xf32>
          }
        }
      }
    }
    func.return
  }
  func.func @reshape_0(%in0: memref<4x1xf32>, %out0: memref<4xf32>) attributes {graph.source_nodes = ["<node #0>"]} {
    loop.for %i0 = 0 to 4 serial {
      loop.block "reshape" [S %0 = %i0] {
        %1 = arith.constant 0 : index
        %2 = arith.constant 4 : index
        %3 = arith.divui %0, %2 : index
        %4 = loop.load %in0[%0, %1] : memref<4x1xf32>
        loop.store %4, %out0[%0] : memref<4xf32>
      }
    }
    func.return
  }
}
