// RUN: ziggurat-opt %s -p 'loop-parallelize-outer{min-work=1}' | filecheck %s
// RUN: ziggurat-opt %s -p loop-parallelize-outer | filecheck %s --check-prefix=SMALL
// RUN: ziggurat-opt %s -p 'loop-parallelize-outer{min-work=1 vector-width=8},loop-vectorize-innermost{min-extent=8}' | filecheck %s --check-prefix=STRIP

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

// A dot-product tile's reduction loop is already `vectorized` (loop-default-schedule):
// its work counts trips / 8, so a 10 x 256 one-row product (the MLP's last layer,
// about 1 us on one thread) stays serial, while 512 x 784 goes parallel.
// SMALL-LABEL: func.func @dot_tail
// SMALL:         loop.for %i = 0 to 10 step 2 serial {
// SMALL-LABEL: func.func @dot_big
// SMALL:         loop.for %i = 0 to 512 step 4 parallel {
func.func @dot_tail(%x: memref<1x256xf32>, %w: memref<10x256xf32>, %y: memref<1x10xf32>) {
  loop.for %i = 0 to 10 step 2 serial {
    loop.for %k = 0 to 256 vectorized {
      loop.block "dot" [S %a = %i, R %b = %k] {
        %z = arith.constant 0 : index
        %u = loop.load %x[%z, %b] : memref<1x256xf32>
        %v = loop.load %w[%a, %b] : memref<10x256xf32>
        %p = arith.mulf %u, %v : f32
        %o = loop.load %y[%z, %a] : memref<1x10xf32>
        %s = arith.addf %o, %p : f32
        loop.store %s, %y[%z, %a] : memref<1x10xf32>
      }
    }
  }
  func.return
}
func.func @dot_big(%x: memref<1x784xf32>, %w: memref<512x784xf32>, %y: memref<1x512xf32>) {
  loop.for %i = 0 to 512 step 4 serial {
    loop.for %k = 0 to 784 vectorized {
      loop.block "dot" [S %a = %i, R %b = %k] {
        %z = arith.constant 0 : index
        %u = loop.load %x[%z, %b] : memref<1x784xf32>
        %v = loop.load %w[%a, %b] : memref<512x784xf32>
        %p = arith.mulf %u, %v : f32
        %o = loop.load %y[%z, %a] : memref<1x512xf32>
        %s = arith.addf %o, %p : f32
        loop.store %s, %y[%z, %a] : memref<1x512xf32>
      }
    }
  }
  func.return
}

// A 1-D elementwise kernel: its one loop is innermost. Given the vector width (8), the
// loop of 2048 = 4 chunks of 64 vectors is split; the chunks run in parallel and each
// chunk's 512-trip loop stays serial, so loop-vectorize-innermost vectorizes it.
// Without a vector width (the first RUN line) the loop is marked parallel whole.
// STRIP-LABEL: func.func @elementwise_1d
// STRIP:         loop.for %i_o = 0 to 4 parallel {
// STRIP-NEXT:      loop.for %i_i = 0 to 512 vectorized {
// STRIP:             loop.block "neg"
// A trip count that is no multiple of a chunk is not split.
// STRIP:         loop.for %j = 0 to 1000 parallel {
func.func @elementwise_1d(%x: memref<2048xf32>, %y: memref<1000xf32>) {
  loop.for %i = 0 to 2048 serial {
    loop.block "neg" [S %a = %i] {
      %v = loop.load %x[%a] : memref<2048xf32>
      %n = arith.negf %v : f32
      loop.store %n, %x[%a] : memref<2048xf32>
    }
  }
  loop.for %j = 0 to 1000 serial {
    loop.block "neg2" [S %b = %j] {
      %v = loop.load %y[%b] : memref<1000xf32>
      %n = arith.negf %v : f32
      loop.store %n, %y[%b] : memref<1000xf32>
    }
  }
  func.return
}
