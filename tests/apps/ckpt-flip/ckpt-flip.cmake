# ckpt-flip black-box tests (included by tests/apps/ckpt-flip/CMakeLists.txt).
resil_add_test(NAME ckpt-flip_cli
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_cli.sh $<TARGET_FILE:ckpt-flip>
  LABELS integration TIMEOUT 600)
