# Crafted variants of the files PyTorch 2.11 wrote (a zip directory that lies, pickled sizes, strides
# and offsets that overflow, fp8/fp4 shapes their bytes do not hold, truncations, DCP metadata naming
# files outside its directory or itself, short data files): the documented exit code, one error line
# naming the file (a zip refusal's offset is the record at fault), inputs unchanged.
resil_add_test(NAME ckpt-flip_torch_files_hostile
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_torch_files_hostile.sh $<TARGET_FILE:ckpt-flip>
  LABELS integration TIMEOUT 180)
