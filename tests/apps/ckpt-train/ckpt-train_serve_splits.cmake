# ckpt-train serve decodes only the dataset splits its trials read: eval-only campaigns never decode
# the training split; resume campaigns keep both.
if(TARGET ckpt-train AND TARGET ckpt-flip)
  resil_add_test(NAME ckpt-train_serve_splits
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-train_serve_splits.sh $<TARGET_FILE:ckpt-flip> $<TARGET_FILE:ckpt-train>
    LABELS integration TIMEOUT 300)
endif()
