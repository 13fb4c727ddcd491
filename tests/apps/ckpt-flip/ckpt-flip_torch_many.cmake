# A torch.save file of 40,000 one-element tensors: opening it is linear in the storages (each zip
# member looked up by name in an index, not by a scan of the directory).
resil_add_test(NAME ckpt-flip_torch_many
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_torch_many.sh $<TARGET_FILE:ckpt-flip>
  LABELS integration TIMEOUT 300)
