# Hostile torch.save, safetensors and NumPy files (and a zero-length file, a directory, a FIFO)
# through every subcommand: documented exit code, one error line naming the file, input untouched,
# nothing left behind, no pickle ever executed.
resil_add_test(NAME ckpt-flip_formats_hostile
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_formats_hostile.sh $<TARGET_FILE:ckpt-flip>
  LABELS integration TIMEOUT 300)
