# Every pickle torch.save writes (protocols 2 to 5, zip and legacy) with objects outside the tensor
# subset beside the tensors, through ckpt-flip's commands, torch.load as the independent reader.
resil_add_test(NAME ckpt-flip_torch_pickles
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_torch_pickles.sh $<TARGET_FILE:ckpt-flip>
  LABELS integration TIMEOUT 240)
