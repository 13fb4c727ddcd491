# kill -9 during ckpt-flip inject --in-place on unfiltered and gzip chunked data, then revert
# (included by tests/apps/CMakeLists.txt; the contiguous sweep is in ckpt-flip_cli.sh).
resil_add_test(NAME ckpt-flip_kill9_chunked
  COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_kill9.py $<TARGET_FILE:ckpt-flip>
  LABELS integration TIMEOUT 300)
