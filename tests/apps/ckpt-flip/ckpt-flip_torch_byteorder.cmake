# A torch.save archive from a big-endian machine (<archive>/byteorder "big"): values, a sign flip and revert.
resil_add_test(NAME ckpt-flip_torch_byteorder
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_torch_byteorder.sh $<TARGET_FILE:ckpt-flip>
  LABELS integration TIMEOUT 120)
