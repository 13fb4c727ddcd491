# examples/pytorch as its README says: the README's sh blocks run as written in a fresh copy of the
# checkout (train.py's golden .pt, the command-mode resume campaign, the trial function, the
# worker-mode eval campaign, their reports); records, logged flips, reverts and the untouched golden
# file are checked, and a campaign killed with -9 and resumed gives the same records. Skipped (77)
# only when /usr/bin/python3 cannot import torch.
resil_add_test(NAME pytorch_campaign
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/pytorch_campaign.sh $<TARGET_FILE:ckpt-flip>
  LABELS integration TIMEOUT 900 PROPERTIES SKIP_RETURN_CODE 77)
