# kill -9 during ckpt-flip inject --in-place on unfiltered chunked (superblock 0 and libver=latest
# superblock 3, contiguous and edge chunks included), on never-written chunks and on gzip chunks,
# then revert; stale staging copies reaped (included by tests/apps/ckpt-flip/CMakeLists.txt; the contiguous
# sweep is in ckpt-flip_cli.sh).
resil_add_test(NAME ckpt-flip_kill9_chunked
  COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_kill9.py $<TARGET_FILE:ckpt-flip>
  LABELS integration TIMEOUT 300)
