// RUN: ziggurat-opt %s -p 'loop-parallelize-outer{min-work=1}' | filecheck %s
// RUN: ziggurat-opt %s -p loop-parallelize-outer | filecheck %s --check-prefix=SMALL

// With the default min-work (8192 ops), these tiny nests all stay serial:
// a parallel region would cost more than they take.
// SMALL-LABEL: func.func @kernel
// SMALL:         loop.for %c = 0 to 8 serial {
// SMALL-NOT:     parallel

// The batch loop of extent 1 is skipped; the channel loop becomes parallel.
// CHECK-LABEL: func.func @kernel
func.func @kernel(%x: memref<1x8xf32>, %y: memref<1x1xf32>) {
  // CHECK:       loop.for %n = 0 to 1 serial {
  // CHECK-NEXT:    loop.for %c = 0 to 8 parallel {
  loop.for %n = 0 to 1 serial {
    loop.for %c = 0 to 8 serial {
      loop.block "relu" [S %a = %n, S %b = %c] {
        %v = loop.load %x[%a, %b] : memref<1x8xf32>
        loop.store %v, %x[%a, %b] : memref<1x8xf32>
      }
    }
  }
  // Negative: a loop bound to a reduction variable stays serial.
  // CHECK:       loop.for %k = 0 to 8 serial {
  loop.for %k = 0 to 8 serial {
    loop.block "sum" [R %r = %k] {
      %z = arith.constant 0 : index
      %v = loop.load %x[%z, %r] : memref<1x8xf32>
      %acc = loop.load %y[%z, %z] : memref<1x1xf32>
      %s = arith.addf %acc, %v : f32
      loop.store %s, %y[%z, %z] : memref<1x1xf32>
    }
  }
  func.return
}

// The model entry is never parallelized.
// CHECK-LABEL: func.func @main
// CHECK:         loop.for %i = 0 to 8 serial {
func.func @main(%x: memref<8xf32>) {
  loop.for %i = 0 to 8 serial {
    loop.block "m" [S %a = %i] {
      %v = loop.load %x[%a] : memref<8xf32>
      loop.store %v, %x[%a] : memref<8xf32>
    }
  }
  func.return
}
