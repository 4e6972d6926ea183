// RUN: ziggurat-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @rows() {
  amx.tile_config array<i64: 32, 64, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>
  func.return
}
// CHECK: 'amx.tile_config' op tile 0 has 32 rows; AMX tiles hold 1 to 16

// -----

func.func @colsb() {
  amx.tile_config array<i64: 16, 128, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>
  func.return
}
// CHECK: 'amx.tile_config' op tile 0 has 128 bytes per row; AMX rows hold 4 to 64 bytes, a multiple of 4

// -----

func.func @tile_id() {
  amx.tile_zero 8
  func.return
}
// CHECK: 'amx.tile_zero' op tile 8 is not a tile register (0..7)

// -----

func.func @same_tiles() {
  amx.tdp "bf16ps" 0, 0, 2
  func.return
}
// CHECK: 'amx.tdp' op needs three different tiles, got [0, 0, 2]

// -----

func.func @kind() {
  amx.tdp "f32" 0, 1, 2
  func.return
}
// CHECK: 'amx.tdp' op kind 'f32' is unknown; known: bf16ps, bssd, bsud, busd, buud
