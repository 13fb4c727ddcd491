# Tensor names with terminal escapes, newlines, NUL and C1 controls printed escaped; format
# detection not decided by a tensor's bytes (HDF5's signature inside a torch.save tensor).
resil_add_test(NAME ckpt-flip_hostile_content
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_hostile_content.sh $<TARGET_FILE:ckpt-flip>
  LABELS integration TIMEOUT 120)
