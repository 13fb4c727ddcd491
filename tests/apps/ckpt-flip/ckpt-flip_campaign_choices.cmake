# Enumerated campaign configuration keys and command-line choices: an unknown value is exit 2 with
# one line naming the key, the value and the accepted values.
resil_add_test(NAME ckpt-flip_campaign_choices
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_campaign_choices.sh $<TARGET_FILE:ckpt-flip>
  LABELS integration TIMEOUT 120)
