// gpu-gemm: a convolution (stride 2, padding 1) as an implicit GEMM: rows the output channels (m), columns
// (n, oh, ow), k (ci, kh, kw); its input index affine and guarded. Its 7 tiles of 64x64 are below the
// default min-blocks (12): only min-blocks=1 marks it; convolutions=false marks none.
// RUN: ziggurat-opt %s -p 'gpu-split-stages,gpu-gemm{min-blocks=1}' | filecheck %s
// RUN: ziggurat-opt %s -p gpu-split-stages,gpu-gemm | filecheck %s --check-prefix=OFF
// RUN: ziggurat-opt %s -p 'gpu-split-stages,gpu-gemm{convolutions=false min-blocks=1}' | filecheck %s --check-prefix=OFF

// CHECK-LABEL: func.func @fused_conv2d_add_relu_0_s0
// CHECK:         gpu.igemm = {roles = "nmnnkkk", extents = [2 : i64, 64 : i64, 14 : i64, 14 : i64, 32 : i64, 3 : i64, 3 : i64]
// CHECK-SAME:    tile = 64 : i64, bk = 32 : i64}
// OFF-NOT:       gpu.igemm
builtin.module {
  func.func @main(%x: memref<2x32x28x28xf32>, %0: memref<2x64x14x14xf32>) attributes {graph.input_names = ["x"], graph.output_names = ["o"]} {
    %1 = loop.const_buffer "W" : memref<64x32x3x3xf32>
    %2 = loop.const_buffer "B" : memref<64x1x1xf32>
    func.call @fused_conv2d_add_relu_0(%x, %1, %2, %0) : (memref<2x32x28x28xf32>, memref<64x32x3x3xf32>, memref<64x1x1xf32>, memref<2x64x14x14xf32>) -> ()
    func.return
  }
  func.func @fused_conv2d_add_relu_0(%in0: memref<2x32x28x28xf32>, %in1: memref<64x32x3x3xf32>, %in2: memref<64x1x1xf32>, %out0: memref<2x64x14x14xf32>) attributes {graph.source_nodes = ["<node #0>", "<node #1>"]} {
    %0 = loop.alloc "local" : memref<2x64x14x14xf32>
    loop.for %i0 = 0 to 2 serial {
      loop.for %i1 = 0 to 64 serial {
        loop.for %i2 = 0 to 14 serial {
          loop.for %i3 = 0 to 14 serial {
            loop.block "conv2d_init" [S %1 = %i0, S %2 = %i1, S %3 = %i2, S %4 = %i3] {
              %5 = arith.constant 0.000000e+00 : f32
              loop.store %5, %0[%1, %2, %3, %4] : memref<2x64x14x14xf32>
            }
            loop.for %r0 = 0 to 32 serial {
              loop.for %r1 = 0 to 3 serial {
                loop.for %r2 = 0 to 3 serial {
                  loop.block "conv2d" [S %6 = %i0, S %7 = %i1, S %8 = %i2, S %9 = %i3, R %10 = %r0, R %11 = %r1, R %12 = %r2] {
                    %13 = arith.constant 2 : index
                    %14 = arith.muli %8, %13 : index
                    %15 = arith.addi %14, %11 : index
                    %16 = arith.constant -1 : index
                    %17 = arith.addi %15, %16 : index
                    %18 = arith.constant 2 : index
                    %19 = arith.muli %9, %18 : index
                    %20 = arith.addi %19, %12 : index
                    %21 = arith.constant -1 : index
                    %22 = arith.addi %20, %21 : index
                    %23 = arith.constant 0 : index
                    %24 = arith.cmpi sge, %17, %23 : index
                    %25 = arith.constant 28 : index
                    %26 = arith.cmpi slt, %17, %25 : index
                    %27 = arith.andi %24, %26 : i1
                    %28 = arith.select %27, %17, %23 : index
                    %29 = arith.cmpi sge, %22, %23 : index
                    %30 = arith.constant 28 : index
                    %31 = arith.cmpi slt, %22, %30 : index
                    %32 = arith.andi %29, %31 : i1
                    %33 = arith.andi %27, %32 : i1
                    %34 = arith.select %32, %22, %23 : index
                    %35 = loop.load %in0[%6, %10, %28, %34] : memref<2x32x28x28xf32>
                    %36 = arith.constant 0.000000e+00 : f32
                    %37 = arith.select %33, %35, %36 : f32
                    %38 = loop.load %in1[%7, %10, %11, %12] : memref<64x32x3x3xf32>
                    %39 = arith.mulf %37, %38 : f32
                    %40 = loop.load %0[%6, %7, %8, %9] : memref<2x64x14x14xf32>
                    %41 = arith.addf %40, %39 : f32
                    loop.store %41, %0[%6, %7, %8, %9] : memref<2x64x14x14xf32>
                  }
                }
              }
            }
          }
        }
      }
    }
    loop.for %i0_1 = 0 to 2 serial {
      loop.for %i1_1 = 0 to 64 serial {
        loop.for %i2_1 = 0 to 14 serial {
          loop.for %i3_1 = 0 to 14 serial {
            loop.block "relu" [S %42 = %i0_1, S %43 = %i1_1, S %44 = %i2_1, S %45 = %i3_1] {
              %46 = loop.load %0[%42, %43, %44, %45] : memref<2x64x14x14xf32>
              %47 = arith.constant 0 : index
              %48 = loop.load %in2[%43, %47, %47] : memref<64x1x1xf32>
              %49 = arith.addf %46, %48 : f32
              %50 = arith.constant 0.000000e+00 : f32
              %51 = arith.maximumf %49, %50 : f32
              loop.store %51, %out0[%42, %43, %44, %45] : memref<2x64x14x14xf32>
            }
          }
        }
      }
    }
    func.return
  }
}
