# ckpt-flip report on hand-edited campaign files and a missing --plot-script (included by
# tests/apps/ckpt-flip/CMakeLists.txt).
resil_add_test(NAME ckpt-flip_report_hostile
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_report_hostile.sh $<TARGET_FILE:ckpt-flip>
  LABELS integration TIMEOUT 120)
