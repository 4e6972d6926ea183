// gpu-fold-casts: the f16 -> f32 casts that only a matrix product reads are folded into it: the product
// reads the f16 buffers and widens each element (the tensor-core template's input).
// RUN: ziggurat-opt %s -p gpu-split-stages,gpu-fold-casts | filecheck %s

// CHECK-LABEL: func.func @main
// CHECK-NOT:     func.call @cast_
// CHECK:         func.call @fused_matmul_cast_0_s0_f16(%a, %b, %{{.*}}) : (memref<64x32xf16>, memref<32x48xf16>, memref<64x48xf32>)
// CHECK:         func.call @fused_matmul_cast_0_s1
// CHECK-LABEL: func.func @fused_matmul_cast_0_s0_f16
// CHECK:         loop.load %in0{{.*}} : memref<64x32xf16>
// CHECK-NEXT:    arith.extf {{.*}} : f16 to f32
// CHECK:         loop.load %in1{{.*}} : memref<32x48xf16>
// CHECK-NEXT:    arith.extf {{.*}} : f16 to f32
// CHECK-NOT:   func.func @cast_
builtin.module {
  func.func @main(%a: memref<64x32xf16>, %b: memref<32x48xf16>, %0: memref<64x48xf16>) attributes {graph.input_names = ["a", "b"], graph.output_names = ["c"]} {
    %1 = loop.alloc "global" : memref<64x32xf32>
    func.call @cast_0(%a, %1) : (memref<64x32xf16>, memref<64x32xf32>) -> ()
    %2 = loop.alloc "global" : memref<32x48xf32>
    func.call @cast_1(%b, %2) : (memref<32x48xf16>, memref<32x48xf32>) -> ()
    func.call @fused_matmul_cast_0(%1, %2, %0) : (memref<64x32xf32>, memref<32x48xf32>, memref<64x48xf16>) -> ()
    func.return
  }
  func.func @cast_0(%in0: memref<64x32xf16>, %out0: memref<64x32xf32>) attributes {graph.source_nodes = ["<node #0>"]} {
    loop.for %i0 = 0 to 64 serial {
      loop.for %i1 = 0 to 32 serial {
        loop.block "cast" [S %0 = %i0, S %1 = %i1] {
          %2 = loop.load %in0[%0, %1] : memref<64x32xf16>
          %3 = arith.extf %2 : f16 to f32
          loop.store %3, %out0[%0, %1] : memref<64x32xf32>
        }
      }
    }
    func.return
  }
  func.func @cast_1(%in0: memref<32x48xf16>, %out0: memref<32x48xf32>) attributes {graph.source_nodes = ["<node #0>"]} {
    loop.for %i0 = 0 to 32 serial {
      loop.for %i1 = 0 to 48 serial {
        loop.block "cast" [S %0 = %i0, S %1 = %i1] {
          %2 = loop.load %in0[%0, %1] : memref<32x48xf16>
          %3 = arith.extf %2 : f16 to f32
          loop.store %3, %out0[%0, %1] : memref<32x48xf32>
        }
      }
    }
    func.return
  }
  func.func @fused_matmul_cast_0(%in0: memref<64x32xf32>, %in1: memref<32x48xf32>, %out0: memref<64x48xf16>) attributes {graph.source_nodes = ["<node #0>"]} {
    %0 = loop.alloc "local" : memref<64x48xf32>
    loop.for %i0 = 0 to 64 serial {
      loop.for %i1 = 0 to 48 serial {
        loop.block "matmul_init" [S %1 = %i0, S %2 = %i1] {
          %3 = arith.constant 0.000000e+00 : f32
          loop.store %3, %0[%1, %2] : memref<64x48xf32>
        }
        loop.for %r0 = 0 to 32 serial {
          loop.block "matmul" [S %4 = %i0, S %5 = %i1, R %6 = %r0] {
            %7 = loop.load %in0[%4, %6] : memref<64x32xf32>
            %8 = loop.load %in1[%6, %5] : memref<32x48xf32>
            %9 = arith.mulf %7, %8 : f32
            %10 = loop.load %0[%4, %5] : memref<64x48xf32>
            %11 = arith.addf %10, %9 : f32
            loop.store %11, %0[%4, %5] : memref<64x48xf32>
          }
        }
      }
    }
    loop.for %i0_1 = 0 to 64 serial {
      loop.for %i1_1 = 0 to 48 serial {
        loop.block "cast" [S %12 = %i0_1, S %13 = %i1_1] {
          %14 = loop.load %0[%12, %13] : memref<64x48xf32>
          %15 = arith.truncf %14 : f32 to f16
          loop.store %15, %out0[%12, %13] : memref<64x48xf16>
        }
      }
    }
    func.return
  }
}
