// RUN: ziggurat-opt %s -p 'loop-rfactor{block=mm loop=2}' | filecheck %s
// RUN: ziggurat-opt %s -p 'loop-split{block=mm loop=2 factor=2},loop-rfactor{block=mm loop=3},loop-vectorize{block=mm_rf loop=3}' | filecheck %s --check-prefix=SPLIT
// RUN: not ziggurat-opt %s -p 'loop-rfactor{block=mm loop=1}' 2>&1 | filecheck %s --check-prefix=SPATIAL
// RUN: not ziggurat-opt %s -p 'loop-rfactor{block=relu loop=1}' 2>&1 | filecheck %s --check-prefix=NORED

// CHECK:         %[[RF:.*]] = loop.alloc "local" : memref<8x16x4xf32>
// CHECK:         loop.block "mm_rf_init" [S %[[A:.*]] = %mm_rfi_ax0, S %[[B:.*]] = %mm_rfi_ax1, S %[[C:.*]] = %mm_rfi_ax2] {
// CHECK:           loop.store %z, %[[RF]][%[[A]], %[[B]], %[[C]]] : memref<8x16x4xf32>
// The former reduction loop now binds a spatial variable.
// CHECK:         loop.for %k = 0 to 4 serial {
// CHECK-NEXT:      loop.block "mm_rf" [S %[[I:.*]] = %i, S %[[J:.*]] = %j, S %[[K:.*]] = %k] {
// CHECK:             %x = loop.load %a[%[[I]], %[[K]]] : memref<8x4xf32>
// CHECK:             loop.store %n, %[[RF]][%[[I]], %[[J]], %[[K]]] : memref<8x16x4xf32>
// CHECK:       loop.for %mm_ax0 = 0 to 8 serial {
// CHECK-NEXT:    loop.for %mm_ax1 = 0 to 16 serial {
// CHECK-NEXT:      loop.block "mm_init"
// CHECK:           loop.for %mm_r = 0 to 4 serial {
// CHECK-NEXT:        loop.block "mm" [S %[[U:.*]] = %mm_ax0, S %[[V:.*]] = %mm_ax1, R %[[W:.*]] = %mm_r] {
// CHECK-NEXT:          %[[P:.*]] = loop.load %[[RF]][%[[U]], %[[V]], %[[W]]] : memref<8x16x4xf32>
// CHECK-NEXT:          %[[O:.*]] = loop.load %t[%[[U]], %[[V]]] : memref<8x16xf32>
// CHECK-NEXT:          %{{.*}} = arith.addf %[[O]], %[[P]] : f32
// CHECK:       loop.block "relu"

// After a split the inner part becomes a partial-result axis the outer part still reduces over.
// SPLIT:       loop.alloc "local" : memref<8x16x2xf32>
// SPLIT:       loop.for %k_o = 0 to 2 serial {
// SPLIT-NEXT:    loop.for %k_i = 0 to 2 vectorized {
// SPLIT:           loop.block "mm_rf" [S %{{.*}} = %i, S %{{.*}} = %j, S %[[L:.*]] = %k_i, R %[[R:.*]] = %k_o] {
// SPLIT-NEXT:        %[[C2:.*]] = arith.constant 2 : index
// SPLIT-NEXT:        %[[M:.*]] = arith.muli %[[R]], %[[C2]] : index
// SPLIT-NEXT:        %{{.*}} = arith.addi %[[M]], %[[L]] : index

// SPATIAL: rfactor: loop %j (0 to 16) around block(s) ['mm', 'mm_init'] is not purely a reduction loop of block 'mm' (it binds ['S'] variables)
// NORED: rfactor: loop %j2 (0 to 16) around block(s) ['relu'] is not purely a reduction loop of block 'relu' (it binds ['S'] variables)
func.func @mm(%a: memref<8x4xf32>, %b: memref<4x16xf32>, %y: memref<8x16xf32>) {
  %t = loop.alloc "local" : memref<8x16xf32>
  loop.for %i = 0 to 8 serial {
    loop.for %j = 0 to 16 serial {
      loop.block "mm_init" [S %a0 = %i, S %a1 = %j] {
        %z = arith.constant 0.000000e+00 : f32
        loop.store %z, %t[%a0, %a1] : memref<8x16xf32>
      }
      loop.for %k = 0 to 4 serial {
        loop.block "mm" [S %b0 = %i, S %b1 = %j, R %b2 = %k] {
          %x = loop.load %a[%b0, %b2] : memref<8x4xf32>
          %w = loop.load %b[%b2, %b1] : memref<4x16xf32>
          %m = arith.mulf %x, %w : f32
          %o = loop.load %t[%b0, %b1] : memref<8x16xf32>
          %n = arith.addf %o, %m : f32
          loop.store %n, %t[%b0, %b1] : memref<8x16xf32>
        }
      }
    }
  }
  loop.for %i2 = 0 to 8 serial {
    loop.for %j2 = 0 to 16 serial {
      loop.block "relu" [S %c0 = %i2, S %c1 = %j2] {
        %v = loop.load %t[%c0, %c1] : memref<8x16xf32>
        %zero = arith.constant 0.000000e+00 : f32
        %r = arith.maximumf %v, %zero : f32
        loop.store %r, %y[%c0, %c1] : memref<8x16xf32>
      }
    }
  }
  func.return
}
