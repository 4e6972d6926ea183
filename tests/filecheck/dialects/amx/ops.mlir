// RUN: ziggurat-opt %s | ziggurat-opt | filecheck %s
// RUN: ZIGGURAT_ROUNDTRIP | filecheck %s

// CHECK-LABEL: func.func @gemm_tile
func.func @gemm_tile(%a: memref<16x32xbf16>, %b: memref<16x32xbf16>, %c: memref<16x16xf32>, %z: index) {
  // CHECK-NEXT: amx.tile_config array<i64: 16, 64, 16, 64, 16, 64, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>
  // CHECK-NEXT: amx.tile_zero 0
  // CHECK-NEXT: amx.tile_load 1, %a[%z, %z] : memref<16x32xbf16>
  // CHECK-NEXT: amx.tile_load 2, %b[%z, %z] : memref<16x32xbf16>
  // CHECK-NEXT: amx.tdp "bf16ps" 0, 1, 2
  // CHECK-NEXT: amx.tile_store 0, %c[%z, %z] : memref<16x16xf32>
  // CHECK-NEXT: amx.tile_release
  amx.tile_config array<i64: 16, 64, 16, 64, 16, 64, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>
  amx.tile_zero 0
  amx.tile_load 1, %a[%z, %z] : memref<16x32xbf16>
  amx.tile_load 2, %b[%z, %z] : memref<16x32xbf16>
  amx.tdp "bf16ps" 0, 1, 2
  amx.tile_store 0, %c[%z, %z] : memref<16x16xf32>
  amx.tile_release
  func.return
}
