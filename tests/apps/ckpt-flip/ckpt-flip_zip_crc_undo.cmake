# ckpt-flip revert restores a zip checkpoint (.npz, torch.save) byte for byte after a kill left its
# CRC-32s of neither state (included by tests/apps/ckpt-flip/CMakeLists.txt).
resil_add_test(NAME ckpt-flip_zip_crc_undo
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_zip_crc_undo.sh $<TARGET_FILE:ckpt-flip>
  LABELS integration TIMEOUT 120)
