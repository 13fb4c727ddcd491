# Every safetensors dtype tag (flippable or opaque), FP8 fields and --finite per format, numpy as the reader.
resil_add_test(NAME ckpt-flip_dtypes
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_dtypes.sh $<TARGET_FILE:ckpt-flip>
  LABELS integration TIMEOUT 120)
