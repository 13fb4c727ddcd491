# One in-place run per file in every format: a second inject --in-place, revert or replay while
# one runs exits 3 naming the holder; the first run's flips all land and revert exactly.
resil_add_test(NAME ckpt-flip_in_place_lock
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_in_place_lock.sh $<TARGET_FILE:ckpt-flip>
  LABELS integration TIMEOUT 300)
