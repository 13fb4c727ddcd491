# Files PyTorch 2.11 wrote (tests/inject/formats/torch_files/torch-*/: torch.save protocols 2 and 5 with
# every dtype, safetensors with every dtype, DCP in both serialization modes): every tensor read with
# the manifest's dtype, shape and bytes (inspect, and the words of inject --ber 1), flips exact by a
# reader written here from the zip, pickle and safetensors layouts, revert byte-identical.
resil_add_test(NAME ckpt-flip_torch_files
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_torch_files.sh $<TARGET_FILE:ckpt-flip>
  LABELS integration TIMEOUT 120)
