# A np.savez_compressed archive of 4 deflated members of 32 MiB: scan, diff and inject -o hold at
# most one unedited member inflated at a time (peak RSS measured), and a rewrite keeps every edited one.
resil_add_test(NAME ckpt-flip_npz_memory
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_npz_memory.sh $<TARGET_FILE:ckpt-flip>
  LABELS integration TIMEOUT 300)
