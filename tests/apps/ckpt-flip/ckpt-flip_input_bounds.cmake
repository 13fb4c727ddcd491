# Inputs of a few KB that declared or built gigabytes (an .npz member's size, a safetensors shape,
# torch.save names from a memoised key) refused with one line, within 2 GiB and 60 s.
resil_add_test(NAME ckpt-flip_input_bounds
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_input_bounds.sh $<TARGET_FILE:ckpt-flip>
  LABELS integration TIMEOUT 300)
