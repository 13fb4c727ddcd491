# ckpt-flip diff: opaque dtypes by stored bytes, type mismatches, torch views at their offsets and
# strides, the relative error of a zero reference (included by tests/apps/ckpt-flip/CMakeLists.txt).
resil_add_test(NAME ckpt-flip_diff_values
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_diff_values.sh $<TARGET_FILE:ckpt-flip>
  LABELS integration TIMEOUT 120)
