# The storage layer's front door: formats detected from the content (not the name), --format on
# every checkpoint-reading subcommand, formats without an adapter refused with one line.
resil_add_test(NAME ckpt-flip_formats
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_formats.sh $<TARGET_FILE:ckpt-flip>
  LABELS integration TIMEOUT 120)
