# examples/pytorch/campaign.json end to end: train.py trains a tiny golden .pt,
# `ckpt-flip campaign` runs the example's 6 trials on it and `ckpt-flip report` summarizes them;
# records, logged flips, reverts and the untouched golden file are checked, and a campaign killed
# with -9 and resumed gives the same records. Skipped (77) only when /usr/bin/python3 cannot import torch.
resil_add_test(NAME pytorch_campaign
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/pytorch_campaign.sh $<TARGET_FILE:ckpt-flip>
  LABELS integration TIMEOUT 300 PROPERTIES SKIP_RETURN_CODE 77)
