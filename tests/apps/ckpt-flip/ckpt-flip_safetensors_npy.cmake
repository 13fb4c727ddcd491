# safetensors (written by the test's own tiny writer), .npy and .npz (np.save, np.savez,
# np.savez_compressed) through ckpt-flip: exact flip counts, headers unchanged, byte-exact revert,
# deflated .npz members rewritten through a staged copy.
resil_add_test(NAME ckpt-flip_safetensors_npy
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_safetensors_npy.sh $<TARGET_FILE:ckpt-flip>
  LABELS integration TIMEOUT 180)
