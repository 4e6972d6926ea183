// RUN: ziggurat-opt %s | ziggurat-opt | filecheck %s
// RUN: ZIGGURAT_ROUNDTRIP | filecheck %s

// CHECK-LABEL: func.func @dense
func.func @dense(%x: memref<1x64xf32>, %w: memref<10x64xf32>, %y: memref<1x10xf32>) {
  // CHECK-NEXT: loop.for %i = 0 to 1 serial {
  // CHECK-NEXT:   loop.for %j = 0 to 10 parallel {
  // CHECK-NEXT:     loop.block "dense_init" [S %vi = %i, S %vj = %j] {
  // CHECK-NEXT:       %zero = arith.constant 0.000000e+00 : f32
  // CHECK-NEXT:       loop.store %zero, %y[%vi, %vj] : memref<1x10xf32>
  // CHECK-NEXT:     }
  // CHECK-NEXT:     loop.for %k = 0 to 64 step 4 unrolled {
  // CHECK-NEXT:       loop.block "dense" [S %ui = %i, S %uj = %j, R %uk = %k] {
  // CHECK-NEXT:         %a = loop.load %x[%ui, %uk] : memref<1x64xf32>
  loop.for %i = 0 to 1 serial {
    loop.for %j = 0 to 10 parallel {
      loop.block "dense_init" [S %vi = %i, S %vj = %j] {
        %zero = arith.constant 0.000000e+00 : f32
        loop.store %zero, %y[%vi, %vj] : memref<1x10xf32>
      }
      loop.for %k = 0 to 64 step 4 unrolled {
        loop.block "dense" [S %ui = %i, S %uj = %j, R %uk = %k] {
          %a = loop.load %x[%ui, %uk] : memref<1x64xf32>
          %b = loop.load %w[%uj, %uk] : memref<10x64xf32>
          %acc = loop.load %y[%ui, %uj] : memref<1x10xf32>
          %m = arith.mulf %a, %b : f32
          %s = arith.addf %acc, %m : f32
          loop.store %s, %y[%ui, %uj] : memref<1x10xf32>
        }
      }
    }
  }
  func.return
}

// CHECK-LABEL: func.func @main
func.func @main(%x: memref<1x64xf32>, %out: memref<1x10xf32>) {
  // CHECK-NEXT: %w = loop.const_buffer "fc.w" : memref<10x64xf32>
  // CHECK-NEXT: %t = loop.alloc "global" : memref<1x10xf32>
  // CHECK-NEXT: func.call @dense(%x, %w, %t)
  // CHECK-NEXT: loop.copy %t, %out : memref<1x10xf32>, memref<1x10xf32>
  %w = loop.const_buffer "fc.w" : memref<10x64xf32>
  %t = loop.alloc "global" : memref<1x10xf32>
  func.call @dense(%x, %w, %t) : (memref<1x64xf32>, memref<10x64xf32>, memref<1x10xf32>) -> ()
  loop.copy %t, %out : memref<1x10xf32>, memref<1x10xf32>
  func.return
}
