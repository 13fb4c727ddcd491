# ckpt-flip diff and scan hold a bounded slab whatever the shape (included by tests/apps/ckpt-flip/CMakeLists.txt).
resil_add_test(NAME ckpt-flip_diff_memory
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_diff_memory.sh $<TARGET_FILE:ckpt-flip>
  LABELS integration TIMEOUT 180)
