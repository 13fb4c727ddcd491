# torch.distributed.checkpoint directories (byte and safetensors modes, sharded and replicated tensors
# over 4 ranks, written by make_dcp_fixtures.py): global tensors, exact flips by torch.load of every
# chunk or a safetensors-spec reader of every blob (headers unchanged), chunk,
# file and loading ranks in the log, byte-exact revert, replay, diff, scan, a campaign, hostile
# directories refused.
resil_add_test(NAME ckpt-flip_dcp
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_dcp.sh $<TARGET_FILE:ckpt-flip>
  LABELS integration TIMEOUT 180)
