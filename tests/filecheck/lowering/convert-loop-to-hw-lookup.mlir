// RUN: ziggurat-opt %s -p 'convert-loop-to-hw{vector-width=8}' --split-input-file | filecheck %s

// A table read through an index cast from i32 lanes (graph.lookup's te body) becomes one
// hw.vlookup per vector: the lanes' indices are its offsets into the table.
// CHECK-LABEL: func.func @lookup
// CHECK:         loop.for %i = 0 to 64 step 8 serial {
// CHECK:           %[[K:.*]] = hw.vconvert "fptosi" %{{.*}} : vector<8xf32> -> vector<8xi32>
// CHECK-NOT:       arith.index_cast
// CHECK:           %{{.*}} = hw.vlookup %t[%{{.*}}], %[[K]], %{{.*}} : memref<256xf32>, vector<8xi32>, vector<8xi1> -> vector<8xf32>
// CHECK:         } {hw.vector_width = 8 : i64}
func.func @lookup(%x: memref<64xf32>, %t: memref<256xf32>, %y: memref<64xf32>) {
  loop.for %i = 0 to 64 vectorized {
    %v = loop.load %x[%i] : memref<64xf32>
    %k = arith.fptosi %v : f32 to i32
    %j = arith.index_cast %k : i32 to index
    %w = loop.load %t[%j] : memref<256xf32>
    loop.store %w, %y[%i] : memref<64xf32>
  }
  func.return
}

// -----

// Per-lane tables (a table per channel, the channel in the lanes): lane l reads `l * 256`
// elements further, added to the offsets.
// CHECK-LABEL: func.func @per_lane
// CHECK:         %[[IOTA:.*]] = arith.constant dense<[0, 256, 512, 768, 1024, 1280, 1536, 1792]> : vector<8xi32>
// CHECK-NEXT:    %[[OFF:.*]] = arith.addi %{{.*}}, %[[IOTA]] : vector<8xi32>
// CHECK:         hw.vlookup %t[%{{.*}}, %{{.*}}], %[[OFF]], %{{.*}} : memref<8x256xf32>
func.func @per_lane(%x: memref<8xf32>, %t: memref<8x256xf32>, %y: memref<8xf32>) {
  loop.for %c = 0 to 8 vectorized {
    %v = loop.load %x[%c] : memref<8xf32>
    %k = arith.fptosi %v : f32 to i32
    %j = arith.index_cast %k : i32 to index
    %w = loop.load %t[%c, %j] : memref<8x256xf32>
    loop.store %w, %y[%c] : memref<8xf32>
  }
  func.return
}

// -----

// Per-lane tables with the lanes last (`[n, lanes]`, layout-rewrite's per-channel tables): the
// entries are 8 elements apart, so the offsets are the lanes' indices times 8, plus the lane.
// CHECK-LABEL: func.func @lanes_last
// CHECK:         %[[EIGHT:.*]] = arith.constant dense<8> : vector<8xi32>
// CHECK-NEXT:    %[[SCALED:.*]] = arith.muli %{{.*}}, %[[EIGHT]] : vector<8xi32>
// CHECK-NEXT:    %[[IOTA:.*]] = arith.constant dense<[0, 1, 2, 3, 4, 5, 6, 7]> : vector<8xi32>
// CHECK-NEXT:    %[[OFF:.*]] = arith.addi %[[SCALED]], %[[IOTA]] : vector<8xi32>
// CHECK:         hw.vlookup %t[%{{.*}}, %{{.*}}], %[[OFF]], %{{.*}} : memref<256x8xf32>
func.func @lanes_last(%x: memref<8xf32>, %t: memref<256x8xf32>, %y: memref<8xf32>) {
  loop.for %c = 0 to 8 vectorized {
    %v = loop.load %x[%c] : memref<8xf32>
    %k = arith.fptosi %v : f32 to i32
    %j = arith.index_cast %k : i32 to index
    %w = loop.load %t[%j, %c] : memref<256x8xf32>
    loop.store %w, %y[%c] : memref<8xf32>
  }
  func.return
}

// -----

// An index made from lanes that anything but a table read uses keeps the loop scalar.
// CHECK-LABEL: func.func @other_use
// CHECK:         hw.not_vectorized = "'loop.store' uses an index made from lanes
func.func @other_use(%x: memref<64xf32>, %y: memref<256xf32>) {
  loop.for %i = 0 to 64 vectorized {
    %v = loop.load %x[%i] : memref<64xf32>
    %k = arith.fptosi %v : f32 to i32
    %j = arith.index_cast %k : i32 to index
    loop.store %v, %y[%j] : memref<256xf32>
  }
  func.return
}
