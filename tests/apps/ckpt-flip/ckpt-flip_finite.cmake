# inject --finite: no NaN/Inf after 1000 flips where plain inject leaves some, the log header's
# rejected count, same seed same sites, exit 5 when nothing stays finite.
resil_add_test(NAME ckpt-flip_finite
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_finite.sh $<TARGET_FILE:ckpt-flip>
  LABELS integration TIMEOUT 120)
