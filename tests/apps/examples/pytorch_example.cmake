# examples/pytorch/train.py (a PyTorch user's trial command) with Debian's python3-torch:
# determinism, bit-exact resume, and the exit codes and summaries of NaN, truncated and foreign
# checkpoints. Skipped (77) only when /usr/bin/python3 cannot import torch.
resil_add_test(NAME pytorch_example
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/pytorch_example.sh
  LABELS integration TIMEOUT 120 PROPERTIES SKIP_RETURN_CODE 77)
