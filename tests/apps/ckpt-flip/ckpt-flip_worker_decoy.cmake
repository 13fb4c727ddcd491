# A campaign worker that names a process it did not start (included by tests/apps/ckpt-flip/CMakeLists.txt).
resil_add_test(NAME ckpt-flip_worker_decoy
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_worker_decoy.sh $<TARGET_FILE:ckpt-flip>
  LABELS integration TIMEOUT 120)
