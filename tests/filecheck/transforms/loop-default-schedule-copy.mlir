// RUN: ziggurat-opt %s -p 'loop-default-schedule{vector-width=8}' | filecheck %s
// RUN: ziggurat-opt %s -p 'loop-default-schedule{vector-width=8 copy-nests=false}' | filecheck %s --check-prefix=OFF

// conv's boundary layout transforms (NCHW <-> NCHW8c, the input padded by 1) as
// convert-te-to-loop writes them. loop-default-schedule gives such copy nests
// (transforms/schedule/copy_nest.py) loops without division or padding tests.

// Padded blocking: the halo is zeroed by four nests (rows 0 and 4, then columns 0
// and 5 of rows 1..3), and the copy runs over the interior (rows 1..3, columns
// 1..4) with a plain read: no select, no clamp.
// CHECK-LABEL: func.func @pad_block
// CHECK:         loop.for %{{.*}} = 0 to 1 serial {
// CHECK:           loop.block "layout_transform_pad_zero"
// CHECK:         loop.for %{{.*}} = 4 to 5 serial {
// CHECK:           loop.block "layout_transform_pad_zero"
// CHECK:         loop.for %{{.*}} = 1 to 4 serial {
// CHECK-NEXT:      loop.for %{{.*}} = 0 to 1 serial {
// CHECK:           loop.block "layout_transform_pad_zero"
// CHECK:         loop.for %{{.*}} = 5 to 6 serial {
// CHECK:           loop.block "layout_transform_pad_zero"
// CHECK:         loop.for %i2 = 1 to 4 serial {
// CHECK-NEXT:      loop.for %i3 = 1 to 5 serial {
// CHECK-NEXT:        loop.for %i4 = 0 to 8 serial {
// CHECK-NEXT:          loop.block "layout_transform"
// CHECK-NOT:             arith.select
// CHECK:                 %[[V:.*]] = loop.load %in0[%{{.*}}] : memref<1x16x3x4xf32>
// CHECK-NEXT:            loop.store %[[V]], %out0
// Without the copy-nest schedule the transform keeps its clamped, tested read.
// OFF-LABEL: func.func @pad_block
// OFF-NOT:     layout_transform_pad_zero
// OFF:         arith.select
// CHECK-LABEL: func.func @unblock
func.func @pad_block(%in0: memref<1x16x3x4xf32>, %out0: memref<1x2x5x6x8xf32>) {
  loop.for %i0 = 0 to 1 serial {
    loop.for %i1 = 0 to 2 serial {
      loop.for %i2 = 0 to 5 serial {
        loop.for %i3 = 0 to 6 serial {
          loop.for %i4 = 0 to 8 serial {
            loop.block "layout_transform" [S %0 = %i0, S %1 = %i1, S %2 = %i2, S %3 = %i3, S %4 = %i4] {
              %5 = arith.constant 8 : index
              %6 = arith.muli %1, %5 : index
              %7 = arith.addi %6, %4 : index
              %8 = arith.constant -1 : index
              %9 = arith.addi %2, %8 : index
              %10 = arith.constant -1 : index
              %11 = arith.addi %3, %10 : index
              %12 = arith.constant 0 : index
              %13 = arith.cmpi sge, %7, %12 : index
              %14 = arith.constant 16 : index
              %15 = arith.cmpi slt, %7, %14 : index
              %16 = arith.andi %13, %15 : i1
              %17 = arith.select %16, %7, %12 : index
              %18 = arith.cmpi sge, %9, %12 : index
              %19 = arith.constant 3 : index
              %20 = arith.cmpi slt, %9, %19 : index
              %21 = arith.andi %18, %20 : i1
              %22 = arith.andi %16, %21 : i1
              %23 = arith.select %21, %9, %12 : index
              %24 = arith.cmpi sge, %11, %12 : index
              %25 = arith.constant 4 : index
              %26 = arith.cmpi slt, %11, %25 : index
              %27 = arith.andi %24, %26 : i1
              %28 = arith.andi %22, %27 : i1
              %29 = arith.select %27, %11, %12 : index
              %30 = loop.load %in0[%0, %17, %23, %29] : memref<1x16x3x4xf32>
              %31 = arith.constant 0.000000e+00 : f32
              %32 = arith.select %28, %30, %31 : f32
              loop.store %32, %out0[%0, %1, %2, %3, %4] : memref<1x2x5x6x8xf32>
            }
          }
        }
      }
    }
  }
  func.return
}

// Unblocking: the channel loop (0 to 16) is strip-mined into 2 x 8, its lane loop
// moves innermost, and the block reads the lane directly: no divui, no remui.
// CHECK:         loop.for %i1_o = 0 to 2 serial {
// CHECK-NEXT:      loop.for %i2 = 0 to 3 serial {
// CHECK-NEXT:        loop.for %i3 = 0 to 4 serial {
// CHECK-NEXT:          loop.for %i1_i = 0 to 8 serial {
// CHECK-NEXT:            loop.block "layout_transform" [S %[[N:.*]] = %i0, S %[[CB:.*]] = %i1_o, S %[[L:.*]] = %i1_i, S %[[H:.*]] = %i2, S %[[W:.*]] = %i3] {
// CHECK-NOT:               arith.divui
// CHECK-NOT:               arith.remui
// CHECK:                   loop.load %in0[%[[N]], %[[CB]], %[[H]], %[[W]], %[[L]]] : memref<1x2x3x4x8xf32>
// CHECK-LABEL: func.func @channel_padded
func.func @unblock(%in0: memref<1x2x3x4x8xf32>, %out0: memref<1x16x3x4xf32>) {
  loop.for %i0 = 0 to 1 serial {
    loop.for %i1 = 0 to 16 serial {
      loop.for %i2 = 0 to 3 serial {
        loop.for %i3 = 0 to 4 serial {
          loop.block "layout_transform" [S %0 = %i0, S %1 = %i1, S %2 = %i2, S %3 = %i3] {
            %4 = arith.constant 8 : index
            %5 = arith.divui %1, %4 : index
            %6 = arith.constant 8 : index
            %7 = arith.remui %1, %6 : index
            %8 = loop.load %in0[%0, %5, %2, %3, %7] : memref<1x2x3x4x8xf32>
            loop.store %8, %out0[%0, %1, %2, %3] : memref<1x16x3x4xf32>
          }
        }
      }
    }
  }
  func.return
}

// A channel test on two loops (12 channels in blocks of 8; convert-layout picks
// dividing blocks, so it does not write this): the halo is not a box, and the
// nest is left as it is.
// CHECK-NOT:     layout_transform_pad_zero
// CHECK:         loop.for %i2 = 0 to 5 serial {
// CHECK:           arith.select
// CHECK:           loop.load %in0
func.func @channel_padded(%in0: memref<1x12x3x4xf32>, %out0: memref<1x2x5x6x8xf32>) {
  loop.for %i0 = 0 to 1 serial {
    loop.for %i1 = 0 to 2 serial {
      loop.for %i2 = 0 to 5 serial {
        loop.for %i3 = 0 to 6 serial {
          loop.for %i4 = 0 to 8 serial {
            loop.block "layout_transform" [S %0 = %i0, S %1 = %i1, S %2 = %i2, S %3 = %i3, S %4 = %i4] {
              %5 = arith.constant 8 : index
              %6 = arith.muli %1, %5 : index
              %7 = arith.addi %6, %4 : index
              %8 = arith.constant -1 : index
              %9 = arith.addi %2, %8 : index
              %10 = arith.constant -1 : index
              %11 = arith.addi %3, %10 : index
              %12 = arith.constant 0 : index
              %13 = arith.cmpi sge, %7, %12 : index
              %14 = arith.constant 12 : index
              %15 = arith.cmpi slt, %7, %14 : index
              %16 = arith.andi %13, %15 : i1
              %17 = arith.select %16, %7, %12 : index
              %18 = arith.cmpi sge, %9, %12 : index
              %19 = arith.constant 3 : index
              %20 = arith.cmpi slt, %9, %19 : index
              %21 = arith.andi %18, %20 : i1
              %22 = arith.andi %16, %21 : i1
              %23 = arith.select %21, %9, %12 : index
              %24 = arith.cmpi sge, %11, %12 : index
              %25 = arith.constant 4 : index
              %26 = arith.cmpi slt, %11, %25 : index
              %27 = arith.andi %24, %26 : i1
              %28 = arith.andi %22, %27 : i1
              %29 = arith.select %27, %11, %12 : index
              %30 = loop.load %in0[%0, %17, %23, %29] : memref<1x12x3x4xf32>
              %31 = arith.constant 0.000000e+00 : f32
              %32 = arith.select %28, %30, %31 : f32
              loop.store %32, %out0[%0, %1, %2, %3, %4] : memref<1x2x5x6x8xf32>
            }
          }
        }
      }
    }
  }
  func.return
}

// An elementwise nest reading its input transposed ([64 rows, 64 channels] -> [64 channels,
// 8 x 8]): the lanes (%i2) fall on other rows, so the channel loop is strip-mined by one
// 64-byte line of f32 (16) and its strip moves just outside the lane loop
// (transforms/schedule/transpose_tiles.py); the lane loop stays innermost. The strip runs
// in parts of one vector (8), unrolled, and the read is marked `hw.transpose_rows`: its
// gathers become one load per row and a transpose in registers (convert-loop-to-hw).
// CHECK-LABEL: func.func @transposed_read
// CHECK:         loop.for %i0_o = 0 to 4 serial {
// CHECK-NEXT:      loop.for %i1 = 0 to 8 serial {
// CHECK-NEXT:        loop.for %i0_i_o = 0 to 2 serial {
// CHECK-NEXT:          loop.for %i0_i_i = 0 to 8 unrolled {
// CHECK:                 %i0 = arith.addi
// CHECK-NEXT:            loop.for %i2 = 0 to 8 serial {
// CHECK-NEXT:              loop.block "dequantize" [S %{{.*}} = %i0, S %{{.*}} = %i1, S %{{.*}} = %i2]
// CHECK:                     loop.load %in0[%{{.*}}, %{{.*}}] {hw.transpose_rows} : memref<64x64xf32>
// OFF-LABEL: func.func @transposed_read
// OFF:         loop.for %i0 = 0 to 64 serial {
// OFF-NEXT:      loop.for %i1 = 0 to 8 serial {
// OFF-NEXT:        loop.for %i2 = 0 to 8 serial {
func.func @transposed_read(%in0: memref<64x64xf32>, %out0: memref<64x8x8xf32>) {
  loop.for %i0 = 0 to 64 serial {
    loop.for %i1 = 0 to 8 serial {
      loop.for %i2 = 0 to 8 serial {
        loop.block "dequantize" [S %0 = %i0, S %1 = %i1, S %2 = %i2] {
          %3 = arith.constant 8 : index
          %4 = arith.muli %1, %3 : index
          %5 = arith.addi %4, %2 : index
          %6 = loop.load %in0[%5, %0] : memref<64x64xf32>
          %7 = arith.constant 0.5 : f32
          %8 = arith.mulf %6, %7 : f32
          loop.store %8, %out0[%0, %1, %2] : memref<64x8x8xf32>
        }
      }
    }
  }
  func.return
}

// A lane loop of several vectors (here from 8, a concatenation's range: 32 lanes, 4 vectors of
// 8) is split into vectors and lanes too, and the line strip runs inside each vector: the lines
// one vector gathers are reused at once.
// CHECK-LABEL: func.func @transposed_lanes
// CHECK:         loop.for %i0_o = 0 to 4 serial {
// CHECK-NEXT:      loop.for %i1_v = 0 to 4 serial {
// CHECK-NEXT:        loop.for %i0_i_o = 0 to 2 serial {
// CHECK-NEXT:          loop.for %i0_i_i = 0 to 8 unrolled {
// CHECK:               loop.for %i1_l = 0 to 8 serial {
// CHECK:                 %[[L:.*]] = arith.addi %{{.*}}, %i1_l : index
// CHECK-NEXT:            %[[S:.*]] = arith.constant 8 : index
// CHECK-NEXT:            %i1 = arith.addi %[[L]], %[[S]] : index
// CHECK-NEXT:            loop.block "dequantize" [S %{{.*}} = %{{.*}}, S %{{.*}} = %i1]
func.func @transposed_lanes(%in0: memref<40x64xf32>, %out0: memref<64x40xf32>) {
  loop.for %i0 = 0 to 64 serial {
    loop.for %i1 = 8 to 40 serial {
      loop.block "dequantize" [S %0 = %i0, S %1 = %i1] {
        %2 = loop.load %in0[%1, %0] : memref<40x64xf32>
        %3 = arith.constant 0.5 : f32
        %4 = arith.mulf %2, %3 : f32
        loop.store %4, %out0[%0, %1] : memref<64x40xf32>
      }
    }
  }
  func.return
}
