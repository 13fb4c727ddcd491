# ckpt-flip diff --json on datasets it cannot compare element by element (included by tests/apps/ckpt-flip/CMakeLists.txt).
resil_add_test(NAME ckpt-flip_diff_json
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_diff_json.sh $<TARGET_FILE:ckpt-flip>
  LABELS integration TIMEOUT 60)
