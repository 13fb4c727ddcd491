# ckpt-flip path arguments against each other and against non-regular, unreadable, locked and
# missing files (flip logs, pattern tables); external raw data files; cut flip logs; a failed staged
# in-place edit (no log left); out-of-range seeds, empty --bits.
resil_add_test(NAME ckpt-flip_hostile_paths
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_hostile_paths.sh $<TARGET_FILE:ckpt-flip>
  LABELS integration TIMEOUT 300)
