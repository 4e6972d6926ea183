// RUN: ziggurat-opt %s -p 'loop-bind{block=b loop=0 threads=256}' | filecheck %s
// RUN: ziggurat-opt %s -p 'loop-bind{block=e loop=0 axis=blockIdx},loop-bind{block=e loop=1 axis="threadIdx.x"}' | filecheck %s --check-prefix=AXES
// RUN: not ziggurat-opt %s -p 'loop-bind{block=s loop=1 axis=blockIdx}' 2>&1 | filecheck %s --check-prefix=ERR
// RUN: not ziggurat-opt %s -p 'loop-bind{block=e loop=1 axis=threadIdx}' 2>&1 | filecheck %s --check-prefix=OUTSIDE
// RUN: not ziggurat-opt %s -p 'loop-bind{block=e loop=1 threads=2000}' 2>&1 | filecheck %s --check-prefix=MANY
// RUN: not ziggurat-opt %s -p 'loop-bind{block=e loop=1}' 2>&1 | filecheck %s --check-prefix=NEITHER
// RUN: not ziggurat-opt %s -p 'loop-bind{block=e loop=1 axis=warp}' 2>&1 | filecheck %s --check-prefix=AXIS

// 1000 iterations on blocks of 256 threads: 4 blocks, the last one partly past the end, so the
// block loop carries gpu.limit (the backend skips %i_b * 256 + %i_t >= 1000).
// CHECK-LABEL: func.func @k
// CHECK:         loop.for %i_b = 0 to 4 blockIdx.x {
// CHECK-NEXT:      loop.for %i_t = 0 to 256 threadIdx.x {
// CHECK-NEXT:        %[[C:.*]] = arith.constant 256 : index
// CHECK-NEXT:        %[[T:.*]] = arith.muli %i_b, %[[C]] : index
// CHECK-NEXT:        %i = arith.addi %[[T]], %i_t : index
// CHECK-NEXT:        loop.block "b" [S %v = %i] {
// CHECK:         } {gpu.limit = 1000 : i64}
func.func @k(%x: memref<1000xf32>, %y: memref<1000xf32>) {
  loop.for %i = 0 to 1000 serial {
    loop.block "b" [S %v = %i] {
      %e = loop.load %x[%v] : memref<1000xf32>
      loop.store %e, %y[%v] : memref<1000xf32>
    }
  }
  func.return
}

// Binding each axis by hand: rows on blocks, columns on threads; no split, no gpu.limit.
// AXES-LABEL: func.func @e
// AXES:         loop.for %i = 0 to 4 blockIdx.x {
// AXES-NEXT:      loop.for %j = 0 to 32 threadIdx.x {
// AXES-NOT:     gpu.limit
func.func @e(%x: memref<4x32xf32>, %y: memref<4x32xf32>) {
  loop.for %i = 0 to 4 serial {
    loop.for %j = 0 to 32 serial {
      loop.block "e" [S %a = %i, S %b = %j] {
        %v = loop.load %x[%a, %b] : memref<4x32xf32>
        loop.store %v, %y[%a, %b] : memref<4x32xf32>
      }
    }
  }
  func.return
}

// A reduction loop must not be bound: GPU threads would race on the accumulator.
// ERR: bind: loop %k (0 to 32) around block(s) ['s'] carries a reduction (a block binds it as R); GPU threads would race on the accumulator
// A thread loop must lie inside a block loop.
// OUTSIDE: bind: loop %j (0 to 32) around block(s) ['e'] must lie inside a 'blockIdx.x' loop
// MANY: loop-bind: threads=2000; a CUDA block has 1 to 1024 threads
// NEITHER: loop-bind: give either axis ("blockIdx.x" or "threadIdx.x") or threads=N
// AXIS: loop-bind: unknown thread axis 'warp'; use one of blockIdx.x, threadIdx.x
func.func @r(%x: memref<4x32xf32>, %y: memref<4xf32>) {
  loop.for %i = 0 to 4 serial {
    loop.block "s_init" [S %a = %i] {
      %z = arith.constant 0.000000e+00 : f32
      loop.store %z, %y[%a] : memref<4xf32>
    }
    loop.for %k = 0 to 32 serial {
      loop.block "s" [S %b = %i, R %c = %k] {
        %e = loop.load %x[%b, %c] : memref<4x32xf32>
        %o = loop.load %y[%b] : memref<4xf32>
        %n = arith.addf %o, %e : f32
        loop.store %n, %y[%b] : memref<4xf32>
      }
    }
  }
  func.return
}
