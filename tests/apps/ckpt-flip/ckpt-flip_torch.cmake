# torch.save checkpoints (a CNN with BatchNorm and its Adam state, tied weights, f16/bf16 tensors)
# through every ckpt-flip command: exact flip counts over storages, counters untouched, zip CRCs
# kept valid (or left stale with --keep-crc), byte-exact revert.
resil_add_test(NAME ckpt-flip_torch
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_torch.sh $<TARGET_FILE:ckpt-flip>
  LABELS integration TIMEOUT 180)
