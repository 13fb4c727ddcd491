# Owner, group and mode of a checkpoint kept by staged in-place edits and revert; copies and flip
# logs no more readable than their input; a staged edit that could not keep the owner refused.
resil_add_test(NAME ckpt-flip_private_files
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_private_files.sh $<TARGET_FILE:ckpt-flip>
  LABELS integration TIMEOUT 120)
